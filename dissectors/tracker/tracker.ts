// The correlation tracker: fed decoded frames in capture order, it joins TCP → CLC → link
// group → links (QP pairs, PSNs) → SMC-R connections (tokens, rkeys, RMBs, cursors) → the
// application bytes, annotates every frame with what it belongs to, and records anomalies.
// It owns all cross-frame state; renderers only print what it exposes, and diagnosis.ts turns
// that state into findings.
//
// Keys (DESIGN.md "Correlation keys"): a RoCE frame's link is found by (destination GID,
// destination QPN). A connection belongs to a link group, not to a link: a CDC's connection is
// found by (link group, direction, alert token) on any link of the group, an RDMA WRITE's by
// (link, direction, rkey) → RMB, where one RMB has one rkey per link (CLC, CONFIRM RKEY, ADD
// LINK rkey lists). The failover validation CDC moves a connection to the surviving link.

import type { DecodedFrame } from '../frame.js';
import type { Severity } from '../wire/common.js';
import { bufSizeFromCode, gidOfIp, hex32, hexQp, mtuFromCode } from '../wire/common.js';
import type { ClcAcceptConfirm, ClcDecline, ClcMessage } from '../wire/clc.js';
import { declineReason } from '../wire/reasons.js';
import type { LlcMessage } from '../wire/llc.js';
import { DEL_REASON, deleteLinkReason } from '../wire/llc.js';
import type { CdcMessage } from '../wire/cdc.js';
import { cursorDiff, cursorDistance, cursorOutOfRing, movedMultiWrap, overrunBytes, seqCheck, urgentByteAt, validationOutOfSync } from '../wire/cdcrules.js';
import { opcodeInfo, PREDICTED, type IbOpcodeInfo } from '../wire/ib.js';
import type {
  Anomaly, FrameNote, Link, LinkGroup, LinkSent, LlcQp, QpEnd, RetxStats, RmbAlias, RmbRef, SmcConn, SmcDir, SmcSide, TcpConn, TcpStream, WriteCont,
} from './model.js';
import { RingStream } from './stream.js';
import { newPsnRing, psnLookup, psnRecord } from './psnruns.js';
import { LlcPairing, type LlcRequest } from './llcpair.js';
import { lgEvent, lgEventSaid, noteType } from './lgtype.js';
import { flat, intern, internMaybe } from './intern.js';
import { append, none, ZERO_PAIR } from './lists.js';
import { DirSlab, type DirState } from './dir.js';
import { TcpState, type Epoch } from './tcpconn.js';
import { SideSlab, SmcState } from './smcconn.js';
import { LinkState } from './link.js';
import { ConnIndex } from './connindex.js';
import { GroupState } from './group.js';
import { LinkCache } from './linkcache.js';
import { sameTuple, TcpIndex } from './tcpindex.js';

export interface TrackerOptions {
  /** Keep the application bytes of this connection (index as in the summary) for --follow. */
  follow?: number;
  /** Or select it by a 4-tuple "a.b.c.d:port-e.f.g.h:port" (either order). */
  followTuple?: string;
  /** A capture filter may hide frames (live BPF): gaps are then notes, not warnings. */
  filtered?: boolean;
  /** Keep only what the summary, the diagnosis and the report read (smcdump -q / --summary /
   *  one-line): the per-direction times of the last cursor moves (`lastProdMove`,
   *  `lastConsMove`) and what each end sent on a link (`Link.sent`, read only by the state
   *  comparison) are not kept. Output is the same either way. */
  compact?: boolean;
  /** feed() returns one note object, reset for every frame (nothing allocated per frame): the
   *  caller reads it before the next feed() and keeps no reference (smcdump's replay). */
  reuseNote?: boolean;
}

/** After a first-contact Confirm the server must start CONFIRM LINK (Linux waits 5 s as client). */
const CONFIRM_LINK_TIMEOUT_NS = 5_000_000_000n;
/** A writer blocked this long without a consumer update is a window stall (docs/smcdump.md). */
export const WINDOW_STALL_NS = 1_000_000_000n;
/** DELETE LINK reason "lost path" (Linux SMC_LLC_DEL_LOST_PATH). */
const DEL_LOST_PATH = DEL_REASON.LOST_PATH;


const NO_ANOMALIES = Object.freeze([]) as unknown as Anomaly[];
/** A Proposal without UEIDs (v1): one shared empty list. */
const NO_UEIDS = Object.freeze([]) as unknown as string[];
const EMPTY_NOTE: FrameNote = Object.freeze({ anomalies: NO_ANOMALIES }) as FrameNote;

/** The note a tracker with `reuseNote` returns for every frame. Its fields are declared in the
 *  order the tracker sets them on a fresh note (TCP: mode, connection; RoCE: link, retransmission,
 *  connection, direction), so that its JSON (unset fields are left out) is the same text. */
class ReusedNote implements FrameNote {
  anomalies: Anomaly[] = NO_ANOMALIES;
  tcpMode: FrameNote['tcpMode'] = undefined;
  link: string | undefined = undefined;
  retransmission: boolean | undefined = undefined;
  conn: number | undefined = undefined;
  dir: FrameNote['dir'] = undefined;
  constructor() {
    // each field holds every kind of value it will hold once before any code uses the note:
    // V8 widens a field's representation when a number first replaces undefined (or an array
    // the shared empty one), and that throws away the optimised code of every function that
    // set or read the note so far (feed, onRoce: compiled twice per replay, measured)
    this.anomalies = []; this.tcpMode = 'tcp'; this.link = ''; this.retransmission = true; this.conn = 0; this.dir = 'c>s';
    this.reset();
  }
  reset(): this {
    this.anomalies = NO_ANOMALIES; this.tcpMode = undefined; this.link = undefined;
    this.retransmission = undefined; this.conn = undefined; this.dir = undefined;
    return this;
  }
}

export const SIDE = ['client', 'server'] as const;

/** RoCE traffic that is not SMC-R (UD/UC/RD/XRC transports), per flow. */
export interface OtherRoce { src: string; dst: string; qpn: number; transport: string; packets: number; bytes: number; first: number; last: number }

/** Every anomaly of one code: how many, the first and last frame, the first message. */
export interface AnomalyTotal { code: string; severity: Severity; count: number; first: number; last: number; message: string }

/** Anomalies kept with their frame per code (the rest are counted only). */
const ANOMALIES_KEPT = 1000;

export class Tracker {
  readonly tcp: TcpConn[] = [];
  readonly groups: LinkGroup[] = [];
  /** Anomalies with their frames: at most ANOMALIES_KEPT per code (memory stays bounded on
   *  captures with millions of retransmissions); `anomalyTotals` counts all of them. */
  readonly anomalies: Anomaly[] = [];
  readonly anomalyTotals = new Map<string, AnomalyTotal>();
  anomalyCount = 0;
  /** SMC connections first seen mid-stream (no CLC captured). */
  readonly orphanConns: SmcConn[] = [];
  /** Non-RC RoCE flows ("RoCE traffic, not SMC-R"). */
  readonly otherRoce = new Map<string, OtherRoce>();
  frames = 0;
  firstTs?: bigint;
  lastTs = 0n;
  readonly llc = new LlcPairing();

  private readonly tcpByTuple = new TcpIndex();
  /** The connection of the last TCP frame (consecutive frames are mostly one connection's). */
  private lastTcp: TcpState | undefined = undefined;
  /** QP (GID, QPN) → its link and which end it is (nested maps: no key strings per frame). */
  private readonly qps = new QpIndex();
  /** The links of recent RoCE v2 frames, in front of `qps`. */
  private readonly links = new LinkCache();
  /** (link group, writer direction, token) → connection (tokens are per host, valid on every
   *  link of the group): the token the receiving side announced. */
  private readonly byToken = new ConnIndex((c, dir) => c.tokenOf((1 - dir) as 0 | 1));
  /** (link, writer direction, rkey) → connection, for the rkeys the CLC announced on the link it
   *  named (in a group whose creation was captured): the receiving side's. */
  private readonly byClcRkey = new ConnIndex((c, dir, link) => (c.clcLink === link ? c.clcRkeyOf((1 - dir) as 0 | 1) : undefined));
  /** (link serial, writer direction, rkey) → RMB: one RMB has one rkey per link (CLC, CONFIRM
   *  RKEY, ADD LINK rkey lists); aliases of one RMB share `ref`, which names its connection. The
   *  CLC's rkeys in a complete group are found through byClcRkey until an LLC message names the
   *  same RMB on another link (then its entry is made here, and followed by later bindings). */
  private readonly rmbs = new Map<number, RmbAlias>();
  /** What rmbAt() returns for a CLC rkey: read at once, never kept (no object per WRITE). */
  private readonly clcHit: RmbAlias = { ref: { conn: undefined, dir: 0, n: 0 }, va: 0n };
  /** RMBs learned from traffic (mid-stream groups), per writer direction of a connection. */
  private readonly learned = new Map<SmcDir, number>();
  /** First-contact connections whose CONFIRM LINK has not been seen yet. */
  private readonly awaitingConfirmLink: { conn: TcpConn; lg: LinkGroup; frame: number; tsNs: bigint; due: bigint }[] = [];
  private orphanIndex = 0;
  private linkSerial = 0;
  /** Link group ids: never reused, also after a phantom group was folded into a real one. */
  private lgSerial = 0;
  private note: FrameNote = EMPTY_NOTE;
  /** The one note of a tracker with `reuseNote`. */
  private readonly reused: ReusedNote | undefined;
  /** What the model's times are kept relative to: the first frame's time. */
  private readonly epoch: Epoch = { base: 0n };
  /** Where the connections' directions keep their numbers. */
  private readonly dirSlab = new DirSlab(this.epoch);
  /** Where the connections' CLC sides keep their numbers. */
  private readonly sideSlab = new SideSlab();
  /** A cursor read out of a direction for the cursor rules (no object per CDC). */
  private readonly curA = { wrap: 0, count: 0 };
  /** The current frame's number and time (anomalies are stamped with them). */
  private curN = 0;
  private curTs = 0n;
  /** Where a WRITE ONLY goes (filled per WRITE, never kept). */
  private readonly onlyWrite: WriteCont = { conn: undefined as unknown as SmcConn, dir: 0, offset: 0 };
  /** The end of the link linkOf() returned that the frame went to (no object per frame). */
  private qpEnd: 0 | 1 = 0;
  /** The RC link of the last frame fed and its direction (sender end), for consumers that map
   *  the frame into other names (cli/statejoin.ts); no object per frame. */
  frameLink: Link | undefined;
  frameDir: 0 | 1 = 0;

  /** Gaps in what the capture shows are warnings — unless a capture filter may hide frames. */
  private readonly gapSeverity: Severity;

  constructor(private readonly opts: TrackerOptions = {}) {
    this.gapSeverity = opts.filtered ? 'note' : 'warn';
    this.reused = opts.reuseNote ? new ReusedNote() : undefined;
  }

  /** Feed one frame (capture order). Returns what the tracker knows about it. */
  feed(d: DecodedFrame): FrameNote {
    if (this.firstTs === undefined) { this.firstTs = d.tsNs; this.epoch.base = d.tsNs; }
    this.begin(d.n, d.tsNs);
    // nothing can expire before the earliest deadline (no call, no list per frame until then)
    if (this.awaitingConfirmLink.length !== 0 || this.llc.mayExpire(d.tsNs)) this.checkTimeouts(d.tsNs, false);
    if (d.issues.length !== 0) this.codecIssues(d);
    if (d.tcp && d.ip) this.onTcp(d);
    else if (d.roce) this.onRoce(d);
    const n = this.note;
    if (n === this.reused) return n;
    return n.anomalies.length === 0 && n.link === undefined && n.conn === undefined && n.tcpMode === undefined ? EMPTY_NOTE : n;
  }

