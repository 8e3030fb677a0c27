// Capture ↔ endpoint state (`smcdump --state`): joins what the wire shows with what one of our SMC-R endpoints
// believes (its state snapshot, schema endpoint/state.ts, served by endpoint/control.ts).
//
// Frames are labelled with the endpoint's own names — its link group and link ("LG2/L1"),
// its connection key ("LG2/5") and the direction as the endpoint sees it ('out' = sent by the
// endpoint, 'in' = received) — matched by (GID, QPN) for links and by alert token / rkey for
// connections. At the end every disagreement between wire and state is an anomaly with a
// stable code that names both values:
//
//   state.cursor   last CDC's producer/consumer cursor each way vs the connection's tx/rx state
//   state.seq      last CDC sequence number each way vs tx.seq / rx.seq
//   state.flags    CDC flags (write blocked, done, closed, abort) vs the connection's flags
//   state.rkey     RDMA WRITE rkeys vs the endpoint's rtokens (out) and RMBs (in)
//   state.addr     RDMA WRITE addresses outside the RMB the endpoint knows for that rkey
//   state.qpn      QPNs in CONFIRM LINK / ADD LINK vs the link's QPN and its peer's QPN
//   state.gid / state.mac  addresses in CONFIRM LINK / ADD LINK vs the link's
//   state.psn      initial PSNs (first packet of a link each way; ADD LINK) vs the link's PSNs
//   state.link     link id/uid and link (group) state: e.g. ACTIVE here, deleted on the wire
//   state.counter  link and connection counters vs messages on the wire (only when the capture
//                  holds the whole link/connection: from its first packet, without gaps)
//   state.conn     CDCs for a token the endpoint has no connection for
//
// The wire side is kept keyed by wire identities (destination GID+QPN, token), so the state may
// be replaced while frames flow (live: a newer snapshot) and the comparison uses the last one.
// Pure: no I/O; never throws on a malformed state (parseEndpointState reports it in one line).

import type { DecodedFrame } from '../dissectors/frame.js';
import type { EndpointState, EpConn, EpCursor } from './stateread.js';
import type { Anomaly } from '../dissectors/tracker/model.js';
import { hex32, type Severity } from '../dissectors/wire/common.js';
import type { CdcCursor, CdcMessage } from '../dissectors/wire/cdc.js';
import { seqNewer } from '../dissectors/wire/cdcrules.js';
import type { LlcMessage } from '../dissectors/wire/llc.js';
import { opcodeInfo } from '../dissectors/wire/ib.js';

// ---------------------------------------------------------------------------------------------
// The wire side
// ---------------------------------------------------------------------------------------------

interface Seen { frame: number; tsNs: bigint }
interface WireLlc extends Seen { m: LlcMessage; psn: number }
interface WriteRange { minVa: bigint; maxEnd: bigint; frame: number; tsNs: bigint; count: number }

/** Requests received by one QP (destination GID + QPN): one direction of a link. */
interface QpDir {
  dstGid: string;
  srcGid: string;
  qpn: number;
  frames: number;
  first: Seen;
  last: Seen;
  /** First request packet seen and whether it was a CONFIRM LINK (then: the link's first packet). */
  firstReq?: { psn: number; frame: number; tsNs: bigint; confirmLink: boolean };
  nextPsn?: number;
  gaps: number;
  /** Messages (not packets), retransmissions excluded. */
  sends: number;
  writes: number;
  writeBytes: number;
  llc: WireLlc[];
  /** RDMA WRITE in progress (MIDDLE/LAST have no RETH). */
  cont?: { rkey: number; va: bigint };
  /** WRITEs since the last CDC on this QP, attributed to the connection of the next CDC. */
  pending: Array<{ rkey: number; va: bigint; len: number } & Seen>;
  /** All WRITEs by rkey (for the RMB checks). */
  byRkey: Map<number, WriteRange>;
  /** rkey → token of the connection whose CDC followed its WRITEs (latest). */
  rkeyToken: Map<number, number>;
}

