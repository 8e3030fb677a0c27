// The verbs interface: what every RDMA provider of smcscope implements (the userspace RoCEv2
// engine `uroce` here, the native libibverbs addon later) and everything above endpoint/verbs/
// is written against. It follows libibverbs closely — same objects (device, port, GID, PD, MR,
// CQ, RC QP), same numeric codes (work-completion status/opcode, WR opcodes, send flags,
// access flags, QP states, attribute masks, MTU enum), same state machine and the same errors
// (EINVAL/ENOMEM from posting, libibverbs' status strings) — with JavaScript shapes: objects
// instead of structs, bigint for 64-bit addresses and keys, completions delivered
// asynchronously (events, promises, async iteration; never a busy loop).
//
// Conventions:
//   * 24-bit PSNs/QPNs and 32-bit keys are plain numbers; virtual addresses are bigint, and
//     where a work request carries one (`Sge.addr`, `rdma.remoteAddr`) also a number when it is
//     exact (a non-negative safe integer, below 2^53): `VerbsAddr`. An RDMA WRITE's addresses
//     are computed per message (base + offset), and bigint arithmetic allocates per operation
//     (docs/uroce.md round 18); providers take both forms.
//   * `immData` is the 32-bit immediate as it travels on the wire (big-endian order), i.e. what
//     libibverbs calls `be32toh(wc.imm_data)`.
//   * GIDs are IPv6 text ('::ffff:10.55.0.1' for an IPv4-mapped RoCEv2 GID).

import { ipv4Str, ipv6Str, mtuFromCode, parseIpv4, parseIpv6 } from '../../dissectors/wire/common.js';

// ---------------------------------------------------------------------------------------
// Numeric vocabulary (values as in <infiniband/verbs.h>)
// ---------------------------------------------------------------------------------------

/** enum ibv_wc_status */
export const WcStatus = {
  SUCCESS: 0, LOC_LEN_ERR: 1, LOC_QP_OP_ERR: 2, LOC_EEC_OP_ERR: 3, LOC_PROT_ERR: 4, WR_FLUSH_ERR: 5,
  MW_BIND_ERR: 6, BAD_RESP_ERR: 7, LOC_ACCESS_ERR: 8, REM_INV_REQ_ERR: 9, REM_ACCESS_ERR: 10, REM_OP_ERR: 11,
  RETRY_EXC_ERR: 12, RNR_RETRY_EXC_ERR: 13, LOC_RDD_VIOL_ERR: 14, REM_INV_RD_REQ_ERR: 15, REM_ABORT_ERR: 16,
  INV_EECN_ERR: 17, INV_EEC_STATE_ERR: 18, FATAL_ERR: 19, RESP_TIMEOUT_ERR: 20, GENERAL_ERR: 21,
} as const;
export type WcStatus = (typeof WcStatus)[keyof typeof WcStatus];

const WC_STATUS_STR: readonly string[] = [
  'success', 'local length error', 'local QP operation error', 'local EE context operation error',
  'local protection error', 'Work Request Flushed Error', 'memory management operation error',
  'bad response error', 'local access error', 'remote invalid request error', 'remote access error',
  'remote operation error', 'transport retry counter exceeded', 'RNR retry counter exceeded',
  'local RDD violation error', 'remote invalid RD request', 'aborted error', 'invalid EE context number',
  'invalid EE context state', 'fatal error', 'response timeout error', 'general error',
];

/** ibv_wc_status_str(): the same text libibverbs prints. */
export function wcStatusStr(status: number): string {
  return WC_STATUS_STR[status] ?? 'unknown';
}

/** Symbolic name of a status ('IBV_WC_REM_ACCESS_ERR'). */
export function wcStatusName(status: number): string {
  for (const [k, v] of Object.entries(WcStatus)) if (v === status) return `IBV_WC_${k}`;
  return `IBV_WC_${status}`;
}

