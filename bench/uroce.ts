// `npm run bench` (second part): the userspace RoCEv2 engine against Node TCP sockets on
// loopback, measured in the same run (absolute numbers on a shared 2-core VM are noisy; the
// ratio is what counts):
//
//   * throughput: 64 KiB RDMA WRITEs (uroce, 16 in flight) vs 64 KiB socket writes (TCP)
//   * latency:    64-byte SEND ping-pong (uroce, completions awaited, no busy loop) vs a
//                 64-byte TCP ping-pong
//
// in two topologies: two processes (the realistic one: each endpoint has its own event loop
// and core) and one process (both endpoints share one event loop). uroce and TCP runs are
// interleaved (ROUNDS × [uroce, TCP]) and the medians compared, so that load from other
// processes on a shared machine hits both alike. Then a CPU profile of both uroce processes
// during a WRITE run says where the time goes, and the CPU time each side spends per 64 KiB.
//
// Env: BENCH_UROCE_SECONDS (default 2 per throughput run), BENCH_UROCE_ROUNDS (default 3),
//      BENCH_UROCE_PINGS (default 2000 per round), BENCH_UROCE_PROFILE=0 to skip the profile.

import { fork, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import { Session } from 'node:inspector';
import { fileURLToPath } from 'node:url';
import {
  Access, QpState, SendFlags, WrOpcode, type Cq, type Device, type Mr, type Qp, type Mtu,
} from '../endpoint/verbs/index.js';
import { openUroce, type UroceDevice } from '../endpoint/verbs/uroce/index.js';

const SECONDS = Number(process.env.BENCH_UROCE_SECONDS ?? 2);
const ROUNDS = Math.max(1, Number(process.env.BENCH_UROCE_ROUNDS ?? 3));
const PINGS = Number(process.env.BENCH_UROCE_PINGS ?? 2000);
const MSG = 64 * 1024;
const DEPTH = Number(process.env.BENCH_UROCE_DEPTH ?? 16);
const PING = 64;
/** BENCH_UROCE_PROFILE_TOP=n: also list the n functions with the most self time. */
const TOP = Number(process.env.BENCH_UROCE_PROFILE_TOP ?? 0);
const WINDOW = Number(process.env.BENCH_UROCE_WINDOW ?? 256);
// 127.0.0.1/.2 unless BENCH_UROCE_NET=N picks 127.0.N.1/.2 (e.g. when another engine holds UDP 4791 there)
const NET = process.env.BENCH_UROCE_NET;
const ADDR_CLIENT = NET ? `127.0.${NET}.1` : '127.0.0.1';
const ADDR_SERVER = NET ? `127.0.${NET}.2` : '127.0.0.2';

// ---------------------------------------------------------------------------------------
// uroce endpoints
// ---------------------------------------------------------------------------------------

interface QpInfo { qpn: number; gid: string; psn: number; rkey: number; addr: string; mtu: number }

interface Endpoint {
  dev: Device;
  qp: Qp;
  cq: Cq;
  mr: Mr;
  buf: Uint8Array;
  info: QpInfo;
}

async function endpoint(address: string, bufSize: number): Promise<Endpoint> {
  // GSO on: the loopback fast path between two uroce engines (off by default, see docs/uroce.md);
  // the runs "without GSO" switch it off at run time (dev.engine.gso).
  const dev = await openUroce({ address, window: WINDOW, gso: true });
  const pd = dev.allocPd();
  const cq = dev.createCq(8192);
  const qp = pd.createQp({ sendCq: cq, recvCq: cq, cap: { maxSendWr: 256, maxRecvWr: 256, maxSendSge: 1, maxRecvSge: 1, maxInlineData: 64 } });
  const buf = new Uint8Array(bufSize);
  const mr = pd.regMr(buf, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
  qp.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: 1, qpAccessFlags: Access.LOCAL_WRITE | Access.REMOTE_WRITE });
  const psn = (Math.random() * 0xffffff) >>> 0;
  return { dev, qp, cq, mr, buf, info: { qpn: qp.qpNum, gid: dev.queryGid(1, 0), psn, rkey: mr.rkey, addr: mr.addr.toString(), mtu: dev.queryPort(1).activeMtu } };
}

