// The state the tracker rebuilds from the wire: TCP connections and their CLC handshake,
// link groups, links (QP pairs) and SMC-R connections (tokens, RMBs, cursors), plus the
// anomalies ("expert info") found on the way. Plain data: renderers print it, tests read it.

import type { Severity } from '../wire/common.js';
import type { ClcAcceptConfirm } from '../wire/clc.js';
import type { RingStream } from './stream.js';
import type { PsnRuns } from './psnruns.js';

export interface Anomaly {
  frame: number;
  tsNs: bigint;
  severity: Severity;
  /** Stable code, e.g. 'cdc.seq-gap', 'rdma.out-of-bounds', 'roce.nak'. */
  code: string;
  message: string;
  /** Link name (e.g. "LG1/L1") and SMC connection index, when attributed. */
  link?: string;
  conn?: number;
}

export type TcpMode = 'pending' | 'smc-r' | 'smc-d' | 'fallback' | 'tcp';

export interface Endpoint { ip: string; port: number }

/** One side of an SMC-R connection, as its Accept (server) or Confirm (client) announced it. */
export interface SmcSide {
  peerId: string;
  gid: string;
  mac: string;
  qpn: number;
  rkey: number;
  token: number;
  rmbVa: bigint;
  rmbeSize: number;
  mtu: number;
  psn: number;
}

export interface Step { name: string; frame: number; tsNs: bigint }

export interface TcpConn {
  /** 1-based, in order of first sight. */
  index: number;
  client: Endpoint;
  server: Endpoint;
  /** Whether the SYN / SYN-ACK carried option 254 (undefined: not captured). */
  synSmc?: boolean;
  synAckSmc?: boolean;
  /** A CLC Proposal was seen, and the UEIDs it offered (v2). */
  proposed?: { ueids: string[] };
  /** The Accept until the Confirm completes the handshake (decoded CLC messages are not kept
   *  longer: they may hold views of the capture's read buffers). */
  accept?: ClcAcceptConfirm;
  decline?: { diagnosis: number; outOfSync: boolean; by: 'client' | 'server'; frame: number };
  mode: TcpMode;
  /** One sentence: why this connection is not SMC-R (fallback / plain TCP). */
  why?: string;
  fallbackCode?: number;
  /** Handshake steps in order with their times (SYN, Proposal, Accept, Confirm, CONFIRM LINK, first data). */
  steps: Step[];
  tcpBytes: [number, number];
  smc?: SmcConn;
  closed: boolean;
  /** The first TCP RST on this connection and who sent it. */
  rst?: { frame: number; tsNs: bigint; by: 'client' | 'server' };
  /** TCP payload after the CLC exchange, kept for `--follow` of the followed connection. */
  tcpStream?: [TcpStream, TcpStream];
}

/** In-order TCP payload of one direction (fallback connections followed with --follow). */
export interface TcpStream {
  nextSeq?: number;
  chunks: { frame: number; offset: number; bytes: Uint8Array }[];
  missing: { frame: number; from: number; to: number }[];
  bytes: number;
}

/** Where an urgent byte sits in a direction's stream, and the CDC that announced it. */
export interface UrgentMark { offset: number; frame: number; tsNs: bigint }

/** A writer blocked (write_blocked or a full ring) waiting for the reader's consumer cursor. */
export interface WindowStall { frame: number; tsNs: bigint; endFrame?: number; endTsNs?: bigint; resumed: boolean }

