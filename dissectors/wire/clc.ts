// CLC (Connection Layer Control) messages carried over TCP: Proposal, Accept, Confirm,
// Decline — SMCv1 (RFC 7609 A.2), SMCv2 and v2.1 as Linux net/smc puts them on the wire.
// Byte layouts: formats.md §3–§7. One complete message per call: the TCP reassembler cuts
// the stream by the Length field (see `clcMessageLength`).
//
// Value conventions: 64-bit fields are bigint, GIDs ipv6Str text, MACs "aa:bb:..", Peer IDs
// "<instance>@<mac>" (RFC 7609 A.2.1 / hwipl convention), EIDs and host names are text
// with the blank padding removed ('' = an all-zero field; encode pads non-empty text with
// blanks and writes '' as zeros). Counts (IPv6 prefixes, EIDs, ISM GIDs, Confirm GID list)
// come from the array lengths on encode. Offsets and Length are kept as seen on the wire;
// when left out of a value given to `encodeClc`, Linux's values are computed.
// Reserved bytes are not kept: non-zero ones are reported as issues and encoded as zeros.
//
// Every offset is declared once, in ./views/clc.ts; decode, the `-V` tree and encode read and
// write through those views (tree names and node ranges come from the tables too).

import type { Decoded, Issue, TextSink, Tree } from './common.js';
import {
  bufSizeFromCode, fmtSize, hex, hex32, isZero, issue, mtuFromCode,
  parseIpv4, parseIpv6, parseMac, put16, put32, putAscii, StringSink, u32, u8, EBCDIC_SMCD, EBCDIC_SMCR,
} from './common.js';
import { declineReason, formatReason } from './reasons.js';
// cached address text (same strings as ipv6Str/macStr/ipv4Str): the tracker interns them
import { ipv4At, ipv6At, macAt, peerIdAt } from '../net/addr.js';
import { addField, addSpan, entryAt, type BytesSpec } from './views/field.js';
import {
  CLC_HEADER_FIELDS, CLC_TRAILER_LEN, CLC_PROPOSAL_FIELDS, CLC_PROPOSAL_SMCD_AT, CLC_PROPOSAL_SMCD_FIELDS, CLC_PROPOSAL_SMCD_LEN, CLC_V2_EXT_BASE,
  CLC_PREFIX_AREA_FIELDS, CLC_IPV6_PREFIX_FIELDS, CLC_V2_EXT_FIELDS, CLC_SMCDV2_EXT_BASE, CLC_SMCDV2_EXT_FIELDS,
  CLC_ISM_GID_FIELDS, CLC_FCE_FIELDS, CLC_ACCEPT_FLAGS_FIELDS, CLC_SMCR_ACCEPT_FIELDS, CLC_SMCR_FCE_AT, CLC_SMCR_GID_LIST_AT,
  CLC_GID_LIST_FIELDS, CLC_SMCD_ACCEPT_FIELDS, CLC_SMCD_FCE_AT, CLC_DECLINE_FIELDS, CLC_FCE_LEN, CLC_FCE_V20_SMCD_LEN,
  ClcHeaderView, ClcProposalView, ClcProposalSmcdView, ClcPrefixAreaView, ClcIpv6PrefixView, ClcV2ExtView,
  ClcIsmGidView, ClcFceView, ClcAcceptFlagsView, ClcSmcrAcceptView, ClcGidListView, ClcSmcdAcceptView, ClcDeclineView,
} from './views/clc.js';

export { CLC_FCE_LEN } from './views/clc.js';

// ---- constants ----

export const CLC_PROPOSAL = 1;
export const CLC_ACCEPT = 2;
export const CLC_CONFIRM = 3;
export const CLC_DECLINE = 4;

/** "SMCR" / "SMCD" in EBCDIC. */
export const CLC_EYECATCHER_SMCR = EBCDIC_SMCR;
const CLC_EYECATCHER_SMCD = EBCDIC_SMCD;

/** Path / type codes of byte 7 (typev1, typev2): R, D, N (none), B (both). */
export const PATH_R = 0;
export const PATH_D = 1;
export const PATH_N = 2;
export const PATH_B = 3;
const PATH_NAMES: readonly string[] = ['R', 'D', 'N', 'B'];

/** Emulated/virtual ISM CHIDs have high byte 0xFF and use two GID/CHID entries. */
const EMULATED_ISM_CHID_MASK = 0xff00;

/** Whole message sizes incl. header and trailer (formats.md §5, §6), from the tables. */
export const CLC_SMCR_V1_LEN = CLC_SMCR_ACCEPT_FIELDS.eid.at + CLC_TRAILER_LEN;
export const CLC_SMCR_V2_MIN_LEN = CLC_SMCR_FCE_AT + CLC_TRAILER_LEN;
export const CLC_DECLINE_V1_LEN = CLC_DECLINE_FIELDS.diagExtra.at + CLC_TRAILER_LEN;
export const CLC_DECLINE_V2_LEN = CLC_DECLINE_FIELDS.diagExtra.at + CLC_DECLINE_FIELDS.diagExtra.len + CLC_TRAILER_LEN;

// ---- value types ----

/** 'SMCR', 'SMCD', or any other 4 bytes as '0x' + 8 hex digits. */
export type ClcEyecatcher = string;

interface ClcBase {
  eyecatcher: ClcEyecatcher;
  /** Byte 4 as on the wire (1..4 for the known types). */
  typeCode: number;
  /** Length field (bytes 5–6) as on the wire. */
  length: number;
  /** Byte 7 bits 7–4. */
  version: number;
  /** Eyecatcher at Length−4; '' when the message is truncated before it. */
  trailer: ClcEyecatcher;
  /** Bytes between the end of the decoded structure and the trailer (not expected). */
  extra?: Uint8Array;
}

export interface ClcIpv6Prefix { prefix: string; len: number }

/** Proposal IP prefix area (formats.md §4.3). */
export interface ClcIpPrefixArea {
  ipv4: string;
  ipv4Len: number;
  ipv6: ClcIpv6Prefix[];
}

/** Proposal SMC-D / v2 info area at 40 (formats.md §4.2): present when the IP area offset
 *  is ≥ 40, and in every v2 Proposal (whatever the IP area offset). */
export interface ClcProposalSmcd {
  ismGid: bigint;
  ismChid: number;
  /** Relative to byte 52; computed (Linux rule) on encode when absent. */
  v2ExtOffset?: number;
  vendorOui: number;
  /** 5 bytes of vendor experimental options. */
  vendorExp: bigint;
}

/** Proposal v2 extension (formats.md §4.4). */
export interface ClcProposalV2Ext {
  /** User EIDs (UEIDs). */
  eids: string[];
  /** Flags bits 7–4: 0 = v2.0, 1 = v2.1. */
  release: number;
  /** Flags bit 0: system EID in use. */
  seidFlag: boolean;
  /** Relative to V+8; computed on encode when absent (Linux: 32 + 32·EIDs with an SMC-Dv2
   *  extension, else 0). */
  smcdv2ExtOffset?: number;
  roceV2Gid: string;
  maxConns: number;
  maxLinks: number;
  featureMask: number;
}

/** One ISM device of the SMC-Dv2 extension. Emulated ISM (CHID 0xFFxx) takes two wire
 *  entries: `gidExt` is the second entry's 64 bits (`chidExt` only if its CHID differs). */
export interface ClcIsmGid {
  chid: number;
  gid: bigint;
  gidExt?: bigint;
  chidExt?: number;
}

/** Proposal SMC-Dv2 extension (formats.md §4.5). */
export interface ClcProposalSmcdV2Ext {
  seid: string;
  gids: ClcIsmGid[];
}

export interface ClcProposal extends ClcBase {
  type: 'proposal';
  /** v2 paths offered (PATH_*); only meaningful with version 2. */
  typev2: number;
  /** v1 paths offered (PATH_*). */
  typev1: number;
  peerId: string;
  gid: string;
  mac: string;
  /** Distance from byte 40 to the IP prefix area: 0 (old SMC-R-only kernels; also Linux v2
   *  proposals without v1 paths) or 40. Computed on encode when absent (40 iff `prefix`). */
  ipAreaOffset?: number;
  smcd?: ClcProposalSmcd;
  prefix?: ClcIpPrefixArea;
  v2?: ClcProposalV2Ext;
  smcdv2?: ClcProposalSmcdV2Ext;
}

/** First-Contact Extension (formats.md §5.3). 52 bytes when `maxConns` is set, else 36. */
export interface ClcFce {
  v2Direct: boolean;
  osType: number;
  release: number;
  hostname: string;
  maxConns?: number;
  maxLinks?: number;
  featureMask?: number;
  vendorExp?: number;
}

