// A link group (RFC 7609 3.2, Linux smc_core.c + smc_llc.c): the links (RC QPs) to one peer, the
// connections multiplexed over them (by alert token), the RMBs they use, and link-layer control
// (LLC): CONFIRM LINK, ADD LINK (a second link, SMC-Rv2), REQUEST ADD LINK (a client asks the
// server for one), DELETE LINK, CONFIRM/DELETE RKEY, TEST LINK, and failover of connections to
// the surviving link. Every LLC message is built and parsed by the analyzer's codec
// (dissectors/wire/llc.ts).
//
// States (explicit, named):
//   link:  ACTIVATING (QP up, CONFIRM LINK pending) → ACTIVE → DELETING → DOWN
//   group: ACTIVE → (last connection gone) IDLE → (idle timer) TERMINATING → TERMINATED
// Group type (Linux lgr->type, derived here from the ACTIVE links, from this side's view):
//   NONE, SINGLE, SYMMETRIC (two links over different devices on both sides), ASYMMETRIC_LOCAL
//   (two links share a local device), ASYMMETRIC_PEER (two links share a peer GID).
// Which links may be added follows Linux (smc_llc_alloc_alt_link): at most LINK_SLOTS usable
// links; none while SYMMETRIC; an asymmetric one only to a SINGLE group; and max links 1 (CLC /
// CONFIRM LINK) means no second link at all. So when a device returns, the symmetric link is
// added next to the asymmetric one (three links for a moment) and the server then deletes the
// asymmetric one (DELETE LINK "asymmetric link no longer needed").
// A peer's requests are answered at once (they never wait on our own flow, so two LLC flows
// crossing each other cannot deadlock — the collision rules of 3.5.5.3 reduce to "answer
// immediately, keep one local flow at a time"). Local flows (CONFIRM RKEY, TEST LINK,
// DELETE LINK) are serialised and time out.

import { EventEmitter } from 'node:events';
import {
  decodeLlc, encodeLlc, llcTypeByte, LlcCode, LLC_MSG_SIZE, summarizeLlc, deleteLinkReason,
  type LlcMessage, type LlcConfirmLink, type LlcAddLink, type LlcDeleteLink, type LlcConfirmRkey,
  type LlcTestLink, type LlcDeleteRkey, type LlcKind, type LlcRequestAddLink, type LlcAddLinkCont,
} from '../../dissectors/wire/llc.js';
import { CDC_MSG_SIZE, CDC_TYPE } from '../../dissectors/wire/cdc.js';
import { CDC_FIELDS } from '../../dissectors/wire/views/cdc.js';
import { LLC_REQUEST_ADD_LINK_FIELDS } from '../../dissectors/wire/views/llc.js';
import { entryAt } from '../../dissectors/wire/views/field.js';
import { u32 } from '../../dissectors/wire/common.js';
import type { LinkGroupSnapshot } from '../state.js';
import { Access, addrPlus, exactAddr, type Mr, type Mtu, type Pd } from '../verbs/index.js';
import { WrLink, LinkDownError, type PendingWrite, type QpPeer, type SendDone } from './wr.js';
import { DEL_REASON, type LlcRkeyEntry } from '../../dissectors/wire/llc.js';
import type { Trace } from '../trace.js';

export type Role = 'client' | 'server';

/** After our DELETE LINK (all) and the peer's first DELETE LINK: quiet time before the QPs go. */
const LINGER_QUIET_MS = 300;
/** Linux SMC_LINKS_PER_LGR_MAX: two paths plus the one that replaces an asymmetric link. */
const LINK_SLOTS = 3;
/** ADD LINK CONTINUATION rounds before an SMC-Rv1 rkey exchange is abandoned (see rkeyExchange). */
const MAX_CONT_ROUNDS = 128;
/** DELETE LINK reasons (Linux SMC_LLC_DEL_*), see DELETE_LINK_REASONS. */
const DEL_LOST_PATH = DEL_REASON.LOST_PATH;
const DEL_NO_ASYM_NEEDED = DEL_REASON.NO_ASYM_NEEDED;
export type LinkState = 'ACTIVATING' | 'ACTIVE' | 'DELETING' | 'DOWN';
export type GroupState = 'ACTIVE' | 'IDLE' | 'TERMINATING' | 'TERMINATED';
export type GroupType = 'NONE' | 'SINGLE' | 'SYMMETRIC' | 'ASYMMETRIC_LOCAL' | 'ASYMMETRIC_PEER';
const asymmetric = (t: GroupType): boolean => t === 'ASYMMETRIC_LOCAL' || t === 'ASYMMETRIC_PEER';

/** What the link group knows about the local RoCE device. */
export interface LocalPort {
  pd: Pd;
  gid: string;
  mac: string;
  /** Active MTU of the port (ibv_mtu). */
  mtu: Mtu;
  sgidIndex: number;
  /** Set by the stack while the port is down (IBV_EVENT_PORT_ERR until PORT_ACTIVE): no new
   *  link goes over it. */
  down?: boolean;
}

export interface LinkGroupTimers {
  /** LLC request → response (Linux SMC_LLC_WAIT_TIME 2 s). */
  llcTimeoutMs: number;
  /** TEST LINK after this much silence (Linux net.smc.smcr_testlink_time 30 s); 0 = off. */
  testLinkMs: number;
  /** An idle link group (no connections) is deleted after this (Linux 10 min). */
  idleMs: number;
}

/** A connection as the link group sees it: where its CDC messages go. */
export interface ConnSink {
  /** A CDC message (44 bytes) for this connection's token arrived: a view into the receive
   *  buffer, valid only during the call (it is re-posted afterwards) — copy to keep it. */
  receiveCdc(bytes: Uint8Array): void;
  /** The link group died under the connection (no link left). */
  linkGroupDown(reason: string): void;
  /** The connection's link died and another link of the group carries it from now on (4.6). */
  linkSwitched(reason: string): void;
}

/** One RMB (receive buffer with remote write) or send buffer, kept for reuse. */
export interface BufDesc {
  /** The registration on the group's first port (the one CLC announces). */
  mr: Mr;
  /** Registrations of the same memory on every port of the group (rkeys per link). */
  mrs: Map<LocalPort, Mr>;
  size: number;
  inUse: boolean;
  /** RMB only: the peer knows its rkey (CLC or CONFIRM RKEY). */
  confirmed: boolean;
}

/** The peer's RMB of one connection on one link. */
export interface Rtoken { rkey: number; addr: bigint }

interface ConnEntry {
  token: number; sink: ConnSink; peerToken: number; rtokens: Map<number, Rtoken>; peerRmbeSize: number;
  /** The link CLC put the connection on (Linux conn->lnk: the client takes the one the server's
   *  Accept names), used while it is ACTIVE; 0 before CLC. */
  linkId: number;
  /** Writes queued by writeFor(), posted with the connection's next CDC. */
  /** writes[0, nWrites) are queued; the objects are reused (one per slot, not one per write). */
  writes: Array<{ mr: Mr; off: number; len: number; dstOff: number }>;
  nWrites: number;
  /** What linkFor() and the rtoken map gave the last CDC, kept while routeGen is `routeGen`: the
   *  link (undefined: none), its rtoken, and the send buffer's registration on its device
   *  (`mrTo` for `mrFrom`). Four lookups per CDC (link, rtoken, buffer, port) otherwise. */
  route: Link | undefined; routeRt: Rtoken | undefined; routeGen: number;
  /** routeRt's address as a number (exactAddr; -1: none or not exact): a WRITE's remote address
   *  is that plus the offset, a number where exact — no bigint per WRITE (round 18). */
  routeAddr: number;
  mrFrom: Mr | undefined; mrTo: Mr | undefined;
}

