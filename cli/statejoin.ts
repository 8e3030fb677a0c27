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
// The wire side is the tracker's model (dissectors/tracker/model.ts): this module does not follow
// frames itself. A frame's label is the tracker's link and connection for it, mapped to the
// endpoint's names through the link's (GID, QPN) ends and the connection's tokens; the
// comparison maps each of the endpoint's links to the tracker's link by (GID, QPN) and each
// connection by tokens (and its TCP socket), then compares field by field. The state may be
// replaced while frames flow (live: a newer snapshot); labels learned from older ones are kept
// and the comparison uses the last one.
// Pure: no I/O; never throws on a malformed state (parseEndpointState reports it in one line).

import type { DecodedFrame } from '../dissectors/frame.js';
import type { EndpointState, EpConn, EpCursor, EpLink, EpLinkGroup } from './stateread.js';
import type { Anomaly, FrameNote, Link, LinkGroup, SmcConn, SmcDir } from '../dissectors/tracker/model.js';
import type { Tracker } from '../dissectors/tracker/tracker.js';
import { hex32, hexQp, type Severity } from '../dissectors/wire/common.js';
import { opcodeInfo } from '../dissectors/wire/ib.js';

interface Seen { frame: number; tsNs: bigint }

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

/** Bound of the label caches (cleared, not evicted: they refill from the name maps). */
const CACHE_MAX = 65536;

/** One of the endpoint's links and the tracker's link it is, with the endpoint's end of it. */
interface Pair { l: EpLink; name: string; tl: Link; e: 0 | 1 }

export class StateJoin {
  private state: EndpointState;
  frames = 0;
  /** A frame named something the state does not know yet (live: time to ask for a newer one). */
  stale = false;
  firstTs?: bigint;
  lastTs = 0n;
  // names (from every state seen, so frames keep their labels after a link or connection is gone)
  private readonly qpNames = new Map<string, { lg: string; link: string; dir: 'in' | 'out' }>();
  private readonly connNames = new Map<string, string>();
  // labels already resolved: per tracker link (by receiving end) and per tracker connection on
  // the link it was last seen on (a connection moves at a failover; its label names the link)
  private readonly linkLabels = new Map<Link, [EpLabel | undefined, EpLabel | undefined]>();
  private readonly connLabels = new Map<SmcConn, { link: Link; l: [EpLabel | undefined, EpLabel | undefined] }>();
  /** Connection index (FrameNote.conn) → the tracker's connection. */
  private readonly connByIndex = new Map<number, SmcConn>();
  /** "LG|rkey" → the live connection (and since when) whose rtoken it is, from the last state only (RMBs are reused). */
  private rtokenNames = new Map<string, { key: string; sinceNs?: bigint }>();
  /** An RDMA WRITE the tracker could not attribute yet, named by its rtoken: its MIDDLE/LAST
   *  packets (no RETH) carry the same name. Per tracker link and direction. */
  private readonly writeLabels = new Map<Link, [EpLabel | undefined, EpLabel | undefined]>();

  constructor(state: EndpointState, private readonly tracker: Tracker, private readonly opts: StateJoinOptions = {}) {
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
    this.linkLabels.clear();
    this.connLabels.clear();
    this.writeLabels.clear();
    this.rtokenNames = new Map();
    const since = new Map<string, bigint>();
    for (const c of s.connections) {
      const t = c.since !== undefined ? Date.parse(c.since) : NaN;
      if (!c.closed && Number.isFinite(t)) since.set(c.key, BigInt(t) * 1_000_000n);
    }
    for (const g of s.linkGroups) {
      for (const c of g.conns) {
        const key = `${g.name}/${c.token}`;
        const e: { key: string; sinceNs?: bigint } = { key };
        const t = since.get(key);
        if (t !== undefined) e.sinceNs = t;
        for (const r of c.rtokens) this.rtokenNames.set(`${g.name}|${r.rkey}`, e);
      }
      for (const l of g.links) {
        const name = `${g.name}/L${l.id}`;
        this.qpNames.set(`${l.gid}|${l.qpn}`, { lg: g.name, link: name, dir: 'in' });
        if (l.peer) this.qpNames.set(`${l.peer.gid}|${l.peer.qpn}`, { lg: g.name, link: name, dir: 'out' });
      }
    }
    for (const c of s.connections) {
      this.connNames.set(`${c.linkGroup}|in|${c.localToken}`, c.key);
      this.connNames.set(`${c.linkGroup}|out|${c.peerToken}`, c.key);
    }
  }

