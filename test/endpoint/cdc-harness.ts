// Test harness for the CDC data path over REAL RDMA: two uroce devices on loopback, one WrLink
// (endpoint/llc/wr.ts) on each brought up toward the other, RMBEs registered REMOTE_WRITE and
// send buffers LOCAL_WRITE, and a minimal CdcTransport (RDMA WRITE into the peer's RMBE + CDC
// SEND on the same link). Received 44-byte messages with type 0xFE are dispatched by token,
// like the link group does.

import { Access, type Device, type Mr, type Mtu, type Pd } from '../../endpoint/verbs/index.js';
import { WrLink, type PendingWrite } from '../../endpoint/llc/wr.js';
import { CdcConnection, type CdcConnectionOptions } from '../../endpoint/cdc/connection.js';
import type { CdcTransport } from '../../endpoint/cdc/transport.js';
import { u32 } from '../../dissectors/wire/common.js';
import { uroce, openPair } from '../verbs/harness.js';
import type { FaultConfig } from '../../endpoint/verbs/uroce/faults.js';

export interface Side {
  dev: Device;
  pd: Pd;
  link: WrLink;
  conns: Map<number, CdcConnection>;
  /** CDCs whose token named no connection (dropped, as Linux does). */
  unknownToken: number;
  logs: string[];
}

export interface LinkPair { A: Side; B: Side; close(): Promise<void> }

export async function linkPair(addrs: [string, string], o: { faults?: FaultConfig; sendSlots?: number } = {}): Promise<LinkPair> {
  const [da, db] = await openPair(uroce, addrs, o.faults ? { faults: o.faults } : {});
  const mk = (dev: Device): Side => {
    const pd = dev.allocPd();
    const link = new WrLink(pd, { bufSize: 64, ...(o.sendSlots ? { sendSlots: o.sendSlots } : {}) });
    const side: Side = { dev, pd, link, conns: new Map(), unknownToken: 0, logs: [] };
    link.on('message', (bytes: Uint8Array) => {
      if (bytes[0] !== 0xfe) return;
      const conn = side.conns.get(u32(bytes, 4));
      if (conn) conn.receiveCdc(bytes);
      else side.unknownToken++;
    });
    return side;
  };
  const A = mk(da), B = mk(db);
  const mtu = Math.min(da.queryPort(1).activeMtu, db.queryPort(1).activeMtu) as Mtu;
  A.link.init(); B.link.init();
  A.link.rtr({ qpn: B.link.qpn, psn: B.link.psn, gid: db.queryGid(1, 0), mtu });
  B.link.rtr({ qpn: A.link.qpn, psn: A.link.psn, gid: da.queryGid(1, 0), mtu });
  A.link.rts(); B.link.rts();
  return {
    A, B,
    async close() {
      for (const s of [A, B]) { s.link.destroy(); }
      await da.close(); await db.close();
    },
  };
}

export interface ConnEnd {
  conn: CdcConnection;
  rmb: Mr;
  snd: Mr;
  token: number;
}

let nextToken = 0x100;

/**
 * One SMC-R connection between the two sides: buffers registered as the link group would,
 * a transport per side, and the connections registered under their tokens.
 */
export function connPair(p: LinkPair, o: { rmbeA?: number; rmbeB?: number; sndA?: number; sndB?: number; opts?: Partial<CdcConnectionOptions> } = {}): { a: ConnEnd; b: ConnEnd } {
  const rmbeA = o.rmbeA ?? 16384, rmbeB = o.rmbeB ?? 16384;
  const tA = nextToken++, tB = nextToken++;
  const rmbA = p.A.pd.regMr(new Uint8Array(rmbeA), Access.LOCAL_WRITE | Access.REMOTE_WRITE);
  const rmbB = p.B.pd.regMr(new Uint8Array(rmbeB), Access.LOCAL_WRITE | Access.REMOTE_WRITE);
  const sndA = p.A.pd.regMr(new Uint8Array(o.sndA ?? rmbeB), Access.LOCAL_WRITE);
  const sndB = p.B.pd.regMr(new Uint8Array(o.sndB ?? rmbeA), Access.LOCAL_WRITE);
  // As the link group does (linkgroup.ts sendCdcFor): writes are queued and posted with their CDC.
  const transport = (from: Side, snd: Mr, peerRmb: Mr): CdcTransport => {
    const queued: PendingWrite[] = [];
    return {
      write: (srcOff, len, dstOff) => { queued.push({ mr: snd, off: srcOff, len, remoteAddr: peerRmb.addr + BigInt(dstOff), rkey: peerRmb.rkey }); },
      sendCdc: (msg) => from.link.sendWithWrites(queued.splice(0), msg),
    };
  };
  const a = new CdcConnection({
    localToken: tA, peerToken: tB, buffers: { rmbe: rmbA.buffer, sndbuf: sndA, peerRmbeSize: rmbeB },
    transport: transport(p.A, sndA, rmbB), log: (l) => p.A.logs.push(l), ...o.opts,
  });
  const b = new CdcConnection({
    localToken: tB, peerToken: tA, buffers: { rmbe: rmbB.buffer, sndbuf: sndB, peerRmbeSize: rmbeA },
    transport: transport(p.B, sndB, rmbA), log: (l) => p.B.logs.push(l), ...o.opts,
  });
  p.A.conns.set(tA, a);
  p.B.conns.set(tB, b);
  return { a: { conn: a, rmb: rmbA, snd: sndA, token: tA }, b: { conn: b, rmb: rmbB, snd: sndB, token: tB } };
}

