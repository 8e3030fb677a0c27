// InfiniBand transport layer as carried by RoCE v1 (EtherType 0x8915, after a 40-byte GRH)
// and RoCE v2 (UDP 4791): BTH, the extension headers, payload/pad, and the ICRC
// (formats.md §11; IBA vol.1 ch.9 + Annex A16/A17, cross-checked with Wireshark/libtins
// opcode tables and Linux rxe).
//
// decodeIbPacket() takes everything from the BTH to the end of the packet INCLUDING the
// 4-byte ICRC. The ICRC covers the outer headers too, so it is computed separately:
// icrcRoceV2()/icrcRoceV1() on a contiguous frame, icrcFromParts() on separately built
// pieces (the endpoint), checkIcrc() for {ok, expected, actual}.

import type { Decoded, Issue, TextSink } from './common.js';
import { StringSink, Tree, issue, u8, u16, u32le, put32le, ipv6Str, parseIpv6 } from './common.js';
import { crc32Update, crc32UpdateFill, crc32UpdateMasked, crc32UpdateMaskedThen, registerTrailerMask, trailerCheck } from './crc32.js';
import { BTH_FIELDS, AETH_FIELDS, GRH_FIELDS, GRH_LEN, BthView, RethView, AethView, DethView, GrhView } from './views/ib.js';
import { RETH_FIELDS, DETH_FIELDS, IMMDT_FIELDS, IETH_FIELDS, RDETH_FIELDS, XRCETH_FIELDS, FETH_FIELDS, ATOMIC_ETH_FIELDS, ATOMIC_ACK_ETH_FIELDS } from './views/ib.js';
import { ImmDtView, IethView, RdethView, XrcethView, FethView, AtomicEthView, AtomicAckEthView } from './views/ib.js';
import { addField, fieldBits, fieldMaskBytes, tableSize } from './views/field.js';
import { ETHERTYPE, IPV4_FIELDS, IPV4_MIN_LEN, IPV6_FIELDS, IPV6_LEN, UDP_FIELDS, UDP_LEN, ipVersionAt } from './views/net.js';

// ---------------------------------------------------------------------------------------
// Opcode table
// ---------------------------------------------------------------------------------------

export type IbTransport = 'RC' | 'UC' | 'RD' | 'UD' | 'CNP' | 'XRC' | 'reserved';

/** Extension headers, in the order they appear on the wire after the BTH. */
export type IbExtHeader =
  | 'RDETH' | 'DETH' | 'XRCETH' | 'FETH' | 'RETH' | 'AtomicETH' | 'AETH' | 'AtomicAckETH' | 'ImmDt' | 'IETH';

/** Size in bytes of each extension header (from its field table, views/ib.ts). */
export const IB_EXT_SIZE: Readonly<Record<IbExtHeader, number>> = {
  RDETH: tableSize(RDETH_FIELDS), DETH: tableSize(DETH_FIELDS), XRCETH: tableSize(XRCETH_FIELDS), FETH: tableSize(FETH_FIELDS),
  RETH: tableSize(RETH_FIELDS), AtomicETH: tableSize(ATOMIC_ETH_FIELDS), AETH: tableSize(AETH_FIELDS),
  AtomicAckETH: tableSize(ATOMIC_ACK_ETH_FIELDS), ImmDt: tableSize(IMMDT_FIELDS), IETH: tableSize(IETH_FIELDS),
};

export const BTH_LEN = tableSize(BTH_FIELDS);

export const ICRC_LEN = 4;
/** UDP destination port of RoCE v2. */
export const ROCE_V2_PORT = 4791;
/** EtherType of RoCE v1. */
export const ROCE_V1_ETHERTYPE = ETHERTYPE.ROCE_V1;

export interface IbOpcodeInfo {
  opcode: number;
  /** Operation name, e.g. 'SEND ONLY', 'RDMA WRITE FIRST', 'ACKNOWLEDGE'; 'reserved 0xNN' if unassigned. */
  name: string;
  transport: IbTransport;
  /** false for unassigned opcodes (their headers are unknown: everything after the BTH is payload). */
  known: boolean;
  /** Extension headers that follow the BTH, in wire order. */
  headers: readonly IbExtHeader[];
  /** Total size of those extension headers. */
  headerLength: number;
  /** Whether the opcode carries a payload (possibly empty). */
  payload: boolean;
  isSend: boolean;
  isWrite: boolean;
  isReadRequest: boolean;
  isReadResponse: boolean;
  /** ACKNOWLEDGE or ATOMIC ACKNOWLEDGE. */
  isAck: boolean;
  /** COMPARE SWAP / FETCH ADD (not ATOMIC WRITE, which is a write). */
  isAtomic: boolean;
  withImmediate: boolean;
  withInvalidate: boolean;
  /** Position of the packet in its message; single-packet operations (READ REQUEST, ACK, atomics …) are "only". */
  isFirst: boolean;
  isMiddle: boolean;
  isLast: boolean;
  isOnly: boolean;
}

type Pos = 'F' | 'M' | 'L' | 'O';
type Kind = 'send' | 'write' | 'readreq' | 'readresp' | 'ack' | 'atomic' | 'resync' | 'flush' | 'atomicwrite';
/** [op, name, RC headers (without transport prefix headers), payload, kind, position, request?] */
type BaseOp = readonly [number, string, readonly IbExtHeader[], boolean, Kind, Pos, boolean];

const BASE_OPS: readonly BaseOp[] = [
  [0x00, 'SEND FIRST', [], true, 'send', 'F', true],
  [0x01, 'SEND MIDDLE', [], true, 'send', 'M', true],
  [0x02, 'SEND LAST', [], true, 'send', 'L', true],
  [0x03, 'SEND LAST WITH IMMEDIATE', ['ImmDt'], true, 'send', 'L', true],
  [0x04, 'SEND ONLY', [], true, 'send', 'O', true],
  [0x05, 'SEND ONLY WITH IMMEDIATE', ['ImmDt'], true, 'send', 'O', true],
  [0x06, 'RDMA WRITE FIRST', ['RETH'], true, 'write', 'F', true],
  [0x07, 'RDMA WRITE MIDDLE', [], true, 'write', 'M', true],
  [0x08, 'RDMA WRITE LAST', [], true, 'write', 'L', true],
  [0x09, 'RDMA WRITE LAST WITH IMMEDIATE', ['ImmDt'], true, 'write', 'L', true],
  [0x0a, 'RDMA WRITE ONLY', ['RETH'], true, 'write', 'O', true],
  [0x0b, 'RDMA WRITE ONLY WITH IMMEDIATE', ['RETH', 'ImmDt'], true, 'write', 'O', true],
  [0x0c, 'RDMA READ REQUEST', ['RETH'], false, 'readreq', 'O', true],
  [0x0d, 'RDMA READ RESPONSE FIRST', ['AETH'], true, 'readresp', 'F', false],
  [0x0e, 'RDMA READ RESPONSE MIDDLE', [], true, 'readresp', 'M', false],
  [0x0f, 'RDMA READ RESPONSE LAST', ['AETH'], true, 'readresp', 'L', false],
  [0x10, 'RDMA READ RESPONSE ONLY', ['AETH'], true, 'readresp', 'O', false],
  [0x11, 'ACKNOWLEDGE', ['AETH'], false, 'ack', 'O', false],
  [0x12, 'ATOMIC ACKNOWLEDGE', ['AETH', 'AtomicAckETH'], false, 'ack', 'O', false],
  [0x13, 'COMPARE SWAP', ['AtomicETH'], false, 'atomic', 'O', true],
  [0x14, 'FETCH ADD', ['AtomicETH'], false, 'atomic', 'O', true],
  [0x15, 'RESYNC', [], false, 'resync', 'O', true],
  [0x16, 'SEND LAST WITH INVALIDATE', ['IETH'], true, 'send', 'L', true],
  [0x17, 'SEND ONLY WITH INVALIDATE', ['IETH'], true, 'send', 'O', true],
  [0x1c, 'FLUSH', ['FETH', 'RETH'], false, 'flush', 'O', true],
  [0x1d, 'ATOMIC WRITE', ['RETH'], true, 'atomicwrite', 'O', true],
];

/** Which base operations each transport defines (IBA tables; FLUSH/ATOMIC WRITE per IBA 1.5 for RC). */
function allowed(tr: IbTransport, op: number): boolean {
  switch (tr) {
    case 'RC': return op <= 0x14 || op === 0x16 || op === 0x17 || op === 0x1c || op === 0x1d;
    case 'UC': return op <= 0x0b;
    case 'RD': return op <= 0x15;
    case 'UD': return op === 0x04 || op === 0x05;
    case 'XRC': return op <= 0x14 || op === 0x16 || op === 0x17;
    default: return false;
  }
}

const TRANSPORTS: readonly IbTransport[] = ['RC', 'UC', 'RD', 'UD', 'CNP', 'XRC', 'reserved', 'reserved'];

function sumHeaders(h: readonly IbExtHeader[]): number {
  let n = 0;
  for (const x of h) n += IB_EXT_SIZE[x];
  return n;
}

function makeInfo(opcode: number, name: string, transport: IbTransport, known: boolean, headers: readonly IbExtHeader[],
  payload: boolean, kind: Kind | undefined, pos: Pos | undefined, withImm = false, withInv = false): IbOpcodeInfo {
  return Object.freeze({
    opcode, name, transport, known, headers: Object.freeze(headers.slice()), headerLength: sumHeaders(headers), payload,
    isSend: kind === 'send', isWrite: kind === 'write' || kind === 'atomicwrite', isReadRequest: kind === 'readreq',
    isReadResponse: kind === 'readresp', isAck: kind === 'ack', isAtomic: kind === 'atomic',
    withImmediate: withImm, withInvalidate: withInv,
    isFirst: pos === 'F', isMiddle: pos === 'M', isLast: pos === 'L', isOnly: pos === 'O',
  });
}