function connect(e: Endpoint, peer: QpInfo): void {
  e.qp.modify({
    qpState: QpState.RTR, pathMtu: Math.min(e.info.mtu, peer.mtu) as Mtu, destQpNum: peer.qpn, rqPsn: peer.psn, maxDestRdAtomic: 0, minRnrTimer: 1,
    ahAttr: { isGlobal: true, portNum: 1, grh: { dgid: peer.gid, sgidIndex: 0, hopLimit: 64, trafficClass: 0, flowLabel: 0 } },
  });
  e.qp.modify({ qpState: QpState.RTS, sqPsn: e.info.psn, timeout: 14, retryCnt: 7, rnrRetry: 7, maxRdAtomic: 0 });
}

/** Client: RDMA WRITE 64 KiB messages for `seconds`; returns bytes/s. */
async function writeThroughput(e: Endpoint, peer: QpInfo, seconds: number): Promise<number> {
  const remote = BigInt(peer.addr);
  let posted = 0, done = 0, bytes = 0;
  const post = (): void => {
    const k = posted % DEPTH;
    e.qp.postSend({ wrId: posted++, opcode: WrOpcode.RDMA_WRITE, sgList: [e.mr.sge(k * MSG, MSG)], sendFlags: SendFlags.SIGNALED, rdma: { remoteAddr: remote + BigInt(k * MSG), rkey: peer.rkey } });
  };
  const t0 = performance.now();
  const end = t0 + seconds * 1000;
  while (posted < DEPTH) post();
  let now = t0;
  while (done < posted) {
    await e.cq.wait();
    for (const wc of e.cq.poll(64)) {
      if (wc.status !== 0) throw new Error(`WRITE completed with status ${wc.status}`);
      done++;
      bytes += MSG;
    }
    now = performance.now();
    while (now < end && posted - done < DEPTH) post();
  }
  return bytes / ((now - t0) / 1000);
}

/** Client: SEND ping-pong, returns RTTs in µs. The server echoes every message. */
async function pingPong(e: Endpoint, n: number): Promise<number[]> {
  const rtts: number[] = [];
  const recvAt = MSG * DEPTH;
  for (let i = 0; i < 8; i++) e.qp.postRecv({ wrId: 1000 + i, sgList: [e.mr.sge(recvAt + i * PING, PING)] });
  for (let i = 0; i < n; i++) {
    const t = process.hrtime.bigint();
    e.qp.postSend({ wrId: i, opcode: WrOpcode.SEND, sgList: [e.mr.sge(0, PING)], sendFlags: SendFlags.SIGNALED | SendFlags.INLINE });
    let gotRecv = false, gotSend = false;
    while (!gotRecv || !gotSend) {
      await e.cq.wait();
      for (const wc of e.cq.poll(8)) {
        if (wc.status !== 0) throw new Error(`ping completion status ${wc.status}`);
        if (wc.opcode === 128) { gotRecv = true; e.qp.postRecv({ wrId: wc.wrId, sgList: [e.mr.sge(recvAt + (Number(wc.wrId) - 1000) * PING, PING)] }); }
        else gotSend = true;
      }
    }
    rtts.push(Number(process.hrtime.bigint() - t) / 1000);
  }
  return rtts;
}

/** Server side of the ping-pong: echo `n` messages. */
async function pongServer(e: Endpoint, n: number): Promise<void> {
  const recvAt = MSG * DEPTH;
  for (let i = 0; i < 8; i++) e.qp.postRecv({ wrId: 1000 + i, sgList: [e.mr.sge(recvAt + i * PING, PING)] });
  let echoed = 0;
  while (echoed < n) {
    await e.cq.wait();
    for (const wc of e.cq.poll(16)) {
      if (wc.status !== 0) throw new Error(`pong completion status ${wc.status}`);
      if (wc.opcode === 128) {
        const slot = Number(wc.wrId) - 1000;
        e.qp.postSend({ wrId: echoed++, opcode: WrOpcode.SEND, sgList: [e.mr.sge(recvAt + slot * PING, PING)], sendFlags: SendFlags.INLINE });
        e.qp.postRecv({ wrId: wc.wrId, sgList: [e.mr.sge(recvAt + slot * PING, PING)] });
      }
    }
  }
}

