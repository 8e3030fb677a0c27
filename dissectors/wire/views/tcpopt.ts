// TCP experimental option (RFC 6994; formats.md §2) as a field table. ../tcpopt.ts decodes,
// renders and encodes through this view. The option's data after the ExID is a variable run
// of bytes up to the option's length: the codec slices it (no fixed offset to declare).

import { defineView, type FieldTable } from './field.js';
import { TCP_OPTION_FIELDS } from './net.js';

export const TCPOPT_FIELDS = {
  // kind and length as every TCP option has them (./net.ts)
  kind: { ...TCP_OPTION_FIELDS.kind, label: 'Kind', names: { 253: 'experimental', 254: 'experimental' } },
  length: { ...TCP_OPTION_FIELDS.length, label: 'Length' },
  /** The ExID is 32 bits (SMC: "SMCR"/"SMCD" in EBCDIC) or, for a few known experiments, 16. */
  exid32: { at: 2, size: 4, label: 'ExID' },
  exid16: { at: 2, size: 2, label: 'ExID' },
} as const satisfies FieldTable;

/** Offset of the ExID (both widths): the data starts after it. */
export const TCPOPT_EXID_AT = TCPOPT_FIELDS.exid32.at;

export const TcpOptView = defineView('TcpOptView', TCPOPT_FIELDS);
export type TcpOptView = InstanceType<typeof TcpOptView>;