const OPCODES: readonly IbOpcodeInfo[] = (() => {
  const out: IbOpcodeInfo[] = [];
  for (let op = 0; op < 256; op++) {
    const tr = TRANSPORTS[op >> 5]!;
    const base = op & 0x1f;
    if (op === 0x81) { // RoCEv2 CNP: BTH + 16 reserved bytes (treated as the payload)
      out.push(makeInfo(op, 'CNP', 'CNP', true, [], true, undefined, 'O'));
      continue;
    }
    const def = BASE_OPS.find((d) => d[0] === base);
    if (!def || !allowed(tr, base)) {
      out.push(makeInfo(op, `reserved 0x${op.toString(16).padStart(2, '0')}`, tr, false, [], true, undefined, undefined));
      continue;
    }
    const [, name, rcHeaders, payload, kind, pos, request] = def;
    let headers: IbExtHeader[] = rcHeaders.slice();
    if (tr === 'RD') headers = request ? ['RDETH', 'DETH', ...rcHeaders] : ['RDETH', ...rcHeaders];
    else if (tr === 'UD') headers = ['DETH', ...rcHeaders];
    else if (tr === 'XRC' && request) headers = ['XRCETH', ...rcHeaders];
    out.push(makeInfo(op, name, tr, true, headers, payload, kind, pos, rcHeaders.includes('ImmDt'), rcHeaders.includes('IETH')));
  }
  return out;
})();

/** Everything known about an opcode (any value 0–255; unassigned codes have known = false). */
export function opcodeInfo(op: number): IbOpcodeInfo {
  return OPCODES[op & 0xff]!;
}

/** RC opcodes SMC-R uses (formats.md §11.3). */
export const IB_OP = {
  SEND_FIRST: 0x00, SEND_MIDDLE: 0x01, SEND_LAST: 0x02, SEND_ONLY: 0x04,
  RDMA_WRITE_FIRST: 0x06, RDMA_WRITE_MIDDLE: 0x07, RDMA_WRITE_LAST: 0x08, RDMA_WRITE_ONLY: 0x0a,
  RDMA_WRITE_LAST_IMM: 0x09, RDMA_WRITE_ONLY_IMM: 0x0b,
  ACKNOWLEDGE: 0x11, ATOMIC_ACKNOWLEDGE: 0x12, CNP: 0x81,
} as const;

// ---------------------------------------------------------------------------------------
// Header value types
// ---------------------------------------------------------------------------------------

export interface Bth {
  opcode: number;
  /** Solicited event. */
  se: boolean;
  /** MigReq. */
  migReq: boolean;
  /** PadCnt field (0–3). */
  padCount: number;
  /** Transport header version (0). */
  tver: number;
  pkey: number;
  /** RoCEv2: byte 4 bit 7. */
  fecn: boolean;
  /** RoCEv2: byte 4 bit 6. */
  becn: boolean;
  /** Byte 4 bits 5–0 (reserved). */
  resv6: number;
  destQp: number;
  /** AckReq. */
  ackReq: boolean;
  /** Byte 8 bits 6–0 (reserved). */
  resv7: number;
  psn: number;
}

export interface Reth { va: bigint; rkey: number; dmaLen: number }

export type AethKind = 'ACK' | 'RNR NAK' | 'NAK' | 'reserved';

/**
 * AETH. `syndrome` (the raw byte) is authoritative for encoding; `kind` and `code`
 * (bits 4–0: credit count code / RNR timer code / NAK code) are derived from it by decode.
 * Build one with makeAeth().
 */
export interface Aeth { syndrome: number; msn: number; kind: AethKind; code: number }

export interface Deth { qkey: number; resv8: number; srcQp: number }
export interface Rdeth { resv8: number; eeContext: number }
export interface Xrceth { resv8: number; xrcSrq: number }
/** FETH (IBA 1.5 FLUSH): placement type (bits 3–0), selectivity level (bits 5–4), rest reserved. */
export interface Feth { resv: number; selectivity: number; placement: number }
export interface AtomicEth { va: bigint; rkey: number; swapAdd: bigint; compare: bigint }
export interface AtomicAckEth { origData: bigint }

export interface IbPacket {
  bth: Bth;
  rdeth?: Rdeth;
  deth?: Deth;
  xrceth?: Xrceth;
  feth?: Feth;
  reth?: Reth;
  atomicEth?: AtomicEth;
  aeth?: Aeth;
  atomicAckEth?: AtomicAckEth;
  /** Immediate data (ImmDt), 32 bits as on the wire (big-endian). */
  immDt?: number;
  /** IETH: the R_Key to invalidate. */
  ieth?: number;
  /** Payload without pad and ICRC (a view into the decoded buffer). For CNP: the 16 reserved bytes. */
  payload: Uint8Array;
  /** Offset of the payload from the BTH start (set by decode; encode ignores it). */
  payloadOffset?: number;
  /** Pad bytes actually present/stripped (normally = bth.padCount; encode uses bth.padCount). */
  padCount: number;
  /** ICRC as a CRC-32 value (the wire carries it least-significant byte first); 0 if missing. */
  icrc: number;
}

export interface Grh {
  ipVer: number;
  tclass: number;
  flowLabel: number;
  /** Bytes after the GRH, including the ICRC. */
  payLen: number;
  /** 0x1B = IBA transport. */
  nextHdr: number;
  hopLimit: number;
  sgid: string;
  dgid: string;
}

// ---------------------------------------------------------------------------------------
// AETH helpers
// ---------------------------------------------------------------------------------------

const AETH_KINDS: readonly AethKind[] = ['ACK', 'RNR NAK', 'reserved', 'NAK'];

/** NAK codes (AETH syndrome 011xxxxx). */
const NAK_NAMES: readonly string[] = [
  'PSN sequence error', 'invalid request', 'remote access error', 'remote operational error', 'invalid RD request',
];
const NAK_TAGS: readonly string[] = [
  'PSN-sequence-error', 'invalid-request', 'remote-access-error', 'remote-operational-error', 'invalid-RD-request',
];

/** RNR NAK timer code → minimum RNR delay in milliseconds (IBA table "Encoding for RNR NAK Timer"). */
const RNR_TIMER_MS: readonly number[] = [
  655.36, 0.01, 0.02, 0.03, 0.04, 0.06, 0.08, 0.12, 0.16, 0.24, 0.32, 0.48, 0.64, 0.96, 1.28, 1.92,
  2.56, 3.84, 5.12, 7.68, 10.24, 15.36, 20.48, 30.72, 40.96, 61.44, 81.92, 122.88, 163.84, 245.76, 327.68, 491.52,
];

/** ACK credit count code → number of credits (end-to-end flow control); code 31 = no credit information. */
const AETH_CREDITS: readonly number[] = [
  0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192,
  256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768,
];

export function aethKind(syndrome: number): AethKind { return AETH_KINDS[(syndrome >> 5) & 3]!; }
export function nakName(code: number): string { return NAK_NAMES[code] ?? `NAK code ${code}`; }
export function rnrTimerMs(code: number): number { return RNR_TIMER_MS[code & 31]!; }
/** Credits for an ACK credit code, or undefined for 31 (no credit information). */
export function aethCredits(code: number): number | undefined { return AETH_CREDITS[code & 31]; }

export function makeAeth(kind: Exclude<AethKind, 'reserved'>, code: number, msn: number): Aeth {
  const k = kind === 'ACK' ? 0 : kind === 'RNR NAK' ? 1 : 3;
  return { syndrome: (k << 5) | (code & 31), msn: msn & 0xffffff, kind, code: code & 31 };
}

// ---------------------------------------------------------------------------------------
// Readers / writers (no allocation beyond the result objects)
// ---------------------------------------------------------------------------------------

// BTH/RETH/AETH/DETH offsets live in ./views/ib.ts; these read and write through one view each.
const bthV = new BthView();
const rethV = new RethView();
const aethV = new AethView();
const dethV = new DethView();

function readBth(b: Uint8Array, o: number, end = b.length): Bth {
  const v = bthV.reset(b, o, end);
  return {
    opcode: v.opcode, se: v.se, migReq: v.migReq, padCount: v.padCount, tver: v.tver,
    pkey: v.pkey, fecn: v.fecn, becn: v.becn, resv6: v.resv6,
    destQp: v.destQp, ackReq: v.ackReq, resv7: v.resv7, psn: v.psn,
  };
}

/** readBth() into an existing record (every field overwritten, in readBth's order). */
function readBthInto(x: Bth, b: Uint8Array, o: number, end: number): Bth {
  const v = bthV.reset(b, o, end);
  x.opcode = v.opcode; x.se = v.se; x.migReq = v.migReq; x.padCount = v.padCount; x.tver = v.tver;
  x.pkey = v.pkey; x.fecn = v.fecn; x.becn = v.becn; x.resv6 = v.resv6;
  x.destQp = v.destQp; x.ackReq = v.ackReq; x.resv7 = v.resv7; x.psn = v.psn;
  return x;
}

/** A BTH record for IbPacketRecord to refill frame after frame. */
function blankBth(): Bth {
  return { opcode: 0, se: false, migReq: false, padCount: 0, tver: 0, pkey: 0, fecn: false, becn: false, resv6: 0, destQp: 0, ackReq: false, resv7: 0, psn: 0 };
}

function writeBth(out: Uint8Array, o: number, v: Bth): void {
  const w = bthV.reset(out, o);
  w.opcode = v.opcode;
  w.se = v.se; w.migReq = v.migReq; w.padCount = v.padCount; w.tver = v.tver;
  w.pkey = v.pkey;
  w.fecn = v.fecn; w.becn = v.becn; w.resv6 = v.resv6;
  w.destQp = v.destQp;
  w.ackReq = v.ackReq; w.resv7 = v.resv7;
  w.psn = v.psn;
}

