// LLC (link layer control) messages of SMC-R: formats.md §8 (RFC 7609 A.3, IBM SMCv2, Linux smc_llc).
//
// One complete SEND payload in (the RoCE layer reassembles SEND FIRST/MIDDLE/LAST; it may also hand
// over only the first 44 bytes of a longer v2 message). Byte 0 = version nibble | type nibble
// (0x0X = v1, 0x2X = v2); CDC (0xFE) is a different codec (cdc.ts).
//
// Traps handled here (formats.md §12): the v2 length (bytes 1–2) and the ADD LINK v2 rkey count are
// HOST order (x86 sends little-endian, s390 big-endian) — the order seen is reported and re-used by
// encode; the ADD LINK reject reason nibble lives in byte 2, which in v2 is half of the length.
//
// Exactness: every value carries what encode needs to reproduce the bytes: raw type byte, length and
// its byte order, flag bits without a name (`flagsOther`), non-zero reserved bytes (`reserved`, OR-ed
// back on encode) and bytes past the message structure (`trailing`).

//
// Every offset and flag bit is declared once, in ./views/llc.ts; decode, the `-V` tree and
// encode read and write through those views.

import type { Decoded, Issue, TextSink, Tree } from './common.js';
// cached address text (same strings as ipv6Str/macStr): the tracker interns them
import { ipv6At, macAt } from '../net/addr.js';
import { hex, hex32, issue, mtuFromCode, need, parseIpv6, parseMac, put32, StringSink, u32, writeHexN } from './common.js';
import { addField, addSpan, entryAt, fieldBits, type BytesSpec, type FieldSpec } from './views/field.js';
import {
  LLC_HEADER_FIELDS, LLC_MSG_SIZE, LLC_CONFIRM_LINK_FIELDS, LLC_ADD_LINK_FIELDS, LLC_ADD_LINK_CONT_FIELDS, LLC_ADD_LINK_CONT_SLOTS,
  LLC_DELETE_LINK_FIELDS, LLC_REQUEST_ADD_LINK_FIELDS, LLC_CONFIRM_RKEY_FIELDS, LLC_CONFIRM_RKEY_SLOTS,
  LLC_CONFIRM_RKEY_CONT_FIELDS, LLC_CONFIRM_RKEY_CONT_SLOTS, LLC_TEST_LINK_FIELDS, LLC_DELETE_RKEY_FIELDS, LLC_DELETE_RKEY_SLOTS,
  LLC_UNKNOWN_FIELDS, LlcHeaderView, LlcConfirmLinkView, LlcAddLinkView, LlcRkeyEntryView, LlcAddLinkContView, LlcDeleteLinkView,
  LlcRequestAddLinkView, LlcConfirmRkeyView, LlcRtokenView, LlcConfirmRkeyContView, LlcDeleteRkeyView,
} from './views/llc.js';

export { LLC_MSG_SIZE } from './views/llc.js';
const LLC_V2_MAX_SIZE = 8192;

/** Type codes (low nibble; v2 = 0x20 | code). */
export const LlcCode = {
  CONFIRM_LINK: 0x01,
  ADD_LINK: 0x02,
  ADD_LINK_CONT: 0x03,
  DELETE_LINK: 0x04,
  REQUEST_ADD_LINK: 0x05,
  CONFIRM_RKEY: 0x06,
  TEST_LINK: 0x07,
  CONFIRM_RKEY_CONT: 0x08,
  DELETE_RKEY: 0x09,
} as const;

/** Byte 0 for a message kind code in an LLC version: `llcTypeByte(LlcCode.CONFIRM_LINK, 2)` = 0x21. */
export function llcTypeByte(code: number, version: 1 | 2): number {
  return (version === 2 ? 0x20 : 0) | (code & 0x0f);
}

const CODE_NAMES: readonly string[] = [
  '', 'CONFIRM LINK', 'ADD LINK', 'ADD LINK CONT', 'DELETE LINK', 'REQUEST ADD LINK',
  'CONFIRM RKEY', 'TEST LINK', 'CONFIRM RKEY CONT', 'DELETE RKEY',
];

/** Human name of an LLC type byte (incl. the optional z/OS class 0x80–0xBF). */
export function llcTypeName(type: number): string {
  const nib = type >> 4;
  const code = type & 0x0f;
  if ((nib === 0 || nib === 2) && code >= 1 && code <= 9) return CODE_NAMES[code]!;
  if (type === 0x80) return 'OPT Message Control';
  if (type === 0x8a) return 'NWM Data';
  if (type >= 0x80 && type <= 0xbf) return `optional 0x${hex2(type)}`;
  if (type === 0xfe) return 'CDC';
  return `unknown 0x${hex2(type)}`;
}

/** DELETE LINK reason codes (request reasons and response codes), formats.md §8.6; Linux
 *  SMC_LLC_DEL_*. */
export const DEL_REASON = {
  LOST_PATH: 0x00010000, OP_INIT_TERM: 0x00020000, PROG_INIT_TERM: 0x00030000, PROT_VIOL: 0x00040000,
  NO_ASYM_NEEDED: 0x00050000, NOLNK: 0x00100000, NOLGR: 0x00200000,
} as const;

export const DELETE_LINK_REASONS: Readonly<Record<number, string>> = {
  [DEL_REASON.LOST_PATH]: 'lost path',
  [DEL_REASON.OP_INIT_TERM]: 'operator-initiated termination',
  [DEL_REASON.PROG_INIT_TERM]: 'program-initiated termination',
  [DEL_REASON.PROT_VIOL]: 'LLC protocol violation',
  [DEL_REASON.NO_ASYM_NEEDED]: 'asymmetric link no longer needed',
  [DEL_REASON.NOLNK]: 'unknown link id',
  [DEL_REASON.NOLGR]: 'link group not found',
};

export function deleteLinkReason(code: number): string {
  return DELETE_LINK_REASONS[code >>> 0] ?? (code === 0 ? 'no reason' : 'unknown reason');
}

/** ADD LINK / REQUEST ADD LINK reject reasons (byte 2 low nibble), formats.md §8.4. */
const ADD_LINK_REJECT_REASONS: Readonly<Record<number, string>> = {
  1: 'no alternate path',
};

export function addLinkRejectReason(code: number): string {
  return ADD_LINK_REJECT_REASONS[code] ?? (code === 0 ? 'unspecified' : 'unknown reason');
}

// ---- values ----

export type LengthOrder = 'le' | 'be';

/** Reserved bytes found non-zero (OR-ed back by encode; masked to the reserved bits for nibbles). */
export interface LlcReservedBytes {
  offset: number;
  bytes: Uint8Array;
}

export interface LlcCommon {
  llcVersion: 1 | 2;
  /** Byte 0 as sent (0x21 = CONFIRM LINK v2). */
  type: number;
  /** v1: byte 1; v2: bytes 1–2 read in `lengthOrder`. Written back verbatim by encode. */
  length: number;
  /** v2 only: byte order of the host-order length (x86 'le', s390 'be'). */
  lengthOrder?: LengthOrder;
  /** Flag 0x80. */
  response: boolean;
  /** Flag bits that have no meaning for this type (present only if non-zero). */
  flagsOther?: number;
  /** Non-zero reserved bytes (present only if any). */
  reserved?: LlcReservedBytes[];
  /** Bytes after the message structure (present only if any). */
  trailing?: Uint8Array;
}