/**
 * Bumped whenever what a connection's route depends on may change: a link's state, the links of
 * a group, a connection's link or peer RMB, an rtoken learnt or dropped. Rare (link setup,
 * failover, CONFIRM RKEY); a cached route is re-resolved on the next CDC after any of them, in
 * any group of the process.
 */
let routeGen = 0;
function rerouted(): void { routeGen++; }

export class Link {
  private st: LinkState = 'ACTIVATING';
  get state(): LinkState { return this.st; }
  /** Every change re-resolves the connections' cached routes (routeGen). */
  set state(s: LinkState) { this.st = s; rerouted(); }
  peer: { gid: string; mac: string; qpn: number; psn: number; mtu: Mtu } | undefined;
  /** When the keepalive check first saw rxCount move (ms; Date.now()), or the link's creation. */
  lastRx = Date.now();
  /** Messages received: counted per message, stamped into lastRx by the keepalive check (a
   *  clock read per message was ~55 ns of every CDC on this VM, round 13). */
  rxCount = 0;
  /** rxCount at the keepalive check before. */
  rxSeen = 0;
  /** Added as the asymmetric link of the group (Linux link_is_asym): new connections avoid it. */
  asym = false;
  constructor(readonly id: number, readonly wr: WrLink, readonly port: LocalPort) {}
  get qpn(): number { return this.wr.qpn; }
}

interface Waiter { match: (m: LlcMessage, link: Link) => boolean; resolve: (m: LlcMessage) => void; reject: (e: Error) => void; timer: NodeJS.Timeout }

let lgrCounter = 0;

export class LinkGroup extends EventEmitter {
  /** Local number (Linux lgr->id; its low 24 bits go into link user ids). */
  readonly num = ++lgrCounter;
  state: GroupState = 'ACTIVE';
  readonly links = new Map<number, Link>();
  readonly conns = new Map<number, ConnEntry>();
  private readonly rmbs: BufDesc[] = [];
  private readonly sndbufs: BufDesc[] = [];
  /** Buffer of a registration (any port's), to find the same memory's MR on another link's device. */
  private readonly bufOf = new Map<Mr, BufDesc>();
  private nextToken = 1;
  /** The connection found by token last (connOf): a group's one connection in request/response
   *  traffic is found by a compare, not a Map lookup, on each of its CDCs sent and received. */
  private lastConn: ConnEntry | undefined;
  /** sendCdcForCb's write objects, reused per CDC, and writeLists[n]: the first n of them. */
  private readonly writePool: PendingWrite[] = [];
  private readonly writeLists: PendingWrite[][] = [];
  /** Last link id the server handed out (Linux lgr->next_link_id: ids are not reused at once). */
  private nextLinkId = 0;
  private waiters: Waiter[] = [];
  private flow: Promise<unknown> = Promise.resolve();
  private testTimer: NodeJS.Timeout | undefined;
  private idleTimer: NodeJS.Timeout | undefined;
  /** Set while our DELETE LINK (all) is out and the QP stays up for the peer's teardown messages. */
  private linger: { link: Link; seen: boolean; timer: NodeJS.Timeout | undefined; finish: () => void } | undefined;
  stats = { llcIn: 0, llcOut: 0, cdcIn: 0, cdcDropped: 0, rejectsSent: 0, sendErrors: 0 };
  /** The last LLC send (or flow) that failed, for state views: errors are counted, never swallowed. */
  lastSendError: string | undefined;
  /** Protocol trace (SmcOptions.trace): every LLC message in and out. */
  trace: Trace | undefined;

  constructor(
    readonly role: Role,
    /** SMC-R version of the group: 1 (44-byte LLC v1) or 2 (LLC v2). */
    readonly version: 1 | 2,
    /** v2 release (0 = v2.0, 1 = v2.1). */
    readonly release: number,
    /** Peer system ID ("instance@mac") as CLC carried it. */
    readonly peerId: string,
    /** Local RoCE ports: the first carries the first link; others can carry added links. */
    readonly ports: readonly LocalPort[],
    readonly maxConns: number,
    readonly maxLinks: number,
    readonly timers: LinkGroupTimers,
    private readonly log: (line: string) => void = () => {},
  ) {
    super();
    if (timers.testLinkMs > 0) {
      // Checked at least every second: with testLinkMs/2 alone a dead idle link was found only
      // 30 + 15 + 2 s after its last message (43-46 s measured); now testLinkMs + ≤ 1 s + the LLC wait.
      this.testTimer = setInterval(() => this.keepalive(), Math.max(50, Math.min(1000, Math.floor(timers.testLinkMs / 2))));
      this.testTimer.unref();
    }
  }

  get name(): string { return `LG${this.num}`; }
  get port(): LocalPort { return this.ports[0]!; }
  /** The peer's RoCE GIDs (server: from the client's Confirm GID list), for adding links. */
  peerGids: string[] = [];
  /** The peer's RMBs: per RMB, its rtoken on each link (Linux lgr->rtokens). Connections share these maps. */
  private readonly peerRmbs: Array<Map<number, Rtoken>> = [];
  get full(): boolean { return this.conns.size >= this.maxConns; }

  /** The first ACTIVE link (the one connections use). */
  activeLink(): Link | undefined {
    for (const l of this.links.values()) if (l.state === 'ACTIVE') return l;
    return undefined;
  }

  /**
   * The link a new connection goes on (Linux smcr_lgr_conn_assign_link, server side; the client
   * takes the link the Accept names): of the ACTIVE links that are not asymmetric, in id order,
   * the second when the group holds an odd number of connections, else the first. Connections
   * alternate over the two links of a symmetric group.
   */
  linkForNewConn(): Link | undefined {
    const ls = [...this.links.values()].filter((l) => l.state === 'ACTIVE' && !l.asym).sort((a, b) => a.id - b.id);
    return (this.conns.size % 2 === 1 ? ls[1] : undefined) ?? ls[0] ?? this.activeLink();
  }

  /** Links that take a slot (Linux smc_link_usable): being set up or ACTIVE. */
  private usableLinks(): Link[] {
    return [...this.links.values()].filter((l) => l.state === 'ACTIVATING' || l.state === 'ACTIVE');
  }

  /** The group's type from its ACTIVE links, seen from this side (Linux lgr->type). */
  get type(): GroupType {
    const ls = [...this.links.values()].filter((l) => l.state === 'ACTIVE' && l.peer);
    if (ls.length === 0) return 'NONE';
    if (ls.length === 1) return 'SINGLE';
    const pairs = ls.flatMap((a, i) => ls.slice(i + 1).map((b) => [a, b] as const));
    if (pairs.some(([a, b]) => a.port.gid !== b.port.gid && a.peer!.gid !== b.peer!.gid)) return 'SYMMETRIC';
    return pairs.some(([a, b]) => a.port.gid === b.port.gid) ? 'ASYMMETRIC_LOCAL' : 'ASYMMETRIC_PEER';
  }

  /** Why a link of `newType` cannot be added now (Linux smc_llc_alloc_alt_link and the max links
   *  check of SMC-Rv2.1), or undefined when it can. */
  private addLinkRefusal(newType: GroupType): string | undefined {
    const t = this.type;
    if (t === 'NONE') return 'no active link';
    if (t === 'SINGLE' && this.maxLinks <= 1) return 'max links 1';
    if (t === 'SYMMETRIC') return 'the group is symmetric already';
    if (t !== 'SINGLE' && asymmetric(newType)) return `an asymmetric link cannot join a ${t} group`;
    if (this.usableLinks().length >= LINK_SLOTS) return `all ${LINK_SLOTS} link slots in use`;
    return undefined;
  }

  /** The local port for a new link next to `via` (Linux smc_pnet_find_alt_roce): another port
   *  that is up, preferably one no link uses; undefined when there is none. */
  private altPort(via: Link): LocalPort | undefined {
    const used = new Set(this.usableLinks().map((l) => l.port));
    const alt = this.ports.filter((p) => p !== via.port && !p.down);
    return alt.find((p) => !used.has(p)) ?? alt[0];
  }