  /** What every frame does first, fed whole or through roceFast (after the first frame). */
  private begin(n: number, tsNs: bigint): void {
    this.frames++;
    this.lastTs = tsNs;
    this.curN = n;
    this.curTs = tsNs;
    this.note = this.reused !== undefined ? this.reused.reset() : { anomalies: NO_ANOMALIES };
    this.frameLink = undefined;
  }

  /**
   * Header prediction's narrow entry (dissectors/predict.ts): a RoCE v2 packet whose headers
   * match a clean packet of the same flow, so only its numbers are given: the destination
   * address (the decoder's text, as onRoce looks the link up by), destination QP, PREDICTED
   * kind (an ACK, or a WRITE MIDDLE/LAST, with no issue), PSN, payload length, frame number and
   * time. It does what feed() would do with the decoded frame through the same steps of
   * onRoce/onWrite, and returns false having changed nothing when the frame needs more than
   * those steps (first frame, a timeout due, a link not cached, a PSN not the next one, a
   * WRITE into the sender's own RMB or a stream kept for --follow): feed() it then.
   * Only for a compact tracker with reuseNote (smcdump's -q and --summary).
   */
  roceFast(dstIp: string, qpn: number, kind: number, psn: number, payLen: number, n: number, tsNs: bigint): boolean {
    if (this.firstTs === undefined || this.reused === undefined || !this.opts.compact) return false;
    if (this.awaitingConfirmLink.length !== 0 || this.llc.mayExpire(tsNs)) return false;
    const link = this.links.get(dstIp, qpn, this.qps.gen);
    if (link === undefined) return false;
    const dir: 0 | 1 = this.links.hitEnd === 1 ? 0 : 1;
    let cont: WriteCont | undefined;
    if (kind !== PREDICTED.ACK) {
      const want = link.nextPsnOf(dir);
      if (want !== undefined && psn !== want) return false;
      cont = link.writeOf(dir);
      if (cont !== undefined && (cont.dir !== dir || dirOf(cont.conn, cont.dir).stream !== undefined)) return false;
    }
    this.begin(n, tsNs);
    this.roceFrom(link, dir, payLen, n, tsNs);
    if (kind === PREDICTED.ACK) return true;
    link.setNextPsn(dir, (psn + 1) & 0xffffff);
    cont = this.writeCont(link, dir, kind === PREDICTED.WRITE_LAST);
    if (cont !== undefined) this.written(cont, payLen, undefined, n, tsNs);
    this.psnRemember(link, dir, psn);
    return true;
  }

  /** Malformed bytes (reserved bits, trailer/length mismatch, ICRC, …) found by the codecs are
   *  anomalies too, so expert info is in one place; notes stay notes of the frame. */
  private codecIssues(d: DecodedFrame): void {
    const issues = d.issues;
    for (let k = 0; k < issues.length; k++) { const i = issues[k]!; if (i.severity !== 'note') this.anomaly(i.severity, i.code, i.message); }
  }

  /** End of capture: requests still unanswered, CONFIRM LINK never seen, links that died. */
  finish(): void {
    this.checkTimeouts(this.lastTs, true);
    for (const g of this.groups) {
      for (const c of g.conns) for (const w of c.dirs) {
        if (w.consAhead) { this.consAheadAnomaly(w, c); w.consAhead = undefined; }
        if (w.blockedSince && this.lastTs - w.blockedSince.tsNs >= WINDOW_STALL_NS) w.stalls = append(w.stalls, { ...w.blockedSince, resumed: false });
      }
      this.judgeLinks(g);
    }
  }

  /** The connection selected by TrackerOptions.follow / followTuple, if seen. */
  followed(): SmcConn | undefined {
    for (const t of this.tcp) if (t.smc && this.isFollowed(t)) return t.smc;
    return undefined;
  }

  /** What end `dir` of `link` sent, when recorded (not in a compact tracker). */
  private sentOf(link: Link, dir: 0 | 1): LinkSent | undefined {
    return this.opts.compact ? undefined : link.sent[dir];
  }

  /** The link end of a QP (GID, QPN), if the capture showed it. */
  linkOfQp(gid: string, qpn: number): { link: LinkState; end: 0 | 1 } | undefined {
    const link = this.qps.get(gid, qpn);
    return link === undefined ? undefined : { link, end: endOfQp(link, gid, qpn) };
  }

  /** The connection whose RMB RDMA WRITEs with `rkey` on `link` in direction `dir` reach. */
  rmbConn(link: Link, dir: 0 | 1, rkey: number): SmcConn | undefined {
    return this.rmbAt(link, dir, rkey)?.ref.conn;
  }

  /** The followed TCP connection (SMC-R or not). */
  followedTcp(): TcpConn | undefined {
    return this.tcp.find((t) => this.isFollowed(t));
  }

  // ---------------------------------------------------------------------------------------
  // TCP and CLC
  // ---------------------------------------------------------------------------------------

  private onTcp(d: DecodedFrame): void {
    const ip = d.ip!, h = d.tcp!;
    // the last frame's connection when this one has its addresses and ports (either way): it
    // is the newest connection of its tuple
    let c = this.lastTcp;
    if (c === undefined || !sameTuple(c, ip.src, h.srcPort, ip.dst, h.dstPort)) c = this.tcpByTuple.get(ip.src, h.srcPort, ip.dst, h.dstPort);
    const syn = h.flags.syn && !h.flags.ack;
    if (!c || (syn && c.closed)) c = this.newTcp(d, syn);
    this.lastTcp = c;
    const fromClient = ip.src === c.clientIp && h.srcPort === c.clientPort;
    if (h.flags.syn) this.onSyn(c, d, fromClient);
    const smc = d.smc;
    for (let i = 0; i < smc.length; i++) { const it = smc[i]!; if (it.proto === 'clc') this.onClc(c, it.value, fromClient, d); }
    const len = d.payloadLength;
    if (len > 0) this.onTcpPayload(c, d, len, fromClient);
    if (h.flags.rst && !c.rst) c.rst = { frame: d.n, tsNs: d.tsNs, by: fromClient ? 'client' : 'server' };
    if (h.flags.fin || h.flags.rst) c.closed = true;
    this.note.tcpMode = c.mode;
    this.note.conn = c.index;
  }

  /** The first frame of a TCP connection (or a SYN on a tuple whose connection ended). */
  private newTcp(d: DecodedFrame, syn: boolean): TcpState {
    const ip = d.ip!, h = d.tcp!;
    // Client = SYN sender; without a SYN, the sender of the first CLC Proposal, else the first sender.
    const fromClient = syn || !d.smc.some((i) => i.proto === 'clc' && i.value.type !== 'proposal');
    const src = intern(ip.src), dst = intern(ip.dst);
    // every field that is usually set later declared now: kept in the object, not in a
    // property array added to each of 100 000 connections
    const c = fromClient
      ? new TcpState(this.epoch, this.tcp.length + 1, src, h.srcPort, dst, h.dstPort)
      : new TcpState(this.epoch, this.tcp.length + 1, dst, h.dstPort, src, h.srcPort);
    if (!syn) c.why = 'connection began before the capture';
    if (this.isFollowed(c)) c.tcpStream = [newTcpStream(), newTcpStream()];
    this.tcp.push(c);
    this.tcpByTuple.set(c);
    return c;
  }

  /** A SYN or SYN-ACK: whether it offered SMC (option 254). */
  private onSyn(c: TcpState, d: DecodedFrame, fromClient: boolean): void {
    const h = d.tcp!;
    const hasOpt = hasProto(d, 'tcpopt');
    if (!h.flags.ack) {
      c.synSmc = hasOpt;
      c.addStep('SYN', d.n, d.tsNs);
      if (!hasOpt) { c.mode = 'tcp'; c.why = 'plain TCP: the SYN carried no SMC option'; }
    } else {
      c.synAckSmc = hasOpt;
      c.addStep('SYN-ACK', d.n, d.tsNs);
      if (c.synSmc && !hasOpt) {
        c.mode = 'fallback';
        c.fallbackCode = 0x03010000;
        c.why = 'peer did not indicate SMC: the SYN-ACK lacked option 254 (0x03010000 PEERNOSMC, decided by the client; no CLC follows)';
      }
    }
    if (c.tcpStream) c.tcpStream[fromClient ? 0 : 1].nextSeq = (h.seq + 1) >>> 0;
  }

  /** `len` bytes of TCP payload: application data (a fallback, or data where SMC was agreed) or CLC. */
  private onTcpPayload(c: TcpState, d: DecodedFrame, len: number, fromClient: boolean): void {
    const h = d.tcp!;
    if (d.tcpRole === 'data') {
      if (c.tcpBytes === ZERO_PAIR) c.tcpBytes = [0, 0];
      c.tcpBytes[fromClient ? 0 : 1] += len;
      if (c.mode === 'smc-r' || c.mode === 'smc-d') {
        this.anomaly('error', 'tcp.data-after-smc', `${len} bytes of TCP payload on connection ${c.index} after it switched to SMC-${c.mode === 'smc-r' ? 'R' : 'D'}`, undefined, c.index);
      } else if (c.mode === 'pending' && c.proposed) {
        c.mode = 'fallback';
        c.why ??= 'fell back without a Decline: TCP data followed the Proposal';
      }
      if (c.tcpStream && d.tcpData) appendTcp(c.tcpStream[fromClient ? 0 : 1], h.seq, d.tcpData, d.n);
    } else if (c.tcpStream && d.tcpRole !== 'retransmission') {
      // CLC bytes: the application stream begins after them.
      c.tcpStream[fromClient ? 0 : 1].nextSeq = (h.seq + len) >>> 0;
    }
  }

  private onClc(c: TcpState, m: ClcMessage, fromClient: boolean, d: DecodedFrame): void {
    const step = (name: string): void => { c.addStep(name, d.n, d.tsNs); };
    switch (m.type) {
      case 'proposal':
        c.proposed = proposedOf(m.v2?.eids);
        step('Proposal');
        if (c.synAckSmc === false) this.anomaly('warn', 'clc.without-option', 'CLC Proposal although the SYN-ACK had no SMC option', undefined, c.index);
        break;
      case 'accept':
        c.accept = m;
        step('Accept');
        break;
      case 'confirm':
        step('Confirm');
        if (c.accept) this.smcEstablished(c, m, d);
        c.accept = undefined;
        break;
      case 'decline':
        step('Decline');
        this.onDecline(c, m, fromClient ? 'client' : 'server', d);
        break;
      default:
        break;
    }
  }

