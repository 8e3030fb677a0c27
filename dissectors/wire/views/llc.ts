// SMC-R LLC messages v1/v2 (formats.md §8; RFC 7609 A.3; Linux smc_llc.c) as field tables.
// ../llc.ts decodes, renders the `-V` tree and encodes through these views: each offset is
// written here and nowhere else. Offsets are from the start of the message; big-endian unless
// noted.
//
// What a table cannot say, and ../llc.ts handles with named helpers:
// - the v2 length (bytes 1–2) and the ADD LINK v2 rkey count are in the SENDER's HOST order
//   (x86 little-endian, s390 big-endian; formats.md §12): both readings are declared (`…Le`,
//   `…Be`) and the codec picks one by what fits the bytes present;
// - the ADD LINK reject reason nibble lives in byte 2, which in v2 is half of the length;
// - lists (rkey entries, rtokens, GIDs, DELETE RKEY rkeys) are declared by their first entry;
//   entry i is at `entryAt(first, i)` and has its own table (LLC_RKEY_ENTRY_FIELDS, LLC_RTOKEN_FIELDS);
// - MACs, GIDs and the TEST LINK user data are byte runs (BytesSpec) read by helpers.

import { defineView, type FieldTable } from './field.js';

/** Bytes 0–3 of every LLC message. */
export const LLC_HEADER_FIELDS = {
  type: { at: 0, size: 1, label: 'type' },
  /** High nibble of the type: 0 = v1, 2 = v2 (0x8–0xB: z/OS optional messages). */
  typeVersion: { at: 0, size: 1, shift: 4, mask: 15 },
  typeCode: { at: 0, size: 1, shift: 0, mask: 15 },
  /** v1: one byte. */
  length: { at: 1, size: 1, label: 'length' },
  /** v2: two bytes in the sender's host order, declared in both readings. */
  lengthLe: { at: 1, size: 2, le: true, label: 'length (host order)' },
  lengthBe: { at: 1, size: 2 },
  /** v1: reserved but for ADD LINK / REQUEST ADD LINK, whose low nibble is the reject reason. */
  byte2: { at: 2, size: 1 },
  rejectReason: { at: 2, size: 1, shift: 0, mask: 15, label: 'reject reason' },
  byte2High: { at: 2, size: 1, shift: 4, mask: 15 },
  flags: { at: 3, size: 1, label: 'flags' },
  response: { at: 3, size: 1, shift: 7, mask: 1, bool: true },
} as const satisfies FieldTable;

/** The fixed LLC message size (v1 always, v2 for most types). */
export const LLC_MSG_SIZE = 44;

export const LLC_CONFIRM_LINK_FIELDS = {
  /** Both bits set (value 3): the RMBE has no eyecatcher (Linux always sets them). */
  noRmbeEyecatcher: { at: 3, size: 1, shift: 0, mask: 3, label: 'no RMBE eyecatcher' },
  mac: { at: 4, len: 6, label: 'sender MAC' },
  gid: { at: 10, len: 16, label: 'sender GID' },
  qpn: { at: 26, size: 3, label: 'sender QPN' },
  linkId: { at: 29, size: 1, label: 'link id' },
  /** Link user id, big-endian u32 (Linux: LG number + link id). */
  linkUid: { at: 30, size: 4, label: 'link user id' },
  maxLinks: { at: 34, size: 1, label: 'max links' },
  maxConns: { at: 35, size: 1, label: 'max conns' },
  reserved36: { at: 36, len: 8 },
} as const satisfies FieldTable;

export const LLC_ADD_LINK_FIELDS = {
  rejected: { at: 3, size: 1, shift: 6, mask: 1, bool: true, label: 'rejected' },
  mac: { at: 4, len: 6, label: 'sender MAC' },
  reserved10: { at: 10, len: 2 },
  gid: { at: 12, len: 16, label: 'sender GID' },
  qpn: { at: 28, size: 3, label: 'sender QPN' },
  linkId: { at: 31, size: 1, label: 'link id' },
  mtuByte: { at: 32, size: 1, label: 'QP MTU' },
  /** QP MTU code (3 = 1024). */
  mtu: { at: 32, size: 1, shift: 0, mask: 15 },
  mtuReserved: { at: 32, size: 1, shift: 4, mask: 15 },
  psn: { at: 33, size: 3, label: 'initial PSN' },
  reserved36: { at: 36, len: 8 },
  // v2 extension (present when the v2 message is longer than 44 bytes)
  extFlags: { at: 44, size: 1, label: 'v2 direct' },
  direct: { at: 44, size: 1, shift: 7, mask: 1, bool: true },
  extFlagsReserved: { at: 44, size: 1, shift: 0, mask: 0x7f },
  reserved45: { at: 45, len: 1 },
  targetGid: { at: 46, len: 16, label: 'client target GID' },
  reserved62: { at: 62, len: 8 },
  /** Rkey count in the sender's host order, declared in both readings. */
  numRkeysLe: { at: 70, size: 2, le: true, label: 'number of rkeys (host order)' },
  numRkeysBe: { at: 70, size: 2 },
  /** First rkey entry (LLC_RKEY_ENTRY_FIELDS). */
  rkeys: { at: 72, len: 16, label: 'rkey entry' },
} as const satisfies FieldTable;

/** One rkey entry of ADD LINK v2 / ADD LINK CONT, 16 bytes. */
const LLC_RKEY_ENTRY_FIELDS = {
  rkey: { at: 0, size: 4 },
  rkeyNew: { at: 4, size: 4 },
  vaddrNew: { at: 8, size: 8 },
} as const satisfies FieldTable;