/** enum ibv_wc_opcode */
export const WcOpcode = {
  SEND: 0, RDMA_WRITE: 1, RDMA_READ: 2, COMP_SWAP: 3, FETCH_ADD: 4, BIND_MW: 5, LOCAL_INV: 6,
  RECV: 128, RECV_RDMA_WITH_IMM: 129,
} as const;
export type WcOpcode = (typeof WcOpcode)[keyof typeof WcOpcode];

/** enum ibv_wc_flags */
export const WcFlags = { GRH: 1, WITH_IMM: 2, IP_CSUM_OK: 4, WITH_INV: 8 } as const;

/** enum ibv_wr_opcode */
export const WrOpcode = {
  RDMA_WRITE: 0, RDMA_WRITE_WITH_IMM: 1, SEND: 2, SEND_WITH_IMM: 3, RDMA_READ: 4,
  ATOMIC_CMP_AND_SWP: 5, ATOMIC_FETCH_AND_ADD: 6, LOCAL_INV: 7, BIND_MW: 8, SEND_WITH_INV: 9,
} as const;
export type WrOpcode = (typeof WrOpcode)[keyof typeof WrOpcode];

/** enum ibv_send_flags */
export const SendFlags = { FENCE: 1, SIGNALED: 2, SOLICITED: 4, INLINE: 8, IP_CSUM: 16 } as const;

/** enum ibv_access_flags */
export const Access = {
  LOCAL_WRITE: 1, REMOTE_WRITE: 2, REMOTE_READ: 4, REMOTE_ATOMIC: 8, MW_BIND: 16, ZERO_BASED: 32, ON_DEMAND: 64,
} as const;

/** enum ibv_qp_state */
export const QpState = { RESET: 0, INIT: 1, RTR: 2, RTS: 3, SQD: 4, SQE: 5, ERR: 6 } as const;
export type QpState = (typeof QpState)[keyof typeof QpState];
const QP_STATE_NAMES = ['RESET', 'INIT', 'RTR', 'RTS', 'SQD', 'SQE', 'ERR'];
export function qpStateName(s: number): string { return QP_STATE_NAMES[s] ?? `state ${s}`; }

/** enum ibv_qp_type (only RC is implemented by the providers). */
export const QpType = { RC: 2, UC: 3, UD: 4 } as const;

/** enum ibv_qp_attr_mask */
export const QpAttrMask = {
  STATE: 1 << 0, CUR_STATE: 1 << 1, EN_SQD_ASYNC_NOTIFY: 1 << 2, ACCESS_FLAGS: 1 << 3, PKEY_INDEX: 1 << 4,
  PORT: 1 << 5, QKEY: 1 << 6, AV: 1 << 7, PATH_MTU: 1 << 8, TIMEOUT: 1 << 9, RETRY_CNT: 1 << 10,
  RNR_RETRY: 1 << 11, RQ_PSN: 1 << 12, MAX_QP_RD_ATOMIC: 1 << 13, ALT_PATH: 1 << 14, MIN_RNR_TIMER: 1 << 15,
  SQ_PSN: 1 << 16, MAX_DEST_RD_ATOMIC: 1 << 17, PATH_MIG_STATE: 1 << 18, CAP: 1 << 19, DEST_QPN: 1 << 20,
} as const;

/** enum ibv_mtu */
export const Mtu = { MTU_256: 1, MTU_512: 2, MTU_1024: 3, MTU_2048: 4, MTU_4096: 5 } as const;
export type Mtu = (typeof Mtu)[keyof typeof Mtu];
/** Bytes of an ibv_mtu value (0 if invalid). */
export function mtuBytes(m: number): number { return mtuFromCode(m); }
/** ibv_mtu for a byte count (256…4096), undefined if it is not one. */
export function mtuFromBytes(n: number): Mtu | undefined {
  switch (n) { case 256: return 1; case 512: return 2; case 1024: return 3; case 2048: return 4; case 4096: return 5; default: return undefined; }
}

/** enum ibv_port_state */
export const PortState = { NOP: 0, DOWN: 1, INIT: 2, ARMED: 3, ACTIVE: 4, ACTIVE_DEFER: 5 } as const;