/** SMC-R part of Accept/Confirm (formats.md §5.1). */
export interface ClcSmcrAcceptConfirm {
  peerId: string;
  gid: string;
  mac: string;
  qpn: number;
  rkey: number;
  rmbeIdx: number;
  token: number;
  /** RMBE size code: bytes = 2^(code+14). */
  rmbeSizeCode: number;
  /** IB MTU code: 1 = 256 … 5 = 4096. */
  mtuCode: number;
  rmbVa: bigint;
  psn: number;
  /** v2: negotiated EID. */
  eid?: string;
  /** v2 + first contact. */
  fce?: ClcFce;
  /** v2 + first contact + Confirm: client's additional RoCEv2 GIDs. */
  gidList?: string[];
}

/** SMC-D part of Accept/Confirm (formats.md §5.2). */
export interface ClcSmcdAcceptConfirm {
  gid: bigint;
  dmbToken: bigint;
  dmbeIdx: number;
  dmbeSizeCode: number;
  linkId: number;
  /** v2 fields. */
  chid?: number;
  eid?: string;
  gidExt?: bigint;
  fce?: ClcFce;
}

export interface ClcAcceptConfirm extends ClcBase {
  type: 'accept' | 'confirm';
  /** Byte 7 bit 3: a new link group is created. */
  firstContact: boolean;
  /** Byte 7 bits 1–0: path chosen, PATH_R or PATH_D (decides the layout: D → `d`, else `r`). */
  typev1: number;
  r?: ClcSmcrAcceptConfirm;
  d?: ClcSmcdAcceptConfirm;
}

export interface ClcDecline extends ClcBase {
  type: 'decline';
  /** Byte 7 bit 3: the receiver must drop its link group (sync error). */
  outOfSync: boolean;
  /** Byte 7 bits 1–0: reserved (Linux sends 0; Linux ≤ 6.16 aborted on values other than R/D). */
  typev1: number;
  peerId: string;
  /** Peer diagnosis = reason code (reasons.ts). */
  diagnosis: number;
  /** Byte 20 bits 7–4 (v2: 1 z/OS, 2 Linux, 3 AIX, 15 unknown). */
  osType: number;
  /** v2: the 4 further diagnosis words. */
  diagExtra?: number[];
}

export interface ClcUnknown extends ClcBase {
  type: 'unknown';
  /** Byte 7 bits 3–0. */
  flags: number;
  /** Bytes 8 .. trailer. */
  body: Uint8Array;
}

export type ClcMessage = ClcProposal | ClcAcceptConfirm | ClcDecline | ClcUnknown;

/** What `encodeClc` takes: a message whose `length` may be left out (then computed). */
export type ClcInput = ClcMessage extends infer M ? (M extends ClcMessage ? Omit<M, 'length'> & { length?: number } : never) : never;

// ---- small helpers ----

function eyecatcherName(v: number): ClcEyecatcher {
  if (v === CLC_EYECATCHER_SMCR) return 'SMCR';
  if (v === CLC_EYECATCHER_SMCD) return 'SMCD';
  return hex32(v);
}

function eyecatcherValue(s: ClcEyecatcher): number {
  if (s === 'SMCR') return CLC_EYECATCHER_SMCR;
  if (s === 'SMCD') return CLC_EYECATCHER_SMCD;
  if (s.startsWith('0x')) return parseInt(s.slice(2), 16) >>> 0;
  return 0;
}

function isEc(v: number): boolean { return v === CLC_EYECATCHER_SMCR || v === CLC_EYECATCHER_SMCD; }

/** Where a Peer ID's MAC starts (8 bytes: u16 instance, 6-byte MAC). */
const PEER_ID_MAC_AT = 2;
/** Peer ID as "<instance>@<mac>": a text form that a field table does not express, so read and
 *  written here (read through net/addr.ts's byte-keyed cache: one string object per value). */
function peerIdStr(b: Uint8Array, o: number): string { return peerIdAt(b, o, PEER_ID_MAC_AT); }

function putPeerId(b: Uint8Array, o: number, s: string): void {
  const at = s.indexOf('@');
  put16(b, o, at > 0 ? Number(s.slice(0, at)) : 0);
  b.set(parseMac(at >= 0 ? s.slice(at + 1) : s), o + PEER_ID_MAC_AT);
}

/** Blank-padded ASCII field (EID, host name) as text without the padding; '' for an
 *  all-zero field. Anything encode would not reproduce byte for byte (all blanks, NUL
 *  padding, non-printable bytes → '.') gets a 'clc.text' note. */
function text(b: Uint8Array, o: number, n: number, issues: Issue[], what: string): string {
  if (isZero(b, o, n) && o + n <= b.length) return '';
  let end = n;
  let nul = false;
  for (;;) {
    const c = u8(b, o + end - 1);
    if (end > 0 && (c === 0x20 || c === 0)) { if (c === 0) nul = true; end--; } else break;
  }
  if (end === 0) {
    issue(issues, 'note', 'clc.text', `${what} is empty but not all zero`, o, n);
    return '';
  }
  if (nul) issue(issues, 'note', 'clc.text', `${what} is NUL padded (expected blanks)`, o, n);
  let s = '';
  let bad = false;
  for (let i = 0; i < end; i++) {
    const c = u8(b, o + i);
    if (c >= 0x20 && c < 0x7f) s += String.fromCharCode(c);
    else { s += '.'; bad = true; }
  }
  if (bad) issue(issues, 'note', 'clc.text', `${what} has non-printable bytes`, o, n);
  return s;
}
function putText(b: Uint8Array, o: number, n: number, s: string): void {
  if (s === '') for (let i = 0; i < n; i++) b[o + i] = 0;
  else putAscii(b, o, n, s, 0x20);
}

function ismGidStr(gid: bigint): string { return '0x' + gid.toString(16).padStart(16, '0'); }

/** UEID/SEID syntax (formats.md §4.4): A–Z 0–9 '.' '-', first char alphanumeric, blank padded. */
function eidValid(b: Uint8Array, o: number): boolean {
  let end = 32;
  while (end > 0 && (b[o + end - 1] === 0x20 || b[o + end - 1] === 0)) end--;
  if (end === 0) return false;
  for (let i = 0; i < end; i++) {
    const c = b[o + i] ?? 0;
    const alnum = (c >= 0x41 && c <= 0x5a) || (c >= 0x30 && c <= 0x39);
    if (i === 0 ? !alnum : !(alnum || c === 0x2e || c === 0x2d)) return false;
  }
  return true;
}

/** Checks [o, o+n) lies inside the body (which ends at `end`); records one issue otherwise. */
function has(end: number, complete: boolean, o: number, n: number, issues: Issue[], what: string): boolean {
  if (o + n <= end) return true;
  const have = Math.max(0, end - o);
  if (complete) {
    issue(issues, 'error', 'clc.overrun', `${what} (${n} bytes at ${o}) extends beyond Length: only ${have} bytes before the trailer`, o, have);
  } else {
    issue(issues, 'error', 'clc.truncated', `truncated ${what}: need ${n} bytes at ${o}, have ${have}`, o, have);
  }
  return false;
}

function rsv(b: Uint8Array, o: number, n: number, issues: Issue[], what: string): void {
  if (!isZero(b, o, n)) issue(issues, 'warn', 'clc.reserved', `reserved ${what} not zero: ${hex(b, o, n)}`, o, n);
}

function copyBytes(b: Uint8Array, s: number, e: number): Uint8Array { return new Uint8Array(b.subarray(s, e)); }

// ---- peek ----

// One view per table (./views/clc.ts), re-pointed per message: decode and encode run one at
// a time, and each area of a message has its own view, so nested areas never share one.
const headerV = new ClcHeaderView();
const trailerV = new ClcHeaderView();
const proposalV = new ClcProposalView();
const propSmcdV = new ClcProposalSmcdView();
const prefixV = new ClcPrefixAreaView();
const ipv6PrefixV = new ClcIpv6PrefixView();
const v2ExtV = new ClcV2ExtView();
const ismGidV = new ClcIsmGidView();
const fceV = new ClcFceView();
const acceptFlagsV = new ClcAcceptFlagsView();
const smcrV = new ClcSmcrAcceptView();
const gidListV = new ClcGidListView();
const smcdV = new ClcSmcdAcceptView();
const declineV = new ClcDeclineView();

const H = CLC_HEADER_FIELDS;
/** Size of the header: the body starts here. */
export const CLC_HEADER_LEN = H.body.at;
/** The eyecatcher (and the trailer that repeats it) is 4 bytes. */
export const CLC_EYECATCHER_LEN = H.eyecatcher.size;
/** The shortest Length a CLC message can have: header + trailer. */
export const CLC_MIN_LEN = CLC_HEADER_LEN + CLC_TRAILER_LEN;

/** Is there an SMC eyecatcher ("SMCR"/"SMCD") at b[o]: a message's start, or its trailer at
 *  Length − 4? Bytes past the end of b read as 0 (no eyecatcher). */