export interface LlcConfirmLink extends LlcCommon {
  kind: 'confirm_link';
  /** Flags 0x03 both set (Linux always sets them). */
  noRmbeEyecatcher: boolean;
  mac: string;
  gid: string;
  qpn: number;
  linkId: number;
  /** Link user id as big-endian u32 (Linux: LG number + link id; smc netlink shows it byte-swapped on x86). */
  linkUid: number;
  maxLinks: number;
  maxConns: number;
}

export interface LlcRkeyEntry {
  /** rkey of the RMB on the existing link. */
  rkey: number;
  /** rkey of the same RMB on the new link. */
  rkeyNew: number;
  /** virtual address of the RMB on the new link. */
  vaddrNew: bigint;
}

export interface LlcAddLinkV2Ext {
  direct: boolean;
  targetGid: string;
  /** Rkey count as sent (host order, see `numRkeysOrder`); may differ from rkeys.length if truncated. */
  numRkeys: number;
  numRkeysOrder: LengthOrder;
  rkeys: LlcRkeyEntry[];
}

export interface LlcAddLink extends LlcCommon {
  kind: 'add_link';
  rejected: boolean;
  /** Byte 2 low nibble. v1: always decoded. v2: only when rejected (then byte 2 is shared with the length). */
  rejectReason: number;
  mac: string;
  gid: string;
  qpn: number;
  linkId: number;
  /** QP MTU code (3 = 1024). */
  mtu: number;
  psn: number;
  /** v2 extension (bytes 44…), present when the message carries it. */
  v2?: LlcAddLinkV2Ext;
}

export interface LlcAddLinkCont extends LlcCommon {
  kind: 'add_link_cont';
  linkId: number;
  /** Number of rkeys remaining (this message carries ≤ 2). */
  numRkeys: number;
  /** Always the two slots of the message. */
  rkeys: LlcRkeyEntry[];
}

export interface LlcDeleteLink extends LlcCommon {
  kind: 'delete_link';
  all: boolean;
  orderly: boolean;
  linkId: number;
  /** See DELETE_LINK_REASONS / deleteLinkReason(). */
  reason: number;
}

export interface LlcRequestAddLink extends LlcCommon {
  kind: 'request_add_link';
  rejected: boolean;
  rejectReason: number;
  gidCount: number;
  gids: string[];
}

export interface LlcRtoken {
  linkId: number;
  rkey: number;
  vaddr: bigint;
}

export interface LlcConfirmRkey extends LlcCommon {
  kind: 'confirm_rkey';
  negative: boolean;
  retry: boolean;
  /** Byte 4: number of additional rtokens (0–2). */
  numRtokens: number;
  /** rtoken 0: the RMB on the link this message is sent on. */
  rkey: number;
  vaddr: bigint;
  /** rtokens 1 and 2 (always both slots). */
  others: LlcRtoken[];
}

export interface LlcConfirmRkeyCont extends LlcCommon {
  kind: 'confirm_rkey_cont';
  numRemaining: number;
  /** Always the three slots. */
  rtokens: LlcRtoken[];
}

export interface LlcTestLink extends LlcCommon {
  kind: 'test_link';
  /** 16 bytes at 4, echoed by the response. */
  userData: Uint8Array;
}

export interface LlcDeleteRkey extends LlcCommon {
  kind: 'delete_rkey';
  negative: boolean;
  numRkeys: number;
  /** v1: error mask (0x80 = first rkey failed); v2 variable form: number of invalid rkeys. */
  errorMask: number;
  /** v2 variable form (length ≠ 44): rkeys from byte 8 to the end; else the 44-byte form with 8 slots. */
  variable: boolean;
  /** Fixed form: the first min(numRkeys, 8) slots; variable form: the rkeys carried. */
  rkeys: number[];
}

export interface LlcUnknown extends LlcCommon {
  kind: 'unknown';
  /** Bytes 4… of the message. */
  body: Uint8Array;
}

export type LlcMessage =
  | LlcConfirmLink | LlcAddLink | LlcAddLinkCont | LlcDeleteLink | LlcRequestAddLink
  | LlcConfirmRkey | LlcConfirmRkeyCont | LlcTestLink | LlcDeleteRkey | LlcUnknown;

export type LlcKind = LlcMessage['kind'];

// ---- small internals ----

function hex2(v: number): string { return (v & 0xff).toString(16).padStart(2, '0'); }
function hx(v: number): string { return '0x' + (v >>> 0).toString(16); }
function hx64(v: bigint): string { return '0x' + v.toString(16).padStart(16, '0'); }

/** Records non-zero reserved bytes [o, o+n) (clipped to `end`) and returns the (possibly new) list. */
function rsv(b: Uint8Array, o: number, n: number, end: number, issues: Issue[], list: LlcReservedBytes[] | undefined, t: Tree | undefined): LlcReservedBytes[] | undefined {
  const e = Math.min(o + n, end, b.length);
  let nz = false;
  for (let i = o; i < e; i++) if (b[i] !== 0) { nz = true; break; }
  if (!nz) return list;
  const out = list ?? [];
  out.push({ offset: o, bytes: b.slice(o, e) });
  issue(issues, 'warn', 'llc.reserved', `reserved bytes ${o}..${e - 1} not zero`, o, e - o);
  t?.add('reserved (non-zero)', o, e - o, hex(b, o, e - o));
  return out;
}

/** rsv() for a reserved run declared in a table. */
function rsvRun(b: Uint8Array, s: BytesSpec, end: number, issues: Issue[], list: LlcReservedBytes[] | undefined, t: Tree | undefined): LlcReservedBytes[] | undefined {
  return rsv(b, s.at, s.len, end, issues, list, t);
}

/** Same for reserved bits of one byte (a bit field declared in a table). */
function rsvBits(b: Uint8Array, s: FieldSpec, issues: Issue[], list: LlcReservedBytes[] | undefined): LlcReservedBytes[] | undefined {
  const o = s.at;
  if (o >= b.length) return list;
  const v = b[o]! & fieldBits(s);
  if (v === 0) return list;
  const out = list ?? [];
  out.push({ offset: o, bytes: Uint8Array.of(v) });
  issue(issues, 'warn', 'llc.reserved', `reserved bits 0x${hex2(v)} set in byte ${o}`, o, 1);
  return out;
}

// One view per table, re-pointed per message (decode and encode run one at a time).
const headerV = new LlcHeaderView();
const confirmLinkV = new LlcConfirmLinkView();
const addLinkV = new LlcAddLinkView();
const rkeyEntryV = new LlcRkeyEntryView();
const addLinkContV = new LlcAddLinkContView();
const deleteLinkV = new LlcDeleteLinkView();
const requestAddLinkV = new LlcRequestAddLinkView();
const confirmRkeyV = new LlcConfirmRkeyView();
const rtokenV = new LlcRtokenView();
const confirmRkeyContV = new LlcConfirmRkeyContView();
const deleteRkeyV = new LlcDeleteRkeyView();

const HF = LLC_HEADER_FIELDS;
/** Size of the header (type, length, flags): type-specific fields start here. */
const LLC_HEADER_LEN = LLC_UNKNOWN_FIELDS.body.at;

// Flag bits of byte 3 (from the tables) and, per type, the bits that have no meaning.
const FLAG_RESP = fieldBits(HF.response);
const FLAG_NO_RMBE_EYEC = fieldBits(LLC_CONFIRM_LINK_FIELDS.noRmbeEyecatcher);
const FLAG_REJ = fieldBits(LLC_ADD_LINK_FIELDS.rejected);
const FLAG_ALL = fieldBits(LLC_DELETE_LINK_FIELDS.all);
const FLAG_ORDERLY = fieldBits(LLC_DELETE_LINK_FIELDS.orderly);
const FLAG_NEG = fieldBits(LLC_CONFIRM_RKEY_FIELDS.negative);
const FLAG_RETRY = fieldBits(LLC_CONFIRM_RKEY_FIELDS.retry);
const OTHER_FLAGS = 0xff & ~FLAG_RESP;
const OTHER_ADD_LINK = OTHER_FLAGS & ~FLAG_REJ;
const OTHER_DELETE_LINK = OTHER_FLAGS & ~FLAG_ALL & ~FLAG_ORDERLY;
const OTHER_CONFIRM_RKEY = OTHER_FLAGS & ~FLAG_NEG & ~FLAG_RETRY;
const OTHER_DELETE_RKEY = OTHER_FLAGS & ~FLAG_NEG;

