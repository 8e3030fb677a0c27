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

import type { Decoded, Issue, Tree } from './common.js';
import {
  bufSizeFromCode, fmtSize, hex, hex32, ipv4Str, ipv6Str, isZero, issue, macStr, mtuFromCode,
  parseIpv4, parseIpv6, parseMac, put16, put24, put32, put64, put8, putAscii, u16, u24, u32, u64, u8,
} from './common.js';
import { declineReason, formatReason } from './reasons.js';

// ---- constants ----

export const CLC_PROPOSAL = 1;
export const CLC_ACCEPT = 2;
export const CLC_CONFIRM = 3;
export const CLC_DECLINE = 4;

/** "SMCR" / "SMCD" in EBCDIC. */
export const CLC_EYECATCHER_SMCR = 0xe2d4c3d9;
export const CLC_EYECATCHER_SMCD = 0xe2d4c3c4;

/** Path / type codes of byte 7 (typev1, typev2): R, D, N (none), B (both). */
export const PATH_R = 0;
export const PATH_D = 1;
export const PATH_N = 2;
export const PATH_B = 3;
export const PATH_NAMES: readonly string[] = ['R', 'D', 'N', 'B'];

/** Emulated/virtual ISM CHIDs have high byte 0xFF and use two GID/CHID entries. */
export const EMULATED_ISM_CHID_MASK = 0xff00;

/** Fixed sizes (formats.md §5, §6). */
export const CLC_SMCR_V1_LEN = 68;
export const CLC_SMCR_V2_MIN_LEN = 108;
export const CLC_SMCD_V1_LEN = 48;
export const CLC_SMCD_V2_MIN_LEN = 78;
export const CLC_DECLINE_V1_LEN = 28;
export const CLC_DECLINE_V2_LEN = 44;
export const CLC_FCE_LEN = 52;
export const CLC_FCE_V20_SMCD_LEN = 36;

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

export function eyecatcherName(v: number): ClcEyecatcher {
  if (v === CLC_EYECATCHER_SMCR) return 'SMCR';
  if (v === CLC_EYECATCHER_SMCD) return 'SMCD';
  return hex32(v);
}

export function eyecatcherValue(s: ClcEyecatcher): number {
  if (s === 'SMCR') return CLC_EYECATCHER_SMCR;
  if (s === 'SMCD') return CLC_EYECATCHER_SMCD;
  if (s.startsWith('0x')) return parseInt(s.slice(2), 16) >>> 0;
  return 0;
}

function isEc(v: number): boolean { return v === CLC_EYECATCHER_SMCR || v === CLC_EYECATCHER_SMCD; }

/** Peer ID (8 bytes) as "<instance>@<mac>". */
export function peerIdStr(b: Uint8Array, o: number): string { return `${u16(b, o)}@${macStr(b, o + 2)}`; }