  // ---------------------------------------------------------------- links --

  /** Create a link on `port` (QP in INIT with receives posted). Without `id` (first link, or the
   *  server adding one) the next free id after the last one handed out (1 for the first). */
  createLink(port: LocalPort = this.port, id?: number): Link {
    if (id === undefined) {
      do id = this.nextLinkId = (this.nextLinkId + 1) & 0xff; while (id === 0 || this.links.has(id));
    }
    const wr = new WrLink(port.pd, { bufSize: this.version === 2 ? 8192 : LLC_MSG_SIZE });
    const link = new Link(id, wr, port);
    wr.init();
    wr.onMessage = (b: Uint8Array) => this.onMessage(link, b);
    wr.on('down', (reason: string) => this.onLinkDown(link, reason));
    this.links.set(id, link);
    rerouted();
    return link;
  }

  /** Bring a link's QP to RTR toward the peer (and RTS when `rts`). */
  connectLink(link: Link, peer: { gid: string; mac: string; qpn: number; psn: number; mtu: Mtu }, rts: boolean): void {
    link.peer = peer;
    const qp: QpPeer = { qpn: peer.qpn, psn: peer.psn, gid: peer.gid, mtu: Math.min(peer.mtu, link.port.mtu) as Mtu };
    link.wr.rtr(qp, link.port.sgidIndex);
    if (rts) link.wr.rts();
  }

  /** Link user id as Linux builds it: 3 bytes of the group number, then the link id. */
  linkUid(link: Link): number { return (((this.num & 0xffffff) << 8) | link.id) >>> 0; }

  private confirmLinkMsg(link: Link, response: boolean): LlcConfirmLink {
    return {
      ...this.hdr(LlcCode.CONFIRM_LINK, response), kind: 'confirm_link', noRmbeEyecatcher: true,
      mac: link.port.mac, gid: link.port.gid, qpn: link.qpn, linkId: link.id, linkUid: this.linkUid(link),
      // Linux smc_llc_send_confirm_link: the group's limits only in v2.1; before, max links is
      // SMC_LINKS_ADD_LNK_MAX (2) and max conns is left 0
      ...(this.version === 2 && this.release >= 1 ? { maxLinks: this.maxLinks, maxConns: this.maxConns } : { maxLinks: 2, maxConns: 0 }),
    };
  }

  /** Server, first contact: QP is RTS; send CONFIRM LINK and wait for the client's answer. */
  async serverConfirmLink(link: Link): Promise<void> {
    const rsp = this.expect((m, l) => l === link && m.kind === 'confirm_link' && m.response, 'CONFIRM LINK response');
    await this.sendLlc(link, this.confirmLinkMsg(link, false));
    await rsp;
    link.state = 'ACTIVE';
  }

  /** Client, first contact: wait for the server's CONFIRM LINK, go to RTS, answer it. */
  async clientConfirmLink(link: Link): Promise<void> {
    const req = (await this.expect((m, l) => l === link && m.kind === 'confirm_link' && !m.response, 'CONFIRM LINK request')) as LlcConfirmLink;
    if (link.peer && req.qpn !== link.peer.qpn) throw new Error(`CONFIRM LINK names QP 0x${req.qpn.toString(16)}, CLC said 0x${link.peer.qpn.toString(16)}`);
    link.wr.rts();
    link.state = 'ACTIVE';
    await this.sendLlc(link, this.confirmLinkMsg(link, true));
  }

  // ----------------------------------------------------------- connections --

  /** A fresh alert token for a new connection (unique in the group). */
  allocToken(): number {
    while (this.conns.has(this.nextToken) || this.nextToken === 0) this.nextToken = (this.nextToken + 1) >>> 0;
    return this.nextToken++;
  }

  /** Register a connection's token as soon as it is allocated, so CDCs that race the end of the
   *  handshake (3.5.2.4) reach its sink; the peer's side is set once CLC has told it. */
  addConn(token: number, sink: ConnSink): void {
    this.conns.set(token, {
      token, sink, peerToken: 0, rtokens: new Map(), peerRmbeSize: 0, linkId: 0, writes: [], nWrites: 0,
      route: undefined, routeRt: undefined, routeGen: -1, routeAddr: -1, mrFrom: undefined, mrTo: undefined,
    });
    if (this.lastConn?.token === token) this.lastConn = undefined;
    if (this.idleTimer) { clearTimeout(this.idleTimer); this.idleTimer = undefined; }
    this.state = 'ACTIVE';
  }

  /** The peer's token and RMB (as CLC announced it on `link`) for a registered connection. */
  setConnPeer(token: number, peerToken: number, peerRmb: Rtoken, peerRmbeSize: number, link: Link): void {
    const c = this.conns.get(token);
    if (!c) return;
    // CLC names the link by the peer's QPN, and two peer devices can both have QP 0x11: when the
    // peer confirmed this RMB (CONFIRM RKEY, ADD LINK) on another link with exactly this rkey and
    // address, that link is the one it put the connection on (its rkey is not valid on `link`).
    const on = this.peerRmbKnownOn(link, peerRmb) ? link
      : [...this.links.values()].find((l) => l.state === 'ACTIVE' && this.peerRmbKnownOn(l, peerRmb)) ?? link;
    if (on !== link) this.log(`${this.name} conn ${token}: CLC's rkey 0x${peerRmb.rkey.toString(16)} belongs to link ${on.id}, not ${link.id} (same peer QPN on two devices)`);
    c.peerToken = peerToken;
    c.rtokens = this.peerRmb(on.id, peerRmb.rkey, peerRmb.addr);
    c.peerRmbeSize = peerRmbeSize;
    c.linkId = on.id;
    rerouted();
  }

  private peerRmbKnownOn(link: Link, rt: Rtoken): boolean {
    return this.peerRmbs.some((m) => { const r = m.get(link.id); return r !== undefined && r.rkey === rt.rkey && r.addr === rt.addr; });
  }

  /** The rtoken map of the peer RMB known on `linkId` by (rkey, addr); created when new. */
  private peerRmb(linkId: number, rkey: number, addr?: bigint): Map<number, Rtoken> {
    const found = this.peerRmbs.find((m) => { const r = m.get(linkId); return r !== undefined && r.rkey === rkey && (addr === undefined || r.addr === addr); });
    if (found) return found;
    const m = new Map<number, Rtoken>([[linkId, { rkey, addr: addr ?? 0n }]]);
    this.peerRmbs.push(m);
    return m;
  }

  /** Forget a connection; the group goes IDLE when it was the last one. */
  removeConn(token: number): void {
    this.conns.delete(token);
    if (this.lastConn?.token === token) this.lastConn = undefined;
    if (this.conns.size === 0 && this.state === 'ACTIVE') {
      this.state = 'IDLE';
      this.idleTimer = setTimeout(() => void this.terminate('idle link group', true), this.timers.idleMs);
      this.idleTimer.unref();
    }
  }

  /** The connection of `token` (the last one found first). */
  private connOf(token: number): ConnEntry | undefined {
    const l = this.lastConn;
    if (l !== undefined && l.token === token) return l;
    const c = this.conns.get(token);
    if (c !== undefined) this.lastConn = c;
    return c;
  }

  /** linkFor(c) and its rtoken, from c's cache while no route changed (routeGen). */
  private routeOf(c: ConnEntry): Link | undefined {
    if (c.routeGen === routeGen) return c.route;
    const link = this.linkFor(c);
    c.route = link;
    c.routeRt = link ? c.rtokens.get(link.id) : undefined;
    c.routeAddr = c.routeRt ? exactAddr(c.routeRt.addr) : -1;
    c.routeGen = routeGen;
    c.mrFrom = undefined; c.mrTo = undefined;
    return link;
  }