function rkeyEntry(b: Uint8Array, o: number): LlcRkeyEntry {
  const v = rkeyEntryV.reset(b, o);
  return { rkey: v.rkey, rkeyNew: v.rkeyNew, vaddrNew: v.vaddrNew };
}

function rtoken(b: Uint8Array, o: number): LlcRtoken {
  const v = rtokenV.reset(b, o);
  return { linkId: v.linkId, rkey: v.rkey, vaddr: v.vaddr };
}

function lenPlausible(n: number): boolean { return n >= LLC_MSG_SIZE && n <= LLC_V2_MAX_SIZE; }

/** The v2 length is in the sender's host order (formats.md §12): which reading fits the bytes
 *  present, and the issues when neither clearly does. */
function v2Length(le: number, be: number, avail: number, rejectNibbleInLength: boolean, issues: Issue[]): { length: number; order: LengthOrder; handled: boolean } {
  const at = HF.lengthLe.at, n = HF.lengthLe.size;
  if (rejectNibbleInLength) {
    // formats.md §12.16: reject reason nibble written into byte 2 = high byte of an LE length
    issue(issues, 'warn', 'llc.reject-length', `length 0x${le.toString(16).padStart(4, '0')} (LE) carries the reject reason nibble ${(le >> 8) & 0x0f} in byte 2; ${avail} bytes sent (formats.md §12.16)`, at, n);
    return { length: le, order: 'le', handled: true };
  }
  if (le === be || le === avail) return { length: le, order: 'le', handled: false };
  if (be === avail) return { length: be, order: 'be', handled: false };
  if (lenPlausible(le) && !lenPlausible(be)) return { length: le, order: 'le', handled: false };
  if (lenPlausible(be) && !lenPlausible(le)) return { length: be, order: 'be', handled: false };
  if (lenPlausible(le)) {
    issue(issues, 'warn', 'llc.length-order', `v2 length byte order ambiguous (LE ${le}, BE ${be}, ${avail} bytes present); assuming LE`, at, n);
    return { length: le, order: 'le', handled: false };
  }
  // neither plausible: take the one closer to the bytes present
  const order: LengthOrder = Math.abs(be - avail) < Math.abs(le - avail) ? 'be' : 'le';
  issue(issues, 'warn', 'llc.length-order', `v2 length implausible in both byte orders (LE ${le}, BE ${be}, ${avail} bytes present); assuming ${order.toUpperCase()}`, at, n);
  return { length: order === 'be' ? be : le, order, handled: false };
}

// ---- decode ----

/**
 * Decodes one LLC message (complete SEND payload, or the first 44 bytes of a longer v2 one).
 * Never throws.
 */
export function decodeLlc(b: Uint8Array, t?: Tree): Decoded<LlcMessage> {
  const issues: Issue[] = [];
  const avail = b.length;
  if (avail < LLC_HEADER_LEN) issue(issues, 'error', 'llc.truncated', `truncated LLC header: ${avail} of 4 bytes`, 0, avail);

  const h = headerV.reset(b, 0);
  const type = h.type;
  const nib = h.typeVersion;
  const v2 = nib === 2;
  const llcVersion: 1 | 2 = v2 ? 2 : 1;
  const code = nib === 0 || nib === 2 ? h.typeCode : 0;
  const known = code >= 1 && code <= 9;
  const flags = h.flags;
  const response = h.response;
  const b2 = h.byte2;

  if (t) addField(t, HF.type, `0x${hex2(type)} ${llcTypeName(type)} v${llcVersion}`);
  if (!known) {
    if (type >= 0x80 && type <= 0xbf) {
      issue(issues, 'note', 'llc.optional', `optional LLC message ${llcTypeName(type)} (z/OS; Linux never sends these)`, HF.type.at, 1);
    } else {
      issue(issues, 'warn', 'llc.type', `unknown LLC type 0x${hex2(type)}`, HF.type.at, 1);
    }
  } else if ((!v2 && code === LlcCode.REQUEST_ADD_LINK) || (v2 && (code === LlcCode.ADD_LINK_CONT || code === LlcCode.CONFIRM_RKEY_CONT))) {
    issue(issues, 'note', 'llc.type', `type 0x${hex2(type)}: ${CODE_NAMES[code]} is not defined for LLC v${llcVersion}`, HF.type.at, 1);
  }

  // ---- length ----
  let length: number;
  let lengthOrder: LengthOrder | undefined;
  const addLinkLike = code === LlcCode.ADD_LINK || code === LlcCode.REQUEST_ADD_LINK;
  const rejectFlag = addLinkLike && (flags & FLAG_REJ) !== 0;
  if (!v2) {
    length = h.length;
    if (t) addField(t, HF.length, length);
    if (length !== LLC_MSG_SIZE && known && avail >= 2) issue(issues, 'warn', 'llc.length', `LLC v1 length ${length}, must be 44`, HF.length.at, 1);
  } else {
    const le = h.lengthLe;
    const nibbleInLength = rejectFlag && h.rejectReason !== 0 && (le & 0xf0ff) === avail && avail >= LLC_HEADER_LEN;
    const r = v2Length(le, h.lengthBe, avail, nibbleInLength, issues);
    length = r.length; lengthOrder = r.order;
    if (t) addField(t, HF.lengthLe, `${length} [${lengthOrder}]`);
    if (!r.handled && avail >= LLC_HEADER_LEN) {
      if (!lenPlausible(length)) {
        issue(issues, 'warn', 'llc.length', `LLC v2 length ${length} outside 44..8192`, HF.lengthLe.at, HF.lengthLe.size);
      }
      if (length > avail && avail >= LLC_HEADER_LEN) {
        issue(issues, 'note', 'llc.partial', `message declares ${length} bytes, ${avail} present`, 0, avail);
      }
    }
  }
  if (t) addField(t, HF.flags, '0x' + hex2(flags) + (response ? ' response' : ' request'));

  // Structure end for variable-size messages: the declared length when it fits, else what is present.
  const varEnd = length >= LLC_HEADER_LEN && length <= avail ? length : avail;

  let reserved: LlcReservedBytes[] | undefined;

  // v1 header byte 2: reserved (reject reason nibble for ADD LINK / REQUEST ADD LINK)
  let rejectReason = 0;
  if (addLinkLike) {
    if (!v2) {
      rejectReason = h.rejectReason;
      reserved = rsvBits(b, HF.byte2High, issues, reserved);
      if (rejectReason !== 0 && !rejectFlag) issue(issues, 'note', 'llc.reject-reason', `reject reason ${rejectReason} without the reject flag`, HF.byte2.at, 1);
    } else if (rejectFlag) {
      rejectReason = b2 & 0x0f;
      issue(issues, 'note', 'llc.reject-reason', lengthOrder === 'le'
        ? `v2 reject: the reason nibble shares byte 2 with the host-order length (reason ${rejectReason}${rejectReason === 0 ? ', i.e. lost: Linux 6.12 sends the reject with a fresh 44-byte header' : ''})`
        : `v2 reject with a big-endian length: byte 2 low nibble (${rejectReason}) is part of the length, not a reason`, HF.byte2.at, 1);
    }
    if (t && (rejectFlag || rejectReason !== 0)) addField(t, HF.rejectReason, `${rejectReason} ${addLinkRejectReason(rejectReason)}`);
  } else if (!v2) {
    reserved = rsv(b, HF.byte2.at, HF.byte2.size, HF.byte2.at + HF.byte2.size, issues, reserved, t);
  }

  // the header as the per-type decoders see it (one module-level record: nothing allocated)
  const x = ctx;
  x.llcVersion = llcVersion; x.type = type; x.length = length; x.response = response; x.flags = flags; x.v2 = v2;
  x.varEnd = varEnd; x.avail = avail; x.rejectFlag = rejectFlag; x.rejectReason = rejectReason;
  x.lengthOrder = lengthOrder; x.reserved = reserved; x.flagsOther = 0; x.structEnd = LLC_MSG_SIZE;
  let m: LlcMessage;
  switch (known ? code : 0) {
    case LlcCode.CONFIRM_LINK:
      m = llcConfirmLink(b, t, issues, x);
      break;
    case LlcCode.ADD_LINK:
      m = llcAddLink(b, t, issues, x);
      break;
    case LlcCode.ADD_LINK_CONT:
      m = llcAddLinkCont(b, t, issues, x);
      break;
    case LlcCode.DELETE_LINK:
      m = llcDeleteLink(b, t, issues, x);
      break;
    case LlcCode.REQUEST_ADD_LINK:
      m = llcRequestAddLink(b, t, issues, x);
      break;
    case LlcCode.CONFIRM_RKEY:
      m = llcConfirmRkey(b, t, issues, x);
      break;
    case LlcCode.CONFIRM_RKEY_CONT:
      m = llcConfirmRkeyCont(b, t, issues, x);
      break;
    case LlcCode.TEST_LINK:
      m = llcTestLink(b, t, issues, x);
      break;
    case LlcCode.DELETE_RKEY:
      m = llcDeleteRkey(b, t, issues, x);
      break;
    default:
      m = llcUnknown(b, t, issues, x);
      break;
  }
  const { flagsOther, structEnd } = x;
  reserved = x.reserved;
  x.reserved = undefined;

  if (v2) m.lengthOrder = lengthOrder;
  if (flagsOther !== 0) {
    m.flagsOther = flagsOther;
    if (m.kind !== 'unknown') issue(issues, 'warn', 'llc.flags', `undefined flag bits 0x${hex2(flagsOther)} for ${llcTypeName(type)}`, HF.flags.at, 1);
  }
  if (reserved) m.reserved = reserved;
  if (avail > structEnd) {
    m.trailing = b.slice(structEnd);
    issue(issues, 'warn', 'llc.trailing', `${avail - structEnd} bytes after the ${llcTypeName(type)} message`, structEnd, avail - structEnd);
    t?.add('trailing', structEnd, avail - structEnd, hex(b, structEnd));
  }
  if (v2 && known && isFixedV2(code) && length !== LLC_MSG_SIZE && avail >= LLC_HEADER_LEN) {
    issue(issues, 'warn', 'llc.length', `${llcTypeName(type)} v2 length ${length}, expected 44`, HF.lengthLe.at, HF.lengthLe.size);
  }
  return { value: m, issues };
}