  private onDecline(c: TcpConn, m: ClcDecline, by: 'client' | 'server', d: DecodedFrame): void {
    c.decline = { diagnosis: m.diagnosis, outOfSync: m.outOfSync, by, frame: d.n };
    c.accept = undefined;
    c.mode = 'fallback';
    c.fallbackCode = m.diagnosis;
    const r = declineReason(m.diagnosis);
    let why = `${by} declined ${hex32(m.diagnosis)} ${r.name}: ${r.meaning}`;
    const ueids = c.proposed?.ueids;
    if (ueids && ueids.length > 0) why += `; client offered ${ueids.join(', ')}`;
    if (m.outOfSync) why += '; out of sync: the peer must drop its link group';
    c.why = flat(why);
    if (c.smc) {
      // Declined after Confirm (e.g. CONFIRM LINK timeout): the SMC connection never carried data.
      const lg = c.smc.lg;
      lg.conns = lg.conns.filter((x) => x !== c.smc);
      this.forgetKeys(c.smc as SmcState);
      c.smc = undefined;
      // A first-contact group whose first link never came up dies with this decline.
      if (lg.firstTcp === c && !lg.links.some((l) => l.state === 'active')) {
        for (const l of lg.links) if (l.state === 'confirming') l.state = 'failed';
        lg.state = 'failed';
        this.llc.forget(lg);
        lgEvent(lg, { frame: d.n, tsNs: d.tsNs, what: 'terminated', by, text: `link group given up: the ${by} declined ${r.name} before its first link came up` });
      }
    }
  }

  private smcEstablished(c: TcpConn, conf: ClcAcceptConfirm, d: DecodedFrame): void {
    const acc = c.accept!;
    if (acc.d || conf.d) { c.mode = 'smc-d'; c.why = 'SMC-D (no RoCE traffic to follow)'; return; }
    if (!acc.r || !conf.r) return;
    c.mode = 'smc-r';
    c.why = undefined;
    const server = sideOf(acc), client = sideOf(conf);
    let lg: LinkGroup | undefined;
    let link: LinkState | undefined;
    if (acc.firstContact) {
      lg = this.newGroup(d.n, true);
      lg.firstTcp = c;
      (lg as GroupState).said({
        clientPeer: client.peerId, serverPeer: server.peerId, clientHost: internMaybe(conf.r.fce?.hostname), serverHost: internMaybe(acc.r.fce?.hostname),
        version: acc.version, release: acc.r.fce?.release, ueid: internMaybe(acc.r.eid), maxLinks: acc.r.fce?.maxLinks, maxConns: acc.r.fce?.maxConns,
      });
      link = this.newLink(lg, [
        { gid: client.gid, qpn: client.qpn, mac: client.mac, psn: client.psn },
        { gid: server.gid, qpn: server.qpn, mac: server.mac, psn: server.psn },
      ], Math.min(client.mtu, server.mtu), 'confirming', d.n);
      link.setNextPsn(0, client.psn);
      link.setNextPsn(1, server.psn);
      lgEventSaid(lg, d.n, d.tsNs, link.name, 'server', { kind: 'first-link', conn: c.index });
      this.awaitingConfirmLink.push({ conn: c, lg, frame: d.n, tsNs: d.tsNs, due: d.tsNs + CONFIRM_LINK_TIMEOUT_NS });
    } else {
      // Subsequent contact: the link named by the server's QP (and the client's) already exists.
      link = this.qps.get(server.gid, server.qpn) ?? this.qps.get(client.gid, client.qpn);
      lg = link?.lg;
      if (!lg || !link) {
        lg = this.newGroup(d.n, false);
        link = this.newLink(lg, [{ gid: client.gid, qpn: client.qpn, mac: client.mac }, { gid: server.gid, qpn: server.qpn, mac: server.mac }], Math.min(client.mtu, server.mtu), 'unknown', d.n);
        this.anomaly('note', 'track.lg-unknown', `connection ${c.index} reuses a link group created before the capture`, undefined, c.index);
      }
    }
    const conn = new SmcState(this.epoch, c.index, c, lg, link, client, server, this.dirSlab.make(server.rmbeSize, true), this.dirSlab.make(client.rmbeSize, true), this.sideSlab);
    if (this.isFollowed(c)) for (const dir of conn.dirs) dir.stream = new RingStream(dir.ringSize, true);
    c.smc = conn;
    lg.conns = append(lg.conns, conn);
    // CDC to the server carries the server's token; WRITEs to the server use the server's rkey
    // on the link the CLC named (CONFIRM RKEY / ADD LINK name it on the group's other links).
    this.byToken.set(lg.id * 2, server.token, conn);
    this.byToken.set(lg.id * 2 + 1, client.token, conn);
    this.bindRmb(link, 0, server.rkey, server.rmbVa, conn);
    this.bindRmb(link, 1, client.rkey, client.rmbVa, conn);
  }

  private isFollowed(c: TcpConn): boolean {
    if (this.opts.follow !== undefined) return c.index === this.opts.follow;
    const t = this.opts.followTuple;
    if (!t) return false;
    const a = `${c.client.ip}:${c.client.port}`, b = `${c.server.ip}:${c.server.port}`;
    return t === `${a}-${b}` || t === `${b}-${a}`;
  }

  // ---------------------------------------------------------------------------------------
  // RMBs: one rkey per link
  // ---------------------------------------------------------------------------------------

  private rmbKey(link: Link, dir: 0 | 1, rkey: number): number { return (link.serial * 2 + dir) * 0x100000000 + (rkey >>> 0); }

  /** The RMB written in direction `dir` with `rkey` on `link` belongs to `conn`. */
  private bindRmb(link: Link, dir: 0 | 1, rkey: number, va: bigint, conn: SmcConn): void {
    const k = this.rmbKey(link, dir, rkey);
    const hit = this.rmbs.get(k);
    // the connection's CLC side (rkey, address) and link are its record, unless the RMB is
    // also known by other rkeys (other links' entries share its ref and follow this binding)
    if (hit && (hit.ref.n > 1 || !link.lg.complete)) { hit.ref.conn = conn; hit.ref.dir = dir; hit.va = va; return; }
    if (link.lg.complete) {
      if (hit) { hit.ref.n--; this.rmbs.delete(k); } // e.g. its CONFIRM RKEY came before the CLC
      this.byClcRkey.set(link.serial * 2 + dir, rkey, conn);
      return;
    }
    this.rmbs.set(k, { ref: { conn, dir, n: 1 }, va });
  }

  /** The RMB RDMA WRITEs with `rkey` on `link` in direction `dir` reach (a CLC rkey's answer
   *  is a shared scratch object: read it at once). */
  private rmbAt(link: Link, dir: 0 | 1, rkey: number): RmbAlias | undefined {
    const hit = this.rmbs.get(this.rmbKey(link, dir, rkey));
    if (hit !== undefined || !link.lg.complete) return hit;
    const c = this.byClcRkey.get(link.lg, link.serial * 2 + dir, dir, link, rkey) as SmcState | undefined;
    if (c === undefined) return undefined;
    const h = this.clcHit;
    h.ref.conn = c; h.ref.dir = dir; h.va = c.rmbVaOf((1 - dir) as 0 | 1)!;
    return h;
  }

  /** (`link`, `dir`, `rkey`) has no entry of its own and names a connection's CLC rkey with
   *  address `va`: an entry saying the same would change nothing. */
  private sameAsClc(link: Link, dir: 0 | 1, rkey: number, va: bigint): boolean {
    if (this.rmbs.has(this.rmbKey(link, dir, rkey))) return false;
    const h = this.rmbAt(link, dir, rkey);
    return h !== undefined && h.va === va;
  }

  /** The RMB behind (`link`, `dir`, `rkey`) as an entry of its own, so that aliases on other
   *  links share it (and follow a later binding of the same rkey); undefined when unknown. */
  private rmbRefAt(link: Link, dir: 0 | 1, rkey: number): RmbRef | undefined {
    const k = this.rmbKey(link, dir, rkey);
    const hit = this.rmbs.get(k);
    if (hit !== undefined) return hit.ref;
    const h = this.rmbAt(link, dir, rkey);
    if (h === undefined) return undefined;
    const e: RmbAlias = { ref: { conn: h.ref.conn, dir: h.ref.dir, n: 1 }, va: h.va };
    this.rmbs.set(k, e);
    return e.ref;
  }

  /** A connection declined after its Confirm left its group: its tokens and rkeys name nothing. */
  private forgetKeys(c: SmcState): void {
    const lg = c.lg;
    this.byToken.forget(lg.id * 2, c.tokenOf(1), c);
    this.byToken.forget(lg.id * 2 + 1, c.tokenOf(0), c);
    if (c.clcLink) {
      this.byClcRkey.forget(c.clcLink.serial * 2, c.clcRkeyOf(1), c);
      this.byClcRkey.forget(c.clcLink.serial * 2 + 1, c.clcRkeyOf(0), c);
    }
  }

  /** Another rkey of the same RMB (`ref`), valid on `link`. */
  private aliasRmb(link: Link, dir: 0 | 1, rkey: number, va: bigint, ref: RmbRef): void {
    const k = this.rmbKey(link, dir, rkey);
    // kept while the link may still be rejected (an ADD LINK refused drops its entries)
    const l = link as LinkState;
    if (l.state === 'confirming' && !this.rmbs.has(k)) l.rmbKeys = append(l.rmbKeys ?? none(), k);
    ref.n++;
    this.setRmb(k, { ref, va });
  }

  /** Entry `e` at `k`, counting the RMBs' entries. */
  private setRmb(k: number, e: RmbAlias): void {
    const old = this.rmbs.get(k);
    if (old) old.ref.n--;
    this.rmbs.set(k, e);
  }

  /** `link` left its group and the QP index: no frame can reach it, nor its RMB entries. */
  private dropRmbs(link: LinkState): void {
    const keys = link.rmbKeys ?? none<number>();
    for (const k of keys) {
      if (k < 0) continue;
      const e = this.rmbs.get(k);
      if (e) { e.ref.n--; this.rmbs.delete(k); }
    }
    // entries made from a CLC record for this link's aliases: gone when they are the last entry
    // of their RMB and the CLC's record says the same (no entry, object and map slot per group
    // whose ADD LINK was rejected)
    for (const m of keys) {
      if (m >= 0) continue;
      const k = -m - 1;
      const e = this.rmbs.get(k);
      if (e === undefined || e.ref.n !== 1 || e.learned) continue;
      this.rmbs.delete(k);
      const serial = Math.floor(k / 0x200000000), dir = (Math.floor(k / 0x100000000) % 2) as 0 | 1;
      const onLink = this.linkBySerial(link.lg, serial);
      const h = onLink !== undefined ? this.rmbAt(onLink, dir, k % 0x100000000) : undefined;
      if (h === undefined || h.ref.conn !== e.ref.conn || h.ref.dir !== e.ref.dir || h.va !== e.va) this.rmbs.set(k, e);
    }
    link.rmbKeys = undefined;
  }

  /** The link of `lg` with serial `serial`, if still in the group. */
  private linkBySerial(lg: LinkGroup, serial: number): Link | undefined {
    for (const l of lg.links) if (l.serial === serial) return l;
    return undefined;
  }

  // ---------------------------------------------------------------------------------------
  // Link groups and links
  // ---------------------------------------------------------------------------------------

  private newGroup(frame: number, complete: boolean): GroupState {
    const lg = new GroupState(this.epoch, ++this.lgSerial, complete, frame);
    this.groups.push(lg);
    return lg;
  }

