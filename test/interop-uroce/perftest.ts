// perftest's out-of-band exchange (ib_send_bw, ib_write_bw, ib_send_lat without -R) and the
// tests themselves, both roles, on the verbs interface. The exchange is perftest's
// perftest_communication.c over TCP port 18515, every message one fixed-size write; the
// client writes first, the server reads first:
//   1. version string (VERSION_LEN bytes)                               exchange_versions
//   2. cycle buffer size, cache line size (4-byte big-endian ints)       check_sys_data (>= 5.32)
//   3. active MTU enum as text "%d" (2 bytes with the NUL)               check_mtu (>= 5.31)
//   4. QP info "%04x:%04x:%06x:%06x:%08x:%016Lx:<16 x %02x>:%08x:" + NUL (108 bytes):
//      lid, out_reads, qpn, psn, rkey, vaddr, gid, srqn                  ctx_hand_shake
//   5. more handshakes (barriers): 4 in all before the test (send_bw, send_lat), 3 (write_bw)
//   6. the test
//   7. handshake, [write_bw: 5 x 8-byte reports, handshake], "done\\0" both ways  ctx_close_connection
// (Debian's perftest 4.5+0.17 identifies as version 6.06; sequence checked against guest<->guest
// captures in the lab, see docs/uroce.md).
import net from 'node:net';
import {
  Access, QpState, SendFlags, WrOpcode, WcOpcode, WcStatus, gidBytes, gidText, wcStatusStr, mtuBytes,
  type Device, type Mtu, type Qp, type Cq, type Mr,
} from '../../endpoint/verbs/index.js';

export type PerftestKind = 'send_bw' | 'write_bw' | 'send_lat';
export interface PerftestOptions { port?: number; size?: number; iters?: number; txDepth?: number; rxDepth?: number; version?: string; log?: (s: string) => void }
export interface PerftestResult { summary: string; bytes: number; seconds: number; mbPerS?: number; latUs?: { typical: number; avg: number; p99: number } }
interface Dest { lid: number; outReads: number; qpn: number; psn: number; rkey: number; vaddr: bigint; gid: string; srqn: number }

/** sizeof(user_param->version) in perftest 4.5 (char version[MAX_VERSION], MAX_VERSION 16). */
export const VERSION_LEN = 16;
export const KEY_MSG_SIZE_GID = 108;
/** The version we announce when we are the client (the server is told what it sends). */
export const OUR_VERSION = '6.19';

const h = (v: number | bigint, w: number): string => v.toString(16).padStart(w, '0');

export function keysToWire(d: Dest): Buffer {
  const g = [...gidBytes(d.gid)].map((x) => h(x, 2)).join(':');
  const s = `${h(d.lid, 4)}:${h(d.outReads, 4)}:${h(d.qpn, 6)}:${h(d.psn, 6)}:${h(d.rkey, 8)}:${h(d.vaddr, 16)}:${g}:${h(d.srqn, 8)}:`;
  const b = Buffer.alloc(KEY_MSG_SIZE_GID);
  b.write(s, 'latin1');
  return b;
}

export function keysFromWire(b: Buffer): Dest {
  const f = b.toString('latin1').replace(/\0.*$/s, '').split(':');
  if (f.length < 22) throw new Error(`bad perftest keys message: ${JSON.stringify(b.toString('latin1'))}`);
  const gid = Uint8Array.from(f.slice(6, 22).map((x) => parseInt(x, 16)));
  return { lid: parseInt(f[0]!, 16), outReads: parseInt(f[1]!, 16), qpn: parseInt(f[2]!, 16), psn: parseInt(f[3]!, 16), rkey: parseInt(f[4]!, 16) >>> 0, vaddr: BigInt('0x' + f[5]!), gid: gidText(gid), srqn: parseInt(f[22] ?? '0', 16) || 0 };
}

interface Ctx { qp: Qp; cq: Cq; mr: Mr; me: Dest; mtu: Mtu }