/** CDCs for one token through one QP. */
interface WireConn {
  qp: QpDir;
  token: number;
  count: number;
  firstSeq: number;
  seqGaps: number;
  /** Last CDC accepted in sequence order (what the receiver keeps). */
  last?: { m: CdcMessage } & Seen;
  done: boolean;
  closed: boolean;
  abort: boolean;
  /** RDMA WRITEs attributed to this connection, by rkey. */
  writes: Map<number, WriteRange>;
}

/** What a frame is, in the endpoint's names. */
export interface EpLabel {
  linkGroup: string;
  link: string;
  dir: 'in' | 'out';
  conn?: string;
}

export interface StateJoinOptions {
  /** Live capture: the state is read while traffic may flow; disagreements on objects with
   *  traffic within `settleMs` of the snapshot are notes ("in flight"), not errors. */
  live?: boolean;
  settleMs?: number;
}

const MAX_PENDING = 256;
const PSN_HALF = 0x800000;

export class StateJoin {
  private state: EndpointState;
  private readonly qps = new Map<string, QpDir>();
  private readonly conns = new Map<string, WireConn>();
  frames = 0;
  /** A frame named something the state does not know yet (live: time to ask for a newer one). */
  stale = false;
  firstTs?: bigint;
  lastTs = 0n;
  // names (from every state seen, so frames keep their labels after a link or connection is gone)
  private readonly qpNames = new Map<string, { lg: string; link: string; dir: 'in' | 'out' }>();
  private readonly connNames = new Map<string, string>();
  /** "LG|rkey" → the live connection (and since when) whose rtoken it is, from the last state only (RMBs are reused). */
  private rtokenNames = new Map<string, { key: string; sinceNs?: bigint }>();

  constructor(state: EndpointState, private readonly opts: StateJoinOptions = {}) {
    this.state = state;
    this.index(state);
  }

  /** Replace the state (a newer snapshot); labels learned from older ones are kept. */
  update(state: EndpointState): void {
    this.state = state;
    this.stale = false;
    this.index(state);
  }

  get current(): EndpointState { return this.state; }

  private index(s: EndpointState): void {
    if (this.qpNames.size > 100_000) { this.qpNames.clear(); this.connNames.clear(); }
    this.rtokenNames = new Map();
    const since = new Map<string, bigint>();
    for (const c of s.connections) {
      const t = c.since !== undefined ? Date.parse(c.since) : NaN;
      if (!c.closed && Number.isFinite(t)) since.set(c.key, BigInt(t) * 1_000_000n);
    }
    for (const g of s.linkGroups) {
      for (const l of g.links) {
        const name = `${g.name}/L${l.id}`;
        this.qpNames.set(`${l.gid}|${l.qpn}`, { lg: g.name, link: name, dir: 'in' });
        if (l.peer) this.qpNames.set(`${l.peer.gid}|${l.peer.qpn}`, { lg: g.name, link: name, dir: 'out' });
      }
      for (const c of g.conns) {
        const key = `${g.name}/${c.token}`;
        const e: { key: string; sinceNs?: bigint } = { key };
        const t = since.get(key);
        if (t !== undefined) e.sinceNs = t;
        for (const r of c.rtokens) this.rtokenNames.set(`${g.name}|${r.rkey}`, e);
      }
    }
    for (const c of s.connections) {
      this.connNames.set(`${c.linkGroup}|in|${c.localToken}`, c.key);
      this.connNames.set(`${c.linkGroup}|out|${c.peerToken}`, c.key);
    }
  }

