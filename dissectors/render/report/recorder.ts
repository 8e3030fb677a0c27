// What the HTML report (`smcdump --report`) draws over time, collected beside the tracker: one
// ladder row per frame, per connection and direction the cursor points of every CDC and the
// RDMA WRITE segments, per link packets/bytes/retransmissions/NAKs in time buckets. The tracker
// keeps only current state; this recorder observes each frame after Tracker.feed (the FrameNote
// names link, connection and direction; the tracker's state then holds the cursors) so only
// --report pays for it. Memory is bounded: ladder rows are compact columns (a few numbers per
// frame), cursor series are halved beyond MAX_POINTS (flagged points are kept), link buckets
// double their width beyond MAX_BUCKETS.

import type { DecodedFrame } from '../../frame.js';
import type { FrameNote, Link, SmcConn } from '../../tracker/model.js';
import type { Tracker } from '../../tracker/tracker.js';
import { opcodeInfo } from '../../wire/ib.js';
import { gidOfIp } from '../../wire/common.js';

/** Cursor points kept per connection direction before halving. */
export const MAX_POINTS = 20_000;
/** WRITE segments kept per connection direction before halving (merging neighbours). */
const MAX_WRITES = 20_000;
/** Time buckets per link before doubling the bucket width. */
export const MAX_BUCKETS = 2_000;
/** Ladder rows kept (one per frame with addresses); beyond, frames are counted, not drawn. */
const MAX_ROWS = 400_000;

const FLAG_ALERT = 1, FLAG_RETX = 2, FLAG_URG = 8, FLAG_FAILOVER = 16, FLAG_CLOSE = 32;
/** Write-blocked flag bit (the recorder test reads rows by it). */
export const FLAG_WB = 4;

/** Row kinds (lane style in the ladder). */
export const KINDS = ['tcp', 'clc', 'llc', 'cdc', 'write', 'ack', 'nak', 'roce'] as const;
export type RowKind = typeof KINDS[number];

export interface DirSeries {
  /** Time (ns since the first frame), producer and consumer cursor (linear stream bytes), flags. */
  t: number[]; prod: number[]; cons: number[]; flags: number[];
  /** How many points were seen (t.length is fewer after halving). */
  seen: number;
  /** RDMA WRITE segments (one per WRITE operation, FIRST…LAST): start time, end time, stream position of the first byte, length. */
  wt: number[]; wt1: number[]; wy: number[]; wlen: number[];
  writesSeen: number;
  /** Write bytes not yet announced by a CDC (places the next segment above the producer cursor). */
  pending: number;
}

export interface LinkSeries {
  name: string;
  bucketNs: number;
  /** Per bucket, per direction (0 = client → server): packets, payload bytes, retransmissions, NAKs (sent by the receiver). */
  pkts: [number[], number[]]; bytes: [number[], number[]]; retx: [number[], number[]]; naks: [number[], number[]];
}

function newDir(): DirSeries {
  return { t: [], prod: [], cons: [], flags: [], seen: 0, wt: [], wt1: [], wy: [], wlen: [], writesSeen: 0, pending: 0 };
}

export class ReportRecorder {
  t0?: bigint;
  /** Ladder rows, as columns: time, frame number and style (index into `styles`). */
  readonly rows = { tNs: [] as number[], frame: [] as number[], style: [] as number[] };
  /** Distinct row looks: [from host, to host, kind, label, link (-1 none), conn (0 none), dir (-1 none), flags]. */
  readonly styles: number[][] = [];
  private readonly styleIx = new Map<string, number>();
  rowsDropped = 0;
  readonly hosts: string[] = [];
  private lastHost: [string, number, string, number] = ['', -1, '', -1];
  readonly labels: string[] = [];
  private readonly labelIx = new Map<string, number>();
  readonly linkNames: string[] = [];
  private readonly linkIx = new Map<string, number>();
  /** Per SMC connection index: the two directions. */
  readonly conns = new Map<number, [DirSeries, DirSeries]>();
  readonly links = new Map<string, LinkSeries>();
  private readonly byIndex = new Map<number, SmcConn>();
  private readonly linkCache = new Map<string, Link>();

  constructor(private readonly tracker: Tracker) {}