export function isClcEyecatcherAt(b: Uint8Array, o: number): boolean {
  return isEc(trailerV.reset(b, o - H.eyecatcher.at).eyecatcher);
}

/** The Length field of the CLC header at b[0] (0 for the bytes not present). */
export function clcLengthField(b: Uint8Array): number { return headerV.reset(b, 0).length; }

/**
 * Peek at a TCP payload: if its first 8 bytes look like a CLC header (eyecatcher SMCR/SMCD,
 * type 1..4, Length ≥ 12 = header + trailer), return the Length field, else undefined.
 * Used by the reassembler to find CLC messages on any port.
 */
export function clcMessageLength(b: Uint8Array): number | undefined {
  if (b.length < CLC_HEADER_LEN) return undefined;
  const v = headerV.reset(b, 0);
  if (!isEc(v.eyecatcher)) return undefined;
  const type = v.typeCode;
  if (type < CLC_PROPOSAL || type > CLC_DECLINE) return undefined;
  const len = v.length;
  return len >= CLC_MIN_LEN ? len : undefined;
}

/** The eyecatchers' bytes, for streams that have fewer than four of them yet. */
const EC_BYTES = [CLC_EYECATCHER_SMCR, CLC_EYECATCHER_SMCD].map((v) => [v >>> 24, (v >>> 16) & 0xff, (v >>> 8) & 0xff, v & 0xff]);

/**
 * Could `b`, the first bytes of a stream (maybe fewer than a header), be the start of a CLC
 * message: the eyecatcher bytes present are SMCR's or SMCD's, and the type, once present, is a
 * CLC type (1–4). Used to hold a short segment back until the rest of the header arrives.
 */
export function couldStartClc(b: Uint8Array): boolean {
  const n = Math.min(b.length, H.eyecatcher.size);
  let ok = false;
  for (const ec of EC_BYTES) {
    let i = 0;
    while (i < n && b[H.eyecatcher.at + i] === ec[i]) i++;
    if (i === n) { ok = true; break; }
  }
  if (!ok || b.length <= H.typeCode.at) return ok;
  const type = b[H.typeCode.at]!;
  return type >= CLC_PROPOSAL && type <= CLC_DECLINE;
}

// ---- decode ----

export function decodeClc(b: Uint8Array, t?: Tree): Decoded<ClcMessage> {
  const issues: Issue[] = [];
  const n = b.length;
  if (n < CLC_HEADER_LEN) issue(issues, 'error', 'clc.truncated', `truncated CLC header: ${n} of ${CLC_HEADER_LEN} bytes`, 0, n);
  const hv = headerV.reset(b, 0);
  const ecv = hv.eyecatcher;
  const eyecatcher = eyecatcherName(ecv);
  if (n >= H.typeCode.at && !isEc(ecv)) issue(issues, 'error', 'clc.eyecatcher', `bad eyecatcher ${eyecatcher}`, H.eyecatcher.at, H.eyecatcher.size);
  const typeCode = hv.typeCode;
  const length = hv.length;
  const b7 = hv.byte7;
  const version = hv.version;

  // Where the message ends in b, and whether its trailer is there.
  let end = n;
  let complete = false;
  if (n >= H.byte7.at) {
    if (length < CLC_MIN_LEN) {
      issue(issues, 'error', 'clc.length', `Length ${length} is less than header + trailer (12)`, H.length.at, H.length.size);
      complete = n >= CLC_MIN_LEN;
    } else if (n < length) {
      issue(issues, 'error', 'clc.truncated', `truncated message: Length ${length}, have ${n} bytes`, n, 0);
    } else {
      if (n > length) issue(issues, 'note', 'clc.length', `${n - length} bytes beyond Length ${length} not decoded`, length, n - length);
      end = length;
      complete = true;
    }
  }
  const bodyEnd = complete ? end - CLC_TRAILER_LEN : end;
  let trailer = '';
  if (complete) {
    // the trailer repeats the eyecatcher: read with the header's eyecatcher field, at Length − 4
    const tv = trailerV.reset(b, bodyEnd - H.eyecatcher.at).eyecatcher;
    trailer = eyecatcherName(tv);
    if (!isEc(tv)) issue(issues, 'error', 'clc.trailer', `bad trailer eyecatcher ${trailer}`, bodyEnd, CLC_TRAILER_LEN);
    else if (tv !== ecv && isEc(ecv)) issue(issues, 'warn', 'clc.trailer', `trailer ${trailer} differs from eyecatcher ${eyecatcher}`, bodyEnd, CLC_TRAILER_LEN);
  }
  if (n >= CLC_HEADER_LEN && (version === 0 || version > 2)) issue(issues, 'note', 'clc.version', `unusual CLC version ${version}`, H.version.at, 1);

  if (t) {
    addField(t, H.eyecatcher, eyecatcher);
    addField(t, H.typeCode, `${typeCode} (${typeName(typeCode)})`);
    addField(t, H.length, length);
    addField(t, H.version, `${version} (byte 0x${b7.toString(16).padStart(2, '0')})`);
  }

  const body = bodyEnd < n ? b.subarray(0, bodyEnd) : b;
  let value: ClcMessage;
  switch (typeCode) {
    case CLC_PROPOSAL:
      value = decodeProposal(body, complete, issues, t, eyecatcher, length, version, trailer);
      break;
    case CLC_ACCEPT:
    case CLC_CONFIRM:
      value = decodeAcceptConfirm(body, complete, issues, t, eyecatcher, typeCode, length, version, trailer);
      break;
    case CLC_DECLINE:
      value = decodeDecline(body, complete, issues, t, eyecatcher, length, version, trailer);
      break;
    default: {
      if (n > H.typeCode.at) issue(issues, 'error', 'clc.type', `unknown CLC type ${typeCode}`, H.typeCode.at, 1);
      const m: ClcUnknown = { type: 'unknown', eyecatcher, typeCode, length, version, flags: headerV.reset(b, 0).flags, body: copyBytes(b, H.body.at, Math.max(H.body.at, bodyEnd)), trailer };
      t?.add(H.body.label, H.body.at, Math.max(0, bodyEnd - H.body.at));
      value = m;
    }
  }
  if (t && complete) t.add('Trailer', bodyEnd, CLC_TRAILER_LEN, trailer);
  return { value, issues };
}

function typeName(code: number): string {
  return (H.typeCode.names as Readonly<Record<number, string>>)[code] ?? 'unknown';
}

/** Bytes after `pos` up to the trailer → `extra` (with an issue). */
function takeExtra(b: Uint8Array, pos: number, issues: Issue[], t: Tree | undefined): Uint8Array | undefined {
  if (pos >= b.length) return undefined;
  issue(issues, 'warn', 'clc.extra', `${b.length - pos} unexpected bytes before the trailer`, pos, b.length - pos);
  t?.add('Unexpected bytes', pos, b.length - pos, hex(b, pos));
  return copyBytes(b, pos, b.length);
}

/** Reserved bytes of a table at base + spec.at must be zero. */
function rsvField(b: Uint8Array, base: number, s: BytesSpec, issues: Issue[], what: string): void {
  rsv(b, base + s.at, s.len, issues, what);
}

/** The 5 bytes at o as one big-endian unsigned bigint (the Proposal's vendor options: no
 *  40-bit width in a field table): the high byte, then a u32. */
function readUint40(b: Uint8Array, o: number): bigint {
  return (BigInt(u8(b, o)) << 32n) | BigInt(u32(b, o + 1));
}
function writeUint40(b: Uint8Array, o: number, v: bigint): void {
  b[o] = Number((v >> 32n) & 0xffn);
  put32(b, o + 1, Number(v & 0xffffffffn));
}