export const LLC_ADD_LINK_CONT_FIELDS = {
  linkId: { at: 4, size: 1, label: 'link id' },
  numRkeys: { at: 5, size: 1, label: 'rkeys remaining' },
  reserved6: { at: 6, len: 2 },
  /** First of the 2 rkey entry slots. */
  rkeys: { at: 8, len: 16, label: 'rkey entry' },
  reserved40: { at: 40, len: 4 },
} as const satisfies FieldTable;
export const LLC_ADD_LINK_CONT_SLOTS = 2;

export const LLC_DELETE_LINK_FIELDS = {
  all: { at: 3, size: 1, shift: 6, mask: 1, bool: true, label: 'all' },
  orderly: { at: 3, size: 1, shift: 5, mask: 1, bool: true, label: 'orderly' },
  linkId: { at: 4, size: 1, label: 'link id' },
  reason: { at: 5, size: 4, label: 'reason' },
  reserved9: { at: 9, len: 35 },
} as const satisfies FieldTable;

export const LLC_REQUEST_ADD_LINK_FIELDS = {
  rejected: { at: 3, size: 1, shift: 6, mask: 1, bool: true, label: 'rejected' },
  reserved4: { at: 4, len: 20 },
  gidCount: { at: 24, size: 1, label: 'GID count' },
  reserved25: { at: 25, len: 3 },
  /** First GID; `gidCount` of them. */
  gids: { at: 28, len: 16, label: 'GID' },
} as const satisfies FieldTable;

export const LLC_CONFIRM_RKEY_FIELDS = {
  negative: { at: 3, size: 1, shift: 5, mask: 1, bool: true, label: 'negative' },
  retry: { at: 3, size: 1, shift: 4, mask: 1, bool: true, label: 'retry' },
  numRtokens: { at: 4, size: 1, label: 'additional rtokens' },
  /** rtoken 0 (no link id: the link this message is sent on). */
  rkey: { at: 5, size: 4, label: 'rtoken 0' },
  vaddr: { at: 9, size: 8 },
  /** First of the 2 further rtoken slots (LLC_RTOKEN_FIELDS). */
  others: { at: 17, len: 13, label: 'rtoken' },
  reserved43: { at: 43, len: 1 },
} as const satisfies FieldTable;
export const LLC_CONFIRM_RKEY_SLOTS = 2;

/** One rtoken of CONFIRM RKEY (CONT), 13 bytes. */
const LLC_RTOKEN_FIELDS = {
  linkId: { at: 0, size: 1 },
  rkey: { at: 1, size: 4 },
  vaddr: { at: 5, size: 8 },
} as const satisfies FieldTable;

export const LLC_CONFIRM_RKEY_CONT_FIELDS = {
  numRemaining: { at: 4, size: 1, label: 'rkeys remaining' },
  /** First of the 3 rtoken slots. */
  rtokens: { at: 5, len: 13, label: 'rtoken' },
} as const satisfies FieldTable;
export const LLC_CONFIRM_RKEY_CONT_SLOTS = 3;

export const LLC_TEST_LINK_FIELDS = {
  /** Echoed by the response. */
  userData: { at: 4, len: 16, label: 'user data' },
  reserved20: { at: 20, len: 24 },
} as const satisfies FieldTable;

export const LLC_DELETE_RKEY_FIELDS = {
  negative: { at: 3, size: 1, shift: 5, mask: 1, bool: true, label: 'negative' },
  numRkeys: { at: 4, size: 1, label: 'number of rkeys' },
  /** v1 / fixed form: error mask (0x80 = first rkey failed); v2 variable form: invalid rkeys. */
  errorMask: { at: 5, size: 1, label: 'error mask' },
  reserved6: { at: 6, len: 2 },
  /** First rkey (u32); the fixed form has 8 slots, the v2 variable form runs to the end. */
  rkeys: { at: 8, len: 4, label: 'rkey' },
  reserved40: { at: 40, len: 4 },
} as const satisfies FieldTable;
export const LLC_DELETE_RKEY_SLOTS = 8;

/** A message of unknown type: its bytes from 4 on. */
export const LLC_UNKNOWN_FIELDS = {
  body: { at: 4, len: 0, label: 'body' },
} as const satisfies FieldTable;

export const LlcHeaderView = defineView('LlcHeaderView', LLC_HEADER_FIELDS);
export const LlcConfirmLinkView = defineView('LlcConfirmLinkView', LLC_CONFIRM_LINK_FIELDS);
export const LlcAddLinkView = defineView('LlcAddLinkView', LLC_ADD_LINK_FIELDS);
export const LlcRkeyEntryView = defineView('LlcRkeyEntryView', LLC_RKEY_ENTRY_FIELDS);
export const LlcAddLinkContView = defineView('LlcAddLinkContView', LLC_ADD_LINK_CONT_FIELDS);
export const LlcDeleteLinkView = defineView('LlcDeleteLinkView', LLC_DELETE_LINK_FIELDS);
export const LlcRequestAddLinkView = defineView('LlcRequestAddLinkView', LLC_REQUEST_ADD_LINK_FIELDS);
export const LlcConfirmRkeyView = defineView('LlcConfirmRkeyView', LLC_CONFIRM_RKEY_FIELDS);
export const LlcRtokenView = defineView('LlcRtokenView', LLC_RTOKEN_FIELDS);
export const LlcConfirmRkeyContView = defineView('LlcConfirmRkeyContView', LLC_CONFIRM_RKEY_CONT_FIELDS);
export const LlcDeleteRkeyView = defineView('LlcDeleteRkeyView', LLC_DELETE_RKEY_FIELDS);
