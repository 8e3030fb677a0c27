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
  const tools = { tshark: have('tshark'), tcpdump: have('tcpdump') };
  console.log(`smcdump replay benchmark: median of ${runs} runs each, output to /dev/null, one-line output`);
  for (const file of [join(pcaps, 'd-bulk-2MiB.pcap'), synth]) {
    const frames = await countFrames(file);
    const mb = statSync(file).size / 1e6;
    const s = timeCmd(process.execPath, [smcdump, '-r', file]);
    console.log(`\n${file.replace(root + '/', '')}: ${frames} frames, ${mb.toFixed(1)} MB`);
    console.log(`  smcdump -r        ${s.toFixed(3)} s  ${fmt(frames / s)} frames/s`);
    if (tools.tshark) {
      const ts = timeCmd('tshark', ['-r', file, ...TSHARK_SMC]);
      console.log(`  tshark -r (SMC)   ${ts.toFixed(3)} s  ${fmt(frames / ts)} frames/s   smcdump is ${(ts / s).toFixed(1)}x faster`);
    } else console.log('  tshark            not installed (apt-get install tshark)');
    if (tools.tcpdump) {
      const td = timeCmd('tcpdump', ['-n', '-r', file]);
      console.log(`  tcpdump -n -r     ${td.toFixed(3)} s  ${fmt(frames / td)} frames/s   smcdump/tcpdump time ratio ${(s / td).toFixed(2)}`);
    } else console.log('  tcpdump           not installed (apt-get install tcpdump)');
    const ip = await inProcess(file);
    console.log(`  in-process: reader ${fmt(ip.readerFps)} frames/s, decode (all layers, no output) ${fmt(ip.decodeFps)} frames/s, decode + tracking ${fmt(ip.trackFps)} frames/s (tracking costs ${ip.trackCost.toFixed(2)}x decode)`);
  }
}

main().catch((e: unknown) => { process.stderr.write(`bench: ${(e as Error).message}\n`); process.exit(1); });