// ---------------------------------------------------------------------------------------
// TCP
// ---------------------------------------------------------------------------------------

function tcpServer(): Promise<{ port: number; close: () => void }> {
  return new Promise((resolve) => {
    const srv = net.createServer((c) => {
      c.setNoDelay(true);
      let mode = '';
      c.on('data', (d) => {
        if (!mode) mode = String.fromCharCode(d[0]!);
        if (mode === 'P') c.write(d); // ping-pong: echo
        // mode 'T': throughput, just consume
      });
      c.on('error', () => { /* peer went away */ });
    });
    srv.listen(0, ADDR_SERVER, () => resolve({ port: (srv.address() as net.AddressInfo).port, close: () => srv.close() }));
  });
}

function tcpConnect(port: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const c = net.connect({ port, host: ADDR_SERVER, localAddress: ADDR_CLIENT }, () => { c.setNoDelay(true); resolve(c); });
    c.once('error', reject);
  });
}

async function tcpThroughput(port: number, seconds: number): Promise<number> {
  const c = await tcpConnect(port);
  const b = Buffer.alloc(MSG, 0x54);
  let bytes = 0;
  const t0 = performance.now();
  const end = t0 + seconds * 1000;
  await new Promise<void>((resolve) => {
    const pump = (): void => {
      while (performance.now() < end) {
        bytes += MSG;
        if (!c.write(b)) { c.once('drain', pump); return; }
      }
      c.end(resolve);
    };
    pump();
  });
  const dt = (performance.now() - t0) / 1000;
  c.destroy();
  return bytes / dt;
}

async function tcpPingPong(port: number, n: number): Promise<number[]> {
  const c = await tcpConnect(port);
  const msg = Buffer.alloc(PING, 0x50);
  const rtts: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = process.hrtime.bigint();
    await new Promise<void>((resolve) => {
      let got = 0;
      const on = (d: Buffer): void => { got += d.length; if (got >= PING) { c.off('data', on); resolve(); } };
      c.on('data', on);
      c.write(msg);
    });
    rtts.push(Number(process.hrtime.bigint() - t) / 1000);
  }
  c.destroy();
  return rtts;
}

// ---------------------------------------------------------------------------------------
// Profiling: where the time goes
// ---------------------------------------------------------------------------------------

interface ProfNode { id: number; callFrame: { functionName: string; url: string }; children?: number[] }
interface Profile { nodes: ProfNode[]; samples: number[]; timeDeltas: number[] }

const CATEGORIES: [string, (fn: string, url: string) => boolean][] = [
  ['idle (event loop waiting for packets)', (fn) => fn === '(idle)'],
  ['UDP send: sendmmsg(2) in the socket helper + kernel (incl. loopback delivery to the peer, and time descheduled while the woken peer runs)',
    (fn, url) => (url.includes('uroce/engine') && /^(flushPort|sendSingles|sendDgram)$/.test(fn)) || url.includes('dgram') || (url === '' && /^(send|sendPackets|\(anonymous\)|)$/.test(fn))],
  ['UDP receive: recvmmsg(2) in the socket helper, outside JavaScript', (fn) => fn === '(program)'],
  // since round 14 the CRC arithmetic runs in the socket helper (counted with UDP send/receive);
  // this row is TypeScript's share: prefixes, exact-verdict bookkeeping, the fallback
  ['ICRC in TypeScript (prefixes, verdict bookkeeping, fallback)', (fn, url) => /crc32/i.test(fn) || url.includes('crc32') || /icrc|feedI|feedU|feedIb|solveIpId/i.test(fn) || url.includes('uroce/icrc')],
  ['packet build (BTH/RETH/AETH writers, payload copy into the staging buffer)',
    (fn, url) => (url.includes('wire/ib') && /encode|write|put|ibPacketLength/.test(fn)) || (url.includes('wire/views') && fn === 'write') || /^(sendRequest|gatherInto|txAlloc)$/.test(fn)],
  ['IB packet decode', (fn, url) => url.includes('wire/ib') || url.includes('wire/common')],
  ['QP state machines (requester/responder, placement copy into the MR)', (fn, url) => url.includes('uroce/qp') || url.includes('verbs/cq')],
  ['engine (batch split, demux, GSO runs, faults, tap)', (fn, url) => url.includes('uroce/engine') || url.includes('uroce/device')],
  ['garbage collection', (fn) => fn === '(garbage collector)'],
  ['benchmark driver', (fn, url) => url.includes('bench/uroce')],
];