  /** One decoded frame (capture order), after the tracker was fed it (`note`: what it said);
   *  returns its label in the endpoint's names. */
  feed(d: DecodedFrame, note: FrameNote | undefined): EpLabel | undefined {
    this.frames++;
    this.firstTs ??= d.tsNs;
    this.lastTs = d.tsNs;
    const link = this.tracker.frameLink;
    if (!link || !d.roce) return undefined;
    const recv = (1 - this.tracker.frameDir) as 0 | 1;
    const idx = note?.conn;
    const conn = idx !== undefined && idx !== 0 ? this.connOf(link.lg, idx) : undefined;
    const cached = conn ? this.connLabels.get(conn) : undefined;
    if (cached?.link === link && cached.l[recv]) return cached.l[recv];
    const base = this.linkLabel(link, recv);
    if (!base) { this.stale = true; return undefined; }
    const token = conn?.sides[recv].token;
    if (token === undefined) return base.dir === 'out' ? this.writeLabel(d, link, base) : base;
    const key = this.connNames.get(`${base.linkGroup}|${base.dir}|${token}`);
    if (key === undefined) {
      // a connection's WRITEs before the state lists it do not ask for a newer one; its CDCs do
      if (!opcodeInfo(d.roce.ib.bth.opcode).isWrite) this.stale = true;
      return base;
    }
    const l: EpLabel = { ...base, conn: key };
    let slot = cached;
    if (slot?.link !== link) {
      if (this.connLabels.size >= CACHE_MAX) this.connLabels.clear();
      slot = { link, l: [undefined, undefined] };
      this.connLabels.set(conn!, slot);
    }
    slot!.l[recv] = l;
    return l;
  }

  /** An RDMA WRITE of ours the tracker has no connection for (a mid-stream connection's WRITEs
   *  before its first CDC): the live connection holding its rkey as rtoken, if it existed then. */
  private writeLabel(d: DecodedFrame, link: Link, base: EpLabel): EpLabel {
    const ib = d.roce!.ib;
    const info = opcodeInfo(ib.bth.opcode);
    if (!info.isWrite) return base;
    const dir = this.tracker.frameDir;
    let slot = this.writeLabels.get(link);
    if (ib.reth) {
      const e = this.rtokenNames.get(`${base.linkGroup}|${ib.reth.rkey}`);
      const named = e && (e.sinceNs === undefined || d.tsNs >= e.sinceNs - 2_000_000n) ? { ...base, conn: e.key } : undefined;
      if (!slot) {
        if (this.writeLabels.size >= CACHE_MAX) this.writeLabels.clear();
        slot = [undefined, undefined];
        this.writeLabels.set(link, slot);
      }
      slot[dir] = info.isOnly ? undefined : named;
      return named ?? base;
    }
    const l = slot?.[dir];
    if (slot && info.isLast) slot[dir] = undefined;
    return l ?? base;
  }

  /** The endpoint's name of a tracker link, for frames received by end `recv`. */
  private linkLabel(link: Link, recv: 0 | 1): EpLabel | undefined {
    const hit = this.linkLabels.get(link)?.[recv];
    if (hit) return hit;
    const end = link.ends[recv];
    if (end.qpn === undefined) return undefined;
    const n = this.qpNames.get(`${end.gid}|${end.qpn}`);
    if (!n) return undefined;
    const l: EpLabel = { linkGroup: n.lg, link: n.link, dir: n.dir };
    let slot = this.linkLabels.get(link);
    if (!slot) {
      if (this.linkLabels.size >= CACHE_MAX) this.linkLabels.clear();
      slot = [undefined, undefined];
      this.linkLabels.set(link, slot);
    }
    slot[recv] = l;
    return l;
  }

  /** The tracker's connection with this index (new ones are at the end of their group's list). */
  private connOf(lg: LinkGroup, index: number): SmcConn | undefined {
    const hit = this.connByIndex.get(index);
    if (hit && hit.lg === lg) return hit;
    for (let i = lg.conns.length - 1; i >= 0; i--) {
      const c = lg.conns[i]!;
      if (c.index !== index) continue;
      if (this.connByIndex.size >= CACHE_MAX) this.connByIndex.clear();
      this.connByIndex.set(index, c);
      return c;
    }
    return undefined;
  }