/** Write all of `data` (waiting for 'writable' when the send buffer is full). */
export async function writeAll(c: CdcConnection, data: Uint8Array, chunk = 65536): Promise<void> {
  let off = 0;
  while (off < data.length) {
    const n = c.write(data.subarray(off, Math.min(data.length, off + chunk)));
    off += n;
    if (n === 0) await new Promise<void>((resolve, reject) => {
      const ok = (): void => { c.off('abort', bad); resolve(); };
      const bad = (r: string): void => { c.off('writable', ok); reject(new Error(`aborted: ${r}`)); };
      c.once('writable', ok);
      c.once('abort', bad);
    });
  }
}

/** Read until `n` bytes arrived (or 'end'), feeding a hash/collector. */
export async function readN(c: CdcConnection, n: number, sink: (b: Uint8Array) => void, max = 65536): Promise<number> {
  let got = 0;
  while (got < n) {
    const b = c.read(Math.min(max, n - got));
    if (b) { sink(b); got += b.length; continue; }
    if (c.peerDone && c.readableLength === 0) break;
    await new Promise<void>((resolve, reject) => {
      const done = (): void => { c.off('readable', done); c.off('end', done); c.off('abort', bad); resolve(); };
      const bad = (r: string): void => { c.off('readable', done); c.off('end', done); reject(new Error(`aborted: ${r}`)); };
      c.once('readable', done);
      c.once('end', done);
      c.once('abort', bad);
    });
  }
  return got;
}

export function waitEvent<T = unknown>(e: NodeJS.EventEmitter, name: string, ms = 10_000): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`timeout waiting for '${name}'`)), ms);
    e.once(name, (v: T) => { clearTimeout(t); resolve(v); });
  });
}

// ---- failover: two links between the same two endpoints ---------------------------------
//
// Four uroce devices on one loopback /24 (A1 .1, B1 .2, A2 .3, B2 .4): link i is the RC QP
// pair A(i) ↔ B(i), the way an SMC-R link group holds one link per RoCE device pair. Each
// connection's RMB and send buffer are registered on both sides' PDs (the same memory, one rkey
// per link, as Linux registers an RMB per link), and its transport routes write()/sendCdc() to
// the side's current link. Messages from either link are dispatched by token. When a link of a
// side goes down, the side acts as the link group does: the current link moves to a surviving
// link and every connection gets switchLink(); with none left, linkDown().

export interface FoSide {
  name: 'A' | 'B';
  devs: Device[];
  pds: Pd[];
  links: WrLink[];
  /** Index of the link the transports use now. */
  current: number;
  conns: Map<number, CdcConnection>;
  unknownToken: number;
  logs: string[];
  /** Link-down events as the side saw them: link index, reason, ms since the rig was built. */
  downs: Array<{ link: number; reason: string; at: number }>;
  /** 'failover': switch links / linkDown() on a link-down event; 'none': the test decides. */
  policy: 'failover' | 'none';
}

export interface FoRig { A: FoSide; B: FoSide; addrs: string[]; close(): Promise<void> }