  /** The active link a connection runs on: its own (CLC's) while that is ACTIVE, else the first
   *  one its peer RMB has an rtoken for (after a failover). */
  private linkFor(c: ConnEntry): Link | undefined {
    const own = this.links.get(c.linkId);
    if (own?.state === 'ACTIVE' && c.rtokens.has(own.id)) return own;
    for (const l of this.links.values()) if (l.state === 'ACTIVE' && c.rtokens.has(l.id)) return l;
    return undefined;
  }

  /** Queue an RDMA WRITE from a connection's send buffer into the peer's RMBE; it is posted
   *  together with the connection's next CDC (sendCdcFor), on the link that CDC goes on. */
  writeFor(token: number, sndbuf: Mr, srcOff: number, len: number, dstOff: number): void {
    const c = this.connOf(token);
    // a route resolved since the last change (it is an ACTIVE link), else the connection's own
    // link before activeLink()'s iteration (an iterator object per write, ~40 bytes of every rr
    // leg's garbage, round 13's heap profile)
    if (!c || ((c.routeGen !== routeGen || c.route === undefined) && this.links.get(c.linkId)?.state !== 'ACTIVE' && !this.activeLink())) throw new LinkDownError(`${this.name}: no active link for connection ${token}`);
    const w = (c.writes[c.nWrites] ??= { mr: sndbuf, off: 0, len: 0, dstOff: 0 });
    w.mr = sndbuf; w.off = srcOff; w.len = len; w.dstOff = dstOff;
    c.nWrites++;
  }

  /** SEND a connection's CDC on the active link, after the writes queued for it. */
  sendCdcFor(token: number, msg: Uint8Array): Promise<void> {
    return new Promise<void>((resolve, reject) => this.sendCdcForCb(token, msg, (e) => { if (e) reject(e); else resolve(); }));
  }

  /** sendCdcFor with a callback (the CDC data path: no promise per message); see WrLink.sendWithWritesCb. */
  sendCdcForCb(token: number, msg: Uint8Array, done: SendDone): void {
    const c = this.connOf(token);
    const link = c ? this.routeOf(c) : undefined;
    if (!link || !c) { done(new LinkDownError(`${this.name}: no active link`)); return; }
    const rt = c.routeRt;
    const queued = c.writes;
    const n = c.nWrites;
    if (n > 0 && !rt) { c.nWrites = 0; done(new LinkDownError(`${this.name}: no rkey of connection ${token} on link ${link.id}`)); return; }
    // Into the group's pooled objects (WrLink posts them before it returns, or copies them when
    // it has to queue the message), handed over as the list of the first n of them, made once
    // per n: no array, closure or object per CDC.
    for (let i = 0; i < n; i++) {
      const w = queued[i]!;
      const pw = (this.writePool[i] ??= { mr: w.mr, off: 0, len: 0, remoteAddr: 0, rkey: 0 });
      // the send buffer's registration on this link's device (after a failover: not the first port's)
      if (w.mr !== c.mrFrom) { c.mrFrom = w.mr; c.mrTo = this.bufOf.get(w.mr)?.mrs.get(link.port) ?? w.mr; }
      pw.mr = c.mrTo!;
      pw.off = w.off;
      pw.len = w.len;
      pw.remoteAddr = addrPlus(rt!.addr, c.routeAddr, w.dstOff);
      pw.rkey = rt!.rkey;
    }
    const out = (this.writeLists[n] ??= this.writePool.slice(0, n));
    c.nWrites = 0;
    link.wr.sendWithWritesCb(out, msg, done);
  }

  // --------------------------------------------------------------- buffers --

  /** An RMB of `size` bytes (reused when a free one exists). `fresh`: the peer does not know it yet. */
  getRmb(size: number): { buf: BufDesc; fresh: boolean } {
    for (const b of this.rmbs) if (!b.inUse && b.size === size) { b.inUse = true; return { buf: b, fresh: !b.confirmed }; }
    const mem = new Uint8Array(size);
    const mrs = new Map(this.ports.map((p) => [p, p.pd.regMr(mem, Access.LOCAL_WRITE | Access.REMOTE_WRITE)] as const));
    const buf: BufDesc = { mr: mrs.get(this.port)!, mrs, size, inUse: true, confirmed: false };
    for (const m of mrs.values()) this.bufOf.set(m, buf);
    this.rmbs.push(buf);
    return { buf, fresh: true };
  }

  /** A send buffer (local access only). */
  getSndbuf(size: number): BufDesc {
    for (const b of this.sndbufs) if (!b.inUse && b.size === size) { b.inUse = true; return b; }
    const mem = new Uint8Array(size);
    const mrs = new Map(this.ports.map((p) => [p, p.pd.regMr(mem, Access.LOCAL_WRITE)] as const));
    const buf: BufDesc = { mr: mrs.get(this.port)!, mrs, size, inUse: true, confirmed: true };
    for (const m of mrs.values()) this.bufOf.set(m, buf);
    this.sndbufs.push(buf);
    return buf;
  }

  /** Return buffers to the pool (zeroed: the next connection must not see old data). */
  putBuffers(...bufs: BufDesc[]): void {
    for (const b of bufs) { b.mr.buffer.fill(0); b.inUse = false; }
  }

  /** Tell the peer the rkey of a new RMB (CONFIRM RKEY, Linux does this on every new RMB of an existing group). */
  async confirmRkey(buf: BufDesc): Promise<void> {
    await this.serial(async () => {
      const link = this.activeLink();
      if (!link) throw new LinkDownError(`${this.name}: no active link`);
      // rtoken 0 is the RMB on the link this goes on; the others name it on the other links
      const others = [...this.links.values()].filter((l) => l !== link && l.state === 'ACTIVE').slice(0, 2)
        .map((l) => ({ linkId: l.id, rkey: buf.mrs.get(l.port)!.rkey, vaddr: buf.mrs.get(l.port)!.addr }));
      const zero = { linkId: 0, rkey: 0, vaddr: 0n };
      const lm = buf.mrs.get(link.port)!;
      const m: LlcConfirmRkey = {
        ...this.hdr(LlcCode.CONFIRM_RKEY, false), kind: 'confirm_rkey', negative: false, retry: false, numRtokens: others.length,
        rkey: lm.rkey, vaddr: lm.addr, others: [others[0] ?? zero, others[1] ?? zero],
      };
      const rsp = this.expect((r, l) => l === link && r.kind === 'confirm_rkey' && r.response, 'CONFIRM RKEY response');
      await this.sendLlc(link, m);
      const r = (await rsp) as LlcConfirmRkey;
      if (r.negative) throw new Error('peer rejected CONFIRM RKEY');
      buf.confirmed = true;
    });
  }

  // ------------------------------------------------------------------ LLC --

  private hdr(code: number, response: boolean): { llcVersion: 1 | 2; type: number; length: number; lengthOrder?: 'le'; response: boolean } {
    return this.version === 2
      ? { llcVersion: 2, type: llcTypeByte(code, 2), length: LLC_MSG_SIZE, lengthOrder: 'le', response }
      : { llcVersion: 1, type: llcTypeByte(code, 1), length: LLC_MSG_SIZE, response };
  }

  private async sendLlc(link: Link, m: LlcMessage): Promise<void> {
    this.stats.llcOut++;
    this.log(`${this.name}/L${link.id} > ${summarizeLlc(m)}`);
    if (this.trace) this.trace({ layer: 'llc', dir: 'out', linkGroup: this.name, link: link.id, msg: m });
    await link.wr.send(encodeLlc(m));
  }

