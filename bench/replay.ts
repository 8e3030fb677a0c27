// `npm run bench`: replay throughput and peak memory of smcdump against tshark and tcpdump on
// the same captures, in one run, reported as ratios (absolute times on shared machines are
// noisy; ratios of CPU time taken in interleaved runs are not).
//
// Inputs: the real 2 MiB bulk capture, a large synthetic capture built by repeating the real
// frames of every bundled kernel capture (timestamps shifted so time keeps moving), and a
// many-connections capture (b-second-contact with new hosts per copy: every copy is a new link
// group, four connections, new QPs), at N and 2N copies to show --summary grows linearly.
//
// Every figure comes from GNU time around each run: CPU seconds (user + system; frames/s are
// frames per CPU second) and peak RSS. Commands run in turn (A B C … A B C …) so a drift in the
// machine's speed hits all of them alike; the median run is quoted.

import { spawnSync } from 'node:child_process';
import { mkdirSync, statSync, existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openCapture } from '../capture/reader.js';
import { cloneFrame, type CapturedFrame } from '../capture/types.js';
import { PcapWriter } from '../capture/writer.js';
import { FrameDecoder } from '../dissectors/frame.js';
import { Tracker } from '../dissectors/tracker/tracker.js';
import { ETHERNET_FIELDS, ETHERNET_LEN, ETHERTYPE, IPV4_FIELDS, IPV4_MIN_LEN } from '../dissectors/wire/views/net.js';
import { u16 } from '../dissectors/wire/common.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const pcaps = join(root, 'pcaps');
const outDir = join(root, 'bench', 'out');
const smcdump = join(root, 'dist', 'cli', 'bin', 'smcdump.js');
const floor = join(root, 'dist', 'bench', 'floor.js');
const runs = Number(process.env.BENCH_RUNS ?? 5);
const syntheticFrames = Number(process.env.BENCH_FRAMES ?? 300_000);

const TSHARK_SMC = ['-o', 'tcp.desegment_tcp_streams:TRUE', '--enable-heuristic', 'smc_tcp', '--enable-heuristic', 'smcr_infiniband', '-d', 'udp.port==4791,infiniband'];

function have(cmd: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0;
}

interface Measured { cpu: number; rssMb: number }

/** One run of `cmd args` under GNU time, output to /dev/null: CPU seconds and peak RSS. */
function runOnce(cmd: string, args: string[]): Measured {
  const r = spawnSync('/usr/bin/time', ['-f', '@@ %U %S %M', cmd, ...args], { stdio: ['ignore', 'ignore', 'pipe'], encoding: 'utf8', maxBuffer: 1 << 26 });
  const m = /@@ ([\d.]+) ([\d.]+) (\d+)\s*$/.exec(r.stderr ?? '');
  if (r.status !== 0 || !m) throw new Error(`${cmd} ${args.join(' ')} exited ${r.status}: ${(r.stderr ?? '').slice(-300)}`);
  return { cpu: Number(m[1]) + Number(m[2]), rssMb: Number(m[3]) / 1024 };
}

