// SMC-R over uroce against node:net TCP with both ends in ONE process (issue 17): request/
// response (64 B, one at a time) and a 64 KiB-write stream, interleaved rounds, medians.
//
// Why one process: on the shared 2-vCPU VM two-process runs measure mostly the scheduler (at
// load 10-17 plain TCP itself ranged 190-1050 MB/s from one run to the next). With both ends on
// one event loop there is no wake-up to wait for, so a round trip's time is the CPU both ends
// spend on it, and the CPU per transaction / per MB (process.cpuUsage) is what the code costs.
// smcperf (two processes, --tcp) is still the real-world measurement; this one is for A/B of
// code changes.
//
//   node dist/bench/smcr.js                       rr + stream, 3 rounds, 64 KiB buffers and 512 KiB
//   BENCH_SMCR_ROUNDS=5 BENCH_SMCR_RR=5000 BENCH_SMCR_SECONDS=2 BENCH_SMCR_NET=190
//   BENCH_SMCR_BUFSIZES=65536,524288              RMB/send buffer sizes for the stream test
//                                                 (empty: no stream test; BENCH_SMCR_RR=0: no rr)
//
// Every byte of the stream is counted by the receiver (the test fails if a byte is missing),
// every rr reply is compared with its request.

import net from 'node:net';
import { once } from 'node:events';
import { createServer, connect, closeAll, type SmcSocket } from '../endpoint/index.js';
import type { SmcOptions } from '../endpoint/config.js';

const ROUNDS = Math.max(1, Number(process.env.BENCH_SMCR_ROUNDS ?? 3));
const RR_COUNT = Number(process.env.BENCH_SMCR_RR ?? 4000);
const SECONDS = Number(process.env.BENCH_SMCR_SECONDS ?? 2);
const NET = Number(process.env.BENCH_SMCR_NET ?? 190);
const BUFSIZES = (process.env.BENCH_SMCR_BUFSIZES ?? '65536,524288').split(',').filter((v) => v !== '').map(Number);
const RR_SIZE = 64;
const MSG = 64 * 1024;

type Duplex = SmcSocket | net.Socket;
interface RrResult { p50: number; p99: number; cpuUs: number }
interface StreamResult { mbps: number; cpuMsPerMb: number }

function median(a: number[]): number { const s = [...a].sort((x, y) => x - y); return s[s.length >> 1]!; }

/** One side of each test: rr echoes, stream counts. */
function serve(s: Duplex, counter: { bytes: number }): void {
  s.on('error', () => undefined); // the client side closes first at the end of a test
  s.on('data', (d: Buffer) => {
    counter.bytes += d.length;
    if ((s as { rr?: boolean }).rr) s.write(d);
  });
}

async function rr(s: Duplex, n: number): Promise<RrResult> {
  const req = Buffer.alloc(RR_SIZE);
  let got: Buffer[] = [];
  let have = 0;
  let wake: (() => void) | undefined;
  const onData = (d: Buffer): void => { got.push(d); have += d.length; if (have >= RR_SIZE && wake) { const w = wake; wake = undefined; w(); } };
  s.on('data', onData);
  const lat: number[] = [];
  const c0 = process.cpuUsage();
  for (let i = 0; i < n; i++) {
    req.writeUInt32BE(i, 0);
    const t = performance.now();
    s.write(req);
    if (have < RR_SIZE) await new Promise<void>((resolve) => { wake = resolve; });
    lat.push((performance.now() - t) * 1000);
    const reply = Buffer.concat(got);
    if (reply.length !== RR_SIZE || !reply.equals(req)) throw new Error(`rr: reply ${i} differs from its request`);
    got = []; have = 0;
  }
  const c = process.cpuUsage(c0);
  s.off('data', onData);
  lat.sort((a, b) => a - b);
  return { p50: lat[n >> 1]!, p99: lat[Math.floor(n * 0.99)]!, cpuUs: (c.user + c.system) / n };
}

async function stream(s: Duplex, counter: { bytes: number }, seconds: number): Promise<StreamResult> {
  const buf = Buffer.alloc(MSG, 0x5a);
  const start = counter.bytes;
  let sent = 0;
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  while (performance.now() - t0 < seconds * 1000) {
    sent += MSG;
    if (!s.write(buf)) await once(s, 'drain');
  }
  // every byte counted by the receiving side before the clock stops
  while (counter.bytes - start < sent) await new Promise((r) => setImmediate(r));
  const secs = (performance.now() - t0) / 1000;
  const c = process.cpuUsage(c0);
  if (counter.bytes - start !== sent) throw new Error(`stream: ${sent} bytes sent, ${counter.bytes - start} received`);
  return { mbps: sent / secs / 1e6, cpuMsPerMb: (c.user + c.system) / 1000 / (sent / 1e6) };
}