function initCtx(dev: Device, kind: PerftestKind, size: number, txDepth: number, rxDepth: number): Ctx {
  const pd = dev.allocPd();
  // two halves like perftest's buffer: [0, size) our send side, [size, 2 size) the peer's target
  const mr = pd.regMr(new Uint8Array(2 * Math.max(size, 64)), Access.LOCAL_WRITE | (kind === 'write_bw' ? Access.REMOTE_WRITE : 0));
  const cq = dev.createCq(txDepth + rxDepth + 16);
  const qp = pd.createQp({ sendCq: cq, recvCq: cq, cap: { maxSendWr: txDepth, maxRecvWr: rxDepth, maxSendSge: 1, maxRecvSge: 1, maxInlineData: 236 } });
  qp.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: 1, qpAccessFlags: Access.LOCAL_WRITE | (kind === 'write_bw' ? Access.REMOTE_WRITE : 0) });
  const me: Dest = { lid: 0, outReads: 0, qpn: qp.qpNum, psn: (Math.random() * 0xffffff) >>> 0, rkey: mr.rkey, vaddr: mr.addr + BigInt(size), gid: dev.queryGid(1, 0), srqn: 0 };
  return { qp, cq, mr, me, mtu: dev.queryPort(1).activeMtu };
}

function connect(c: Ctx, rem: Dest, mtu: Mtu): void {
  c.qp.modify({
    qpState: QpState.RTR, pathMtu: mtu, destQpNum: rem.qpn, rqPsn: rem.psn, maxDestRdAtomic: 0, minRnrTimer: 12,
    ahAttr: { isGlobal: true, portNum: 1, grh: { dgid: rem.gid, sgidIndex: 0, hopLimit: 64, trafficClass: 0, flowLabel: 0 } },
  });
  c.qp.modify({ qpState: QpState.RTS, timeout: 14, retryCnt: 7, rnrRetry: 7, sqPsn: c.me.psn, maxRdAtomic: 0 });
}

/** Steps 1–3: versions, system data, MTU. Returns the MTU both use. */
async function preamble(s: net.Socket, client: boolean, ourMtu: Mtu, o: PerftestOptions, rd: Reader): Promise<{ mtu: Mtu; remVersion: string }> {
  const readN = async (n: number): Promise<Buffer> => { const b = await rd.read(n); if (!b) throw new Error('peer closed during the perftest preamble'); return b; };
  const xchg = async (mine: Buffer): Promise<Buffer> => {
    if (client) { s.write(mine); return readN(mine.length); }
    const r = await readN(mine.length);
    s.write(mine);
    return r;
  };
  let ver = Buffer.alloc(VERSION_LEN);
  let remVersion: string;
  if (client) {
    ver.write(o.version ?? OUR_VERSION, 'latin1');
    remVersion = (await xchg(ver)).toString('latin1').replace(/\0.*$/s, '');
  } else {
    const r = await readN(VERSION_LEN);
    remVersion = r.toString('latin1').replace(/\0.*$/s, '');
    ver = Buffer.from(r); // answer with the client's own version: compatible by construction
    if (o.version) { ver.fill(0); ver.write(o.version, 'latin1'); }
    s.write(ver);
  }
  const rv = parseFloat(remVersion);
  if (rv >= 5.32) {
    const int = (v: number): Buffer => { const b = Buffer.alloc(4); b.writeInt32BE(v); return b; };
    await xchg(int(4096)); // cycle buffer: page size
    await xchg(int(64));   // cache line size
  }
  let mtu = ourMtu;
  if (rv >= 5.1) {
    const n = rv >= 5.31 ? 2 : 4;
    const mine = Buffer.alloc(n);
    mine.write(String(ourMtu), 'latin1');
    const rem = parseInt((await xchg(mine)).toString('latin1'), 10);
    if (rem >= 1 && rem <= 5 && rem < ourMtu) mtu = rem as Mtu;
  }
  o.log?.(`perftest peer version ${remVersion}, MTU ${mtuBytes(mtu)}`);
  return { mtu, remVersion };
}

