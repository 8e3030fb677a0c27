// `npm run bench`: replay throughput of smcdump against tshark and tcpdump on the same captures,
// in one run, reported as ratios (absolute times on shared machines are noisy; ratios are not).
//
// Inputs: the real 2 MiB bulk capture, and a large synthetic capture built by repeating the
// real frames of every bundled kernel capture (timestamps shifted so time keeps moving).

import { spawnSync } from 'node:child_process';
import { mkdirSync, openSync, closeSync, statSync, existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openCapture } from '../capture/reader.js';
import { cloneFrame, type CapturedFrame } from '../capture/types.js';
import { PcapWriter } from '../capture/writer.js';
import { FrameDecoder } from '../dissectors/frame.js';
import { Tracker } from '../dissectors/tracker/tracker.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const pcaps = join(root, 'pcaps');
const outDir = join(root, 'bench', 'out');
const smcdump = join(root, 'dist', 'cli', 'bin', 'smcdump.js');
const runs = Number(process.env.BENCH_RUNS ?? 5);
const syntheticFrames = Number(process.env.BENCH_FRAMES ?? 300_000);

const TSHARK_SMC = ['-o', 'tcp.desegment_tcp_streams:TRUE', '--enable-heuristic', 'smc_tcp', '--enable-heuristic', 'smcr_infiniband', '-d', 'udp.port==4791,infiniband'];

function have(cmd: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0;
}