function readReth(b: Uint8Array, o: number): Reth { const v = rethV.reset(b, o); return { va: v.va, rkey: v.rkey, dmaLen: v.dmaLen }; }
function writeReth(out: Uint8Array, o: number, v: Reth): void { const w = rethV.reset(out, o); w.va = v.va; w.rkey = v.rkey; w.dmaLen = v.dmaLen; }

function readAeth(b: Uint8Array, o: number): Aeth {
  const v = aethV.reset(b, o);
  return { syndrome: v.syndrome, msn: v.msn, kind: AETH_KINDS[v.kindBits]!, code: v.code };
}

/** readAeth() into an existing record (every field overwritten, in readAeth's order). */
function readAethInto(x: Aeth, b: Uint8Array, o: number): Aeth {
  const v = aethV.reset(b, o);
  x.syndrome = v.syndrome; x.msn = v.msn; x.kind = AETH_KINDS[v.kindBits]!; x.code = v.code;
  return x;
}
function writeAeth(out: Uint8Array, o: number, v: Aeth): void { const w = aethV.reset(out, o); w.syndrome = v.syndrome; w.msn = v.msn; }

function readDeth(b: Uint8Array, o: number): Deth { const v = dethV.reset(b, o); return { qkey: v.qkey, resv8: v.resv8, srcQp: v.srcQp }; }
function writeDeth(out: Uint8Array, o: number, v: Deth): void { const w = dethV.reset(out, o); w.qkey = v.qkey; w.resv8 = v.resv8; w.srcQp = v.srcQp; }

const rdethV = new RdethView(), xrcethV = new XrcethView(), fethV = new FethView();
const atomicV = new AtomicEthView(), atomicAckV = new AtomicAckEthView(), immV = new ImmDtView(), iethV = new IethView();

function readRdeth(b: Uint8Array, o: number): Rdeth { const v = rdethV.reset(b, o); return { resv8: v.resv8, eeContext: v.eeContext }; }
function writeRdeth(out: Uint8Array, o: number, v: Rdeth): void { const w = rdethV.reset(out, o); w.resv8 = v.resv8; w.eeContext = v.eeContext; }

function readXrceth(b: Uint8Array, o: number): Xrceth { const v = xrcethV.reset(b, o); return { resv8: v.resv8, xrcSrq: v.xrcSrq }; }
function writeXrceth(out: Uint8Array, o: number, v: Xrceth): void { const w = xrcethV.reset(out, o); w.resv8 = v.resv8; w.xrcSrq = v.xrcSrq; }

function readFeth(b: Uint8Array, o: number): Feth {
  const v = fethV.reset(b, o);
  return { resv: v.resv, selectivity: v.selectivity, placement: v.placement };
}
function writeFeth(out: Uint8Array, o: number, v: Feth): void {
  const w = fethV.reset(out, o);
  w.resv = v.resv; w.selectivity = v.selectivity; w.placement = v.placement;
}

function readAtomicEth(b: Uint8Array, o: number): AtomicEth {
  const v = atomicV.reset(b, o);
  return { va: v.va, rkey: v.rkey, swapAdd: v.swapAdd, compare: v.compare };
}
function writeAtomicEth(out: Uint8Array, o: number, v: AtomicEth): void {
  const w = atomicV.reset(out, o);
  w.va = v.va; w.rkey = v.rkey; w.swapAdd = v.swapAdd; w.compare = v.compare;
}

function readAtomicAckEth(b: Uint8Array, o: number): AtomicAckEth { return { origData: atomicAckV.reset(b, o).origData }; }
function writeAtomicAckEth(out: Uint8Array, o: number, v: AtomicAckEth): void { atomicAckV.reset(out, o).origData = v.origData; }

function readImmDt(b: Uint8Array, o: number): number { return immV.reset(b, o).immDt; }
function writeImmDt(out: Uint8Array, o: number, v: number): void { immV.reset(out, o).immDt = v; }
function readIeth(b: Uint8Array, o: number): number { return iethV.reset(b, o).rkey; }
function writeIeth(out: Uint8Array, o: number, v: number): void { iethV.reset(out, o).rkey = v; }

function hx(v: number): string { return '0x' + (v >>> 0).toString(16); }
function hxb(v: bigint): string { return '0x' + v.toString(16); }

// ---------------------------------------------------------------------------------------
// Tree helpers (only called when a Tree is given)
// ---------------------------------------------------------------------------------------

function treeBth(t: Tree, o: number, v: Bth): void {
  const s = t.sub('BTH', o, BTH_LEN, `${opcodeInfo(v.opcode).name} QP ${hx(v.destQp)} PSN ${v.psn}`);
  const info = opcodeInfo(v.opcode);
  const F = BTH_FIELDS;
  s.add('OpCode', F.opcode.at, F.opcode.size, `0x${v.opcode.toString(16).padStart(2, '0')} ${info.transport} ${info.name}`);
  s.add('SE', F.se.at, F.se.size, v.se ? 1 : 0);
  s.add('M', F.migReq.at, F.migReq.size, v.migReq ? 1 : 0);
  s.add('PadCnt', F.padCount.at, F.padCount.size, v.padCount);
  s.add('TVer', F.tver.at, F.tver.size, v.tver);
  s.add('P_Key', F.pkey.at, F.pkey.size, hx(v.pkey));
  s.add('FECN', F.fecn.at, F.fecn.size, v.fecn ? 1 : 0);
  s.add('BECN', F.becn.at, F.becn.size, v.becn ? 1 : 0);
  s.add('Reserved', F.resv6.at, F.resv6.size, v.resv6);
  s.add('DestQP', F.destQp.at, F.destQp.size, hx(v.destQp));
  s.add('AckReq', F.ackReq.at, F.ackReq.size, v.ackReq ? 1 : 0);
  s.add('Reserved', F.resv7.at, F.resv7.size, v.resv7);
  s.add('PSN', F.psn.at, F.psn.size, v.psn);
}

function treeAeth(t: Tree, o: number, v: Aeth): void {
  const A = AETH_FIELDS;
  const s = t.sub('AETH', o, IB_EXT_SIZE.AETH, aethText(v));
  addField(s, A.syndrome, `0x${v.syndrome.toString(16).padStart(2, '0')} ${v.kind}`);
  if (v.kind === 'ACK') addField(s, A.code, v.code === 31 ? '31 (no credit information)' : `${v.code} (${AETH_CREDITS[v.code]} credits)`, 0, 'Credit count');
  else if (v.kind === 'RNR NAK') addField(s, A.code, `${v.code} (${RNR_TIMER_MS[v.code]} ms)`, 0, 'RNR timer');
  else if (v.kind === 'NAK') addField(s, A.code, `${v.code} (${nakName(v.code)})`, 0, 'NAK code');
  addField(s, A.msn, v.msn);
}

function aethText(v: Aeth): string {
  if (v.kind === 'ACK') return `ACK msn ${v.msn} credits ${v.code}`;
  if (v.kind === 'RNR NAK') return `RNR NAK timer ${RNR_TIMER_MS[v.code]}ms msn ${v.msn}`;
  if (v.kind === 'NAK') return `NAK ${NAK_TAGS[v.code] ?? `code-${v.code}`} msn ${v.msn}`;
  return `reserved syndrome 0x${v.syndrome.toString(16)} msn ${v.msn}`;
}

// ---------------------------------------------------------------------------------------
// Individual header codecs
// ---------------------------------------------------------------------------------------

function fixed<T>(b: Uint8Array, n: number, what: string, code: string, read: (b: Uint8Array, o: number) => T): Decoded<T> {
  const issues: Issue[] = [];
  if (b.length < n) issue(issues, 'error', code, `truncated ${what}: need ${n} bytes, have ${b.length}`, 0, b.length);
  return { value: read(b, 0), issues };
}

export function decodeBth(b: Uint8Array, t?: Tree): Decoded<Bth> {
  const r = fixed(b, BTH_LEN, 'BTH', 'ib.truncated', readBth);
  checkBth(r.value, 0, r.issues);
  if (t) treeBth(t, 0, r.value);
  return r;
}
export function encodeBth(v: Bth): Uint8Array { const o = new Uint8Array(BTH_LEN); writeBth(o, 0, v); return o; }
export function summarizeBth(v: Bth): string {
  return `${opcodeInfo(v.opcode).name} QP ${hx(v.destQp)} psn ${v.psn}${flags(v)}`;
}

export function decodeReth(b: Uint8Array, t?: Tree): Decoded<Reth> {
  const r = fixed(b, IB_EXT_SIZE.RETH, 'RETH', 'ib.truncated', readReth);
  if (t) treeReth(t, 0, r.value);
  return r;
}
export function encodeReth(v: Reth): Uint8Array { const o = new Uint8Array(IB_EXT_SIZE.RETH); writeReth(o, 0, v); return o; }
function summarizeReth(v: Reth): string { return `va ${hxb(v.va)} rkey ${hx(v.rkey)} len ${v.dmaLen}`; }

export function decodeAeth(b: Uint8Array, t?: Tree): Decoded<Aeth> {
  const r = fixed(b, IB_EXT_SIZE.AETH, 'AETH', 'ib.truncated', readAeth);
  checkAeth(r.value, 0, r.issues);
  if (t) treeAeth(t, 0, r.value);
  return r;
}
export function encodeAeth(v: Aeth): Uint8Array { const o = new Uint8Array(IB_EXT_SIZE.AETH); writeAeth(o, 0, v); return o; }
export function summarizeAeth(v: Aeth): string { return aethText(v); }

export function decodeImmDt(b: Uint8Array, t?: Tree): Decoded<number> {
  const r = fixed(b, IB_EXT_SIZE.ImmDt, 'ImmDt', 'ib.truncated', readImmDt);
  if (t) addField(t, IMMDT_FIELDS.immDt, hx(r.value));
  return r;
}
export function encodeImmDt(v: number): Uint8Array { const o = new Uint8Array(IB_EXT_SIZE.ImmDt); writeImmDt(o, 0, v); return o; }