function fail(status: number, what: string): never { throw new Error(`${what}: completion ${wcStatusStr(status)} (${status})`); }

/** The measured part, identical for both roles where perftest's is (lat: ping-pong; bw: one side sends). */
async function runTest(c: Ctx, kind: PerftestKind, client: boolean, rem: Dest, size: number, iters: number, txDepth: number, _rxDepth: number): Promise<PerftestResult> {
  const recvSge = (): { addr: bigint; length: number; lkey: number } => c.mr.sge(size, Math.max(size, 1));
  if (kind === 'send_lat') {
    const inline = size <= 236 ? SendFlags.INLINE : 0;
    const lats: number[] = [];
    let t = process.hrtime.bigint();
    const send = (): void => { c.qp.postSend({ wrId: 1, opcode: WrOpcode.SEND, sgList: [c.mr.sge(0, size)], sendFlags: SendFlags.SIGNALED | inline }); };
    const t0 = performance.now();
    if (client) send();
    let sent = client ? 1 : 0, recvd = 0;
    while (recvd < iters) {
      await c.cq.wait();
      for (const wc of c.cq.poll(16)) {
        if (wc.status !== WcStatus.SUCCESS) fail(wc.status, 'send_lat');
        if (wc.opcode !== WcOpcode.RECV) continue;
        recvd++;
        c.qp.postRecv({ wrId: 2, sgList: [recvSge()] });
        const now = process.hrtime.bigint();
        if (client) { lats.push(Number(now - t) / 2000); t = now; }
        if (sent < iters) { send(); sent++; }
      }
    }
    const seconds = (performance.now() - t0) / 1000;
    if (!client) return { summary: `${iters} ping-pongs of ${size} B`, bytes: iters * size * 2, seconds };
    const s = [...lats].sort((a, b) => a - b);
    const latUs = { typical: s[Math.floor(s.length / 2)]!, avg: s.reduce((a, b) => a + b, 0) / s.length, p99: s[Math.floor(s.length * 0.99)]! };
    return { summary: `t_typical ${latUs.typical.toFixed(2)} us, t_avg ${latUs.avg.toFixed(2)} us, p99 ${latUs.p99.toFixed(2)} us (${size} B, one-way = RTT/2)`, bytes: iters * size * 2, seconds, latUs };
  }
  if (!client) {
    // BW server: send_bw receives `iters` messages; write_bw only waits for the client's close
    if (kind === 'write_bw') return { summary: 'passive (RDMA WRITE target)', bytes: 0, seconds: 0 };
    const t0 = performance.now();
    let got = 0;
    while (got < iters) {
      await c.cq.wait();
      for (const wc of c.cq.poll(64)) {
        if (wc.status !== WcStatus.SUCCESS) fail(wc.status, 'send_bw server');
        got++;
        c.qp.postRecv({ wrId: 2, sgList: [recvSge()] });
      }
    }
    const seconds = (performance.now() - t0) / 1000;
    return { summary: `${got} x ${size} B received in ${seconds.toFixed(2)} s = ${((got * size) / seconds / 1e6).toFixed(2)} MB/s`, bytes: got * size, seconds, mbPerS: (got * size) / seconds / 1e6 };
  }
  const op = kind === 'write_bw' ? WrOpcode.RDMA_WRITE : WrOpcode.SEND;
  let posted = 0, done = 0;
  const post = (): void => {
    c.qp.postSend({ wrId: posted++, opcode: op, sgList: [c.mr.sge(0, size)], sendFlags: SendFlags.SIGNALED, ...(op === WrOpcode.RDMA_WRITE ? { rdma: { remoteAddr: rem.vaddr, rkey: rem.rkey } } : {}) });
  };
  const t0 = performance.now();
  while (posted < Math.min(iters, txDepth)) post();
  while (done < iters) {
    await c.cq.wait();
    for (const wc of c.cq.poll(64)) {
      if (wc.status !== WcStatus.SUCCESS) fail(wc.status, kind);
      done++;
      if (posted < iters) post();
    }
  }
  const seconds = (performance.now() - t0) / 1000;
  const mb = (iters * size) / seconds / 1e6;
  return { summary: `${mb.toFixed(2)} MB/s average (${size} B x ${iters}, ${seconds.toFixed(2)} s)`, bytes: iters * size, seconds, mbPerS: mb };
}