export async function failoverRig(o: { links?: number; policy?: 'failover' | 'none'; faults?: FaultConfig; sendSlots?: number } = {}): Promise<FoRig> {
  const nLinks = o.links ?? 2;
  const t0 = performance.now();
  // 127.0.8x.1-4 first, further /24s if another process holds UDP 4791 there
  let devs: Device[] = [];
  let addrs: string[] = [];
  let last: unknown;
  for (let n = 80; n < 120 && devs.length < 2 * nLinks; n++) {
    devs = [];
    addrs = Array.from({ length: 2 * nLinks }, (_, i) => `127.0.${n}.${i + 1}`);
    try {
      for (const a of addrs) devs.push(await uroce.open(a, o.faults ? { faults: o.faults } : {}));
    } catch (e) {
      last = e;
      for (const d of devs) await d.close();
      devs = [];
      if ((e as { code?: string }).code !== 'EADDRINUSE') throw e;
    }
  }
  if (devs.length < 2 * nLinks) throw last;
  const mk = (name: 'A' | 'B', mine: Device[]): FoSide => {
    const side: FoSide = { name, devs: mine, pds: [], links: [], current: 0, conns: new Map(), unknownToken: 0, logs: [], downs: [], policy: o.policy ?? 'failover' };
    for (const [i, dev] of mine.entries()) {
      const pd = dev.allocPd();
      const link = new WrLink(pd, { bufSize: 64, ...(o.sendSlots ? { sendSlots: o.sendSlots } : {}) });
      link.on('message', (bytes: Uint8Array) => {
        if (bytes[0] !== 0xfe) return;
        const conn = side.conns.get(u32(bytes, 4));
        if (conn) conn.receiveCdc(bytes);
        else side.unknownToken++;
      });
      link.on('down', (reason: string) => {
        side.downs.push({ link: i, reason, at: performance.now() - t0 });
        if (side.policy !== 'failover' || i !== side.current) return;
        const next = side.links.findIndex((l) => !l.isDown);
        if (next >= 0) {
          side.current = next;
          for (const c of side.conns.values()) c.switchLink();
        } else {
          for (const c of side.conns.values()) c.linkDown(reason);
        }
      });
      side.pds.push(pd);
      side.links.push(link);
    }
    return side;
  };
  const A = mk('A', devs.filter((_, i) => i % 2 === 0));
  const B = mk('B', devs.filter((_, i) => i % 2 === 1));
  for (let i = 0; i < nLinks; i++) {
    const la = A.links[i]!, lb = B.links[i]!, da = A.devs[i]!, db = B.devs[i]!;
    const mtu = Math.min(da.queryPort(1).activeMtu, db.queryPort(1).activeMtu) as Mtu;
    la.init(); lb.init();
    la.rtr({ qpn: lb.qpn, psn: lb.psn, gid: db.queryGid(1, 0), mtu });
    lb.rtr({ qpn: la.qpn, psn: la.psn, gid: da.queryGid(1, 0), mtu });
    la.rts(); lb.rts();
  }
  return {
    A, B, addrs,
    async close() {
      for (const s of [A, B]) for (const l of s.links) l.destroy();
      for (const d of devs) await d.close();
    },
  };
}

/** One connection over a failover rig: buffers registered on every link's PD, transports that follow `side.current`. */
export function foConnPair(r: FoRig, o: { rmbeA?: number; rmbeB?: number; sndA?: number; sndB?: number; opts?: Partial<CdcConnectionOptions> } = {}): { a: CdcConnection; b: CdcConnection; tokenA: number; tokenB: number } {
  const rmbeA = o.rmbeA ?? 16384, rmbeB = o.rmbeB ?? 16384;
  const tA = nextToken++, tB = nextToken++;
  const reg = (s: FoSide, buf: Uint8Array, access: number): Mr[] => s.pds.map((pd) => pd.regMr(buf, access));
  const rmbA = reg(r.A, new Uint8Array(rmbeA), Access.LOCAL_WRITE | Access.REMOTE_WRITE);
  const rmbB = reg(r.B, new Uint8Array(rmbeB), Access.LOCAL_WRITE | Access.REMOTE_WRITE);
  const sndA = reg(r.A, new Uint8Array(o.sndA ?? rmbeB), Access.LOCAL_WRITE);
  const sndB = reg(r.B, new Uint8Array(o.sndB ?? rmbeA), Access.LOCAL_WRITE);
  // Writes are queued and posted with their CDC on the link current at send time (as the link group does).
  const transport = (from: FoSide, snd: Mr[], peerRmb: Mr[]): CdcTransport => {
    const queued: Array<{ srcOff: number; len: number; dstOff: number }> = [];
    return {
      write: (srcOff, len, dstOff) => { queued.push({ srcOff, len, dstOff }); },
      sendCdc: (msg) => {
        const i = from.current;
        const ws = queued.splice(0).map((w) => ({ mr: snd[i]!, off: w.srcOff, len: w.len, remoteAddr: peerRmb[i]!.addr + BigInt(w.dstOff), rkey: peerRmb[i]!.rkey }));
        return from.links[i]!.sendWithWrites(ws, msg);
      },
    };
  };
  const a = new CdcConnection({
    localToken: tA, peerToken: tB, buffers: { rmbe: rmbA[0]!.buffer, sndbuf: sndA[0]!, peerRmbeSize: rmbeB },
    transport: transport(r.A, sndA, rmbB), log: (l) => r.A.logs.push(l), ...o.opts,
  });
  const b = new CdcConnection({
    localToken: tB, peerToken: tA, buffers: { rmbe: rmbB[0]!.buffer, sndbuf: sndB[0]!, peerRmbeSize: rmbeA },
    transport: transport(r.B, sndB, rmbA), log: (l) => r.B.logs.push(l), ...o.opts,
  });
  r.A.conns.set(tA, a);
  r.B.conns.set(tB, b);
  return { a, b, tokenA: tA, tokenB: tB };
}