/** What decodeLlc hands its per-type decoders, and what they hand back (reserved bytes found,
 *  flag bits without meaning, where the structure ends). */
interface LlcCtx {
  llcVersion: 1 | 2; type: number; length: number; response: boolean; flags: number; v2: boolean;
  /** End of a variable-size structure: the declared length when it fits, else the bytes present. */
  varEnd: number; avail: number; rejectFlag: boolean; rejectReason: number; lengthOrder: LengthOrder | undefined;
  reserved: LlcReservedBytes[] | undefined; flagsOther: number; structEnd: number;
}
const ctx: LlcCtx = {
  llcVersion: 1, type: 0, length: 0, response: false, flags: 0, v2: false, varEnd: 0, avail: 0, rejectFlag: false,
  rejectReason: 0, lengthOrder: undefined, reserved: undefined, flagsOther: 0, structEnd: LLC_MSG_SIZE,
};

function llcConfirmLink(b: Uint8Array, t: Tree | undefined, issues: Issue[], x: LlcCtx): LlcMessage {
  const { llcVersion, type, length, response, flags } = x;
  let reserved = x.reserved;
  need(b, 0, LLC_MSG_SIZE, issues, 'llc.truncated', 'CONFIRM LINK');
  const F = LLC_CONFIRM_LINK_FIELDS;
  const v = confirmLinkV.reset(b, 0);
  const noRmbe = v.noRmbeEyecatcher === F.noRmbeEyecatcher.mask;
  x.flagsOther = flags & (noRmbe ? OTHER_FLAGS & ~FLAG_NO_RMBE_EYEC : OTHER_FLAGS);
  const cl: LlcConfirmLink = {
    kind: 'confirm_link', llcVersion, type, length, response, noRmbeEyecatcher: noRmbe,
    mac: macAt(b, F.mac.at), gid: ipv6At(b, F.gid.at), qpn: v.qpn, linkId: v.linkId,
    linkUid: v.linkUid, maxLinks: v.maxLinks, maxConns: v.maxConns,
  };
  if (t) {
    addField(t, F.noRmbeEyecatcher, String(noRmbe));
    addField(t, F.mac, cl.mac);
    addField(t, F.gid, cl.gid);
    addField(t, F.qpn, hx(cl.qpn));
    addField(t, F.linkId, cl.linkId);
    addField(t, F.linkUid, hex32(cl.linkUid));
    addField(t, F.maxLinks, cl.maxLinks);
    addField(t, F.maxConns, cl.maxConns);
  }
  reserved = rsvRun(b, F.reserved36, LLC_MSG_SIZE, issues, reserved, t);
  x.reserved = reserved;
  return cl;
}

function llcAddLink(b: Uint8Array, t: Tree | undefined, issues: Issue[], x: LlcCtx): LlcMessage {
  const { llcVersion, type, length, response, flags, v2, varEnd, rejectFlag, rejectReason } = x;
  let reserved = x.reserved;
  need(b, 0, LLC_MSG_SIZE, issues, 'llc.truncated', 'ADD LINK');
  x.flagsOther = flags & OTHER_ADD_LINK;
  const F = LLC_ADD_LINK_FIELDS;
  const v = addLinkV.reset(b, 0);
  const al: LlcAddLink = {
    kind: 'add_link', llcVersion, type, length, response, rejected: rejectFlag, rejectReason,
    mac: macAt(b, F.mac.at), gid: ipv6At(b, F.gid.at), qpn: v.qpn, linkId: v.linkId,
    mtu: v.mtu, psn: v.psn,
  };
  reserved = rsvRun(b, F.reserved10, LLC_MSG_SIZE, issues, reserved, t);
  reserved = rsvBits(b, F.mtuReserved, issues, reserved);
  if (t) {
    addField(t, F.rejected, String(rejectFlag));
    addField(t, F.mac, al.mac);
    addField(t, F.gid, al.gid);
    addField(t, F.qpn, hx(al.qpn));
    addField(t, F.linkId, al.linkId);
    addField(t, F.mtuByte, `${al.mtu} (${mtuFromCode(al.mtu)})`);
    addField(t, F.psn, hx(al.psn));
  }
  reserved = rsvRun(b, F.reserved36, LLC_MSG_SIZE, issues, reserved, t);
  if (v2 && varEnd > LLC_MSG_SIZE) {
    x.reserved = reserved;
    const ext = decodeAddLinkV2(b, x, issues, t);
    if (ext) al.v2 = ext;
    return al;
  }
  x.reserved = reserved;
  return al;
}