function decodeProposal(b: Uint8Array, complete: boolean, issues: Issue[], t: Tree | undefined,
  eyecatcher: string, length: number, version: number, trailer: string): ClcProposal {
  const end = b.length;
  const F = CLC_PROPOSAL_FIELDS;
  const pv = proposalV.reset(b, 0);
  const typev2 = pv.typev2;
  const typev1 = pv.typev1;
  const fixedEnd = CLC_PROPOSAL_SMCD_AT;
  has(end, complete, 0, fixedEnd, issues, 'Proposal fixed part');
  const ipAreaOffset = pv.ipAreaOffset;
  const m: ClcProposal = {
    type: 'proposal', eyecatcher, typeCode: CLC_PROPOSAL, length, version, typev2, typev1,
    peerId: peerIdStr(b, F.peerId.at), gid: ipv6At(b, F.gid.at), mac: macAt(b, F.mac.at), ipAreaOffset, trailer,
  };
  if (t) {
    addField(t, F.paths, `v2 ${PATH_NAMES[typev2]} v1 ${PATH_NAMES[typev1]}`);
    addField(t, F.peerId, m.peerId);
    addField(t, F.gid, m.gid);
    addField(t, F.mac, m.mac);
    addField(t, F.ipAreaOffset, ipAreaOffset);
  }
  if (typev1 === PATH_N && version < 2) issue(issues, 'warn', 'clc.path', 'v1 Proposal offers no v1 path (typev1 N)', F.paths.at, 1);
  if (ipAreaOffset !== 0 && ipAreaOffset !== CLC_PROPOSAL_SMCD_AT) {
    issue(issues, 'warn', 'clc.offset', `IP area offset ${ipAreaOffset} (expected 0 or 40${ipAreaOffset > 40 ? '; Linux rejects > 40' : ''})`, F.ipAreaOffset.at, F.ipAreaOffset.size);
  }
  let structEnd = Math.min(fixedEnd, end);

  // SMC-D / v2 info area: at 40 when the IP area offset says so (v1) and always in v2
  // (Linux v2-only proposals carry IP area offset 0 and the area anyway).
  const P = fixedEnd + ipAreaOffset;
  const S = CLC_PROPOSAL_SMCD_AT;
  const SF = CLC_PROPOSAL_SMCD_FIELDS;
  const smcdLen = CLC_PROPOSAL_SMCD_LEN;
  if ((ipAreaOffset >= fixedEnd || version >= 2) && end > S) {
    has(end, complete, S, smcdLen, issues, 'SMC-D area');
    const sv = propSmcdV.reset(b, S);
    const smcd: ClcProposalSmcd = {
      ismGid: sv.ismGid, ismChid: sv.ismChid, v2ExtOffset: sv.v2ExtOffset, vendorOui: sv.vendorOui,
      vendorExp: readUint40(b, S + SF.vendorExp.at),
    };
    rsvField(b, S, SF.reserved, issues, 'SMC-D area bytes');
    m.smcd = smcd;
    structEnd = S + smcdLen;
    if (t) {
      const s = t.sub('SMC-D area', S, smcdLen);
      addField(s, SF.ismGid, ismGidStr(smcd.ismGid));
      addField(s, SF.ismChid, '0x' + smcd.ismChid.toString(16).padStart(4, '0'));
      addField(s, SF.v2ExtOffset, `${smcd.v2ExtOffset} (at ${CLC_V2_EXT_BASE + smcd.v2ExtOffset!})`);
      addField(s, SF.vendorOui, '0x' + smcd.vendorOui.toString(16).padStart(6, '0'));
      addField(s, SF.vendorExp, '0x' + smcd.vendorExp.toString(16).padStart(10, '0'));
    }
  }

  // IP prefix area
  const PF = CLC_PREFIX_AREA_FIELDS;
  const prefixFixed = PF.ipv6.at;
  if (typev1 !== PATH_N) {
    if (m.smcd && P < S + smcdLen) issue(issues, 'warn', 'clc.offset', `IP prefix area at ${P} overlaps the SMC-D area`, F.ipAreaOffset.at, F.ipAreaOffset.size);
    if (P < end) {
      has(end, complete, P, prefixFixed, issues, 'IP prefix area');
      const av = prefixV.reset(b, P);
      const cnt = av.ipv6Count;
      const area: ClcIpPrefixArea = { ipv4: ipv4At(b, P + PF.ipv4.at), ipv4Len: av.ipv4Len, ipv6: [] };
      rsvField(b, P, PF.reserved, issues, 'IP prefix area bytes');
      if (area.ipv4Len > 32) issue(issues, 'warn', 'clc.prefix', `IPv4 prefix length ${area.ipv4Len} > 32`, P + PF.ipv4Len.at, 1);
      if (cnt > 8) issue(issues, 'warn', 'clc.count', `IPv6 prefix count ${cnt} > 8 (Linux rejects)`, P + PF.ipv6Count.at, 1);
      const s = t?.sub('IP prefix area', P, entryAt(PF.ipv6, cnt));
      if (s) addSpan(s, PF.ipv4, PF.ipv4Len, `${area.ipv4}/${area.ipv4Len}`);
      if (s) addField(s, PF.ipv6Count, cnt);
      const E = CLC_IPV6_PREFIX_FIELDS;
      for (let i = 0; i < cnt; i++) {
        const o = P + entryAt(PF.ipv6, i);
        if (!has(end, complete, o, PF.ipv6.len, issues, `IPv6 prefix ${i}`)) break;
        const p: ClcIpv6Prefix = { prefix: ipv6At(b, o + E.prefix.at), len: ipv6PrefixV.reset(b, o).prefixLen };
        if (p.len > 128) issue(issues, 'warn', 'clc.prefix', `IPv6 prefix length ${p.len} > 128`, o + E.prefixLen.at, 1);
        area.ipv6.push(p);
        s?.add(`${PF.ipv6.label} ${i}`, entryAt(PF.ipv6, i), PF.ipv6.len, `${p.prefix}/${p.len}`);
      }
      m.prefix = area;
      structEnd = Math.max(structEnd, Math.min(end, P + entryAt(PF.ipv6, cnt)));
    } else {
      has(end, complete, P, prefixFixed, issues, 'IP prefix area');
    }
  }

  // v2 extension
  if (version >= 2 && typev2 !== PATH_N) {
    const smcd = m.smcd;
    if (!smcd) {
      has(end, complete, S, smcdLen, issues, 'SMC-D area');
    } else {
      const structEnd2 = decodeV2Ext(b, complete, issues, t, m, smcd, P, S + smcdLen, typev2);
      structEnd = Math.max(structEnd, structEnd2);
    }
  }
  const extra = takeExtra(b, structEnd, issues, t);
  if (extra) m.extra = extra;
  return m;
}

/** The Proposal's v2 extension and, if offered, its SMC-Dv2 extension; returns where they end. */
function decodeV2Ext(b: Uint8Array, complete: boolean, issues: Issue[], t: Tree | undefined, m: ClcProposal,
  smcd: ClcProposalSmcd, P: number, smcdEnd: number, typev2: number): number {
  const end = b.length;
  const X = CLC_V2_EXT_FIELDS;
  const fixed = X.eids.at;
  const V = CLC_V2_EXT_BASE + (smcd.v2ExtOffset ?? 0);
  const expected = m.prefix ? P + entryAt(CLC_PREFIX_AREA_FIELDS.ipv6, m.prefix.ipv6.length) : Math.max(smcdEnd, P);
  const offAt = CLC_PROPOSAL_SMCD_AT + CLC_PROPOSAL_SMCD_FIELDS.v2ExtOffset.at;
  if (V !== expected) issue(issues, V < expected ? 'warn' : 'note', 'clc.offset', `v2 extension at ${V}, expected ${expected}`, offAt, 2);
  if (V >= end) {
    has(end, complete, V, fixed, issues, 'v2 extension');
    return 0;
  }
  has(end, complete, V, fixed, issues, 'v2 extension');
  const xv = v2ExtV.reset(b, V);
  const eidCnt = xv.eidCount;
  const gidCnt = xv.gidCount;
  const v2: ClcProposalV2Ext = {
    eids: [], release: xv.release, seidFlag: xv.seidFlag, smcdv2ExtOffset: xv.smcdv2ExtOffset,
    roceV2Gid: ipv6At(b, V + X.roceV2Gid.at), maxConns: xv.maxConns, maxLinks: xv.maxLinks, featureMask: xv.featureMask,
  };
  rsvField(b, V, X.reserved2, issues, 'v2 extension byte');
  if (xv.flagsReserved) issue(issues, 'warn', 'clc.reserved', `reserved v2 flag bits set: 0x${(xv.flagsReserved << X.flagsReserved.shift).toString(16)}`, V + X.flags.at, 1);
  rsvField(b, V, X.reserved4, issues, 'v2 extension bytes');
  rsvField(b, V, X.reserved28, issues, 'v2 extension bytes');
  if (eidCnt > 8) issue(issues, 'warn', 'clc.count', `EID count ${eidCnt} > 8`, V + X.eidCount.at, 1);
  if (gidCnt > 8) issue(issues, 'warn', 'clc.count', `ISM GID count ${gidCnt} > 8`, V + X.gidCount.at, 1);
  const dOffered = typev2 === PATH_D || typev2 === PATH_B;
  const s = t?.sub('v2 extension', V, entryAt(X.eids, eidCnt));
  if (s) {
    addField(s, X.eidCount, eidCnt);
    addField(s, X.gidCount, gidCnt);
    addField(s, X.flags, `release ${v2.release}${v2.seidFlag ? ' SEID' : ''}`);
    addField(s, X.smcdv2ExtOffset, dOffered ? `${v2.smcdv2ExtOffset} (at ${V + CLC_SMCDV2_EXT_BASE + v2.smcdv2ExtOffset!})` : `${v2.smcdv2ExtOffset} (no SMC-Dv2)`);
    addField(s, X.roceV2Gid, v2.roceV2Gid);
    addField(s, X.maxConns, v2.maxConns);
    addField(s, X.maxLinks, v2.maxLinks);
    addField(s, X.featureMask, '0x' + v2.featureMask.toString(16).padStart(4, '0'));
  }
  for (let i = 0; i < eidCnt; i++) {
    const o = V + entryAt(X.eids, i);
    if (!has(end, complete, o, X.eids.len, issues, `EID ${i}`)) break;
    if (!eidValid(b, o)) issue(issues, 'note', 'clc.eid', `EID ${i} is not a valid UEID (A-Z 0-9 . -)`, o, X.eids.len);
    v2.eids.push(text(b, o, X.eids.len, issues, `EID ${i}`));
    s?.add(`${X.eids.label} ${i}`, entryAt(X.eids, i), X.eids.len, v2.eids[i]);
  }
  m.v2 = v2;
  let structEnd = Math.min(end, V + entryAt(X.eids, eidCnt));
  if (typev2 === PATH_R && gidCnt > 0) issue(issues, 'note', 'clc.count', `ISM GID count ${gidCnt} without SMC-Dv2 offered`, V + X.gidCount.at, 1);

  // SMC-Dv2 extension
  if (dOffered) {
    const DX = CLC_SMCDV2_EXT_FIELDS;
    const dFixed = DX.gids.at;
    const D = V + CLC_SMCDV2_EXT_BASE + (v2.smcdv2ExtOffset ?? 0);
    const dExp = V + entryAt(X.eids, eidCnt);
    if (D !== dExp) issue(issues, D < dExp ? 'warn' : 'note', 'clc.offset', `SMC-Dv2 extension at ${D}, expected ${dExp}`, V + X.smcdv2ExtOffset.at, 2);
    if (D < end) {
      has(end, complete, D, dFixed, issues, 'SMC-Dv2 extension');
      const ext: ClcProposalSmcdV2Ext = { seid: text(b, D + DX.seid.at, DX.seid.len, issues, 'System EID'), gids: [] };
      rsvField(b, D, DX.reserved, issues, 'SMC-Dv2 extension bytes');
      const ds = t?.sub('SMC-Dv2 extension', D, entryAt(DX.gids, gidCnt));
      if (ds) addField(ds, DX.seid, ext.seid);
      decodeIsmGids(b, complete, D, gidCnt, issues, ds, ext.gids);
      m.smcdv2 = ext;
      structEnd = Math.max(structEnd, Math.min(end, D + entryAt(DX.gids, gidCnt)));
    } else {
      has(end, complete, D, dFixed, issues, 'SMC-Dv2 extension');
    }
  }
  return structEnd;
}

