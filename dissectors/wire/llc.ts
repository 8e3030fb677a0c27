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

import type { Decoded, Issue, Tree } from './common.js';
import {
  hex, hex32, ipv6Str, issue, macStr, mtuFromCode, need, parseIpv6, parseMac,
  put16, put16le, put24, put32, put64, u16, u16le, u24, u32, u64, u8,
} from './common.js';

export const LLC_MSG_SIZE = 44;
export const LLC_V2_MAX_SIZE = 8192;

export const LLC_FLAG_RESP = 0x80;
export const LLC_FLAG_CONFIRM_LINK_NO_RMBE_EYEC = 0x03;
export const LLC_FLAG_ADD_LINK_REJ = 0x40;
export const LLC_FLAG_DEL_LINK_ALL = 0x40;
export const LLC_FLAG_DEL_LINK_ORDERLY = 0x20;
export const LLC_FLAG_RKEY_NEG = 0x20;
export const LLC_FLAG_RKEY_RETRY = 0x10;
export const LLC_ADD_LINK_V2_DIRECT = 0x80;

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

/** DELETE LINK reason codes (request reasons and response codes), formats.md §8.6. */
export const DELETE_LINK_REASONS: Readonly<Record<number, string>> = {
  0x00010000: 'lost path',
  0x00020000: 'operator-initiated termination',
  0x00030000: 'program-initiated termination',
  0x00040000: 'LLC protocol violation',
  0x00050000: 'asymmetric link no longer needed',
  0x00100000: 'unknown link id',
  0x00200000: 'link group not found',
};

export function deleteLinkReason(code: number): string {
  return DELETE_LINK_REASONS[code >>> 0] ?? (code === 0 ? 'no reason' : 'unknown reason');
}