  // Straight code, no loops: V8 counts a function's executed bytecode (loop bodies on every
  // turn) towards optimising it, and optimising this one, called once per link, cost more CPU
  // than it ever ran (docs/smcdump.md, "Tracker, round 6").
  private newLink(lg: LinkGroup, ends: [QpEnd, QpEnd], mtu: number, state: Link['state'], frame: number): LinkState {
    const [a, b] = ends;
    a.gid = intern(a.gid); if (a.mac !== undefined) a.mac = intern(a.mac);
    b.gid = intern(b.gid); if (b.mac !== undefined) b.mac = intern(b.mac);
    const link = new LinkState(lg, flat(`LG${lg.id}/#${lg.links.length + 1}`), ++this.linkSerial, ends, mtu, state, frame, this.opts.compact ? NO_SENT : [newSent(), newSent()]);
    lg.links = append(lg.links, link);
    if (a.qpn !== undefined) this.claimQp(a.gid, a.qpn, link);
    if (b.qpn !== undefined) this.claimQp(b.gid, b.qpn, link);
    return link;
  }

  /** Register a QP for a link. A link learned from traffic before its announcement (capture
   *  began mid-flow, or frames reordered at the capture point) is a phantom: fold it in. */
  private claimQp(gid: string, qpn: number, link: Link): void {
    const old = this.qps.get(gid, qpn);
    if (old && old !== link && !old.lg.complete && old.smcMessages === 0) {
      const p = old;
      for (const i of [0, 1] as const) (link as LinkState).count(i, p.packets[i], p.bytes[i]);
      link.firstFrame = Math.min(link.firstFrame, p.firstFrame);
      p.lg.links = p.lg.links.filter((x) => x !== p);
      for (const e of p.ends) if (e.qpn !== undefined && this.qps.get(e.gid, e.qpn) === p) this.qps.delete(e.gid, e.qpn);
      if (p.lg.links.length === 0 && p.lg.conns.length === 0) this.dropGroup(p.lg);
    }
    this.qps.set(gid, qpn, link as LinkState);
  }

  private dropGroup(lg: LinkGroup): void {
    const i = this.groups.indexOf(lg);
    if (i >= 0) this.groups.splice(i, 1);
    // Keep anomalies pointing at it; only renumbering would confuse users, so ids stay.
  }

  private setLinkId(link: LinkState, id: number): void {
    if (link.id === id) return;
    link.id = id;
    link.name = flat(`LG${link.lg.id}/L${id}`);
  }

  /** A link of the group by id among those not yet gone (ids are reused after deletion). */
  private linkById(lg: LinkGroup, id: number): Link | undefined {
    for (let i = lg.links.length - 1; i >= 0; i--) {
      const l = lg.links[i]!;
      if (l.id === id && l.state !== 'deleted' && l.state !== 'lost' && l.state !== 'failed') return l;
    }
    return undefined;
  }

  /** Link of a RoCE frame from its destination; learns links mid-stream when unknown. */
  private linkOf(srcGid: string, dstGid: string, dqpn: number, d: DecodedFrame): LinkState {
    const hit = this.qps.get(dstGid, dqpn);
    if (hit) { this.qpEnd = endOfQp(hit, dstGid, dqpn); return hit; }
    // Mid-stream: pair with a half-known link whose other end is this packet's destination.
    for (const lg of this.groups) {
      if (lg.complete) continue;
      for (const l of lg.links) {
        for (const e of [0, 1] as const) {
          const o = (1 - e) as 0 | 1;
          const ls = l as LinkState;
          if (ls.qpnOf(e) === undefined && ls.gidOf(e) === dstGid && ls.gidOf(o) === srcGid) {
            ls.setQpn(e, dqpn);
            this.qps.set(dstGid, dqpn, l as LinkState);
            this.qpEnd = e;
            return l as LinkState;
          }
        }
      }
    }
    const lg = this.groups.find((g) => !g.complete && g.links.some((l) => sameHosts(l, srcGid, dstGid))) ?? this.newGroup(d.n, false);
    if (lg.links.length === 0) this.anomaly('note', 'track.midstream', `RoCE traffic ${srcGid} → ${dstGid} QP ${hexQp(dqpn)} without a captured handshake: link group learned from traffic, its sizes stay unknown`);
    // Which end is the "client"? Unknown mid-stream: keep the first destination as end 1.
    const link = this.newLink(lg, [{ gid: srcGid }, { gid: dstGid, qpn: dqpn }], 0, 'unknown', d.n);
    this.qpEnd = 1;
    return link;
  }

  // ---------------------------------------------------------------------------------------
  // RoCE: PSNs, ACK/NAK, LLC, CDC, RDMA WRITE
  // ---------------------------------------------------------------------------------------

  // The frame path (onRoce, onWrite, onCdc) keeps what every frame does and calls out for what
  // few do (a NAK, a retransmission, a gap, an anomaly's sentence, a link not cached): V8
  // optimises a function sooner and compiles it faster the less bytecode it has, and most of a
  // replay's tracking time on a few hundred thousand frames was its warm-up (docs/smcdump.md,
  // "Tracker, round 5").
  private onRoce(d: DecodedFrame): void {
    const r = d.roce!;
    const ib = r.ib, bth = ib.bth;
    const info = opcodeInfo(bth.opcode);
    if (info.transport !== 'RC') { this.onOtherRoceFrame(d, info.transport); return; }
    // RoCE v2: the link by the destination address as the decoder gave it, when recently asked
    const dstIp = r.grh ? undefined : d.ip!.dst;
    let link = dstIp !== undefined ? this.links.get(dstIp, bth.destQp, this.qps.gen) : undefined, end: 0 | 1;
    if (link !== undefined) end = this.links.hitEnd;
    else { link = this.linkOfFrame(d, dstIp); end = this.qpEnd; }
    // `end` receives; the packet travels from the other end. Direction index = sender end:
    // 0 = client → server (received by end 1), 1 = server → client.
    const dir: 0 | 1 = end === 1 ? 0 : 1;
    this.roceFrom(link, dir, ib.payload.length, d.n, d.tsNs);
    if (info.isAck) {
      const a = ib.aeth;
      if (a && a.kind !== 'ACK') this.onNak(link, dir, bth.psn, a.kind, a.code);
      return;
    }
    // Request PSN continuity per direction.
    const want = link.nextPsnOf(dir);
    if (want !== undefined && bth.psn !== want && this.psnOff(link, dir, bth.psn, want, d)) return;
    link.setNextPsn(dir, (bth.psn + 1) & 0xffffff);
    if (!this.opts.compact) countSent(link.sent[dir], d, info);
    if (info.isWrite) this.onWrite(d, link, dir, info);
    else this.onSend(d, link, dir);
    this.psnRemember(link, dir, bth.psn);
  }

  /** A packet of `payLen` payload bytes from end `dir` of `link` in frame `n` (any opcode). */
  private roceFrom(link: LinkState, dir: 0 | 1, payLen: number, n: number, tsNs: bigint): void {
    this.note.link = link.name;
    this.frameLink = link;
    this.frameDir = dir;
    link.count(dir, 1, payLen);
    link.seen(dir, n, tsNs);
    // any packet from the other end shows it is alive
    const rx = link.retxOf((1 - dir) as 0 | 1);
    if (rx) rx.answered = true;
  }

  /** After a new request: remember which connection each recent PSN carried, for NAKs and
   *  retransmissions. */
  private psnRemember(link: LinkState, dir: 0 | 1, psn: number): void {
    this.note.link = link.name; // CONFIRM LINK / ADD LINK may just have named the link
    const ring = link.psnRingOf(dir);
    const now = psnRecord(ring < 0 ? newPsnRing() : ring, psn, this.note.conn ?? 0);
    if (now !== ring) link.setPsnRing(dir, now);
  }

  /** The link of a RoCE frame the cache did not have; `qpEnd` says which end received it. */
  private linkOfFrame(d: DecodedFrame, dstIp: string | undefined): LinkState {
    const r = d.roce!, qpn = r.ib.bth.destQp;
    const link = this.linkOf(r.grh ? r.grh.sgid : cachedGid(d.ip!.src), r.grh ? r.grh.dgid : cachedGid(dstIp!), qpn, d);
    if (dstIp !== undefined) this.links.set(dstIp, qpn, this.qps.gen, link, this.qpEnd);
    return link;
  }

  /** The SMC messages of a SEND: LLC and CDC. */
  private onSend(d: DecodedFrame, link: LinkState, dir: 0 | 1): void {
    const smc = d.smc;
    for (let i = 0; i < smc.length; i++) {
      const it = smc[i]!;
      if (it.proto === 'llc') { link.smcMessages++; this.onLlc(it.value, link, dir, d); }
      else if (it.proto === 'cdc') { link.smcMessages++; this.onCdc(it.value, link, dir, d); }
    }
  }

  /** A NAK or RNR NAK from end `dir`: it answers the request with this PSN, sent the other way;
   *  attributed to that request's connection. */
  private onNak(link: LinkState, dir: 0 | 1, psn: number, kind: string, code: number): void {
    const conn = this.connOfPsn(link, (1 - dir) as 0 | 1, psn);
    if (conn !== undefined) this.note.conn = conn;
    const on = `on ${link.name}${conn !== undefined ? ` (connection ${conn})` : ''}`;
    if (kind === 'NAK') { link.naks++; this.anomaly('warn', 'roce.nak', `NAK ${code === 0 ? 'PSN sequence error' : `code ${code}`} for PSN ${psn} ${on}`, link.name, conn); }
    else if (kind === 'RNR NAK') { link.rnrNaks++; this.anomaly('warn', 'roce.rnr-nak', `RNR NAK (receiver had no receive buffer posted) for PSN ${psn} ${on}`, link.name, conn); }
  }

  /** A request whose PSN is not the next one: a retransmission (true: already processed the
   *  first time, nothing more to do) or a gap (false: processed as new). */
  private psnOff(link: LinkState, dir: 0 | 1, psn: number, want: number, d: DecodedFrame): boolean {
    const behind = (want - psn) & 0xffffff;
    if (behind > 0 && behind < 0x800000) {
      link.retransmits++;
      this.countRetx(link, dir, psn, d);
      this.note.retransmission = true;
      const conn = this.connOfPsn(link, dir, psn);
      if (conn !== undefined) this.note.conn = conn;
      this.anomaly('note', 'roce.retransmission', `retransmission of PSN ${psn} on ${link.name} (next new PSN ${want})`, link.name, conn);
      return true;
    }
    link.psnGaps++;
    const s = this.sentOf(link, dir);
    if (s) s.gaps++;
    this.anomaly(this.gapSeverity, 'roce.psn-gap', `PSN gap on ${link.name}: expected ${want}, got ${psn} (${((psn - want) & 0xffffff)} packets missing from the capture or lost)`, link.name);
    return false;
  }

  private onOtherRoceFrame(d: DecodedFrame, transport: string): void {
    const r = d.roce!;
    this.onOtherRoce(r.grh ? r.grh.sgid : cachedGid(d.ip!.src), r.grh ? r.grh.dgid : cachedGid(d.ip!.dst), r.ib.bth.destQp, transport, r.ib.payload.length, d.n);
  }

  private onOtherRoce(src: string, dst: string, qpn: number, transport: string, bytes: number, frame: number): void {
    const k = `${src}>${dst}|${qpn}`;
    let f = this.otherRoce.get(k);
    if (!f) { f = { src, dst, qpn, transport, packets: 0, bytes: 0, first: frame, last: frame }; this.otherRoce.set(k, f); }
    f.packets++;
    f.bytes += bytes;
    f.last = frame;
  }