/** ISM GID entries of the SMC-Dv2 extension at D; an emulated ISM device takes two entries. */
function decodeIsmGids(b: Uint8Array, complete: boolean, D: number, gidCnt: number, issues: Issue[], ds: Tree | undefined, out: ClcIsmGid[]): void {
  const end = b.length;
  const first = CLC_SMCDV2_EXT_FIELDS.gids;
  const G = CLC_ISM_GID_FIELDS;
  const len = first.len;
  const name = first.label;
  for (let i = 0; i < gidCnt; i++) {
    const o = D + entryAt(first, i);
    if (!has(end, complete, o, len, issues, `ISM GID entry ${i}`)) break;
    const gv = ismGidV.reset(b, o);
    const g: ClcIsmGid = { chid: gv.chid, gid: gv.gid };
    if ((g.chid & EMULATED_ISM_CHID_MASK) === EMULATED_ISM_CHID_MASK) {
      if (i + 1 < gidCnt && o + 2 * len <= end) {
        const gv2 = ismGidV.reset(b, o + len);
        g.gidExt = gv2.gid;
        const c2 = gv2.chid;
        if (c2 !== g.chid) {
          g.chidExt = c2;
          issue(issues, 'warn', 'clc.ism', `emulated ISM entry pair ${i}/${i + 1} with different CHIDs`, o + len + G.chid.at, G.chid.size);
        }
        ds?.add(`${name} ${i}+${i + 1} (emulated)`, entryAt(first, i), 2 * len, `${ismGidStr(g.gid)}:${ismGidStr(g.gidExt).slice(2)} chid 0x${g.chid.toString(16)}`);
        i++;
      } else {
        issue(issues, 'warn', 'clc.ism', `emulated ISM entry ${i} (CHID 0x${g.chid.toString(16)}) without its second entry`, o, len);
        ds?.add(`${name} ${i}`, entryAt(first, i), len, `${ismGidStr(g.gid)} chid 0x${g.chid.toString(16)}`);
      }
    } else {
      ds?.add(`${name} ${i}`, entryAt(first, i), len, `${ismGidStr(g.gid)} chid 0x${g.chid.toString(16)}`);
    }
    out.push(g);
  }
}

function decodeFce(b: Uint8Array, o: number, len: number, issues: Issue[], t: Tree | undefined): ClcFce {
  const F = CLC_FCE_FIELDS;
  const v = fceV.reset(b, o);
  const f: ClcFce = { v2Direct: v.v2Direct, osType: v.osType, release: v.release, hostname: text(b, o + F.hostname.at, F.hostname.len, issues, 'FCE hostname') };
  if (v.flagsReserved) issue(issues, 'warn', 'clc.reserved', `reserved FCE flag bits set: 0x${v.flagsReserved.toString(16)}`, o + F.flags.at, 1);
  rsvField(b, o, F.reserved2, issues, 'FCE bytes');
  if (len >= CLC_FCE_LEN) {
    f.maxConns = v.maxConns;
    f.maxLinks = v.maxLinks;
    f.featureMask = v.featureMask;
    f.vendorExp = v.vendorExp;
    rsvField(b, o, F.reserved44, issues, 'FCE bytes');
  }
  if (t) {
    const s = t.sub('First-contact extension', o, len);
    addField(s, F.flags, f.v2Direct ? 'v2 direct' : 'indirect');
    addField(s, F.osRelease, `os ${f.osType} (${osName(f.osType)}) release ${f.release}`);
    addField(s, F.hostname, f.hostname);
    if (f.maxConns !== undefined) {
      addField(s, F.maxConns, f.maxConns);
      addField(s, F.maxLinks, f.maxLinks!);
      addField(s, F.featureMask, '0x' + f.featureMask!.toString(16).padStart(4, '0'));
      addField(s, F.vendorExp, hex32(f.vendorExp!));
    }
  }
  return f;
}

function osName(os: number): string {
  switch (os) {
    case 1: return 'z/OS';
    case 2: return 'Linux';
    case 3: return 'AIX';
    case 15: return 'unknown';
    default: return `os${os}`;
  }
}

function decodeAcceptConfirm(b: Uint8Array, complete: boolean, issues: Issue[], t: Tree | undefined,
  eyecatcher: string, typeCode: number, length: number, version: number, trailer: string): ClcAcceptConfirm {
  const end = b.length;
  const A = CLC_ACCEPT_FLAGS_FIELDS;
  const av = acceptFlagsV.reset(b, 0);
  const typev1 = av.path;
  const firstContact = av.firstContact;
  const what = typeCode === CLC_ACCEPT ? 'Accept' : 'Confirm';
  const m: ClcAcceptConfirm = {
    type: typeCode === CLC_ACCEPT ? 'accept' : 'confirm', eyecatcher, typeCode, length, version, firstContact, typev1, trailer,
  };
  if (av.reservedBit) issue(issues, 'warn', 'clc.reserved', 'reserved byte-7 bit 2 set', A.flags.at, 1);
  if (typev1 !== PATH_R && typev1 !== PATH_D) issue(issues, 'warn', 'clc.path', `${what} path ${PATH_NAMES[typev1]} (expected R or D); decoded as SMC-R`, A.flags.at, 1);
  const isD = typev1 === PATH_D;
  const ecv = eyecatcherValue(eyecatcher);
  if (isEc(ecv) && (ecv === CLC_EYECATCHER_SMCD) !== isD) {
    issue(issues, 'note', 'clc.eyecatcher', `eyecatcher ${eyecatcher} with path ${PATH_NAMES[typev1]} (Linux uses ${isD ? 'SMCD' : 'SMCR'})`, H.eyecatcher.at, H.eyecatcher.size);
  }
  if (t) addField(t, A.flags, `${firstContact ? 'first contact, ' : ''}path ${PATH_NAMES[typev1]}`);
  const pos = isD ? decodeSmcdAccept(b, complete, issues, t, m, what) : decodeSmcrAccept(b, complete, issues, t, m, what);
  const extra = takeExtra(b, Math.min(pos, end), issues, t);
  if (extra) m.extra = extra;
  return m;
}