  /** Feed one decoded frame (capture order); returns its label in the endpoint's names. */
  feed(d: DecodedFrame): EpLabel | undefined {
    this.frames++;
    this.firstTs ??= d.tsNs;
    this.lastTs = d.tsNs;
    const r = d.roce;
    if (!r) return undefined;
    const srcGid = r.grh ? r.grh.sgid : d.ip ? gidOf(d.ip.src) : undefined;
    const dstGid = r.grh ? r.grh.dgid : d.ip ? gidOf(d.ip.dst) : undefined;
    if (srcGid === undefined || dstGid === undefined) return undefined;
    const bth = r.ib.bth;
    const qk = `${dstGid}|${bth.destQp}`;
    let q = this.qps.get(qk);
    const at: Seen = { frame: d.n, tsNs: d.tsNs };
    if (!q) {
      if (this.qps.size >= 65536) return this.labelOf(qk, undefined);
      q = { dstGid, srcGid, qpn: bth.destQp, frames: 0, first: at, last: at, gaps: 0, sends: 0, writes: 0, writeBytes: 0, llc: [], pending: [], byRkey: new Map(), rkeyToken: new Map() };
      this.qps.set(qk, q);
    }
    q.frames++;
    q.last = at;
    const info = opcodeInfo(bth.opcode);
    if (info.isAck) return this.labelOf(qk, undefined);
    // request PSN continuity: retransmissions are not counted twice
    if (q.nextPsn !== undefined && bth.psn !== q.nextPsn) {
      const behind = (q.nextPsn - bth.psn) & 0xffffff;
      if (behind > 0 && behind < PSN_HALF) {
        const rk = info.isWrite ? r.ib.reth?.rkey ?? q.cont?.rkey : undefined;
        return this.labelOf(qk, this.writeToken(q, rk), rk, d.tsNs);
      }
      q.gaps++;
    }
    q.nextPsn = (bth.psn + 1) & 0xffffff;
    const llcFirst = d.smc.some((i) => i.proto === 'llc' && i.value.kind === 'confirm_link');
    q.firstReq ??= { psn: bth.psn, frame: d.n, tsNs: d.tsNs, confirmLink: llcFirst };
    let token: number | undefined;
    let wrkey: number | undefined;
    if (info.isWrite) {
      const len = r.ib.payload.length;
      q.writeBytes += len;
      if (info.isFirst || info.isOnly) q.writes++;
      let rkey: number | undefined, va: bigint | undefined;
      if (r.ib.reth) { rkey = r.ib.reth.rkey; va = r.ib.reth.va; q.cont = info.isOnly ? undefined : { rkey, va: va + BigInt(len) }; }
      else if (q.cont) { rkey = q.cont.rkey; va = q.cont.va; q.cont.va += BigInt(len); if (info.isLast) q.cont = undefined; }
      if (rkey !== undefined && va !== undefined) {
        addRange(q.byRkey, rkey, va, len, at);
        if (q.pending.length < MAX_PENDING) q.pending.push({ rkey, va, len, ...at });
        token = this.writeToken(q, rkey);
        wrkey = rkey;
      }
    } else if (info.isSend && (info.isFirst || info.isOnly)) {
      q.sends++;
    }
    for (const it of d.smc) {
      if (it.proto === 'llc') {
        if (q.llc.length < 4096) q.llc.push({ m: it.value, psn: bth.psn, ...at });
      } else if (it.proto === 'cdc') {
        token = it.value.token;
        this.onCdc(q, it.value, at);
      }
    }
    return this.labelOf(qk, token, wrkey, d.tsNs);
  }

  private writeToken(q: QpDir, rkey: number | undefined): number | undefined {
    return rkey === undefined ? undefined : q.rkeyToken.get(rkey);
  }

  private onCdc(q: QpDir, m: CdcMessage, at: Seen): void {
    const ck = `${q.dstGid}|${q.qpn}|${m.token}`;
    let c = this.conns.get(ck);
    if (!c) {
      if (this.conns.size >= 65536) return;
      c = { qp: q, token: m.token, count: 0, firstSeq: m.seq, seqGaps: 0, done: false, closed: false, abort: false, writes: new Map() };
      this.conns.set(ck, c);
    }
    c.count++;
    if (m.connFlags.peerDoneWriting) c.done = true;
    if (m.connFlags.peerConnClosed) c.closed = true;
    if (m.connFlags.peerConnAbort) c.abort = true;
    if (!m.prodFlags.failoverValidation) {
      if (!c.last) c.last = { m, ...at };
      else if (seqNewer(m.seq, c.last.m.seq)) {
        if (m.seq !== ((c.last.m.seq + 1) & 0xffff)) c.seqGaps++;
        c.last = { m, ...at };
      }
    }
    // the WRITEs before this CDC on this QP were this connection's
    for (const w of q.pending) {
      q.rkeyToken.set(w.rkey, m.token);
      addRange(c.writes, w.rkey, w.va, w.len, w);
    }
    q.pending.length = 0;
    // the writer is done with this RMB: it may be reused by the next connection
    if (m.connFlags.peerConnClosed || m.connFlags.peerConnAbort) for (const [k, t] of q.rkeyToken) if (t === m.token) q.rkeyToken.delete(k);
  }