  private countRetx(link: LinkState, dir: 0 | 1, psn: number, d: DecodedFrame): void {
    let s: RetxStats | undefined = link.retxOf(dir);
    if (!s) { s = { count: 0, first: d.n, last: d.n, firstTs: d.tsNs, lastTs: d.tsNs, perPsn: new Map(), maxRepeat: 0, answered: false }; link.setRetx(dir, s); }
    s.count++;
    s.last = d.n;
    s.lastTs = d.tsNs;
    const n = (s.perPsn.get(psn) ?? 0) + 1;
    if (s.perPsn.size >= 256 && n === 1) s.perPsn.delete(s.perPsn.keys().next().value!);
    s.perPsn.set(psn, n);
    if (n > s.maxRepeat) s.maxRepeat = n;
    // Retransmitting again after the peer answered: count "answered" from here on.
    if (n > 1) s.answered = false;
  }

  private onWrite(d: DecodedFrame, link: LinkState, dir: 0 | 1, info: IbOpcodeInfo): void {
    const ib = d.roce!.ib;
    const cont = ib.reth ? this.writeStart(d, link, dir, info) : this.writeCont(link, dir, info.isLast);
    if (cont === undefined) return; // not placed (unknown rkey), or a MIDDLE/LAST whose FIRST was not captured
    if (cont.dir !== dir) this.anomaly('error', 'rdma.wrong-direction', `RDMA WRITE into the sender's own RMB (connection ${cont.conn.index})`, link.name, cont.conn.index);
    this.written(cont, ib.payload.length, ib.payload, d.n, d.tsNs);
  }

  /** Where a WRITE MIDDLE or LAST from end `dir` goes: its FIRST's place (a LAST ends it). */
  private writeCont(link: LinkState, dir: 0 | 1, last: boolean): WriteCont | undefined {
    const cont = link.writeOf(dir);
    if (cont !== undefined && last) link.setWrite(dir, undefined);
    return cont;
  }

  /** `len` bytes written at `cont` in frame `n` (`payload`: the bytes, for a kept stream; a
   *  predicted frame has none and is never one whose connection keeps its stream). */
  private written(cont: WriteCont, len: number, payload: Uint8Array | undefined, n: number, tsNs: bigint): void {
    const conn = cont.conn as SmcState, sd = conn.dir(cont.dir);
    this.note.conn = conn.index;
    this.note.dir = cont.dir === 0 ? 'c>s' : 's>c';
    sd.writes++;
    sd.writeBytes += len;
    if (cont.offset >= 0) {
      if (payload !== undefined) sd.stream?.place(cont.offset, payload);
      cont.offset += len;
    }
    conn.noteData(n, tsNs);
  }

  /** A WRITE FIRST or ONLY (it has a RETH): where in which connection's RMB it goes, or
   *  undefined when no connection is known for its rkey. */
  private writeStart(d: DecodedFrame, link: LinkState, dir: 0 | 1, info: IbOpcodeInfo): WriteCont | undefined {
    const reth = d.roce!.ib.reth!;
    const hit = this.rmbAt(link, dir, reth.rkey);
    const conn = hit?.ref.conn;
    if (!hit || !conn) {
      link.setWrite(dir, undefined);
      if (link.lg.complete && !hit) this.anomaly('error', 'rdma.unknown-rkey', `RDMA WRITE with rkey ${hex32(reth.rkey)} that the receiver never announced on ${link.name}`, link.name);
      else if (!link.lg.complete) link.setUnclaimed(dir, { rkey: reth.rkey, va: reth.va });
      return undefined;
    }
    // a learned RMB's start is unknown: no offset, no bounds (-1: not placed in the stream)
    const off = hit.learned ? -1 : Number(reth.va - hit.va);
    const size = dirOf(conn, hit.ref.dir).ringSize;
    if (size > 0 && !hit.learned && (off < 0 || off + reth.dmaLen > size)) {
      this.anomaly('error', 'rdma.out-of-bounds', `RDMA WRITE of ${reth.dmaLen} bytes at RMB offset ${off} outside the ${size}-byte RMBE of connection ${conn.index}`, link.name, conn.index);
    }
    // a WRITE ONLY's place is used at once (one scratch object); a FIRST's is kept until its LAST
    if (info.isOnly) {
      const cont = this.onlyWrite;
      cont.conn = conn; cont.dir = hit.ref.dir; cont.offset = off;
      link.setWrite(dir, undefined);
      return cont;
    }
    const cont: WriteCont = { conn, dir: hit.ref.dir, offset: off };
    link.setWrite(dir, cont);
    return cont;
  }

  private onCdc(m: CdcMessage, link: LinkState, dir: 0 | 1, d: DecodedFrame): void {
    const conn = this.byToken.get(link.lg, link.lg.id * 2 + dir, dir, link, m.token) ?? this.cdcConnMissing(m, link, dir);
    if (conn === undefined) return;
    this.note.conn = conn.index;
    this.note.dir = dir === 0 ? 'c>s' : 's>c';
    // (the tracker made every direction: a DirState)
    const w = dirOf(conn, dir);                     // this CDC's writer direction (sender → receiver)
    const back = dirOf(conn, (1 - dir) as 0 | 1); // the reverse direction, whose reader is this CDC's sender
    w.cdcs++;
    if (m.prodFlags.failoverValidation) { this.onFailover(conn, link, dir, m, d); return; }
    if (conn.link !== link) conn.link = link;
    w.link = link.name;
    if (!link.lg.complete) this.learnRmb(link, dir, conn, m);
    (conn as SmcState).noteData(d.n, d.tsNs);
    w.noteCdc(d.n, d.tsNs);
    // Sequence numbers: +1 per CDC of the sender (RC retransmissions were filtered by PSN).
    const seq = seqCheck(w.seq, m.seq);
    const seqGap = seq === 'gap';
    if (seq === 'first') w.firstSeq = m.seq;
    if (seqGap) w.seqGaps++;
    if (seqGap || seq === 'stale') { this.seqOff(w, m, conn, link, seqGap); if (!seqGap) return; }
    w.seq = m.seq;
    w.lastWriteBlocked = m.prodFlags.writeBlocked;
    // Producer cursor: how far the sender wrote into the receiver's ring; release new bytes.
    // Cursors of a connection whose handshake was captured start at 0:0; mid-stream ones
    // (ring size unknown) only get a baseline from their first CDC.
    const size = w.ringSize;
    if (size > 0 && cursorOutOfRing(m.prod, size)) this.cursorRange(m, size, conn, link);
    const wp = w.prodInto(this.curA);
    if (wp && size > 0) this.produced(w, wp, m, conn, link, seqGap, d);
    w.prod = m.prod;
    if (w.consAhead) {
      if (!seqGap) this.consAheadAnomaly(w, conn);
      w.consAhead = undefined;
    }
    // Consumer cursor: how far the sender consumed the reverse stream.
    const bsize = back.ringSize;
    const bc = back.consInto(this.curA);
    if (bc && bsize > 0) this.consumedBy(back, bc, bsize, m, conn, link, d);
    back.cons = m.cons;
    // Overrun: the writer may not run more than one ring ahead of what the reader consumed.
    const over = size > 0 && w.hasCons() ? overrunBytes(w.prodLinear, w.consLinear, size) : 0;
    if (over > 0) this.overrun(over, conn, link);
    // Window: the writer waits for the reader (flag, or its ring is full).
    const full = size > 0 && w.hasCons() && w.prodLinear - w.consLinear >= size;
    if (m.prodFlags.writeBlocked) w.writerBlocked++;
    // A stall needs unread data: Linux leaves write_blocked set on the CDCs that follow (e.g. the
    // closing one) after the reader has consumed everything, and an empty ring blocks nobody.
    if ((m.prodFlags.writeBlocked || full) && !w.blockedSince && w.prodLinear > w.consLinear) w.blockedSince = { frame: d.n, tsNs: d.tsNs };
    if (m.prodFlags.urgentPending || m.prodFlags.urgentPresent) this.urgent(w, m, d);
    if (m.connFlags.peerDoneWriting) w.doneWriting = true;
    if (m.connFlags.peerConnClosed) w.closed = true;
    if (m.connFlags.peerConnAbort && !w.aborted) this.aborted(w, back, conn, link, dir, d);
  }

  /** A CDC whose token names no connection of the receiver's: the sender's own token (an
   *  anomaly), an unknown one (an anomaly) or, in a group learned mid-stream, a connection first
   *  seen now. */
  private cdcConnMissing(m: CdcMessage, link: LinkState, dir: 0 | 1): SmcConn | undefined {
    const rev = this.byToken.get(link.lg, link.lg.id * 2 + 1 - dir, (1 - dir) as 0 | 1, link, m.token);
    if (rev && link.lg.complete) {
      this.anomaly('error', 'cdc.wrong-direction', `CDC carries the sender's own token (connection ${rev.index})`, link.name, rev.index);
      return undefined;
    }
    if (link.lg.complete) {
      this.anomaly('error', 'cdc.unknown-token', `CDC for alert token ${hex32(m.token)} that the receiver never announced in ${`LG${link.lg.id}`} (${link.name})`, link.name);
      return undefined;
    }
    return this.orphan(link, dir, m.token);
  }

  private cursorRange(m: CdcMessage, size: number, conn: SmcConn, link: LinkState): void {
    this.anomaly('error', 'cdc.cursor-range', `producer cursor count ${m.prod.count} is beyond the receiver's ${size}-byte RMBE on connection ${conn.index}`, link.name, conn.index);
  }

  private overrun(over: number, conn: SmcConn, link: LinkState): void {
    this.anomaly('error', 'cdc.overrun', `producer cursor overruns the peer's consumer cursor by ${over} bytes on connection ${conn.index} (would overwrite unread data)`, link.name, conn.index);
  }

  /** A CDC sequence number that is not the next: a gap or (not `gap`) a regression. */
  private seqOff(w: DirState, m: CdcMessage, conn: SmcConn, link: LinkState, gap: boolean): void {
    if (gap) this.anomaly(this.gapSeverity, 'cdc.seq-gap', `CDC sequence jumped from ${w.seq} to ${m.seq} on connection ${conn.index} (${((m.seq - w.seq! - 1) & 0xffff)} CDC missing)`, link.name, conn.index);
    else this.anomaly('error', 'cdc.seq-regression', `CDC sequence went back from ${w.seq} to ${m.seq} on connection ${conn.index}`, link.name, conn.index);
  }

  /** The producer cursor of writer direction `w` moved from `wp` to the CDC's: new bytes. */
  private produced(w: DirState, wp: { wrap: number; count: number }, m: CdcMessage, conn: SmcConn, link: LinkState, seqGap: boolean, d: DecodedFrame): void {
    const size = w.ringSize;
    // Linux moves a cursor at most one wrap per CDC (smc_curs_diff). A bigger step is a
    // protocol anomaly — unless CDCs are missing from the capture (the sequence gap says so).
    const multiWrap = movedMultiWrap(wp, m.prod);
    if (multiWrap && !seqGap) {
      this.anomaly('warn', 'cdc.cursor-jump', `producer cursor jumped more than one wrap (${wp.wrap}:${wp.count} → ${m.prod.wrap}:${m.prod.count}) on connection ${conn.index}`, link.name, conn.index);
    }
    const n = multiWrap ? cursorDistance(wp, m.prod, size) : cursorDiff(wp, m.prod, size);
    if (n > 0) {
      w.stream?.release(wp.count, n, d.n);
      w.prodLinear += n;
      if (!this.opts.compact) w.lastProdMove = stamp(w.lastProdMove, d);
    }
  }