/** SMC-R Accept/Confirm body into m.r; returns where the decoded structure ends. */
function decodeSmcrAccept(b: Uint8Array, complete: boolean, issues: Issue[], t: Tree | undefined, m: ClcAcceptConfirm, what: string): number {
  const end = b.length;
  const R = CLC_SMCR_ACCEPT_FIELDS;
  const v1End = R.eid.at;
  has(end, complete, 0, v1End, issues, `SMC-R ${what} fixed part`);
  const v = smcrV.reset(b, 0);
  const r: ClcSmcrAcceptConfirm = {
    peerId: peerIdStr(b, R.peerId.at), gid: ipv6At(b, R.gid.at), mac: macAt(b, R.mac.at), qpn: v.qpn, rkey: v.rkey,
    rmbeIdx: v.rmbeIdx, token: v.token, rmbeSizeCode: v.rmbeSizeCode, mtuCode: v.mtuCode, rmbVa: v.rmbVa, psn: v.psn,
  };
  rsvField(b, 0, R.reserved51, issues, 'byte 51');
  rsvField(b, 0, R.reserved60, issues, 'byte 60');
  if (r.mtuCode < 1 || r.mtuCode > 5) issue(issues, 'warn', 'clc.mtu', `invalid QP MTU code ${r.mtuCode}`, R.sizeMtu.at, 1);
  if (t) {
    addField(t, R.peerId, r.peerId);
    addField(t, R.gid, r.gid);
    addField(t, R.mac, r.mac);
    addField(t, R.qpn, '0x' + r.qpn.toString(16));
    addField(t, R.rkey, hex32(r.rkey));
    addField(t, R.rmbeIdx, r.rmbeIdx);
    addField(t, R.token, hex32(r.token));
    addField(t, R.sizeMtu, `${r.rmbeSizeCode} (${fmtSize(bufSizeFromCode(r.rmbeSizeCode))}) / ${r.mtuCode} (${mtuFromCode(r.mtuCode)})`);
    addField(t, R.rmbVa, '0x' + r.rmbVa.toString(16));
    addField(t, R.psn, '0x' + r.psn.toString(16));
  }
  m.r = r;
  let pos: number = v1End;
  if (m.version < 2) return pos;
  if (!has(end, complete, v1End, CLC_SMCR_FCE_AT - v1End, issues, 'v2 EID')) return pos;
  r.eid = text(b, R.eid.at, R.eid.len, issues, 'EID');
  rsvField(b, 0, R.reserved96, issues, 'bytes 96-103');
  if (t) addField(t, R.eid, r.eid);
  pos = CLC_SMCR_FCE_AT;
  if (!m.firstContact || !has(end, complete, CLC_SMCR_FCE_AT, CLC_FCE_LEN, issues, 'first-contact extension')) return pos;
  r.fce = decodeFce(b, CLC_SMCR_FCE_AT, CLC_FCE_LEN, issues, t);
  pos = CLC_SMCR_FCE_AT + CLC_FCE_LEN;
  const GL = CLC_GID_LIST_FIELDS;
  const G = CLC_SMCR_GID_LIST_AT;
  if (m.typeCode === CLC_CONFIRM && has(end, complete, G, GL.gids.at, issues, 'Confirm GID list')) {
    const cnt = gidListV.reset(b, G).count;
    rsvField(b, G, GL.reserved, issues, 'GID list bytes');
    if (cnt > 2) issue(issues, 'warn', 'clc.count', `GID list count ${cnt} > 2`, G + GL.count.at, 1);
    const s = t?.sub('GID list', G, entryAt(GL.gids, cnt));
    if (s) addField(s, GL.count, cnt);
    r.gidList = [];
    for (let i = 0; i < cnt; i++) {
      if (!has(end, complete, G + entryAt(GL.gids, i), GL.gids.len, issues, `GID list entry ${i}`)) break;
      r.gidList.push(ipv6At(b, G + entryAt(GL.gids, i)));
      s?.add(`${GL.gids.label} ${i}`, entryAt(GL.gids, i), GL.gids.len, r.gidList[i]);
    }
    pos = Math.min(end, G + entryAt(GL.gids, cnt));
  }
  return pos;
}

/** SMC-D Accept/Confirm body into m.d; returns where the decoded structure ends. */
function decodeSmcdAccept(b: Uint8Array, complete: boolean, issues: Issue[], t: Tree | undefined, m: ClcAcceptConfirm, what: string): number {
  const end = b.length;
  const D = CLC_SMCD_ACCEPT_FIELDS;
  const v1Fixed = D.reservedV1.at;
  has(end, complete, 0, v1Fixed, issues, `SMC-D ${what} fixed part`);
  const v = smcdV.reset(b, 0);
  const d: ClcSmcdAcceptConfirm = {
    gid: v.gid, dmbToken: v.dmbToken, dmbeIdx: v.dmbeIdx, dmbeSizeCode: v.dmbeSizeCode, linkId: v.linkId,
  };
  if (v.dmbeSizeReserved) issue(issues, 'warn', 'clc.reserved', 'reserved low nibble of byte 25 not zero', D.dmbeSize.at, 1);
  rsvField(b, 0, D.reserved26, issues, 'bytes 26-27');
  if (t) {
    addField(t, D.gid, ismGidStr(d.gid));
    addField(t, D.dmbToken, '0x' + d.dmbToken.toString(16));
    addField(t, D.dmbeIdx, d.dmbeIdx);
    addField(t, D.dmbeSize, `${d.dmbeSizeCode} (${fmtSize(bufSizeFromCode(d.dmbeSizeCode))})`);
    addField(t, D.linkId, hex32(d.linkId));
  }
  m.d = d;
  let pos: number = v1Fixed;
  if (m.version >= 2) {
    if (has(end, complete, v1Fixed, CLC_SMCD_FCE_AT - v1Fixed, issues, 'SMC-D v2 fields')) {
      d.chid = v.chid;
      d.eid = text(b, D.eid.at, D.eid.len, issues, 'EID');
      d.gidExt = v.gidExt;
      if (t) {
        addField(t, D.chid, '0x' + d.chid.toString(16).padStart(4, '0'));
        addField(t, D.eid, d.eid);
        addField(t, D.gidExt, ismGidStr(d.gidExt));
      }
      pos = CLC_SMCD_FCE_AT;
      if (m.firstContact) {
        const rem = end - CLC_SMCD_FCE_AT;
        const fl = rem >= CLC_FCE_LEN ? CLC_FCE_LEN : CLC_FCE_V20_SMCD_LEN;
        if (has(end, complete, CLC_SMCD_FCE_AT, fl, issues, 'first-contact extension')) {
          d.fce = decodeFce(b, CLC_SMCD_FCE_AT, fl, issues, t);
          pos = CLC_SMCD_FCE_AT + fl;
        }
      }
    }
  } else if (has(end, complete, v1Fixed, D.reservedV1.len, issues, 'SMC-D v1 reserved bytes')) {
    rsvField(b, 0, D.reservedV1, issues, 'bytes 32-43');
    pos = v1Fixed + D.reservedV1.len;
  }
  return pos;
}

function decodeDecline(b: Uint8Array, complete: boolean, issues: Issue[], t: Tree | undefined,
  eyecatcher: string, length: number, version: number, trailer: string): ClcDecline {
  const end = b.length;
  const D = CLC_DECLINE_FIELDS;
  const v1End = D.diagExtra.at;
  has(end, complete, 0, v1End, issues, 'Decline');
  const v = declineV.reset(b, 0);
  const typev1 = v.typev1;
  const m: ClcDecline = {
    type: 'decline', eyecatcher, typeCode: CLC_DECLINE, length, version, outOfSync: v.outOfSync, typev1,
    peerId: peerIdStr(b, D.peerId.at), diagnosis: v.diagnosis, osType: v.osType, trailer,
  };
  if (v.reservedBit) issue(issues, 'warn', 'clc.reserved', 'reserved byte-7 bit 2 set', D.flags.at, 1);
  if (typev1 === PATH_N || typev1 === PATH_B) {
    issue(issues, 'warn', 'clc.reserved', `Decline typev1 bits = ${typev1} (reserved; Linux <= 6.16 aborts instead of falling back)`, D.flags.at, 1);
  }
  if (v.osReserved) issue(issues, 'warn', 'clc.reserved', 'reserved low nibble of byte 20 not zero', D.os.at, 1);
  rsvField(b, 0, D.reserved21, issues, 'bytes 21-23');
  if (eyecatcherValue(eyecatcher) === CLC_EYECATCHER_SMCD) issue(issues, 'note', 'clc.eyecatcher', 'Decline with eyecatcher SMCD (Linux uses SMCR)', H.eyecatcher.at, H.eyecatcher.size);
  const r = declineReason(m.diagnosis);
  if (r.name === 'UNKNOWN' && end >= D.os.at) issue(issues, 'note', 'clc.reason', `unknown decline reason ${hex32(m.diagnosis)}`, D.diagnosis.at, D.diagnosis.size);
  if (t) {
    addField(t, D.flags, `${m.outOfSync ? 'out of sync, ' : ''}typev1 ${typev1}`);
    addField(t, D.peerId, m.peerId);
    addField(t, D.diagnosis, formatReason(m.diagnosis));
    addField(t, D.os, `${m.osType} (${osName(m.osType)})`);
  }
  let pos: number = v1End;
  if (version >= 2 && has(end, complete, D.diagExtra.at, D.diagExtra.len, issues, 'v2 diagnosis words')) {
    m.diagExtra = [];
    for (let i = 0; i < DECLINE_DIAG_WORDS; i++) m.diagExtra.push(u32(b, D.diagExtra.at + 4 * i));
    if (t) addField(t, D.diagExtra, m.diagExtra.map(hex32).join(' '));
    pos = D.diagExtra.at + D.diagExtra.len;
  }
  const extra = takeExtra(b, Math.min(pos, end), issues, t);
  if (extra) m.extra = extra;
  return m;
}

