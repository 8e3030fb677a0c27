// CLC messages (formats.md §3–§7; RFC 7609 A.2; Linux net/smc smc_clc.h) as field tables.
// ../clc.ts decodes, renders the `-V` tree and encodes through these views, so each offset is
// written here and nowhere else. All fields are big-endian.
//
// What a table cannot say is left to small helpers in ../clc.ts, named there:
// - the trailer eyecatcher sits at Length − 4 (its offset depends on the message);
// - the Proposal's areas move: the IP prefix area at 40 + IP area offset, the v2 extension at
//   52 + its offset, the SMC-Dv2 extension at (v2 extension + 8) + its offset. Each area has its
//   own table with offsets relative to the area's start;
// - lists (IPv6 prefixes, EIDs, ISM GIDs, the Confirm's GID list) are declared by their first
//   entry; entry i is at `entryAt(first, i)`;
// - Peer IDs, GIDs, MACs and blank-padded text are byte runs (BytesSpec) read by helpers.

import { defineView, tableSize, type FieldTable } from './field.js';

/** Bytes 0–7 of every CLC message. Byte 7: version in the high nibble; the low nibble's
 *  meaning depends on the type (see each type's table). */
export const CLC_HEADER_FIELDS = {
  eyecatcher: { at: 0, size: 4, label: 'Eyecatcher' },
  typeCode: { at: 4, size: 1, label: 'Type', names: { 1: 'Proposal', 2: 'Accept', 3: 'Confirm', 4: 'Decline' } },
  length: { at: 5, size: 2, label: 'Length' },
  byte7: { at: 7, size: 1 },
  version: { at: 7, size: 1, shift: 4, mask: 15, label: 'Version' },
  /** Low nibble of byte 7 of a message of unknown type. */
  flags: { at: 7, size: 1, shift: 0, mask: 15 },
  /** Bytes of a message of unknown type, from 8 to the trailer. */
  body: { at: 8, len: 0, label: 'Body' },
} as const satisfies FieldTable;

/** The trailer: the eyecatcher again, as the last 4 bytes (at Length − 4). */
export const CLC_TRAILER_LEN = 4;

/** Proposal fixed part (formats.md §4.1), offsets from the message start. */
export const CLC_PROPOSAL_FIELDS = {
  paths: { at: 7, size: 1, label: 'Paths' },
  typev2: { at: 7, size: 1, shift: 2, mask: 3 },
  typev1: { at: 7, size: 1, shift: 0, mask: 3 },
  peerId: { at: 8, len: 8, label: 'Peer ID' },
  gid: { at: 16, len: 16, label: 'GID' },
  mac: { at: 32, len: 6, label: 'MAC' },
  ipAreaOffset: { at: 38, size: 2, label: 'IP area offset' },
} as const satisfies FieldTable;

/** Proposal SMC-D / v2 info area (formats.md §4.2), offsets from its start (byte 40). */
export const CLC_PROPOSAL_SMCD_AT = 40;
export const CLC_PROPOSAL_SMCD_FIELDS = {
  ismGid: { at: 0, size: 8, label: 'ISM GID' },
  ismChid: { at: 8, size: 2, label: 'ISM CHID' },
  /** Relative to byte 52 of the message (CLC_V2_EXT_BASE). */
  v2ExtOffset: { at: 10, size: 2, label: 'v2 extension offset' },
  vendorOui: { at: 12, size: 3, label: 'Vendor OUI' },
  /** 5 bytes: read as a bigint by a helper (no 40-bit field width in the table). */
  vendorExp: { at: 15, len: 5, label: 'Vendor options' },
  reserved: { at: 20, len: 20 },
} as const satisfies FieldTable;
/** The v2 extension offset counts from this byte of the message. */
export const CLC_V2_EXT_BASE = 52;

/** Proposal IP prefix area (formats.md §4.3), offsets from its start (40 + IP area offset). */
export const CLC_PREFIX_AREA_FIELDS = {
  ipv4: { at: 0, len: 4, label: 'IPv4 prefix' },
  ipv4Len: { at: 4, size: 1 },
  reserved: { at: 5, len: 2 },
  ipv6Count: { at: 7, size: 1, label: 'IPv6 prefix count' },
  /** First IPv6 prefix entry (CLC_IPV6_PREFIX_FIELDS); `ipv6Count` of them. */
  ipv6: { at: 8, len: 17, label: 'IPv6 prefix' },
} as const satisfies FieldTable;

/** One IPv6 prefix entry, 17 bytes. */
export const CLC_IPV6_PREFIX_FIELDS = {
  prefix: { at: 0, len: 16 },
  prefixLen: { at: 16, size: 1 },
} as const satisfies FieldTable;