  /** The CDC's consumer cursor for the reverse direction `back` (ring `bsize` bytes), which
   *  was at `bc`. */
  private consumedBy(back: DirState, bc: { wrap: number; count: number }, bsize: number, m: CdcMessage, conn: SmcConn, link: LinkState, d: DecodedFrame): void {
    const multiWrap = movedMultiWrap(bc, m.cons);
    const moved = multiWrap ? cursorDistance(bc, m.cons, bsize) : cursorDiff(bc, m.cons, bsize);
    back.consLinear += moved;
    if (moved > 0) this.consumed(back, d);
    // Ahead of the producer we saw: a violation — unless the capture lacks a CDC of the
    // writer (then the reader knew a cursor we did not see). The writer's next CDC decides.
    if (back.consLinear > back.prodLinear && !back.consAhead) {
      back.consAhead = { frame: d.n, tsNs: d.tsNs, link: link.name, text: `consumer cursor ${m.cons.wrap}:${m.cons.count} is beyond what the peer produced (${back.prodLinear} bytes) on connection ${conn.index}` };
    }
  }

  /** Urgent data pending or present in writer direction `w`. */
  private urgent(w: DirState, m: CdcMessage, d: DecodedFrame): void {
    w.urgent++;
    // Linux (smc_cdc_handle_urg_data_arrival): the urgent byte is the last one before the
    // producer cursor of the CDC that has urg_data_present.
    const at = urgentByteAt(w.prodLinear);
    const last = w.urgentMarks[w.urgentMarks.length - 1];
    if (m.prodFlags.urgentPresent && at >= 0 && last?.offset !== at) {
      w.urgentMarks = append(w.urgentMarks, { offset: at, frame: d.n, tsNs: d.tsNs });
      w.stream?.markUrgent(at);
    }
  }

  /** The writer of `w` (end `dir`) aborted the connection. */
  private aborted(w: DirState, back: DirState, conn: SmcConn, link: LinkState, dir: 0 | 1, d: DecodedFrame): void {
    w.aborted = true;
    const by = SIDE[dir];
    conn.abort = { by, frame: d.n, tsNs: d.tsNs, unread: Math.max(0, back.prodLinear - back.consLinear) };
    this.anomaly('note', 'cdc.abort', `connection ${conn.index} aborted by its ${by}`, link.name, conn.index);
  }

  /** Mid-stream group: the WRITEs before a writer's CDC on a link were its connection's (Linux
   *  sends the CDC after the WRITEs it announces, on the same QP); a closing CDC frees the RMB for
   *  the next connection. */
  private learnRmb(link: LinkState, dir: 0 | 1, conn: SmcConn, m: CdcMessage): void {
    const u = link.unclaimedOf(dir);
    if (u) {
      link.setUnclaimed(dir, undefined);
      const k = this.rmbKey(link, dir, u.rkey);
      this.setRmb(k, { ref: { conn, dir, n: 1 }, va: u.va, learned: true });
      this.learned.set(dirOf(conn, dir), k);
    }
    if (m.connFlags.peerConnClosed || m.connFlags.peerConnAbort) {
      const k = this.learned.get(dirOf(conn, dir));
      const e = k !== undefined ? this.rmbs.get(k) : undefined;
      if (e?.ref.conn === conn) { e.ref.n--; this.rmbs.delete(k!); }
      this.learned.delete(dirOf(conn, dir));
    }
  }

  /** The reader of direction `w` moved its consumer cursor: a blocked writer may go on. */
  private consumed(w: SmcDir, d: DecodedFrame): void {
    if (!this.opts.compact) w.lastConsMove = stamp(w.lastConsMove, d);
    const b = w.blockedSince;
    if (!b) return;
    if (d.tsNs - b.tsNs >= WINDOW_STALL_NS) w.stalls = append(w.stalls, { frame: b.frame, tsNs: b.tsNs, endFrame: d.n, endTsNs: d.tsNs, resumed: true });
    w.blockedSince = undefined;
  }

  /** Failover validation CDC (zero cursors, the last completed sequence number): the sender
   *  continues this connection on `link`. Cursors and sequence are not touched by it. */
  private onFailover(conn: SmcConn, link: LinkState, dir: 0 | 1, m: CdcMessage, d: DecodedFrame): void {
    const w = dirOf(conn, dir);
    const was = w.link ?? conn.link?.name;
    const from = was !== link.name ? was : undefined;
    const d0 = dirOf(conn, 0), d1 = dirOf(conn, 1);
    const inFlight: [number, number] = [d0.prodLinear - d0.consLinear, d1.prodLinear - d1.consLinear];
    conn.failovers = append(conn.failovers, { from, to: link.name, by: SIDE[dir], frame: d.n, tsNs: d.tsNs, inFlight, at: [d0.prodLinear, d1.prodLinear] });
    lgEvent(link.lg, { frame: d.n, tsNs: d.tsNs, what: 'failover', link: link.name, by: SIDE[dir], text: `connection ${conn.index} moved${from ? ` from ${from}` : ''} to ${link.name} (validation CDC seq ${m.seq} from the ${SIDE[dir]})` });
    if (w.seq !== undefined && validationOutOfSync(w.seq, m.seq)) {
      this.anomaly('warn', 'cdc.failover-seq', `failover validation CDC names seq ${m.seq} but the last CDC seen was ${w.seq} (connection ${conn.index}: CDCs lost with the link)`, link.name, conn.index);
    }
    conn.link = link;
    w.link = link.name;
  }

  /** Connection of a recent request PSN on a link direction (undefined when not remembered). */
  private connOfPsn(link: LinkState, dir: 0 | 1, psn: number): number | undefined {
    const ring = link.psnRingOf(dir);
    return ring < 0 ? undefined : psnLookup(ring, psn);
  }

  private consAheadAnomaly(w: SmcDir, conn: SmcConn): void {
    const a = w.consAhead!;
    this.anomalyAt(a.frame, a.tsNs, 'error', 'cdc.cons-beyond-prod', a.text, a.link, conn.index);
  }

  /** A connection first seen mid-stream through its CDC token. */
  private orphan(link: LinkState, dir: 0 | 1, token: number): SmcConn {
    const recv = dir === 0 ? 1 : 0;
    // The reverse direction of a connection already seen by its other token? Only when exactly
    // one mid-stream connection on this link group lacks this side's token (no guessing).
    const cands = this.orphanConns.filter((c) => c.lg === link.lg && (c as SmcState).tokenOf(recv) === undefined);
    let conn: SmcConn;
    if (cands.length === 1) {
      conn = cands[0]!;
      (conn as SmcState).setToken(recv, token);
    } else {
      const other = link.gidOf(dir), dstGid = link.gidOf(recv);
      const [s0, s1] = dir === 0 ? [{ gid: other }, { gid: dstGid, token }] : [{ gid: dstGid, token }, { gid: other }];
      conn = new SmcState(this.epoch, -(++this.orphanIndex), undefined, link.lg, link, s0, s1, this.dirSlab.make(0, false), this.dirSlab.make(0, false), this.sideSlab);
      link.lg.conns = append(link.lg.conns, conn);
      this.orphanConns.push(conn);
    }
    this.byToken.set(link.lg.id * 2 + dir, token, conn);
    return conn;
  }

  // ---------------------------------------------------------------------------------------
  // LLC: the link group state machine
  // ---------------------------------------------------------------------------------------

  // Each kind of LLC message has a method of its own: a frame's work is in one of them, and V8
  // optimises each only when its kind is frequent (one method for all took 40-80 ms of the
  // optimising compiler per replay, more than all its messages cost to track).
  private onLlc(m: LlcMessage, link: LinkState, dir: 0 | 1, d: DecodedFrame): void {
    const lg = link.lg;
    if (m.kind === 'add_link' && !m.response) this.llc.answerRequestAddLink(lg, dir, d.tsNs);
    if (LlcPairing.expectsAnswer(m)) this.llcRequest(m, link, dir, d);
    else if (m.response) this.llc.answer(lg, dir, m.kind, d.tsNs);
    switch (m.kind) {
      case 'confirm_link': this.onConfirmLink(m, link, dir, d); break;
      case 'add_link': this.onAddLink(m, link, dir, d); break;
      case 'add_link_cont': this.onAddLinkCont(m, link, dir); break;
      case 'request_add_link': if (!m.response) this.onRequestAddLink(m, link, dir, d); break;
      case 'delete_link': this.onDeleteLink(m, link, dir, d); break;
      case 'confirm_rkey': if (!m.response) this.onConfirmRkey(m, link, dir); break;
      default: break;
    }
  }

  /** A request the peer must answer in time. */
  private llcRequest(m: LlcMessage, link: LinkState, dir: 0 | 1, d: DecodedFrame): void {
    const req: LlcRequest = { lg: link.lg, link, from: dir, kind: m.kind, frame: d.n, tsNs: d.tsNs };
    if (m.kind === 'delete_link') req.linkId = m.linkId;
    this.llc.request(req);
  }

  private onConfirmLink(m: Extract<LlcMessage, { kind: 'confirm_link' }>, link: LinkState, dir: 0 | 1, d: DecodedFrame): void {
    const lg = link.lg;
    const by = SIDE[dir];
    this.setLinkId(link, m.linkId);
    link.uid = m.linkUid;
    if (!this.opts.compact) link.sent[dir].confirm = { frame: d.n, tsNs: d.tsNs, response: m.response, linkId: m.linkId, qpn: m.qpn, gid: intern(m.gid), mac: intern(m.mac), uid: m.linkUid };
    if (m.response) {
      if (link.state !== 'active') {
        link.state = 'active';
        link.rmbKeys = undefined; // up: never rejected any more
        link.confirmedFrame = d.n;
        lgEventSaid(lg, d.n, d.tsNs, link.name, by, { kind: 'confirmed' });
        noteType(lg, d.n, d.tsNs);
      }
      const first = lg.firstTcp as TcpState | undefined; // the tracker made it
      if (first && !first.hasStep('CONFIRM LINK')) first.addStep('CONFIRM LINK', d.n, d.tsNs);
    } else {
      // The server started link bring-up; a missing response is now an LLC timeout.
      if (link.state === 'unknown') link.state = 'confirming';
      for (let i = this.awaitingConfirmLink.length - 1; i >= 0; i--) if (this.awaitingConfirmLink[i]!.lg === lg) this.awaitingConfirmLink.splice(i, 1);
    }
    if (lg.maxLinks === undefined || lg.maxConns === undefined) (lg as GroupState).said({ maxLinks: lg.maxLinks ?? m.maxLinks, maxConns: lg.maxConns ?? m.maxConns });
  }