/** The v2 Decline's further diagnosis: 4 u32 words (a list of equal words, not named fields). */
const DECLINE_DIAG_WORDS = CLC_DECLINE_FIELDS.diagExtra.len / 4;

// ---- encode ----

/** Linux's layout for a Proposal: positions of each area and the total length. */
function proposalLayout(m: Omit<ClcProposal, 'length'>): {
  smcd?: ClcProposalSmcd; off: number; P: number; v2Off: number; V: number; dOff: number; D: number; entries: number; end: number;
} {
  const S = CLC_PROPOSAL_SMCD_AT;
  const smcdEnd = S + CLC_PROPOSAL_SMCD_LEN;
  const eids = CLC_V2_EXT_FIELDS.eids;
  const smcd0 = m.smcd ?? (m.v2 ? { ismGid: 0n, ismChid: 0, vendorOui: 0, vendorExp: 0n } : undefined);
  const off = m.ipAreaOffset ?? (smcd0 && m.prefix ? S : 0);
  const smcd = smcd0 && (off >= S || m.version >= 2) ? smcd0 : undefined;
  const P = S + off;
  let end = smcd ? smcdEnd : S;
  let afterPrefix = Math.max(P, end);
  if (m.prefix) { afterPrefix = P + entryAt(CLC_PREFIX_AREA_FIELDS.ipv6, m.prefix.ipv6.length); end = Math.max(end, afterPrefix); }
  const v2 = smcd ? m.v2 : undefined;
  const v2Off = smcd?.v2ExtOffset ?? (v2 ? afterPrefix - CLC_V2_EXT_BASE : 0);
  const V = CLC_V2_EXT_BASE + v2Off;
  let dOff = 0, D = 0, entries = 0;
  if (v2) {
    end = Math.max(end, V + entryAt(eids, v2.eids.length));
    dOff = v2.smcdv2ExtOffset ?? (m.smcdv2 ? entryAt(eids, v2.eids.length) - CLC_SMCDV2_EXT_BASE : 0);
    D = V + CLC_SMCDV2_EXT_BASE + dOff;
    if (m.smcdv2) {
      for (const g of m.smcdv2.gids) entries += g.gidExt !== undefined ? 2 : 1;
      end = Math.max(end, D + entryAt(CLC_SMCDV2_EXT_FIELDS.gids, entries));
    }
  }
  return { ...(smcd ? { smcd } : {}), off, P, v2Off, V, dOff, D, entries, end };
}

function putFce(b: Uint8Array, o: number, f: ClcFce): void {
  const w = fceV.reset(b, o);
  w.v2Direct = f.v2Direct;
  w.osType = f.osType & 0x0f;
  w.release = f.release & 0x0f;
  putText(b, o + CLC_FCE_FIELDS.hostname.at, CLC_FCE_FIELDS.hostname.len, f.hostname);
  if (f.maxConns !== undefined) {
    w.maxConns = f.maxConns & 0xff;
    w.maxLinks = (f.maxLinks ?? 0) & 0xff;
    w.featureMask = f.featureMask ?? 0;
    w.vendorExp = f.vendorExp ?? 0;
  }
}

function fceLen(f: ClcFce): number { return f.maxConns !== undefined ? CLC_FCE_LEN : CLC_FCE_V20_SMCD_LEN; }

/** Size of the structure after the header and before `extra` and the trailer. */
function structSize(m: ClcInput, lay: ReturnType<typeof proposalLayout> | undefined): number {
  switch (m.type) {
    case 'proposal':
      return lay!.end;
    case 'accept':
    case 'confirm':
      if (m.d) {
        const D = CLC_SMCD_ACCEPT_FIELDS;
        return m.version >= 2 ? CLC_SMCD_FCE_AT + (m.firstContact && m.d.fce ? fceLen(m.d.fce) : 0) : D.reservedV1.at + D.reservedV1.len;
      } else {
        const r = m.r;
        let size = m.version >= 2 ? CLC_SMCR_FCE_AT : CLC_SMCR_ACCEPT_FIELDS.eid.at;
        if (m.version >= 2 && m.firstContact && r?.fce) {
          size += CLC_FCE_LEN;
          if (m.type === 'confirm' && r.gidList) size += entryAt(CLC_GID_LIST_FIELDS.gids, r.gidList.length);
        }
        return size;
      }
    case 'decline': {
      const X = CLC_DECLINE_FIELDS.diagExtra;
      return m.version >= 2 ? X.at + X.len : X.at;
    }
    default:
      return CLC_HEADER_LEN + m.body.length;
  }
}

/** Value → exact bytes. Length = `m.length` if given, else the size of the encoded layout. */
export function encodeClc(m: ClcInput): Uint8Array {
  const lay = m.type === 'proposal' ? proposalLayout(m) : undefined;
  const structEnd = structSize(m, lay);
  const size = structEnd + (m.extra?.length ?? 0) + CLC_TRAILER_LEN;
  const b = new Uint8Array(size);
  const h = headerV.reset(b, 0);
  h.eyecatcher = eyecatcherValue(m.eyecatcher);
  h.typeCode = m.typeCode & 0xff;
  h.length = m.length ?? size;
  h.version = m.version & 0x0f;
  trailerV.reset(b, size - CLC_TRAILER_LEN - H.eyecatcher.at).eyecatcher = eyecatcherValue(m.trailer);
  if (m.extra) b.set(m.extra, structEnd);

  switch (m.type) {
    case 'proposal':
      putProposal(b, m, lay!);
      break;
    case 'accept':
    case 'confirm': {
      const a = acceptFlagsV.reset(b, 0);
      a.firstContact = m.firstContact;
      a.path = m.typev1 & 3;
      if (m.d) putSmcdAccept(b, m, m.d);
      else if (m.r) putSmcrAccept(b, m, m.r);
      break;
    }
    case 'decline': {
      const D = CLC_DECLINE_FIELDS;
      const w = declineV.reset(b, 0);
      w.outOfSync = m.outOfSync;
      w.typev1 = m.typev1 & 3;
      putPeerId(b, D.peerId.at, m.peerId);
      w.diagnosis = m.diagnosis;
      w.osType = m.osType & 0x0f;
      if (m.version >= 2) for (let i = 0; i < DECLINE_DIAG_WORDS; i++) put32(b, D.diagExtra.at + 4 * i, m.diagExtra?.[i] ?? 0);
      break;
    }
    default:
      headerV.reset(b, 0).flags = m.flags & 0x0f;
      b.set(m.body, H.body.at);
  }
  return b;
}