  private host(h: string): number {
    if (h === this.lastHost[0]) return this.lastHost[1];
    if (h === this.lastHost[2]) return this.lastHost[3];
    let i = this.hosts.indexOf(h);
    if (i < 0) { i = this.hosts.length; this.hosts.push(h); }
    this.lastHost = [h, i, this.lastHost[0], this.lastHost[1]];
    return i;
  }

  private label(s: string): number {
    let i = this.labelIx.get(s);
    if (i === undefined) { i = this.labels.length; this.labels.push(s); this.labelIx.set(s, i); }
    return i;
  }

  private linkOf(name: string | undefined): number {
    if (name === undefined) return -1;
    let i = this.linkIx.get(name);
    if (i === undefined) { i = this.linkNames.length; this.linkNames.push(name); this.linkIx.set(name, i); }
    return i;
  }

  private conn(index: number): SmcConn | undefined {
    let c = this.byIndex.get(index);
    if (c) return c;
    for (const t of this.tracker.tcp) if (t.smc) this.byIndex.set(t.smc.index, t.smc);
    for (const o of this.tracker.orphanConns) this.byIndex.set(o.index, o);
    c = this.byIndex.get(index);
    return c;
  }

  /** Observe one frame after Tracker.feed returned `note` for it. */
  add(d: DecodedFrame, note: FrameNote): void {
    this.t0 ??= d.tsNs;
    const tNs = Number(d.tsNs - this.t0);
    const src = d.ip?.src ?? d.roce?.grh?.sgid;
    const dst = d.ip?.dst ?? d.roce?.grh?.dgid;
    let kind: RowKind = 'tcp';
    let text: string;
    let flags = note.anomalies.some((a) => a.severity !== 'note') ? FLAG_ALERT : 0;
    if (note.retransmission) flags |= FLAG_RETX;
    const r = d.roce;
    const dirIx = note.dir === 'c>s' ? 0 : note.dir === 's>c' ? 1 : -1;
    if (d.tcp) {
      const h = d.tcp;
      const clc = d.smc.filter((i) => i.proto === 'clc');
      const opt = d.smc.some((i) => i.proto === 'tcpopt') ? ' [smc-r]' : '';
      if (clc.length > 0) { kind = 'clc'; text = clc.map((c) => c.summary.split(' ').slice(0, 3).join(' ')).join(', '); }
      else if (h.flags.syn) text = (h.flags.ack ? 'SYN-ACK' : 'SYN') + opt;
      else if (h.flags.rst) { text = 'RST'; flags |= FLAG_CLOSE; }
      else if (h.flags.fin) { text = 'FIN'; flags |= FLAG_CLOSE; }
      else if (d.payloadLength > 0) text = `TCP data ${d.payloadLength}B`;
      else text = 'TCP ACK';
    } else if (r) {
      const info = opcodeInfo(r.ib.bth.opcode);
      const psn = r.ib.bth.psn;
      if (info.isAck) {
        const a = r.ib.aeth;
        if (a && a.kind !== 'ACK') { kind = 'nak'; text = `${a.kind} PSN ${psn}`; flags |= FLAG_ALERT; }
        else { kind = 'ack'; text = 'ACK'; }
      } else if (info.isWrite) {
        kind = 'write';
        text = note.retransmission ? `retransmitted RDMA WRITE ${r.ib.payload.length}B PSN ${psn}` : `RDMA WRITE ${info.isOnly ? 'ONLY' : info.isFirst ? 'FIRST' : info.isLast ? 'LAST' : 'MIDDLE'} ${r.ib.payload.length}B`;
      } else {
        const parts: string[] = [];
        for (const i of d.smc) {
          if (i.proto === 'llc') { kind = 'llc'; parts.push('LLC ' + i.summary.replace(/^LLC /, '').replace(/ (link|n|qp|data) .*$/, '')); }
          else if (i.proto === 'cdc') {
            kind = 'cdc';
            const v = i.value;
            const f = [v.prodFlags.writeBlocked ? 'wb' : '', v.prodFlags.urgentPresent ? 'urg' : '', v.prodFlags.failoverValidation ? 'failover' : '',
              v.connFlags.peerDoneWriting ? 'done' : '', v.connFlags.peerConnClosed ? 'closed' : '', v.connFlags.peerConnAbort ? 'abort' : ''].filter(Boolean);
            if (v.prodFlags.writeBlocked) flags |= FLAG_WB;
            if (v.prodFlags.urgentPresent) flags |= FLAG_URG;
            if (v.prodFlags.failoverValidation) flags |= FLAG_FAILOVER;
            if (v.connFlags.peerConnClosed || v.connFlags.peerConnAbort || v.connFlags.peerDoneWriting) flags |= FLAG_CLOSE;
            // flags first: a label clipped to its lanes still shows [failover] or [wb]
            parts.push(`CDC${f.length ? ' [' + f.join(',') + ']' : ''} seq ${v.seq} prod ${v.prod.wrap}:${v.prod.count} cons ${v.cons.wrap}:${v.cons.count}`);
          }
        }
        if (parts.length === 0) { kind = 'roce'; parts.push(info.name); }
        text = (note.retransmission ? 'retransmitted ' : '') + parts.join(', ');
      }
      this.linkSample(note.link, d, tNs, kind, note.retransmission === true);
    } else return;
    if (src !== undefined && dst !== undefined) {
      if (this.rows.tNs.length < MAX_ROWS) {
        const R = this.rows;
        R.tNs.push(tNs); R.frame.push(d.n);
        const from = this.host(src), to = this.host(dst), lb = this.label(text), ln = this.linkOf(note.link), cn = note.conn ?? 0;
        // the label already names the kind; the key is built without an array (per-frame cost)
        const key = `${lb} ${from} ${to} ${ln} ${cn} ${dirIx} ${flags}`;
        let si = this.styleIx.get(key);
        if (si === undefined) { si = this.styles.length; this.styles.push([from, to, KINDS.indexOf(kind), lb, ln, cn, dirIx, flags]); this.styleIx.set(key, si); }
        R.style.push(si);
      } else this.rowsDropped++;
    }
    if (note.conn === undefined || note.retransmission) return;
    if (kind === 'cdc') this.cdcPoints(note.conn, tNs, flags, dirIx);
    else if (kind === 'write' && dirIx >= 0) this.writeSegment(note.conn, dirIx as 0 | 1, tNs, r!.ib.payload.length, r!.ib.reth === undefined);
  }