function llcAddLinkCont(b: Uint8Array, t: Tree | undefined, issues: Issue[], x: LlcCtx): LlcMessage {
  const { llcVersion, type, length, response, flags } = x;
  let reserved = x.reserved;
  need(b, 0, LLC_MSG_SIZE, issues, 'llc.truncated', 'ADD LINK CONT');
  x.flagsOther = flags & OTHER_FLAGS;
  const F = LLC_ADD_LINK_CONT_FIELDS;
  const v = addLinkContV.reset(b, 0);
  const ac: LlcAddLinkCont = { kind: 'add_link_cont', llcVersion, type, length, response, linkId: v.linkId, numRkeys: v.numRkeys, rkeys: [] };
  for (let i = 0; i < LLC_ADD_LINK_CONT_SLOTS; i++) ac.rkeys.push(rkeyEntry(b, entryAt(F.rkeys, i)));
  if (t) {
    addField(t, F.linkId, ac.linkId);
    addField(t, F.numRkeys, ac.numRkeys);
    for (let i = 0; i < LLC_ADD_LINK_CONT_SLOTS; i++) addRkeyEntry(t, F.rkeys, i, ac.rkeys[i]!);
  }
  reserved = rsvRun(b, F.reserved6, LLC_MSG_SIZE, issues, reserved, t);
  reserved = rsvRun(b, F.reserved40, LLC_MSG_SIZE, issues, reserved, t);
  x.reserved = reserved;
  return ac;
}

function llcDeleteLink(b: Uint8Array, t: Tree | undefined, issues: Issue[], x: LlcCtx): LlcMessage {
  const { llcVersion, type, length, response, flags, avail } = x;
  let reserved = x.reserved;
  need(b, 0, LLC_MSG_SIZE, issues, 'llc.truncated', 'DELETE LINK');
  x.flagsOther = flags & OTHER_DELETE_LINK;
  const F = LLC_DELETE_LINK_FIELDS;
  const v = deleteLinkV.reset(b, 0);
  const dl: LlcDeleteLink = { kind: 'delete_link', llcVersion, type, length, response, all: v.all, orderly: v.orderly, linkId: v.linkId, reason: v.reason };
  if (t) {
    addField(t, F.all, String(dl.all));
    addField(t, F.orderly, String(dl.orderly));
    addField(t, F.linkId, dl.linkId);
    addField(t, F.reason, `${hex32(dl.reason)} ${deleteLinkReason(dl.reason)}`);
  }
  if (DELETE_LINK_REASONS[dl.reason] === undefined && avail >= F.reason.at + F.reason.size) {
    issue(issues, 'note', 'llc.reason', `DELETE LINK reason ${hex32(dl.reason)} is not a known code`, F.reason.at, F.reason.size);
  }
  reserved = rsvRun(b, F.reserved9, LLC_MSG_SIZE, issues, reserved, t);
  x.reserved = reserved;
  return dl;
}

function llcRequestAddLink(b: Uint8Array, t: Tree | undefined, issues: Issue[], x: LlcCtx): LlcMessage {
  const { llcVersion, type, length, response, flags, varEnd, avail, rejectFlag, rejectReason } = x;
  let reserved = x.reserved;
  let structEnd = LLC_MSG_SIZE;
  const F = LLC_REQUEST_ADD_LINK_FIELDS;
  const fixed = F.gids.at;
  need(b, 0, fixed, issues, 'llc.truncated', 'REQUEST ADD LINK');
  x.flagsOther = flags & OTHER_ADD_LINK;
  const gidCount = requestAddLinkV.reset(b, 0).gidCount;
  const room = varEnd > fixed ? Math.floor((varEnd - fixed) / F.gids.len) : 0;
  const k = Math.min(gidCount, room);
  const gids: string[] = [];
  for (let i = 0; i < k; i++) gids.push(ipv6At(b, entryAt(F.gids, i)));
  if (gidCount > room && avail >= fixed) {
    if (length > avail) issue(issues, 'note', 'llc.partial', `REQUEST ADD LINK: ${k} of ${gidCount} GIDs present`, fixed, varEnd - fixed);
    else issue(issues, 'warn', 'llc.gids', `REQUEST ADD LINK announces ${gidCount} GIDs, room for ${room}`, F.gidCount.at, 1);
  }
  reserved = rsvRun(b, F.reserved4, varEnd, issues, reserved, t);
  reserved = rsvRun(b, F.reserved25, varEnd, issues, reserved, t);
  if (t) {
    addField(t, F.rejected, String(rejectFlag));
    addField(t, F.gidCount, gidCount);
    for (let i = 0; i < k; i++) addField(t, F.gids, gids[i]!, entryAt(F.gids, i) - F.gids.at, `${F.gids.label} ${i}`);
  }
  structEnd = entryAt(F.gids, k);
  x.reserved = reserved; x.structEnd = structEnd;
  return { kind: 'request_add_link', llcVersion, type, length, response, rejected: rejectFlag, rejectReason, gidCount, gids };
}

function llcConfirmRkey(b: Uint8Array, t: Tree | undefined, issues: Issue[], x: LlcCtx): LlcMessage {
  const { llcVersion, type, length, response, flags, avail } = x;
  let reserved = x.reserved;
  need(b, 0, LLC_MSG_SIZE, issues, 'llc.truncated', 'CONFIRM RKEY');
  x.flagsOther = flags & OTHER_CONFIRM_RKEY;
  const F = LLC_CONFIRM_RKEY_FIELDS;
  const v = confirmRkeyV.reset(b, 0);
  const cr: LlcConfirmRkey = {
    kind: 'confirm_rkey', llcVersion, type, length, response, negative: v.negative, retry: v.retry,
    numRtokens: v.numRtokens, rkey: v.rkey, vaddr: v.vaddr, others: [],
  };
  for (let i = 0; i < LLC_CONFIRM_RKEY_SLOTS; i++) cr.others.push(rtoken(b, entryAt(F.others, i)));
  if (cr.numRtokens > LLC_CONFIRM_RKEY_SLOTS && avail > F.numRtokens.at) issue(issues, 'warn', 'llc.rtokens', `CONFIRM RKEY announces ${cr.numRtokens} additional rtokens (max 2)`, F.numRtokens.at, 1);
  if (t) {
    addField(t, F.negative, String(cr.negative));
    addField(t, F.retry, String(cr.retry));
    addField(t, F.numRtokens, cr.numRtokens);
    addSpan(t, F.rkey, F.vaddr, `rkey ${hex32(cr.rkey)} va ${hx64(cr.vaddr)}`);
    for (let i = 0; i < LLC_CONFIRM_RKEY_SLOTS; i++) addRtoken(t, F.others, i, i + 1, cr.others[i]!);
  }
  reserved = rsvRun(b, F.reserved43, LLC_MSG_SIZE, issues, reserved, t);
  x.reserved = reserved;
  return cr;
}