function sizes(kind: PerftestKind, o: PerftestOptions): { size: number; iters: number; txDepth: number; rxDepth: number } {
  return { size: o.size ?? (kind === 'send_lat' ? 2 : 65536), iters: o.iters ?? 1000, txDepth: o.txDepth ?? (kind === 'send_lat' ? 1 : 128), rxDepth: o.rxDepth ?? 512 };
}

/** Buffered reads on a TCP socket: read(n) / peek(n), null at EOF. */
class Reader {
  private buf = Buffer.alloc(0);
  private ended = false;
  private wake: (() => void) | undefined;
  constructor(s: net.Socket) {
    s.on('data', (d: Buffer) => { this.buf = Buffer.concat([this.buf, d]); this.wake?.(); });
    const end = (): void => { this.ended = true; this.wake?.(); };
    s.on('end', end);
    s.on('close', end);
    s.on('error', end);
  }
  private async need(n: number): Promise<boolean> {
    while (this.buf.length < n) {
      if (this.ended) return false;
      await new Promise<void>((r) => { this.wake = r; });
      this.wake = undefined;
    }
    return true;
  }
  async peek(n: number): Promise<Buffer | null> { return (await this.need(n)) ? this.buf.subarray(0, n) : null; }
  async read(n: number): Promise<Buffer | null> {
    if (!(await this.need(n))) return null;
    const r = Buffer.from(this.buf.subarray(0, n));
    this.buf = this.buf.subarray(n);
    return r;
  }
}

/** What a perftest 6.06 client does after its preamble (server role: we just answer each message). */
const CLIENT_SEQ: Record<PerftestKind, { pre: number; post: ('keys' | 'reports' | 'done')[] }> = {
  send_bw: { pre: 4, post: ['keys', 'done'] },
  write_bw: { pre: 3, post: ['keys', 'reports', 'keys', 'done'] },
  send_lat: { pre: 4, post: ['keys', 'done'] },
};

/** The five 8-byte values of xchg_bw_reports: size, iters (uint64), peak/avg BW and message rate (doubles), all big-endian. */
function reports(size: number, iters: number, mbps: number, mpps: number): Buffer[] {
  const u = (v: number): Buffer => { const b = Buffer.alloc(8); b.writeBigUInt64BE(BigInt(v)); return b; };
  const d = (v: number): Buffer => { const b = Buffer.alloc(8); b.writeDoubleBE(v); return b; };
  return [u(size), u(iters), d(mbps), d(mbps), d(mpps)];
}

/**
 * perftest server (`ib_send_bw` without a host) answering a real client. The client drives the
 * exchange (it always writes first), so the server answers whatever comes — keys, a report,
 * "done" — for any number of handshakes, and runs its side of the data path meanwhile.
 */