function putProposal(b: Uint8Array, m: Omit<ClcProposal, 'length'>, L: ReturnType<typeof proposalLayout>): void {
  const F = CLC_PROPOSAL_FIELDS;
  const w = proposalV.reset(b, 0);
  w.typev2 = m.typev2 & 3;
  w.typev1 = m.typev1 & 3;
  putPeerId(b, F.peerId.at, m.peerId);
  b.set(parseIpv6(m.gid), F.gid.at);
  b.set(parseMac(m.mac), F.mac.at);
  w.ipAreaOffset = L.off;
  if (L.smcd) {
    const SF = CLC_PROPOSAL_SMCD_FIELDS;
    const S = CLC_PROPOSAL_SMCD_AT;
    const s = propSmcdV.reset(b, S);
    s.ismGid = L.smcd.ismGid;
    s.ismChid = L.smcd.ismChid;
    s.v2ExtOffset = L.v2Off;
    s.vendorOui = L.smcd.vendorOui;
    writeUint40(b, S + SF.vendorExp.at, L.smcd.vendorExp);
  }
  if (m.prefix) {
    const PF = CLC_PREFIX_AREA_FIELDS;
    const P = L.P;
    const a = prefixV.reset(b, P);
    b.set(parseIpv4(m.prefix.ipv4), P + PF.ipv4.at);
    a.ipv4Len = m.prefix.ipv4Len & 0xff;
    a.ipv6Count = m.prefix.ipv6.length;
    m.prefix.ipv6.forEach((p, i) => {
      const o = P + entryAt(PF.ipv6, i);
      b.set(parseIpv6(p.prefix), o + CLC_IPV6_PREFIX_FIELDS.prefix.at);
      ipv6PrefixV.reset(b, o).prefixLen = p.len & 0xff;
    });
  }
  const v2 = L.smcd ? m.v2 : undefined;
  if (!v2) return;
  const X = CLC_V2_EXT_FIELDS;
  const V = L.V;
  const x = v2ExtV.reset(b, V);
  x.eidCount = v2.eids.length;
  x.gidCount = L.entries;
  x.release = v2.release & 0x0f;
  x.seidFlag = v2.seidFlag;
  x.smcdv2ExtOffset = L.dOff;
  b.set(parseIpv6(v2.roceV2Gid), V + X.roceV2Gid.at);
  x.maxConns = v2.maxConns & 0xff;
  x.maxLinks = v2.maxLinks & 0xff;
  x.featureMask = v2.featureMask;
  v2.eids.forEach((e, i) => putText(b, V + entryAt(X.eids, i), X.eids.len, e));
  if (!m.smcdv2) return;
  const DX = CLC_SMCDV2_EXT_FIELDS;
  const D = L.D;
  putText(b, D + DX.seid.at, DX.seid.len, m.smcdv2.seid);
  let i = 0;
  for (const g of m.smcdv2.gids) {
    const e = ismGidV.reset(b, D + entryAt(DX.gids, i++));
    e.gid = g.gid;
    e.chid = g.chid;
    if (g.gidExt !== undefined) {
      const e2 = ismGidV.reset(b, D + entryAt(DX.gids, i++));
      e2.gid = g.gidExt;
      e2.chid = g.chidExt ?? g.chid;
    }
  }
}

function putSmcrAccept(b: Uint8Array, m: Omit<ClcAcceptConfirm, 'length'>, r: ClcSmcrAcceptConfirm): void {
  const R = CLC_SMCR_ACCEPT_FIELDS;
  const w = smcrV.reset(b, 0);
  putPeerId(b, R.peerId.at, r.peerId);
  b.set(parseIpv6(r.gid), R.gid.at);
  b.set(parseMac(r.mac), R.mac.at);
  w.qpn = r.qpn;
  w.rkey = r.rkey;
  w.rmbeIdx = r.rmbeIdx & 0xff;
  w.token = r.token;
  w.rmbeSizeCode = r.rmbeSizeCode & 0x0f;
  w.mtuCode = r.mtuCode & 0x0f;
  w.rmbVa = r.rmbVa;
  w.psn = r.psn;
  if (m.version < 2) return;
  putText(b, R.eid.at, R.eid.len, r.eid ?? '');
  if (!m.firstContact || !r.fce) return;
  putFce(b, CLC_SMCR_FCE_AT, r.fce);
  if (m.type !== 'confirm' || !r.gidList) return;
  const GL = CLC_GID_LIST_FIELDS;
  const G = CLC_SMCR_GID_LIST_AT;
  gidListV.reset(b, G).count = r.gidList.length & 0xff;
  r.gidList.forEach((g, i) => b.set(parseIpv6(g), G + entryAt(GL.gids, i)));
}

function putSmcdAccept(b: Uint8Array, m: Omit<ClcAcceptConfirm, 'length'>, d: ClcSmcdAcceptConfirm): void {
  const D = CLC_SMCD_ACCEPT_FIELDS;
  const w = smcdV.reset(b, 0);
  w.gid = d.gid;
  w.dmbToken = d.dmbToken;
  w.dmbeIdx = d.dmbeIdx & 0xff;
  w.dmbeSizeCode = d.dmbeSizeCode & 0x0f;
  w.linkId = d.linkId;
  if (m.version < 2) return;
  w.chid = d.chid ?? 0;
  putText(b, D.eid.at, D.eid.len, d.eid ?? '');
  w.gidExt = d.gidExt ?? 0n;
  if (m.firstContact && d.fce) putFce(b, CLC_SMCD_FCE_AT, d.fce);
}

// ---- summary ----

function pathsOffered(typev: number, v: string): string {
  switch (typev) {
    case PATH_R: return `SMC-R${v}`;
    case PATH_D: return `SMC-D${v}`;
    case PATH_B: return `SMC-R${v}+SMC-D${v}`;
    default: return '';
  }
}

/** One line, tcpdump style. */
export function summarizeClc(m: ClcMessage): string {
  const s = new StringSink();
  writeClcSummary(s, m);
  return s.s;
}

/** `64KiB`: an RMBE/DMBE size code's text (a 4-bit code: 16 texts, made when the module loads). */
const BUF_TEXT: readonly string[] = Array.from({ length: 16 }, (_, code) => fmtSize(bufSizeFromCode(code)));
function bufText(code: number): string {
  return BUF_TEXT[code] ?? fmtSize(bufSizeFromCode(code));
}

/** summarizeClc() written into a sink (smcdump's one-line output takes its numbers as digits). */
export function writeClcSummary(s: TextSink, m: ClcMessage): void {
  switch (m.type) {
    case 'proposal': {
      s.text('CLC Proposal v'); s.dec(m.version);
      const p2 = m.version >= 2 ? pathsOffered(m.typev2, 'v2') : '';
      const p1 = pathsOffered(m.typev1, 'v1');
      s.text(' '); s.text(p2 && p1 ? `${p2} ${p1}` : p2 || p1 || 'no-path');
      const v2 = m.v2;
      const r2 = m.version >= 2 && (m.typev2 === PATH_R || m.typev2 === PATH_B);
      const r1 = m.typev1 === PATH_R || m.typev1 === PATH_B;
      if (v2) {
        s.text(' rel 2.'); s.dec(v2.release);
        if (v2.eids.length) { s.text(' ueid '); s.text(v2.eids.join(',')); }
        if (v2.seidFlag) s.text(' seid');
        if (r2) { s.text(' gid '); s.text(v2.roceV2Gid); }
      }
      if (r1) { s.text(v2 && r2 ? ' v1gid ' : ' gid '); s.text(m.gid); }
      if (m.smcd && m.smcd.ismGid !== 0n) { s.text(' ism '); s.text(ismGidStr(m.smcd.ismGid)); }
      if (m.smcdv2 && m.smcdv2.gids.length) { s.text(' ismv2 '); s.dec(m.smcdv2.gids.length); }
      if (m.prefix) {
        const pf: string[] = [];
        if (m.prefix.ipv4Len || m.prefix.ipv4 !== '0.0.0.0' || !m.prefix.ipv6.length) pf.push(`${m.prefix.ipv4}/${m.prefix.ipv4Len}`);
        for (const p of m.prefix.ipv6) pf.push(`${p.prefix}/${p.len}`);
        s.text(' pfx '); s.text(pf.join(','));
      }
      return;
    }
    case 'accept':
    case 'confirm': {
      s.text(m.type === 'accept' ? 'CLC Accept v' : 'CLC Confirm v'); s.dec(m.version); s.text(m.d ? ' SMC-D' : ' SMC-R');
      if (m.firstContact) s.text(' first-contact');
      if (m.r) {
        const r = m.r;
        s.text(' QP '); s.hex(r.qpn); s.text(' rkey '); s.hex(r.rkey); s.text(' token '); s.hex(r.token);
        s.text(' buf '); s.text(bufText(r.rmbeSizeCode)); s.text(' mtu '); s.dec(mtuFromCode(r.mtuCode)); s.text(' psn '); s.dec(r.psn);
        s.text(' va 0x'); s.text(r.rmbVa.toString(16));
        if (r.fce) s.text(fceSummary(r.fce, true));
        if (r.gidList) { s.text(' gids '); s.text(r.gidList.length ? r.gidList.join(',') : '-'); }
      } else if (m.d) {
        const d = m.d;
        s.text(` gid ${ismGidStr(d.gid)} token 0x${d.dmbToken.toString(16)} buf ${bufText(d.dmbeSizeCode)} link 0x${d.linkId.toString(16)}`);
        if (d.chid !== undefined) s.text(` chid 0x${d.chid.toString(16)}`);
        if (d.fce) s.text(fceSummary(d.fce, false));
      }
      return;
    }
    case 'decline':
      s.text(`CLC Decline v${m.version}${m.outOfSync ? ' out-of-sync' : ''} ${formatReason(m.diagnosis)}`);
      return;
    default:
      s.text(`CLC type ${m.typeCode} len ${m.length}`);
  }
}

function fceSummary(f: ClcFce, smcr: boolean): string {
  let s = ` host ${f.hostname || '-'} ${osName(f.osType)} rel 2.${f.release}`;
  if (smcr && !f.v2Direct) s += ' indirect';
  return s;
}
