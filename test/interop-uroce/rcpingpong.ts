// rdma-core's ibv_rc_pingpong, both roles, on the verbs interface: the same TCP exchange of
// "LID:QPN:PSN:GID" (52 bytes with the NUL, libibverbs/examples/rc_pingpong.c), the same QP
// attributes (pp_connect_ctx), the same ping-pong of `size`-byte SENDs, so either side can
// be the real tool in a guest.
import net from 'node:net';
import {
  Access, QpState, SendFlags, WrOpcode, WcOpcode, WcStatus, gidBytes, gidText, wcStatusStr,
  type Device, type Mtu, type Qp, type Cq, type Mr,
} from '../../endpoint/verbs/index.js';

export interface PingpongOptions { port?: number; size?: number; iters?: number; mtu?: Mtu; rxDepth?: number; gidIndex?: number; log?: (s: string) => void }
export interface PingpongResult { bytes: number; seconds: number; mbitPerS: number; usecPerIter: number; peer: Dest }
export interface Dest { lid: number; qpn: number; psn: number; gid: string }

const MSG_LEN = 52; // sizeof "0000:000000:000000:00000000000000000000000000000000"
const RECV_WRID = 1, SEND_WRID = 2;

export function destToWire(d: Dest): Buffer {
  const g = Buffer.from(gidBytes(d.gid)).toString('hex');
  const s = `${d.lid.toString(16).padStart(4, '0')}:${d.qpn.toString(16).padStart(6, '0')}:${d.psn.toString(16).padStart(6, '0')}:${g}`;
  const b = Buffer.alloc(MSG_LEN);
  b.write(s, 'latin1');
  return b;
}

export function destFromWire(b: Buffer): Dest {
  const s = b.toString('latin1').replace(/\0.*$/s, '');
  const m = /^([0-9a-f]+):([0-9a-f]+):([0-9a-f]+):([0-9a-f]{32})$/i.exec(s);
  if (!m) throw new Error(`bad rc_pingpong address message: ${JSON.stringify(s)}`);
  return { lid: parseInt(m[1]!, 16), qpn: parseInt(m[2]!, 16), psn: parseInt(m[3]!, 16), gid: gidText(Uint8Array.from(Buffer.from(m[4]!, 'hex'))) };
}

/** Read exactly n bytes from a socket. */
export function readN(s: net.Socket, n: number, timeoutMs = 120_000): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    let buf = Buffer.alloc(0);
    const t = setTimeout(() => { done(); reject(new Error(`timeout reading ${n} bytes (got ${buf.length})`)); }, timeoutMs);
    const onData = (d: Buffer): void => {
      buf = Buffer.concat([buf, d]);
      if (buf.length >= n) { done(); if (buf.length > n) s.unshift(buf.subarray(n)); resolve(buf.subarray(0, n)); }
    };
    const onEnd = (): void => { done(); reject(new Error(`connection closed after ${buf.length} of ${n} bytes`)); };
    const done = (): void => { clearTimeout(t); s.off('data', onData); s.off('end', onEnd); s.off('error', onEnd); };
    s.on('data', onData);
    s.once('end', onEnd);
    s.once('error', onEnd);
  });
}

interface Ctx { qp: Qp; cq: Cq; mr: Mr; me: Dest }

function initCtx(dev: Device, size: number, rxDepth: number, gidIndex: number): Ctx {
  const pd = dev.allocPd();
  const mr = pd.regMr(new Uint8Array(size).fill(0x7b), Access.LOCAL_WRITE);
  const cq = dev.createCq(rxDepth + 1);
  const qp = pd.createQp({ sendCq: cq, recvCq: cq, cap: { maxSendWr: 1, maxRecvWr: rxDepth, maxSendSge: 1, maxRecvSge: 1 } });
  qp.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: 1, qpAccessFlags: 0 });
  return { qp, cq, mr, me: { lid: 0, qpn: qp.qpNum, psn: (Math.random() * 0xffffff) >>> 0, gid: dev.queryGid(1, gidIndex) } };
}

function connect(c: Ctx, rem: Dest, mtu: Mtu, gidIndex: number): void {
  c.qp.modify({
    qpState: QpState.RTR, pathMtu: mtu, destQpNum: rem.qpn, rqPsn: rem.psn, maxDestRdAtomic: 1, minRnrTimer: 12,
    ahAttr: { isGlobal: true, dlid: rem.lid, sl: 0, portNum: 1, grh: { dgid: rem.gid, sgidIndex: gidIndex, hopLimit: 1, trafficClass: 0, flowLabel: 0 } },
  });
  c.qp.modify({ qpState: QpState.RTS, timeout: 14, retryCnt: 7, rnrRetry: 7, sqPsn: c.me.psn, maxRdAtomic: 1 });
}