/** enum ibv_event_type (asynchronous events) */
export const AsyncEventType = {
  CQ_ERR: 0, QP_FATAL: 1, QP_REQ_ERR: 2, QP_ACCESS_ERR: 3, COMM_EST: 4, SQ_DRAINED: 5, PATH_MIG: 6,
  PATH_MIG_ERR: 7, DEVICE_FATAL: 8, PORT_ACTIVE: 9, PORT_ERR: 10, LID_CHANGE: 11, PKEY_CHANGE: 12,
  SM_CHANGE: 13, SRQ_ERR: 14, SRQ_LIMIT_REACHED: 15, QP_LAST_WQE_REACHED: 16, CLIENT_REREGISTER: 17, GID_CHANGE: 18,
} as const;
export type AsyncEventType = (typeof AsyncEventType)[keyof typeof AsyncEventType];

/** Local ACK timeout code → milliseconds (4.096 µs · 2^code; 0 = infinite). */
export function ackTimeoutMs(code: number): number {
  return code <= 0 ? Infinity : (4.096 * 2 ** Math.min(31, code)) / 1000;
}

// ---------------------------------------------------------------------------------------
// GIDs
// ---------------------------------------------------------------------------------------

export type GidType = 'IB/RoCE v1' | 'RoCE v2';

export interface GidEntry {
  index: number;
  /** IPv6 text. */
  gid: string;
  type: GidType;
  /** Network device the GID belongs to (if any). */
  ndev?: string;
}

/** '::ffff:a.b.c.d' for an IPv4 address. */
export function gidFromIpv4(ip: string): string { return '::ffff:' + ipv4Str(parseIpv4(ip), 0); }

/** The IPv4 address of an IPv4-mapped GID, else undefined. */
export function gidToIpv4(gid: string | Uint8Array): string | undefined {
  const b = typeof gid === 'string' ? parseIpv6(gid) : gid;
  if (b.length !== 16) return undefined;
  for (let i = 0; i < 10; i++) if (b[i] !== 0) return undefined;
  if (b[10] !== 0xff || b[11] !== 0xff) return undefined;
  return ipv4Str(b, 12);
}

/** Canonical text of a GID given as text or 16 bytes. */
export function gidText(gid: string | Uint8Array): string {
  return ipv6Str(typeof gid === 'string' ? parseIpv6(gid) : gid, 0);
}

/** 16 raw bytes of a GID. */
export function gidBytes(gid: string | Uint8Array): Uint8Array {
  return typeof gid === 'string' ? parseIpv6(gid) : gid.slice(0, 16);
}

// ---------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------

/** A verbs call failed the way libibverbs reports it: an errno (and for posts, the bad WR). */
export class VerbsError extends Error {
  /** 'EINVAL', 'ENOMEM', 'EADDRINUSE', … */
  readonly code: string;
  /** For post_send/post_recv: index of the first work request not posted. */
  readonly badWr: number | undefined;
  constructor(code: string, message: string, badWr?: number) {
    super(message);
    this.name = 'VerbsError';
    this.code = code;
    this.badWr = badWr;
  }
}

// ---------------------------------------------------------------------------------------
// Objects
// ---------------------------------------------------------------------------------------

export type WrId = number | bigint;

export interface DeviceAttr {
  fwVer: string;
  nodeGuid: bigint;
  sysImageGuid: bigint;
  vendorId: number;
  vendorPartId: number;
  hwVer: number;
  maxQp: number;
  maxQpWr: number;
  maxSge: number;
  maxCq: number;
  maxCqe: number;
  maxMr: number;
  maxMrSize: bigint;
  maxPd: number;
  maxQpRdAtom: number;
  maxQpInitRdAtom: number;
  maxInlineData: number;
  physPortCnt: number;
}

export interface PortAttr {
  state: number;
  maxMtu: Mtu;
  activeMtu: Mtu;
  gidTblLen: number;
  lid: number;
  linkLayer: 'Ethernet' | 'InfiniBand';
  /** Network device behind the port (e.g. 'lo', 'eth0'), when known. */
  netdev?: string;
}