export async function perftestServer(dev: Device, kind: PerftestKind, listenIp: string, o: PerftestOptions = {}, onListening?: () => void): Promise<PerftestResult> {
  const { size, iters, txDepth, rxDepth } = sizes(kind, o);
  const c = initCtx(dev, kind, size, Math.max(txDepth, 2), rxDepth);
  const srv = net.createServer();
  await new Promise<void>((r) => srv.listen(o.port ?? 18515, listenIp, r));
  onListening?.();
  const s = await new Promise<net.Socket>((r) => srv.once('connection', r));
  srv.close();
  s.setNoDelay(true);
  const rd = new Reader(s);
  let test: Promise<PerftestResult> | undefined;
  let report = 0;
  try {
    const { mtu } = await preamble(s, false, c.mtu, o, rd);
    let handshakes = 0;
    for (;;) {
      const head = (await rd.peek(5)) ?? (await rd.peek(1));
      if (!head) break;
      const text = head.toString('latin1');
      if (text === 'done\0') {
        await rd.read(5);
        s.write(Buffer.from('done\0', 'latin1'));
        break;
      }
      if (/^[0-9a-f]{4}:/i.test(text)) {
        const msg = await rd.read(KEY_MSG_SIZE_GID);
        if (!msg) break;
        const rem = keysFromWire(msg);
        if (++handshakes === 1) {
          o.log?.(` remote address: LID ${rem.lid} QPN 0x${h(rem.qpn, 6)} PSN 0x${h(rem.psn, 6)} RKey 0x${h(rem.rkey, 8)} VAddr 0x${h(rem.vaddr, 16)} GID ${rem.gid}`);
          connect(c, rem, mtu);
          if (kind !== 'write_bw') for (let i = 0; i < Math.min(rxDepth, iters); i++) c.qp.postRecv({ wrId: 2, sgList: [c.mr.sge(size, Math.max(size, 1))] });
          test = runTest(c, kind, false, rem, size, iters, txDepth, rxDepth);
          test.catch(() => undefined);
        }
        s.write(keysToWire(c.me));
      } else {
        // xchg_bw_reports (write_bw): the passive RDMA WRITE target has measured nothing, so it
        // returns the client's own numbers (both sides then print the client's measurement);
        // a receiving server returns what it measured
        const theirs = await rd.read(8);
        if (!theirs) break;
        const r = test ? await test : undefined;
        s.write(kind === 'write_bw' || !r?.mbPerS ? theirs : reports(size, iters, r.mbPerS, r.mbPerS / size)[report % 5]!);
        report++;
      }
    }
    if (!test) throw new Error('the client never sent its QP information');
    return await test;
  } finally {
    s.destroy();
    c.qp.destroy();
  }
}

/** perftest client (`ib_send_bw <server>`) against a real server, following CLIENT_SEQ. */
export async function perftestClient(dev: Device, kind: PerftestKind, server: string, o: PerftestOptions = {}): Promise<PerftestResult> {
  const { size, iters, txDepth, rxDepth } = sizes(kind, o);
  const c = initCtx(dev, kind, size, Math.max(txDepth, 2), rxDepth);
  const s = await new Promise<net.Socket>((res, rej) => { const x = net.connect(o.port ?? 18515, server, () => res(x)); x.once('error', rej); });
  s.setNoDelay(true);
  const rd = new Reader(s);
  const keys = async (): Promise<Dest> => {
    s.write(keysToWire(c.me));
    const m = await rd.read(KEY_MSG_SIZE_GID);
    if (!m) throw new Error('server closed during the handshake');
    return keysFromWire(m);
  };
  try {
    const { mtu } = await preamble(s, true, c.mtu, o, rd);
    const seq = CLIENT_SEQ[kind];
    const rem = await keys();
    o.log?.(` remote address: LID ${rem.lid} QPN 0x${h(rem.qpn, 6)} PSN 0x${h(rem.psn, 6)} RKey 0x${h(rem.rkey, 8)} VAddr 0x${h(rem.vaddr, 16)} GID ${rem.gid}`);
    connect(c, rem, mtu);
    if (kind === 'send_lat') for (let i = 0; i < rxDepth; i++) c.qp.postRecv({ wrId: 2, sgList: [c.mr.sge(size, Math.max(size, 1))] });
    for (let i = 1; i < seq.pre; i++) await keys();
    const r = await runTest(c, kind, true, rem, size, iters, txDepth, rxDepth);
    for (const step of seq.post) {
      if (step === 'keys') await keys();
      else if (step === 'reports') {
        for (const b of reports(size, iters, r.mbPerS ?? 0, (r.mbPerS ?? 0) / size)) { s.write(b); if (!(await rd.read(8))) throw new Error('server closed during the reports'); }
      } else { s.write(Buffer.from('done\0', 'latin1')); await rd.read(5); }
    }
    return r;
  } finally {
    s.destroy();
    c.qp.destroy();
  }
}