  /** Wait for an LLC message matching `match` (on any link), with the LLC timeout. */
  private expect(match: Waiter['match'], what: string): Promise<LlcMessage> {
    const p = new Promise<LlcMessage>((resolve, reject) => {
      const w: Waiter = {
        match, resolve, reject,
        timer: setTimeout(() => { this.waiters = this.waiters.filter((x) => x !== w); reject(new Error(`timeout (${this.timers.llcTimeoutMs} ms) waiting for LLC ${what}`)); }, this.timers.llcTimeoutMs),
      };
      this.waiters.push(w);
    });
    // Marked handled: the caller may fail on its send before it awaits the answer.
    p.catch(() => undefined);
    return p;
  }

  /** Run local LLC flows one at a time. */
  private serial<T>(f: () => Promise<T>): Promise<T> {
    const run = this.flow.then(f, f);
    this.flow = run.catch(() => undefined);
    return run;
  }

  private onMessage(link: Link, b: Uint8Array): void {
    link.rxCount++;
    if (this.state === 'TERMINATING') {
      // Our DELETE LINK went out: the transport still ACKs; only the requests below are answered. A DELETE LINK
      // response ends it; after a DELETE LINK request (Linux sends its own instead of a
      // response), finish once the peer has been quiet for LINGER_QUIET_MS.
      const m = b.length >= 1 && b[0] !== CDC_TYPE ? decodeLlc(b).value : undefined;
      const lg = this.linger;
      if (lg && lg.link === link) {
        if (m?.kind === 'delete_link' && m.response) { setImmediate(lg.finish); return; } // answered: the peer is done (not from inside the CQ drain)
        if (m?.kind === 'delete_link' || lg.seen) {
          lg.seen = true;
          if (lg.timer) clearTimeout(lg.timer);
          lg.timer = setTimeout(lg.finish, LINGER_QUIET_MS);
        }
      }
      // Requests that crossed our DELETE LINK (a DELETE RKEY of the peer's last connection, a
      // TEST LINK) are still answered while the QP lingers: Linux waits 2 s for the answer
      // before it tears down otherwise.
      if (m && !m.response && (m.kind === 'delete_rkey' || m.kind === 'test_link' || m.kind === 'confirm_rkey')) {
        this.log(`${this.name}/L${link.id} < ${summarizeLlc(m)} (terminating: answered)`);
        void this.answer(link, m).catch((e: Error) => this.sendFailed(link, `answering ${m.kind}`, e));
        return;
      }
      this.log(`${this.name}/L${link.id} < ${m ? summarizeLlc(m) : 'CDC'} (terminating: not answered)`);
      return;
    }
    if (b.length >= 1 && b[0] === CDC_TYPE) {
      this.stats.cdcIn++;
      if (b.length < CDC_MSG_SIZE) { this.stats.cdcDropped++; return; }
      const token = u32(b, CDC_FIELDS.token.at); // the receiver's alert token
      const c = this.connOf(token);
      if (!c) { this.stats.cdcDropped++; this.log(`${this.name}/L${link.id} CDC for unknown token 0x${token.toString(16)} dropped`); return; }
      c.sink.receiveCdc(b.length === CDC_MSG_SIZE ? b : b.subarray(0, CDC_MSG_SIZE)); // the whole buffer when it is one CDC: no view
      return;
    }
    this.stats.llcIn++;
    const d = decodeLlc(b);
    const m = d.value;
    this.log(`${this.name}/L${link.id} < ${summarizeLlc(m)}`);
    if (this.trace) this.trace({ layer: 'llc', dir: 'in', linkGroup: this.name, link: link.id, msg: m });
    if (m.llcVersion !== this.version && m.kind !== 'unknown') {
      this.log(`${this.name}/L${link.id} LLC v${m.llcVersion} on a v${this.version} link group`);
    }
    const w = this.waiters.find((x) => x.match(m, link));
    if (w) {
      this.waiters = this.waiters.filter((x) => x !== w);
      clearTimeout(w.timer);
      w.resolve(m);
      return;
    }
    if (m.response) return; // a late or unsolicited response: nothing to do
    void this.answer(link, m).catch((e: Error) => this.log(`${this.name}/L${link.id} answering ${m.kind}: ${e.message}`));
  }

  /** The protocol's answer to a peer's request. */
  private async answer(link: Link, m: LlcMessage): Promise<void> {
    switch (m.kind as LlcKind) {
      case 'test_link': {
        const t = m as LlcTestLink;
        await this.sendLlc(link, { ...this.hdr(LlcCode.TEST_LINK, true), kind: 'test_link', userData: t.userData });
        return;
      }
      case 'confirm_rkey': {
        const r = m as LlcConfirmRkey;
        // The peer's RMB on this link (rtoken 0) and, for the others, on the links they name.
        const ok = r.numRtokens <= 2 && r.others.slice(0, r.numRtokens).every((o) => this.links.has(o.linkId));
        if (ok) {
          const e = this.peerRmb(link.id, r.rkey, r.vaddr);
          for (const o of r.others.slice(0, r.numRtokens)) e.set(o.linkId, { rkey: o.rkey, addr: o.vaddr });
          rerouted();
        }
        await this.sendLlc(link, { ...r, ...this.hdr(LlcCode.CONFIRM_RKEY, true), negative: !ok, retry: false });
        return;
      }
      case 'confirm_rkey_cont': {
        await this.sendLlc(link, { ...m, ...this.hdr(LlcCode.CONFIRM_RKEY_CONT, true) } as LlcMessage);
        return;
      }
      case 'delete_rkey': {
        const r = m as LlcDeleteRkey;
        await this.sendLlc(link, { ...r, ...this.hdr(LlcCode.DELETE_RKEY, true), negative: false, errorMask: 0, variable: false, rkeys: r.variable ? [] : r.rkeys });
        return;
      }
      case 'add_link': {
        const a = m as LlcAddLink;
        if (await this.acceptAddLink(link, a)) return;
        // No other local device (or not SMC-Rv2): no alternate path. Linux 6.12 sends reason 0 in
        // a v2 reject (the v2 length shares byte 2); do the same so a v2 length reads 44.
        this.stats.rejectsSent++;
        const rej: LlcAddLink = {
          ...this.hdr(LlcCode.ADD_LINK, true), kind: 'add_link', rejected: true, rejectReason: this.version === 2 ? 0 : 1,
          mac: a.mac, gid: a.gid, qpn: a.qpn, linkId: a.linkId, mtu: a.mtu, psn: a.psn,
        };
        await this.sendLlc(link, rej);
        return;
      }
      case 'request_add_link':
        await this.answerRequestAddLink(link, m as LlcRequestAddLink);
        return;
      case 'delete_link': {
        const dl = m as LlcDeleteLink;
        this.log(`${this.name}/L${link.id} peer deletes ${dl.all ? 'the link group' : `link ${dl.linkId}`}: ${deleteLinkReason(dl.reason)}`);
        const rsp: LlcDeleteLink = { ...this.hdr(LlcCode.DELETE_LINK, true), kind: 'delete_link', all: dl.all, orderly: dl.orderly, linkId: dl.linkId, reason: dl.reason };
        const target = dl.all ? undefined : this.links.get(dl.linkId);
        // One link of several, deleted over another one: gone before we answer (Linux
        // smc_llc_process_cli_delete_link answers at the end of its flow), so a request that
        // follows the DELETE LINK (the server's ADD LINK for a replacement) sees the group without it.
        if (target && target !== link && this.links.size > 1) {
          this.dropLink(target, 'deleted by peer');
          await this.sendLlc(link, rsp).catch((e: Error) => this.sendFailed(link, 'DELETE LINK response', e));
          return;
        }
        await this.sendLlc(link, rsp).catch((e: Error) => this.sendFailed(link, 'DELETE LINK response', e));
        if (!dl.all && !target) return; // a link we do not have (Linux ignores it too)
        if (dl.all || this.links.size <= 1) this.terminate(`peer deleted the link group (${deleteLinkReason(dl.reason)})`, false);
        else this.dropLink(target!, 'deleted by peer');
        return;
      }
      case 'confirm_link':
        return; // only expected during first contact (handled by a waiter); a stray one is ignored
      case 'add_link_cont':
        return; // only inside an ADD LINK flow (handled by a waiter); Linux drops a stray one too
      default:
        this.log(`${this.name}/L${link.id} unknown LLC type 0x${m.type.toString(16)} ignored`);
    }
  }