export function decodeIeth(b: Uint8Array, t?: Tree): Decoded<number> {
  const r = fixed(b, IB_EXT_SIZE.IETH, 'IETH', 'ib.truncated', readIeth);
  if (t) addField(t, IETH_FIELDS.rkey, hx(r.value));
  return r;
}
export function encodeIeth(v: number): Uint8Array { const o = new Uint8Array(IB_EXT_SIZE.IETH); writeIeth(o, 0, v); return o; }

export function decodeDeth(b: Uint8Array, t?: Tree): Decoded<Deth> {
  const r = fixed(b, IB_EXT_SIZE.DETH, 'DETH', 'ib.truncated', readDeth);
  if (r.value.resv8 !== 0) issue(r.issues, 'note', 'ib.reserved', 'DETH reserved byte is not zero', DETH_FIELDS.resv8.at, DETH_FIELDS.resv8.size);
  if (t) treeDeth(t, 0, r.value);
  return r;
}
export function encodeDeth(v: Deth): Uint8Array { const o = new Uint8Array(IB_EXT_SIZE.DETH); writeDeth(o, 0, v); return o; }
function summarizeDeth(v: Deth): string { return `qkey ${hx(v.qkey)} srcqp ${hx(v.srcQp)}`; }

export function decodeRdeth(b: Uint8Array, t?: Tree): Decoded<Rdeth> {
  const r = fixed(b, IB_EXT_SIZE.RDETH, 'RDETH', 'ib.truncated', readRdeth);
  if (r.value.resv8 !== 0) issue(r.issues, 'note', 'ib.reserved', 'RDETH reserved byte is not zero', RDETH_FIELDS.resv8.at, RDETH_FIELDS.resv8.size);
  if (t) addField(t, RDETH_FIELDS.whole, hx(r.value.eeContext));
  return r;
}
export function encodeRdeth(v: Rdeth): Uint8Array { const o = new Uint8Array(IB_EXT_SIZE.RDETH); writeRdeth(o, 0, v); return o; }

export function decodeXrceth(b: Uint8Array, t?: Tree): Decoded<Xrceth> {
  const r = fixed(b, IB_EXT_SIZE.XRCETH, 'XRCETH', 'ib.truncated', readXrceth);
  if (r.value.resv8 !== 0) issue(r.issues, 'note', 'ib.reserved', 'XRCETH reserved byte is not zero', XRCETH_FIELDS.resv8.at, XRCETH_FIELDS.resv8.size);
  if (t) addField(t, XRCETH_FIELDS.whole, hx(r.value.xrcSrq));
  return r;
}
export function encodeXrceth(v: Xrceth): Uint8Array { const o = new Uint8Array(IB_EXT_SIZE.XRCETH); writeXrceth(o, 0, v); return o; }

export function decodeFeth(b: Uint8Array, t?: Tree): Decoded<Feth> {
  const r = fixed(b, IB_EXT_SIZE.FETH, 'FETH', 'ib.truncated', readFeth);
  if (t) addField(t, FETH_FIELDS.whole, `selectivity ${r.value.selectivity} placement ${r.value.placement}`);
  return r;
}
export function encodeFeth(v: Feth): Uint8Array { const o = new Uint8Array(IB_EXT_SIZE.FETH); writeFeth(o, 0, v); return o; }

export function decodeAtomicEth(b: Uint8Array, t?: Tree): Decoded<AtomicEth> {
  const r = fixed(b, IB_EXT_SIZE.AtomicETH, 'AtomicETH', 'ib.truncated', readAtomicEth);
  if (t) treeAtomicEth(t, 0, r.value);
  return r;
}
export function encodeAtomicEth(v: AtomicEth): Uint8Array { const o = new Uint8Array(IB_EXT_SIZE.AtomicETH); writeAtomicEth(o, 0, v); return o; }

export function decodeAtomicAckEth(b: Uint8Array, t?: Tree): Decoded<AtomicAckEth> {
  const r = fixed(b, IB_EXT_SIZE.AtomicAckETH, 'AtomicAckETH', 'ib.truncated', readAtomicAckEth);
  if (t) addField(t, ATOMIC_ACK_ETH_FIELDS.origData, hxb(r.value.origData));
  return r;
}
export function encodeAtomicAckEth(v: AtomicAckEth): Uint8Array { const o = new Uint8Array(IB_EXT_SIZE.AtomicAckETH); writeAtomicAckEth(o, 0, v); return o; }

function treeReth(t: Tree, o: number, v: Reth): void {
  const s = t.sub('RETH', o, IB_EXT_SIZE.RETH, summarizeReth(v));
  addField(s, RETH_FIELDS.va, hxb(v.va));
  addField(s, RETH_FIELDS.rkey, hx(v.rkey));
  addField(s, RETH_FIELDS.dmaLen, v.dmaLen);
}
function treeDeth(t: Tree, o: number, v: Deth): void {
  const s = t.sub('DETH', o, IB_EXT_SIZE.DETH, summarizeDeth(v));
  addField(s, DETH_FIELDS.qkey, hx(v.qkey));
  addField(s, DETH_FIELDS.resv8, v.resv8);
  addField(s, DETH_FIELDS.srcQp, hx(v.srcQp));
}
function treeAtomicEth(t: Tree, o: number, v: AtomicEth): void {
  const F = ATOMIC_ETH_FIELDS;
  const s = t.sub('AtomicETH', o, IB_EXT_SIZE.AtomicETH);
  addField(s, F.va, hxb(v.va));
  addField(s, F.rkey, hx(v.rkey));
  addField(s, F.swapAdd, hxb(v.swapAdd));
  addField(s, F.compare, hxb(v.compare));
}

// ---------------------------------------------------------------------------------------
// GRH (RoCE v1)
// ---------------------------------------------------------------------------------------

/** Decode a 40-byte GRH. If `b` extends past the GRH, PayLen is checked against the rest. */
const grhView = new GrhView();

export function decodeGrh(b: Uint8Array, t?: Tree): Decoded<Grh> {
  const issues: Issue[] = [];
  if (b.length < GRH_LEN) issue(issues, 'error', 'ib.truncated', `truncated GRH: need ${GRH_LEN} bytes, have ${b.length}`, 0, b.length);
  const g = grhView.reset(b);
  const F = GRH_FIELDS;
  const v: Grh = {
    ipVer: g.ipVer, tclass: g.tclass, flowLabel: g.flowLabel, payLen: g.payLen, nextHdr: g.nextHdr,
    hopLimit: g.hopLimit, sgid: ipv6Str(b, F.sgid.at), dgid: ipv6Str(b, F.dgid.at),
  };
  if (v.ipVer !== 6) issue(issues, 'warn', 'ib.grh', `GRH IPVer ${v.ipVer} (expected 6)`, F.ipVer.at, 1);
  if (v.nextHdr !== 0x1b) issue(issues, 'note', 'ib.grh', `GRH next header 0x${v.nextHdr.toString(16)} (IBA transport is 0x1b)`, F.nextHdr.at, 1);
  if (b.length > GRH_LEN) {
    const rest = b.length - GRH_LEN;
    if (v.payLen > rest) issue(issues, 'error', 'ib.truncated', `GRH PayLen ${v.payLen} > ${rest} bytes present`, F.payLen.at, F.payLen.size);
    else if (v.payLen < rest) issue(issues, 'note', 'ib.trailing', `${rest - v.payLen} bytes after GRH PayLen`, GRH_LEN + v.payLen, rest - v.payLen);
  }
  if (t) {
    const s = t.sub('GRH', 0, GRH_LEN, `${v.sgid} > ${v.dgid}`);
    addField(s, F.ipVer, v.ipVer);
    addField(s, F.tclass, v.tclass);
    addField(s, F.flowLabel, v.flowLabel);
    addField(s, F.payLen, v.payLen);
    addField(s, F.nextHdr, `0x${v.nextHdr.toString(16)}`);
    addField(s, F.hopLimit, v.hopLimit);
    addField(s, F.sgid, v.sgid);
    addField(s, F.dgid, v.dgid);
  }
  return { value: v, issues };
}

export function encodeGrh(v: Grh): Uint8Array {
  const o = new Uint8Array(GRH_LEN);
  const g = grhView.reset(o);
  g.ipVer = v.ipVer; g.tclass = v.tclass; g.flowLabel = v.flowLabel;
  g.payLen = v.payLen; g.nextHdr = v.nextHdr; g.hopLimit = v.hopLimit;
  o.set(parseIpv6(v.sgid), GRH_FIELDS.sgid.at);
  o.set(parseIpv6(v.dgid), GRH_FIELDS.dgid.at);
  return o;
}

export function summarizeGrh(v: Grh): string { return `GRH ${v.sgid} > ${v.dgid} hop ${v.hopLimit}`; }

// ---------------------------------------------------------------------------------------
// Whole transport packet
// ---------------------------------------------------------------------------------------

function checkBth(v: Bth, o: number, issues: Issue[]): void {
  const F = BTH_FIELDS;
  if (v.tver !== 0) issue(issues, 'warn', 'ib.tver', `BTH TVer ${v.tver} (expected 0)`, o + F.tver.at, F.tver.size);
  if (v.resv6 !== 0) issue(issues, 'note', 'ib.reserved', `BTH reserved bits (byte ${F.resv6.at}) = 0x${v.resv6.toString(16)}`, o + F.resv6.at, F.resv6.size);
  if (v.resv7 !== 0) issue(issues, 'note', 'ib.reserved', `BTH reserved bits (byte ${F.resv7.at}) = 0x${v.resv7.toString(16)}`, o + F.resv7.at, F.resv7.size);
  if (!OPCODES[v.opcode]!.known) issue(issues, 'warn', 'ib.opcode', `unknown/reserved opcode 0x${v.opcode.toString(16).padStart(2, '0')}`, o + F.opcode.at, F.opcode.size);
}