function llcConfirmRkeyCont(b: Uint8Array, t: Tree | undefined, issues: Issue[], x: LlcCtx): LlcMessage {
  const { llcVersion, type, length, response, flags } = x;
  need(b, 0, LLC_MSG_SIZE, issues, 'llc.truncated', 'CONFIRM RKEY CONT');
  x.flagsOther = flags & OTHER_FLAGS;
  const F = LLC_CONFIRM_RKEY_CONT_FIELDS;
  const cc: LlcConfirmRkeyCont = { kind: 'confirm_rkey_cont', llcVersion, type, length, response, numRemaining: confirmRkeyContV.reset(b, 0).numRemaining, rtokens: [] };
  for (let i = 0; i < LLC_CONFIRM_RKEY_CONT_SLOTS; i++) cc.rtokens.push(rtoken(b, entryAt(F.rtokens, i)));
  if (t) {
    addField(t, F.numRemaining, cc.numRemaining);
    for (let i = 0; i < LLC_CONFIRM_RKEY_CONT_SLOTS; i++) addRtoken(t, F.rtokens, i, i, cc.rtokens[i]!);
  }
  return cc;
}

function llcTestLink(b: Uint8Array, t: Tree | undefined, issues: Issue[], x: LlcCtx): LlcMessage {
  const { llcVersion, type, length, response, flags, avail } = x;
  let reserved = x.reserved;
  need(b, 0, LLC_MSG_SIZE, issues, 'llc.truncated', 'TEST LINK');
  x.flagsOther = flags & OTHER_FLAGS;
  const F = LLC_TEST_LINK_FIELDS;
  const ud = new Uint8Array(F.userData.len);
  ud.set(b.subarray(F.userData.at, Math.min(F.userData.at + F.userData.len, avail)));
  if (t) addField(t, F.userData, hex(ud));
  reserved = rsvRun(b, F.reserved20, LLC_MSG_SIZE, issues, reserved, t);
  x.reserved = reserved;
  return { kind: 'test_link', llcVersion, type, length, response, userData: ud };
}

function llcUnknown(b: Uint8Array, t: Tree | undefined, issues: Issue[], x: LlcCtx): LlcMessage {
  const { llcVersion, type, length, response, flags, v2, varEnd, avail } = x;
  let structEnd = LLC_MSG_SIZE;
  x.flagsOther = flags & OTHER_FLAGS;
  if (!v2 && length > avail && avail >= LLC_HEADER_LEN) issue(issues, 'error', 'llc.truncated', `truncated ${llcTypeName(type)}: ${avail} of ${length} bytes`, 0, avail);
  const B = LLC_UNKNOWN_FIELDS.body;
  const end = Math.max(B.at, varEnd);
  const body = avail > B.at ? b.slice(B.at, Math.min(end, avail)) : new Uint8Array(0);
  if (t && body.length) t.add(B.label, B.at, body.length, hex(body));
  structEnd = B.at + body.length;
  x.structEnd = structEnd;
  return { kind: 'unknown', llcVersion, type, length, response, body };
}

/** Tree node of rkey entry i of the list that starts at `first`. */
function addRkeyEntry(t: Tree, first: BytesSpec, i: number, e: LlcRkeyEntry): void {
  addField(t, first, `rkey ${hex32(e.rkey)} new ${hex32(e.rkeyNew)} va ${hx64(e.vaddrNew)}`, entryAt(first, i) - first.at, `${first.label} ${i}`);
}

/** Tree node of rtoken slot i of the list that starts at `first`, shown as rtoken `n`. */
function addRtoken(t: Tree, first: BytesSpec, i: number, n: number, r: LlcRtoken): void {
  addField(t, first, `link ${r.linkId} rkey ${hex32(r.rkey)} va ${hx64(r.vaddr)}`, entryAt(first, i) - first.at, `${first.label} ${n}`);
}

/** The ADD LINK v2 extension (bytes 44…, up to varEnd); its rkey count is in host order. */
function decodeAddLinkV2(b: Uint8Array, x: LlcCtx, issues: Issue[], t: Tree | undefined): LlcAddLinkV2Ext | undefined {
  const { varEnd, length, avail, lengthOrder } = x;
  let reserved = x.reserved;
  const F = LLC_ADD_LINK_FIELDS;
  const first = F.rkeys;
  const fixedEnd = first.at;
  if (varEnd < fixedEnd) {
    issue(issues, 'error', 'llc.truncated', `truncated ADD LINK v2 extension: ${varEnd - LLC_MSG_SIZE} of 28 bytes`, LLC_MSG_SIZE, varEnd - LLC_MSG_SIZE);
    return undefined;
  }
  const v = addLinkV.reset(b, 0);
  reserved = rsvBits(b, F.extFlagsReserved, issues, reserved);
  reserved = rsvRun(b, F.reserved45, varEnd, issues, reserved, t);
  reserved = rsvRun(b, F.reserved62, varEnd, issues, reserved, t);
  const nle = v.numRkeysLe, nbe = v.numRkeysBe;
  const room = Math.floor((varEnd - fixedEnd) / first.len);
  const fitLe = entryAt(first, nle) === varEnd, fitBe = entryAt(first, nbe) === varEnd;
  let order: LengthOrder;
  if (nle === nbe) order = lengthOrder ?? 'le';
  else if (fitLe && !fitBe) order = 'le';
  else if (fitBe && !fitLe) order = 'be';
  else if (nle <= room && nbe > room) order = 'le';
  else if (nbe <= room && nle > room) order = 'be';
  else order = lengthOrder ?? 'le';
  if (nle !== nbe && order !== lengthOrder) {
    issue(issues, 'warn', 'llc.rkeys-order', `ADD LINK v2 rkey count read ${order.toUpperCase()}, but the length was ${String(lengthOrder).toUpperCase()}`, F.numRkeysLe.at, F.numRkeysLe.size);
  }
  const numRkeys = order === 'le' ? nle : nbe;
  const k = Math.min(numRkeys, room);
  const rkeys: LlcRkeyEntry[] = [];
  for (let i = 0; i < k; i++) rkeys.push(rkeyEntry(b, entryAt(first, i)));
  if (numRkeys > room) {
    if (length > avail) issue(issues, 'note', 'llc.partial', `ADD LINK v2: ${k} of ${numRkeys} rkey entries present`, fixedEnd, varEnd - fixedEnd);
    else issue(issues, 'warn', 'llc.rkeys', `ADD LINK v2 announces ${numRkeys} rkeys, room for ${room}`, F.numRkeysLe.at, F.numRkeysLe.size);
  }
  const ext: LlcAddLinkV2Ext = { direct: v.direct, targetGid: ipv6At(b, F.targetGid.at), numRkeys, numRkeysOrder: order, rkeys };
  if (t) {
    addField(t, F.extFlags, String(ext.direct));
    addField(t, F.targetGid, ext.targetGid);
    addField(t, F.numRkeysLe, `${numRkeys} [${order}]`);
    for (let i = 0; i < k; i++) addRkeyEntry(t, first, i, rkeys[i]!);
  }
  x.reserved = reserved;
  x.structEnd = entryAt(first, k);
  return ext;
}

