// InfiniBand transport headers as field tables (IBA vol.1 ch.9; formats.md §11): BTH, RETH,
// AETH, DETH. The codecs in ../ib.ts decode and encode through these views, so each offset
// is written here and nowhere else.

import { defineView, type FieldTable } from './field.js';

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

/** RDMA Extended Transport Header, 16 bytes. */
export const RETH_FIELDS = {
  va: { at: 0, size: 8 },
  rkey: { at: 8, size: 4 },
  dmaLen: { at: 12, size: 4 },
} as const satisfies FieldTable;

/** ACK Extended Transport Header, 4 bytes. Syndrome bits 6–5: 0 ACK, 1 RNR NAK, 3 NAK. */
export const AETH_FIELDS = {
  syndrome: { at: 0, size: 1 },
  kindBits: { at: 0, size: 1, shift: 5, mask: 3, names: { 0: 'ACK', 1: 'RNR NAK', 2: 'reserved', 3: 'NAK' } },
  code: { at: 0, size: 1, shift: 0, mask: 31 },
  msn: { at: 1, size: 3 },
} as const satisfies FieldTable;

/** Datagram Extended Transport Header, 8 bytes (UD, RD). */
export const DETH_FIELDS = {
  qkey: { at: 0, size: 4 },
  resv8: { at: 4, size: 1 },
  srcQp: { at: 5, size: 3 },
} as const satisfies FieldTable;

export const BthView = defineView('BthView', BTH_FIELDS);
export const RethView = defineView('RethView', RETH_FIELDS);
export const AethView = defineView('AethView', AETH_FIELDS);
export const DethView = defineView('DethView', DETH_FIELDS);
export type BthView = InstanceType<typeof BthView>;
export type RethView = InstanceType<typeof RethView>;
export type AethView = InstanceType<typeof AethView>;
export type DethView = InstanceType<typeof DethView>;

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