/** The syndrome's reserved bit (bit 7). */
const AETH_RESV_BIT = fieldBits(AETH_FIELDS.resvBit);

function checkAeth(v: Aeth, o: number, issues: Issue[]): void {
  if (v.syndrome & AETH_RESV_BIT) issue(issues, 'note', 'ib.reserved', 'AETH syndrome bit 7 (reserved) set', o + AETH_FIELDS.syndrome.at, AETH_FIELDS.syndrome.size);
  if (v.kind === 'reserved') issue(issues, 'warn', 'ib.aeth', `AETH reserved syndrome 0x${v.syndrome.toString(16)}`, o, 1);
  else if (v.kind === 'NAK' && v.code > 4) issue(issues, 'warn', 'ib.aeth', `AETH reserved NAK code ${v.code}`, o, 1);
}

/**
 * Decode an IB transport packet: BTH · extension headers · payload · pad · ICRC.
 * `b` runs from the BTH to the end of the ICRC (what follows UDP 4791, or the GRH).
 * The ICRC is only read here; verify it with checkIcrc() on the frame.
 */
export function decodeIbPacket(b: Uint8Array, t?: Tree): Decoded<IbPacket> {
  const issues: Issue[] = [];
  return { value: decodeIbPacketAt(issues, b, 0, b.length, t), issues };
}

/**
 * decodeIbPacket() of the packet at b[base, end) (BTH … ICRC), its issues pushed onto `issues`
 * with offsets relative to `base` (as are payloadOffset and the tree's): the replay path
 * decodes each frame without cutting a view per layer.
 */
export function decodeIbPacketAt(issues: Issue[], b: Uint8Array, base: number, end: number, t?: Tree, into?: IbPacketRecord): IbPacket {
  if (end > b.length) end = b.length;
  const len = end > base ? end - base : 0;
  // into: a record the caller refills per frame (numbers, its own BTH and AETH records, and the
  // frame's bytes for the payload view it makes when read)
  const bth = into ? readBthInto(into.bth, b, base, end) : readBth(b, base, end);
  const info = OPCODES[bth.opcode]!;
  const v: IbPacket = into ? into.clear() : { bth, payload: EMPTY, payloadOffset: BTH_LEN, padCount: 0, icrc: 0 };
  if (len < BTH_LEN) {
    issue(issues, 'error', 'ib.truncated', `truncated BTH: need 12 bytes, have ${len}`, 0, len);
    if (t) treeBth(t, 0, bth);
    return v;
  }
  checkBth(bth, 0, issues);
  if (t) treeBth(t, 0, bth);

  // Body = everything between the BTH and the ICRC.
  let bodyEnd = len - ICRC_LEN;
  if (bodyEnd < BTH_LEN) {
    issue(issues, 'error', 'ib.truncated', `no room for the ICRC: ${len - BTH_LEN} bytes after the BTH`, BTH_LEN, len - BTH_LEN);
    bodyEnd = len;
  } else {
    v.icrc = u32le(b, base + bodyEnd);
  }

  let o = BTH_LEN;
  let rethOff = 0;
  const hs = info.headers;
  for (let i = 0; i < hs.length; i++) {
    const h = hs[i]!;
    const n = IB_EXT_SIZE[h];
    if (o + n > bodyEnd) {
      issue(issues, 'error', 'ib.truncated', `truncated ${h}: need ${n} bytes at ${o}, have ${Math.max(0, bodyEnd - o)}`, o, Math.max(0, bodyEnd - o));
      o = bodyEnd;
      break;
    }
    switch (h) {
      case 'RETH': v.reth = readReth(b, base + o); rethOff = o; if (t) treeReth(t, o, v.reth); break;
      case 'AETH': v.aeth = into ? into.aethAt(b, base + o) : readAeth(b, base + o); checkAeth(v.aeth, o, issues); if (t) treeAeth(t, o, v.aeth); break;
      case 'ImmDt': v.immDt = readImmDt(b, base + o); if (t) addField(t, IMMDT_FIELDS.immDt, hx(v.immDt), o); break;
      case 'IETH': v.ieth = readIeth(b, base + o); if (t) addField(t, IETH_FIELDS.rkey, hx(v.ieth), o); break;
      case 'DETH':
        v.deth = readDeth(b, base + o);
        if (v.deth.resv8 !== 0) issue(issues, 'note', 'ib.reserved', 'DETH reserved byte is not zero', o + DETH_FIELDS.resv8.at, DETH_FIELDS.resv8.size);
        if (t) treeDeth(t, o, v.deth);
        break;
      case 'RDETH':
        v.rdeth = readRdeth(b, base + o);
        if (v.rdeth.resv8 !== 0) issue(issues, 'note', 'ib.reserved', 'RDETH reserved byte is not zero', o + RDETH_FIELDS.resv8.at, RDETH_FIELDS.resv8.size);
        if (t) addField(t, RDETH_FIELDS.whole, hx(v.rdeth.eeContext), o);
        break;
      case 'XRCETH':
        v.xrceth = readXrceth(b, base + o);
        if (v.xrceth.resv8 !== 0) issue(issues, 'note', 'ib.reserved', 'XRCETH reserved byte is not zero', o + XRCETH_FIELDS.resv8.at, XRCETH_FIELDS.resv8.size);
        if (t) addField(t, XRCETH_FIELDS.whole, hx(v.xrceth.xrcSrq), o);
        break;
      case 'FETH': v.feth = readFeth(b, base + o); if (t) addField(t, FETH_FIELDS.whole, `selectivity ${v.feth.selectivity} placement ${v.feth.placement}`, o); break;
      case 'AtomicETH': v.atomicEth = readAtomicEth(b, base + o); if (t) treeAtomicEth(t, o, v.atomicEth); break;
      case 'AtomicAckETH': v.atomicAckEth = readAtomicAckEth(b, base + o); if (t) addField(t, ATOMIC_ACK_ETH_FIELDS.origData, hxb(v.atomicAckEth.origData), o); break;
    }
    o += n;
  }

  // Payload + pad.
  const avail = bodyEnd - o;
  let pad = bth.padCount;
  if (pad > avail) {
    if (info.payload) issue(issues, 'error', 'ib.padcnt', `PadCnt ${pad} > ${avail} bytes of payload`, 1, 1);
    pad = avail;
  }
  v.padCount = pad;
  v.payloadOffset = o;
  const payEnd = bodyEnd - pad;
  if (into) into.payloadAt(b, base + o, base + payEnd);
  else if (avail > 0) v.payload = b.subarray(base + o, base + payEnd);
  if (!info.payload) {
    if (avail > 0) issue(issues, 'error', 'ib.payload', `${info.name} must not carry a payload (${avail} bytes)`, o, avail);
    else if (bth.padCount !== 0) issue(issues, 'warn', 'ib.padcnt', `PadCnt ${bth.padCount} on ${info.name} (no payload)`, 1, 1);
  } else if (!bodyAligned(avail) && info.known) {
    issue(issues, 'warn', 'ib.align', `payload+pad (${avail} bytes) is not a multiple of 4`, o, avail);
  }
  if (pad === bth.padCount && !padZero(b, base + payEnd, base + bodyEnd)) issue(issues, 'note', 'ib.pad', 'pad bytes are not zero', payEnd, pad);
  if (bth.opcode === 0x81 && avail !== 16) issue(issues, 'warn', 'ib.cnp', `CNP carries ${avail} bytes after the BTH (16 reserved expected)`, o, avail);
  const payLen = payEnd > o ? payEnd - o : 0;
  if (v.reth && (info.isOnly && info.isWrite) && v.reth.dmaLen !== payLen && bodyEnd === len - ICRC_LEN) {
    issue(issues, 'warn', 'ib.reth-len', `RETH DMA length ${v.reth.dmaLen} != payload ${payLen}`, rethOff + RETH_FIELDS.dmaLen.at, RETH_FIELDS.dmaLen.size);
  }
  if (t) {
    if (payEnd > o) t.add('Payload', o, payEnd - o, `${payEnd - o} bytes`);
    if (pad > 0) t.add('Pad', payEnd, pad, pad);
    if (bodyEnd <= len - ICRC_LEN) t.add('ICRC', bodyEnd, ICRC_LEN, hx(v.icrc));
  }
  return v;
}

/** Payload and pad together fill whole 4-byte words (an empty body does). */
function bodyAligned(avail: number): boolean { return avail <= 0 || (avail & 3) === 0; }

/** The pad bytes b[from, to) are zero. */
function padZero(b: Uint8Array, from: number, to: number): boolean {
  for (let i = from; i < to; i++) if (b[i] !== 0) return false;
  return true;
}

/** The syndrome bits that make an AETH other than a plain ACK: its kind and the reserved bit. */
const AETH_NOT_ACK = fieldBits(AETH_FIELDS.kindBits) | AETH_RESV_BIT;

/** What header prediction (dissectors/predict.ts) does with a packet of each opcode: 0 none,
 *  else one of these (RC, at most an AETH after the BTH, so nothing but the BTH's numbers, the
 *  AETH and the body's length can differ from the packet before on the same QP). */
export const PREDICTED = { WRITE_MIDDLE: 1, WRITE_LAST: 2, ACK: 3 } as const;
export const PREDICTED_KIND: Uint8Array = (() => {
  const k = new Uint8Array(256);
  for (const x of OPCODES) {
    if (x.transport !== 'RC' || !x.known) continue;
    if (x.isWrite && x.headers.length === 0) k[x.opcode] = x.isMiddle ? PREDICTED.WRITE_MIDDLE : x.isLast ? PREDICTED.WRITE_LAST : 0;
    else if (x.isAck && x.headers.length === 1 && x.headers[0] === 'AETH') k[x.opcode] = PREDICTED.ACK;
  }
  return k;
})();