/**
 * A virtual address in a work request: a bigint, or a number where that is exact (a
 * non-negative safe integer: 0 … 2^53 - 1). A number that is not one is an invalid address
 * (uroce: EINVAL for a remote address, LOC_PROT_ERR for an SGE; ibverbs: TypeError at post).
 * Addresses the verbs objects report (`Mr.addr`, `sge()`) stay bigints.
 */
export type VerbsAddr = bigint | number;

/** `a` as a number when that is exact (0 … 2^53 - 1), else -1 (also for a number that is not
 *  a valid address). Number() of a bigint allocates nothing. */
export function exactAddr(a: VerbsAddr): number {
  const n = typeof a === 'number' ? (Number.isSafeInteger(a) ? a : -1) : Number(a);
  return n >= 0 && n <= Number.MAX_SAFE_INTEGER ? n : -1;
}

/** `base + off` for a work request: a number when exact (`baseNum` is exactAddr(base)), else
 *  a bigint — the form a number cannot hold. */
export function addrPlus(base: bigint, baseNum: number, off: number): VerbsAddr {
  if (baseNum >= 0) {
    const s = baseNum + off;
    if (s <= Number.MAX_SAFE_INTEGER) return s;
  }
  return base + BigInt(off);
}

/** A valid address as a bigint (slow paths and the ibverbs boundary); undefined for a number
 *  that is not a valid address. */
export function addrBig(a: VerbsAddr): bigint | undefined {
  return typeof a === 'bigint' ? a : exactAddr(a) >= 0 ? BigInt(a) : undefined;
}

export interface Sge {
  /** Virtual address inside a registered MR (mr.addr + offset). */
  addr: VerbsAddr;
  length: number;
  lkey: number;
}

export interface SendWr {
  wrId: WrId;
  opcode: WrOpcode;
  sgList?: readonly Sge[];
  /** Bit set of SendFlags. */
  sendFlags?: number;
  /** SEND_WITH_IMM / RDMA_WRITE_WITH_IMM: 32-bit immediate (wire order). */
  immData?: number;
  /** RDMA WRITE: remote virtual address and rkey. */
  rdma?: { remoteAddr: VerbsAddr; rkey: number };
  /** INLINE only, JavaScript extension: the payload itself instead of sgList (copied at post). */
  inlineData?: Uint8Array;
}

export interface RecvWr {
  wrId: WrId;
  sgList: readonly Sge[];
}

export interface WorkCompletion {
  wrId: WrId;
  status: WcStatus;
  opcode: WcOpcode;
  /** Provider-specific detail for errors (0 when none). */
  vendorErr: number;
  /** Receive completions: bytes received (RDMA WRITE with immediate: the write length). */
  byteLen: number;
  /** With WcFlags.WITH_IMM. */
  immData?: number;
  qpNum: number;
  /** Receive completions: the sender's QPN (RC: the connected QP). */
  srcQp: number;
  /** Bit set of WcFlags. */
  wcFlags: number;
}

export interface QpCap {
  maxSendWr: number;
  maxRecvWr: number;
  maxSendSge: number;
  maxRecvSge: number;
  maxInlineData: number;
}

export interface GlobalRoute {
  dgid: string | Uint8Array;
  sgidIndex: number;
  hopLimit: number;
  /** IPv4 TOS / IPv6 traffic class (DSCP << 2 | ECN). */
  trafficClass: number;
  flowLabel: number;
}

export interface AhAttr {
  isGlobal: boolean;
  grh?: GlobalRoute;
  dlid?: number;
  sl?: number;
  portNum?: number;
}

export interface QpInitAttr {
  sendCq: Cq;
  recvCq: Cq;
  cap: Partial<QpCap> & { maxSendWr: number; maxRecvWr: number };
  qpType?: number;
  /** Every send WR completes with a WC (ibv's sq_sig_all). */
  sqSigAll?: boolean;
}

/** ibv_qp_attr: the attributes one modify() can set. The mask is derived from the keys present
 *  (undefined values do not count), or given explicitly to modify(). */
