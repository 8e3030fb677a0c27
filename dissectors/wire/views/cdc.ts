// SMC-R CDC message as a field table (formats.md §9.1, RFC 7609 A.4, Linux struct
// smc_cdc_msg): 44 bytes, big-endian. ../cdc.ts decodes and encodes through this view.

import { defineReader, defineView, defineWriter, type FieldTable, type HeaderFields } from './field.js';

export const CDC_FIELDS = {
  type: { at: 0, size: 1, names: { 0xfe: 'CDC' } },
  length: { at: 1, size: 1 },
  seq: { at: 2, size: 2 },
  /** The receiver's RMBE alert token. */
  token: { at: 4, size: 4 },
  /** Producer cursor: reserved u16 · wrap u16 · count u32. */
  prodReserved: { at: 8, size: 2 },
  prodWrap: { at: 10, size: 2 },
  prodCount: { at: 12, size: 4 },
  /** Consumer cursor, same layout. */
  consReserved: { at: 16, size: 2 },
  consWrap: { at: 18, size: 2 },
  consCount: { at: 20, size: 4 },
  prodFlags: { at: 24, size: 1 },
  writeBlocked: { at: 24, size: 1, shift: 7, mask: 1, bool: true },
  urgentPending: { at: 24, size: 1, shift: 6, mask: 1, bool: true },
  urgentPresent: { at: 24, size: 1, shift: 5, mask: 1, bool: true },
  cursorUpdateRequested: { at: 24, size: 1, shift: 4, mask: 1, bool: true },
  failoverValidation: { at: 24, size: 1, shift: 3, mask: 1, bool: true },
  /** Undefined producer flag bits. */
  prodOther: { at: 24, size: 1, shift: 0, mask: 0x07 },
  connFlags: { at: 25, size: 1 },
  peerDoneWriting: { at: 25, size: 1, shift: 7, mask: 1, bool: true },
  peerConnClosed: { at: 25, size: 1, shift: 6, mask: 1, bool: true },
  peerConnAbort: { at: 25, size: 1, shift: 5, mask: 1, bool: true },
  /** Undefined connection state flag bits. */
  connOther: { at: 25, size: 1, shift: 0, mask: 0x1f },
} as const satisfies FieldTable;

/** Bytes 26–43 are reserved (Alibaba kernels put a credits byte at 26). */
export const CDC_RESERVED_AT = 26;

export const CdcView = defineView('CdcView', CDC_FIELDS);
export type CdcView = InstanceType<typeof CdcView>;

// Whole messages in one call (field.ts defineWriter/defineReader, as views/ib.ts does for the
// BTH): the endpoint writes one CDC and reads one per message, ten setters and eighteen getters
// field by field before (docs/uroce.md round 17). Bytes 26–43 are not written: reserved, and
// zero in the endpoint's buffer.
/** Every field the endpoint sends: the flag bytes whole (it builds them from the flag bits). */
export const writeCdc = defineWriter('Cdc', CDC_FIELDS, ['type', 'length', 'seq', 'token', 'prodReserved', 'prodWrap', 'prodCount',
  'consReserved', 'consWrap', 'consCount', 'prodFlags', 'connFlags']);
/** The fields a receiver acts on, flat: the flags one by one. */
export const CDC_RX_FIELDS = ['type', 'length', 'seq', 'token', 'prodReserved', 'prodWrap', 'prodCount', 'consReserved', 'consWrap', 'consCount',
  'writeBlocked', 'urgentPending', 'urgentPresent', 'cursorUpdateRequested', 'failoverValidation', 'peerDoneWriting', 'peerConnClosed', 'peerConnAbort'] as const;
export const readCdc = defineReader('Cdc', CDC_FIELDS, CDC_RX_FIELDS);
/** What readCdc fills. */
export type CdcFields = HeaderFields<typeof CDC_FIELDS, typeof CDC_RX_FIELDS>;