  // -------------------------------------------------------------- add link --

  /** Our RMBs as ADD LINK lists them: rkey on `from`, rkey and address on `to`. */
  private rkeyList(from: LocalPort, to: LocalPort): LlcRkeyEntry[] {
    return this.rmbs.filter((b) => b.confirmed || b.inUse).map((b) => ({ rkey: b.mrs.get(from)!.rkey, rkeyNew: b.mrs.get(to)!.rkey, vaddrNew: b.mrs.get(to)!.addr }));
  }

  /** The peer's rkey list of an ADD LINK: its RMBs (named by their rkey on `from`) on link `to`. */
  private learnRkeys(fromLink: number, toLink: number, list: readonly LlcRkeyEntry[]): void {
    for (const e of list) {
      const m = this.peerRmbs.find((x) => x.get(fromLink)?.rkey === e.rkey);
      if (m) m.set(toLink, { rkey: e.rkeyNew, addr: e.vaddrNew });
    }
    rerouted();
  }

  /** ADD LINK for `link`: v2 carries our RMBs' rkeys on the new link (and the target GID); v1 is
   *  44 bytes, its rkeys follow in ADD LINK CONTINUATION messages (rkeyExchange). */
  private addLinkMsg(response: boolean, link: Link, targetGid: string, rkeys: LlcRkeyEntry[]): LlcAddLink {
    const m: LlcAddLink = {
      ...this.hdr(LlcCode.ADD_LINK, response), kind: 'add_link', rejected: false, rejectReason: 0,
      mac: link.port.mac, gid: link.port.gid, qpn: link.qpn, linkId: link.id, mtu: link.port.mtu, psn: link.wr.psn,
    };
    if (this.version === 2) {
      m.length = 72 + 16 * rkeys.length;
      m.v2 = { direct: true, targetGid, numRkeys: rkeys.length, numRkeysOrder: 'le', rkeys };
    }
    return m;
  }

  /** One ADD LINK CONTINUATION (SMC-Rv1, Linux smc_llc_add_link_cont): the next two (at most) of
   *  our RMBs' rkeys on the new link, and how many are left to send counting these. The
   *  client's are responses, the server's requests. */
  private addLinkContMsg(newLink: Link, mine: readonly LlcRkeyEntry[], from: number): LlcAddLinkCont {
    const none: LlcRkeyEntry = { rkey: 0, rkeyNew: 0, vaddrNew: 0n };
    return {
      ...this.hdr(LlcCode.ADD_LINK_CONT, this.role === 'client'), kind: 'add_link_cont', linkId: newLink.id,
      numRkeys: Math.max(0, mine.length - from), rkeys: [mine[from] ?? none, mine[from + 1] ?? none],
    };
  }

  /**
   * SMC-Rv1 rkey exchange after ADD LINK (Linux smc_llc_srv_rkey_exchange / smc_llc_cli_rkey_exchange):
   * ADD LINK CONTINUATION messages on the old link, two rkeys each, the server's answered by the
   * client's, until both sides have sent all of theirs (a side with fewer sends empty ones).
   * `first` is the client's waiter for the server's first message, registered before the ADD LINK
   * response went out.
   */
  private async rkeyExchange(via: Link, l2: Link, first?: Promise<LlcMessage>): Promise<void> {
    const mine = this.rkeyList(via.port, l2.port);
    const isCont = (m: LlcMessage): boolean => m.kind === 'add_link_cont' && (m as LlcAddLinkCont).linkId === l2.id;
    let sent = 0, theirsLeft = 0, rounds = 0;
    const learn = (r: LlcAddLinkCont): void => {
      // Each round waits at most the LLC timeout; a peer that keeps announcing rkeys it never
      // sends would keep the flow going for good. 255 RMBs at most (one per connection) take
      // 128 rounds.
      if (++rounds > MAX_CONT_ROUNDS) throw new Error(`ADD LINK CONTINUATION: no end after ${MAX_CONT_ROUNDS} rounds`);
      const n = Math.min(r.numRkeys, 2);
      this.learnRkeys(via.id, l2.id, r.rkeys.slice(0, n));
      theirsLeft = r.numRkeys - n;
    };
    if (this.role === 'server') {
      do {
        const rsp = this.expect((m) => isCont(m) && m.response, 'ADD LINK CONTINUATION response');
        await this.sendLlc(via, this.addLinkContMsg(l2, mine, sent));
        sent = Math.min(mine.length, sent + 2);
        learn((await rsp) as LlcAddLinkCont);
      } while (sent < mine.length || theirsLeft > 0);
      return;
    }
    let next = first ?? this.expect((m) => isCont(m) && !m.response, 'ADD LINK CONTINUATION');
    for (;;) {
      learn((await next) as LlcAddLinkCont);
      const after = Math.min(mine.length, sent + 2);
      const more = after < mine.length || theirsLeft > 0;
      if (more) next = this.expect((m) => isCont(m) && !m.response, 'ADD LINK CONTINUATION');
      await this.sendLlc(via, this.addLinkContMsg(l2, mine, sent));
      sent = after;
      if (!more) return;
    }
  }

  /**
   * Server: add a link (SMC-Rv2, 3.5.5.1 / Linux smc_llc_srv_add_link): over another local port
   * that is up if there is one (else a second QP on the same port: asymmetric, as Linux offers it),
   * toward a peer GID no link uses yet (the ones a REQUEST ADD LINK named first). ADD LINK with
   * our RMBs' rkeys on the new QP, the client's ADD LINK response with its QP and rkeys, QP to
   * RTS, CONFIRM LINK on the new link. When the group is SYMMETRIC afterwards, an asymmetric
   * link left from a failover is deleted. Resolves true when the new link is ACTIVE.
   */
  addLink(opts: { via?: Link; targetGids?: readonly string[] } = {}): Promise<boolean> {
    return this.serial(async () => (await this.srvAddLink(opts)) === 'added');
  }

  /** 'none': no ADD LINK sent (nothing to offer); 'failed': sent, but no link came of it. */
  private async srvAddLink(opts: { via?: Link; targetGids?: readonly string[] }): Promise<'added' | 'failed' | 'none'> {
    const l1 = opts.via?.state === 'ACTIVE' ? opts.via : this.activeLink();
    if (!l1?.peer || this.role !== 'server' || this.state === 'TERMINATING' || this.state === 'TERMINATED') return 'none';
    const alt = this.altPort(l1);
    const port = alt ?? l1.port;
    const why = this.addLinkRefusal(alt ? 'SYMMETRIC' : 'ASYMMETRIC_LOCAL');
    if (why) { this.log(`${this.name} no link added: ${why}`); return 'none'; }
    const used = new Set(this.usableLinks().map((l) => l.peer?.gid));
    const target = [...(opts.targetGids ?? []), ...this.peerGids].find((g) => !used.has(g)) ?? l1.peer.gid;
    const l2 = this.createLink(port);
    try {
      const rsp = this.expect((m, l) => l === l1 && m.kind === 'add_link' && m.response, 'ADD LINK response');
      await this.sendLlc(l1, this.addLinkMsg(false, l2, target, this.rkeyList(l1.port, port)));
      const r = (await rsp) as LlcAddLink;
      if (r.rejected) { this.dropLink(l2, 'ADD LINK rejected by the peer'); return 'failed'; }
      this.connectLink(l2, { gid: r.gid, mac: r.mac, qpn: r.qpn, psn: r.psn, mtu: r.mtu as Mtu }, true);
      if (this.version === 2) this.learnRkeys(l1.id, l2.id, r.v2?.rkeys ?? []);
      else await this.rkeyExchange(l1, l2);
      const crsp = this.expect((m, l) => l === l2 && m.kind === 'confirm_link' && m.response, 'CONFIRM LINK response on the new link');
      await this.sendLlc(l2, this.confirmLinkMsg(l2, false));
      await crsp;
      l2.state = 'ACTIVE';
      l2.asym = asymmetric(this.type); // the link that made the group asymmetric is the asymmetric one
      this.log(`${this.name}/L${l2.id} added (QP 0x${l2.qpn.toString(16)} → 0x${r.qpn.toString(16)} ${r.gid}); group ${this.type}`);
    } catch (e) {
      if (this.links.get(l2.id) === l2) this.dropLink(l2, `add link failed: ${(e as Error).message}`);
      return 'failed';
    }
    if (this.type === 'SYMMETRIC') await this.deleteAsymLink();
    return 'added';
  }

