// The state the tracker rebuilds from the wire: TCP connections and their CLC handshake,
// link groups, links (QP pairs) and SMC-R connections (tokens, RMBs, cursors), plus the
// anomalies ("expert info") found on the way. Plain data: renderers print it, tests read it.

import type { Severity } from '../wire/common.js';
import type { ClcAcceptConfirm, ClcDecline, ClcProposal } from '../wire/clc.js';
import type { RingStream } from './stream.js';

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
  proposal?: ClcProposal;
  accept?: ClcAcceptConfirm;
  confirm?: ClcAcceptConfirm;
  decline?: { msg: ClcDecline; by: 'client' | 'server'; frame: number };
  mode: TcpMode;
  /** One sentence: why this connection is not SMC-R (fallback / plain TCP). */
  why?: string;
  fallbackCode?: number;
  /** Handshake steps in order with their times (SYN, Proposal, Accept, Confirm, CONFIRM LINK, first data). */
  steps: Step[];
  tcpBytes: [number, number];
  smc?: SmcConn;
  closed: boolean;
}

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
  doneWriting: boolean;
  closed: boolean;
  aborted: boolean;
  stream?: RingStream;
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
  state: 'confirming' | 'active' | 'deleted' | 'unknown';
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
  psnConn: [{ psn: Int32Array; conn: Int32Array }, { psn: Int32Array; conn: Int32Array }];
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
  /** True when its creation (first-contact CLC) was captured: then unknown rkeys/tokens are anomalies. */
  complete: boolean;
  links: Link[];
  conns: SmcConn[];
  /** rkeys announced per owner GID ("gid|rkey" → RMB base VA), from CLC, ADD LINK, CONFIRM RKEY. */
  rkeys: Map<string, bigint>;
  state: 'active' | 'terminated';
  firstFrame: number;
}

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