/** DELETE RKEY: the fixed 44-byte form with 8 slots, or the v2 variable form (length ≠ 44). */
function llcDeleteRkey(b: Uint8Array, t: Tree | undefined, issues: Issue[], x: LlcCtx): LlcMessage {
  const { llcVersion, type, length, response, flags, v2, varEnd } = x;
  let reserved = x.reserved;
  x.flagsOther = flags & OTHER_DELETE_RKEY;
  const F = LLC_DELETE_RKEY_FIELDS;
  const first = F.rkeys;
  const avail = b.length;
  const variable = v2 && length !== LLC_MSG_SIZE;
  const v = deleteRkeyV.reset(b, 0);
  const numRkeys = v.numRkeys;
  const errorMask = v.errorMask;
  const negative = v.negative;
  const rkeys: number[] = [];
  let structEnd = LLC_MSG_SIZE;
  if (!variable) {
    need(b, 0, LLC_MSG_SIZE, issues, 'llc.truncated', 'DELETE RKEY');
    if (numRkeys > LLC_DELETE_RKEY_SLOTS) issue(issues, 'warn', 'llc.rkeys', `DELETE RKEY announces ${numRkeys} rkeys (max 8)`, F.numRkeys.at, 1);
    const k = Math.min(numRkeys, LLC_DELETE_RKEY_SLOTS);
    for (let i = 0; i < k; i++) rkeys.push(u32(b, entryAt(first, i)));
    reserved = rsvRun(b, F.reserved6, LLC_MSG_SIZE, issues, reserved, t);
    reserved = rsv(b, entryAt(first, k), entryAt(first, LLC_DELETE_RKEY_SLOTS) - entryAt(first, k), LLC_MSG_SIZE, issues, reserved, t);
    reserved = rsvRun(b, F.reserved40, LLC_MSG_SIZE, issues, reserved, t);
  } else {
    need(b, 0, first.at, issues, 'llc.truncated', 'DELETE RKEY v2');
    const room = varEnd > first.at ? Math.floor((varEnd - first.at) / first.len) : 0;
    const k = Math.min(numRkeys, room);
    for (let i = 0; i < k; i++) rkeys.push(u32(b, entryAt(first, i)));
    if (numRkeys > room && avail >= first.at) {
      if (length > avail) issue(issues, 'note', 'llc.partial', `DELETE RKEY v2: ${k} of ${numRkeys} rkeys present`, first.at, varEnd - first.at);
      else issue(issues, 'warn', 'llc.rkeys', `DELETE RKEY v2 announces ${numRkeys} rkeys, room for ${room}`, F.numRkeys.at, 1);
    }
    reserved = rsvRun(b, F.reserved6, varEnd, issues, reserved, t);
    structEnd = entryAt(first, k);
  }
  if (t) {
    addField(t, F.negative, String(negative));
    addField(t, F.numRkeys, numRkeys);
    addField(t, F.errorMask, '0x' + hex2(errorMask), 0, variable ? 'invalid rkeys' : F.errorMask.label);
    for (let i = 0; i < rkeys.length; i++) addField(t, first, hex32(rkeys[i]!), entryAt(first, i) - first.at, `${first.label} ${i}`);
  }
  x.reserved = reserved; x.structEnd = structEnd;
  return { kind: 'delete_rkey', llcVersion, type, length, response, negative, numRkeys, errorMask, variable, rkeys };
}

function isFixedV2(code: number): boolean {
  return code === LlcCode.CONFIRM_LINK || code === LlcCode.DELETE_LINK || code === LlcCode.CONFIRM_RKEY || code === LlcCode.TEST_LINK;
}

// ---- encode ----

function structSize(m: LlcMessage): number {
  switch (m.kind) {
    case 'add_link': return m.v2 ? entryAt(LLC_ADD_LINK_FIELDS.rkeys, m.v2.rkeys.length) : LLC_MSG_SIZE;
    case 'request_add_link': return entryAt(LLC_REQUEST_ADD_LINK_FIELDS.gids, m.gids.length);
    case 'delete_rkey': return m.variable ? entryAt(LLC_DELETE_RKEY_FIELDS.rkeys, m.rkeys.length) : LLC_MSG_SIZE;
    case 'unknown': return LLC_UNKNOWN_FIELDS.body.at + m.body.length;
    default: return LLC_MSG_SIZE;
  }
}

function putEntry(b: Uint8Array, o: number, e: LlcRkeyEntry | undefined): void {
  if (!e) return;
  const w = rkeyEntryV.reset(b, o);
  w.rkey = e.rkey; w.rkeyNew = e.rkeyNew; w.vaddrNew = e.vaddrNew;
}

function putRtoken(b: Uint8Array, o: number, r: LlcRtoken | undefined): void {
  if (!r) return;
  const w = rtokenV.reset(b, o);
  w.linkId = r.linkId & 0xff; w.rkey = r.rkey; w.vaddr = r.vaddr;
}

/** Value → exact bytes (length written verbatim in its byte order; reserved/trailing restored). */
export function encodeLlc(m: LlcMessage): Uint8Array {
  const size = structSize(m);
  const b = new Uint8Array(size + (m.trailing?.length ?? 0));
  const h = headerV.reset(b, 0);
  h.type = m.type & 0xff;
  if (m.llcVersion === 2) {
    if (m.lengthOrder === 'be') h.lengthBe = m.length & 0xffff; else h.lengthLe = m.length & 0xffff;
  } else {
    h.length = m.length & 0xff;
  }
  let flags = (m.response ? FLAG_RESP : 0) | (m.flagsOther ?? 0);
  switch (m.kind) {
    case 'confirm_link': {
      const F = LLC_CONFIRM_LINK_FIELDS;
      const w = confirmLinkV.reset(b, 0);
      if (m.noRmbeEyecatcher) flags |= FLAG_NO_RMBE_EYEC;
      b.set(parseMac(m.mac), F.mac.at);
      b.set(parseIpv6(m.gid), F.gid.at);
      w.qpn = m.qpn;
      w.linkId = m.linkId & 0xff;
      w.linkUid = m.linkUid;
      w.maxLinks = m.maxLinks & 0xff;
      w.maxConns = m.maxConns & 0xff;
      break;
    }
    case 'add_link':
    case 'request_add_link':
      if (m.rejected) flags |= FLAG_REJ;
      if (m.llcVersion === 1) h.byte2 = m.rejectReason & 0x0f;
      else if (m.rejected) h.rejectReason = m.rejectReason & 0x0f;
      if (m.kind === 'request_add_link') {
        const F = LLC_REQUEST_ADD_LINK_FIELDS;
        requestAddLinkV.reset(b, 0).gidCount = m.gidCount & 0xff;
        for (let i = 0; i < m.gids.length; i++) b.set(parseIpv6(m.gids[i]!), entryAt(F.gids, i));
        break;
      }
      putAddLink(b, m);
      break;
    case 'add_link_cont': {
      const w = addLinkContV.reset(b, 0);
      w.linkId = m.linkId & 0xff;
      w.numRkeys = m.numRkeys & 0xff;
      for (let i = 0; i < LLC_ADD_LINK_CONT_SLOTS; i++) putEntry(b, entryAt(LLC_ADD_LINK_CONT_FIELDS.rkeys, i), m.rkeys[i]);
      break;
    }
    case 'delete_link': {
      const w = deleteLinkV.reset(b, 0);
      if (m.all) flags |= FLAG_ALL;
      if (m.orderly) flags |= FLAG_ORDERLY;
      w.linkId = m.linkId & 0xff;
      w.reason = m.reason;
      break;
    }
    case 'confirm_rkey': {
      const w = confirmRkeyV.reset(b, 0);
      if (m.negative) flags |= FLAG_NEG;
      if (m.retry) flags |= FLAG_RETRY;
      w.numRtokens = m.numRtokens & 0xff;
      w.rkey = m.rkey;
      w.vaddr = m.vaddr;
      for (let i = 0; i < LLC_CONFIRM_RKEY_SLOTS; i++) putRtoken(b, entryAt(LLC_CONFIRM_RKEY_FIELDS.others, i), m.others[i]);
      break;
    }
    case 'confirm_rkey_cont':
      confirmRkeyContV.reset(b, 0).numRemaining = m.numRemaining & 0xff;
      for (let i = 0; i < LLC_CONFIRM_RKEY_CONT_SLOTS; i++) putRtoken(b, entryAt(LLC_CONFIRM_RKEY_CONT_FIELDS.rtokens, i), m.rtokens[i]);
      break;
    case 'test_link': {
      const U = LLC_TEST_LINK_FIELDS.userData;
      b.set(m.userData.subarray(0, U.len), U.at);
      break;
    }
    case 'delete_rkey': {
      const w = deleteRkeyV.reset(b, 0);
      if (m.negative) flags |= FLAG_NEG;
      w.numRkeys = m.numRkeys & 0xff;
      w.errorMask = m.errorMask & 0xff;
      const k = m.variable ? m.rkeys.length : Math.min(LLC_DELETE_RKEY_SLOTS, m.rkeys.length);
      for (let i = 0; i < k; i++) put32(b, entryAt(LLC_DELETE_RKEY_FIELDS.rkeys, i), m.rkeys[i]!);
      break;
    }
    case 'unknown':
      b.set(m.body, LLC_UNKNOWN_FIELDS.body.at);
      break;
  }
  h.flags = flags & 0xff;
  if (m.reserved) {
    for (const r of m.reserved) {
      for (let i = 0; i < r.bytes.length; i++) {
        const o = r.offset + i;
        if (o < size) b[o] = b[o]! | r.bytes[i]!;
      }
    }
  }
  if (m.trailing) b.set(m.trailing, size);
  return b;
}