  private onAddLink(m: Extract<LlcMessage, { kind: 'add_link' }>, link: LinkState, dir: 0 | 1, d: DecodedFrame): void {
    const lg = link.lg;
    const by = SIDE[dir];
    if (m.rejected) {
      // The link the request proposed never comes up.
      const i = lg.links.findIndex((l) => l.id === m.linkId && l.state === 'confirming' && l !== link);
      if (i >= 0) {
        const [dead] = lg.links.splice(i, 1);
        for (const e of dead!.ends) if (e.qpn !== undefined && this.qps.get(e.gid, e.qpn) === dead) this.qps.delete(e.gid, e.qpn);
        this.dropRmbs(dead as LinkState);
      }
      lgEventSaid(lg, d.n, d.tsNs, `LG${lg.id}/L${m.linkId}`, by, { kind: 'rejected', linkId: m.linkId });
      return;
    }
    if (!m.response) {
      // The requester (server side of the LG in Linux) announces its new QP; the client answers with its own.
      const nl = this.newLink(lg, dir === 1 ? [{ gid: '' }, { gid: m.gid, qpn: m.qpn, mac: m.mac, psn: m.psn }] : [{ gid: m.gid, qpn: m.qpn, mac: m.mac, psn: m.psn }, { gid: '' }], mtuFromCode(m.mtu), 'confirming', d.n);
      this.setLinkId(nl, m.linkId);
      nl.setNextPsn(dir, m.psn);
      const sent = this.sentOf(nl, dir);
      if (sent) sent.add = llcQp(m, d);
      lgEventSaid(lg, d.n, d.tsNs, nl.name, by, { kind: 'add-link', gid: nl.gidOf(dir), qpn: m.qpn }); // (interned by newLink)
      for (const rk of m.v2?.rkeys ?? []) this.rkeyAlias(link, nl, rk.rkey, rk.rkeyNew, rk.vaddrNew, dir);
    } else {
      const nl = lg.links.find((l) => l.id === m.linkId && l.state === 'confirming' && (l as LinkState).gidOf(dir) === '') as LinkState | undefined;
      if (nl) {
        // the interned GID for the QP index too: one lookup in the pool, and the index's key
        // is the flat string rather than the decoder's
        const gid = intern(m.gid);
        nl.setEnd(dir, { gid, qpn: m.qpn, mac: intern(m.mac), psn: m.psn });
        (nl as LinkState).setNextPsn(dir, m.psn);
        const sent = this.sentOf(nl, dir);
        if (sent) sent.add = llcQp(m, d);
        this.claimQp(gid, m.qpn, nl);
        for (const rk of m.v2?.rkeys ?? []) this.rkeyAlias(link, nl, rk.rkey, rk.rkeyNew, rk.vaddrNew, dir);
      }
    }
  }

  /** SMC-Rv1: the rkeys of the new link follow in ADD LINK CONTINUATION messages. */
  private onAddLinkCont(m: Extract<LlcMessage, { kind: 'add_link_cont' }>, link: LinkState, dir: 0 | 1): void {
    const nl = this.linkById(link.lg, m.linkId);
    if (nl && nl !== link) for (const rk of m.rkeys.slice(0, m.numRkeys)) this.rkeyAlias(link, nl, rk.rkey, rk.rkeyNew, rk.vaddrNew, dir);
  }

  private onRequestAddLink(m: Extract<LlcMessage, { kind: 'request_add_link' }>, link: LinkState, dir: 0 | 1, d: DecodedFrame): void {
    const by = SIDE[dir];
    lgEvent(link.lg, { frame: d.n, tsNs: d.tsNs, what: 'request-add-link', link: link.name, by, text: `REQUEST ADD LINK from the ${by} (${m.gids.length} GID${m.gids.length === 1 ? '' : 's'}: a device came back or the group is asymmetric)` });
  }

  /** The sender's new RMB: written by the other side (direction 1 - dir), one rkey per link. */
  private onConfirmRkey(m: Extract<LlcMessage, { kind: 'confirm_rkey' }>, link: LinkState, dir: 0 | 1): void {
    const lg = link.lg;
    const wdir = (1 - dir) as 0 | 1;
    // (most name no other link: no copy and no closure then)
    const others = m.numRtokens === 0 || m.others.length === 0 ? none<typeof m.others[number]>() : m.others.slice(0, m.numRtokens).filter((o) => this.linkById(lg, o.linkId) !== undefined);
    // On a group's only link it confirms what the CLC said (same rkey, same address): the
    // connection's CLC side stays the record, no entry is made.
    if (others.length === 0 && this.sameAsClc(link, wdir, m.rkey, m.vaddr)) return;
    const ref: RmbRef = this.rmbRefAt(link, wdir, m.rkey) ?? { conn: undefined, dir: wdir, n: 0 };
    this.aliasRmb(link, wdir, m.rkey, m.vaddr, ref);
    for (const o of others) this.aliasRmb(this.linkById(lg, o.linkId)!, wdir, o.rkey, o.vaddr, ref);
  }

  private onDeleteLink(m: Extract<LlcMessage, { kind: 'delete_link' }>, link: LinkState, dir: 0 | 1, d: DecodedFrame): void {
    const lg = link.lg;
    const by = SIDE[dir];
    const reason = `${hex32(m.reason)} ${deleteLinkReason(m.reason)}`;
    if (m.all) {
      if (m.response) return;
      for (const l of lg.links) {
        if (l.state !== 'active' && l.state !== 'confirming' && l.state !== 'unknown') continue;
        // A link still waiting for its CONFIRM LINK never came up: failed, not deleted.
        l.state = l.state === 'confirming' && l.confirmedFrame === undefined ? 'failed' : 'deleted';
        l.deleted = { frame: d.n, tsNs: d.tsNs, by, reason: m.reason, all: true };
      }
      if (lg.state === 'active') {
        lg.state = 'terminated';
        lgEvent(lg, { frame: d.n, tsNs: d.tsNs, what: 'terminated', by, text: `DELETE LINK ALL from the ${by} (${reason}): link group ends` });
      }
      return;
    }
    const l = this.linkById(lg, m.linkId) ?? lg.links.find((x) => x.id === m.linkId && x.deleted);
    if (m.response) return; // "no such link" answers of the second side add nothing
    if (!l || l.deleted) return; // both sides deleting the same link: the first one counts
    const lost = (m.reason >>> 0) === DEL_LOST_PATH;
    l.deleted = { frame: d.n, tsNs: d.tsNs, by, reason: m.reason };
    l.state = lost ? 'lost' : 'deleted';
    if (lost) l.lost = { reasons: [`DELETE LINK ${reason} from the ${by} in frame ${d.n}`], frame: d.n, tsNs: d.tsNs };
    lgEvent(lg, { frame: d.n, tsNs: d.tsNs, what: lost ? 'link-lost' : 'link-deleted', link: l.name, by, text: `DELETE LINK ${l.name} from the ${by}: ${reason}` });
    noteType(lg, d.n, d.tsNs);
    if (!lg.links.some((x) => x.state === 'active' || x.state === 'confirming') && lg.state === 'active') lg.state = 'terminated';
  }

  /** ADD LINK rkey list: the sender's RMB known by `rkey` on `onLink` is `rkeyNew` on `nl`. */
  private rkeyAlias(onLink: Link, nl: Link, rkey: number, rkeyNew: number, vaNew: bigint, ownerEnd: 0 | 1): void {
    const wdir = (1 - ownerEnd) as 0 | 1; // WRITEs into the owner's RMB travel towards it
    const k = this.rmbKey(onLink, wdir, rkey);
    const made = !this.rmbs.has(k);
    const ref = this.rmbRefAt(onLink, wdir, rkey) ?? { conn: undefined, dir: wdir, n: 0 };
    // an entry made here from the CLC's record only for this alias goes with the new link if it
    // is rejected (kept as -(key + 1) beside the link's own keys)
    const l = nl as LinkState;
    if (made && this.rmbs.has(k) && l.state === 'confirming') l.rmbKeys = append(l.rmbKeys ?? none(), -(k + 1));
    this.aliasRmb(nl, wdir, rkeyNew, vaNew, ref);
  }

  // ---------------------------------------------------------------------------------------
  // Timeouts and the end of the capture
  // ---------------------------------------------------------------------------------------

  private checkTimeouts(now: bigint, final: boolean): void {
    const expired = this.llc.expire(now, final);
    if (expired.length === 0 && this.awaitingConfirmLink.length === 0) return;
    for (const u of expired) {
      const p = u.req;
      const kind = p.kind.replace(/_/g, ' ').toUpperCase();
      // At the end of the capture a request still counts as unanswered when the peer could not
      // have answered: it fell silent and the request's packets were retransmitted unacknowledged.
      if (!u.overdue && peerSilentSince(p.link, p.from, p.tsNs)) u.overdue = true;
      if (p.kind === 'test_link' && u.overdue) {
        const t = p.link.testLinkUnanswered;
        if (t) { t.count++; t.last = p.frame; t.lastTs = p.tsNs; }
        else p.link.testLinkUnanswered = { count: 1, first: p.frame, last: p.frame, firstTs: p.tsNs, lastTs: p.tsNs };
      }
      // Overdue inside the capture: a protocol problem. Open at its end: the capture stopped first.
      if (u.overdue) this.anomalyAt(p.frame, p.tsNs, 'warn', 'llc.no-response', `LLC ${kind} request (frame ${p.frame}) got no response within 2 s (${p.link.name})`, p.link.name);
      else this.anomalyAt(p.frame, p.tsNs, 'note', 'llc.no-response', `LLC ${kind} request (frame ${p.frame}) not answered before the capture ended (${p.link.name})`, p.link.name);
    }
    for (let i = this.awaitingConfirmLink.length - 1; i >= 0; i--) {
      const w = this.awaitingConfirmLink[i]!;
      const overdue = now > w.due;
      if (overdue || (final && w.lg.conns.some((c) => dirOf(c, 0).cdcs + dirOf(c, 1).cdcs > 0))) {
        this.awaitingConfirmLink.splice(i, 1);
        this.anomalyAt(w.frame, w.tsNs, 'warn', 'link.no-confirm-link', `first contact (connection ${w.conn.index}) without a completed LLC CONFIRM LINK exchange on LG${w.lg.id}`, `LG${w.lg.id}`, w.conn.index);
      }
    }
  }

  /** End of capture: which links stopped working, and what that means for their group. */
  private judgeLinks(g: LinkGroup): void {
    const rst = g.conns.map((c) => c.tcp?.rst).filter((r): r is NonNullable<TcpConn['rst']> => r !== undefined);
    for (const l of g.links) {
      if (l.state !== 'active' && l.state !== 'confirming' && l.state !== 'lost' && l.state !== 'unknown') continue;
      const reasons: string[] = l.lost ? [...l.lost.reasons] : [];
      let at = l.lost?.frame, atTs = l.lost?.tsNs;
      const silent = ([0, 1] as const).map((dir) => l.retx[dir]).find((s) => s && !s.answered && s.maxRepeat >= 2);
      if (silent) {
        reasons.push(`PSNs retransmitted up to ${silent.maxRepeat + 1} times (frames ${silent.first}–${silent.last}) with no answer from the peer`);
        if (at === undefined || silent.first < at) { at = silent.first; atTs = silent.firstTs; }
      }
      if (l.testLinkUnanswered) {
        const t = l.testLinkUnanswered;
        reasons.push(`${t.count} TEST LINK request${t.count === 1 ? '' : 's'} unanswered (frame ${t.first}${t.count > 1 ? `–${t.last}` : ''})`);
        if (at === undefined) { at = t.first; atTs = t.firstTs; }
      }
      if (reasons.length === 0) continue;
      for (const r of rst) if (!reasons.some((x) => x.includes('TCP RST'))) reasons.push(`TCP RST on the CLC connection (frame ${r.frame}, from the ${r.by})`);
      l.lost = { reasons, frame: at!, tsNs: atTs! };
      if (l.state !== 'lost') {
        l.state = 'lost';
        lgEvent(g, { frame: at!, tsNs: atTs!, what: 'link-lost', link: l.name, text: `${l.name} stopped working: ${reasons[0]}` });
      }
    }
    if (g.state === 'active' && g.links.length > 0 && !g.links.some((l) => l.state === 'active' || l.state === 'confirming' || l.state === 'unknown')) {
      g.state = g.links.some((l) => l.state === 'lost' || l.state === 'failed') ? 'failed' : 'terminated';
    }
  }