/** Per direction (writer → reader) state of an SMC-R connection. */
export interface SmcDir {
  /** The reader's RMBE ring size (0 = unknown, capture began mid-stream). */
  ringSize: number;
  /** Writer's CDC sequence number last seen. */
  seq?: number;
  /** Writer's producer cursor (last CDC) and its linear position in the stream. */
  prod?: { wrap: number; count: number };
  prodLinear: number;
  /** Reader's consumer cursor for this direction (from the reader's CDCs), linear. */
  consLinear: number;
  cons?: { wrap: number; count: number };
  /** A reader consumer cursor seen ahead of this writer's producer cursor, judged at the
   *  writer's next CDC (a CDC missing from the capture explains it; otherwise a violation). */
  consAhead?: { frame: number; tsNs: bigint; text: string; link: string };
  cdcs: number;
  writes: number;
  writeBytes: number;
  writerBlocked: number;
  urgent: number;
  /** Stream offsets of urgent bytes (the byte before the producer cursor of a CDC with urg_data_present). */
  urgentMarks: UrgentMark[];
  /** The writer is blocked since this CDC (no consumer update since). */
  blockedSince?: { frame: number; tsNs: bigint };
  /** Blocked episodes longer than the window-stall threshold. */
  stalls: WindowStall[];
  /** Last CDC of the writer / last consumer-cursor move of the reader. */
  lastCdc?: { frame: number; tsNs: bigint };
  lastConsMove?: { frame: number; tsNs: bigint };
  /** The link the writer's last CDC travelled on (each side fails over on its own). */
  link?: string;
  /** Stream position when the writer last moved its producer cursor. */
  lastProdMove?: { frame: number; tsNs: bigint };
  doneWriting: boolean;
  closed: boolean;
  aborted: boolean;
  stream?: RingStream;
  /** Sequence number of the writer's first CDC seen (1: the capture holds all of them) and how
   *  often the sequence jumped; the write-blocked flag of its last CDC (compared with an
   *  endpoint's state by cli/statejoin.ts). */
  firstSeq?: number;
  seqGaps: number;
  lastWriteBlocked?: boolean;
}

export interface SmcConn {
  /** Same index as its TCP connection; mid-stream connections get their own (negative = none). */
  index: number;
  tcp?: TcpConn;
  lg: LinkGroup;
  /** [client, server] sides; partially known for connections first seen mid-stream. */
  sides: [Partial<SmcSide> & { gid: string }, Partial<SmcSide> & { gid: string }];
  /** dirs[0] = client → server, dirs[1] = server → client. */
  dirs: [SmcDir, SmcDir];
  firstData?: Step;
  /** The link its CDCs last travelled on (a connection belongs to the group; failover moves it). */
  link?: Link;
  /** Failover validation CDCs: the connection moved to `to` (from `from`), per side. */
  failovers: Failover[];
  /** Abort (peer_conn_abort) by a side, with how much the aborting side left unread. */
  abort?: { by: 'client' | 'server'; frame: number; tsNs: bigint; unread: number };
}

export interface Failover {
  from?: string;
  to: string;
  by: 'client' | 'server';
  frame: number;
  tsNs: bigint;
  /** Per direction at the failover: bytes produced but not yet consumed by the reader. */
  inFlight: [number, number];
  /** Per direction: bytes released before the failover (the stream position). */
  at: [number, number];
}

export interface QpEnd { gid: string; qpn?: number; mac?: string; psn?: number }

export interface Link {
  lg: LinkGroup;
  /** Link id from CONFIRM LINK / ADD LINK (0 until known). */
  id: number;
  name: string;
  uid?: number;
  /** ends[0] = client side (first contact: the CLC client), ends[1] = server side. */
  ends: [QpEnd, QpEnd];
  mtu: number;
  /** confirming → active → deleted (orderly) or lost (failed); rejected (ADD LINK refused);
   *  failed: never came up; unknown: learned mid-stream. */
  state: 'confirming' | 'active' | 'deleted' | 'lost' | 'failed' | 'unknown';
  /** Unique per capture (link ids are reused after a link is deleted). */
  serial: number;
  confirmedFrame?: number;
  deleted?: { frame: number; tsNs: bigint; by: 'client' | 'server'; reason: number; all?: boolean };
  /** Why the link counts as lost (device gone, peer silent…), with evidence frames. */
  lost?: { reasons: string[]; frame: number; tsNs: bigint };
  /** Last frame of any kind (requests and ACKs) sent by each end. */
  lastFrom: [{ frame: number; tsNs: bigint } | undefined, { frame: number; tsNs: bigint } | undefined];
  /** Retransmissions per direction: first/last frame, how often the most repeated PSN was sent again. */
  retx: [RetxStats | undefined, RetxStats | undefined];
  /** TEST LINK requests that got no response. */
  testLinkUnanswered: { count: number; first: number; last: number; firstTs: bigint; lastTs: bigint } | undefined;
  /** SMC messages (LLC or CDC) seen on this link: without any it is not SMC-R. */
  smcMessages: number;
  /** Next expected request PSN per direction (0: client→server, 1: server→client). */
  nextPsn: [number | undefined, number | undefined];
  packets: [number, number];
  bytes: [number, number];
  retransmits: number;
  psnGaps: number;
  naks: number;
  rnrNaks: number;
  firstFrame: number;
  /** A multi-packet RDMA WRITE in progress per direction (its MIDDLE/LAST carry no RETH). */
  write: [WriteCont | undefined, WriteCont | undefined];
  /** Recent request PSN → SMC connection index, per direction (for NAK/retransmission attribution). */
  psnConn: [PsnRuns | undefined, PsnRuns | undefined];
  /** What each end sent on this link (index = sender end = direction), retransmissions excluded. */
  sent: [LinkSent, LinkSent];
  /** Mid-stream groups: an RDMA WRITE per direction whose rkey no connection claimed yet (the
   *  writer's next CDC on this link names its connection). */
  unclaimed: [{ rkey: number; va: bigint } | undefined, { rkey: number; va: bigint } | undefined];
}