/**
 * decodeIbPacketAt's body rules for a predicted packet (PREDICTED_KIND, its BTH otherwise equal
 * to a clean packet's) at b[base, end): the payload length when its body would raise no issue and
 * an ACK's AETH is a plain ACK (no NAK, no reserved bits), else -1 (the general path decodes it).
 */
export function predictedBodyLength(b: Uint8Array, base: number, end: number, kind: number): number {
  const bodyEnd = end - ICRC_LEN;
  const pad = (b[base + BTH_FIELDS.padCount.at]! >>> BTH_FIELDS.padCount.shift) & BTH_FIELDS.padCount.mask;
  if (kind === PREDICTED.ACK) {
    // ACKNOWLEDGE: the AETH, no payload, no pad; a plain ACK (the syndrome's kind and reserved bits 0)
    if (bodyEnd - base !== BTH_LEN + IB_EXT_SIZE.AETH || pad !== 0) return -1;
    return (b[base + BTH_LEN + AETH_FIELDS.syndrome.at]! & AETH_NOT_ACK) === 0 ? 0 : -1;
  }
  const avail = bodyEnd - base - BTH_LEN;
  if (avail < 0 || pad > avail || !bodyAligned(avail) || !padZero(b, bodyEnd - pad, bodyEnd)) return -1;
  return avail - pad;
}

const EMPTY = new Uint8Array(0);

/**
 * An IbPacket that decodeIbPacketAt() refills frame after frame (FrameDecoderOptions.reuse). Every
 * field is present from the start, in the order a fresh packet gets them (one object shape for
 * every opcode, so readers' property loads stay monomorphic; the same JSON, as undefined fields are
 * left out), the BTH and AETH are records of their own refilled in place, and the payload is a view
 * made when something first reads it (`-q` without tracking never does; a `subarray` costs about
 * 60 ns).
 */
export class IbPacketRecord implements IbPacket {
  bth: Bth = blankBth();
  payloadOffset = BTH_LEN;
  padCount = 0;
  icrc = 0;
  // the extension headers, in wire order (as decode adds them to a fresh packet)
  rdeth: Rdeth | undefined = undefined; deth: Deth | undefined = undefined; xrceth: Xrceth | undefined = undefined;
  feth: Feth | undefined = undefined; reth: Reth | undefined = undefined; atomicEth: AtomicEth | undefined = undefined;
  aeth: Aeth | undefined = undefined; atomicAckEth: AtomicAckEth | undefined = undefined;
  immDt: number | undefined = undefined; ieth: number | undefined = undefined;
  /** The AETH record `aeth` points at when the packet has one (refilled, never made anew). */
  readonly #aeth: Aeth = { syndrome: 0, msn: 0, kind: 'ACK', code: 0 };
  // The payload (private fields: not spread or serialized): bytes [from, to) of the frame's
  // ArrayBuffer when the frame is a plain Uint8Array (the reader's block: a long-lived object, so
  // keeping it costs no write barrier per frame, where the frame's own view is new every frame),
  // else of the frame itself (a Buffer: its payload a Buffer too, as subarray gives); and its view
  // once made, as readers such as the tracker and the line read it several times a frame.
  #buffer: ArrayBufferLike | undefined = undefined;
  #bytes: Uint8Array = EMPTY;
  #from = 0;
  #to = 0;
  #view: Uint8Array | undefined = undefined;