  private series(index: number): [DirSeries, DirSeries] {
    let s = this.conns.get(index);
    if (!s) { s = [newDir(), newDir()]; this.conns.set(index, s); }
    return s;
  }

  /** After a CDC of a connection: both directions' cursors as the tracker has them now. */
  private cdcPoints(index: number, tNs: number, cdcFlags: number, writer: number): void {
    const c = this.conn(index);
    if (!c) return;
    const s = this.series(index);
    for (const k of [0, 1] as const) {
      const w = c.dirs[k], ds = s[k];
      // the CDC's flags (write blocked, urgent) are its writer's; the failover mark is the connection's
      const flags = k === writer ? cdcFlags : cdcFlags & FLAG_FAILOVER;
      const n = ds.t.length;
      // a CDC moves one direction's producer and the other's consumer: skip unchanged points
      if (n > 0 && ds.prod[n - 1] === w.prodLinear && ds.cons[n - 1] === w.consLinear && (flags & (FLAG_WB | FLAG_URG | FLAG_FAILOVER)) === 0) continue;
      if (ds.prod[n - 1] !== w.prodLinear) ds.pending = 0;
      ds.t.push(tNs); ds.prod.push(w.prodLinear); ds.cons.push(w.consLinear); ds.flags.push(flags);
      ds.seen++;
      if (ds.t.length > MAX_POINTS) halvePoints(ds);
    }
  }