/** ADD LINK / REQUEST ADD LINK reject reasons (byte 2 low nibble), formats.md §8.4. */
export const ADD_LINK_REJECT_REASONS: Readonly<Record<number, string>> = {
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

/** Same for reserved bits of one byte. */
function rsvBits(b: Uint8Array, o: number, mask: number, issues: Issue[], list: LlcReservedBytes[] | undefined): LlcReservedBytes[] | undefined {
  if (o >= b.length) return list;
  const v = b[o]! & mask;
  if (v === 0) return list;
  const out = list ?? [];
  out.push({ offset: o, bytes: Uint8Array.of(v) });
  issue(issues, 'warn', 'llc.reserved', `reserved bits 0x${hex2(v)} set in byte ${o}`, o, 1);
  return out;
}

function gidAt(b: Uint8Array, o: number): string { return ipv6Str(b, o); }

function rkeyEntry(b: Uint8Array, o: number): LlcRkeyEntry {
  return { rkey: u32(b, o), rkeyNew: u32(b, o + 4), vaddrNew: u64(b, o + 8) };
}

function rtoken(b: Uint8Array, o: number): LlcRtoken {
  return { linkId: u8(b, o), rkey: u32(b, o + 1), vaddr: u64(b, o + 5) };
}

function lenPlausible(n: number): boolean { return n >= LLC_MSG_SIZE && n <= LLC_V2_MAX_SIZE; }

// ---- decode ----

/**
 * Decodes one LLC message (complete SEND payload, or the first 44 bytes of a longer v2 one).
 * Never throws.
 */
export function decodeLlc(b: Uint8Array, t?: Tree): Decoded<LlcMessage> {
  const issues: Issue[] = [];
  const avail = b.length;
  if (avail < 4) issue(issues, 'error', 'llc.truncated', `truncated LLC header: ${avail} of 4 bytes`, 0, avail);

  const type = u8(b, 0);
  const nib = type >> 4;
  const v2 = nib === 2;
  const llcVersion: 1 | 2 = v2 ? 2 : 1;
  const code = nib === 0 || nib === 2 ? type & 0x0f : 0;
  const known = code >= 1 && code <= 9;
  const flags = u8(b, 3);
  const response = (flags & LLC_FLAG_RESP) !== 0;
  const b1 = u8(b, 1), b2 = u8(b, 2);

  if (t) t.add('type', 0, 1, `0x${hex2(type)} ${llcTypeName(type)} v${llcVersion}`);
  if (!known) {
    if (type >= 0x80 && type <= 0xbf) {
      issue(issues, 'note', 'llc.optional', `optional LLC message ${llcTypeName(type)} (z/OS; Linux never sends these)`, 0, 1);
    } else {
      issue(issues, 'warn', 'llc.type', `unknown LLC type 0x${hex2(type)}`, 0, 1);
    }
  } else if ((!v2 && code === LlcCode.REQUEST_ADD_LINK) || (v2 && (code === LlcCode.ADD_LINK_CONT || code === LlcCode.CONFIRM_RKEY_CONT))) {
    issue(issues, 'note', 'llc.type', `type 0x${hex2(type)}: ${CODE_NAMES[code]} is not defined for LLC v${llcVersion}`, 0, 1);
  }

  // ---- length ----
  let length: number;
  let lengthOrder: LengthOrder | undefined;
  const rejectFlag = (code === LlcCode.ADD_LINK || code === LlcCode.REQUEST_ADD_LINK) && (flags & LLC_FLAG_ADD_LINK_REJ) !== 0;
  if (!v2) {
    length = b1;
    if (t) t.add('length', 1, 1, length);
    if (length !== LLC_MSG_SIZE && known && avail >= 2) issue(issues, 'warn', 'llc.length', `LLC v1 length ${length}, must be 44`, 1, 1);
  } else {
    const le = b1 | (b2 << 8);
    const be = (b1 << 8) | b2;
    let handled = false;
    if (rejectFlag && (b2 & 0x0f) !== 0 && (b1 | ((b2 & 0xf0) << 8)) === avail && avail >= 4) {
      // formats.md §12.16: reject reason nibble written into byte 2 = high byte of an LE length
      length = le; lengthOrder = 'le'; handled = true;
      issue(issues, 'warn', 'llc.reject-length', `length 0x${le.toString(16).padStart(4, '0')} (LE) carries the reject reason nibble ${b2 & 0x0f} in byte 2; ${avail} bytes sent (formats.md §12.16)`, 1, 2);
    } else if (le === be) {
      length = le; lengthOrder = 'le';
    } else if (le === avail) {
      length = le; lengthOrder = 'le';
    } else if (be === avail) {
      length = be; lengthOrder = 'be';
    } else if (lenPlausible(le) && !lenPlausible(be)) {
      length = le; lengthOrder = 'le';
    } else if (lenPlausible(be) && !lenPlausible(le)) {
      length = be; lengthOrder = 'be';
    } else if (lenPlausible(le)) {
      length = le; lengthOrder = 'le';
      issue(issues, 'warn', 'llc.length-order', `v2 length byte order ambiguous (LE ${le}, BE ${be}, ${avail} bytes present); assuming LE`, 1, 2);
    } else {
      // neither plausible: take the one closer to the bytes present
      if (Math.abs(be - avail) < Math.abs(le - avail)) { length = be; lengthOrder = 'be'; } else { length = le; lengthOrder = 'le'; }
      issue(issues, 'warn', 'llc.length-order', `v2 length implausible in both byte orders (LE ${le}, BE ${be}, ${avail} bytes present); assuming ${lengthOrder.toUpperCase()}`, 1, 2);
    }
    if (t) t.add('length (host order)', 1, 2, `${length} [${lengthOrder}]`);
    if (!handled && avail >= 4) {
      if (!lenPlausible(length)) {
        issue(issues, 'warn', 'llc.length', `LLC v2 length ${length} outside 44..8192`, 1, 2);
      }
      if (length > avail && avail >= 4) {
        issue(issues, 'note', 'llc.partial', `message declares ${length} bytes, ${avail} present`, 0, avail);
      }
    }
  }
  if (t) t.add('flags', 3, 1, '0x' + hex2(flags) + (response ? ' response' : ' request'));

  // Structure end for variable-size messages: the declared length when it fits, else what is present.
  const varEnd = length >= 4 && length <= avail ? length : avail;

  let reserved: LlcReservedBytes[] | undefined;
  let flagsOther: number;
  let m: LlcMessage;
  let structEnd = LLC_MSG_SIZE;

  // v1 header byte 2: reserved (reject reason nibble for ADD LINK / REQUEST ADD LINK)
  let rejectReason = 0;
  if (code === LlcCode.ADD_LINK || code === LlcCode.REQUEST_ADD_LINK) {
    if (!v2) {
      rejectReason = b2 & 0x0f;
      reserved = rsvBits(b, 2, 0xf0, issues, reserved);
      if (rejectReason !== 0 && !rejectFlag) issue(issues, 'note', 'llc.reject-reason', `reject reason ${rejectReason} without the reject flag`, 2, 1);
    } else if (rejectFlag) {
      rejectReason = b2 & 0x0f;
      issue(issues, 'note', 'llc.reject-reason', lengthOrder === 'le'
        ? `v2 reject: the reason nibble shares byte 2 with the host-order length (reason ${rejectReason}${rejectReason === 0 ? ', i.e. lost: Linux 6.12 sends the reject with a fresh 44-byte header' : ''})`
        : `v2 reject with a big-endian length: byte 2 low nibble (${rejectReason}) is part of the length, not a reason`, 2, 1);
    }
    if (t && (rejectFlag || rejectReason !== 0)) t.add('reject reason', 2, 1, `${rejectReason} ${addLinkRejectReason(rejectReason)}`);
  } else if (!v2) {
    reserved = rsv(b, 2, 1, 3, issues, reserved, t);
  }

  switch (known ? code : 0) {
    case LlcCode.CONFIRM_LINK: {
      need(b, 0, LLC_MSG_SIZE, issues, 'llc.truncated', 'CONFIRM LINK');
      const noRmbe = (flags & 0x03) === 0x03;
      flagsOther = flags & (noRmbe ? 0x7c : 0x7f);
      const cl: LlcConfirmLink = {
        kind: 'confirm_link', llcVersion, type, length, response, noRmbeEyecatcher: noRmbe,
        mac: macStr(b, 4), gid: gidAt(b, 10), qpn: u24(b, 26), linkId: u8(b, 29),
        linkUid: u32(b, 30), maxLinks: u8(b, 34), maxConns: u8(b, 35),
      };
      if (t) {
        t.add('no RMBE eyecatcher', 3, 1, String(noRmbe));
        t.add('sender MAC', 4, 6, cl.mac);
        t.add('sender GID', 10, 16, cl.gid);
        t.add('sender QPN', 26, 3, hx(cl.qpn));
        t.add('link id', 29, 1, cl.linkId);
        t.add('link user id', 30, 4, hex32(cl.linkUid));
        t.add('max links', 34, 1, cl.maxLinks);
        t.add('max conns', 35, 1, cl.maxConns);
      }
      reserved = rsv(b, 36, 8, LLC_MSG_SIZE, issues, reserved, t);
      m = cl;
      break;
    }
    case LlcCode.ADD_LINK: {
      need(b, 0, LLC_MSG_SIZE, issues, 'llc.truncated', 'ADD LINK');
      flagsOther = flags & 0x3f;
      const al: LlcAddLink = {
        kind: 'add_link', llcVersion, type, length, response, rejected: rejectFlag, rejectReason,
        mac: macStr(b, 4), gid: gidAt(b, 12), qpn: u24(b, 28), linkId: u8(b, 31),
        mtu: u8(b, 32) & 0x0f, psn: u24(b, 33),
      };
      reserved = rsv(b, 10, 2, LLC_MSG_SIZE, issues, reserved, t);
      reserved = rsvBits(b, 32, 0xf0, issues, reserved);
      if (t) {
        t.add('rejected', 3, 1, String(rejectFlag));
        t.add('sender MAC', 4, 6, al.mac);
        t.add('sender GID', 12, 16, al.gid);
        t.add('sender QPN', 28, 3, hx(al.qpn));
        t.add('link id', 31, 1, al.linkId);
        t.add('QP MTU', 32, 1, `${al.mtu} (${mtuFromCode(al.mtu)})`);
        t.add('initial PSN', 33, 3, hx(al.psn));
      }
      reserved = rsv(b, 36, 8, LLC_MSG_SIZE, issues, reserved, t);
      if (v2 && varEnd > LLC_MSG_SIZE) {
        if (varEnd < 72) {
          issue(issues, 'error', 'llc.truncated', `truncated ADD LINK v2 extension: ${varEnd - LLC_MSG_SIZE} of 28 bytes`, LLC_MSG_SIZE, varEnd - LLC_MSG_SIZE);
        } else {
          const ef = u8(b, 44);
          reserved = rsvBits(b, 44, 0x7f, issues, reserved);
          reserved = rsv(b, 45, 1, varEnd, issues, reserved, t);
          reserved = rsv(b, 62, 8, varEnd, issues, reserved, t);
          const nle = u16le(b, 70), nbe = u16(b, 70);
          const room = (varEnd - 72) >> 4;
          const fitLe = 72 + 16 * nle === varEnd, fitBe = 72 + 16 * nbe === varEnd;
          let order: LengthOrder;
          if (nle === nbe) order = lengthOrder ?? 'le';
          else if (fitLe && !fitBe) order = 'le';
          else if (fitBe && !fitLe) order = 'be';
          else if (nle <= room && nbe > room) order = 'le';
          else if (nbe <= room && nle > room) order = 'be';
          else order = lengthOrder ?? 'le';
          if (nle !== nbe && order !== lengthOrder) {
            issue(issues, 'warn', 'llc.rkeys-order', `ADD LINK v2 rkey count read ${order.toUpperCase()}, but the length was ${String(lengthOrder).toUpperCase()}`, 70, 2);
          }
          const numRkeys = order === 'le' ? nle : nbe;
          const k = Math.min(numRkeys, room);
          const rkeys: LlcRkeyEntry[] = [];
          for (let i = 0; i < k; i++) rkeys.push(rkeyEntry(b, 72 + 16 * i));
          if (numRkeys > room) {
            if (length > avail) issue(issues, 'note', 'llc.partial', `ADD LINK v2: ${k} of ${numRkeys} rkey entries present`, 72, varEnd - 72);
            else issue(issues, 'warn', 'llc.rkeys', `ADD LINK v2 announces ${numRkeys} rkeys, room for ${room}`, 70, 2);
          }
          al.v2 = { direct: (ef & LLC_ADD_LINK_V2_DIRECT) !== 0, targetGid: gidAt(b, 46), numRkeys, numRkeysOrder: order, rkeys };
          structEnd = 72 + 16 * k;
          if (t) {
            t.add('v2 direct', 44, 1, String(al.v2.direct));
            t.add('client target GID', 46, 16, al.v2.targetGid);
            t.add('number of rkeys (host order)', 70, 2, `${numRkeys} [${order}]`);
            for (let i = 0; i < k; i++) {
              const e = rkeys[i]!;
              t.add(`rkey entry ${i}`, 72 + 16 * i, 16, `rkey ${hex32(e.rkey)} new ${hex32(e.rkeyNew)} va ${hx64(e.vaddrNew)}`);
            }
          }
        }
      }
      m = al;
      break;
    }
    case LlcCode.ADD_LINK_CONT: {
      need(b, 0, LLC_MSG_SIZE, issues, 'llc.truncated', 'ADD LINK CONT');
      flagsOther = flags & 0x7f;
      const ac: LlcAddLinkCont = {
        kind: 'add_link_cont', llcVersion, type, length, response,
        linkId: u8(b, 4), numRkeys: u8(b, 5), rkeys: [rkeyEntry(b, 8), rkeyEntry(b, 24)],
      };
      if (t) {
        t.add('link id', 4, 1, ac.linkId);
        t.add('rkeys remaining', 5, 1, ac.numRkeys);
        for (let i = 0; i < 2; i++) {
          const e = ac.rkeys[i]!;
          t.add(`rkey entry ${i}`, 8 + 16 * i, 16, `rkey ${hex32(e.rkey)} new ${hex32(e.rkeyNew)} va ${hx64(e.vaddrNew)}`);
        }
      }
      reserved = rsv(b, 6, 2, LLC_MSG_SIZE, issues, reserved, t);
      reserved = rsv(b, 40, 4, LLC_MSG_SIZE, issues, reserved, t);
      m = ac;
      break;
    }
    case LlcCode.DELETE_LINK: {
      need(b, 0, LLC_MSG_SIZE, issues, 'llc.truncated', 'DELETE LINK');
      flagsOther = flags & 0x1f;
      const dl: LlcDeleteLink = {
        kind: 'delete_link', llcVersion, type, length, response,
        all: (flags & LLC_FLAG_DEL_LINK_ALL) !== 0, orderly: (flags & LLC_FLAG_DEL_LINK_ORDERLY) !== 0,
        linkId: u8(b, 4), reason: u32(b, 5),
      };
      if (t) {
        t.add('all', 3, 1, String(dl.all));
        t.add('orderly', 3, 1, String(dl.orderly));
        t.add('link id', 4, 1, dl.linkId);
        t.add('reason', 5, 4, `${hex32(dl.reason)} ${deleteLinkReason(dl.reason)}`);
      }
      if (DELETE_LINK_REASONS[dl.reason] === undefined && avail >= 9) {
        issue(issues, 'note', 'llc.reason', `DELETE LINK reason ${hex32(dl.reason)} is not a known code`, 5, 4);
      }
      reserved = rsv(b, 9, 35, LLC_MSG_SIZE, issues, reserved, t);
      m = dl;
      break;
    }
    case LlcCode.REQUEST_ADD_LINK: {
      need(b, 0, 28, issues, 'llc.truncated', 'REQUEST ADD LINK');
      flagsOther = flags & 0x3f;
      const gidCount = u8(b, 24);
      const room = varEnd > 28 ? (varEnd - 28) >> 4 : 0;
      const k = Math.min(gidCount, room);
      const gids: string[] = [];
      for (let i = 0; i < k; i++) gids.push(gidAt(b, 28 + 16 * i));
      if (gidCount > room && avail >= 28) {
        if (length > avail) issue(issues, 'note', 'llc.partial', `REQUEST ADD LINK: ${k} of ${gidCount} GIDs present`, 28, varEnd - 28);
        else issue(issues, 'warn', 'llc.gids', `REQUEST ADD LINK announces ${gidCount} GIDs, room for ${room}`, 24, 1);
      }
      reserved = rsv(b, 4, 20, varEnd, issues, reserved, t);
      reserved = rsv(b, 25, 3, varEnd, issues, reserved, t);
      if (t) {
        t.add('rejected', 3, 1, String(rejectFlag));
        t.add('GID count', 24, 1, gidCount);
        for (let i = 0; i < k; i++) t.add(`GID ${i}`, 28 + 16 * i, 16, gids[i]!);
      }
      structEnd = 28 + 16 * k;
      m = { kind: 'request_add_link', llcVersion, type, length, response, rejected: rejectFlag, rejectReason, gidCount, gids };
      break;
    }
    case LlcCode.CONFIRM_RKEY: {
      need(b, 0, LLC_MSG_SIZE, issues, 'llc.truncated', 'CONFIRM RKEY');
      flagsOther = flags & 0x4f;
      const cr: LlcConfirmRkey = {
        kind: 'confirm_rkey', llcVersion, type, length, response,
        negative: (flags & LLC_FLAG_RKEY_NEG) !== 0, retry: (flags & LLC_FLAG_RKEY_RETRY) !== 0,
        numRtokens: u8(b, 4), rkey: u32(b, 5), vaddr: u64(b, 9), others: [rtoken(b, 17), rtoken(b, 30)],
      };
      if (cr.numRtokens > 2 && avail > 4) issue(issues, 'warn', 'llc.rtokens', `CONFIRM RKEY announces ${cr.numRtokens} additional rtokens (max 2)`, 4, 1);
      if (t) {
        t.add('negative', 3, 1, String(cr.negative));
        t.add('retry', 3, 1, String(cr.retry));
        t.add('additional rtokens', 4, 1, cr.numRtokens);
        t.add('rtoken 0', 5, 12, `rkey ${hex32(cr.rkey)} va ${hx64(cr.vaddr)}`);
        for (let i = 0; i < 2; i++) {
          const r = cr.others[i]!;
          t.add(`rtoken ${i + 1}`, 17 + 13 * i, 13, `link ${r.linkId} rkey ${hex32(r.rkey)} va ${hx64(r.vaddr)}`);
        }
      }
      reserved = rsv(b, 43, 1, LLC_MSG_SIZE, issues, reserved, t);
      m = cr;
      break;
    }
    case LlcCode.CONFIRM_RKEY_CONT: {
      need(b, 0, LLC_MSG_SIZE, issues, 'llc.truncated', 'CONFIRM RKEY CONT');
      flagsOther = flags & 0x7f;
      const cc: LlcConfirmRkeyCont = {
        kind: 'confirm_rkey_cont', llcVersion, type, length, response,
        numRemaining: u8(b, 4), rtokens: [rtoken(b, 5), rtoken(b, 18), rtoken(b, 31)],
      };
      if (t) {
        t.add('rkeys remaining', 4, 1, cc.numRemaining);
        for (let i = 0; i < 3; i++) {
          const r = cc.rtokens[i]!;
          t.add(`rtoken ${i}`, 5 + 13 * i, 13, `link ${r.linkId} rkey ${hex32(r.rkey)} va ${hx64(r.vaddr)}`);
        }
      }
      m = cc;
      break;
    }
    case LlcCode.TEST_LINK: {
      need(b, 0, LLC_MSG_SIZE, issues, 'llc.truncated', 'TEST LINK');
      flagsOther = flags & 0x7f;
      const ud = new Uint8Array(16);
      ud.set(b.subarray(4, Math.min(20, avail)));
      if (t) t.add('user data', 4, 16, hex(ud));
      reserved = rsv(b, 20, 24, LLC_MSG_SIZE, issues, reserved, t);
      m = { kind: 'test_link', llcVersion, type, length, response, userData: ud };
      break;
    }
    case LlcCode.DELETE_RKEY: {
      const variable = v2 && length !== LLC_MSG_SIZE;
      flagsOther = flags & 0x5f;
      const numRkeys = u8(b, 4);
      const errorMask = u8(b, 5);
      const rkeys: number[] = [];
      if (!variable) {
        need(b, 0, LLC_MSG_SIZE, issues, 'llc.truncated', 'DELETE RKEY');
        if (numRkeys > 8) issue(issues, 'warn', 'llc.rkeys', `DELETE RKEY announces ${numRkeys} rkeys (max 8)`, 4, 1);
        const k = Math.min(numRkeys, 8);
        for (let i = 0; i < k; i++) rkeys.push(u32(b, 8 + 4 * i));
        reserved = rsv(b, 6, 2, LLC_MSG_SIZE, issues, reserved, t);
        reserved = rsv(b, 8 + 4 * k, 32 - 4 * k, LLC_MSG_SIZE, issues, reserved, t);
        reserved = rsv(b, 40, 4, LLC_MSG_SIZE, issues, reserved, t);
      } else {
        need(b, 0, 8, issues, 'llc.truncated', 'DELETE RKEY v2');
        const room = varEnd > 8 ? (varEnd - 8) >> 2 : 0;
        const k = Math.min(numRkeys, room);
        for (let i = 0; i < k; i++) rkeys.push(u32(b, 8 + 4 * i));
        if (numRkeys > room && avail >= 8) {
          if (length > avail) issue(issues, 'note', 'llc.partial', `DELETE RKEY v2: ${k} of ${numRkeys} rkeys present`, 8, varEnd - 8);
          else issue(issues, 'warn', 'llc.rkeys', `DELETE RKEY v2 announces ${numRkeys} rkeys, room for ${room}`, 4, 1);
        }
        reserved = rsv(b, 6, 2, varEnd, issues, reserved, t);
        structEnd = 8 + 4 * k;
      }
      if (t) {
        t.add('negative', 3, 1, String((flags & LLC_FLAG_RKEY_NEG) !== 0));
        t.add('number of rkeys', 4, 1, numRkeys);
        t.add(variable ? 'invalid rkeys' : 'error mask', 5, 1, '0x' + hex2(errorMask));
        for (let i = 0; i < rkeys.length; i++) t.add(`rkey ${i}`, 8 + 4 * i, 4, hex32(rkeys[i]!));
      }
      m = { kind: 'delete_rkey', llcVersion, type, length, response, negative: (flags & LLC_FLAG_RKEY_NEG) !== 0, numRkeys, errorMask, variable, rkeys };
      break;
    }
    default: {
      flagsOther = flags & 0x7f;
      if (!v2 && length > avail && avail >= 4) issue(issues, 'error', 'llc.truncated', `truncated ${llcTypeName(type)}: ${avail} of ${length} bytes`, 0, avail);
      const end = Math.max(4, varEnd);
      const body = avail > 4 ? b.slice(4, Math.min(end, avail)) : new Uint8Array(0);
      if (t && body.length) t.add('body', 4, body.length, hex(body));
      structEnd = 4 + body.length;
      m = { kind: 'unknown', llcVersion, type, length, response, body };
      break;
    }
  }

  if (v2) m.lengthOrder = lengthOrder;
  if (flagsOther !== 0) {
    m.flagsOther = flagsOther;
    if (m.kind !== 'unknown') issue(issues, 'warn', 'llc.flags', `undefined flag bits 0x${hex2(flagsOther)} for ${llcTypeName(type)}`, 3, 1);
  }
  if (reserved) m.reserved = reserved;
  if (avail > structEnd) {
    m.trailing = b.slice(structEnd);
    issue(issues, 'warn', 'llc.trailing', `${avail - structEnd} bytes after the ${llcTypeName(type)} message`, structEnd, avail - structEnd);
    t?.add('trailing', structEnd, avail - structEnd, hex(b, structEnd));
  }
  if (v2 && known && isFixedV2(code) && length !== LLC_MSG_SIZE && avail >= 4) {
    issue(issues, 'warn', 'llc.length', `${llcTypeName(type)} v2 length ${length}, expected 44`, 1, 2);
  }
  return { value: m, issues };
}

function isFixedV2(code: number): boolean {
  return code === LlcCode.CONFIRM_LINK || code === LlcCode.DELETE_LINK || code === LlcCode.CONFIRM_RKEY || code === LlcCode.TEST_LINK;
}

// ---- encode ----

function structSize(m: LlcMessage): number {
  switch (m.kind) {
    case 'add_link': return LLC_MSG_SIZE + (m.v2 ? 28 + 16 * m.v2.rkeys.length : 0);
    case 'request_add_link': return 28 + 16 * m.gids.length;
    case 'delete_rkey': return m.variable ? 8 + 4 * m.rkeys.length : LLC_MSG_SIZE;
    case 'unknown': return 4 + m.body.length;
    default: return LLC_MSG_SIZE;
  }
}

function putEntry(b: Uint8Array, o: number, e: LlcRkeyEntry | undefined): void {
  if (!e) return;
  put32(b, o, e.rkey); put32(b, o + 4, e.rkeyNew); put64(b, o + 8, e.vaddrNew);
}

function putRtoken(b: Uint8Array, o: number, r: LlcRtoken | undefined): void {
  if (!r) return;
  b[o] = r.linkId & 0xff; put32(b, o + 1, r.rkey); put64(b, o + 5, r.vaddr);
}

/** Value → exact bytes (length written verbatim in its byte order; reserved/trailing restored). */
export function encodeLlc(m: LlcMessage): Uint8Array {
  const size = structSize(m);
  const b = new Uint8Array(size + (m.trailing?.length ?? 0));
  b[0] = m.type & 0xff;
  if (m.llcVersion === 2) {
    if (m.lengthOrder === 'be') put16(b, 1, m.length); else put16le(b, 1, m.length);
  } else {
    b[1] = m.length & 0xff;
  }
  let flags = (m.response ? LLC_FLAG_RESP : 0) | (m.flagsOther ?? 0);
  switch (m.kind) {
    case 'confirm_link':
      if (m.noRmbeEyecatcher) flags |= LLC_FLAG_CONFIRM_LINK_NO_RMBE_EYEC;
      b.set(parseMac(m.mac), 4);
      b.set(parseIpv6(m.gid), 10);
      put24(b, 26, m.qpn);
      b[29] = m.linkId & 0xff;
      put32(b, 30, m.linkUid);
      b[34] = m.maxLinks & 0xff;
      b[35] = m.maxConns & 0xff;
      break;
    case 'add_link':
    case 'request_add_link':
      if (m.rejected) flags |= LLC_FLAG_ADD_LINK_REJ;
      if (m.llcVersion === 1) b[2] = m.rejectReason & 0x0f;
      else if (m.rejected) b[2] = (b[2]! & 0xf0) | (m.rejectReason & 0x0f);
      if (m.kind === 'request_add_link') {
        b[24] = m.gidCount & 0xff;
        for (let i = 0; i < m.gids.length; i++) b.set(parseIpv6(m.gids[i]!), 28 + 16 * i);
        break;
      }
      b.set(parseMac(m.mac), 4);
      b.set(parseIpv6(m.gid), 12);
      put24(b, 28, m.qpn);
      b[31] = m.linkId & 0xff;
      b[32] = m.mtu & 0x0f;
      put24(b, 33, m.psn);
      if (m.v2) {
        b[44] = m.v2.direct ? LLC_ADD_LINK_V2_DIRECT : 0;
        b.set(parseIpv6(m.v2.targetGid), 46);
        if (m.v2.numRkeysOrder === 'be') put16(b, 70, m.v2.numRkeys); else put16le(b, 70, m.v2.numRkeys);
        for (let i = 0; i < m.v2.rkeys.length; i++) putEntry(b, 72 + 16 * i, m.v2.rkeys[i]);
      }
      break;
    case 'add_link_cont':
      b[4] = m.linkId & 0xff;
      b[5] = m.numRkeys & 0xff;
      putEntry(b, 8, m.rkeys[0]);
      putEntry(b, 24, m.rkeys[1]);
      break;
    case 'delete_link':
      if (m.all) flags |= LLC_FLAG_DEL_LINK_ALL;
      if (m.orderly) flags |= LLC_FLAG_DEL_LINK_ORDERLY;
      b[4] = m.linkId & 0xff;
      put32(b, 5, m.reason);
      break;
    case 'confirm_rkey':
      if (m.negative) flags |= LLC_FLAG_RKEY_NEG;
      if (m.retry) flags |= LLC_FLAG_RKEY_RETRY;
      b[4] = m.numRtokens & 0xff;
      put32(b, 5, m.rkey);
      put64(b, 9, m.vaddr);
      putRtoken(b, 17, m.others[0]);
      putRtoken(b, 30, m.others[1]);
      break;
    case 'confirm_rkey_cont':
      b[4] = m.numRemaining & 0xff;
      for (let i = 0; i < 3; i++) putRtoken(b, 5 + 13 * i, m.rtokens[i]);
      break;
    case 'test_link':
      b.set(m.userData.subarray(0, 16), 4);
      break;
    case 'delete_rkey': {
      if (m.negative) flags |= LLC_FLAG_RKEY_NEG;
      b[4] = m.numRkeys & 0xff;
      b[5] = m.errorMask & 0xff;
      const k = m.variable ? m.rkeys.length : Math.min(8, m.rkeys.length);
      for (let i = 0; i < k; i++) put32(b, 8 + 4 * i, m.rkeys[i]!);
      break;
    }
    case 'unknown':
      b.set(m.body, 4);
      break;
  }
  b[3] = flags & 0xff;
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

// ---- summary ----

function v(m: LlcMessage): string {
  return `v${m.llcVersion} ${m.response ? 'rsp' : 'req'}`;
}

/** One-line summary, e.g. `LLC CONFIRM LINK v2 req link 1 qp 0x11 gid ::ffff:10.55.0.2 uid 0x00000101 maxlinks 2 maxconns 255 [len le]`. */
export function summarizeLlc(m: LlcMessage): string {
  let s = `LLC ${llcTypeName(m.type)} ${v(m)}`;
  switch (m.kind) {
    case 'confirm_link':
      s += ` link ${m.linkId} qp ${hx(m.qpn)} gid ${m.gid} mac ${m.mac} uid ${hex32(m.linkUid)} maxlinks ${m.maxLinks} maxconns ${m.maxConns}`;
      break;
    case 'add_link':
      if (m.rejected) s += ` REJECT (${addLinkRejectReason(m.rejectReason)})`;
      s += ` link ${m.linkId} qp ${hx(m.qpn)} gid ${m.gid} mac ${m.mac} mtu ${mtuFromCode(m.mtu) || m.mtu} psn ${m.psn}`;
      if (m.v2) {
        s += `${m.v2.direct ? ' direct' : ''} target ${m.v2.targetGid} rkeys ${m.v2.numRkeys}`;
        for (const e of m.v2.rkeys) s += ` ${hx(e.rkey)}->${hx(e.rkeyNew)}@${hx64(e.vaddrNew)}`;
        if (m.v2.numRkeysOrder !== m.lengthOrder) s += ` [n ${m.v2.numRkeysOrder}]`;
      }
      break;
    case 'add_link_cont':
      s += ` link ${m.linkId} remaining ${m.numRkeys}`;
      for (const e of m.rkeys) if (e.rkey || e.rkeyNew) s += ` ${hx(e.rkey)}->${hx(e.rkeyNew)}@${hx64(e.vaddrNew)}`;
      break;
    case 'delete_link':
      if (m.all) s += ' ALL';
      if (m.orderly) s += ' ORDERLY';
      if (!m.all || m.linkId) s += ` link ${m.linkId}`;
      s += ` reason ${hex32(m.reason)} ${deleteLinkReason(m.reason)}`;
      break;
    case 'request_add_link':
      if (m.rejected) s += ` REJECT (${addLinkRejectReason(m.rejectReason)})`;
      s += ` gids ${m.gidCount}`;
      if (m.gids.length) s += ' ' + m.gids.join(',');
      break;
    case 'confirm_rkey':
      if (m.negative) s += ' NEGATIVE';
      if (m.retry) s += ' RETRY';
      s += ` rkey ${hx(m.rkey)} va ${hx64(m.vaddr)} +${m.numRtokens}`;
      for (let i = 0; i < m.numRtokens && i < 2; i++) {
        const r = m.others[i]!;
        s += ` link ${r.linkId} rkey ${hx(r.rkey)} va ${hx64(r.vaddr)}`;
      }
      break;
    case 'confirm_rkey_cont':
      s += ` remaining ${m.numRemaining}`;
      for (const r of m.rtokens) if (r.linkId || r.rkey) s += ` link ${r.linkId} rkey ${hx(r.rkey)} va ${hx64(r.vaddr)}`;
      break;
    case 'test_link':
      s += ` data ${hex(m.userData)}`;
      break;
    case 'delete_rkey':
      if (m.negative) s += ` NEGATIVE mask 0x${hex2(m.errorMask)}`;
      s += ` n ${m.numRkeys}`;
      if (m.rkeys.length) s += ' ' + m.rkeys.map(hx).join(',');
      if (m.variable) s += ' (variable)';
      break;
    case 'unknown':
      s += ` body ${m.body.length}B`;
      break;
  }
  if (m.llcVersion === 2) s += ` [len ${m.lengthOrder ?? 'le'}]`;
  return s;
}