/** Proposal v2 extension (formats.md §4.4), offsets from its start (52 + v2 extension offset). */
export const CLC_V2_EXT_FIELDS = {
  eidCount: { at: 0, size: 1, label: 'EID count' },
  gidCount: { at: 1, size: 1, label: 'ISM GID count' },
  reserved2: { at: 2, len: 1 },
  flags: { at: 3, size: 1, label: 'Flags' },
  /** 0 = v2.0, 1 = v2.1. */
  release: { at: 3, size: 1, shift: 4, mask: 15 },
  flagsReserved: { at: 3, size: 1, shift: 1, mask: 7 },
  seidFlag: { at: 3, size: 1, shift: 0, mask: 1, bool: true },
  reserved4: { at: 4, len: 2 },
  /** Relative to this extension's byte 8. */
  smcdv2ExtOffset: { at: 6, size: 2, label: 'SMC-Dv2 extension offset' },
  roceV2Gid: { at: 8, len: 16, label: 'RoCEv2 GID' },
  maxConns: { at: 24, size: 1, label: 'max conns' },
  maxLinks: { at: 25, size: 1, label: 'max links' },
  featureMask: { at: 26, size: 2, label: 'Feature mask' },
  reserved28: { at: 28, len: 12 },
  /** First user EID, 32 bytes blank padded; `eidCount` of them. */
  eids: { at: 40, len: 32, label: 'EID' },
} as const satisfies FieldTable;
/** The SMC-Dv2 extension offset counts from this byte of the v2 extension. */
export const CLC_SMCDV2_EXT_BASE = 8;

/** Proposal SMC-Dv2 extension (formats.md §4.5), offsets from its start. */
export const CLC_SMCDV2_EXT_FIELDS = {
  seid: { at: 0, len: 32, label: 'System EID' },
  reserved: { at: 32, len: 16 },
  /** First ISM GID entry (CLC_ISM_GID_FIELDS); the v2 extension's `gidCount` of them. */
  gids: { at: 48, len: 10, label: 'ISM GID' },
} as const satisfies FieldTable;

/** One ISM GID entry of the SMC-Dv2 extension, 10 bytes. */
export const CLC_ISM_GID_FIELDS = {
  gid: { at: 0, size: 8 },
  chid: { at: 8, size: 2 },
} as const satisfies FieldTable;

/** First-Contact Extension (formats.md §5.3), offsets from its start. 52 bytes; SMC-D v2.0
 *  sends only the first 36 (up to the host name). */
export const CLC_FCE_FIELDS = {
  flags: { at: 0, size: 1, label: 'Flags' },
  v2Direct: { at: 0, size: 1, shift: 7, mask: 1, bool: true },
  flagsReserved: { at: 0, size: 1, shift: 0, mask: 0x7f },
  osRelease: { at: 1, size: 1, label: 'OS / release' },
  osType: { at: 1, size: 1, shift: 4, mask: 15 },
  release: { at: 1, size: 1, shift: 0, mask: 15 },
  reserved2: { at: 2, len: 2 },
  hostname: { at: 4, len: 32, label: 'Hostname' },
  maxConns: { at: 36, size: 1, label: 'max conns' },
  maxLinks: { at: 37, size: 1, label: 'max links' },
  featureMask: { at: 38, size: 2, label: 'Feature mask' },
  vendorExp: { at: 40, size: 4, label: 'Vendor options' },
  reserved44: { at: 44, len: 8 },
} as const satisfies FieldTable;

/** Byte 7 of Accept and Confirm (both paths). */
export const CLC_ACCEPT_FLAGS_FIELDS = {
  flags: { at: 7, size: 1, label: 'Flags' },
  firstContact: { at: 7, size: 1, shift: 3, mask: 1, bool: true },
  reservedBit: { at: 7, size: 1, shift: 2, mask: 1, bool: true },
  /** Path chosen: R or D. */
  path: { at: 7, size: 1, shift: 0, mask: 3 },
} as const satisfies FieldTable;

/** SMC-R Accept / Confirm (formats.md §5.1), offsets from the message start. */
export const CLC_SMCR_ACCEPT_FIELDS = {
  peerId: { at: 8, len: 8, label: 'Peer ID' },
  gid: { at: 16, len: 16, label: 'GID' },
  mac: { at: 32, len: 6, label: 'MAC' },
  qpn: { at: 38, size: 3, label: 'QP number' },
  rkey: { at: 41, size: 4, label: 'RMB rkey' },
  rmbeIdx: { at: 45, size: 1, label: 'RMBE index' },
  token: { at: 46, size: 4, label: 'RMBE alert token' },
  sizeMtu: { at: 50, size: 1, label: 'RMBE size / QP MTU' },
  /** RMBE size: 2^(code+14) bytes. */
  rmbeSizeCode: { at: 50, size: 1, shift: 4, mask: 15 },
  /** IB MTU code: 1 = 256 … 5 = 4096. */
  mtuCode: { at: 50, size: 1, shift: 0, mask: 15 },
  reserved51: { at: 51, len: 1 },
  rmbVa: { at: 52, size: 8, label: 'RMB virtual address' },
  reserved60: { at: 60, len: 1 },
  psn: { at: 61, size: 3, label: 'Initial PSN' },
  /** v2 from here. */
  eid: { at: 64, len: 32, label: 'EID' },
  reserved96: { at: 96, len: 8 },
} as const satisfies FieldTable;
/** SMC-R v2 first contact: the FCE starts here, the Confirm's GID list after it. */
export const CLC_SMCR_FCE_AT = 104;
export const CLC_SMCR_GID_LIST_AT = 156;

