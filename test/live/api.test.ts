// The live PacketSource API in-process (root): for-await over LiveCapture on lo with a
// filter on a port of our own, kernel timestamps inside the send window, original lengths,
// stats; and the addon inside a worker thread (it polls on the Env's own loop; the `cap`
// package aborts the process there).
import test from 'ava';
import dgram from 'node:dgram';
import { Worker } from 'node:worker_threads';
import { join } from 'node:path';
import { existsSync } from 'node:fs';
import { ROOT } from '../helpers.js';
import { LiveCapture, BpfMatcher, type LiveStats } from '../../capture/live.js';
import type { CapturedFrame } from '../../capture/types.js';
import { FrameDecoder } from '../../dissectors/frame.js';
import { liveSkipReason } from './netns.js';

const skip = liveSkipReason();
const liveTest = skip ? test.skip : test.serial;
const title = (s: string): string => (skip ? `${s} [skipped: ${skip}]` : s);

async function sendDatagrams(port: number, sizes: number[]): Promise<{ t0: bigint; t1: bigint }> {
  const s = dgram.createSocket('udp4');
  const t0 = BigInt(Date.now()) * 1_000_000n;
  for (const [i, n] of sizes.entries()) {
    const b = Buffer.alloc(n, i & 0xff);
    await new Promise<void>((res, rej) => s.send(b, port, '127.0.0.1', (e) => (e ? rej(e) : res())));
  }
  const t1 = BigInt(Date.now()) * 1_000_000n;
  s.close();
  return { t0, t1 };
}

liveTest(title('LiveCapture: for-await yields CapturedFrame with kernel ns timestamps, caplen/origlen, stats'), async (t) => {
  const port = 40000 + Math.floor(Math.random() * 20000);
  const cap = LiveCapture.open({ device: 'lo', filter: `udp dst port ${port}`, snaplen: 200 });
  t.is(cap.linktype, 1);
  t.is(cap.snaplen, 200);
  t.true(cap.nanosecond);
  const sizes = [10, 150, 1000, 5000, 60000];
  const sent = sendDatagrams(port, sizes);
  const frames: CapturedFrame[] = [];
  for await (const f of cap) {
    frames.push(f);
    if (frames.length === sizes.length) break;
  }
  const { t0, t1 } = await sent;
  const stats: LiveStats = await cap.stop();
  t.is(frames.length, sizes.length);
  t.deepEqual(frames.map((f) => f.origlen), sizes.map((n) => 14 + 20 + 8 + n));
  t.deepEqual(frames.map((f) => f.caplen), sizes.map((n) => Math.min(200, 14 + 20 + 8 + n)));
  t.true(frames.every((f) => f.data.length === f.caplen && f.ifName === 'lo'));
  t.true(frames.every((f, i) => f.data[f.caplen - 1] === (i & 0xff)), 'payload bytes');
  for (const f of frames) t.true(f.tsNs >= t0 - 5_000_000n && f.tsNs <= t1 + 5_000_000n, `timestamp ${f.tsNs} outside [${t0}, ${t1}]`);
  t.true(frames.every((f, i) => i === 0 || f.tsNs >= frames[i - 1]!.tsNs), 'in time order');
  t.is(stats.dropped, 0);
  t.true(stats.received >= sizes.length);
  // The cut frames decode as cut, not as broken.
  const d = new FrameDecoder().decode(frames[4]!);
  t.true(d.issues.some((i) => i.code === 'frame.snaplen'));
  t.false(d.issues.some((i) => i.severity === 'error'));
});

liveTest(title('LiveCapture: start() delivers batches synchronously; close() stops delivery at once'), async (t) => {
  const port = 40000 + Math.floor(Math.random() * 20000);
  const cap = LiveCapture.open({ device: 'lo', filter: `udp dst port ${port}` });
  let n = 0;
  let batches = 0;
  const done = new Promise<void>((resolve) => {
    cap.start(() => { n++; if (n === 50) { cap.close(); resolve(); } }, (e) => t.fail(e.message), () => { batches++; });
  });
  await sendDatagrams(port, new Array<number>(200).fill(64));
  await done;
  t.is(n, 50, 'nothing after close()');
  t.is(cap.stats().captured, 50);
  t.true(batches <= 50);
  t.log(`50 frames in ${batches} completed batches`);
});

liveTest(title('the addon captures inside a worker thread (own event loop) and the process survives'), async (t) => {
  const port = 40000 + Math.floor(Math.random() * 20000);
  const addon = join(ROOT, 'native', 'build', 'Release', 'pcap_live.node');
  const code = `
    const { parentPort, workerData } = require('node:worker_threads');
    const a = require(workerData.addon);
    const h = new a.LiveHandle();
    let n = 0;
    h.open('lo', { filter: 'udp dst port ' + workerData.port, timeoutMs: 10 }, (buf, count) => {
      n += count;
      if (n >= 20) { const s = h.stats(); h.close(); parentPort.postMessage({ n, s }); }
    });
    parentPort.postMessage('ready');`;
  const w = new Worker(code, { eval: true, workerData: { addon, port } });
  const result = new Promise<{ n: number; s: { dropped: number } }>((resolve, reject) => {
    w.on('message', (m: unknown) => {
      if (m === 'ready') void sendDatagrams(port, new Array<number>(20).fill(100));
      else resolve(m as { n: number; s: { dropped: number } });
    });
    w.on('error', reject);
  });
  const exited = new Promise<number>((resolve) => w.on('exit', resolve));
  const r = await result;
  t.is(r.n, 20);
  t.is(r.s.dropped, 0);
  // With the capture closed nothing keeps the worker's loop alive: it ends by itself.
  t.is(await exited, 0);
});

const addonBuilt = existsSync(join(ROOT, 'native', 'build', 'Release', 'pcap_live.node'));
(addonBuilt ? test : test.skip)('BpfMatcher compiles per link type (pcapng may mix them) and matches like libpcap', (t) => {
  const m = new BpfMatcher('udp port 4791');
  const eth = new Uint8Array(14 + 20 + 8 + 12);
  eth[12] = 0x08; eth[14] = 0x45; eth[23] = 17; eth[36] = 0x12; eth[37] = 0xb7; // IPv4, UDP, dport 4791
  const raw = eth.subarray(14);
  const frame = (data: Uint8Array, linktype: number): CapturedFrame => ({ data, caplen: data.length, origlen: data.length, tsNs: 0n, linktype, ifIndex: 0 });
  t.true(m.matches(frame(eth, 1)));
  t.true(m.matches(frame(raw, 101)));
  eth[37] = 0xb8;
  t.false(m.matches(frame(eth, 1)));
  m.close();
  t.throws(() => new BpfMatcher('udp port x').compile(1), { message: /^bad filter "udp port x": / });
});