function putPeerId(b: Uint8Array, o: number, s: string): void {
  const at = s.indexOf('@');
  put16(b, o, at > 0 ? Number(s.slice(0, at)) : 0);
  b.set(parseMac(at >= 0 ? s.slice(at + 1) : s), o + 2);
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

/**
 * Peek at a TCP payload: if its first 8 bytes look like a CLC header (eyecatcher SMCR/SMCD,
 * type 1..4, Length ≥ 12 = header + trailer), return the Length field, else undefined.
 * Used by the reassembler to find CLC messages on any port.
 */
export function clcMessageLength(b: Uint8Array): number | undefined {
  if (b.length < 8) return undefined;
  if (!isEc(u32(b, 0))) return undefined;
  const type = b[4]!;
  if (type < CLC_PROPOSAL || type > CLC_DECLINE) return undefined;
  const len = u16(b, 5);
  return len >= 12 ? len : undefined;
}

// ---- decode ----

export function decodeClc(b: Uint8Array, t?: Tree): Decoded<ClcMessage> {
  const issues: Issue[] = [];
  const n = b.length;
  if (n < 8) issue(issues, 'error', 'clc.truncated', `truncated CLC header: ${n} of 8 bytes`, 0, n);
  const ecv = u32(b, 0);
  const eyecatcher = eyecatcherName(ecv);
  if (n >= 4 && !isEc(ecv)) issue(issues, 'error', 'clc.eyecatcher', `bad eyecatcher ${eyecatcher}`, 0, 4);
  const typeCode = u8(b, 4);
  const length = u16(b, 5);
  const b7 = u8(b, 7);
  const version = b7 >>> 4;

  // Where the message ends in b, and whether its trailer is there.
  let end = n;
  let complete = false;
  if (n >= 7) {
    if (length < 12) {
      issue(issues, 'error', 'clc.length', `Length ${length} is less than header + trailer (12)`, 5, 2);
      complete = n >= 12;
    } else if (n < length) {
      issue(issues, 'error', 'clc.truncated', `truncated message: Length ${length}, have ${n} bytes`, n, 0);
    } else {
      if (n > length) issue(issues, 'note', 'clc.length', `${n - length} bytes beyond Length ${length} not decoded`, length, n - length);
      end = length;
      complete = true;
    }
  }
  const bodyEnd = complete ? end - 4 : end;
  let trailer = '';
  if (complete) {
    const tv = u32(b, bodyEnd);
    trailer = eyecatcherName(tv);
    if (!isEc(tv)) issue(issues, 'error', 'clc.trailer', `bad trailer eyecatcher ${trailer}`, bodyEnd, 4);
    else if (tv !== ecv && isEc(ecv)) issue(issues, 'warn', 'clc.trailer', `trailer ${trailer} differs from eyecatcher ${eyecatcher}`, bodyEnd, 4);
  }
  if (n >= 8 && (version === 0 || version > 2)) issue(issues, 'note', 'clc.version', `unusual CLC version ${version}`, 7, 1);

  if (t) {
    t.add('Eyecatcher', 0, 4, eyecatcher);
    t.add('Type', 4, 1, `${typeCode} (${typeName(typeCode)})`);
    t.add('Length', 5, 2, length);
    t.add('Version', 7, 1, `${version} (byte 0x${b7.toString(16).padStart(2, '0')})`);
  }

  const body = bodyEnd < n ? b.subarray(0, bodyEnd) : b;
  let value: ClcMessage;
  switch (typeCode) {
    case CLC_PROPOSAL:
      value = decodeProposal(body, complete, issues, t, eyecatcher, length, b7, trailer);
      break;
    case CLC_ACCEPT:
    case CLC_CONFIRM:
      value = decodeAcceptConfirm(body, complete, issues, t, eyecatcher, typeCode, length, b7, trailer);
      break;
    case CLC_DECLINE:
      value = decodeDecline(body, complete, issues, t, eyecatcher, length, b7, trailer);
      break;
    default: {
      if (n >= 5) issue(issues, 'error', 'clc.type', `unknown CLC type ${typeCode}`, 4, 1);
      const m: ClcUnknown = { type: 'unknown', eyecatcher, typeCode, length, version, flags: b7 & 0x0f, body: copyBytes(b, 8, Math.max(8, bodyEnd)), trailer };
      t?.add('Body', 8, Math.max(0, bodyEnd - 8));
      value = m;
    }
  }
  if (t && complete) t.add('Trailer', bodyEnd, 4, trailer);
  return { value, issues };
}

function typeName(code: number): string {
  switch (code) {
    case CLC_PROPOSAL: return 'Proposal';
    case CLC_ACCEPT: return 'Accept';
    case CLC_CONFIRM: return 'Confirm';
    case CLC_DECLINE: return 'Decline';
    default: return 'unknown';
  }
}

/** Bytes after `pos` up to the trailer → `extra` (with an issue). */
function takeExtra(b: Uint8Array, pos: number, issues: Issue[], t: Tree | undefined): Uint8Array | undefined {
  if (pos >= b.length) return undefined;
  issue(issues, 'warn', 'clc.extra', `${b.length - pos} unexpected bytes before the trailer`, pos, b.length - pos);
  t?.add('Unexpected bytes', pos, b.length - pos, hex(b, pos));
  return copyBytes(b, pos, b.length);
}

function decodeProposal(b: Uint8Array, complete: boolean, issues: Issue[], t: Tree | undefined,
  eyecatcher: string, length: number, b7: number, trailer: string): ClcProposal {
  const end = b.length;
  const version = b7 >>> 4;
  const typev2 = (b7 >>> 2) & 3;
  const typev1 = b7 & 3;
  has(end, complete, 0, 40, issues, 'Proposal fixed part');
  const ipAreaOffset = u16(b, 38);
  const m: ClcProposal = {
    type: 'proposal', eyecatcher, typeCode: CLC_PROPOSAL, length, version, typev2, typev1,
    peerId: peerIdStr(b, 8), gid: ipv6Str(b, 16), mac: macStr(b, 32), ipAreaOffset, trailer,
  };
  if (t) {
    t.add('Paths', 7, 1, `v2 ${PATH_NAMES[typev2]} v1 ${PATH_NAMES[typev1]}`);
    t.add('Peer ID', 8, 8, m.peerId);
    t.add('GID', 16, 16, m.gid);
    t.add('MAC', 32, 6, m.mac);
    t.add('IP area offset', 38, 2, ipAreaOffset);
  }
  if (typev1 === PATH_N && version < 2) issue(issues, 'warn', 'clc.path', 'v1 Proposal offers no v1 path (typev1 N)', 7, 1);
  if (ipAreaOffset !== 0 && ipAreaOffset !== 40) {
    issue(issues, 'warn', 'clc.offset', `IP area offset ${ipAreaOffset} (expected 0 or 40${ipAreaOffset > 40 ? '; Linux rejects > 40' : ''})`, 38, 2);
  }
  let structEnd = Math.min(40, end);

  // SMC-D / v2 info area: at 40 when the IP area offset says so (v1) and always in v2
  // (Linux v2-only proposals carry IP area offset 0 and the area anyway).
  const P = 40 + ipAreaOffset;
  if ((ipAreaOffset >= 40 || version >= 2) && end > 40) {
    has(end, complete, 40, 40, issues, 'SMC-D area');
    const smcd: ClcProposalSmcd = {
      ismGid: u64(b, 40), ismChid: u16(b, 48), v2ExtOffset: u16(b, 50), vendorOui: u24(b, 52),
      vendorExp: (BigInt(u8(b, 55)) << 32n) | BigInt(u32(b, 56)),
    };
    rsv(b, 60, 20, issues, 'SMC-D area bytes');
    m.smcd = smcd;
    structEnd = 80;
    if (t) {
      const s = t.sub('SMC-D area', 40, 40);
      s.add('ISM GID', 0, 8, ismGidStr(smcd.ismGid));
      s.add('ISM CHID', 8, 2, '0x' + smcd.ismChid.toString(16).padStart(4, '0'));
      s.add('v2 extension offset', 10, 2, `${smcd.v2ExtOffset} (at ${52 + smcd.v2ExtOffset!})`);
      s.add('Vendor OUI', 12, 3, '0x' + smcd.vendorOui.toString(16).padStart(6, '0'));
      s.add('Vendor options', 15, 5, '0x' + smcd.vendorExp.toString(16).padStart(10, '0'));
    }
  }

  // IP prefix area
  if (typev1 !== PATH_N) {
    if (m.smcd && P < 80) issue(issues, 'warn', 'clc.offset', `IP prefix area at ${P} overlaps the SMC-D area`, 38, 2);
    if (P < end) {
      has(end, complete, P, 8, issues, 'IP prefix area');
      const cnt = u8(b, P + 7);
      const area: ClcIpPrefixArea = { ipv4: ipv4Str(b, P), ipv4Len: u8(b, P + 4), ipv6: [] };
      rsv(b, P + 5, 2, issues, 'IP prefix area bytes');
      if (area.ipv4Len > 32) issue(issues, 'warn', 'clc.prefix', `IPv4 prefix length ${area.ipv4Len} > 32`, P + 4, 1);
      if (cnt > 8) issue(issues, 'warn', 'clc.count', `IPv6 prefix count ${cnt} > 8 (Linux rejects)`, P + 7, 1);
      const s = t?.sub('IP prefix area', P, 8 + 17 * cnt);
      s?.add('IPv4 prefix', 0, 5, `${area.ipv4}/${area.ipv4Len}`);
      s?.add('IPv6 prefix count', 7, 1, cnt);
      for (let i = 0; i < cnt; i++) {
        const o = P + 8 + 17 * i;
        if (!has(end, complete, o, 17, issues, `IPv6 prefix ${i}`)) break;
        const p: ClcIpv6Prefix = { prefix: ipv6Str(b, o), len: u8(b, o + 16) };
        if (p.len > 128) issue(issues, 'warn', 'clc.prefix', `IPv6 prefix length ${p.len} > 128`, o + 16, 1);
        area.ipv6.push(p);
        s?.add(`IPv6 prefix ${i}`, 8 + 17 * i, 17, `${p.prefix}/${p.len}`);
      }
      m.prefix = area;
      structEnd = Math.max(structEnd, Math.min(end, P + 8 + 17 * cnt));
    } else {
      has(end, complete, P, 8, issues, 'IP prefix area');
    }
  }

  // v2 extension
  if (version >= 2 && typev2 !== PATH_N) {
    const smcd = m.smcd;
    if (!smcd) {
      has(end, complete, 40, 40, issues, 'SMC-D area');
    } else {
      const V = 52 + (smcd.v2ExtOffset ?? 0);
      const expected = m.prefix ? P + 8 + 17 * m.prefix.ipv6.length : Math.max(80, P);
      if (V !== expected) issue(issues, V < expected ? 'warn' : 'note', 'clc.offset', `v2 extension at ${V}, expected ${expected}`, 50, 2);
      if (V < end) {
        has(end, complete, V, 40, issues, 'v2 extension');
        const eidCnt = u8(b, V);
        const gidCnt = u8(b, V + 1);
        const flags = u8(b, V + 3);
        const v2: ClcProposalV2Ext = {
          eids: [], release: flags >>> 4, seidFlag: (flags & 1) !== 0, smcdv2ExtOffset: u16(b, V + 6),
          roceV2Gid: ipv6Str(b, V + 8), maxConns: u8(b, V + 24), maxLinks: u8(b, V + 25), featureMask: u16(b, V + 26),
        };
        rsv(b, V + 2, 1, issues, 'v2 extension byte');
        if (flags & 0x0e) issue(issues, 'warn', 'clc.reserved', `reserved v2 flag bits set: 0x${(flags & 0x0e).toString(16)}`, V + 3, 1);
        rsv(b, V + 4, 2, issues, 'v2 extension bytes');
        rsv(b, V + 28, 12, issues, 'v2 extension bytes');
        if (eidCnt > 8) issue(issues, 'warn', 'clc.count', `EID count ${eidCnt} > 8`, V, 1);
        if (gidCnt > 8) issue(issues, 'warn', 'clc.count', `ISM GID count ${gidCnt} > 8`, V + 1, 1);
        const s = t?.sub('v2 extension', V, 40 + 32 * eidCnt);
        if (s) {
          s.add('EID count', 0, 1, eidCnt);
          s.add('ISM GID count', 1, 1, gidCnt);
          s.add('Flags', 3, 1, `release ${v2.release}${v2.seidFlag ? ' SEID' : ''}`);
          s.add('SMC-Dv2 extension offset', 6, 2, typev2 === PATH_D || typev2 === PATH_B ? `${v2.smcdv2ExtOffset} (at ${V + 8 + v2.smcdv2ExtOffset!})` : `${v2.smcdv2ExtOffset} (no SMC-Dv2)`);
          s.add('RoCEv2 GID', 8, 16, v2.roceV2Gid);
          s.add('max conns', 24, 1, v2.maxConns);
          s.add('max links', 25, 1, v2.maxLinks);
          s.add('Feature mask', 26, 2, '0x' + v2.featureMask.toString(16).padStart(4, '0'));
        }
        for (let i = 0; i < eidCnt; i++) {
          const o = V + 40 + 32 * i;
          if (!has(end, complete, o, 32, issues, `EID ${i}`)) break;
          if (!eidValid(b, o)) issue(issues, 'note', 'clc.eid', `EID ${i} is not a valid UEID (A-Z 0-9 . -)`, o, 32);
          v2.eids.push(text(b, o, 32, issues, `EID ${i}`));
          s?.add(`EID ${i}`, 40 + 32 * i, 32, v2.eids[i]);
        }
        m.v2 = v2;
        structEnd = Math.max(structEnd, Math.min(end, V + 40 + 32 * eidCnt));
        if (typev2 === PATH_R && gidCnt > 0) issue(issues, 'note', 'clc.count', `ISM GID count ${gidCnt} without SMC-Dv2 offered`, V + 1, 1);

        // SMC-Dv2 extension
        if (typev2 === PATH_D || typev2 === PATH_B) {
          const D = V + 8 + (v2.smcdv2ExtOffset ?? 0);
          const dExp = V + 40 + 32 * eidCnt;
          if (D !== dExp) issue(issues, D < dExp ? 'warn' : 'note', 'clc.offset', `SMC-Dv2 extension at ${D}, expected ${dExp}`, V + 6, 2);
          if (D < end) {
            has(end, complete, D, 48, issues, 'SMC-Dv2 extension');
            const ext: ClcProposalSmcdV2Ext = { seid: text(b, D, 32, issues, 'System EID'), gids: [] };
            rsv(b, D + 32, 16, issues, 'SMC-Dv2 extension bytes');
            const ds = t?.sub('SMC-Dv2 extension', D, 48 + 10 * gidCnt);
            ds?.add('System EID', 0, 32, ext.seid);
            for (let i = 0; i < gidCnt; i++) {
              const o = D + 48 + 10 * i;
              if (!has(end, complete, o, 10, issues, `ISM GID entry ${i}`)) break;
              const g: ClcIsmGid = { chid: u16(b, o + 8), gid: u64(b, o) };
              if ((g.chid & EMULATED_ISM_CHID_MASK) === EMULATED_ISM_CHID_MASK) {
                if (i + 1 < gidCnt && o + 20 <= end) {
                  g.gidExt = u64(b, o + 10);
                  const c2 = u16(b, o + 18);
                  if (c2 !== g.chid) {
                    g.chidExt = c2;
                    issue(issues, 'warn', 'clc.ism', `emulated ISM entry pair ${i}/${i + 1} with different CHIDs`, o + 18, 2);
                  }
                  ds?.add(`ISM GID ${i}+${i + 1} (emulated)`, 48 + 10 * i, 20, `${ismGidStr(g.gid)}:${ismGidStr(g.gidExt).slice(2)} chid 0x${g.chid.toString(16)}`);
                  i++;
                } else {
                  issue(issues, 'warn', 'clc.ism', `emulated ISM entry ${i} (CHID 0x${g.chid.toString(16)}) without its second entry`, o, 10);
                  ds?.add(`ISM GID ${i}`, 48 + 10 * i, 10, `${ismGidStr(g.gid)} chid 0x${g.chid.toString(16)}`);
                }
              } else {
                ds?.add(`ISM GID ${i}`, 48 + 10 * i, 10, `${ismGidStr(g.gid)} chid 0x${g.chid.toString(16)}`);
              }
              ext.gids.push(g);
            }
            m.smcdv2 = ext;
            structEnd = Math.max(structEnd, Math.min(end, D + 48 + 10 * gidCnt));
          } else {
            has(end, complete, D, 48, issues, 'SMC-Dv2 extension');
          }
        }
      } else {
        has(end, complete, V, 40, issues, 'v2 extension');
      }
    }
  }
  const extra = takeExtra(b, structEnd, issues, t);
  if (extra) m.extra = extra;
  return m;
}

function decodeFce(b: Uint8Array, o: number, len: number, issues: Issue[], t: Tree | undefined): ClcFce {
  const flags = u8(b, o);
  const osr = u8(b, o + 1);
  const f: ClcFce = { v2Direct: (flags & 0x80) !== 0, osType: osr >>> 4, release: osr & 0x0f, hostname: text(b, o + 4, 32, issues, 'FCE hostname') };
  if (flags & 0x7f) issue(issues, 'warn', 'clc.reserved', `reserved FCE flag bits set: 0x${(flags & 0x7f).toString(16)}`, o, 1);
  rsv(b, o + 2, 2, issues, 'FCE bytes');
  if (len >= CLC_FCE_LEN) {
    f.maxConns = u8(b, o + 36);
    f.maxLinks = u8(b, o + 37);
    f.featureMask = u16(b, o + 38);
    f.vendorExp = u32(b, o + 40);
    rsv(b, o + 44, 8, issues, 'FCE bytes');
  }
  if (t) {
    const s = t.sub('First-contact extension', o, len);
    s.add('Flags', 0, 1, f.v2Direct ? 'v2 direct' : 'indirect');
    s.add('OS / release', 1, 1, `os ${f.osType} (${osName(f.osType)}) release ${f.release}`);
    s.add('Hostname', 4, 32, f.hostname);
    if (f.maxConns !== undefined) {
      s.add('max conns', 36, 1, f.maxConns);
      s.add('max links', 37, 1, f.maxLinks);
      s.add('Feature mask', 38, 2, '0x' + f.featureMask!.toString(16).padStart(4, '0'));
      s.add('Vendor options', 40, 4, hex32(f.vendorExp!));
    }
  }
  return f;
}

export function osName(os: number): string {
  switch (os) {
    case 1: return 'z/OS';
    case 2: return 'Linux';
    case 3: return 'AIX';
    case 15: return 'unknown';
    default: return `os${os}`;
  }
}

function decodeAcceptConfirm(b: Uint8Array, complete: boolean, issues: Issue[], t: Tree | undefined,
  eyecatcher: string, typeCode: number, length: number, b7: number, trailer: string): ClcAcceptConfirm {
  const end = b.length;
  const version = b7 >>> 4;
  const typev1 = b7 & 3;
  const firstContact = (b7 & 0x08) !== 0;
  const what = typeCode === CLC_ACCEPT ? 'Accept' : 'Confirm';
  const m: ClcAcceptConfirm = {
    type: typeCode === CLC_ACCEPT ? 'accept' : 'confirm', eyecatcher, typeCode, length, version, firstContact, typev1, trailer,
  };
  if (b7 & 0x04) issue(issues, 'warn', 'clc.reserved', 'reserved byte-7 bit 2 set', 7, 1);
  if (typev1 !== PATH_R && typev1 !== PATH_D) issue(issues, 'warn', 'clc.path', `${what} path ${PATH_NAMES[typev1]} (expected R or D); decoded as SMC-R`, 7, 1);
  const isD = typev1 === PATH_D;
  const ecv = eyecatcherValue(eyecatcher);
  if (isEc(ecv) && (ecv === CLC_EYECATCHER_SMCD) !== isD) {
    issue(issues, 'note', 'clc.eyecatcher', `eyecatcher ${eyecatcher} with path ${PATH_NAMES[typev1]} (Linux uses ${isD ? 'SMCD' : 'SMCR'})`, 0, 4);
  }
  t?.add('Flags', 7, 1, `${firstContact ? 'first contact, ' : ''}path ${PATH_NAMES[typev1]}`);
  let pos: number;
  if (!isD) {
    has(end, complete, 0, 64, issues, `SMC-R ${what} fixed part`);
    const sm = u8(b, 50);
    const r: ClcSmcrAcceptConfirm = {
      peerId: peerIdStr(b, 8), gid: ipv6Str(b, 16), mac: macStr(b, 32), qpn: u24(b, 38), rkey: u32(b, 41),
      rmbeIdx: u8(b, 45), token: u32(b, 46), rmbeSizeCode: sm >>> 4, mtuCode: sm & 0x0f, rmbVa: u64(b, 52), psn: u24(b, 61),
    };
    rsv(b, 51, 1, issues, 'byte 51');
    rsv(b, 60, 1, issues, 'byte 60');
    if (r.mtuCode < 1 || r.mtuCode > 5) issue(issues, 'warn', 'clc.mtu', `invalid QP MTU code ${r.mtuCode}`, 50, 1);
    if (t) {
      t.add('Peer ID', 8, 8, r.peerId);
      t.add('GID', 16, 16, r.gid);
      t.add('MAC', 32, 6, r.mac);
      t.add('QP number', 38, 3, '0x' + r.qpn.toString(16));
      t.add('RMB rkey', 41, 4, hex32(r.rkey));
      t.add('RMBE index', 45, 1, r.rmbeIdx);
      t.add('RMBE alert token', 46, 4, hex32(r.token));
      t.add('RMBE size / QP MTU', 50, 1, `${r.rmbeSizeCode} (${fmtSize(bufSizeFromCode(r.rmbeSizeCode))}) / ${r.mtuCode} (${mtuFromCode(r.mtuCode)})`);
      t.add('RMB virtual address', 52, 8, '0x' + r.rmbVa.toString(16));
      t.add('Initial PSN', 61, 3, '0x' + r.psn.toString(16));
    }
    pos = 64;
    if (version >= 2) {
      if (has(end, complete, 64, 40, issues, 'v2 EID')) {
        r.eid = text(b, 64, 32, issues, 'EID');
        rsv(b, 96, 8, issues, 'bytes 96-103');
        t?.add('EID', 64, 32, r.eid);
        pos = 104;
        if (firstContact) {
          if (has(end, complete, 104, CLC_FCE_LEN, issues, 'first-contact extension')) {
            r.fce = decodeFce(b, 104, CLC_FCE_LEN, issues, t);
            pos = 156;
            if (typeCode === CLC_CONFIRM && has(end, complete, 156, 4, issues, 'Confirm GID list')) {
              const cnt = u8(b, 156);
              rsv(b, 157, 3, issues, 'GID list bytes');
              if (cnt > 2) issue(issues, 'warn', 'clc.count', `GID list count ${cnt} > 2`, 156, 1);
              const s = t?.sub('GID list', 156, 4 + 16 * cnt);
              s?.add('Count', 0, 1, cnt);
              r.gidList = [];
              for (let i = 0; i < cnt; i++) {
                if (!has(end, complete, 160 + 16 * i, 16, issues, `GID list entry ${i}`)) break;
                r.gidList.push(ipv6Str(b, 160 + 16 * i));
                s?.add(`GID ${i}`, 4 + 16 * i, 16, r.gidList[i]);
              }
              pos = Math.min(end, 160 + 16 * cnt);
            }
          }
        }
      }
    }
    m.r = r;
  } else {
    has(end, complete, 0, 32, issues, `SMC-D ${what} fixed part`);
    const sz = u8(b, 25);
    const d: ClcSmcdAcceptConfirm = {
      gid: u64(b, 8), dmbToken: u64(b, 16), dmbeIdx: u8(b, 24), dmbeSizeCode: sz >>> 4, linkId: u32(b, 28),
    };
    if (sz & 0x0f) issue(issues, 'warn', 'clc.reserved', 'reserved low nibble of byte 25 not zero', 25, 1);
    rsv(b, 26, 2, issues, 'bytes 26-27');
    if (t) {
      t.add('ISM GID', 8, 8, ismGidStr(d.gid));
      t.add('DMB token', 16, 8, '0x' + d.dmbToken.toString(16));
      t.add('DMBE index', 24, 1, d.dmbeIdx);
      t.add('DMBE size', 25, 1, `${d.dmbeSizeCode} (${fmtSize(bufSizeFromCode(d.dmbeSizeCode))})`);
      t.add('Link ID', 28, 4, hex32(d.linkId));
    }
    pos = 32;
    if (version >= 2) {
      if (has(end, complete, 32, 42, issues, 'SMC-D v2 fields')) {
        d.chid = u16(b, 32);
        d.eid = text(b, 34, 32, issues, 'EID');
        d.gidExt = u64(b, 66);
        if (t) {
          t.add('CHID', 32, 2, '0x' + d.chid.toString(16).padStart(4, '0'));
          t.add('EID', 34, 32, d.eid);
          t.add('GID extension', 66, 8, ismGidStr(d.gidExt));
        }
        pos = 74;
        if (firstContact) {
          const rem = end - 74;
          const fl = rem >= CLC_FCE_LEN ? CLC_FCE_LEN : CLC_FCE_V20_SMCD_LEN;
          if (has(end, complete, 74, fl, issues, 'first-contact extension')) {
            d.fce = decodeFce(b, 74, fl, issues, t);
            pos = 74 + fl;
          }
        }
      }
    } else if (has(end, complete, 32, 12, issues, 'SMC-D v1 reserved bytes')) {
      rsv(b, 32, 12, issues, 'bytes 32-43');
      pos = 44;
    }
    m.d = d;
  }
  const extra = takeExtra(b, Math.min(pos, end), issues, t);
  if (extra) m.extra = extra;
  return m;
}

function decodeDecline(b: Uint8Array, complete: boolean, issues: Issue[], t: Tree | undefined,
  eyecatcher: string, length: number, b7: number, trailer: string): ClcDecline {
  const end = b.length;
  const version = b7 >>> 4;
  const typev1 = b7 & 3;
  has(end, complete, 0, 24, issues, 'Decline');
  const m: ClcDecline = {
    type: 'decline', eyecatcher, typeCode: CLC_DECLINE, length, version, outOfSync: (b7 & 0x08) !== 0, typev1,
    peerId: peerIdStr(b, 8), diagnosis: u32(b, 16), osType: u8(b, 20) >>> 4, trailer,
  };
  if (b7 & 0x04) issue(issues, 'warn', 'clc.reserved', 'reserved byte-7 bit 2 set', 7, 1);
  if (typev1 === PATH_N || typev1 === PATH_B) {
    issue(issues, 'warn', 'clc.reserved', `Decline typev1 bits = ${typev1} (reserved; Linux <= 6.16 aborts instead of falling back)`, 7, 1);
  }
  if (u8(b, 20) & 0x0f) issue(issues, 'warn', 'clc.reserved', 'reserved low nibble of byte 20 not zero', 20, 1);
  rsv(b, 21, 3, issues, 'bytes 21-23');
  if (eyecatcherValue(eyecatcher) === CLC_EYECATCHER_SMCD) issue(issues, 'note', 'clc.eyecatcher', 'Decline with eyecatcher SMCD (Linux uses SMCR)', 0, 4);
  const r = declineReason(m.diagnosis);
  if (r.name === 'UNKNOWN' && end >= 20) issue(issues, 'note', 'clc.reason', `unknown decline reason ${hex32(m.diagnosis)}`, 16, 4);
  if (t) {
    t.add('Flags', 7, 1, `${m.outOfSync ? 'out of sync, ' : ''}typev1 ${typev1}`);
    t.add('Peer ID', 8, 8, m.peerId);
    t.add('Peer diagnosis', 16, 4, formatReason(m.diagnosis));
    t.add('OS type', 20, 1, `${m.osType} (${osName(m.osType)})`);
  }
  let pos = 24;
  if (version >= 2 && has(end, complete, 24, 16, issues, 'v2 diagnosis words')) {
    m.diagExtra = [u32(b, 24), u32(b, 28), u32(b, 32), u32(b, 36)];
    t?.add('Further diagnosis', 24, 16, m.diagExtra.map(hex32).join(' '));
    pos = 40;
  }
  const extra = takeExtra(b, Math.min(pos, end), issues, t);
  if (extra) m.extra = extra;
  return m;
}

// ---- encode ----

/** Linux's layout for a Proposal: positions of each area and the total length. */
function proposalLayout(m: Omit<ClcProposal, 'length'>): {
  smcd?: ClcProposalSmcd; off: number; P: number; v2Off: number; V: number; dOff: number; D: number; entries: number; end: number;
} {
  const smcd0 = m.smcd ?? (m.v2 ? { ismGid: 0n, ismChid: 0, vendorOui: 0, vendorExp: 0n } : undefined);
  const off = m.ipAreaOffset ?? (smcd0 && m.prefix ? 40 : 0);
  const smcd = smcd0 && (off >= 40 || m.version >= 2) ? smcd0 : undefined;
  const P = 40 + off;
  let end = smcd ? 80 : 40;
  let afterPrefix = Math.max(P, end);
  if (m.prefix) { afterPrefix = P + 8 + 17 * m.prefix.ipv6.length; end = Math.max(end, afterPrefix); }
  const v2 = smcd ? m.v2 : undefined;
  const v2Off = smcd?.v2ExtOffset ?? (v2 ? afterPrefix - 52 : 0);
  const V = 52 + v2Off;
  let dOff = 0, D = 0, entries = 0;
  if (v2) {
    end = Math.max(end, V + 40 + 32 * v2.eids.length);
    dOff = v2.smcdv2ExtOffset ?? (m.smcdv2 ? 32 + 32 * v2.eids.length : 0);
    D = V + 8 + dOff;
    if (m.smcdv2) {
      for (const g of m.smcdv2.gids) entries += g.gidExt !== undefined ? 2 : 1;
      end = Math.max(end, D + 48 + 10 * entries);
    }
  }
  return { ...(smcd ? { smcd } : {}), off, P, v2Off, V, dOff, D, entries, end };
}

function putFce(b: Uint8Array, o: number, f: ClcFce): void {
  put8(b, o, f.v2Direct ? 0x80 : 0);
  put8(b, o + 1, ((f.osType & 0x0f) << 4) | (f.release & 0x0f));
  putText(b, o + 4, 32, f.hostname);
  if (f.maxConns !== undefined) {
    put8(b, o + 36, f.maxConns);
    put8(b, o + 37, f.maxLinks ?? 0);
    put16(b, o + 38, f.featureMask ?? 0);
    put32(b, o + 40, f.vendorExp ?? 0);
  }
}

function fceLen(f: ClcFce): number { return f.maxConns !== undefined ? CLC_FCE_LEN : CLC_FCE_V20_SMCD_LEN; }

/** Value → exact bytes. Length = `m.length` if given, else the size of the encoded layout. */
export function encodeClc(m: ClcInput): Uint8Array {
  let size: number;
  let lay: ReturnType<typeof proposalLayout> | undefined;
  const extraLen = m.extra?.length ?? 0;
  switch (m.type) {
    case 'proposal':
      lay = proposalLayout(m);
      size = lay.end;
      break;
    case 'accept':
    case 'confirm':
      if (m.d) {
        size = m.version >= 2 ? 74 + (m.firstContact && m.d.fce ? fceLen(m.d.fce) : 0) : 44;
      } else {
        const r = m.r;
        size = m.version >= 2 ? 104 : 64;
        if (m.version >= 2 && m.firstContact && r?.fce) {
          size += CLC_FCE_LEN;
          if (m.type === 'confirm' && r.gidList) size += 4 + 16 * r.gidList.length;
        }
      }
      break;
    case 'decline':
      size = m.version >= 2 ? 40 : 24;
      break;
    default:
      size = 8 + m.body.length;
  }
  const structEnd = size;
  size += extraLen + 4;
  const b = new Uint8Array(size);
  put32(b, 0, eyecatcherValue(m.eyecatcher));
  put8(b, 4, m.typeCode);
  put16(b, 5, m.length ?? size);
  put32(b, size - 4, eyecatcherValue(m.trailer));
  if (m.extra) b.set(m.extra, structEnd);

  switch (m.type) {
    case 'proposal': {
      const L = lay!;
      put8(b, 7, ((m.version & 0x0f) << 4) | ((m.typev2 & 3) << 2) | (m.typev1 & 3));
      putPeerId(b, 8, m.peerId);
      b.set(parseIpv6(m.gid), 16);
      b.set(parseMac(m.mac), 32);
      put16(b, 38, L.off);
      if (L.smcd) {
        put64(b, 40, L.smcd.ismGid);
        put16(b, 48, L.smcd.ismChid);
        put16(b, 50, L.v2Off);
        put24(b, 52, L.smcd.vendorOui);
        put8(b, 55, Number((L.smcd.vendorExp >> 32n) & 0xffn));
        put32(b, 56, Number(L.smcd.vendorExp & 0xffffffffn));
      }
      if (m.prefix) {
        const P = L.P;
        b.set(parseIpv4(m.prefix.ipv4), P);
        put8(b, P + 4, m.prefix.ipv4Len);
        put8(b, P + 7, m.prefix.ipv6.length);
        m.prefix.ipv6.forEach((p, i) => {
          b.set(parseIpv6(p.prefix), P + 8 + 17 * i);
          put8(b, P + 24 + 17 * i, p.len);
        });
      }
      const v2 = L.smcd ? m.v2 : undefined;
      if (v2) {
        const V = L.V;
        put8(b, V, v2.eids.length);
        put8(b, V + 1, L.entries);
        put8(b, V + 3, ((v2.release & 0x0f) << 4) | (v2.seidFlag ? 1 : 0));
        put16(b, V + 6, L.dOff);
        b.set(parseIpv6(v2.roceV2Gid), V + 8);
        put8(b, V + 24, v2.maxConns);
        put8(b, V + 25, v2.maxLinks);
        put16(b, V + 26, v2.featureMask);
        v2.eids.forEach((e, i) => putText(b, V + 40 + 32 * i, 32, e));
        if (m.smcdv2) {
          const D = L.D;
          putText(b, D, 32, m.smcdv2.seid);
          let o = D + 48;
          for (const g of m.smcdv2.gids) {
            put64(b, o, g.gid);
            put16(b, o + 8, g.chid);
            o += 10;
            if (g.gidExt !== undefined) {
              put64(b, o, g.gidExt);
              put16(b, o + 8, g.chidExt ?? g.chid);
              o += 10;
            }
          }
        }
      }
      break;
    }
    case 'accept':
    case 'confirm': {
      put8(b, 7, ((m.version & 0x0f) << 4) | (m.firstContact ? 0x08 : 0) | (m.typev1 & 3));
      if (m.d) {
        const d = m.d;
        put64(b, 8, d.gid);
        put64(b, 16, d.dmbToken);
        put8(b, 24, d.dmbeIdx);
        put8(b, 25, (d.dmbeSizeCode & 0x0f) << 4);
        put32(b, 28, d.linkId);
        if (m.version >= 2) {
          put16(b, 32, d.chid ?? 0);
          putText(b, 34, 32, d.eid ?? '');
          put64(b, 66, d.gidExt ?? 0n);
          if (m.firstContact && d.fce) putFce(b, 74, d.fce);
        }
      } else if (m.r) {
        const r = m.r;
        putPeerId(b, 8, r.peerId);
        b.set(parseIpv6(r.gid), 16);
        b.set(parseMac(r.mac), 32);
        put24(b, 38, r.qpn);
        put32(b, 41, r.rkey);
        put8(b, 45, r.rmbeIdx);
        put32(b, 46, r.token);
        put8(b, 50, ((r.rmbeSizeCode & 0x0f) << 4) | (r.mtuCode & 0x0f));
        put64(b, 52, r.rmbVa);
        put24(b, 61, r.psn);
        if (m.version >= 2) {
          putText(b, 64, 32, r.eid ?? '');
          if (m.firstContact && r.fce) {
            putFce(b, 104, r.fce);
            if (m.type === 'confirm' && r.gidList) {
              put8(b, 156, r.gidList.length);
              r.gidList.forEach((g, i) => b.set(parseIpv6(g), 160 + 16 * i));
            }
          }
        }
      }
      break;
    }
    case 'decline':
      put8(b, 7, ((m.version & 0x0f) << 4) | (m.outOfSync ? 0x08 : 0) | (m.typev1 & 3));
      putPeerId(b, 8, m.peerId);
      put32(b, 16, m.diagnosis);
      put8(b, 20, (m.osType & 0x0f) << 4);
      if (m.version >= 2) for (let i = 0; i < 4; i++) put32(b, 24 + 4 * i, m.diagExtra?.[i] ?? 0);
      break;
    default:
      put8(b, 7, ((m.version & 0x0f) << 4) | (m.flags & 0x0f));
      b.set(m.body, 8);
  }
  return b;
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
  switch (m.type) {
    case 'proposal': {
      let s = `CLC Proposal v${m.version}`;
      const p2 = m.version >= 2 ? pathsOffered(m.typev2, 'v2') : '';
      const p1 = pathsOffered(m.typev1, 'v1');
      s += ' ' + (p2 && p1 ? `${p2} ${p1}` : p2 || p1 || 'no-path');
      const v2 = m.v2;
      const r2 = m.version >= 2 && (m.typev2 === PATH_R || m.typev2 === PATH_B);
      const r1 = m.typev1 === PATH_R || m.typev1 === PATH_B;
      if (v2) {
        s += ` rel 2.${v2.release}`;
        if (v2.eids.length) s += ` ueid ${v2.eids.join(',')}`;
        if (v2.seidFlag) s += ' seid';
        if (r2) s += ` gid ${v2.roceV2Gid}`;
      }
      if (r1) s += `${v2 && r2 ? ' v1gid' : ' gid'} ${m.gid}`;
      if (m.smcd && m.smcd.ismGid !== 0n) s += ` ism ${ismGidStr(m.smcd.ismGid)}`;
      if (m.smcdv2 && m.smcdv2.gids.length) s += ` ismv2 ${m.smcdv2.gids.length}`;
      if (m.prefix) {
        const pf: string[] = [];
        if (m.prefix.ipv4Len || m.prefix.ipv4 !== '0.0.0.0' || !m.prefix.ipv6.length) pf.push(`${m.prefix.ipv4}/${m.prefix.ipv4Len}`);
        for (const p of m.prefix.ipv6) pf.push(`${p.prefix}/${p.len}`);
        s += ` pfx ${pf.join(',')}`;
      }
      return s;
    }
    case 'accept':
    case 'confirm': {
      let s = `CLC ${m.type === 'accept' ? 'Accept' : 'Confirm'} v${m.version} ${m.d ? 'SMC-D' : 'SMC-R'}`;
      if (m.firstContact) s += ' first-contact';
      if (m.r) {
        const r = m.r;
        s += ` QP 0x${r.qpn.toString(16)} rkey 0x${r.rkey.toString(16)} token 0x${r.token.toString(16)}`;
        s += ` buf ${fmtSize(bufSizeFromCode(r.rmbeSizeCode))} mtu ${mtuFromCode(r.mtuCode)} psn ${r.psn}`;
        s += ` va 0x${r.rmbVa.toString(16)}`;
        if (r.fce) s += fceSummary(r.fce, true);
        if (r.gidList) s += ` gids ${r.gidList.length ? r.gidList.join(',') : '-'}`;
      } else if (m.d) {
        const d = m.d;
        s += ` gid ${ismGidStr(d.gid)} token 0x${d.dmbToken.toString(16)} buf ${fmtSize(bufSizeFromCode(d.dmbeSizeCode))} link 0x${d.linkId.toString(16)}`;
        if (d.chid !== undefined) s += ` chid 0x${d.chid.toString(16)}`;
        if (d.fce) s += fceSummary(d.fce, false);
      }
      return s;
    }
    case 'decline':
      return `CLC Decline v${m.version}${m.outOfSync ? ' out-of-sync' : ''} ${formatReason(m.diagnosis)}`;
    default:
      return `CLC type ${m.typeCode} len ${m.length}`;
  }
}

function fceSummary(f: ClcFce, smcr: boolean): string {
  let s = ` host ${f.hostname || '-'} ${osName(f.osType)} rel 2.${f.release}`;
  if (smcr && !f.v2Direct) s += ' indirect';
  return s;
}