  private anomaly(severity: Severity, code: string, message: string, link?: string, conn?: number): void {
    const a = this.anomalyAt(this.curN, this.curTs, severity, code, message, link, conn);
    if (this.note.anomalies === NO_ANOMALIES) this.note.anomalies = [];
    this.note.anomalies.push(a);
  }

  private anomalyAt(frame: number, tsNs: bigint, severity: Severity, code: string, message: string, link?: string, conn?: number): Anomaly {
    const a: Anomaly = { frame, tsNs, severity, code, message };
    if (link !== undefined) a.link = link;
    if (conn !== undefined) a.conn = conn;
    this.addAnomaly(a);
    return a;
  }

  /** Record an anomaly found elsewhere (e.g. the capture ↔ endpoint state comparison). */
  addAnomaly(a: Anomaly): void {
    this.anomalyCount++;
    const t = this.anomalyTotals.get(a.code);
    if (!t) this.anomalyTotals.set(a.code, { code: a.code, severity: a.severity, count: 1, first: a.frame, last: a.frame, message: a.message });
    else {
      t.count++;
      if (a.frame > t.last) t.last = a.frame;
      if (t.count > ANOMALIES_KEPT) return;
    }
    this.anomalies.push(a);
  }
}

/** Direction `i` of a connection the tracker made (no pair built per frame). */
function dirOf(c: SmcConn, i: 0 | 1): DirState {
  return (c as SmcState).dir(i);
}

/** A compact tracker's links: what each end sent is not recorded (only the state comparison
 *  reads it, and smcdump never makes a compact tracker for one); reads give zeros. */
const NO_SENT: [LinkSent, LinkSent] = Object.freeze([Object.freeze(newSent()), Object.freeze(newSent())]) as unknown as [LinkSent, LinkSent];

function newSent(): LinkSent {
  return { first: undefined, sends: 0, writes: 0, writeBytes: 0, gaps: 0, writeRanges: undefined, confirm: undefined, add: undefined };
}

/** Count one new (not retransmitted) request of an end: messages, WRITE bytes and ranges. */
function countSent(s: LinkSent, d: DecodedFrame, info: ReturnType<typeof opcodeInfo>): void {
  const ib = d.roce!.ib;
  s.first ??= { psn: ib.bth.psn, frame: d.n, tsNs: d.tsNs, confirmLink: d.smc.some((i) => i.proto === 'llc' && i.value.kind === 'confirm_link') };
  const starts = info.isFirst || info.isOnly;
  if (info.isSend && starts) s.sends++;
  if (!info.isWrite) return;
  s.writeBytes += ib.payload.length;
  if (starts) s.writes++;
  const reth = ib.reth;
  if (!reth) return;
  // one range per rkey, widened by each WRITE (its RETH names the whole message)
  const m = s.writeRanges ??= new Map();
  const r = m.get(reth.rkey);
  const end = reth.va + BigInt(reth.dmaLen);
  if (!r) { if (m.size < 4096) m.set(reth.rkey, { minVa: reth.va, maxEnd: end, frame: d.n, tsNs: d.tsNs, count: 1 }); return; }
  r.count++;
  if (reth.va < r.minVa) r.minVa = reth.va;
  if (end > r.maxEnd) r.maxEnd = end;
}

function llcQp(m: Extract<LlcMessage, { kind: 'add_link' }>, d: DecodedFrame): LlcQp {
  return { frame: d.n, tsNs: d.tsNs, response: m.response, linkId: m.linkId, qpn: m.qpn, gid: intern(m.gid), mac: intern(m.mac), psn: m.psn };
}

/** The CLC Proposal's UEID list, one shared (frozen) record per distinct list: 100 000
 *  connections offering the same UEID keep one. */
const proposals = new Map<string, { ueids: string[] }>();
const NO_PROPOSED = Object.freeze({ ueids: NO_UEIDS }) as { ueids: string[] };
/** The record proposedOf() returned last. */
let lastProposed: { ueids: string[] } | undefined;
export function proposedOf(eids: readonly string[] | undefined): { ueids: string[] } {
  if (!eids || eids.length === 0) return NO_PROPOSED;
  // the same UEIDs as the last Proposal (most connections of a capture): no key string
  const last = lastProposed;
  if (last !== undefined && sameList(last.ueids, eids)) return last;
  lastProposed = proposedByKey(eids);
  return lastProposed;
}
function sameList(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
function proposedByKey(eids: readonly string[]): { ueids: string[] } {
  const key = eids.join('\n');
  let p = proposals.get(key);
  if (!p) {
    if (proposals.size >= 1024) proposals.clear();
    p = Object.freeze({ ueids: Object.freeze(eids.map(intern)) as string[] }) as { ueids: string[] };
    proposals.set(flat(key), p);
  }
  return p;
}

/** Whether the frame carries an SMC item of protocol `p` (a loop: no closure per call). */
function hasProto(d: DecodedFrame, p: string): boolean {
  const smc = d.smc;
  for (let i = 0; i < smc.length; i++) if (smc[i]!.proto === p) return true;
  return false;
}

/** Update a "last seen" slot in place (no object per frame on the hot path). */
function stamp(slot: { frame: number; tsNs: bigint } | undefined, d: DecodedFrame): { frame: number; tsNs: bigint } {
  if (!slot) return { frame: d.n, tsNs: d.tsNs };
  slot.frame = d.n;
  slot.tsNs = d.tsNs;
  return slot;
}

/** Since `tsNs`, the end opposite `from` sent nothing while `from` retransmitted requests. */
function peerSilentSince(l: Link, from: 0 | 1, tsNs: bigint): boolean {
  const r = (l as LinkState).retxOf(from);
  const peer = (l as LinkState).lastTsOf((1 - from) as 0 | 1);
  return r !== undefined && !r.answered && r.lastTs > tsNs && r.maxRepeat >= 2 && (peer === undefined || peer < tsNs);
}

function newTcpStream(): TcpStream {
  return { chunks: [], missing: [], bytes: 0 };
}

/** Append a TCP segment to an in-order stream: overlaps dropped, holes reported as missing. */
function appendTcp(s: TcpStream, seq: number, data: Uint8Array, frame: number): void {
  if (s.nextSeq === undefined) s.nextSeq = seq;
  const rel = (seq - s.nextSeq) | 0; // signed 32-bit distance
  let bytes = data;
  if (rel < 0) {
    if (-rel >= data.length) return; // retransmission
    bytes = data.subarray(-rel);
  } else if (rel > 0) {
    s.missing.push({ frame, from: s.bytes, to: s.bytes + rel });
    s.bytes += rel;
  }
  s.chunks.push({ frame, offset: s.bytes, bytes: bytes.slice() });
  s.bytes += bytes.length;
  s.nextSeq = (seq + data.length) >>> 0;
}

function sideOf(m: ClcAcceptConfirm): SmcSide {
  const r = m.r!;
  return {
    peerId: intern(r.peerId), gid: intern(r.gid), mac: intern(r.mac), qpn: r.qpn, rkey: r.rkey, token: r.token, rmbVa: r.rmbVa,
    rmbeSize: bufSizeFromCode(r.rmbeSizeCode), mtu: mtuFromCode(r.mtuCode), psn: r.psn,
  };
}


/** RoCEv2 over IPv4 uses IPv4-mapped GIDs: the GID of 10.55.0.1 is ::ffff:10.55.0.1 (cached: few
 *  hosts, no string per frame). */
const gidCache = new Map<string, string>();
function cachedGid(ip: string): string {
  let g = gidCache.get(ip);
  if (g === undefined) {
    g = gidOfIp(ip);
    if (gidCache.size > 4096) gidCache.clear();
    gidCache.set(ip, g);
  }
  return g;
}

/** QP (GID, QPN) → its link. The end is not kept: it is the link's end with that GID and QPN
 *  (`endOfQp`). A host (GID) has a few QPs: its one link itself, then a short list per GID
 *  (a Map per GID took 600 bytes each for 100 000 hosts; a slot object per QP 96 bytes each for
 *  130 000 QPs of hosts with one link each); a busy GID switches to a Map. */
export class QpIndex {
  private readonly m = new Map<string, LinkState | LinkState[] | Map<number, LinkState>>();
  /** Changes with every set() and delete(): answers cached at another generation are stale. */
  gen = 0;
  get(gid: string, qpn: number): LinkState | undefined {
    const q = this.m.get(gid);
    if (q === undefined) return undefined;
    if (q instanceof LinkState) return hasQp(q, gid, qpn) ? q : undefined;
    if (q instanceof Map) return q.get(qpn);
    for (let i = 0; i < q.length; i++) if (hasQp(q[i]!, gid, qpn)) return q[i];
    return undefined;
  }
  /** `link` has an end with (`gid`, `qpn`) (set it there first). */
  set(gid: string, qpn: number, link: LinkState): void {
    this.gen = (this.gen + 1) | 0;
    const q = this.m.get(gid);
    if (q === undefined) { this.m.set(gid, link); return; }
    if (q instanceof Map) { q.set(qpn, link); return; }
    if (q instanceof LinkState) { this.m.set(gid, q === link || hasQp(q, gid, qpn) ? link : [q, link]); return; }
    const i = q.findIndex((x) => hasQp(x, gid, qpn));
    if (i >= 0) { q[i] = link; return; }
    q.push(link);
    if (q.length > 16) {
      const big = new Map<number, LinkState>();
      for (const l of q) for (const e of l.ends) if (e.gid === gid && e.qpn !== undefined) big.set(e.qpn, l);
      big.set(qpn, link);
      this.m.set(gid, big);
    }
  }
  /** The link of QP (`gid`, `qpn`) leaves the index with its QPs on `gid` (the tracker drops a
   *  link's QPs together: a folded phantom or a rejected ADD LINK's link). */
  delete(gid: string, qpn: number): void {
    this.gen = (this.gen + 1) | 0;
    const q = this.m.get(gid);
    if (q instanceof Map) {
      const l = q.get(qpn);
      if (l !== undefined) for (const [k, v] of q) if (v === l) q.delete(k);
    } else if (Array.isArray(q)) {
      const l = q.find((x) => hasQp(x, gid, qpn));
      if (l === undefined) return;
      // back to no list when one link is left (a group whose ADD LINK was rejected)
      const rest = q.filter((x) => x !== l);
      if (rest.length === 0) this.m.delete(gid);
      else this.m.set(gid, rest.length === 1 ? rest[0]! : rest);
    } else if (q && hasQp(q, gid, qpn)) this.m.delete(gid);
  }
}

/** Whether an end of `l` is the QP (`gid`, `qpn`). */
function hasQp(l: LinkState, gid: string, qpn: number): boolean {
  return (l.qpnOf(0) === qpn && l.gidOf(0) === gid) || (l.qpnOf(1) === qpn && l.gidOf(1) === gid);
}

/** Which end of `l` is the QP (`gid`, `qpn`) (the server's when both are). */
function endOfQp(l: LinkState, gid: string, qpn: number): 0 | 1 {
  return l.qpnOf(1) === qpn && l.gidOf(1) === gid ? 1 : 0;
}

function sameHosts(l: Link, a: string, b: string): boolean {
  const s = l as LinkState;
  return (s.gidOf(0) === a && s.gidOf(1) === b) || (s.gidOf(0) === b && s.gidOf(1) === a);
}