export interface QpAttr {
  qpState?: QpState;
  curQpState?: QpState;
  pathMtu?: Mtu;
  qkey?: number;
  rqPsn?: number;
  sqPsn?: number;
  destQpNum?: number;
  qpAccessFlags?: number;
  ahAttr?: AhAttr;
  pkeyIndex?: number;
  portNum?: number;
  minRnrTimer?: number;
  /** Local ACK timeout code (4.096 µs · 2^timeout; 0 = infinite). */
  timeout?: number;
  retryCnt?: number;
  /** 7 = infinite. */
  rnrRetry?: number;
  maxRdAtomic?: number;
  maxDestRdAtomic?: number;
  pathMigState?: number;
  cap?: Partial<QpCap>;
}

export interface AsyncEvent {
  type: AsyncEventType;
  qp?: Qp;
  cq?: Cq;
  portNum?: number;
  /** Why (provider text). */
  reason?: string;
}

export interface Device {
  readonly name: string;
  /** Provider name ('uroce', 'ibverbs'). */
  readonly provider: string;
  queryDevice(): DeviceAttr;
  queryPort(port?: number): PortAttr;
  queryGid(port: number, index: number): string;
  queryGidType(port: number, index: number): GidType;
  /** All valid GID entries of a port. */
  gidTable(port?: number): GidEntry[];
  allocPd(): Pd;
  createCq(cqe: number): Cq;
  /** Asynchronous events (QP fatal, access error, CQ error …). */
  on(event: 'async', listener: (ev: AsyncEvent) => void): this;
  off(event: 'async', listener: (ev: AsyncEvent) => void): this;
  close(): Promise<void>;
}

export interface Pd {
  readonly device: Device;
  regMr(buffer: Uint8Array, access: number, opts?: { iova?: bigint }): Mr;
  createQp(init: QpInitAttr): Qp;
  dealloc(): void;
}

export interface Mr {
  readonly pd: Pd;
  readonly lkey: number;
  readonly rkey: number;
  /** Virtual address of byte 0 (iova). */
  readonly addr: bigint;
  readonly length: number;
  readonly access: number;
  /** The registered memory. */
  readonly buffer: Uint8Array;
  /** SGE for buffer[offset, offset + length) (its address a bigint, as `addr`). */
  sge(offset?: number, length?: number): Sge & { addr: bigint };
  dereg(): void;
}

export interface Cq {
  readonly cqe: number;
  /** Up to `max` completions (removed from the CQ), oldest first; [] when empty. */
  poll(max?: number): WorkCompletion[];
  /** The oldest completion (removed), or undefined when empty: poll(1) without the array. */
  pollOne(): WorkCompletion | undefined;
  /**
   * ibv_poll_cq with a caller-provided entry: fills `wc` with the oldest completion (removed)
   * and returns true, or returns false when empty. No object per completion: the caller reuses
   * `wc` (every field is overwritten, immData with undefined when there is none).
   */
  pollInto(wc: WorkCompletion): boolean;
  /** Arm the CQ: the next completion (solicited or error only, if asked) emits 'completion' once. */
  reqNotify(solicitedOnly?: boolean): void;
  on(event: 'completion', listener: () => void): this;
  off(event: 'completion', listener: () => void): this;
  /**
   * A consumer inside the endpoint (the WR layer): an armed CQ's notification calls it directly
   * instead of emitting 'completion' (still emitted once anyone listens for it). Optional: a CQ
   * without it only emits.
   */
  onNotify?: (() => void) | undefined;
  /** Resolves when at least one completion is waiting (immediately if one is). */
  wait(signal?: AbortSignal): Promise<void>;
  /** Next completion (waits for it). */
  next(signal?: AbortSignal): Promise<WorkCompletion>;
  /** Completions as they come (ends when the CQ is destroyed). */
  [Symbol.asyncIterator](): AsyncIterator<WorkCompletion>;
  /** Completions waiting to be polled. */
  readonly pending: number;
  destroy(): void;
}

