// InfiniBand transport headers as field tables (IBA vol.1 ch.9; formats.md §11): BTH and every
// extension header (RETH, AETH, DETH, ImmDt, IETH, RDETH, XRCETH, FETH, AtomicETH,
// AtomicAckETH), and the GRH of RoCE v1. The codecs in ../ib.ts decode and encode through these views, so each offset
// is written here and nowhere else.

import { defineReader, defineView, defineWriter, type FieldTable } from './field.js';

/** Base Transport Header, 12 bytes. */
export const BTH_FIELDS = {
  opcode: { at: 0, size: 1 },
  se: { at: 1, size: 1, shift: 7, mask: 1, bool: true },
  migReq: { at: 1, size: 1, shift: 6, mask: 1, bool: true },
  padCount: { at: 1, size: 1, shift: 4, mask: 3 },
  tver: { at: 1, size: 1, shift: 0, mask: 15 },
  pkey: { at: 2, size: 2 },
  /** RoCEv2 ECN bits in the first reserved byte (byte 4 bits 7, 6). */
  fecn: { at: 4, size: 1, shift: 7, mask: 1, bool: true },
  becn: { at: 4, size: 1, shift: 6, mask: 1, bool: true },
  resv6: { at: 4, size: 1, shift: 0, mask: 0x3f },
  destQp: { at: 5, size: 3 },
  ackReq: { at: 8, size: 1, shift: 7, mask: 1, bool: true },
  resv7: { at: 8, size: 1, shift: 0, mask: 0x7f },
  psn: { at: 9, size: 3 },
} as const satisfies FieldTable;

/** The default partition key (full member): what RoCE sends. */
export const DEFAULT_PKEY = 0xffff;
/** The P_Key's membership bit (full 1, limited 0): a P_Key matches the default partition
 *  whatever this bit says. */
export const PKEY_MEMBERSHIP = 0x8000;

/** RDMA Extended Transport Header, 16 bytes. */
export const RETH_FIELDS = {
  va: { at: 0, size: 8, label: 'Virtual address' },
  rkey: { at: 8, size: 4, label: 'R_Key' },
  dmaLen: { at: 12, size: 4, label: 'DMA length' },
} as const satisfies FieldTable;

/** ACK Extended Transport Header, 4 bytes. Syndrome bits 6–5: 0 ACK, 1 RNR NAK, 3 NAK. */
export const AETH_FIELDS = {
  syndrome: { at: 0, size: 1, label: 'Syndrome' },
  /** Bit 7 of the syndrome is reserved. */
  resvBit: { at: 0, size: 1, shift: 7, mask: 1, bool: true },
  kindBits: { at: 0, size: 1, shift: 5, mask: 3, names: { 0: 'ACK', 1: 'RNR NAK', 2: 'reserved', 3: 'NAK' } },
  code: { at: 0, size: 1, shift: 0, mask: 31 },
  msn: { at: 1, size: 3, label: 'MSN' },
} as const satisfies FieldTable;

/** Datagram Extended Transport Header, 8 bytes (UD, RD). */
export const DETH_FIELDS = {
  qkey: { at: 0, size: 4, label: 'Q_Key' },
  resv8: { at: 4, size: 1, label: 'Reserved' },
  srcQp: { at: 5, size: 3, label: 'Source QP' },
} as const satisfies FieldTable;

/** Immediate Data, 4 bytes (SEND/WRITE with immediate). */
export const IMMDT_FIELDS = {
  immDt: { at: 0, size: 4, label: 'ImmDt' },
} as const satisfies FieldTable;

/** Invalidate Extended Transport Header, 4 bytes (SEND with invalidate): the R_Key. */
export const IETH_FIELDS = {
  rkey: { at: 0, size: 4, label: 'IETH R_Key' },
} as const satisfies FieldTable;

/** Reliable Datagram Extended Transport Header, 4 bytes. */
export const RDETH_FIELDS = {
  resv8: { at: 0, size: 1 },
  eeContext: { at: 1, size: 3 },
  /** The tree shows the header as one node. */
  whole: { at: 0, size: 4, label: 'RDETH EE context' },
} as const satisfies FieldTable;

/** XRC Extended Transport Header, 4 bytes. */
export const XRCETH_FIELDS = {
  resv8: { at: 0, size: 1 },
  xrcSrq: { at: 1, size: 3 },
  whole: { at: 0, size: 4, label: 'XRCETH XRC SRQ' },
} as const satisfies FieldTable;