async function pingpong(c: Ctx, client: boolean, size: number, iters: number, rxDepth: number): Promise<{ seconds: number }> {
  const postRecv = (n: number): void => { for (let i = 0; i < n; i++) c.qp.postRecv({ wrId: RECV_WRID, sgList: [c.mr.sge(0, size)] }); };
  const postSend = (): void => c.qp.postSend({ wrId: SEND_WRID, opcode: WrOpcode.SEND, sgList: [c.mr.sge(0, size)], sendFlags: SendFlags.SIGNALED });
  let routs = rxDepth;
  let pending = RECV_WRID;
  if (client) { postSend(); pending |= SEND_WRID; }
  const t0 = performance.now();
  let rcnt = 0, scnt = 0;
  while (rcnt < iters || scnt < iters) {
    await c.cq.wait();
    for (const wc of c.cq.poll(2)) {
      if (wc.status !== WcStatus.SUCCESS) throw new Error(`Failed status ${wcStatusStr(wc.status)} (${wc.status}) for wr_id ${wc.wrId}`);
      if (wc.wrId === SEND_WRID) scnt++;
      else if (wc.wrId === RECV_WRID && wc.opcode === WcOpcode.RECV) {
        if (--routs <= 1) { postRecv(rxDepth - routs); routs = rxDepth; }
        rcnt++;
      }
      pending &= ~Number(wc.wrId);
      if (scnt < iters && !pending) { postSend(); pending = RECV_WRID | SEND_WRID; }
    }
  }
  return { seconds: (performance.now() - t0) / 1000 };
}

function result(size: number, iters: number, seconds: number, peer: Dest): PingpongResult {
  const bytes = size * iters * 2;
  return { bytes, seconds, mbitPerS: (bytes * 8) / seconds / 1e6, usecPerIter: (seconds * 1e6) / iters, peer };
}

/** ibv_rc_pingpong (server): listen, exchange addresses, ping-pong `iters` times. */
export async function rcPingpongServer(dev: Device, listenIp: string, o: PingpongOptions = {}, onListening?: () => void): Promise<PingpongResult> {
  const size = o.size ?? 4096, iters = o.iters ?? 1000, rxDepth = o.rxDepth ?? 500, gidIndex = o.gidIndex ?? 0, mtu = o.mtu ?? 3;
  const c = initCtx(dev, size, rxDepth, gidIndex);
  for (let i = 0; i < rxDepth; i++) c.qp.postRecv({ wrId: RECV_WRID, sgList: [c.mr.sge(0, size)] });
  const srv = net.createServer();
  await new Promise<void>((r) => srv.listen(o.port ?? 18515, listenIp, r));
  onListening?.();
  const sock = await new Promise<net.Socket>((r) => srv.once('connection', r));
  srv.close();
  sock.setNoDelay(true);
  const rem = destFromWire(await readN(sock, MSG_LEN));
  o.log?.(`  remote address: LID 0x${rem.lid.toString(16).padStart(4, '0')}, QPN 0x${rem.qpn.toString(16).padStart(6, '0')}, PSN 0x${rem.psn.toString(16).padStart(6, '0')}, GID ${rem.gid}`);
  connect(c, rem, mtu, gidIndex);
  sock.write(destToWire(c.me));
  await readN(sock, 5).catch(() => Buffer.alloc(0)); // "done\0"
  sock.destroy();
  const { seconds } = await pingpong(c, false, size, iters, rxDepth);
  c.qp.destroy();
  return result(size, iters, seconds, rem);
}

/** ibv_rc_pingpong <server> (client). */
export async function rcPingpongClient(dev: Device, server: string, o: PingpongOptions = {}): Promise<PingpongResult> {
  const size = o.size ?? 4096, iters = o.iters ?? 1000, rxDepth = o.rxDepth ?? 500, gidIndex = o.gidIndex ?? 0, mtu = o.mtu ?? 3;
  const c = initCtx(dev, size, rxDepth, gidIndex);
  for (let i = 0; i < rxDepth; i++) c.qp.postRecv({ wrId: RECV_WRID, sgList: [c.mr.sge(0, size)] });
  const sock = await new Promise<net.Socket>((res, rej) => { const s = net.connect(o.port ?? 18515, server, () => res(s)); s.once('error', rej); });
  sock.setNoDelay(true);
  sock.write(destToWire(c.me));
  const rem = destFromWire(await readN(sock, MSG_LEN));
  sock.write(Buffer.from('done\0', 'latin1'));
  sock.end();
  o.log?.(`  remote address: LID 0x${rem.lid.toString(16).padStart(4, '0')}, QPN 0x${rem.qpn.toString(16).padStart(6, '0')}, PSN 0x${rem.psn.toString(16).padStart(6, '0')}, GID ${rem.gid}`);
  connect(c, rem, mtu, gidIndex);
  const { seconds } = await pingpong(c, true, size, iters, rxDepth);
  c.qp.destroy();
  return result(size, iters, seconds, rem);
}