  /**
   * The asymmetric link of a group that has a symmetric pair (Linux smc_llc_find_asym_link): of
   * two links over the same local port, the one whose peer GID another link also reaches.
   */
  private asymLink(): Link | undefined {
    const ls = [...this.links.values()].filter((l) => l.state === 'ACTIVE' && l.peer);
    for (const a of ls) {
      for (const b of ls) {
        if (a === b || a.port.gid !== b.port.gid) continue;
        for (const x of [a, b]) if (ls.some((k) => k !== x && k.peer!.gid === x.peer!.gid)) return x;
      }
    }
    return undefined;
  }

  /** Server: delete the asymmetric link once the group is symmetric again (Linux
   *  smc_llc_delete_asym_link): its connections move first, then DELETE LINK "asymmetric link
   *  no longer needed" on another link and the client's answer. Runs inside a serial flow. */
  private async deleteAsymLink(): Promise<void> {
    const asym = this.asymLink();
    if (!asym) return;
    const onIt = this.connsOn(asym);
    asym.state = 'DELETING';
    const via = this.activeLink();
    if (!via) { this.dropLink(asym, 'no link left to delete it on'); return; }
    for (const [, c] of onIt) if (this.linkFor(c)) c.sink.linkSwitched(`link ${asym.id} deleted: asymmetric link no longer needed`);
    try {
      const rsp = this.expect((m, l) => l === via && m.kind === 'delete_link' && m.response && (m as LlcDeleteLink).linkId === asym.id, 'DELETE LINK response');
      await this.sendLlc(via, { ...this.hdr(LlcCode.DELETE_LINK, false), kind: 'delete_link', all: false, orderly: true, linkId: asym.id, reason: DEL_NO_ASYM_NEEDED });
      await rsp;
    } catch (e) {
      this.log(`${this.name}/L${asym.id} DELETE LINK (asymmetric): ${(e as Error).message}`);
    }
    this.dropLink(asym, 'asymmetric link no longer needed');
  }

  /** Client: answer the server's ADD LINK (Linux smc_llc_cli_add_link) with a new QP; false = reject. */
  private async acceptAddLink(via: Link, a: LlcAddLink): Promise<boolean> {
    if (this.role !== 'client' || (this.version === 2 && !a.v2) || !a.mtu || this.links.has(a.linkId) || !via.peer) return false;
    let port = this.altPort(via);
    let newType: GroupType = 'SYMMETRIC';
    if (a.gid === via.peer.gid) {
      // the server offers another QP on the device it already uses: only over another device of ours
      if (!port) { this.log(`${this.name} ADD LINK link ${a.linkId} rejected: the peer's GID is in use and we have no other device up`); return false; }
      newType = 'ASYMMETRIC_PEER';
    }
    if (!port) { newType = 'ASYMMETRIC_LOCAL'; port = via.port; }
    const why = this.addLinkRefusal(newType);
    if (why) { this.log(`${this.name} ADD LINK link ${a.linkId} rejected: ${why}`); return false; }
    const l2 = this.createLink(port, a.linkId);
    try {
      this.connectLink(l2, { gid: a.gid, mac: a.mac, qpn: a.qpn, psn: a.psn, mtu: a.mtu as Mtu }, false);
      if (a.v2) this.learnRkeys(via.id, l2.id, a.v2.rkeys);
      // waiters first: the server's answers may arrive before our send completes
      const cont = this.version === 1 ? this.expect((m) => m.kind === 'add_link_cont' && !m.response && (m as LlcAddLinkCont).linkId === l2.id, 'ADD LINK CONTINUATION') : undefined;
      const conf = this.expect((m, l) => l === l2 && m.kind === 'confirm_link' && !m.response, 'CONFIRM LINK request on the new link');
      await this.sendLlc(via, this.addLinkMsg(true, l2, a.gid, this.rkeyList(via.port, port)));
      if (cont) await this.rkeyExchange(via, l2, cont);
      await conf;
      l2.wr.rts();
      l2.state = 'ACTIVE';
      l2.asym = asymmetric(this.type); // the link that made the group asymmetric is the asymmetric one
      await this.sendLlc(l2, this.confirmLinkMsg(l2, true));
      this.log(`${this.name}/L${l2.id} added (QP 0x${l2.qpn.toString(16)} → 0x${a.qpn.toString(16)} ${a.gid}); group ${this.type}`);
      return true;
    } catch (e) {
      if (this.links.get(l2.id) === l2) this.dropLink(l2, `add link failed: ${(e as Error).message}`);
      return true; // answered (the server times out or sees the link fail)
    }
  }

  /**
   * Client: ask the server for a link (Linux smc_llc_send_request_add_link, SMC-Rv2): REQUEST ADD
   * LINK with our GIDs (the one of the link it goes on first) when the group is SINGLE or
   * ASYMMETRIC_LOCAL and another local port is up. The server answers with ADD LINK (handled as
   * any ADD LINK) or with a REQUEST ADD LINK response when it has nothing to offer. Resolves
   * true when the request went out.
   */
  requestAddLink(): Promise<boolean> {
    return this.serial(async () => {
      const t = this.type;
      const via = this.activeLink();
      if (this.role !== 'client' || this.version !== 2 || !via || t === 'NONE' || t === 'SYMMETRIC' || t === 'ASYMMETRIC_PEER') return false;
      if (t === 'SINGLE' && this.maxLinks <= 1) return false;
      const gids = [via.port.gid, ...this.ports.filter((p) => !p.down && p.gid !== via.port.gid).map((p) => p.gid)];
      if (gids.length <= 1) return false;
      await this.sendLlc(via, { ...this.hdr(LlcCode.REQUEST_ADD_LINK, false), length: entryAt(LLC_REQUEST_ADD_LINK_FIELDS.gids, gids.length), kind: 'request_add_link', rejected: false, rejectReason: 0, gidCount: gids.length, gids });
      return true;
    });
  }

  /** Server: a client's REQUEST ADD LINK (Linux smc_llc_srv_add_link with its request): run the
   *  ADD LINK flow toward the GIDs it named; without an ADD LINK to send, answer the request. */
  private answerRequestAddLink(link: Link, m: LlcRequestAddLink): Promise<void> {
    return this.serial(async () => {
      const r = this.role === 'server' ? await this.srvAddLink({ via: link, targetGids: m.gids }) : 'none';
      if (r !== 'none' || link.state !== 'ACTIVE') return;
      await this.sendLlc(link, { ...this.hdr(LlcCode.REQUEST_ADD_LINK, true), kind: 'request_add_link', rejected: false, rejectReason: 0, gidCount: 0, gids: [] });
    });
  }

  /** A local port went down (IBV_EVENT_PORT_ERR, Linux smcr_port_err): its links fail now
   *  rather than at the next send (failover to a link over another port). */
  portDown(port: LocalPort): void {
    for (const l of [...this.links.values()]) if (l.port === port && l.state !== 'DOWN') l.wr.fail(`local port ${port.gid} down`);
  }