interface Pair { smc: SmcSocket; tcp: net.Socket; smcCount: { bytes: number }; tcpCount: { bytes: number }; close: () => Promise<void> }

async function pair(k: number, bufsize: number, mode: 'rr' | 'stream'): Promise<Pair> {
  const a = `127.0.${NET + k}.1`, b = `127.0.${NET + k}.2`;
  const o = (addr: string): SmcOptions => ({ device: { provider: 'uroce', address: addr, gso: true }, ueids: ['BENCH'], tcpOption: 'ignore', rmbSize: bufsize, sndbufSize: bufsize });
  const smcCount = { bytes: 0 }, tcpCount = { bytes: 0 };
  const srv = createServer(o(b), (s) => { Object.assign(s, { rr: mode === 'rr' }); serve(s, smcCount); });
  await srv.listen(19990, b);
  const tsrv = net.createServer((s) => { s.setNoDelay(true); Object.assign(s, { rr: mode === 'rr' }); serve(s, tcpCount); });
  tsrv.listen(19991, b);
  await once(tsrv, 'listening');
  const smc = await connect({ ...o(a), host: b, port: 19990 });
  if (smc.mode !== 'smcr') throw new Error('no SMC-R connection (fallback to TCP)');
  const tcp = net.connect({ host: b, port: 19991, localAddress: a });
  tcp.setNoDelay(true);
  await once(tcp, 'connect');
  return {
    smc, tcp, smcCount, tcpCount,
    close: async () => {
      smc.on('error', () => undefined);
      tcp.on('error', () => undefined);
      smc.destroy(); tcp.destroy(); tsrv.close();
      await srv.close();
    },
  };
}

async function main(): Promise<void> {
  console.log(`SMC-R (uroce, loopback GSO) vs node:net TCP, both ends in one process; ${ROUNDS} rounds, medians`);
  // rr
  if (RR_COUNT > 0) {
    const p = await pair(0, 65536, 'rr');
    await rr(p.smc, 2000); await rr(p.tcp, 2000); // JIT warm-up of both paths
    const s: RrResult[] = [], t: RrResult[] = [];
    for (let r = 0; r < ROUNDS; r++) { s.push(await rr(p.smc, RR_COUNT)); t.push(await rr(p.tcp, RR_COUNT)); }
    const f = (x: RrResult[], k: keyof RrResult): number => median(x.map((v) => v[k]));
    console.log(`rr ${RR_SIZE} B x ${RR_COUNT}: SMC-R p50 ${f(s, 'p50').toFixed(1)} µs p99 ${f(s, 'p99').toFixed(1)} µs CPU ${f(s, 'cpuUs').toFixed(1)} µs/tx | `
      + `TCP p50 ${f(t, 'p50').toFixed(1)} µs p99 ${f(t, 'p99').toFixed(1)} µs CPU ${f(t, 'cpuUs').toFixed(1)} µs/tx | `
      + `SMC-R/TCP p50 ${median(s.map((v, i) => v.p50 / t[i]!.p50)).toFixed(2)} CPU ${median(s.map((v, i) => v.cpuUs / t[i]!.cpuUs)).toFixed(2)}`);
    await p.close();
  }
  // stream, per buffer size
  for (const [i, bs] of BUFSIZES.entries()) {
    const p = await pair(1 + i, bs, 'stream');
    await stream(p.smc, p.smcCount, 1); await stream(p.tcp, p.tcpCount, 1);
    const s: StreamResult[] = [], t: StreamResult[] = [];
    for (let r = 0; r < ROUNDS; r++) { s.push(await stream(p.smc, p.smcCount, SECONDS)); t.push(await stream(p.tcp, p.tcpCount, SECONDS)); }
    console.log(`stream 64 KiB writes, --bufsize ${bs >> 10}k: SMC-R ${median(s.map((v) => v.mbps)).toFixed(1)} MB/s CPU ${median(s.map((v) => v.cpuMsPerMb)).toFixed(2)} ms/MB | `
      + `TCP ${median(t.map((v) => v.mbps)).toFixed(1)} MB/s CPU ${median(t.map((v) => v.cpuMsPerMb)).toFixed(2)} ms/MB | `
      + `SMC-R/TCP ${median(s.map((v, k) => v.mbps / t[k]!.mbps)).toFixed(2)}`);
    await p.close();
  }
  await closeAll();
}

main().then(() => process.exit(0), (e: unknown) => { console.error(`bench/smcr: ${(e as Error).message}`); process.exit(1); });
