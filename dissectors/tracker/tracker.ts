// The correlation tracker: fed decoded frames in capture order, it joins TCP → CLC → link
// group → links (QP pairs, PSNs) → SMC-R connections (tokens, rkeys, RMBs, cursors) → the
// application bytes, annotates every frame with what it belongs to, and records anomalies.
// It owns all cross-frame state; renderers only print what it exposes.
//
// Keys (DESIGN.md "Correlation keys"): a RoCE frame's link is found by (destination GID,
// destination QPN); a CDC's connection by (link group, receiver GID, alert token); an RDMA
// WRITE's connection by (link group, receiver GID, rkey) and its ring offset = VA − RMB base.

import type { DecodedFrame } from '../frame.js';
import type { Severity } from '../wire/common.js';
import { bufSizeFromCode, hex32, mtuFromCode } from '../wire/common.js';
import type { ClcAcceptConfirm, ClcDecline, ClcMessage } from '../wire/clc.js';
import { declineReason } from '../wire/reasons.js';
import type { LlcMessage } from '../wire/llc.js';
import type { CdcMessage } from '../wire/cdc.js';
import { cursorDiff, cursorDistance, seqNewer } from '../wire/cdc.js';
import { opcodeInfo } from '../wire/ib.js';
import type { Anomaly, FrameNote, Link, LinkGroup, QpEnd, SmcConn, SmcDir, SmcSide, TcpConn, WriteCont } from './model.js';
import { RingStream } from './stream.js';

export interface TrackerOptions {
  /** Keep the application bytes of this connection (index as in the summary) for --follow. */
  follow?: number;
  /** Or select it by a 4-tuple "a.b.c.d:port-e.f.g.h:port" (either order). */
  followTuple?: string;
  /** A capture filter may hide frames (live BPF): gaps are then notes, not warnings. */
  filtered?: boolean;
}

/** RFC 7609 Appendix C / Linux: LLC responses are due within 2 s. */
const LLC_TIMEOUT_NS = 2_000_000_000n;
/** After a first-contact Confirm the server must start CONFIRM LINK (Linux waits 5 s as client). */
const CONFIRM_LINK_TIMEOUT_NS = 5_000_000_000n;

interface PendingLlc { link: Link; from: number /* 0 client, 1 server */; kind: LlcMessage['kind']; frame: number; tsNs: bigint; later: boolean }


/** Recent PSNs remembered per link direction to attribute NAKs/retransmissions (power of 2). */
const PSN_RING = 1024;
const PSN_RING_MASK = PSN_RING - 1;

const NO_ANOMALIES = Object.freeze([]) as unknown as Anomaly[];
const EMPTY_NOTE: FrameNote = Object.freeze({ anomalies: NO_ANOMALIES }) as FrameNote;

export class Tracker {
  readonly tcp: TcpConn[] = [];
  readonly groups: LinkGroup[] = [];
  readonly anomalies: Anomaly[] = [];
  /** SMC connections first seen mid-stream (no CLC captured). */
  readonly orphanConns: SmcConn[] = [];
  frames = 0;
  firstTs?: bigint;
  lastTs = 0n;

  private readonly tcpByKey = new Map<string, TcpConn>();
  /** QP (GID, QPN) → its link and which end it is (nested maps: no key strings per frame). */
  private readonly qps = new QpIndex();
  /** "lgId|gid|token" and "lgId|gid|rkey" → connection and the direction it receives. */
  private readonly byToken = new Map<string, { conn: SmcConn; dir: 0 | 1 }>();
  private readonly byRkey = new Map<string, { conn: SmcConn; dir: 0 | 1 }>();
  private readonly pending: PendingLlc[] = [];
  /** First-contact connections whose CONFIRM LINK has not been seen yet. */
  private readonly awaitingConfirmLink: { conn: TcpConn; lg: LinkGroup; frame: number; tsNs: bigint }[] = [];
  private readonly lgFirstConn = new Map<LinkGroup, TcpConn>();
  private orphanIndex = 0;
  private note: FrameNote = EMPTY_NOTE;
  private cur!: DecodedFrame;

  /** Gaps in what the capture shows are warnings — unless a capture filter may hide frames. */
  private readonly gapSeverity: Severity;

  constructor(private readonly opts: TrackerOptions = {}) {
    this.gapSeverity = opts.filtered ? 'note' : 'warn';
  }

  /** Feed one frame (capture order). Returns what the tracker knows about it. */
  feed(d: DecodedFrame): FrameNote {
    this.frames++;
    this.firstTs ??= d.tsNs;
    this.lastTs = d.tsNs;
    this.cur = d;
    this.note = { anomalies: NO_ANOMALIES };
    this.checkTimeouts(d.tsNs, false);
    // Malformed bytes (reserved bits, trailer/length mismatch, ICRC, …) found by the codecs are
    // anomalies too, so expert info is in one place; notes stay notes of the frame.
    for (const i of d.issues) if (i.severity !== 'note') this.anomaly(i.severity, i.code, i.message);
    if (d.tcp && d.ip) this.onTcp(d);
    else if (d.roce) this.onRoce(d);
    const n = this.note;
    return n.anomalies.length === 0 && n.link === undefined && n.conn === undefined && n.tcpMode === undefined ? EMPTY_NOTE : n;
  }