export interface QpStats {
  txPackets: number;
  txBytes: number;
  rxPackets: number;
  rxBytes: number;
  /** Request packets sent again (go-back-N after a timeout, a NAK or an RNR NAK). */
  retransmits: number;
  timeouts: number;
  /** NAKs (PSN sequence error, invalid request, remote access, remote operational error) sent / received. */
  naksSent: number;
  naksReceived: number;
  seqNaksSent: number;
  seqNaksReceived: number;
  rnrNaksSent: number;
  rnrNaksReceived: number;
  acksSent: number;
  acksReceived: number;
  /** Duplicate requests (re-ACKed, not re-executed). */
  duplicates: number;
  /** Requests with a PSN ahead of the expected one (dropped). */
  outOfSequence: number;
  /** Packets for this QP dropped for another reason (state, bad opcode, ghost ACK …). */
  drops: number;
  messagesSent: number;
  messagesReceived: number;
}

export interface Qp {
  readonly qpNum: number;
  readonly qpType: number;
  readonly pd: Pd;
  readonly sendCq: Cq;
  readonly recvCq: Cq;
  readonly state: QpState;
  /** ibv_modify_qp. Throws VerbsError EINVAL for an illegal transition or attribute set. */
  modify(attr: QpAttr, mask?: number): void;
  /** ibv_query_qp: current attributes. */
  query(): Required<Pick<QpAttr, 'qpState' | 'pathMtu' | 'rqPsn' | 'sqPsn' | 'destQpNum' | 'qpAccessFlags' | 'minRnrTimer' | 'timeout' | 'retryCnt' | 'rnrRetry'>> & { ahAttr?: AhAttr; cap: QpCap };
  /** ibv_post_send: WRs are posted in order; throws VerbsError (with badWr) on the first bad one. */
  postSend(wr: SendWr | readonly SendWr[]): void;
  /** ibv_post_recv */
  postRecv(wr: RecvWr | readonly RecvWr[]): void;
  readonly stats: Readonly<QpStats>;
  destroy(): void;
}

/** Mask bits for the keys present (not undefined) in `attr`. */
export function attrMaskOf(attr: QpAttr): number {
  let m = 0;
  const has = (k: keyof QpAttr): boolean => attr[k] !== undefined;
  if (has('qpState')) m |= QpAttrMask.STATE;
  if (has('curQpState')) m |= QpAttrMask.CUR_STATE;
  if (has('qpAccessFlags')) m |= QpAttrMask.ACCESS_FLAGS;
  if (has('pkeyIndex')) m |= QpAttrMask.PKEY_INDEX;
  if (has('portNum')) m |= QpAttrMask.PORT;
  if (has('qkey')) m |= QpAttrMask.QKEY;
  if (has('ahAttr')) m |= QpAttrMask.AV;
  if (has('pathMtu')) m |= QpAttrMask.PATH_MTU;
  if (has('timeout')) m |= QpAttrMask.TIMEOUT;
  if (has('retryCnt')) m |= QpAttrMask.RETRY_CNT;
  if (has('rnrRetry')) m |= QpAttrMask.RNR_RETRY;
  if (has('rqPsn')) m |= QpAttrMask.RQ_PSN;
  if (has('maxRdAtomic')) m |= QpAttrMask.MAX_QP_RD_ATOMIC;
  if (has('minRnrTimer')) m |= QpAttrMask.MIN_RNR_TIMER;
  if (has('sqPsn')) m |= QpAttrMask.SQ_PSN;
  if (has('maxDestRdAtomic')) m |= QpAttrMask.MAX_DEST_RD_ATOMIC;
  if (has('pathMigState')) m |= QpAttrMask.PATH_MIG_STATE;
  if (has('cap')) m |= QpAttrMask.CAP;
  if (has('destQpNum')) m |= QpAttrMask.DEST_QPN;
  return m;
}

const MASK_NAMES: readonly [number, string][] = Object.entries(QpAttrMask).map(([k, v]) => [v, `IBV_QP_${k}`]);
export function attrMaskNames(mask: number): string {
  return MASK_NAMES.filter(([v]) => (mask & v) !== 0).map(([, n]) => n).join('|') || '0';
}