function putAddLink(b: Uint8Array, m: LlcAddLink): void {
  const F = LLC_ADD_LINK_FIELDS;
  const w = addLinkV.reset(b, 0);
  b.set(parseMac(m.mac), F.mac.at);
  b.set(parseIpv6(m.gid), F.gid.at);
  w.qpn = m.qpn;
  w.linkId = m.linkId & 0xff;
  w.mtu = m.mtu & 0x0f;
  w.psn = m.psn;
  if (!m.v2) return;
  w.direct = m.v2.direct;
  b.set(parseIpv6(m.v2.targetGid), F.targetGid.at);
  if (m.v2.numRkeysOrder === 'be') w.numRkeysBe = m.v2.numRkeys & 0xffff; else w.numRkeysLe = m.v2.numRkeys & 0xffff;
  for (let i = 0; i < m.v2.rkeys.length; i++) putEntry(b, entryAt(F.rkeys, i), m.v2.rkeys[i]);
}

// ---- summary ----

/** One-line summary, e.g. `LLC CONFIRM LINK v2 req link 1 qp 0x11 gid ::ffff:10.55.0.2 uid 0x00000101 maxlinks 2 maxconns 255 [len le]`. */
export function summarizeLlc(m: LlcMessage): string {
  const s = new StringSink();
  writeLlcSummary(s, m);
  return s.s;
}

/** ` 0x3a1->0x570@0x…`: an rkey entry of ADD LINK (CONT). */
function writeRkeyEntry(s: TextSink, e: LlcRkeyEntry): void {
  s.text(' '); s.hex(e.rkey); s.text('->'); s.hex(e.rkeyNew); s.text('@'); s.text(hx64(e.vaddrNew));
}

/** ` link 1 rkey 0x3a1 va 0x…`: an rtoken of CONFIRM RKEY (CONT). */
function writeRtoken(s: TextSink, r: LlcRtoken): void {
  s.text(' link '); s.dec(r.linkId); s.text(' rkey '); s.hex(r.rkey); s.text(' va '); s.text(hx64(r.vaddr));
}

/** ` link 1 qp 0x11 gid … mac …`: what CONFIRM LINK and ADD LINK say of the new link's end. */
function linkEnd(s: TextSink, linkId: number, qpn: number, gid: string, mac: string): void {
  s.text(' link '); s.dec(linkId); s.text(' qp '); s.hex(qpn); s.text(' gid '); s.text(gid); s.text(' mac '); s.text(mac);
}

/** summarizeLlc() written into a sink (smcdump's one-line output takes its numbers as digits). */
export function writeLlcSummary(s: TextSink, m: LlcMessage): void {
  s.text('LLC '); s.text(llcTypeName(m.type)); s.text(m.llcVersion === 2 ? ' v2' : m.llcVersion === 1 ? ' v1' : ` v${m.llcVersion}`);
  s.text(m.response ? ' rsp' : ' req');
  switch (m.kind) {
    case 'confirm_link':
      linkEnd(s, m.linkId, m.qpn, m.gid, m.mac);
      s.text(' uid '); writeHexN(s, m.linkUid, 8); s.text(' maxlinks '); s.dec(m.maxLinks); s.text(' maxconns '); s.dec(m.maxConns);
      break;
    case 'add_link':
      if (m.rejected) { s.text(' REJECT ('); s.text(addLinkRejectReason(m.rejectReason)); s.text(')'); }
      linkEnd(s, m.linkId, m.qpn, m.gid, m.mac);
      s.text(' mtu '); s.dec(mtuFromCode(m.mtu) || m.mtu); s.text(' psn '); s.dec(m.psn);
      if (m.v2) {
        if (m.v2.direct) s.text(' direct');
        s.text(' target '); s.text(m.v2.targetGid); s.text(' rkeys '); s.dec(m.v2.numRkeys);
        for (const e of m.v2.rkeys) writeRkeyEntry(s, e);
        if (m.v2.numRkeysOrder !== m.lengthOrder) { s.text(' [n '); s.text(m.v2.numRkeysOrder); s.text(']'); }
      }
      break;
    case 'add_link_cont':
      s.text(' link '); s.dec(m.linkId); s.text(' remaining '); s.dec(m.numRkeys);
      for (const e of m.rkeys) if (e.rkey || e.rkeyNew) writeRkeyEntry(s, e);
      break;
    case 'delete_link':
      if (m.all) s.text(' ALL');
      if (m.orderly) s.text(' ORDERLY');
      if (!m.all || m.linkId) { s.text(' link '); s.dec(m.linkId); }
      s.text(' reason '); writeHexN(s, m.reason, 8); s.text(' '); s.text(deleteLinkReason(m.reason));
      break;
    case 'request_add_link':
      if (m.rejected) { s.text(' REJECT ('); s.text(addLinkRejectReason(m.rejectReason)); s.text(')'); }
      s.text(' gids '); s.dec(m.gidCount);
      if (m.gids.length) { s.text(' '); s.text(m.gids.join(',')); }
      break;
    case 'confirm_rkey':
      if (m.negative) s.text(' NEGATIVE');
      if (m.retry) s.text(' RETRY');
      s.text(' rkey '); s.hex(m.rkey); s.text(' va '); s.text(hx64(m.vaddr)); s.text(' +'); s.dec(m.numRtokens);
      for (let i = 0; i < m.numRtokens && i < 2; i++) writeRtoken(s, m.others[i]!);
      break;
    case 'confirm_rkey_cont':
      s.text(' remaining '); s.dec(m.numRemaining);
      for (const r of m.rtokens) if (r.linkId || r.rkey) writeRtoken(s, r);
      break;
    case 'test_link':
      s.text(' data '); s.text(hex(m.userData));
      break;
    case 'delete_rkey':
      if (m.negative) { s.text(' NEGATIVE mask 0x'); s.text(hex2(m.errorMask)); }
      s.text(' n '); s.dec(m.numRkeys);
      for (let i = 0; i < m.rkeys.length; i++) { s.text(i === 0 ? ' ' : ','); s.hex(m.rkeys[i]!); }
      if (m.variable) s.text(' (variable)');
      break;
    case 'unknown':
      s.text(' body '); s.dec(m.body.length); s.text('B');
      break;
  }
  if (m.llcVersion === 2) { s.text(' [len '); s.text(m.lengthOrder ?? 'le'); s.text(']'); }
}