  private labelOf(qk: string, token: number | undefined, writeRkey?: number, tsNs?: bigint): EpLabel | undefined {
    const n = this.qpNames.get(qk);
    if (!n) { this.stale = true; return undefined; }
    const l: EpLabel = { linkGroup: n.lg, link: n.link, dir: n.dir };
    if (token !== undefined) {
      const key = this.connNames.get(`${n.lg}|${n.dir}|${token}`);
      if (key !== undefined) l.conn = key;
      else if (writeRkey === undefined) this.stale = true;
    } else if (writeRkey !== undefined && n.dir === 'out') {
      // a connection's first WRITEs (no CDC yet): the live connection holding that rtoken, if it existed then
      const e = this.rtokenNames.get(`${n.lg}|${writeRkey}`);
      if (e && (e.sinceNs === undefined || tsNs === undefined || tsNs >= e.sinceNs - 2_000_000n)) l.conn = e.key;
    }
    return l;
  }

  // -------------------------------------------------------------------------------------------
  // The comparison
  // -------------------------------------------------------------------------------------------

  /** Every disagreement between the wire and the (last) state. Call once at the end. */
  compare(): StateAnomaly[] {
    const out: StateAnomaly[] = [];
    const s = this.state;
    const settleNs = BigInt(Math.round((this.opts.settleMs ?? 500) * 1e6));
    const takenNs = s.takenAtMs !== undefined ? BigInt(s.takenAtMs) * 1_000_000n : undefined;
    const add = (code: string, at: Seen | undefined, what: string, wire: string, ep: string, link?: string, key?: string, lastNs?: bigint, severity: Severity = 'error'): void => {
      let sev = severity;
      let msg = `${what}: wire ${wire}, endpoint ${ep}`;
      if (this.opts.live && takenNs !== undefined && lastNs !== undefined && (lastNs > takenNs - settleNs)) {
        sev = 'note';
        msg += ' (traffic was in flight when the state was read)';
      }
      const a: StateAnomaly = { frame: at?.frame ?? 0, tsNs: at?.tsNs ?? this.lastTs, severity: sev, code, message: msg, wire, endpoint: ep };
      if (link !== undefined) a.link = link;
      if (key !== undefined) a.key = key;
      out.push(a);
    };

    for (const g of s.linkGroups) {
      const links = g.links.map((l) => ({
        l, name: `${g.name}/L${l.id}`,
        inQ: this.qps.get(`${l.gid}|${l.qpn}`),
        outQ: l.peer ? this.qps.get(`${l.peer.gid}|${l.peer.qpn}`) : undefined,
      }));
      const seenLinks = links.filter((x) => x.inQ || x.outQ);
      if (seenLinks.length === 0) continue;
      const allSeen = seenLinks.length === links.length;
      // LLC of the whole group, with its direction (sent by the endpoint or by the peer)
      const llc: Array<WireLlc & { out: boolean; on: string }> = [];
      for (const x of seenLinks) {
        for (const e of x.outQ?.llc ?? []) llc.push({ ...e, out: true, on: x.name });
        for (const e of x.inQ?.llc ?? []) llc.push({ ...e, out: false, on: x.name });
      }
      llc.sort((a, b) => a.frame - b.frame);
      const deletes = llc.filter((e) => e.m.kind === 'delete_link');
      const deleteAll = deletes.find((e) => e.m.kind === 'delete_link' && e.m.all);

      for (const { l, name, inQ, outQ } of seenLinks) {
        const lastNs = maxNs(inQ?.last.tsNs, outQ?.last.tsNs);
        // CONFIRM LINK on this link, each way
        for (const e of llc) {
          if (e.on !== name || e.m.kind !== 'confirm_link') continue;
          const m = e.m;
          const who = e.out ? 'sent' : 'received';
          const rr = m.response ? 'response' : 'request';
          if (m.linkId !== l.id) add('state.link', e, `${name}: link id in the CONFIRM LINK ${rr} ${who}`, String(m.linkId), String(l.id), name);
          if (e.out) {
            if (m.qpn !== l.qpn) add('state.qpn', e, `${name}: our QPN in the CONFIRM LINK ${rr} we sent`, hexQp(m.qpn), hexQp(l.qpn), name);
            if (m.gid !== l.gid) add('state.gid', e, `${name}: our GID in the CONFIRM LINK ${rr} we sent`, m.gid, l.gid, name);
            if (l.uid !== undefined && m.linkUid !== l.uid) add('state.link', e, `${name}: link user id in the CONFIRM LINK ${rr} we sent`, hex32(m.linkUid), hex32(l.uid), name);
          } else if (l.peer) {
            if (m.qpn !== l.peer.qpn) add('state.qpn', e, `${name}: peer QPN in the CONFIRM LINK ${rr} received`, hexQp(m.qpn), hexQp(l.peer.qpn), name);
            if (m.gid !== l.peer.gid) add('state.gid', e, `${name}: peer GID in the CONFIRM LINK ${rr} received`, m.gid, l.peer.gid, name);
            if (l.peer.mac !== undefined && m.mac !== l.peer.mac) add('state.mac', e, `${name}: peer MAC in the CONFIRM LINK ${rr} received`, m.mac, l.peer.mac, name);
          }
        }
        // ADD LINK describing this link (sent on another link of the group)
        for (const e of llc) {
          if (e.m.kind !== 'add_link' || e.m.rejected || e.m.linkId !== l.id) continue;
          const m = e.m;
          const rr = m.response ? 'response' : 'request';
          if (e.out) {
            if (m.qpn !== l.qpn) add('state.qpn', e, `${name}: our QPN in the ADD LINK ${rr} we sent`, hexQp(m.qpn), hexQp(l.qpn), name);
            if (l.psn !== undefined && m.psn !== l.psn) add('state.psn', e, `${name}: our initial PSN in the ADD LINK ${rr} we sent`, String(m.psn), String(l.psn), name);
          } else if (l.peer) {
            if (m.qpn !== l.peer.qpn) add('state.qpn', e, `${name}: peer QPN in the ADD LINK ${rr} received`, hexQp(m.qpn), hexQp(l.peer.qpn), name);
            if (l.peer.psn !== undefined && m.psn !== l.peer.psn) add('state.psn', e, `${name}: peer initial PSN in the ADD LINK ${rr} received`, String(m.psn), String(l.peer.psn), name);
          }
        }
        // initial PSNs: the first packet of a link each way is its CONFIRM LINK
        if (outQ?.firstReq?.confirmLink && l.psn !== undefined && outQ.firstReq.psn !== l.psn) {
          add('state.psn', outQ.firstReq, `${name}: PSN of the first packet we sent (CONFIRM LINK)`, String(outQ.firstReq.psn), `initial PSN ${l.psn}`, name);
        }
        if (inQ?.firstReq?.confirmLink && l.peer?.psn !== undefined && inQ.firstReq.psn !== l.peer.psn) {
          add('state.psn', inQ.firstReq, `${name}: PSN of the first packet the peer sent (CONFIRM LINK)`, String(inQ.firstReq.psn), `peer initial PSN ${l.peer.psn}`, name);
        }
        // link state
        const firstFrame = Math.min(inQ?.first.frame ?? Infinity, outQ?.first.frame ?? Infinity);
        const del = deletes.find((e) => e.frame >= firstFrame && e.m.kind === 'delete_link' && (e.m.all || e.m.linkId === l.id));
        const confirms = llc.filter((e) => e.on === name && e.m.kind === 'confirm_link');
        const wireState = del ? 'deleted' : confirms.some((e) => e.m.response) ? 'active' : confirms.length > 0 ? 'confirming' : undefined;
        if (wireState === 'deleted' && (l.state === 'ACTIVE' || l.state === 'ACTIVATING')) {
          add('state.link', del, `${name}: link state`, `deleted (DELETE LINK${del!.m.kind === 'delete_link' && del!.m.all ? ' all' : ''} ${del!.out ? 'sent' : 'received'} in frame ${del!.frame})`, l.state, name, undefined, lastNs);
        } else if (wireState === 'active' && l.state === 'ACTIVATING') {
          const e = confirms.find((x) => x.m.response)!;
          add('state.link', e, `${name}: link state`, `active (CONFIRM LINK response in frame ${e.frame})`, l.state, name, undefined, lastNs);
        } else if (wireState === 'confirming' && l.state === 'ACTIVE') {
          const e = confirms[confirms.length - 1]!;
          add('state.link', e, `${name}: link state`, `confirming (CONFIRM LINK request in frame ${e.frame}, no response)`, l.state, name, undefined, lastNs);
        }
        // counters, when the capture holds the link from its first packet without gaps
        const st = l.stats;
        if (st) {
          if (outQ?.firstReq?.confirmLink && outQ.gaps === 0) {
            const pairs: Array<[string, number, number | undefined]> = [['SEND messages sent', outQ.sends, st.sent], ['RDMA WRITEs sent', outQ.writes, st.writes], ['RDMA WRITE bytes sent', outQ.writeBytes, st.writeBytes]];
            for (const [what, w, e] of pairs) if (e !== undefined && w !== e) add('state.counter', outQ.last, `${name}: ${what}`, String(w), String(e), name, undefined, lastNs);
          }
          if (inQ?.firstReq?.confirmLink && inQ.gaps === 0 && st.received !== undefined && inQ.sends !== st.received) {
            add('state.counter', inQ.last, `${name}: SEND messages received`, String(inQ.sends), String(st.received), name, undefined, lastNs);
          }
        }
        // RDMA WRITEs into our RMBs (on the link of the endpoint's own device, where the RMB list's rkeys apply)
        if (inQ && l.gid === s.gid && g.rmbs.length > 0) {
          for (const [rkey, w] of inQ.byRkey) {
            const b = g.rmbs.find((x) => x.rkey === rkey);
            if (!b) add('state.rkey', w, `${name}: RDMA WRITE into our RMB rkey`, `rkey ${hex32(rkey)} (${w.count} packets)`, `RMB rkeys ${g.rmbs.map((x) => hex32(x.rkey)).join(', ')}`, name);
            else if (w.minVa < b.addr || w.maxEnd > b.addr + BigInt(b.size)) {
              add('state.addr', w, `${name}: RDMA WRITE address range in our RMB ${hex32(rkey)}`, `0x${w.minVa.toString(16)}-0x${w.maxEnd.toString(16)}`, `0x${b.addr.toString(16)}-0x${(b.addr + BigInt(b.size)).toString(16)}`, name);
            }
          }
        }
      }
      if (deleteAll && (g.state === 'ACTIVE' || g.state === 'IDLE')) {
        add('state.link', deleteAll, `${g.name}: link group state`, `terminated (DELETE LINK all ${deleteAll.out ? 'sent' : 'received'} in frame ${deleteAll.frame})`, g.state, g.name);
      }

      // connections of this group
      const conns = s.connections.filter((c) => c.linkGroup === g.name);
      const used = new Set<WireConn>();
      const pick = (token: number, out: boolean): WireConn[] => {
        const r: WireConn[] = [];
        for (const x of seenLinks) {
          const q = out ? x.outQ : x.inQ;
          if (!q) continue;
          const w = this.conns.get(`${q.dstGid}|${q.qpn}|${token}`);
          if (w) r.push(w);
        }
        return r;
      };
      for (const c of conns) {
        const outs = pick(c.peerToken, true), ins = pick(c.localToken, false);
        for (const w of [...outs, ...ins]) used.add(w);
        const o = latest(outs), i = latest(ins);
        const lastNs = maxNs(o?.last?.tsNs, i?.last?.tsNs);
        const linkOf = (w: WireConn | undefined): string | undefined => seenLinks.find((x) => x.outQ === w?.qp || x.inQ === w?.qp)?.name;
        if (o?.last) {
          const m = o.last.m, ln = linkOf(o);
          const where = `frame ${o.last.frame}`;
          if (c.tx.seq !== undefined && m.seq !== c.tx.seq) add('state.seq', o.last, `${c.key}: sequence number of the last CDC we sent`, `${m.seq} (${where})`, `tx.seq ${c.tx.seq}`, ln, c.key, lastNs);
          if (c.tx.prod && !sameCursor(m.prod, c.tx.prod)) add('state.cursor', o.last, `${c.key}: producer cursor of the last CDC we sent`, `${curs(m.prod)} (${where})`, `tx.prod ${curs(c.tx.prod)}`, ln, c.key, lastNs);
          if (c.rx.confirmed && !sameCursor(m.cons, c.rx.confirmed)) add('state.cursor', o.last, `${c.key}: consumer cursor of the last CDC we sent`, `${curs(m.cons)} (${where})`, `rx.confirmed ${curs(c.rx.confirmed)}`, ln, c.key, lastNs);
          if (c.tx.writeBlocked !== undefined && m.prodFlags.writeBlocked !== c.tx.writeBlocked) add('state.flags', o.last, `${c.key}: write-blocked flag of the last CDC we sent`, `${m.prodFlags.writeBlocked} (${where})`, `tx writeBlocked ${c.tx.writeBlocked}`, ln, c.key, lastNs);
          flagCheck(add, o, c.tx.flags, `${c.key}: close flags we sent`, 'tx.flags', ln, c.key, lastNs);
          // WRITEs of this connection vs its rtoken on that link (live connections only: closed ones have no rtokens)
          const conn = g.conns.find((x) => x.token === c.localToken);
          const lid = seenLinks.find((x) => x.outQ === o.qp)?.l.id;
          const rt = conn?.rtokens.find((r) => r.link === lid);
          if (rt && !c.closed) {
            for (const [rkey, w] of o.writes) {
              if (rkey !== rt.rkey) add('state.rkey', w, `${c.key}: rkey of our RDMA WRITEs into the peer's RMB`, hex32(rkey), `rtoken ${hex32(rt.rkey)}`, ln, c.key);
              else if (conn?.peerRmbeSize !== undefined && (w.minVa < rt.addr || w.maxEnd > rt.addr + BigInt(conn.peerRmbeSize))) {
                add('state.addr', w, `${c.key}: address range of our RDMA WRITEs into the peer's RMB`, `0x${w.minVa.toString(16)}-0x${w.maxEnd.toString(16)}`, `0x${rt.addr.toString(16)}-0x${(rt.addr + BigInt(conn.peerRmbeSize)).toString(16)}`, ln, c.key);
              }
            }
          }
          const complete = allSeen && outs.length > 0 && outs.every((w) => w.seqGaps === 0) && outs.some((w) => w.firstSeq === 1) && !outs.some((w) => w.qp.gaps > 0);
          const n = outs.reduce((a, w) => a + w.count, 0);
          if (complete && c.counters.cdcSent !== undefined && n !== c.counters.cdcSent) add('state.counter', o.last, `${c.key}: CDCs sent`, String(n), `cdcSent ${c.counters.cdcSent}`, ln, c.key, lastNs);
        }
        if (i?.last) {
          const m = i.last.m, ln = linkOf(i);
          const where = `frame ${i.last.frame}`;
          if (c.rx.seq !== undefined && m.seq !== c.rx.seq) add('state.seq', i.last, `${c.key}: sequence number of the last CDC received`, `${m.seq} (${where})`, `rx.seq ${c.rx.seq}`, ln, c.key, lastNs);
          if (c.rx.prod && !sameCursor(m.prod, c.rx.prod)) add('state.cursor', i.last, `${c.key}: producer cursor of the last CDC received`, `${curs(m.prod)} (${where})`, `rx.prod ${curs(c.rx.prod)}`, ln, c.key, lastNs);
          const pc = peerCons(c);
          if (pc && !sameCursor(m.cons, pc)) add('state.cursor', i.last, `${c.key}: consumer cursor of the last CDC received`, `${curs(m.cons)} (${where})`, `${curs(pc)} (tx.prod − in use)`, ln, c.key, lastNs);
          flagCheck(add, i, c.rx.flags, `${c.key}: close flags received`, 'rx.flags', ln, c.key, lastNs);
          const complete = allSeen && ins.length > 0 && ins.every((w) => w.seqGaps === 0) && ins.some((w) => w.firstSeq === 1) && !ins.some((w) => w.qp.gaps > 0) && !c.closed;
          const n = ins.reduce((a, w) => a + w.count, 0);
          const want = (c.counters.cdcReceived ?? 0) + (c.counters.lateCdcs ?? 0);
          if (complete && c.counters.cdcReceived !== undefined && n !== want) add('state.counter', i.last, `${c.key}: CDCs received`, String(n), `cdcReceived+lateCdcs ${want}`, ln, c.key, lastNs);
        }
      }
      // CDCs for tokens the endpoint does not know (only judged while it still lists every closed connection)
      const closedCount = s.connections.filter((c) => c.closed).length;
      if (closedCount < 256) {
        for (const x of seenLinks) {
          for (const [q, out] of [[x.outQ, true], [x.inQ, false]] as const) {
            if (!q) continue;
            for (const w of this.conns.values()) {
              if (w.qp !== q || used.has(w) || !w.last) continue;
              add('state.conn', w.last, `${x.name}: CDCs ${out ? 'sent' : 'received'} for token ${hex32(w.token)}`, `${w.count} CDCs, last seq ${w.last.m.seq}`, `no connection with ${out ? 'peer' : 'local'} token ${hex32(w.token)} on ${g.name}`, x.name, undefined, w.last.tsNs, 'warn');
            }
          }
        }
      }
    }
    out.sort((a, b) => a.frame - b.frame);
    return out;
  }
}