/** The SMC-R v2 Confirm's GID list (formats.md §5.1), offsets from its start. */
export const CLC_GID_LIST_FIELDS = {
  count: { at: 0, size: 1, label: 'Count' },
  reserved: { at: 1, len: 3 },
  /** First GID; `count` of them. */
  gids: { at: 4, len: 16, label: 'GID' },
} as const satisfies FieldTable;

/** SMC-D Accept / Confirm (formats.md §5.2), offsets from the message start. */
export const CLC_SMCD_ACCEPT_FIELDS = {
  gid: { at: 8, size: 8, label: 'ISM GID' },
  dmbToken: { at: 16, size: 8, label: 'DMB token' },
  dmbeIdx: { at: 24, size: 1, label: 'DMBE index' },
  dmbeSize: { at: 25, size: 1, label: 'DMBE size' },
  dmbeSizeCode: { at: 25, size: 1, shift: 4, mask: 15 },
  dmbeSizeReserved: { at: 25, size: 1, shift: 0, mask: 15 },
  reserved26: { at: 26, len: 2 },
  linkId: { at: 28, size: 4, label: 'Link ID' },
  /** v1: bytes 32–43 reserved. */
  reservedV1: { at: 32, len: 12 },
  /** v2 from here. */
  chid: { at: 32, size: 2, label: 'CHID' },
  eid: { at: 34, len: 32, label: 'EID' },
  gidExt: { at: 66, size: 8, label: 'GID extension' },
} as const satisfies FieldTable;
export const CLC_SMCD_FCE_AT = 74;

/** Decline (formats.md §6), offsets from the message start. */
export const CLC_DECLINE_FIELDS = {
  flags: { at: 7, size: 1, label: 'Flags' },
  /** The receiver must drop its link group. */
  outOfSync: { at: 7, size: 1, shift: 3, mask: 1, bool: true },
  reservedBit: { at: 7, size: 1, shift: 2, mask: 1, bool: true },
  /** Reserved (Linux sends 0; Linux ≤ 6.16 aborted on values other than R/D). */
  typev1: { at: 7, size: 1, shift: 0, mask: 3 },
  peerId: { at: 8, len: 8, label: 'Peer ID' },
  diagnosis: { at: 16, size: 4, label: 'Peer diagnosis' },
  os: { at: 20, size: 1, label: 'OS type' },
  osType: { at: 20, size: 1, shift: 4, mask: 15 },
  osReserved: { at: 20, size: 1, shift: 0, mask: 15 },
  reserved21: { at: 21, len: 3 },
  /** v2: 4 further diagnosis words (u32 each). */
  diagExtra: { at: 24, len: 16, label: 'Further diagnosis' },
} as const satisfies FieldTable;

/** Whole sizes that follow from the tables (without the trailer). */
export const CLC_FCE_LEN = tableSize(CLC_FCE_FIELDS);
export const CLC_PROPOSAL_SMCD_LEN = tableSize(CLC_PROPOSAL_SMCD_FIELDS);
export const CLC_FCE_V20_SMCD_LEN = CLC_FCE_FIELDS.hostname.at + CLC_FCE_FIELDS.hostname.len;

export const ClcHeaderView = defineView('ClcHeaderView', CLC_HEADER_FIELDS);
export const ClcProposalView = defineView('ClcProposalView', CLC_PROPOSAL_FIELDS);
export const ClcProposalSmcdView = defineView('ClcProposalSmcdView', CLC_PROPOSAL_SMCD_FIELDS);
export const ClcPrefixAreaView = defineView('ClcPrefixAreaView', CLC_PREFIX_AREA_FIELDS);
export const ClcIpv6PrefixView = defineView('ClcIpv6PrefixView', CLC_IPV6_PREFIX_FIELDS);
export const ClcV2ExtView = defineView('ClcV2ExtView', CLC_V2_EXT_FIELDS);
export const ClcIsmGidView = defineView('ClcIsmGidView', CLC_ISM_GID_FIELDS);
export const ClcFceView = defineView('ClcFceView', CLC_FCE_FIELDS);
export const ClcAcceptFlagsView = defineView('ClcAcceptFlagsView', CLC_ACCEPT_FLAGS_FIELDS);
export const ClcSmcrAcceptView = defineView('ClcSmcrAcceptView', CLC_SMCR_ACCEPT_FIELDS);
export const ClcGidListView = defineView('ClcGidListView', CLC_GID_LIST_FIELDS);
export const ClcSmcdAcceptView = defineView('ClcSmcdAcceptView', CLC_SMCD_ACCEPT_FIELDS);
export const ClcDeclineView = defineView('ClcDeclineView', CLC_DECLINE_FIELDS);