function categorize(p: Profile): { name: string; pct: number }[] {
  const dt = new Map<number, number>();
  for (let i = 0; i < p.samples.length; i++) dt.set(p.samples[i]!, (dt.get(p.samples[i]!) ?? 0) + (p.timeDeltas[i] ?? 0));
  const totals = new Map<string, number>();
  const fns = new Map<string, number>();
  let all = 0;
  for (const n of p.nodes) {
    const t = dt.get(n.id) ?? 0;
    if (!t) continue;
    all += t;
    const { functionName: fn, url } = n.callFrame;
    const cat = CATEGORIES.find(([, m]) => m(fn, url))?.[0] ?? 'other (V8, Node internals, native)';
    totals.set(cat, (totals.get(cat) ?? 0) + t);
    if (TOP) fns.set(`${fn || '(anonymous)'} ${url.split('/').slice(-2).join('/')}`, (fns.get(`${fn || '(anonymous)'} ${url.split('/').slice(-2).join('/')}`) ?? 0) + t);
  }
  if (TOP) for (const [k, t] of [...fns].sort((a, b) => b[1] - a[1]).slice(0, TOP)) totals.set(`  fn: ${k}`, t);
  return [...totals].map(([name, t]) => ({ name, pct: (100 * t) / all })).sort((a, b) => b.pct - a.pct);
}

async function profiled<T>(fn: () => Promise<T>): Promise<{ result: T; cats: { name: string; pct: number }[] }> {
  const s = new Session();
  s.connect();
  const post = (m: string, params?: object): Promise<unknown> => new Promise((res, rej) => s.post(m, params ?? {}, (e, r) => (e ? rej(e) : res(r))));
  await post('Profiler.enable');
  await post('Profiler.setSamplingInterval', { interval: 1000 });
  await post('Profiler.start');
  const result = await fn();
  const { profile } = (await post('Profiler.stop')) as { profile: Profile };
  s.disconnect();
  return { result, cats: categorize(profile) };
}

// ---------------------------------------------------------------------------------------
// Peer process
// ---------------------------------------------------------------------------------------

type Msg =
  | { t: 'info'; info: QpInfo; tcpPort: number; exact: boolean }
  | { t: 'connect'; info: QpInfo }
  | { t: 'gso'; on: boolean }
  | { t: 'pong'; n: number }
  | { t: 'profile'; on: boolean }
  | { t: 'cats'; cats: { name: string; pct: number }[]; cpu: number }
  | { t: 'done' }
  | { t: 'quit' };

async function peerMain(): Promise<void> {
  const e = await endpoint(ADDR_SERVER, MSG * DEPTH + 64 * 1024);
  const tcp = await tcpServer();
  const send = (m: Msg): void => { process.send!(m); };
  let session: Session | undefined;
  let cpuAt = process.cpuUsage();
  process.on('message', async (m: Msg) => {
    if (m.t === 'connect') { connect(e, m.info); send({ t: 'done' }); }
    else if (m.t === 'gso') { (e.dev as UroceDevice).engine.gso = m.on; send({ t: 'done' }); }
    else if (m.t === 'pong') { await pongServer(e, m.n); send({ t: 'done' }); }
    else if (m.t === 'profile') {
      const post = (x: string, p?: object): Promise<unknown> => new Promise((res, rej) => session!.post(x, p ?? {}, (er, r) => (er ? rej(er) : res(r))));
      if (m.on) {
        cpuAt = process.cpuUsage();
        session = new Session(); session.connect();
        await post('Profiler.enable'); await post('Profiler.setSamplingInterval', { interval: 1000 }); await post('Profiler.start');
        send({ t: 'done' });
      } else {
        const { profile } = (await post('Profiler.stop')) as { profile: Profile };
        session!.disconnect();
        const c = process.cpuUsage(cpuAt);
        send({ t: 'cats', cats: categorize(profile), cpu: c.user + c.system });
      }
    } else if (m.t === 'quit') { tcp.close(); await e.dev.close(); process.exit(0); }
  });
  process.on('disconnect', () => process.exit(0)); // parent gone: never linger holding UDP 4791
  send({ t: 'info', info: e.info, tcpPort: tcp.port, exact: (e.dev as UroceDevice).engine.exactIcrc });
}