  /** The tracker's link of one of the endpoint's links, and which end of it is the endpoint. */
  private wireLink(l: EpLink): { tl: Link; e: 0 | 1 } | undefined {
    const a = this.tracker.linkOfQp(l.gid, l.qpn);
    if (a) return { tl: a.link, e: a.end };
    const b = l.peer ? this.tracker.linkOfQp(l.peer.gid, l.peer.qpn) : undefined;
    return b ? { tl: b.link, e: (1 - b.end) as 0 | 1 } : undefined;
  }

  // -------------------------------------------------------------------------------------------
  // The comparison
  // -------------------------------------------------------------------------------------------

  /** Every disagreement between the tracker's model and the (last) state. Call once at the end. */
  compare(): StateAnomaly[] {
    const out: StateAnomaly[] = [];
    const s = this.state;
    const settleNs = BigInt(Math.round((this.opts.settleMs ?? 500) * 1e6));
    const takenNs = s.takenAtMs !== undefined ? BigInt(s.takenAtMs) * 1_000_000n : undefined;
    const add: Add = (code, at, what, wire, ep, link, key, lastNs, severity = 'error') => {
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
      const links: Pair[] = [];
      for (const l of g.links) {
        const w = this.wireLink(l);
        if (w) links.push({ l, name: `${g.name}/L${l.id}`, tl: w.tl, e: w.e });
      }
      const seen = links.filter((x) => x.tl.packets[0] + x.tl.packets[1] > 0);
      if (seen.length === 0) continue;
      const allSeen = seen.length === g.links.length;
      for (const x of seen) compareLink(add, x, s.gid, g.rmbs);
      // the group: DELETE LINK all
      let all: Seen & { by: 'client' | 'server'; e: 0 | 1 } | undefined;
      for (const x of seen) { const d = x.tl.deleted; if (d?.all && (!all || d.frame < all.frame)) all = { ...d, e: x.e }; }
      if (all && (g.state === 'ACTIVE' || g.state === 'IDLE')) {
        add('state.link', all, `${g.name}: link group state`, `terminated (DELETE LINK all ${sideIs(all.by, all.e) ? 'sent' : 'received'} in frame ${all.frame})`, g.state, g.name);
      }
      // connections of this group (the endpoint is one side of every link of it)
      const v = new GroupView(g, seen, allSeen, (l, dir, rkey) => this.tracker.rmbConn(l, dir, rkey));
      const conns = s.connections.filter((c) => c.linkGroup === g.name);
      const matched = matchConns(conns, seen[0]!.tl.lg, v.side);
      for (const c of conns) {
        const tc = matched.get(c);
        if (tc) compareConn(add, v, c, tc);
      }
      // CDCs for tokens the endpoint does not know (only judged while it still lists every closed connection)
      if (s.connections.filter((c) => c.closed).length < 256) unknownConns(add, v, new Set(matched.values()));
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

/** One link: what its LLC announced, its first PSNs, its state, its counters, WRITEs into our RMBs. */
function compareLink(add: Add, { l, name, tl, e }: Pair, ourGid: string, rmbs: EndpointState['linkGroups'][number]['rmbs']): void {
  const lastNs = maxNs(tl.lastFrom[0]?.tsNs, tl.lastFrom[1]?.tsNs);
  const peer = (1 - e) as 0 | 1;
  // CONFIRM LINK on this link, each way
  for (const from of [e, peer]) {
    const m = tl.sent[from].confirm;
    if (!m) continue;
    const rr = m.response ? 'response' : 'request';
    const who = from === e ? 'sent' : 'received';
    if (m.linkId !== l.id) add('state.link', m, `${name}: link id in the CONFIRM LINK ${rr} ${who}`, String(m.linkId), String(l.id), name);
    if (from === e) {
      if (m.qpn !== l.qpn) add('state.qpn', m, `${name}: our QPN in the CONFIRM LINK ${rr} we sent`, hexQp(m.qpn), hexQp(l.qpn), name);
      if (m.gid !== l.gid) add('state.gid', m, `${name}: our GID in the CONFIRM LINK ${rr} we sent`, m.gid, l.gid, name);
      if (l.uid !== undefined && m.uid !== undefined && m.uid !== l.uid) add('state.link', m, `${name}: link user id in the CONFIRM LINK ${rr} we sent`, hex32(m.uid), hex32(l.uid), name);
    } else if (l.peer) {
      if (m.qpn !== l.peer.qpn) add('state.qpn', m, `${name}: peer QPN in the CONFIRM LINK ${rr} received`, hexQp(m.qpn), hexQp(l.peer.qpn), name);
      if (m.gid !== l.peer.gid) add('state.gid', m, `${name}: peer GID in the CONFIRM LINK ${rr} received`, m.gid, l.peer.gid, name);
      if (l.peer.mac !== undefined && m.mac !== l.peer.mac) add('state.mac', m, `${name}: peer MAC in the CONFIRM LINK ${rr} received`, m.mac, l.peer.mac, name);
    }
  }
  // the ADD LINK that announced this link's QPs (sent on another link of the group)
  for (const from of [e, peer]) {
    const m = tl.sent[from].add;
    if (!m) continue;
    const rr = m.response ? 'response' : 'request';
    if (from === e) {
      if (m.qpn !== l.qpn) add('state.qpn', m, `${name}: our QPN in the ADD LINK ${rr} we sent`, hexQp(m.qpn), hexQp(l.qpn), name);
      if (l.psn !== undefined && m.psn !== l.psn) add('state.psn', m, `${name}: our initial PSN in the ADD LINK ${rr} we sent`, String(m.psn), String(l.psn), name);
    } else if (l.peer) {
      if (m.qpn !== l.peer.qpn) add('state.qpn', m, `${name}: peer QPN in the ADD LINK ${rr} received`, hexQp(m.qpn), hexQp(l.peer.qpn), name);
      if (l.peer.psn !== undefined && m.psn !== l.peer.psn) add('state.psn', m, `${name}: peer initial PSN in the ADD LINK ${rr} received`, String(m.psn), String(l.peer.psn), name);
    }
  }
  // initial PSNs: the first packet of a link each way is its CONFIRM LINK
  const fo = tl.sent[e].first, fi = tl.sent[peer].first;
  if (fo?.confirmLink && l.psn !== undefined && fo.psn !== l.psn) add('state.psn', fo, `${name}: PSN of the first packet we sent (CONFIRM LINK)`, String(fo.psn), `initial PSN ${l.psn}`, name);
  if (fi?.confirmLink && l.peer?.psn !== undefined && fi.psn !== l.peer.psn) add('state.psn', fi, `${name}: PSN of the first packet the peer sent (CONFIRM LINK)`, String(fi.psn), `peer initial PSN ${l.peer.psn}`, name);
  // link state
  const del = tl.deleted;
  const c0 = tl.sent[0].confirm, c1 = tl.sent[1].confirm;
  const resp = c0?.response ? c0 : c1?.response ? c1 : undefined;
  if (del) {
    if (l.state === 'ACTIVE' || l.state === 'ACTIVATING') {
      add('state.link', del, `${name}: link state`, `deleted (DELETE LINK${del.all ? ' all' : ''} ${sideIs(del.by, e) ? 'sent' : 'received'} in frame ${del.frame})`, l.state, name, undefined, lastNs);
    }
  } else if (resp) {
    if (l.state === 'ACTIVATING') add('state.link', resp, `${name}: link state`, `active (CONFIRM LINK response in frame ${resp.frame})`, l.state, name, undefined, lastNs);
  } else if ((c0 || c1) && l.state === 'ACTIVE') {
    const req = !c1 || (c0 && c0.frame > c1.frame) ? c0! : c1;
    add('state.link', req, `${name}: link state`, `confirming (CONFIRM LINK request in frame ${req.frame}, no response)`, l.state, name, undefined, lastNs);
  }
  // counters, when the capture holds the link from its first packet without gaps
  const st = l.stats;
  if (st) {
    const so = tl.sent[e], si = tl.sent[peer];
    if (so.first?.confirmLink && so.gaps === 0) {
      const pairs: Array<[string, number, number | undefined]> = [['SEND messages sent', so.sends, st.sent], ['RDMA WRITEs sent', so.writes, st.writes], ['RDMA WRITE bytes sent', so.writeBytes, st.writeBytes]];
      for (const [what, w, ep] of pairs) if (ep !== undefined && w !== ep) add('state.counter', tl.lastFrom[e], `${name}: ${what}`, String(w), String(ep), name, undefined, lastNs);
    }
    if (si.first?.confirmLink && si.gaps === 0 && st.received !== undefined && si.sends !== st.received) {
      add('state.counter', tl.lastFrom[peer], `${name}: SEND messages received`, String(si.sends), String(st.received), name, undefined, lastNs);
    }
  }
  // RDMA WRITEs into our RMBs (on the link of the endpoint's own device, where the RMB list's rkeys apply)
  const ranges = tl.sent[peer].writeRanges;
  if (ranges && l.gid === ourGid && rmbs.length > 0) {
    for (const [rkey, w] of ranges) {
      const b = rmbs.find((x) => x.rkey === rkey);
      if (!b) add('state.rkey', w, `${name}: RDMA WRITE into our RMB rkey`, `rkey ${hex32(rkey)} (${w.count} RDMA WRITEs)`, `RMB rkeys ${rmbs.map((x) => hex32(x.rkey)).join(', ')}`, name);
      else if (w.minVa < b.addr || w.maxEnd > b.addr + BigInt(b.size)) {
        add('state.addr', w, `${name}: RDMA WRITE address range in our RMB ${hex32(rkey)}`, `0x${w.minVa.toString(16)}-0x${w.maxEnd.toString(16)}`, `0x${b.addr.toString(16)}-0x${(b.addr + BigInt(b.size)).toString(16)}`, name);
      }
    }
  }
}

/** One of the endpoint's link groups seen on the wire: its links paired with the tracker's. */
class GroupView {
  /** The endpoint's side (0 client, 1 server) of the group's links. */
  readonly side: 0 | 1;
  constructor(readonly g: EpLinkGroup, readonly seen: Pair[], readonly allSeen: boolean, readonly rmbConn: (l: Link, dir: 0 | 1, rkey: number) => SmcConn | undefined) {
    this.side = seen[0]!.e;
  }

  /** The endpoint's link carrying the tracker's link of that name (the newest: ids are reused). */
  pairOf(tlName: string | undefined): Pair | undefined {
    for (let i = this.seen.length - 1; i >= 0; i--) if (this.seen[i]!.tl.name === tlName) return this.seen[i];
    return undefined;
  }

  /** Every link of the group seen, none with a PSN gap in direction `dir`. */
  gapless(dir: 0 | 1): boolean { return this.allSeen && this.seen.every((x) => x.tl.sent[dir].gaps === 0); }
}

/** One connection: the last CDC each way, the flags, its WRITEs, the CDC counters. */
function compareConn(add: Add, v: GroupView, c: EpConn, tc: SmcConn): void {
  const eo = v.side, ei = (1 - v.side) as 0 | 1;
  const wo = tc.dirs[eo], wi = tc.dirs[ei];
  const lastNs = maxNs(wo.lastCdc?.tsNs, wi.lastCdc?.tsNs);
  if (wo.lastCdc && wo.seq !== undefined) {
    const at = wo.lastCdc, on = v.pairOf(wo.link), ln = on?.name;
    const where = `frame ${at.frame}`;
    if (c.tx.seq !== undefined && wo.seq !== c.tx.seq) add('state.seq', at, `${c.key}: sequence number of the last CDC we sent`, `${wo.seq} (${where})`, `tx.seq ${c.tx.seq}`, ln, c.key, lastNs);
    if (c.tx.prod && wo.prod && !sameCursor(wo.prod, c.tx.prod)) add('state.cursor', at, `${c.key}: producer cursor of the last CDC we sent`, `${curs(wo.prod)} (${where})`, `tx.prod ${curs(c.tx.prod)}`, ln, c.key, lastNs);
    if (c.rx.confirmed && wi.cons && !sameCursor(wi.cons, c.rx.confirmed)) add('state.cursor', at, `${c.key}: consumer cursor of the last CDC we sent`, `${curs(wi.cons)} (${where})`, `rx.confirmed ${curs(c.rx.confirmed)}`, ln, c.key, lastNs);
    if (c.tx.writeBlocked !== undefined && wo.lastWriteBlocked !== undefined && wo.lastWriteBlocked !== c.tx.writeBlocked) add('state.flags', at, `${c.key}: write-blocked flag of the last CDC we sent`, `${wo.lastWriteBlocked} (${where})`, `tx writeBlocked ${c.tx.writeBlocked}`, ln, c.key, lastNs);
    flagCheck(add, wo, c.tx.flags, `${c.key}: close flags we sent`, 'tx.flags', ln, c.key, lastNs);
    if (on && !c.closed) compareWrites(add, v, c, tc, on); // closed connections have no rtokens
    const complete = v.gapless(eo) && wo.seqGaps === 0 && wo.firstSeq === 1;
    if (complete && c.counters.cdcSent !== undefined && wo.cdcs !== c.counters.cdcSent) add('state.counter', at, `${c.key}: CDCs sent`, String(wo.cdcs), `cdcSent ${c.counters.cdcSent}`, ln, c.key, lastNs);
  }
  if (wi.lastCdc && wi.seq !== undefined) {
    const at = wi.lastCdc, ln = v.pairOf(wi.link)?.name;
    const where = `frame ${at.frame}`;
    if (c.rx.seq !== undefined && wi.seq !== c.rx.seq) add('state.seq', at, `${c.key}: sequence number of the last CDC received`, `${wi.seq} (${where})`, `rx.seq ${c.rx.seq}`, ln, c.key, lastNs);
    if (c.rx.prod && wi.prod && !sameCursor(wi.prod, c.rx.prod)) add('state.cursor', at, `${c.key}: producer cursor of the last CDC received`, `${curs(wi.prod)} (${where})`, `rx.prod ${curs(c.rx.prod)}`, ln, c.key, lastNs);
    const pc = peerCons(c);
    if (pc && wo.cons && !sameCursor(wo.cons, pc)) add('state.cursor', at, `${c.key}: consumer cursor of the last CDC received`, `${curs(wo.cons)} (${where})`, `${curs(pc)} (tx.prod − in use)`, ln, c.key, lastNs);
    flagCheck(add, wi, c.rx.flags, `${c.key}: close flags received`, 'rx.flags', ln, c.key, lastNs);
    const complete = v.gapless(ei) && wi.seqGaps === 0 && wi.firstSeq === 1 && !c.closed;
    const want = (c.counters.cdcReceived ?? 0) + (c.counters.lateCdcs ?? 0);
    if (complete && c.counters.cdcReceived !== undefined && wi.cdcs !== want) add('state.counter', at, `${c.key}: CDCs received`, String(wi.cdcs), `cdcReceived+lateCdcs ${want}`, ln, c.key, lastNs);
  }
}

/** Our RDMA WRITEs of one connection, on the link of its last CDC, vs its rtoken there. */
function compareWrites(add: Add, v: GroupView, c: EpConn, tc: SmcConn, on: Pair): void {
  const conn = v.g.conns.find((x) => x.token === c.localToken);
  const rt = conn?.rtokens.find((r) => r.link === on.l.id);
  if (!conn || !rt) return;
  const eo = v.side;
  for (const [rkey, w] of on.tl.sent[eo].writeRanges ?? []) {
    if (v.rmbConn(on.tl, eo, rkey) !== tc) continue;
    if (rkey !== rt.rkey) add('state.rkey', w, `${c.key}: rkey of our RDMA WRITEs into the peer's RMB`, hex32(rkey), `rtoken ${hex32(rt.rkey)}`, on.name, c.key);
    else if (conn.peerRmbeSize !== undefined && (w.minVa < rt.addr || w.maxEnd > rt.addr + BigInt(conn.peerRmbeSize))) {
      add('state.addr', w, `${c.key}: address range of our RDMA WRITEs into the peer's RMB`, `0x${w.minVa.toString(16)}-0x${w.maxEnd.toString(16)}`, `0x${rt.addr.toString(16)}-0x${(rt.addr + BigInt(conn.peerRmbeSize)).toString(16)}`, on.name, c.key);
    }
  }
}

/** CDCs of the tracker's connections no connection of the state matched, on links the state lists. */
function unknownConns(add: Add, v: GroupView, used: Set<SmcConn>): void {
  for (const tc of v.seen[0]!.tl.lg.conns) {
    if (used.has(tc)) continue;
    for (const d of [v.side, (1 - v.side) as 0 | 1]) {
      const w = tc.dirs[d], token = tc.sides[1 - d]!.token;
      // a link newer than the snapshot is not judged
      const ln = v.pairOf(w.link)?.name;
      if (!w.lastCdc || w.seq === undefined || token === undefined || ln === undefined) continue;
      const sent = d === v.side;
      add('state.conn', w.lastCdc, `${ln}: CDCs ${sent ? 'sent' : 'received'} for token ${hex32(token)}`, `${w.cdcs} CDCs, last seq ${w.seq}`, `no connection with ${sent ? 'peer' : 'local'} token ${hex32(token)} on ${v.g.name}`, ln, undefined, w.lastCdc.tsNs, 'warn');
    }
  }
}

/** The tracker's connection of each of the endpoint's connections in one group: by its tokens
 *  (the endpoint is `side` of the group's links) and, when tokens were reused, its TCP socket. */
function matchConns(conns: EpConn[], lg: LinkGroup, side: 0 | 1): Map<EpConn, SmcConn> {
  const peer = (1 - side) as 0 | 1;
  const byToken = new Map<number, SmcConn[]>();
  for (const tc of lg.conns) {
    const t = tc.sides[side].token ?? tc.sides[peer].token;
    if (t === undefined) continue;
    let l = byToken.get(t);
    if (!l) byToken.set(t, l = []);
    l.push(tc);
  }
  const out = new Map<EpConn, SmcConn>();
  const taken = new Set<SmcConn>();
  for (const c of conns) {
    const cands = [...(byToken.get(c.localToken) ?? []), ...(byToken.get(c.peerToken) ?? [])].filter((tc) => !taken.has(tc)
      && (tc.sides[side].token ?? c.localToken) === c.localToken && (tc.sides[peer].token ?? c.peerToken) === c.peerToken);
    const byTcp = c.tcp && cands.find((tc) => tc.tcp && sameSocket(tc, c.tcp!));
    const tc = byTcp || cands[cands.length - 1];
    if (tc) { out.set(c, tc); taken.add(tc); }
  }
  return out;
}

function sameSocket(tc: SmcConn, s: { local: string; remote: string }): boolean {
  const a = `${tc.tcp!.client.ip}:${tc.tcp!.client.port}`, b = `${tc.tcp!.server.ip}:${tc.tcp!.server.port}`;
  return (s.local === a && s.remote === b) || (s.local === b && s.remote === a);
}

function sideIs(by: 'client' | 'server', e: 0 | 1): boolean { return (by === 'client' ? 0 : 1) === e; }

function flagCheck(add: Add, w: SmcDir, epFlags: string[], what: string, field: string, link: string | undefined, key: string, lastNs: bigint | undefined): void {
  const wire = [w.doneWriting && 'done', w.closed && 'closed', w.aborted && 'abort'].filter(Boolean).join(',') || 'none';
  const ep = ['done', 'closed', 'abort'].filter((f) => epFlags.includes(f)).join(',') || 'none';
  if (wire !== ep) add('state.flags', w.lastCdc, what, `${wire} (frame ${w.lastCdc?.frame})`, `${field} ${ep}`, link, key, lastNs);
}

/** The peer's consumer cursor as the endpoint knows it: tx.prod minus the bytes still in use in the peer's RMBE. */
function peerCons(c: EpConn): EpCursor | undefined {
  const p = c.tx.prod, size = c.tx.peerRmbeSize, space = c.tx.peerSpace;
  if (!p || size === undefined || space === undefined || size <= 0) return undefined;
  const ringTotal = 65536 * size;
  const total = (((p.wrap * size + p.count - (size - space)) % ringTotal) + ringTotal) % ringTotal;
  return { wrap: Math.floor(total / size) & 0xffff, count: total % size };
}

function sameCursor(a: EpCursor, b: EpCursor): boolean { return a.wrap === b.wrap && a.count === b.count; }
function curs(c: EpCursor): string { return `${c.wrap}:${c.count}`; }
function maxNs(a: bigint | undefined, b: bigint | undefined): bigint | undefined {
  if (a === undefined) return b;
  if (b === undefined) return a;
  return a > b ? a : b;
}