/** Flush Extended Transport Header, 4 bytes (IBA 1.5 FLUSH). */
export const FETH_FIELDS = {
  resv: { at: 0, size: 4, shift: 6, mask: 0x3ffffff },
  selectivity: { at: 0, size: 4, shift: 4, mask: 3 },
  placement: { at: 0, size: 4, shift: 0, mask: 15 },
  whole: { at: 0, size: 4, label: 'FETH' },
} as const satisfies FieldTable;

/** Atomic Extended Transport Header, 28 bytes. */
export const ATOMIC_ETH_FIELDS = {
  va: { at: 0, size: 8, label: 'Virtual address' },
  rkey: { at: 8, size: 4, label: 'R_Key' },
  swapAdd: { at: 12, size: 8, label: 'Swap/Add data' },
  compare: { at: 20, size: 8, label: 'Compare data' },
} as const satisfies FieldTable;

/** Atomic Acknowledge Extended Transport Header, 8 bytes. */
export const ATOMIC_ACK_ETH_FIELDS = {
  origData: { at: 0, size: 8, label: 'AtomicAckETH original data' },
} as const satisfies FieldTable;

export const BthView = defineView('BthView', BTH_FIELDS);
export const RethView = defineView('RethView', RETH_FIELDS);
export const AethView = defineView('AethView', AETH_FIELDS);
export const DethView = defineView('DethView', DETH_FIELDS);
export type BthView = InstanceType<typeof BthView>;
export type RethView = InstanceType<typeof RethView>;
export type AethView = InstanceType<typeof AethView>;
export type DethView = InstanceType<typeof DethView>;

// Whole headers in one call (field.ts defineWriter/defineReader: each byte once, no call per
// field): what the endpoint writes and reads per packet (docs/uroce.md round 15).
/** Every BTH field, in table order. */
export const writeBth = defineWriter('Bth', BTH_FIELDS, ['opcode', 'se', 'migReq', 'padCount', 'tver', 'pkey', 'fecn', 'becn', 'resv6', 'destQp', 'ackReq', 'resv7', 'psn']);
/** The BTH fields an RC receiver acts on (the destination QP it has read already). */
export const readBthRx = defineReader('BthRx', BTH_FIELDS, ['opcode', 'se', 'padCount', 'ackReq', 'psn']);
/** RETH: the VA as a number (below 2^53; the reader gives -1 above, see WholeValue). */
export const writeReth = defineWriter('Reth', RETH_FIELDS, ['va', 'rkey', 'dmaLen']);
export const readReth = defineReader('Reth', RETH_FIELDS, ['va', 'rkey', 'dmaLen']);
export const writeAeth = defineWriter('Aeth', AETH_FIELDS, ['syndrome', 'msn']);
export const readAeth = defineReader('Aeth', AETH_FIELDS, ['kindBits', 'code', 'msn']);

export const ImmDtView = defineView('ImmDtView', IMMDT_FIELDS);
export const IethView = defineView('IethView', IETH_FIELDS);
export const RdethView = defineView('RdethView', RDETH_FIELDS);
export const XrcethView = defineView('XrcethView', XRCETH_FIELDS);
export const FethView = defineView('FethView', FETH_FIELDS);
export const AtomicEthView = defineView('AtomicEthView', ATOMIC_ETH_FIELDS);
export const AtomicAckEthView = defineView('AtomicAckEthView', ATOMIC_ACK_ETH_FIELDS);

/** Global Route Header, 40 bytes (IBA vol.1 8.3; RoCE v1 carries it after the Ethernet header,
 *  EtherType 0x8915). The first 32 bits hold IPVer, Traffic class and Flow label. */
export const GRH_FIELDS = {
  ipVer: { at: 0, size: 1, shift: 4, mask: 0x0f, label: 'IPVer' },
  tclass: { at: 0, size: 2, shift: 4, mask: 0xff, label: 'Traffic class' },
  flowLabel: { at: 1, size: 3, shift: 0, mask: 0xfffff, label: 'Flow label' },
  payLen: { at: 4, size: 2, label: 'PayLen' },
  nextHdr: { at: 6, size: 1, label: 'NxtHdr' },
  hopLimit: { at: 7, size: 1, label: 'HopLmt' },
  sgid: { at: 8, len: 16, label: 'SGID' },
  dgid: { at: 24, len: 16, label: 'DGID' },
} as const satisfies FieldTable;
export const GRH_LEN = GRH_FIELDS.dgid.at + GRH_FIELDS.dgid.len;

export const GrhView = defineView('GrhView', GRH_FIELDS);
export type GrhView = InstanceType<typeof GrhView>;