  /** A local port is up again (IBV_EVENT_PORT_ACTIVE, Linux smcr_port_add): a client asks for a
   *  link, a server adds one (each only when the group could use it). */
  portUp(): Promise<boolean> {
    if (this.state === 'TERMINATING' || this.state === 'TERMINATED') return Promise.resolve(false);
    return this.role === 'client' ? this.requestAddLink() : this.addLink();
  }

  // ------------------------------------------------------------- liveness --

  private keepalive(): void {
    if (this.state === 'TERMINATING' || this.state === 'TERMINATED') return;
    const now = Date.now();
    for (const link of this.links.values()) {
      // a message since the check before: the link was alive within one check interval, so a
      // TEST LINK goes out at most one interval later than with a stamp per message
      if (link.rxCount !== link.rxSeen) { link.rxSeen = link.rxCount; link.lastRx = now; }
      if (link.state !== 'ACTIVE' || now - link.lastRx < this.timers.testLinkMs) continue;
      void this.serial(async () => {
        const rsp = this.expect((m, l) => l === link && m.kind === 'test_link' && m.response, 'TEST LINK response');
        await this.sendLlc(link, { ...this.hdr(LlcCode.TEST_LINK, false), kind: 'test_link', userData: new Uint8Array(16) });
        await rsp;
      }).catch((e: Error) => this.dropLink(link, `TEST LINK failed: ${e.message}`));
    }
  }

  private onLinkDown(link: Link, reason: string): void {
    if (link.state === 'DOWN') return;
    this.log(`${this.name}/L${link.id} down: ${reason}`);
    const survivor = [...this.links.values()].find((l) => l !== link && l.state === 'ACTIVE');
    // Tell the peer on the surviving link (disorderly DELETE LINK, "lost path"), so it switches too.
    if (survivor && this.state !== 'TERMINATING' && this.state !== 'TERMINATED') {
      const m: LlcDeleteLink = { ...this.hdr(LlcCode.DELETE_LINK, false), kind: 'delete_link', all: false, orderly: false, linkId: link.id, reason: DEL_LOST_PATH };
      void this.sendLlc(survivor, m).catch((e: Error) => this.sendFailed(survivor, 'DELETE LINK (lost path)', e));
    }
    this.dropLink(link, reason);
  }

  /** The connections whose CDCs and writes go over `link` now. */
  private connsOn(link: Link): Array<[number, ConnEntry]> {
    return [...this.conns.entries()].filter(([, c]) => this.linkFor(c) === link);
  }

  /** Remove a link; its connections move to a surviving link (failover), else the group ends.
   *  A server left with one link adds another (Linux: an asymmetric one until a device returns). */
  private dropLink(link: Link, reason: string): void {
    const wasActive = link.state === 'ACTIVE';
    const onIt = wasActive ? this.connsOn(link) : [];
    link.state = 'DOWN';
    link.wr.destroy();
    if (this.links.get(link.id) === link) this.links.delete(link.id);
    for (const m of this.peerRmbs) m.delete(link.id);
    rerouted();
    if (this.state === 'TERMINATING' || this.state === 'TERMINATED') return;
    if (!this.activeLink()) { this.terminate(`no link left (${reason})`, false); return; }
    if (!wasActive) return;
    for (const [token, c] of onIt) {
      if (this.linkFor(c)) c.sink.linkSwitched(`link ${link.id} down: ${reason}`);
      else c.sink.linkGroupDown(`connection ${token} has no rkey on a surviving link`);
    }
    if (this.role === 'server' && this.type === 'SINGLE') void this.addLink().catch((e: Error) => this.sendFailed(undefined, 'ADD LINK after a link went down', e));
  }

  /**
   * End the group: optionally tell the peer (orderly DELETE LINK all, reason "program-initiated
   * termination" as Linux sends), then fail every connection and free QPs and buffers.
   */
  terminate(reason: string, tellPeer: boolean): void {
    if (this.state === 'TERMINATING' || this.state === 'TERMINATED') return;
    this.state = 'TERMINATING';
    const link = this.activeLink();
    const done = (): void => {
      this.state = 'TERMINATED';
      if (this.testTimer) clearInterval(this.testTimer);
      if (this.idleTimer) clearTimeout(this.idleTimer);
      for (const w of this.waiters) { clearTimeout(w.timer); w.reject(new LinkDownError(reason)); }
      this.waiters = [];
      for (const c of this.conns.values()) c.sink.linkGroupDown(reason);
      this.conns.clear();
      this.lastConn = undefined;
      for (const l of this.links.values()) { l.state = 'DOWN'; l.wr.destroy(); }
      this.links.clear();
      rerouted();
      for (const b of [...this.rmbs, ...this.sndbufs]) for (const m of b.mrs.values()) { try { m.dereg(); } catch { /* gone */ } }
      this.bufOf.clear();
      this.rmbs.length = 0;
      this.sndbufs.length = 0;
      this.log(`${this.name} terminated: ${reason}`);
      this.emit('terminated', reason);
    };
    if (tellPeer && link) {
      const m: LlcDeleteLink = { ...this.hdr(LlcCode.DELETE_LINK, false), kind: 'delete_link', all: true, orderly: true, linkId: 0, reason: DEL_REASON.PROG_INIT_TERM };
      // Linux does not answer a DELETE LINK (all) with a response: it sends DELETE LINK requests of
      // its own while it tears down (a server one from smc_llc_process_srv_delete_link, then one
      // from smc_lgr_cleanup) and waits for their send completions. Keep the QP up (its transport
      // ACKs them) until the peer has been quiet for a moment after its first DELETE LINK, or the
      // LLC timeout, so the peer's sends complete instead of retrying into a destroyed QP.
      let finished = false;
      const finish = (): void => {
        if (finished) return;
        finished = true;
        clearTimeout(t);
        if (this.linger?.timer) clearTimeout(this.linger.timer);
        this.linger = undefined;
        done();
      };
      const t = setTimeout(finish, this.timers.llcTimeoutMs + 500);
      this.linger = { link, seen: false, timer: undefined, finish };
      this.sendLlc(link, m).catch(finish);
    } else {
      done();
    }
  }

  /** A send or flow that failed where nobody awaits it: counted, logged and kept for the state view. */
  private sendFailed(link: Link | undefined, what: string, e: Error): void {
    this.stats.sendErrors++;
    this.lastSendError = `${link ? `L${link.id} ` : ''}${what}: ${e.message}`;
    this.log(`${this.name}/${link ? `L${link.id}` : '-'} ${what} failed: ${e.message}`);
  }

  /** Snapshot for state views (schema: endpoint/state.ts). */
  snapshot(): LinkGroupSnapshot {
    return {
      name: this.name, role: this.role, version: this.version, release: this.release, state: this.state, peerId: this.peerId,
      maxConns: this.maxConns, maxLinks: this.maxLinks, type: this.type,
      links: [...this.links.values()].map((l) => ({ id: l.id, state: l.state, gid: l.port.gid, qpn: l.qpn, psn: l.wr.psn, peer: l.peer, uid: this.linkUid(l), stats: l.wr.stats })),
      conns: [...this.conns.entries()].map(([token, c]) => ({ token, peerToken: c.peerToken, peerRmbeSize: c.peerRmbeSize, rtokens: [...c.rtokens.entries()].map(([id, r]) => ({ link: id, rkey: r.rkey, addr: '0x' + r.addr.toString(16) })) })),
      rmbs: this.rmbs.map((b) => ({ size: b.size, rkey: b.mr.rkey, addr: '0x' + b.mr.addr.toString(16), inUse: b.inUse, confirmed: b.confirmed })),
      stats: this.stats,
      ...(this.lastSendError ? { lastSendError: this.lastSendError } : {}),
    };
  }
}