/** Median wall time (s) of `cmd args` with stdout and stderr to /dev/null. */
function timeCmd(cmd: string, args: string[]): number {
  const times: number[] = [];
  const devnull = openSync('/dev/null', 'w');
  try {
    spawnSync(cmd, args, { stdio: ['ignore', devnull, devnull] }); // warm-up (page cache, JIT caches)
    for (let i = 0; i < runs; i++) {
      const t = process.hrtime.bigint();
      const r = spawnSync(cmd, args, { stdio: ['ignore', devnull, devnull] });
      const dt = Number(process.hrtime.bigint() - t) / 1e9;
      if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} exited ${r.status}`);
      times.push(dt);
    }
  } finally { closeSync(devnull); }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)]!;
}

async function countFrames(path: string): Promise<number> {
  const r = await openCapture(path);
  let n = 0;
  while (r.next()) n++;
  r.close();
  return n;
}

async function buildSynthetic(path: string, target: number): Promise<number> {
  const sources = ['a-first-contact', 'b-second-contact', 'c2-fallback-server-decline', 'd-bulk-2MiB', 'e-testlink-teardown'].map((n) => join(pcaps, `${n}.pcap`));
  const w = new PcapWriter(path, { nanosecond: true });
  let n = 0;
  let shift = 0n;
  while (n < target) {
    let last = 0n;
    for (const src of sources) {
      const r = await openCapture(src);
      let first: bigint | undefined;
      for (let f = r.next(); f && n < target; f = r.next()) {
        first ??= f.tsNs;
        const ts = f.tsNs - first + shift;
        w.write({ ...f, tsNs: ts });
        last = ts;
        n++;
      }
      r.close();
      shift = last + 1_000_000n;
    }
  }
  w.close();
  return n;
}

/** A first-contact capture repeated with each copy's IPv4 addresses rewritten (headers and the
 *  GIDs inside CLC/LLC that carry them), so every copy is a new link group with its own
 *  connections and QPs. ICRCs go stale: replay it with --no-icrc. */
async function buildMany(path: string, copies: number): Promise<number> {
  const src = await openCapture(join(pcaps, 'b-second-contact.pcap'));
  const frames: CapturedFrame[] = [];
  for (let f = src.next(); f; f = src.next()) frames.push(cloneFrame(f));
  src.close();
  const ips: number[][] = [];
  for (const f of frames) {
    const d = f.data;
    if (d.length < 34 || d[12] !== 0x08 || d[13] !== 0x00) continue;
    for (const o of [26, 30]) { const a = [...d.subarray(o, o + 4)]; if (!ips.some((x) => x.join() === a.join())) ips.push(a); }
  }
  const span = frames[frames.length - 1]!.tsNs - frames[0]!.tsNs + 1_000_000n;
  const w = new PcapWriter(path, { nanosecond: true });
  let n = 0;
  for (let r = 0; r < copies; r++) {
    for (const f of frames) {
      const d = Buffer.from(f.data);
      ips.forEach((a, k) => {
        const from = Buffer.from(a), to = Buffer.from([10, (r >> 8) & 0xff, r & 0xff, a[3]! + k]);
        for (let i = d.indexOf(from); i >= 0; i = d.indexOf(from, i + 4)) to.copy(d, i);
      });
      if (d.length >= 34 && d[12] === 0x08 && d[13] === 0x00) { d.writeUInt16BE(0, 24); d.writeUInt16BE(ipv4Checksum(d.subarray(14, 14 + (d[14]! & 0x0f) * 4)), 24); }
      w.write({ ...f, data: d, tsNs: f.tsNs + span * BigInt(r) });
      n++;
    }
  }
  w.close();
  return n;
}

function ipv4Checksum(h: Uint8Array): number {
  let s = 0;
  for (let i = 0; i < h.length; i += 2) s += (h[i]! << 8) | (h[i + 1] ?? 0);
  while (s > 0xffff) s = (s & 0xffff) + (s >>> 16);
  return ~s & 0xffff;
}

/** Wall time (median) and peak RSS (max) of a command, through GNU time when installed. */
function measure(cmd: string, args: string[]): { s: number; rssMb?: number } {
  const s = timeCmd(cmd, args);
  if (!existsSync('/usr/bin/time')) return { s };
  const r = spawnSync('/usr/bin/time', ['-f', '%M', cmd, ...args], { stdio: ['ignore', 'ignore', 'pipe'], encoding: 'utf8', maxBuffer: 1 << 30 });
  const kb = Number(/(\d+)\s*$/.exec(r.stderr ?? '')?.[1]);
  return Number.isFinite(kb) ? { s, rssMb: kb / 1024 } : { s };
}

async function inProcess(path: string): Promise<{ readerFps: number; decodeFps: number; trackFps: number; trackCost: number }> {
  const frames = await countFrames(path);
  let t = process.hrtime.bigint();
  for (let i = 0; i < 3; i++) { const r = await openCapture(path); while (r.next()); r.close(); }
  const readerS = Number(process.hrtime.bigint() - t) / 1e9 / 3;
  t = process.hrtime.bigint();
  for (let i = 0; i < 3; i++) {
    const r = await openCapture(path);
    const d = new FrameDecoder();
    for (let f = r.next(); f; f = r.next()) d.decode(f);
    r.close();
  }
  const decodeS = Number(process.hrtime.bigint() - t) / 1e9 / 3;
  t = process.hrtime.bigint();
  for (let i = 0; i < 3; i++) {
    const r = await openCapture(path);
    const d = new FrameDecoder();
    const tr = new Tracker();
    for (let f = r.next(); f; f = r.next()) tr.feed(d.decode(f));
    tr.finish();
    r.close();
  }
  const trackS = Number(process.hrtime.bigint() - t) / 1e9 / 3;
  return { readerFps: frames / readerS, decodeFps: frames / decodeS, trackFps: frames / trackS, trackCost: trackS / decodeS };
}

function fmt(n: number): string { return n >= 1e6 ? `${(n / 1e6).toFixed(2)}M` : n >= 1e3 ? `${(n / 1e3).toFixed(1)}k` : n.toFixed(0); }

async function main(): Promise<void> {
  mkdirSync(outDir, { recursive: true });
  const synth = join(outDir, 'synthetic.pcap');
  if (!existsSync(synth) || statSync(synth).mtimeMs < statSync(join(pcaps, 'd-bulk-2MiB.pcap')).mtimeMs || await countFrames(synth) !== syntheticFrames) {
    process.stderr.write(`building ${synth} (${syntheticFrames} frames from the real captures)…\n`);
    await buildSynthetic(synth, syntheticFrames);
  }
  const many = join(outDir, 'many.pcap');
  const manyCopies = Number(process.env.BENCH_MANY ?? 2000);
  if (!existsSync(many) || await countFrames(many) !== manyCopies * 171) {
    process.stderr.write(`building ${many} (b-second-contact × ${manyCopies}, new hosts per copy)…\n`);
    await buildMany(many, manyCopies);
  }
  const tools = { tshark: have('tshark'), tcpdump: have('tcpdump') };
  console.log(`smcdump replay benchmark: median of ${runs} runs each (peak RSS from GNU time), output to /dev/null`);
  for (const [file, extra] of [[join(pcaps, 'd-bulk-2MiB.pcap'), []], [synth, []], [many, ['--no-icrc']]] as [string, string[]][]) {
    const frames = await countFrames(file);
    const mb = statSync(file).size / 1e6;
    console.log(`\n${file.replace(root + '/', '')}: ${frames} frames, ${mb.toFixed(1)} MB${extra.length ? ` (smcdump ${extra.join(' ')}: ICRCs are stale in this rewritten copy)` : ''}`);
    const row = (name: string, m: { s: number; rssMb?: number }, tail = ''): void => {
      console.log(`  ${name.padEnd(22)} ${m.s.toFixed(3).padStart(8)} s  ${fmt(frames / m.s).padStart(7)} frames/s  ${m.rssMb !== undefined ? `${m.rssMb.toFixed(0).padStart(5)} MB RSS` : ''}${tail}`);
    };
    const ts = tools.tshark ? measure('tshark', ['-r', file, ...TSHARK_SMC]) : undefined;
    const vs = (m: { s: number }): string => (ts ? `   ${(ts.s / m.s).toFixed(2)}x tshark` : '');
    const one = measure(process.execPath, [smcdump, '-r', file, ...extra]);
    row('smcdump -r', one, vs(one));
    const q = measure(process.execPath, [smcdump, '-r', file, '-q', ...extra]);
    row('smcdump -r -q', q, vs(q));
    const sum = measure(process.execPath, [smcdump, '-r', file, '--summary', ...extra]);
    row('smcdump --summary', sum, vs(sum));
    if (frames <= 400_000) { const v = measure(process.execPath, [smcdump, '-r', file, '-V', ...extra]); row('smcdump -V', v, `${vs(v)}   RSS/capture ${v.rssMb !== undefined ? (v.rssMb / mb).toFixed(1) : '?'}x`); }
    if (ts) row('tshark -r (SMC)', ts);
    else console.log('  tshark                 not installed (apt-get install tshark)');
    if (tools.tcpdump) { const td = measure('tcpdump', ['-n', '-r', file]); row('tcpdump -n -r', td, `   smcdump/tcpdump time ${(one.s / td.s).toFixed(2)}`); }
    else console.log('  tcpdump                not installed (apt-get install tcpdump)');
    const ip = await inProcess(file);
    console.log(`  in-process: reader ${fmt(ip.readerFps)} frames/s, decode (all layers, no output) ${fmt(ip.decodeFps)} frames/s, decode + tracking ${fmt(ip.trackFps)} frames/s (tracking costs ${ip.trackCost.toFixed(2)}x decode)`);
  }
}

main().catch((e: unknown) => { process.stderr.write(`bench: ${(e as Error).message}\n`); process.exit(1); });