// ---------------------------------------------------------------------------------------
// Main
// ---------------------------------------------------------------------------------------

function stats(v: number[]): { med: number; p99: number } {
  const s = [...v].sort((a, b) => a - b);
  return { med: s[Math.floor(s.length / 2)]!, p99: s[Math.min(s.length - 1, Math.floor(s.length * 0.99))]! };
}
const mb = (x: number): string => `${(x / 1e6).toFixed(0)} MB/s`;
const median = (v: number[]): number => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)]!;

function report(uws: number[], tws: number[], ul: { med: number; p99: number }, tl: { med: number; p99: number }, target: boolean, nws: number[]): void {
  const uw = median(uws), tw = median(tws), nw = median(nws);
  const per = (v: number[]): string => v.map((x) => (x / 1e6).toFixed(0)).join(', ');
  console.log(`  uroce RDMA WRITE 64 KiB x${DEPTH} in flight   ${mb(uw).padStart(10)}    TCP 64 KiB writes  ${mb(tw).padStart(10)}    uroce/TCP = ${(uw / tw).toFixed(2)}${target ? ' (target >= 0.5)' : ''}`);
  console.log(`    same without GSO (one datagram per packet)  ${mb(nw).padStart(10)}                                  uroce/TCP = ${(nw / tw).toFixed(2)}`);
  console.log(`    rounds: uroce ${per(uws)} MB/s; without GSO ${per(nws)} MB/s; TCP ${per(tws)} MB/s; uroce/TCP per round ${uws.map((u, i) => (u / tws[i]!).toFixed(2)).join(', ')}`);
  console.log(`  uroce SEND 64 B ping-pong RTT   median ${us(ul.med)}  p99 ${us(ul.p99)}    TCP 64 B ping-pong  median ${us(tl.med)}  p99 ${us(tl.p99)}`);
}
const us = (x: number): string => `${x.toFixed(0)} µs`;

class Peer {
  private q: Msg[] = [];
  private w: ((m: Msg) => void) | undefined;
  constructor(readonly child: ChildProcess) {
    child.on('message', (m: Msg) => { if (this.w) { const w = this.w; this.w = undefined; w(m); } else this.q.push(m); });
  }
  next(): Promise<Msg> {
    const m = this.q.shift();
    if (m) return Promise.resolve(m);
    return new Promise((r) => { this.w = r; });
  }
  send(m: Msg): void { this.child.send(m); }
  async call(m: Msg): Promise<Msg> { this.send(m); return this.next(); }
}