  /** End of capture: requests still unanswered, CONFIRM LINK never seen. */
  finish(): void {
    this.checkTimeouts(this.lastTs, true);
    for (const g of this.groups) for (const c of g.conns) for (const w of c.dirs) if (w.consAhead) { this.consAheadAnomaly(w, c); w.consAhead = undefined; }
  }

  /** The connection selected by TrackerOptions.follow / followTuple, if seen. */
  followed(): SmcConn | undefined {
    for (const t of this.tcp) if (t.smc && this.isFollowed(t)) return t.smc;
    return undefined;
  }

  // ---------------------------------------------------------------------------------------
  // TCP and CLC
  // ---------------------------------------------------------------------------------------

  private onTcp(d: DecodedFrame): void {
    const ip = d.ip!, h = d.tcp!;
    const a = `${ip.src}:${h.srcPort}`, b = `${ip.dst}:${h.dstPort}`;
    const key = a < b ? `${a}-${b}` : `${b}-${a}`;
    let c = this.tcpByKey.get(key);
    const syn = h.flags.syn && !h.flags.ack;
    if (!c || (syn && c.closed)) {
      // Client = SYN sender; without a SYN, the sender of the first CLC Proposal, else the first sender.
      const fromClient = syn || !d.smc.some((i) => i.proto === 'clc' && i.value.type !== 'proposal');
      c = {
        index: this.tcp.length + 1,
        client: fromClient ? { ip: ip.src, port: h.srcPort } : { ip: ip.dst, port: h.dstPort },
        server: fromClient ? { ip: ip.dst, port: h.dstPort } : { ip: ip.src, port: h.srcPort },
        mode: 'pending', steps: [], tcpBytes: [0, 0], closed: false,
      };
      if (!syn) c.why = 'connection began before the capture';
      this.tcp.push(c);
      this.tcpByKey.set(key, c);
    }
    const fromClient = ip.src === c.client.ip && h.srcPort === c.client.port;
    const hasOpt = d.smc.some((i) => i.proto === 'tcpopt');
    if (h.flags.syn) {
      if (!h.flags.ack) {
        c.synSmc = hasOpt;
        c.steps.push({ name: 'SYN', frame: d.n, tsNs: d.tsNs });
        if (!hasOpt) { c.mode = 'tcp'; c.why = 'plain TCP: the SYN carried no SMC option'; }
      } else {
        c.synAckSmc = hasOpt;
        c.steps.push({ name: 'SYN-ACK', frame: d.n, tsNs: d.tsNs });
        if (c.synSmc && !hasOpt) {
          c.mode = 'fallback';
          c.fallbackCode = 0x03010000;
          c.why = 'peer did not indicate SMC: the SYN-ACK lacked option 254 (0x03010000 PEERNOSMC, decided by the client; no CLC follows)';
        }
      }
    }
    for (const it of d.smc) if (it.proto === 'clc') this.onClc(c, it.value, fromClient, d);
    const len = d.payloadLength;
    if (len > 0 && d.tcpRole === 'data') {
      c.tcpBytes[fromClient ? 0 : 1] += len;
      if (c.mode === 'smc-r' || c.mode === 'smc-d') {
        this.anomaly('error', 'tcp.data-after-smc', `${len} bytes of TCP payload on connection ${c.index} after it switched to SMC-${c.mode === 'smc-r' ? 'R' : 'D'}`, undefined, c.index);
      } else if (c.mode === 'pending' && c.proposal) {
        c.mode = 'fallback';
        c.why ??= 'fell back without a Decline: TCP data followed the Proposal';
      }
    }
    if (h.flags.fin || h.flags.rst) c.closed = true;
    this.note.tcpMode = c.mode;
    this.note.conn = c.index;
  }