/** One end's requests on a link and what its LLC said about its QP. */
export interface LinkSent {
  /** The first request packet seen, and whether it was a CONFIRM LINK (then: the link's first). */
  first?: { psn: number; frame: number; tsNs: bigint; confirmLink: boolean };
  /** SEND and RDMA WRITE messages (not packets), RDMA WRITE payload bytes, PSN gaps. */
  sends: number;
  writes: number;
  writeBytes: number;
  gaps: number;
  /** RDMA WRITE address ranges by rkey (from each WRITE's RETH). */
  writeRanges?: Map<number, WriteRange>;
  /** The last CONFIRM LINK this end sent, and the ADD LINK (request or response) that announced its QP. */
  confirm?: LlcQp;
  add?: LlcQp;
}

export interface WriteRange { minVa: bigint; maxEnd: bigint; frame: number; tsNs: bigint; count: number }

/** A QP as an LLC message announced it. */
export interface LlcQp { frame: number; tsNs: bigint; response: boolean; linkId: number; qpn: number; gid: string; mac: string; psn?: number; uid?: number }

export interface RetxStats {
  count: number;
  first: number;
  last: number;
  firstTs: bigint;
  lastTs: bigint;
  /** PSN → how often it was retransmitted (bounded to recent PSNs). */
  perPsn: Map<number, number>;
  maxRepeat: number;
  /** Any ACK from the receiving end after the first retransmission. */
  answered: boolean;
}

export interface WriteCont { conn: SmcConn; dir: 0 | 1; offset: number }

export interface LinkGroup {
  id: number;
  /** From CLC first contact; undefined for a link group first seen mid-stream. */
  clientPeer?: string;
  serverPeer?: string;
  clientHost?: string;
  serverHost?: string;
  version?: number;
  release?: number;
  ueid?: string;
  maxLinks?: number;
  maxConns?: number;
  /** The TCP connection whose first-contact CLC created the group. */
  firstTcp?: TcpConn;
  /** True when its creation (first-contact CLC) was captured: then unknown rkeys/tokens are anomalies. */
  complete: boolean;
  links: Link[];
  conns: SmcConn[];
  /** active; terminated (DELETE LINK ALL / last link deleted); failed (never came up or lost). */
  state: 'active' | 'terminated' | 'failed';
  firstFrame: number;
  /** Link group type over time, as Linux names it, seen from the server side (which adds links). */
  types: { type: LgType; frame: number; tsNs: bigint }[];
  /** What happened to the group's links, in capture order. */
  events: LgEvent[];
}

export type LgType = 'NONE' | 'SINGLE' | 'SYMMETRIC' | 'ASYMMETRIC_LOCAL' | 'ASYMMETRIC_PEER';

export interface LgEvent {
  frame: number;
  tsNs: bigint;
  what: 'link-added' | 'link-confirmed' | 'link-rejected' | 'link-deleted' | 'link-lost' | 'failover' | 'request-add-link' | 'terminated';
  link?: string;
  by?: 'client' | 'server';
  text: string;
}

/** One RMB: its connection and the direction written into it; `n`: how many of the tracker's
 *  entries (rkeys on links) name it. */
export interface RmbRef { conn?: SmcConn; dir: 0 | 1; n: number }
/** `learned`: bound from traffic in a group whose handshake was not captured (WRITEs followed by
 *  a CDC on the same link and direction); `va` is then a WRITE's address, not the RMB's start. */
export interface RmbAlias { ref: RmbRef; va: bigint; learned?: boolean }

/** What the tracker says about one frame (rendered next to the frame's line). */
export interface FrameNote {
  link?: string;
  conn?: number;
  /** 'c>s' or 's>c' for SMC connection frames. */
  dir?: 'c>s' | 's>c';
  tcpMode?: TcpMode;
  /** This RoCE request repeats a PSN already seen. */
  retransmission?: boolean;
  anomalies: Anomaly[];
}