  /** One RDMA WRITE packet; `cont`: a MIDDLE/LAST packet that continues the WRITE operation. */
  private writeSegment(index: number, dir: 0 | 1, tNs: number, len: number, cont: boolean): void {
    const c = this.conn(index);
    if (!c || len === 0) return;
    const ds = this.series(index)[dir];
    const y = c.dirs[dir].prodLinear + ds.pending;
    ds.pending += len;
    const n = ds.wt.length;
    if (cont && n > 0 && ds.wy[n - 1]! + ds.wlen[n - 1]! === y) { ds.wlen[n - 1]! += len; ds.wt1[n - 1] = tNs; return; }
    ds.writesSeen++;
    ds.wt.push(tNs); ds.wt1.push(tNs); ds.wy.push(y); ds.wlen.push(len);
    if (ds.wt.length > MAX_WRITES) halveWrites(ds);
  }

  /** The newest link of that name (names are reused after a link is deleted). */
  private linkByName(name: string): Link | undefined {
    const l = this.linkCache.get(name);
    if (l && l.state !== 'deleted' && l.state !== 'lost' && l.state !== 'failed') return l;
    let found: Link | undefined;
    for (const g of this.tracker.groups) for (const x of g.links) if (x.name === name) found = x;
    if (found) this.linkCache.set(name, found);
    return found;
  }

  private linkSample(name: string | undefined, d: DecodedFrame, tNs: number, kind: RowKind, retx: boolean): void {
    if (name === undefined) return;
    let l = this.links.get(name);
    if (!l) {
      l = { name, bucketNs: 1_000_000, pkts: [[], []], bytes: [[], []], retx: [[], []], naks: [[], []] };
      this.links.set(name, l);
    }
    let b = Math.floor(tNs / l.bucketNs);
    while (b >= MAX_BUCKETS) { widen(l); b = Math.floor(tNs / l.bucketNs); }
    // direction: the link's end 0 is the client side; RoCE frames name their sender by address
    const link = this.linkByName(name);
    const r = d.roce!;
    const srcGid = r.grh ? r.grh.sgid : d.ip ? gidOfIp(d.ip.src) : undefined;
    const dir = link && srcGid !== undefined && link.ends[1].gid === srcGid ? 1 : 0;
    const add = (a: [number[], number[]], k: number, v: number): void => {
      const arr = a[k]!;
      while (arr.length <= b) arr.push(0);
      arr[b]! += v;
    };
    add(l.pkts, dir, 1);
    add(l.bytes, dir, d.roce?.ib.payload.length ?? 0);
    if (retx) add(l.retx, dir, 1);
    // a NAK is sent by the receiver about the other direction's requests
    if (kind === 'nak') add(l.naks, 1 - dir, 1);
  }
}

function halvePoints(ds: DirSeries): void {
  const keep = (i: number): boolean => i % 2 === 0 || (ds.flags[i]! & (FLAG_WB | FLAG_URG | FLAG_FAILOVER)) !== 0 || i === ds.t.length - 1;
  const t: number[] = [], p: number[] = [], c: number[] = [], f: number[] = [];
  for (let i = 0; i < ds.t.length; i++) if (keep(i)) { t.push(ds.t[i]!); p.push(ds.prod[i]!); c.push(ds.cons[i]!); f.push(ds.flags[i]!); }
  ds.t = t; ds.prod = p; ds.cons = c; ds.flags = f;
}

function halveWrites(ds: DirSeries): void {
  const t: number[] = [], t1: number[] = [], y: number[] = [], l: number[] = [];
  for (let i = 0; i < ds.wt.length; i += 2) {
    const j = i + 1 < ds.wt.length && ds.wy[i + 1]! >= ds.wy[i]! ? i + 1 : i;
    t.push(ds.wt[i]!); t1.push(ds.wt1[j]!); y.push(ds.wy[i]!);
    l.push(Math.max(ds.wlen[i]!, ds.wy[j]! + ds.wlen[j]! - ds.wy[i]!));
  }
  ds.wt = t; ds.wt1 = t1; ds.wy = y; ds.wlen = l;
}

function widen(l: LinkSeries): void {
  l.bucketNs *= 2;
  for (const a of [l.pkts, l.bytes, l.retx, l.naks]) {
    for (let k = 0; k < 2; k++) {
      const src = a[k]!, dst: number[] = [];
      for (let i = 0; i < src.length; i += 2) dst.push(src[i]! + (src[i + 1] ?? 0));
      a[k] = dst;
    }
  }
}

/** RoCEv2 over IPv4 uses IPv4-mapped GIDs (as the tracker names link ends). */