  private onClc(c: TcpConn, m: ClcMessage, fromClient: boolean, d: DecodedFrame): void {
    const step = (name: string): void => { c.steps.push({ name, frame: d.n, tsNs: d.tsNs }); };
    switch (m.type) {
      case 'proposal':
        c.proposal = m;
        step('Proposal');
        if (c.synAckSmc === false) this.anomaly('warn', 'clc.without-option', 'CLC Proposal although the SYN-ACK had no SMC option', undefined, c.index);
        break;
      case 'accept':
        c.accept = m;
        step('Accept');
        break;
      case 'confirm':
        c.confirm = m;
        step('Confirm');
        if (c.accept) this.smcEstablished(c, d);
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
    c.decline = { msg: m, by, frame: d.n };
    c.mode = 'fallback';
    c.fallbackCode = m.diagnosis;
    const r = declineReason(m.diagnosis);
    let why = `${by} declined ${hex32(m.diagnosis)} ${r.name}: ${r.meaning}`;
    const ueids = c.proposal?.v2?.eids;
    if (ueids && ueids.length > 0) why += `; client offered ${ueids.join(', ')}`;
    if (m.outOfSync) why += '; out of sync: the peer must drop its link group';
    c.why = why;
    if (c.smc) {
      // Declined after Confirm (e.g. CONFIRM LINK timeout): the SMC connection never carried data.
      c.smc.lg.conns = c.smc.lg.conns.filter((x) => x !== c.smc);
      c.smc = undefined;
    }
  }

  private smcEstablished(c: TcpConn, d: DecodedFrame): void {
    const acc = c.accept!, conf = c.confirm!;
    if (acc.d || conf.d) { c.mode = 'smc-d'; c.why = 'SMC-D (no RoCE traffic to follow)'; return; }
    if (!acc.r || !conf.r) return;
    c.mode = 'smc-r';
    c.why = undefined;
    const server = sideOf(acc), client = sideOf(conf);
    let lg: LinkGroup | undefined;
    if (acc.firstContact) {
      lg = this.newGroup(d.n, true);
      lg.clientPeer = conf.r.peerId; lg.serverPeer = acc.r.peerId;
      lg.clientHost = conf.r.fce?.hostname; lg.serverHost = acc.r.fce?.hostname;
      lg.version = acc.version; lg.release = acc.r.fce?.release; lg.ueid = acc.r.eid;
      lg.maxLinks = acc.r.fce?.maxLinks; lg.maxConns = acc.r.fce?.maxConns;
      const link = this.newLink(lg, [
        { gid: client.gid, qpn: client.qpn, mac: client.mac, psn: client.psn },
        { gid: server.gid, qpn: server.qpn, mac: server.mac, psn: server.psn },
      ], Math.min(client.mtu, server.mtu), 'confirming', d.n);
      link.nextPsn = [client.psn, server.psn];
      this.awaitingConfirmLink.push({ conn: c, lg, frame: d.n, tsNs: d.tsNs });
      this.lgFirstConn.set(lg, c);
    } else {
      // Subsequent contact: the link named by the server's QP (and the client's) already exists.
      const e = this.qps.get(server.gid, server.qpn) ?? this.qps.get(client.gid, client.qpn);
      lg = e?.link.lg;
      if (!lg) {
        lg = this.newGroup(d.n, false);
        this.newLink(lg, [{ gid: client.gid, qpn: client.qpn, mac: client.mac }, { gid: server.gid, qpn: server.qpn, mac: server.mac }], Math.min(client.mtu, server.mtu), 'unknown', d.n);
        this.anomaly('note', 'track.lg-unknown', `connection ${c.index} reuses a link group created before the capture`, undefined, c.index);
      }
    }
    const conn: SmcConn = {
      index: c.index, tcp: c, lg,
      sides: [client, server],
      dirs: [newDir(server.rmbeSize, true), newDir(client.rmbeSize, true)],
    };
    if (this.isFollowed(c)) for (const dir of conn.dirs) dir.stream = new RingStream(dir.ringSize, true);
    c.smc = conn;
    lg.conns.push(conn);
    // CDC to the server carries the server's token; WRITEs to the server use the server's rkey.
    this.bindConn(conn, 0, server.gid, server.token, server.rkey, server.rmbVa);
    this.bindConn(conn, 1, client.gid, client.token, client.rkey, client.rmbVa);
  }

  private isFollowed(c: TcpConn): boolean {
    if (this.opts.follow !== undefined) return c.index === this.opts.follow;
    const t = this.opts.followTuple;
    if (!t) return false;
    const a = `${c.client.ip}:${c.client.port}`, b = `${c.server.ip}:${c.server.port}`;
    return t === `${a}-${b}` || t === `${b}-${a}`;
  }

  /** Register receiver-side keys: `dir` is the direction whose reader owns token/rkey. */
  private bindConn(conn: SmcConn, dir: 0 | 1, gid: string, token: number, rkey: number, va: bigint): void {
    const lg = conn.lg.id;
    this.byToken.set(`${lg}|${gid}|${token}`, { conn, dir });
    this.byRkey.set(`${lg}|${gid}|${rkey}`, { conn, dir });
    conn.lg.rkeys.set(`${gid}|${rkey}`, va);
  }

  // ---------------------------------------------------------------------------------------
  // Link groups and links
  // ---------------------------------------------------------------------------------------

  private newGroup(frame: number, complete: boolean): LinkGroup {
    const lg: LinkGroup = { id: this.groups.length + 1, complete, links: [], conns: [], rkeys: new Map(), state: 'active', firstFrame: frame };
    this.groups.push(lg);
    return lg;
  }

  private newLink(lg: LinkGroup, ends: [QpEnd, QpEnd], mtu: number, state: Link['state'], frame: number): Link {
    const link: Link = {
      lg, id: 0, name: `LG${lg.id}/L?`, ends, mtu, state, nextPsn: [undefined, undefined],
      packets: [0, 0], bytes: [0, 0], retransmits: 0, psnGaps: 0, naks: 0, rnrNaks: 0, firstFrame: frame, write: [undefined, undefined], psnConn: [psnRing(), psnRing()],
    };
    link.name = `LG${lg.id}/#${lg.links.length + 1}`;
    lg.links.push(link);
    for (const e of [0, 1] as const) if (ends[e].qpn !== undefined) this.qps.set(ends[e].gid, ends[e].qpn, { link, end: e });
    return link;
  }

  private setLinkId(link: Link, id: number): void {
    if (link.id === id) return;
    link.id = id;
    link.name = `LG${link.lg.id}/L${id}`;
  }

  /** Link of a RoCE frame from its destination; learns links mid-stream when unknown. */
  private linkOf(srcGid: string, dstGid: string, dqpn: number, d: DecodedFrame): { link: Link; end: 0 | 1 } {
    const hit = this.qps.get(dstGid, dqpn);
    if (hit) return hit;
    // Mid-stream: pair with a half-known link whose other end is this packet's destination.
    for (const lg of this.groups) {
      if (lg.complete) continue;
      for (const l of lg.links) {
        for (const e of [0, 1] as const) {
          const o = (1 - e) as 0 | 1;
          if (l.ends[e].qpn === undefined && l.ends[e].gid === dstGid && l.ends[o].gid === srcGid) {
            l.ends[e].qpn = dqpn;
            this.qps.set(dstGid, dqpn, { link: l, end: e });
            return { link: l, end: e };
          }
        }
      }
    }
    const lg = this.groups.find((g) => !g.complete && g.links.some((l) => sameHosts(l, srcGid, dstGid))) ?? this.newGroup(d.n, false);
    if (lg.links.length === 0) this.anomaly('note', 'track.midstream', `RoCE traffic ${srcGid} → ${dstGid} QP ${hexQp(dqpn)} without a captured handshake: link group learned from traffic, its sizes stay unknown`);
    // Which end is the "client"? Unknown mid-stream: keep the first destination as end 1.
    const link = this.newLink(lg, [{ gid: srcGid }, { gid: dstGid, qpn: dqpn }], 0, 'unknown', d.n);
    return { link, end: 1 };
  }

  // ---------------------------------------------------------------------------------------
  // RoCE: PSNs, ACK/NAK, LLC, CDC, RDMA WRITE
  // ---------------------------------------------------------------------------------------

  private onRoce(d: DecodedFrame): void {
    const r = d.roce!;
    const bth = r.ib.bth;
    const srcGid = r.grh ? r.grh.sgid : gidOfIp(d.ip!.src);
    const dstGid = r.grh ? r.grh.dgid : gidOfIp(d.ip!.dst);
    const { link, end } = this.linkOf(srcGid, dstGid, bth.destQp, d);
    // `end` receives; the packet travels from the other end. Direction index = sender end:
    // 0 = client → server (received by end 1), 1 = server → client.
    const dir: 0 | 1 = end === 1 ? 0 : 1;
    this.note.link = link.name;
    link.packets[dir]++;
    link.bytes[dir] += r.ib.payload.length;
    const info = opcodeInfo(bth.opcode);
    if (info.isAck) {
      const a = r.ib.aeth;
      if (!a || a.kind === 'ACK') return;
      // A NAK answers the request with this PSN, sent the other way: attribute it to its connection.
      const conn = this.connOfPsn(link, (1 - dir) as 0 | 1, bth.psn);
      if (conn !== undefined) this.note.conn = conn;
      if (a.kind === 'NAK') { link.naks++; this.anomaly('warn', 'roce.nak', `NAK ${a.code === 0 ? 'PSN sequence error' : `code ${a.code}`} for PSN ${bth.psn} on ${link.name}${conn !== undefined ? ` (connection ${conn})` : ''}`, link.name, conn); }
      else if (a.kind === 'RNR NAK') { link.rnrNaks++; this.anomaly('warn', 'roce.rnr-nak', `RNR NAK (receiver had no receive buffer posted) for PSN ${bth.psn} on ${link.name}${conn !== undefined ? ` (connection ${conn})` : ''}`, link.name, conn); }
      return;
    }
    // Request PSN continuity per direction.
    const want = link.nextPsn[dir];
    if (want !== undefined && bth.psn !== want) {
      const behind = (want - bth.psn) & 0xffffff;
      if (behind > 0 && behind < 0x800000) {
        link.retransmits++;
        this.note.retransmission = true;
        const conn = this.connOfPsn(link, dir, bth.psn);
        if (conn !== undefined) this.note.conn = conn;
        this.anomaly('note', 'roce.retransmission', `retransmission of PSN ${bth.psn} on ${link.name} (next new PSN ${want})`, link.name, conn);
        return; // already processed the first time
      }
      link.psnGaps++;
      this.anomaly(this.gapSeverity, 'roce.psn-gap', `PSN gap on ${link.name}: expected ${want}, got ${bth.psn} (${((bth.psn - want) & 0xffffff)} packets missing from the capture or lost)`, link.name);
    }
    link.nextPsn[dir] = (bth.psn + 1) & 0xffffff;

    // Traffic from the other side shows it is alive: requests it leaves unanswered are overdue.
    for (const p of this.pending) if (p.link.lg === link.lg && p.from !== dir) p.later = true;
    if (info.isWrite) this.onWrite(d, link, dir, dstGid);
    else {
      for (const it of d.smc) {
        if (it.proto === 'llc') this.onLlc(it.value, link, dir, d);
        else if (it.proto === 'cdc') this.onCdc(it.value, link, dir, dstGid, d);
      }
    }
    this.note.link = link.name; // CONFIRM LINK / ADD LINK may just have named the link
    // Remember which connection each recent PSN carried, for NAKs and retransmissions.
    const ring = link.psnConn[dir];
    ring.psn[bth.psn & PSN_RING_MASK] = bth.psn;
    ring.conn[bth.psn & PSN_RING_MASK] = this.note.conn ?? 0;
  }

  private onWrite(d: DecodedFrame, link: Link, dir: 0 | 1, dstGid: string): void {
    const ib = d.roce!.ib;
    const info = opcodeInfo(ib.bth.opcode);
    let cont: WriteCont | undefined;
    if (ib.reth) {
      const hit = this.byRkey.get(`${link.lg.id}|${dstGid}|${ib.reth.rkey}`);
      if (!hit) {
        link.write[dir] = undefined;
        const known = link.lg.rkeys.has(`${dstGid}|${ib.reth.rkey}`);
        if (link.lg.complete && !known) this.anomaly('error', 'rdma.unknown-rkey', `RDMA WRITE with rkey ${hex32(ib.reth.rkey)} that ${dstGid} never announced (${link.name})`, link.name);
        return;
      }
      const conn = hit.conn;
      const base = conn.sides[hit.dir === 0 ? 1 : 0].rmbVa ?? ib.reth.va;
      const off = Number(ib.reth.va - base);
      const size = conn.dirs[hit.dir].ringSize;
      if (size > 0 && (off < 0 || off + ib.reth.dmaLen > size)) {
        this.anomaly('error', 'rdma.out-of-bounds', `RDMA WRITE of ${ib.reth.dmaLen} bytes at RMB offset ${off} outside the ${size}-byte RMBE of connection ${conn.index}`, link.name, conn.index);
      }
      cont = { conn, dir: hit.dir, offset: off };
      link.write[dir] = info.isOnly ? undefined : cont;
    } else {
      cont = link.write[dir];
      if (!cont) return; // MIDDLE/LAST whose FIRST was not captured
      if (info.isLast) link.write[dir] = undefined;
    }
    const sd = cont.conn.dirs[cont.dir];
    this.note.conn = cont.conn.index;
    this.note.dir = cont.dir === 0 ? 'c>s' : 's>c';
    if (cont.dir !== dir) this.anomaly('error', 'rdma.wrong-direction', `RDMA WRITE into the sender's own RMB (connection ${cont.conn.index})`, link.name, cont.conn.index);
    sd.writes++;
    sd.writeBytes += ib.payload.length;
    sd.stream?.place(cont.offset, ib.payload);
    cont.offset += ib.payload.length;
    cont.conn.firstData ??= { name: 'first data', frame: d.n, tsNs: d.tsNs };
  }

  private onCdc(m: CdcMessage, link: Link, dir: 0 | 1, dstGid: string, d: DecodedFrame): void {
    let hit = this.byToken.get(`${link.lg.id}|${dstGid}|${m.token}`);
    if (!hit) {
      if (link.lg.complete) {
        this.anomaly('error', 'cdc.unknown-token', `CDC for alert token ${hex32(m.token)} that ${dstGid} never announced (${link.name})`, link.name);
        return;
      }
      hit = this.orphan(link, dir, dstGid, m.token);
    }
    const conn = hit.conn;
    if (hit.dir !== dir) {
      this.anomaly('error', 'cdc.wrong-direction', `CDC carries the sender's own token (connection ${conn.index})`, link.name, conn.index);
      return;
    }
    this.note.conn = conn.index;
    this.note.dir = dir === 0 ? 'c>s' : 's>c';
    conn.firstData ??= { name: 'first data', frame: d.n, tsNs: d.tsNs };
    const w = conn.dirs[dir];        // this CDC's writer direction (sender → receiver)
    const back = conn.dirs[1 - dir]!; // the reverse direction, whose reader is this CDC's sender
    w.cdcs++;
    // Sequence numbers: +1 per CDC of the sender (RC retransmissions were filtered by PSN).
    let seqGap = false;
    if (w.seq !== undefined) {
      const expect = (w.seq + 1) & 0xffff;
      if (m.seq !== expect) {
        seqGap = seqNewer(m.seq, w.seq);
        if (seqGap) this.anomaly(this.gapSeverity, 'cdc.seq-gap', `CDC sequence jumped from ${w.seq} to ${m.seq} on connection ${conn.index} (${((m.seq - expect) & 0xffff)} CDC missing)`, link.name, conn.index);
        else { this.anomaly('error', 'cdc.seq-regression', `CDC sequence went back from ${w.seq} to ${m.seq} on connection ${conn.index}`, link.name, conn.index); return; }
      }
    }
    w.seq = m.seq;
    // Producer cursor: how far the sender wrote into the receiver's ring; release new bytes.
    // Cursors of a connection whose handshake was captured start at 0:0; mid-stream ones
    // (ring size unknown) only get a baseline from their first CDC.
    const size = w.ringSize;
    if (w.prod && size > 0) {
      // Linux moves a cursor at most one wrap per CDC (smc_curs_diff). A bigger step is a
      // protocol anomaly — unless CDCs are missing from the capture (the sequence gap says so).
      const multiWrap = ((m.prod.wrap - w.prod.wrap) & 0xffff) > 1 && seqNewer(m.prod.wrap, w.prod.wrap);
      if (multiWrap && !seqGap) {
        this.anomaly('warn', 'cdc.cursor-jump', `producer cursor jumped more than one wrap (${w.prod.wrap}:${w.prod.count} → ${m.prod.wrap}:${m.prod.count}) on connection ${conn.index}`, link.name, conn.index);
      }
      const n = multiWrap ? cursorDistance(w.prod, m.prod, size) : cursorDiff(w.prod, m.prod, size);
      if (n > 0) {
        w.stream?.release(w.prod.count, n, d.n);
        w.prodLinear += n;
      }
    }
    w.prod = { wrap: m.prod.wrap, count: m.prod.count };
    if (w.consAhead) {
      if (!seqGap) this.consAheadAnomaly(w, conn);
      w.consAhead = undefined;
    }
    // Consumer cursor: how far the sender consumed the reverse stream.
    const bsize = back.ringSize;
    if (back.cons && bsize > 0) {
      const multiWrap = ((m.cons.wrap - back.cons.wrap) & 0xffff) > 1 && seqNewer(m.cons.wrap, back.cons.wrap);
      back.consLinear += multiWrap ? cursorDistance(back.cons, m.cons, bsize) : cursorDiff(back.cons, m.cons, bsize);
      // Ahead of the producer we saw: a violation — unless the capture lacks a CDC of the
      // writer (then the reader knew a cursor we did not see). The writer's next CDC decides.
      if (back.consLinear > back.prodLinear && !back.consAhead) {
        back.consAhead = { frame: d.n, tsNs: d.tsNs, link: link.name, text: `consumer cursor ${m.cons.wrap}:${m.cons.count} is beyond what the peer produced (${back.prodLinear} bytes) on connection ${conn.index}` };
      }
    }
    back.cons = { wrap: m.cons.wrap, count: m.cons.count };
    // Overrun: the writer may not run more than one ring ahead of what the reader consumed.
    if (size > 0 && w.cons && w.prodLinear - w.consLinear > size) {
      this.anomaly('error', 'cdc.overrun', `producer cursor overruns the peer's consumer cursor by ${w.prodLinear - w.consLinear - size} bytes on connection ${conn.index} (would overwrite unread data)`, link.name, conn.index);
    }
    if (m.prodFlags.writeBlocked) w.writerBlocked++;
    if (m.prodFlags.urgentPresent) w.urgent++;
    if (m.connFlags.peerDoneWriting) w.doneWriting = true;
    if (m.connFlags.peerConnClosed) w.closed = true;
    if (m.connFlags.peerConnAbort) { w.aborted = true; this.anomaly('note', 'cdc.abort', `connection ${conn.index} aborted by its ${dir === 0 ? 'client' : 'server'}`, link.name, conn.index); }
  }

  /** Connection of a recent request PSN on a link direction (undefined when not remembered). */
  private connOfPsn(link: Link, dir: 0 | 1, psn: number): number | undefined {
    const ring = link.psnConn[dir];
    const i = psn & PSN_RING_MASK;
    return ring.psn[i] === psn && ring.conn[i] !== 0 ? ring.conn[i] : undefined;
  }

  private consAheadAnomaly(w: SmcDir, conn: SmcConn): void {
    const a = w.consAhead!;
    this.anomalyAt(a.frame, a.tsNs, 'error', 'cdc.cons-beyond-prod', a.text, a.link, conn.index);
  }

  /** A connection first seen mid-stream through its CDC token. */
  private orphan(link: Link, dir: 0 | 1, dstGid: string, token: number): { conn: SmcConn; dir: 0 | 1 } {
    const other = link.ends[dir].gid;
    // The reverse direction of a connection already seen by its other token? Only when exactly
    // one mid-stream connection on this link group lacks this side's token (no guessing).
    const recv = dir === 0 ? 1 : 0;
    const cands = this.orphanConns.filter((c) => c.lg === link.lg && c.sides[recv].token === undefined && c.sides[recv].gid === dstGid);
    if (cands.length === 1) {
      const conn = cands[0]!;
      conn.sides[recv].token = token;
      const hit = { conn, dir };
      this.byToken.set(`${link.lg.id}|${dstGid}|${token}`, hit);
      return hit;
    }
    const sides: SmcConn['sides'] = dir === 0 ? [{ gid: other }, { gid: dstGid, token }] : [{ gid: dstGid, token }, { gid: other }];
    const conn: SmcConn = { index: -(++this.orphanIndex), lg: link.lg, sides, dirs: [newDir(0), newDir(0)] };
    link.lg.conns.push(conn);
    this.orphanConns.push(conn);
    const hit = { conn, dir };
    this.byToken.set(`${link.lg.id}|${dstGid}|${token}`, hit);
    return hit;
  }

  private onLlc(m: LlcMessage, link: Link, dir: 0 | 1, d: DecodedFrame): void {
    const lg = link.lg;
    // A DELETE LINK of the whole group expects no response: Linux only waits for its send to
    // complete (and then sends its own DELETE LINK requests while it tears down).
    const expectsAnswer = !(m.kind === 'delete_link' && m.all);
    if (!m.response && expectsAnswer) this.pending.push({ link, from: dir, kind: m.kind, frame: d.n, tsNs: d.tsNs, later: false });
    else this.answer(link, dir, m.kind);
    switch (m.kind) {
      case 'confirm_link':
        this.setLinkId(link, m.linkId);
        link.uid = m.linkUid;
        if (m.response) {
          link.state = 'active';
          const first = this.lgFirstConn.get(lg);
          if (first && !first.steps.some((x) => x.name === 'CONFIRM LINK')) first.steps.push({ name: 'CONFIRM LINK', frame: d.n, tsNs: d.tsNs });
        } else {
          // The server started link bring-up; a missing response is now an LLC timeout.
          link.state = 'confirming';
          for (let i = this.awaitingConfirmLink.length - 1; i >= 0; i--) if (this.awaitingConfirmLink[i]!.lg === lg) this.awaitingConfirmLink.splice(i, 1);
        }
        lg.maxLinks ??= m.maxLinks;
        break;
      case 'add_link': {
        if (m.rejected) {
          // The link the request proposed never comes up.
          const i = lg.links.findIndex((l) => l.id === m.linkId && l.state === 'confirming' && l !== link);
          if (i >= 0) { const [dead] = lg.links.splice(i, 1); for (const e of dead!.ends) if (e.qpn !== undefined) this.qps.delete(e.gid, e.qpn); }
          break;
        }
        if (!m.response) {
          // The requester (server side of the LG in Linux) announces its new QP; the client answers with its own.
          const nl = this.newLink(lg, dir === 1 ? [{ gid: '' }, { gid: m.gid, qpn: m.qpn, mac: m.mac, psn: m.psn }] : [{ gid: m.gid, qpn: m.qpn, mac: m.mac, psn: m.psn }, { gid: '' }], mtuFromCode(m.mtu), 'confirming', d.n);
          this.setLinkId(nl, m.linkId);
          nl.nextPsn[dir] = m.psn;
          for (const rk of m.v2?.rkeys ?? []) this.rkeyAlias(lg, link, rk.rkey, rk.rkeyNew, rk.vaddrNew, dir);
        } else {
          const nl = lg.links.find((l) => l.id === m.linkId && l.state === 'confirming' && l.ends[dir].gid === '');
          if (nl) {
            nl.ends[dir] = { gid: m.gid, qpn: m.qpn, mac: m.mac, psn: m.psn };
            nl.nextPsn[dir] = m.psn;
            this.qps.set(m.gid, m.qpn, { link: nl, end: dir });
          }
          for (const rk of m.v2?.rkeys ?? []) this.rkeyAlias(lg, link, rk.rkey, rk.rkeyNew, rk.vaddrNew, dir);
        }
        break;
      }
      case 'delete_link':
        if (m.all) { for (const l of lg.links) l.state = 'deleted'; lg.state = 'terminated'; }
        else { const l = lg.links.find((x) => x.id === m.linkId); if (l) l.state = 'deleted'; }
        break;
      case 'confirm_rkey':
        if (!m.response) {
          // The sender's new RMB, on this link (and others): receivers of WRITEs = the sender.
          const owner = link.ends[dir].gid;
          lg.rkeys.set(`${owner}|${m.rkey}`, m.vaddr);
          for (const o of m.others.slice(0, m.numRtokens)) {
            const ol = lg.links.find((l) => l.id === o.linkId);
            if (ol) lg.rkeys.set(`${ol.ends[dir].gid}|${o.rkey}`, o.vaddr);
          }
        }
        break;
      case 'delete_rkey':
        break;
      default:
        break;
    }
  }

  /** ADD LINK rkey list: the sender's (`ownerEnd`) RMBs, as they are reached on the new link. */
  private rkeyAlias(lg: LinkGroup, onLink: Link, rkey: number, rkeyNew: number, vaNew: bigint, ownerEnd: 0 | 1): void {
    const owner = onLink.ends[ownerEnd].gid;
    const hit = this.byRkey.get(`${lg.id}|${owner}|${rkey}`);
    const nl = lg.links[lg.links.length - 1]!;
    const newOwner = nl.ends[ownerEnd].gid;
    if (newOwner) {
      lg.rkeys.set(`${newOwner}|${rkeyNew}`, vaNew);
      if (hit) this.byRkey.set(`${lg.id}|${newOwner}|${rkeyNew}`, hit);
    }
  }

  private answer(link: Link, dir: 0 | 1, kind: LlcMessage['kind']): void {
    const i = this.pending.findIndex((p) => p.link.lg === link.lg && p.from !== dir && p.kind === kind);
    if (i >= 0) this.pending.splice(i, 1);
  }

  private checkTimeouts(now: bigint, final: boolean): void {
    for (let i = this.pending.length - 1; i >= 0; i--) {
      const p = this.pending[i]!;
      // DELETE LINK may be answered by the peer's own DELETE LINK request (Linux does).
      if (p.kind === 'delete_link' || p.kind === 'delete_rkey') {
        if (this.pending.some((q) => q !== p && q.link.lg === p.link.lg && q.from !== p.from && q.kind === p.kind && q.frame > p.frame)) { this.pending.splice(i, 1); continue; }
      }
      const overdue = now - p.tsNs > LLC_TIMEOUT_NS;
      if (overdue || (final && p.later)) {
        this.pending.splice(i, 1);
        const when = overdue ? 'within 2 s' : 'before the capture ended, although the peer kept sending';
        this.anomalyAt(p.frame, p.tsNs, 'warn', 'llc.no-response', `LLC ${p.kind.replace(/_/g, ' ').toUpperCase()} request (frame ${p.frame}) got no response ${when} (${p.link.name})`, p.link.name);
      }
    }
    for (let i = this.awaitingConfirmLink.length - 1; i >= 0; i--) {
      const w = this.awaitingConfirmLink[i]!;
      const overdue = now - w.tsNs > CONFIRM_LINK_TIMEOUT_NS;
      const cdcSeen = w.lg.conns.some((c) => c.dirs[0].cdcs + c.dirs[1].cdcs > 0);
      if (overdue || (final && cdcSeen)) {
        this.awaitingConfirmLink.splice(i, 1);
        this.anomalyAt(w.frame, w.tsNs, 'warn', 'link.no-confirm-link', `first contact (connection ${w.conn.index}) without a completed LLC CONFIRM LINK exchange on LG${w.lg.id}`, `LG${w.lg.id}`, w.conn.index);
      }
    }
  }

  private anomaly(severity: Severity, code: string, message: string, link?: string, conn?: number): void {
    const a = this.anomalyAt(this.cur.n, this.cur.tsNs, severity, code, message, link, conn);
    if (this.note.anomalies === NO_ANOMALIES) this.note.anomalies = [];
    this.note.anomalies.push(a);
  }

  private anomalyAt(frame: number, tsNs: bigint, severity: Severity, code: string, message: string, link?: string, conn?: number): Anomaly {
    const a: Anomaly = { frame, tsNs, severity, code, message };
    if (link !== undefined) a.link = link;
    if (conn !== undefined) a.conn = conn;
    this.anomalies.push(a);
    return a;
  }
}

/** Per-direction state; `fromStart`: the handshake was captured, so both cursors start at 0:0. */
function psnRing(): { psn: Int32Array; conn: Int32Array } {
  return { psn: new Int32Array(PSN_RING).fill(-1), conn: new Int32Array(PSN_RING) };
}

function newDir(ringSize: number, fromStart = false): SmcDir {
  const d: SmcDir = { ringSize, prodLinear: 0, consLinear: 0, cdcs: 0, writes: 0, writeBytes: 0, writerBlocked: 0, urgent: 0, doneWriting: false, closed: false, aborted: false };
  if (fromStart) { d.prod = { wrap: 0, count: 0 }; d.cons = { wrap: 0, count: 0 }; }
  return d;
}

function sideOf(m: ClcAcceptConfirm): SmcSide {
  const r = m.r!;
  return {
    peerId: r.peerId, gid: r.gid, mac: r.mac, qpn: r.qpn, rkey: r.rkey, token: r.token, rmbVa: r.rmbVa,
    rmbeSize: bufSizeFromCode(r.rmbeSizeCode), mtu: mtuFromCode(r.mtuCode), psn: r.psn,
  };
}

/** RoCEv2 over IPv4 uses IPv4-mapped GIDs: the GID of 10.55.0.1 is ::ffff:10.55.0.1 (cached: few hosts). */
const gidCache = new Map<string, string>();
function gidOfIp(ip: string): string {
  let g = gidCache.get(ip);
  if (g === undefined) {
    g = ip.includes(':') ? ip : `::ffff:${ip}`;
    if (gidCache.size > 4096) gidCache.clear();
    gidCache.set(ip, g);
  }
  return g;
}

class QpIndex {
  private readonly m = new Map<string, Map<number, { link: Link; end: 0 | 1 }>>();
  get(gid: string, qpn: number): { link: Link; end: 0 | 1 } | undefined { return this.m.get(gid)?.get(qpn); }
  set(gid: string, qpn: number, v: { link: Link; end: 0 | 1 }): void {
    let q = this.m.get(gid);
    if (!q) { q = new Map(); this.m.set(gid, q); }
    q.set(qpn, v);
  }
  delete(gid: string, qpn: number): void { this.m.get(gid)?.delete(qpn); }
}

function sameHosts(l: Link, a: string, b: string): boolean {
  return (l.ends[0].gid === a && l.ends[1].gid === b) || (l.ends[0].gid === b && l.ends[1].gid === a);
}

function hexQp(q: number): string { return '0x' + q.toString(16); }