/** Each command `runs` times, interleaved, after one warm-up each: median CPU, max peak RSS. */
function measureAll(cmds: Record<string, [string, string[]]>): Record<string, Measured> {
  const names = Object.keys(cmds);
  const got: Record<string, Measured[]> = {};
  for (const n of names) { runOnce(...cmds[n]!); got[n] = []; }
  for (let i = 0; i < runs; i++) for (const n of names) got[n]!.push(runOnce(...cmds[n]!));
  const out: Record<string, Measured> = {};
  for (const n of names) {
    const cpu = got[n]!.map((x) => x.cpu).sort((a, b) => a - b);
    out[n] = { cpu: cpu[Math.floor(cpu.length / 2)]!, rssMb: Math.max(...got[n]!.map((x) => x.rssMb)) };
  }
  return out;
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
/** The IPv4 header's offset in an untagged Ethernet frame. */
const IP = ETHERNET_LEN;
function isIpv4(d: Uint8Array): boolean {
  return d.length >= IP + IPV4_MIN_LEN && u16(d, ETHERNET_FIELDS.ethertype.at) === ETHERTYPE.IPV4;
}

async function buildMany(path: string, copies: number): Promise<number> {
  const src = await openCapture(join(pcaps, 'b-second-contact.pcap'));
  const frames: CapturedFrame[] = [];
  for (let f = src.next(); f; f = src.next()) frames.push(cloneFrame(f));
  src.close();
  const ips: number[][] = [];
  for (const f of frames) {
    const d = f.data;
    if (!isIpv4(d)) continue;
    for (const o of [IP + IPV4_FIELDS.src.at, IP + IPV4_FIELDS.dst.at]) { const a = [...d.subarray(o, o + 4)]; if (!ips.some((x) => x.join() === a.join())) ips.push(a); }
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
      if (isIpv4(d)) {
        const sum = IP + IPV4_FIELDS.checksum.at;
        d.writeUInt16BE(0, sum);
        d.writeUInt16BE(ipv4Checksum(d.subarray(IP, IP + ((d[IP + IPV4_FIELDS.ihl.at]! >> IPV4_FIELDS.ihl.shift) & IPV4_FIELDS.ihl.mask) * 4)), sum);
      }
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
  if (!existsSync('/usr/bin/time')) throw new Error('GNU time (/usr/bin/time) is needed: apt-get install time');
  mkdirSync(outDir, { recursive: true });
  const synth = join(outDir, 'synthetic.pcap');
  if (!existsSync(synth) || statSync(synth).mtimeMs < statSync(join(pcaps, 'd-bulk-2MiB.pcap')).mtimeMs || await countFrames(synth) !== syntheticFrames) {
    process.stderr.write(`building ${synth} (${syntheticFrames} frames from the real captures)…\n`);
    await buildSynthetic(synth, syntheticFrames);
  }
  const manyCopies = Number(process.env.BENCH_MANY ?? 2000);
  const manyFiles: [string, number][] = [[join(outDir, 'many.pcap'), manyCopies], [join(outDir, 'many2x.pcap'), 2 * manyCopies]];
  for (const [file, copies] of manyFiles) {
    if (!existsSync(file) || await countFrames(file) !== copies * 171) {
      process.stderr.write(`building ${file} (b-second-contact × ${copies}, new hosts per copy)…\n`);
      await buildMany(file, copies);
    }
  }
  const tools = { tshark: have('tshark'), tcpdump: have('tcpdump') };
  console.log(`smcdump replay benchmark: median CPU time (user + system) of ${runs} interleaved runs each, max peak RSS, output to /dev/null`);
  const summaryCpu: number[] = [];
  for (const [file, extra] of [[join(pcaps, 'd-bulk-2MiB.pcap'), []], [synth, []], [manyFiles[0]![0], ['--no-icrc']], [manyFiles[1]![0], ['--no-icrc']]] as [string, string[]][]) {
    const frames = await countFrames(file);
    const mb = statSync(file).size / 1e6;
    const isMany = extra.length > 0;
    // b-second-contact: 171 frames and 4 SMC-R connections per copy
    const conns = isMany ? (frames / 171) * 4 : 0;
    console.log(`\n${file.replace(root + '/', '')}: ${frames} frames, ${mb.toFixed(1)} MB${isMany ? `, ${conns} connections (smcdump ${extra.join(' ')}: ICRCs are stale in this rewritten copy)` : ''}`);
    // smcdump as a user runs it: the bin as a program (its sh line's Node flags, the bundle and its
    // code cache: docs/smcdump.md "Start-up, round six"), as tshark and tcpdump are run
    const cmds: Record<string, [string, string[]]> = {
      'smcdump -r': [smcdump, ['-r', file, ...extra]],
      'smcdump -r -q': [smcdump, ['-r', file, '-q', ...extra]],
      'smcdump --summary': [smcdump, ['-r', file, '--summary', ...extra]],
      'smcdump --summary --json': [smcdump, ['-r', file, '--summary', '--json', ...extra]],
    };
    if (frames <= 400_000) cmds['smcdump -V'] = [smcdump, ['-r', file, '-V', ...extra]];
    if (tools.tshark) cmds['tshark -r (SMC)'] = ['tshark', ['-r', file, ...TSHARK_SMC]];
    if (tools.tcpdump) cmds['tcpdump -n -r'] = ['tcpdump', ['-n', '-r', file]];
    // the floor under any replay in Node here (bench/floor.ts): start, read + walk, + the ICRC's CRC
    cmds['floor: node start'] = [process.execPath, ['-e', '0']];
    cmds['floor: read + walk'] = [process.execPath, [floor, file, 'walk']];
    if (!isMany) cmds['floor: + ICRC CRC'] = [process.execPath, [floor, file, 'crc']];
    const m = measureAll(cmds);
    const ts = m['tshark -r (SMC)'];
    // GNU time counts CPU in 10 ms steps: a figure that small is no rate
    const rate = (cpu: number): string => (cpu >= 0.05 ? fmt(frames / cpu) : '<10 ms');
    const ratio = (a: number, b: number): string => (a >= 0.05 && b >= 0.05 ? `${(a / b).toFixed(2)}x` : 'n/a (<50 ms)');
    for (const [name, v] of Object.entries(m)) {
      const vsT = ts && name !== 'tshark -r (SMC)' ? `   ${ratio(ts.cpu, v.cpu)} tshark` : '';
      const vsD = name === 'smcdump -r' && m['tcpdump -n -r'] ? `   ${ratio(m['tcpdump -n -r']!.cpu, v.cpu)} tcpdump` : '';
      const rssCap = name === 'smcdump -V' ? `   RSS/capture ${(v.rssMb / mb).toFixed(1)}x` : '';
      // Node's start reads no frame: no rate, no ratio
      if (name === 'floor: node start') { console.log(`  ${name.padEnd(26)} ${v.cpu.toFixed(3).padStart(8)} s CPU ${'-'.padStart(7)} frames/s ${v.rssMb.toFixed(0).padStart(6)} MB peak RSS`); continue; }
      console.log(`  ${name.padEnd(26)} ${v.cpu.toFixed(3).padStart(8)} s CPU ${rate(v.cpu).padStart(7)} frames/s ${v.rssMb.toFixed(0).padStart(6)} MB peak RSS${vsT}${vsD}${rssCap}`);
    }
    const fl = m[isMany ? 'floor: read + walk' : 'floor: + ICRC CRC']!;
    console.log(`  2 M frames/s here is ${(frames / 2e6).toFixed(3)} s CPU; the floor (${isMany ? 'read + walk' : 'read + walk + ICRC CRC'}, Node's start included) is ${fl.cpu.toFixed(3)} s, smcdump -q ${(m['smcdump -r -q']!.cpu / fl.cpu).toFixed(2)}x it`);
    if (!tools.tshark) console.log('  tshark                     not installed (apt-get install tshark)');
    if (!tools.tcpdump) console.log('  tcpdump                    not installed (apt-get install tcpdump)');
    if (isMany) summaryCpu.push(m['smcdump --summary']!.cpu);
    else {
      const ip = await inProcess(file);
      console.log(`  in-process: reader ${fmt(ip.readerFps)} frames/s, decode (all layers, no output) ${fmt(ip.decodeFps)} frames/s, decode + tracking ${fmt(ip.trackFps)} frames/s (tracking costs ${ip.trackCost.toFixed(2)}x decode)`);
    }
  }
  if (summaryCpu.length === 2) console.log(`\n--summary on twice the connections (${2 * manyCopies} vs ${manyCopies} copies): ${(summaryCpu[1]! / summaryCpu[0]!).toFixed(2)}x the CPU time (linear: 2x)`);
}

main().catch((e: unknown) => { process.stderr.write(`bench: ${(e as Error).message}\n`); process.exit(1); });