/** A disagreement: an anomaly naming the endpoint's connection key and both values. */
export interface StateAnomaly extends Anomaly {
  /** Connection key in the endpoint's names ("LG2/5"). */
  key?: string;
  wire: string;
  endpoint: string;
}

type Add = (code: string, at: Seen | undefined, what: string, wire: string, ep: string, link?: string, key?: string, lastNs?: bigint, severity?: Severity) => void;

function flagCheck(add: Add, w: WireConn, epFlags: string[], what: string, field: string, link: string | undefined, key: string, lastNs: bigint | undefined): void {
  const wire = [w.done && 'done', w.closed && 'closed', w.abort && 'abort'].filter(Boolean).join(',') || 'none';
  const ep = ['done', 'closed', 'abort'].filter((f) => epFlags.includes(f)).join(',') || 'none';
  if (wire !== ep) add('state.flags', w.last, what, `${wire} (frame ${w.last?.frame})`, `${field} ${ep}`, link, key, lastNs);
}

/** The peer's consumer cursor as the endpoint knows it: tx.prod minus the bytes still in use in the peer's RMBE. */
function peerCons(c: EpConn): EpCursor | undefined {
  const p = c.tx.prod, size = c.tx.peerRmbeSize, space = c.tx.peerSpace;
  if (!p || size === undefined || space === undefined || size <= 0) return undefined;
  const ringTotal = 65536 * size;
  const total = (((p.wrap * size + p.count - (size - space)) % ringTotal) + ringTotal) % ringTotal;
  return { wrap: Math.floor(total / size) & 0xffff, count: total % size };
}

function latest(ws: WireConn[]): WireConn | undefined {
  let best: WireConn | undefined;
  for (const w of ws) if (w.last && (!best?.last || w.last.frame > best.last.frame)) best = w;
  return best;
}

function addRange(m: Map<number, WriteRange>, rkey: number, va: bigint, len: number, at: Seen): void {
  const end = va + BigInt(len);
  const r = m.get(rkey);
  if (!r) { m.set(rkey, { minVa: va, maxEnd: end, frame: at.frame, tsNs: at.tsNs, count: 1 }); return; }
  r.count++;
  if (va < r.minVa) r.minVa = va;
  if (end > r.maxEnd) r.maxEnd = end;
}

function sameCursor(a: CdcCursor, b: EpCursor): boolean { return a.wrap === b.wrap && a.count === b.count; }
function curs(c: EpCursor): string { return `${c.wrap}:${c.count}`; }
function hexQp(q: number): string { return '0x' + q.toString(16); }
function maxNs(a: bigint | undefined, b: bigint | undefined): bigint | undefined {
  if (a === undefined) return b;
  if (b === undefined) return a;
  return a > b ? a : b;
}
function gidOf(ip: string): string { return ip.includes(':') ? ip : `::ffff:${ip}`; }