async function twoProcesses(): Promise<void> {
  const child = fork(fileURLToPath(import.meta.url), ['--peer'], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const peer = new Peer(child);
  const hello = await peer.next();
  if (hello.t !== 'info') throw new Error('peer did not start');
  const e = await endpoint(ADDR_CLIENT, MSG * DEPTH + 64 * 1024);
  const exact = (e.dev as UroceDevice).engine.exactIcrc && hello.exact;
  connect(e, hello.info);
  await peer.call({ t: 'connect', info: e.info });

  await writeThroughput(e, hello.info, 0.5); // warm-up (JIT)
  await tcpThroughput(hello.tcpPort, 0.5);
  const uws: number[] = [], nws: number[] = [], tws: number[] = [], ulat: number[] = [], tlat: number[] = [];
  const gso = async (on: boolean): Promise<void> => { (e.dev as UroceDevice).engine.gso = on; await peer.call({ t: 'gso', on }); };
  for (let r = 0; r < ROUNDS; r++) {
    uws.push(await writeThroughput(e, hello.info, SECONDS));
    await gso(false);
    nws.push(await writeThroughput(e, hello.info, SECONDS));
    await gso(true);
    tws.push(await tcpThroughput(hello.tcpPort, SECONDS));
  }
  for (let r = 0; r < ROUNDS; r++) {
    const warm = r === 0 ? 200 : 0;
    const done = peer.call({ t: 'pong', n: PINGS + warm });
    ulat.push(...(await pingPong(e, PINGS + warm)).slice(warm));
    await done;
    tlat.push(...(await tcpPingPong(hello.tcpPort, PINGS + warm)).slice(warm));
  }
  console.log(`\nuroce vs Node TCP on loopback, two processes (client ${ADDR_CLIENT}, server ${ADDR_SERVER}), ${ROUNDS} interleaved rounds of ${SECONDS} s`);
  report(uws, tws, stats(ulat), stats(tlat), true, nws);
  if (!exact) console.log(`  note: ${(e.dev as UroceDevice).engine.icrcNote}`);
  const qs = (e.dev as UroceDevice).stats().qps[e.qp.qpNum]!;
  console.log(`  requester QP: ${qs.txPackets} packets, ${qs.retransmits} retransmitted, ${qs.timeouts} timeouts, ${qs.seqNaksReceived} sequence NAKs, ${qs.acksReceived} ACKs`);

  if (process.env.BENCH_UROCE_PROFILE !== '0') {
    await peer.call({ t: 'profile', on: true });
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    const { result, cats } = await profiled(() => writeThroughput(e, hello.info, Math.min(2, SECONDS)));
    const cpu = process.cpuUsage(cpu0);
    const msgs = (result * (performance.now() - t0)) / 1000 / MSG;
    const srv = await peer.call({ t: 'profile', on: false });
    console.log(`\n  where the time goes (CPU profile during a ${mb(result)} WRITE run; % of each process's samples):`);
    const srvCpu = srv.t === 'cats' ? srv.cpu : NaN;
    console.log(`    CPU time per 64 KiB message (user + system, profiler included): requester ${((cpu.user + cpu.system) / msgs).toFixed(0)} µs, responder ${(srvCpu / msgs).toFixed(0)} µs`);
    const show = (title: string, cs: { name: string; pct: number }[]): void => {
      console.log(`    ${title}`);
      for (const c of cs) if (c.pct >= 0.5 && !c.name.startsWith('  fn:')) console.log(`      ${c.pct.toFixed(1).padStart(5)}%  ${c.name}`);
      for (const c of cs) if (c.name.startsWith('  fn:')) console.log(`      ${c.pct.toFixed(1).padStart(5)}%  ${c.name}`);
    };
    show('requester (client):', cats);
    if (srv.t === 'cats') show('responder (server):', srv.cats);
  }
  const exited = new Promise((r) => child.once('exit', r));
  peer.send({ t: 'quit' });
  await e.dev.close();
  await exited;
}

async function oneProcess(): Promise<void> {
  const a = await endpoint(ADDR_CLIENT, MSG * DEPTH + 64 * 1024);
  const b = await endpoint(ADDR_SERVER, MSG * DEPTH + 64 * 1024);
  connect(a, b.info);
  connect(b, a.info);
  const tcp = await tcpServer();
  await writeThroughput(a, b.info, 0.5);
  await tcpThroughput(tcp.port, 0.5);
  const uws: number[] = [], nws: number[] = [], tws: number[] = [], ulat: number[] = [], tlat: number[] = [];
  const gso = (on: boolean): void => { (a.dev as UroceDevice).engine.gso = on; (b.dev as UroceDevice).engine.gso = on; };
  for (let r = 0; r < ROUNDS; r++) {
    uws.push(await writeThroughput(a, b.info, SECONDS));
    gso(false);
    nws.push(await writeThroughput(a, b.info, SECONDS));
    gso(true);
    tws.push(await tcpThroughput(tcp.port, SECONDS));
  }
  for (let r = 0; r < ROUNDS; r++) {
    const warm = r === 0 ? 200 : 0;
    const done = pongServer(b, PINGS + warm);
    ulat.push(...(await pingPong(a, PINGS + warm)).slice(warm));
    await done;
    tlat.push(...(await tcpPingPong(tcp.port, PINGS + warm)).slice(warm));
  }
  console.log(`\nsame, both endpoints in one process (one event loop for both ends)`);
  report(uws, tws, stats(ulat), stats(tlat), false, nws);
  tcp.close();
  await a.dev.close();
  await b.dev.close();
}

if (process.argv.includes('--peer')) {
  await peerMain();
} else {
  console.log('\nuroce benchmark (bench/uroce.ts)');
  await twoProcesses();
  await oneProcess();
}