  get payload(): Uint8Array {
    let v = this.#view;
    if (v === undefined) {
      const n = this.#to - this.#from;
      v = n <= 0 ? EMPTY : this.#buffer !== undefined ? new Uint8Array(this.#buffer, this.#from, n) : this.#bytes.subarray(this.#from, this.#to);
      this.#view = v;
    }
    return v;
  }
  set payload(p: Uint8Array) { this.#buffer = undefined; this.#bytes = p; this.#from = 0; this.#to = p.length; this.#view = p; }

  /** The AETH at b[o], read into this packet's own AETH record. */
  aethAt(b: Uint8Array, o: number): Aeth { return readAethInto(this.#aeth, b, o); }

  /** The payload is b[from, to) (to <= from: none). */
  payloadAt(b: Uint8Array, from: number, to: number): void {
    this.#view = undefined;
    if (to <= from) { this.#from = 0; this.#to = 0; return; }
    if (b.constructor === Uint8Array) { const o = b.byteOffset; this.#buffer = b.buffer; this.#from = o + from; this.#to = o + to; return; }
    this.#buffer = undefined; this.#bytes = b; this.#from = from; this.#to = to;
  }

  /** JSON.stringify of this record: that of the fresh packet it stands for (payload second,
   *  the extension headers it has after icrc, in wire order). */
  toJSON(): IbPacket {
    const o: IbPacket = { bth: this.bth, payload: this.payload, payloadOffset: this.payloadOffset, padCount: this.padCount, icrc: this.icrc };
    if (this.rdeth) o.rdeth = this.rdeth;
    if (this.deth) o.deth = this.deth;
    if (this.xrceth) o.xrceth = this.xrceth;
    if (this.feth) o.feth = this.feth;
    if (this.reth) o.reth = this.reth;
    if (this.atomicEth) o.atomicEth = this.atomicEth;
    if (this.aeth) o.aeth = this.aeth;
    if (this.atomicAckEth) o.atomicAckEth = this.atomicAckEth;
    if (this.immDt !== undefined) o.immDt = this.immDt;
    if (this.ieth !== undefined) o.ieth = this.ieth;
    return o;
  }

  /** Every field as a fresh decode starts it (the BTH is refilled by the caller). */
  clear(): this {
    this.payloadOffset = BTH_LEN; this.padCount = 0; this.icrc = 0;
    this.rdeth = undefined; this.deth = undefined; this.xrceth = undefined; this.feth = undefined; this.reth = undefined;
    this.atomicEth = undefined; this.aeth = undefined; this.atomicAckEth = undefined; this.immDt = undefined; this.ieth = undefined;
    this.#from = 0; this.#to = 0; this.#view = undefined;
    return this;
  }
}

/** Total encoded size of a packet value (BTH … ICRC). */
export function ibPacketLength(v: IbPacket): number {
  return BTH_LEN + OPCODES[v.bth.opcode & 0xff]!.headerLength + v.payload.length + (v.bth.padCount & 3) + ICRC_LEN;
}

/** Pad count for a payload length (bytes needed to reach a multiple of 4). */
export function ibPadFor(payloadLength: number): number { return (4 - (payloadLength & 3)) & 3; }

/**
 * Encode BTH · headers the opcode requires (missing values → zeros) · payload · bth.padCount
 * zero bytes · ICRC. The ICRC slot gets `icrc` (default v.icrc); compute the real value with
 * icrcFromParts()/icrcRoceV2() once the outer headers exist and store it with setIcrc().
 */
export function encodeIbPacket(v: IbPacket, icrc: number = v.icrc): Uint8Array {
  const info = OPCODES[v.bth.opcode & 0xff]!;
  const out = new Uint8Array(ibPacketLength(v));
  writeBth(out, 0, v.bth);
  let o = BTH_LEN;
  for (const h of info.headers) {
    switch (h) {
      case 'RETH': if (v.reth) writeReth(out, o, v.reth); break;
      case 'AETH': if (v.aeth) writeAeth(out, o, v.aeth); break;
      case 'ImmDt': if (v.immDt !== undefined) writeImmDt(out, o, v.immDt); break;
      case 'IETH': if (v.ieth !== undefined) writeIeth(out, o, v.ieth); break;
      case 'DETH': if (v.deth) writeDeth(out, o, v.deth); break;
      case 'RDETH': if (v.rdeth) writeRdeth(out, o, v.rdeth); break;
      case 'XRCETH': if (v.xrceth) writeXrceth(out, o, v.xrceth); break;
      case 'FETH': if (v.feth) writeFeth(out, o, v.feth); break;
      case 'AtomicETH': if (v.atomicEth) writeAtomicEth(out, o, v.atomicEth); break;
      case 'AtomicAckETH': if (v.atomicAckEth) writeAtomicAckEth(out, o, v.atomicAckEth); break;
    }
    o += IB_EXT_SIZE[h];
  }
  out.set(v.payload, o);
  put32le(out, out.length - ICRC_LEN, icrc);
  return out;
}

/** Store an ICRC value in the last 4 bytes of `pkt` (least-significant byte first). */
export function setIcrc(pkt: Uint8Array, icrc: number, end = pkt.length): void {
  if (end >= ICRC_LEN && end <= pkt.length) put32le(pkt, end - ICRC_LEN, icrc);
}

/** The ICRC stored in the last 4 bytes before `end`, as a CRC value. */
export function readIcrc(pkt: Uint8Array, end = pkt.length): number {
  return end >= ICRC_LEN && end <= pkt.length ? u32le(pkt, end - ICRC_LEN) : 0;
}

// ---------------------------------------------------------------------------------------
// ICRC
// ---------------------------------------------------------------------------------------
//
// CRC-32 over: 8 × 0xFF (LRH stand-in) · IP header (IPv4: TOS, TTL, checksum → ones;
// IPv6/GRH: traffic class, flow label, hop limit → ones) · UDP header (checksum → 0xFFFF;
// RoCE v2 only) · BTH with byte 4 → 0xFF · rest up to the ICRC. Fed piecewise, no copy.

// Each header's variant fields become an OR mask (ones where the ICRC forces ones), built
// from the header tables; headers that sit back to back in a frame (IPv4 · UDP · BTH, IPv6 ·
// UDP · BTH, GRH · BTH) have one mask for the whole stack, so a frame's ICRC is one masked
// pass over its first 40–60 bytes and one CRC call over the rest.

// The variant fields (IBA vol.1 9.8.1, RoCE v2 annex A17.3.3), from the header tables.
const IPV4_OR = fieldMaskBytes([IPV4_FIELDS.tos, IPV4_FIELDS.ttl, IPV4_FIELDS.checksum], IPV4_MIN_LEN);
const IPV6_OR = fieldMaskBytes([IPV6_FIELDS.trafficClass, IPV6_FIELDS.flowLabel, IPV6_FIELDS.hopLimit], IPV6_LEN);
const GRH_OR = fieldMaskBytes([GRH_FIELDS.tclass, GRH_FIELDS.flowLabel, GRH_FIELDS.hopLimit], GRH_LEN);
const UDP_OR = fieldMaskBytes([UDP_FIELDS.checksum], UDP_LEN);
const BTH_OR = fieldMaskBytes([BTH_FIELDS.fecn, BTH_FIELDS.becn, BTH_FIELDS.resv6], BTH_LEN);

function stack(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) { out.set(p, o); o += p.length; }
  return out;
}
const V2_IPV4_OR = stack(IPV4_OR, UDP_OR, BTH_OR);
const V2_IPV6_OR = stack(IPV6_OR, UDP_OR, BTH_OR);
const V1_OR = stack(GRH_OR, BTH_OR);
const UDP_BTH_OR = stack(UDP_OR, BTH_OR);

/** The ICRC's mask over the BTH (ones where the ICRC forces ones: FECN, BECN, resv6), a copy:
 *  for an endpoint that hands the ICRC's arithmetic to native code (endpoint/verbs/uroce). */
export function icrcBthMask(): Uint8Array { return BTH_OR.slice(); }

export const LRH_STANDIN = 8;
/** CRC of the LRH stand-in (8 × 0xFF) every ICRC starts with. */
const LRH_CRC = crc32UpdateFill(0, 0xff, LRH_STANDIN);
/** The same stacks registered with the addon's trailer check (-1: none, computed in JS). */
const V2_IPV4_CHECK = registerTrailerMask(V2_IPV4_OR, LRH_CRC);
/** First byte of an IPv4 header without options (version 4, IHL 5): the stack V2_IPV4_CHECK registers. */
const IPV4_PLAIN = (4 << IPV4_FIELDS.version.shift) | ((IPV4_MIN_LEN >> 2) << IPV4_FIELDS.ihl.shift);
const V2_IPV6_CHECK = registerTrailerMask(V2_IPV6_OR, LRH_CRC);
const V1_CHECK = registerTrailerMask(V1_OR, LRH_CRC);

/**
 * Feed b[o, end) whose first bytes are the header stack `mask` describes: the stack masked (the
 * BTH, last in every stack, stops at `end`; the headers before it are fed whole, as their
 * length fields placed them), then the rest of the packet as it is.
 */
function feedStack(c: number, b: Uint8Array, o: number, mask: Uint8Array, end: number): number {
  const n = Math.max(end - o, mask.length - BTH_LEN);
  return crc32UpdateMaskedThen(c, b, o, n >= mask.length ? mask : mask.subarray(0, n), end);
}

/** Feed the masked IPv4 header b[o, o+ihl) (options, if any, as they are). */
function feedIpv4(c: number, b: Uint8Array, o: number, ihl: number): number {
  c = crc32UpdateMasked(c, b, o, ihl >= IPV4_MIN_LEN ? IPV4_OR : IPV4_OR.subarray(0, Math.max(0, ihl)));
  return ihl > IPV4_MIN_LEN ? crc32Update(c, b, o + IPV4_MIN_LEN, o + ihl) : c;
}

/** Feed the IB transport part b[o, end) (end = start of the ICRC) with the BTH's reserved byte
 *  (FECN, BECN, resv6) forced to ones. */
function feedIb(c: number, b: Uint8Array, o: number, end: number): number {
  return feedStack(c, b, o, BTH_OR, end);
}

/** End of the RoCE v2 packet from the IP length fields, clamped to the frame. */
function ipEnd(frame: Uint8Array, ipOff: number): number {
  const e = ipVersionAt(frame, ipOff) === 6
    ? ipOff + IPV6_LEN + u16(frame, ipOff + IPV6_FIELDS.payloadLength.at)
    : ipOff + u16(frame, ipOff + IPV4_FIELDS.totalLength.at);
  return Math.min(e, frame.length);
}

/**
 * ICRC of a RoCE v2 packet over IPv4 whose IP header starts at `ipOff` in `frame` (IP, UDP
 * and IB packet contiguous). `end` = end of the IB packet incl. ICRC (default: from the IP
 * total length, clamped to the frame).
 */
export function icrcRoceV2Ipv4(frame: Uint8Array, ipOff = 0, end = ipEnd(frame, ipOff)): number {
  const ihl = (u8(frame, ipOff) & 15) * 4;
  if (ihl === IPV4_MIN_LEN) return feedStack(LRH_CRC, frame, ipOff, V2_IPV4_OR, end - ICRC_LEN);
  return feedStack(feedIpv4(LRH_CRC, frame, ipOff, ihl), frame, ipOff + ihl, UDP_BTH_OR, end - ICRC_LEN);
}

/** ICRC of a RoCE v2 packet over IPv6 (no extension headers) whose IPv6 header starts at `ipOff`. */
export function icrcRoceV2Ipv6(frame: Uint8Array, ipOff = 0, end = ipEnd(frame, ipOff)): number {
  return feedStack(LRH_CRC, frame, ipOff, V2_IPV6_OR, end - ICRC_LEN);
}

/** ICRC of a RoCE v2 packet; IPv4 or IPv6 chosen by the version nibble at `ipOff`. */
export function icrcRoceV2(frame: Uint8Array, ipOff = 0, end = ipEnd(frame, ipOff)): number {
  return ipVersionAt(frame, ipOff) === 6 ? icrcRoceV2Ipv6(frame, ipOff, end) : icrcRoceV2Ipv4(frame, ipOff, end);
}

/** ICRC of a RoCE v1 packet whose GRH starts at `grhOff`; `end` defaults to GRH + PayLen (clamped). */
export function icrcRoceV1(frame: Uint8Array, grhOff = 0, end = Math.min(frame.length, grhOff + GRH_LEN + u16(frame, grhOff + GRH_FIELDS.payLen.at))): number {
  return feedStack(LRH_CRC, frame, grhOff, V1_OR, end - ICRC_LEN);
}

export type IcrcNet = 'ipv4' | 'ipv6' | 'grh';

/**
 * ICRC from separately built pieces: `net` = IPv4 header + UDP header ('ipv4'), IPv6 header +
 * UDP header ('ipv6') or the GRH ('grh'), `ib` = the IB packet from the BTH including its
 * 4-byte ICRC slot (as encodeIbPacket returns it).
 */
export function icrcFromParts(kind: IcrcNet, net: Uint8Array, ib: Uint8Array): number {
  return icrcFromPrefix(icrcPrefix(kind, net), ib);
}

/**
 * icrcFromParts in two steps, for an endpoint that sends or receives many packets behind the
 * same outer headers: icrcPrefix() is the CRC over the LRH stand-in and the masked `net`
 * headers (compute once per header), icrcFromPrefix() continues it over an IB packet.
 * icrcFromPrefix(icrcPrefix(kind, net), ib) === icrcFromParts(kind, net, ib).
 */
export function icrcPrefix(kind: IcrcNet, net: Uint8Array): number {
  if (kind === 'ipv4') {
    const ihl = (u8(net, 0) & 15) * 4;
    return crc32UpdateMasked(feedIpv4(LRH_CRC, net, 0, ihl), net, ihl, UDP_OR);
  }
  const c = crc32UpdateMasked(LRH_CRC, net, 0, kind === 'grh' ? GRH_OR : IPV6_OR);
  return kind === 'ipv6' ? crc32UpdateMasked(c, net, IPV6_LEN, UDP_OR) : c;
}

/** The ICRC of `ib` (BTH … 4-byte ICRC slot) behind outer headers whose icrcPrefix() is `prefix`. */
export function icrcFromPrefix(prefix: number, ib: Uint8Array): number {
  return feedIb(prefix, ib, 0, ib.length - ICRC_LEN);
}

export interface IcrcCheck {
  ok: boolean;
  /** Computed ICRC. */
  expected: number;
  /** ICRC carried by the packet (0 if the packet is too short to hold one). */
  actual: number;
}

/**
 * Verify the ICRC of a RoCE packet in `frame`: kind 'v2' with `off` at the IP header, or
 * 'v1' with `off` at the GRH. `end` defaults to the end given by the IP/GRH length fields.
 */
export function checkIcrc(frame: Uint8Array, off: number, kind: 'v1' | 'v2', end?: number): IcrcCheck {
  const e = end ?? icrcEnd(frame, off, kind);
  if (!icrcFits(frame, off, kind, e)) {
    return { ok: false, expected: 0, actual: e >= ICRC_LEN && e <= frame.length ? u32le(frame, e - ICRC_LEN) : 0 };
  }
  const expected = kind === 'v1' ? icrcRoceV1(frame, off, e) : icrcRoceV2(frame, off, e);
  const actual = u32le(frame, e - ICRC_LEN);
  return { ok: expected === actual, expected, actual };
}

/** checkIcrc(…).ok without the result object (the replay path checks every RoCE frame; the
 *  details are asked for only when it fails). */
export function icrcOk(frame: Uint8Array, off: number, kind: 'v1' | 'v2'): boolean {
  const e = icrcEnd(frame, off, kind);
  if (!icrcFits(frame, off, kind, e)) return false;
  // the common stacks (IPv4 without options, IPv6, GRH) in one call of the addon with numbers only
  const id = kind === 'v1' ? V1_CHECK : ipVersionAt(frame, off) === 6 ? V2_IPV6_CHECK : u8(frame, off) === IPV4_PLAIN ? V2_IPV4_CHECK : -1;
  const r = trailerCheck(frame, off, id, e);
  if (r >= 0) return r === 1;
  return (kind === 'v1' ? icrcRoceV1(frame, off, e) : icrcRoceV2(frame, off, e)) === u32le(frame, e - ICRC_LEN);
}

/** icrcOk(frame, off, 'v2') of a packet known to be IPv4 without options that ends the frame
 *  (header prediction checked both): the same trailerCheck, without finding the stack again. */
export function icrcOkIpv4(frame: Uint8Array, off: number): boolean {
  const e = frame.length;
  const r = trailerCheck(frame, off, V2_IPV4_CHECK, e);
  if (r >= 0) return r === 1;
  return icrcRoceV2(frame, off, e) === u32le(frame, e - ICRC_LEN);
}

/** End of the RoCE packet at `off` by its own length field (GRH payload length, IP length). */
function icrcEnd(frame: Uint8Array, off: number, kind: 'v1' | 'v2'): number {
  return kind === 'v1' ? Math.min(frame.length, off + GRH_LEN + u16(frame, off + GRH_FIELDS.payLen.at)) : ipEnd(frame, off);
}

/** [off, e) is captured and long enough for the headers and an ICRC. */
function icrcFits(frame: Uint8Array, off: number, kind: 'v1' | 'v2', e: number): boolean {
  const minLen = kind === 'v1' ? GRH_LEN + BTH_LEN + ICRC_LEN : 20 + 8 + BTH_LEN + ICRC_LEN;
  return e - off >= minLen && e <= frame.length;
}

/** checkIcrc(frame, 0, 'v2') for a buffer starting at the IP header (the version is read from it). */
export function checkIcrcV2(fromIp: Uint8Array, _ipVersion?: number): IcrcCheck { return checkIcrc(fromIp, 0, 'v2'); }

/** checkIcrc(frame, 0, 'v1') for a buffer starting at the GRH. */
export function checkIcrcV1(fromGrh: Uint8Array): IcrcCheck { return checkIcrc(fromGrh, 0, 'v1'); }

/** Compute and store the ICRC of a contiguous RoCE frame in place; returns it. */
export function writeIcrc(frame: Uint8Array, off: number, kind: 'v1' | 'v2', end?: number): number {
  const e = end ?? icrcEnd(frame, off, kind);
  const c = kind === 'v1' ? icrcRoceV1(frame, off, e) : icrcRoceV2(frame, off, e);
  setIcrc(frame, c, e);
  return c;
}

// ---------------------------------------------------------------------------------------
// Summary
// ---------------------------------------------------------------------------------------

/** ` [SE,FECN,BECN]` by bit (SE 1, FECN 2, BECN 4): the eight texts made once, not per frame. */
const FLAG_TEXT: readonly string[] = Array.from({ length: 8 }, (_, m) => {
  const on = [m & 1 ? 'SE' : '', m & 2 ? 'FECN' : '', m & 4 ? 'BECN' : ''].filter(Boolean);
  return on.length > 0 ? ` [${on.join(',')}]` : '';
});

function flags(b: Bth): string { return FLAG_TEXT[(b.se ? 1 : 0) | (b.fecn ? 2 : 0) | (b.becn ? 4 : 0)]!; }

/** ` QP 0x11 psn 123` */
function qpPsn(s: TextSink, b: Bth): void {
  s.text(' QP ');
  s.hex(b.destQp);
  s.text(' psn ');
  s.dec(b.psn);
}

/**
 * One line, e.g. `RDMA WRITE ONLY QP 0x11 psn 123 va 0x… rkey 0x… len 1000`,
 * `ACK QP 0x11 psn 5 msn 3 credits 31`, `NAK PSN-sequence-error QP 0x11 psn 5 msn 3`,
 * `RNR NAK timer 0.01ms QP 0x11 psn 5 msn 3`, `SEND ONLY QP 0x11 psn 7 [SE] len 44`.
 * Non-RC transports are prefixed (`UD SEND ONLY …`).
 */
export function summarizeIb(p: IbPacket): string {
  const s = new StringSink();
  writeIbSummary(s, p);
  return s.s;
}

/** ibLineShape(): a packet whose line is not one of the shapes below. */
export const IB_LINE_OTHER = 0;
/** `HEAD psn N[flags] len N`: an opcode with a payload, no extension header (RDMA WRITE MIDDLE, SEND). */
const IB_LINE_LEN = 1;
/** `ACK QP 0x11 psn N msn N credits N[flags]`: an RC ACKNOWLEDGE whose AETH says ACK. */
const IB_LINE_ACK = 2;
/** `HEAD psn N[flags]`: no payload and no extension header (CNP, or an opcode without payload). */
const IB_LINE_BARE = 3;

/**
 * Which of the common line shapes writeIbSummary() gives `p` (IB_LINE_*): their text is a head
 * that depends only on the opcode and destination QP (writeIbLineHead), the PSN, then a tail
 * of numbers (writeIbLineTail). render/line.ts caches the head's bytes per QP for the lines that
 * make up most of a capture; every other packet is IB_LINE_OTHER.
 */
export function ibLineShape(p: IbPacket): number {
  if (p.rdeth || p.deth || p.xrceth || p.feth || p.reth || p.atomicEth || p.atomicAckEth || p.immDt !== undefined || p.ieth !== undefined) return IB_LINE_OTHER;
  const op = p.bth.opcode;
  const a = p.aeth;
  if (a) return a.kind === 'ACK' && (op & 0x1f) === 0x11 ? IB_LINE_ACK : IB_LINE_OTHER;
  if (op === 0x81) return IB_LINE_BARE;
  if (OPCODES[op & 0xff]!.payload) return IB_LINE_LEN;
  return p.payload.length === 0 ? IB_LINE_BARE : IB_LINE_OTHER;
}

/** `[UC |UD |…]RDMA WRITE MIDDLE QP 0x11 psn ` (`ACK QP … psn ` for IB_LINE_ACK): the head of a
 *  common shape (ibLineShape not IB_LINE_OTHER), a function of the opcode and QP only. */
export function writeIbLineHead(s: TextSink, p: IbPacket, shape: number): void {
  const b = p.bth;
  const info = OPCODES[b.opcode & 0xff]!;
  if (!(info.transport === 'RC' || info.transport === 'CNP' || !info.known)) s.text(info.transport + ' ');
  s.text(shape === IB_LINE_ACK ? 'ACK' : info.name);
  s.text(' QP ');
  s.hex(b.destQp);
  s.text(' psn ');
}

/** What follows the PSN in a common shape's line (numbers and the flags). */
export function writeIbLineTail(s: TextSink, p: IbPacket, shape: number): void {
  const b = p.bth;
  if (shape === IB_LINE_ACK) {
    const a = p.aeth!;
    s.text(' msn ');
    s.dec(a.msn);
    s.text(' credits ');
    s.dec(a.code);
    s.text(flags(b));
    return;
  }
  const f = flags(b);
  if (f !== '') s.text(f);
  if (shape === IB_LINE_LEN) { s.text(' len '); s.dec(p.payload.length); }
}

/** summarizeIb() written into a sink (smcdump writes it into its output buffer). */
export function writeIbSummary(s: TextSink, p: IbPacket): void {
  const b = p.bth;
  const shape = ibLineShape(p);
  if (shape !== IB_LINE_OTHER) {
    writeIbLineHead(s, p, shape);
    s.dec(b.psn);
    writeIbLineTail(s, p, shape);
    return;
  }
  const info = OPCODES[b.opcode & 0xff]!;
  if (!(info.transport === 'RC' || info.transport === 'CNP' || !info.known)) s.text(info.transport + ' ');
  const a = p.aeth;
  if (a && (b.opcode & 0x1f) === 0x11) {
    if (a.kind === 'ACK') s.text('ACK');
    else if (a.kind === 'RNR NAK') s.text(`RNR NAK timer ${RNR_TIMER_MS[a.code]}ms`);
    else if (a.kind === 'NAK') s.text(`NAK ${NAK_TAGS[a.code] ?? `code-${a.code}`}`);
    else s.text(`ACK reserved-syndrome-0x${a.syndrome.toString(16)}`);
    qpPsn(s, b);
    s.text(' msn ');
    s.dec(a.msn);
    if (a.kind === 'ACK') { s.text(' credits '); s.dec(a.code); }
    s.text(flags(b));
    return;
  }
  s.text(info.name);
  qpPsn(s, b);
  s.text(flags(b));
  if (a) {
    if (a.kind === 'ACK') { s.text(' msn '); s.dec(a.msn); } else s.text(` ${aethText(a)}`);
  }
  if (p.rdeth) s.text(` ee ${hx(p.rdeth.eeContext)}`);
  if (p.deth) s.text(` qkey ${hx(p.deth.qkey)} srcqp ${hx(p.deth.srcQp)}`);
  if (p.xrceth) s.text(` srq ${hx(p.xrceth.xrcSrq)}`);
  if (p.feth) s.text(` sel ${p.feth.selectivity} plt ${p.feth.placement}`);
  if (p.reth) {
    s.text(` va ${hxb(p.reth.va)} rkey `);
    s.hex(p.reth.rkey);
    if (!info.payload || p.reth.dmaLen !== p.payload.length) { s.text(' dmalen '); s.dec(p.reth.dmaLen); }
  }
  if (p.atomicEth) {
    const e = p.atomicEth;
    s.text(` va ${hxb(e.va)} rkey ${hx(e.rkey)} ${(b.opcode & 0x1f) === 0x14 ? 'add' : 'swap'} ${hxb(e.swapAdd)}`);
    if ((b.opcode & 0x1f) !== 0x14) s.text(` cmp ${hxb(e.compare)}`);
  }
  if (p.atomicAckEth) s.text(` orig ${hxb(p.atomicAckEth.origData)}`);
  if (p.immDt !== undefined) s.text(` imm ${hx(p.immDt)}`);
  if (p.ieth !== undefined) s.text(` inv-rkey ${hx(p.ieth)}`);
  if (info.payload && b.opcode !== 0x81) { s.text(' len '); s.dec(p.payload.length); }
  else if (p.payload.length > 0 && b.opcode !== 0x81) { s.text(' +'); s.dec(p.payload.length); s.text(' bytes'); }
}
