// TCP header (RFC 9293) with every option decoded.
//
// Layout: TCP_FIELDS and TCP_OPTION_FIELDS (../wire/views/net.ts), the one declaration.
//
// Options: EOL (0), NOP (1), MSS (2), window scale (3), SACK permitted (4), SACK (5),
// timestamps (8), MD5 signature (19, RFC 2385), TCP-AO (29, RFC 5925), MPTCP (30, RFC 8684:
// subtype only), Fast Open (34, RFC 7413), experimental 253/254 (RFC 6994: decoded by
// wire/tcpopt.ts — the SMC option FE 06 E2D4C3D9 lives there), anything else kept raw.
// The checksum is NOT verified here: captures taken on the sender usually hold a partial
// (offloaded) checksum; the pipeline may call `tcpUdpChecksum` and decide (see checksum.ts).
// Decoding never throws.

import type { Decoded, Issue } from '../wire/common.js';
import { StringSink, Tree, hex, issue, put16, put32, u16, u32, u8, type TextSink } from '../wire/common.js';
import { addField, bitPicker, bitsOf, entryAt } from '../wire/views/field.js';
import { SACK_BLOCK_FIELDS as S, TCP_FIELDS as F, TCP_MIN_LEN, TCP_OPTION_FIELDS as O, TcpView } from '../wire/views/net.js';
import { decodeTcpOpt, encodeTcpOpt, type TcpOpt } from '../wire/tcpopt.js';
import { transportChecksum } from './checksum.js';

export { tcpUdpChecksum } from './checksum.js';

export interface TcpFlags {
  fin: boolean;
  syn: boolean;
  rst: boolean;
  psh: boolean;
  ack: boolean;
  urg: boolean;
  ece: boolean;
  cwr: boolean;
  /** AccECN (RFC 9768; formerly NS, RFC 3540): bit 0 of byte 12. */
  ae: boolean;
}

export interface TcpSackBlock { left: number; right: number }

/**
 * One option. Decoded fields depend on `kind`; `bytes` (the whole option: kind, length, data)
 * is present for MD5, TCP-AO, MPTCP, Fast Open, 253/254, unknown kinds and any malformed option,
 * and for EOL followed by non-zero padding. Encoding writes `bytes` verbatim when present,
 * otherwise rebuilds the option from the decoded fields.
 */
export interface TcpOption {
  kind: number;
  /** Offset of the option within the TCP header (the first option is at 20). */
  offset: number;
  /** Bytes the option occupies: 1 for NOP, 1 + padding for EOL, else the length octet (clipped to
   *  the header when it runs past it). */
  length: number;
  /** 2: maximum segment size. */
  mss?: number;
  /** 3: window scale shift count. */
  wscale?: number;
  /** 5: SACK blocks. */
  sack?: TcpSackBlock[];
  /** 8: timestamps. */
  tsVal?: number;
  tsEcr?: number;
  /** 29: TCP-AO key ids. */
  keyId?: number;
  rnextKeyId?: number;
  /** 30: MPTCP subtype (high nibble of the third byte). */
  subtype?: number;
  /** 253/254: RFC 6994 experiment, decoded by wire/tcpopt.ts (SMC-R: name 'smc-r'). */
  exp?: TcpOpt;
  bytes?: Uint8Array;
}

export interface TcpHeader {
  srcPort: number;
  dstPort: number;
  seq: number;
  ack: number;
  /** Data offset in 32-bit words, as on the wire. */
  dataOffset: number;
  /** Offset of the payload: dataOffset * 4, but at least 20 (an invalid offset < 5 is flagged). */
  headerLength: number;
  /** The 3 reserved bits (must be zero). */
  reserved: number;
  flags: TcpFlags;
  window: number;
  checksum: number;
  urgentPointer: number;
  /** Shared frozen empty array when there are none (do not push). */
  options: readonly TcpOption[];
}

const NO_OPTIONS: readonly TcpOption[] = Object.freeze([]);

// Hot-path sharing: flag sets and NOP options are immutable values, so decode hands out frozen
// shared instances instead of allocating them per segment (treat decoded values as read-only).
function makeFlags(x: number): TcpFlags {
  return Object.freeze({
    fin: (x & 0x01) !== 0, syn: (x & 0x02) !== 0, rst: (x & 0x04) !== 0, psh: (x & 0x08) !== 0,
    ack: (x & 0x10) !== 0, urg: (x & 0x20) !== 0, ece: (x & 0x40) !== 0, cwr: (x & 0x80) !== 0,
    ae: (x & 0x100) !== 0,
  });
}
const FLAGS: readonly TcpFlags[] = Array.from({ length: 512 }, (_, i) => makeFlags(i));
const NOPS: readonly TcpOption[] = Array.from({ length: 60 }, (_, o) => Object.freeze({ kind: 1, offset: o, length: 1 }));
const EMPTY = new Uint8Array(0);

const OPT_NAMES: ReadonlyMap<number, string> = new Map([
  [0, 'eol'], [1, 'nop'], [2, 'mss'], [3, 'wscale'], [4, 'sackOK'], [5, 'sack'], [6, 'echo'], [7, 'echoreply'],
  [8, 'TS'], [19, 'md5'], [27, 'qs'], [28, 'uto'], [29, 'tcp-ao'], [30, 'mptcp'], [34, 'tfo'],
  [172, 'accecn0'], [174, 'accecn1'], [253, 'exp'], [254, 'exp'],
]);

/** tcpdump-like option name ('mss', 'sackOK', 'TS', 'tcp-ao', …; 'opt-N' when unknown). */
function tcpOptionName(kind: number): string {
  return OPT_NAMES.get(kind) ?? `opt-${kind}`;
}

const MPTCP_SUBTYPES = ['capable', 'join', 'dss', 'add-addr', 'rem-addr', 'prio', 'fail', 'fast-close', 'tcprst'];

/** Fixed option lengths (0 = variable). */
function fixedLength(kind: number): number {
  switch (kind) {
    case 2: return 4;
    case 3: return 3;
    case 4: return 2;
    case 8: return 10;
    case 19: return 18;
    default: return 0;
  }
}

function raw(kind: number, offset: number, length: number, bytes: Uint8Array): TcpOption {
  return { kind, offset, length, bytes };
}

/**
 * Decodes the option area of the TCP header at b[base…] (options from base + 20 to base + `end`).
 * `syn` enables the SYN-only checks; `cut`: the header was cut by the capture at `end` (an option
 * running past it is then not an error of its own). Offsets (issues, options) are within the
 * header; `t` is the options subtree (its base is the first option byte, offset 20).
 */
function decodeOptions(b: Uint8Array, base: number, end: number, syn: boolean, cut: boolean, issues: Issue[], t: Tree | undefined): TcpOption[] {
  const list: TcpOption[] = [];
  let o = TCP_MIN_LEN;
  while (o < end) {
    const at = base + o;
    const kind = b[at]!;
    if (kind === 0) {
      let nz = false;
      for (let i = at + 1; i < base + end; i++) if (b[i] !== 0) { nz = true; break; }
      const opt: TcpOption = { kind, offset: o, length: end - o };
      if (nz) {
        opt.bytes = b.subarray(at, base + end);
        issue(issues, 'note', 'tcp.opt-pad', 'non-zero bytes after End of Option List', o + 1, end - o - 1);
      }
      list.push(opt);
      t?.add('End of Option List (EOL)', o - TCP_MIN_LEN, end - o);
      break;
    }
    if (kind === 1) {
      list.push(NOPS[o] ?? { kind, offset: o, length: 1 });
      t?.add('No-Operation (NOP)', o - TCP_MIN_LEN, 1);
      o++;
      continue;
    }
    if (o + O.length.at >= end) {
      if (!cut) issue(issues, 'error', 'tcp.opt-truncated', `option ${tcpOptionName(kind)} (${kind}) has no length octet`, o, 1);
      list.push(raw(kind, o, 1, b.subarray(at, base + end)));
      break;
    }
    const len = b[at + O.length.at]!;
    if (len < 2) {
      issue(issues, 'error', 'tcp.opt-length', `option ${tcpOptionName(kind)} (${kind}) length ${len} < 2: rest of the options unreadable`, o, 2);
      list.push(raw(kind, o, end - o, b.subarray(at, base + end)));
      t?.add(`Option ${tcpOptionName(kind)} (${kind}), bad length ${len}`, o - TCP_MIN_LEN, end - o, hex(b, at, end - o));
      break;
    }
    let oend = o + len;
    let whole = true;
    if (oend > end) {
      if (!cut) issue(issues, 'error', 'tcp.opt-truncated', `option ${tcpOptionName(kind)} (${kind}) length ${len} runs past the header (${end - o} bytes left)`, o, end - o);
      oend = end;
      whole = false;
    }
    const fixed = fixedLength(kind);
    let opt: TcpOption;
    let expTree: Tree | undefined;
    if (!whole || (fixed !== 0 && len !== fixed)) {
      if (whole) issue(issues, 'warn', 'tcp.opt-length', `option ${tcpOptionName(kind)} length ${len}, expected ${fixed}`, o + O.length.at, O.length.size);
      opt = raw(kind, o, oend - o, b.subarray(at, base + oend));
    } else if (kind === 8) {
      // timestamps: on every segment of a Linux connection, so made whole in one literal (no
      // property added to a 3-field object: that grows it a property array per segment)
      opt = { kind, offset: o, length: len, tsVal: u32(b, at + O.tsVal.at), tsEcr: u32(b, at + O.tsEcr.at) };
    } else {
      opt = { kind, offset: o, length: len };
      switch (kind) {
        case 2: opt.mss = u16(b, at + O.mss.at); break;
        case 3:
          opt.wscale = b[at + O.wscale.at]!;
          if (opt.wscale > 14) issue(issues, 'warn', 'tcp.wscale', `window scale shift ${opt.wscale} > 14 (RFC 7323 caps it at 14)`, o + O.wscale.at, O.wscale.size);
          break;
        case 4: break;
        case 5: {
          const sack: TcpSackBlock[] = [];
          for (let i = at + O.sackBlocks.at; i + O.sackBlocks.len <= base + oend; i += O.sackBlocks.len) sack.push({ left: u32(b, i + S.left.at), right: u32(b, i + S.right.at) });
          opt.sack = sack;
          if ((len - 2) % 8 !== 0 || len < 10) issue(issues, 'warn', 'tcp.opt-length', `SACK length ${len} is not 2 + 8n (n ≥ 1)`, o + O.length.at, O.length.size);
          break;
        }
        case 29:
          opt.bytes = b.subarray(at, base + oend);
          opt.keyId = u8(b, at + O.aoKeyId.at);
          opt.rnextKeyId = u8(b, at + O.aoRnextKeyId.at);
          if (len < 4) issue(issues, 'warn', 'tcp.opt-length', `TCP-AO length ${len} < 4`, o + O.length.at, O.length.size);
          break;
        case 30:
          opt.bytes = b.subarray(at, base + oend);
          if (len > O.mptcpSubtype.at) opt.subtype = bitsOf(b[at + O.mptcpSubtype.at]!, O.mptcpSubtype);
          else issue(issues, 'warn', 'tcp.opt-length', `MPTCP length ${len} < 3`, o + O.length.at, O.length.size);
          break;
        case 253: case 254: {
          opt.bytes = b.subarray(at, base + oend);
          if (t) expTree = new Tree(t.base + o - TCP_MIN_LEN);
          const d = decodeTcpOpt(opt.bytes, expTree);
          opt.exp = d.value;
          for (const i of d.issues) issues.push({ severity: i.severity, code: i.code, message: i.message, offset: i.offset + o, length: i.length });
          break;
        }
        default:
          opt.bytes = b.subarray(at, base + oend);
          if (kind !== 19 && kind !== 34 && !OPT_NAMES.has(kind)) issue(issues, 'note', 'tcp.opt-unknown', `unknown TCP option kind ${kind}`, o, oend - o);
      }
    }
    if (!syn && (kind === 2 || kind === 3 || kind === 4)) {
      issue(issues, 'note', 'tcp.opt-syn-only', `${tcpOptionName(kind)} option outside a SYN`, o, oend - o);
    }
    if (t) {
      const node = t.add(`Option ${tcpOptionName(kind)} (${kind})`, o - TCP_MIN_LEN, oend - o, optionText(opt));
      if (expTree) node.children = expTree.nodes;
    }
    list.push(opt);
    o = oend;
  }
  return list;
}

/** Offsets: ../wire/views/net.ts (TCP_FIELDS); encode goes through this view, decode reads the
 *  bytes at the table's offsets and picks the bit fields with these. */
const view = new TcpView();
const DOFF = bitPicker(F.dataOffset), FLAG_BITS = bitPicker(F.flags), RESERVED = bitPicker(F.reserved);

/** Where the option area NOP, NOP, timestamps (12 bytes: most segments of a Linux connection)
 *  puts its timestamps option, and where the area ends. */
const NOP_NOP_TS_AT = TCP_MIN_LEN + 2;
const NOP_NOP_TS_END = NOP_NOP_TS_AT + 10;

function isNopNopTs(b: Uint8Array, off: number): boolean {
  const o = off + TCP_MIN_LEN;
  return b[o] === 1 && b[o + 1] === 1 && b[o + 2] === 8 && b[o + 3] === 10;
}

/**
 * A list decodeTcpAt refills (its `ts` argument) for the option area NOP, NOP, timestamps instead
 * of making one per segment: the shared NOP records and one timestamps record, as decodeOptions
 * makes them (such an area raises no issue). For a decoder whose caller keeps nothing of a frame
 * past the next one (FrameDecoderOptions.reuse).
 */
export function reusableTsOptions(): TcpOption[] {
  return [NOPS[TCP_MIN_LEN]!, NOPS[TCP_MIN_LEN + 1]!, { kind: 8, offset: NOP_NOP_TS_AT, length: 10, tsVal: 0, tsEcr: 0 }];
}

/** A header value with every field present (decodeTcpAt fills it). */
export function blankTcpHeader(): TcpHeader {
  return { srcPort: 0, dstPort: 0, seq: 0, ack: 0, dataOffset: 0, headerLength: TCP_MIN_LEN, reserved: 0, flags: FLAGS[0]!, window: 0, checksum: 0, urgentPointer: 0, options: NO_OPTIONS };
}

export function decodeTcp(b: Uint8Array, t?: Tree, wireLength = b.length): Decoded<TcpHeader> {
  const issues: Issue[] = [];
  return { value: decodeTcpAt(issues, b, 0, b.length, t, wireLength), issues };
}

/**
 * decodeTcp() of the segment at b[off, end), its issues pushed onto `issues` with offsets
 * relative to `off`: the replay path decodes each frame without a view per segment, a result
 * object or an issue array of its own.
 */
export function decodeTcpAt(issues: Issue[], b: Uint8Array, off: number, end: number, t?: Tree, wireLength = end - off, into?: TcpHeader, ts?: TcpOption[]): TcpHeader {
  // A header cut short reads its missing bytes as 0: only a view that ends there gives that.
  if (end - off < TCP_MIN_LEN && (off !== 0 || end !== b.length)) return decodeTcpAt(issues, b.subarray(off, end), 0, end - off, t, wireLength, into, ts);
  const n = end - off;
  // the fast form: bytes read at the table's offsets, bit fields by its shift/mask (no view per segment)
  const fl = u16(b, off + F.flags.at);
  const doff = DOFF(u8(b, off + F.dataOffset.at));
  const flags = FLAGS[FLAG_BITS(fl)]!;
  // every field, in one order (one object shape whether fresh or a reusing decoder's record)
  const value = into ?? blankTcpHeader();
  value.srcPort = u16(b, off + F.srcPort.at); value.dstPort = u16(b, off + F.dstPort.at); value.seq = u32(b, off + F.seq.at); value.ack = u32(b, off + F.ack.at);
  value.dataOffset = doff; value.headerLength = doff * 4 < TCP_MIN_LEN ? TCP_MIN_LEN : doff * 4; value.reserved = RESERVED(u8(b, off + F.reserved.at));
  value.flags = flags; value.window = u16(b, off + F.window.at); value.checksum = u16(b, off + F.checksum.at); value.urgentPointer = u16(b, off + F.urgentPointer.at);
  value.options = NO_OPTIONS;
  const hl = value.headerLength;
  const D = F.dataOffset, FL = F.flagByte;
  if (n < TCP_MIN_LEN) {
    if (wireLength > n && wireLength >= TCP_MIN_LEN) issue(issues, 'note', 'tcp.snaplen', `TCP header cut by the capture: ${n} of ${TCP_MIN_LEN}+ bytes captured`, 0, n);
    else issue(issues, 'error', 'tcp.truncated', `truncated TCP header: need ${TCP_MIN_LEN} bytes, have ${n}`, 0, n);
  } else if (hl > n) {
    if (wireLength >= hl) issue(issues, 'note', 'tcp.snaplen', `TCP options cut by the capture: ${n} of ${hl} header bytes captured`, TCP_MIN_LEN, n - TCP_MIN_LEN);
    else issue(issues, 'error', 'tcp.truncated', `data offset ${doff} (${hl} bytes) exceeds the ${n}-byte segment`, D.at, D.size);
  }
  if (n > D.at && doff * 4 < TCP_MIN_LEN) issue(issues, 'error', 'tcp.doff', `data offset ${doff} < ${TCP_MIN_LEN / 4} (header length ${doff * 4} bytes)`, D.at, D.size);
  if (n > D.at && value.reserved !== 0) issue(issues, 'warn', 'tcp.reserved', `reserved header bits set (${value.reserved})`, D.at, D.size);
  if (n > FL.at) {
    if (flags.syn && (flags.fin || flags.rst)) issue(issues, 'warn', 'tcp.flags', `invalid flag combination: SYN with ${flags.fin ? 'FIN' : 'RST'}`, FL.at, FL.size);
    else if (u8(b, off + FL.at) === 0 && !flags.ae) issue(issues, 'warn', 'tcp.flags', 'no flags set', FL.at, FL.size);
  }
  if (n >= F.ack.at + F.ack.size && !flags.ack && value.ack !== 0 && !flags.rst) issue(issues, 'note', 'tcp.ack-nonzero', `ACK flag clear but acknowledgment number is ${value.ack}`, F.ack.at, F.ack.size);
  if (n >= TCP_MIN_LEN && !flags.urg && value.urgentPointer !== 0) issue(issues, 'note', 'tcp.urg', `urgent pointer ${value.urgentPointer} without URG`, F.urgentPointer.at, F.urgentPointer.size);
  if (n >= F.dstPort.at + F.dstPort.size && (value.srcPort === 0 || value.dstPort === 0)) issue(issues, 'warn', 'tcp.port0', 'port 0', value.srcPort === 0 ? F.srcPort.at : F.dstPort.at, F.dstPort.size);

  if (t) treeTcp(t, value, fl);
  const oend = Math.min(hl, n);
  if (oend === NOP_NOP_TS_END && ts !== undefined && t === undefined && isNopNopTs(b, off)) {
    // Linux's data and ACK segments: a refilled list (what decodeOptions makes of these bytes)
    const rec = ts[2] as TcpOption;
    rec.tsVal = u32(b, off + NOP_NOP_TS_AT + O.tsVal.at); rec.tsEcr = u32(b, off + NOP_NOP_TS_AT + O.tsEcr.at);
    value.options = ts;
  } else if (oend > TCP_MIN_LEN) {
    value.options = decodeOptions(b, off, oend, flags.syn, hl > n && wireLength >= hl, issues, t ? t.sub('Options', TCP_MIN_LEN, oend - TCP_MIN_LEN, `${hl - TCP_MIN_LEN} bytes`) : undefined);
  }
  return value;
}

/** The `-V` nodes of the fixed header (a function of its own: the decoder stays small). */
function treeTcp(t: Tree, value: TcpHeader, fl: number): void {
  const flags = value.flags, doff = value.dataOffset;
  addField(t, F.srcPort, value.srcPort);
  addField(t, F.dstPort, value.dstPort);
  addField(t, F.seq, value.seq);
  addField(t, F.ack, value.ack);
  addField(t, F.dataOffset, `${doff * 4} bytes (${doff})`);
  addField(t, F.flags, `0x${bitsOf(fl, F.flagBits12).toString(16).padStart(3, '0')} (${tcpFlagNames(flags) || 'none'})${value.reserved ? ` reserved ${value.reserved}` : ''}`);
  addField(t, F.window, value.window);
  addField(t, F.checksum, `0x${value.checksum.toString(16).padStart(4, '0')} [unverified]`);
  addField(t, F.urgentPointer, value.urgentPointer);
}

// ---------- encoding ----------

function optionSize(o: TcpOption): number {
  if (o.bytes) return o.bytes.length;
  switch (o.kind) {
    case 0: return Math.max(1, o.length);
    case 1: return 1;
    case 5: return entryAt(O.sackBlocks, o.sack?.length ?? 0);
    case 253: case 254: return o.exp ? encodeTcpOpt(o.exp).length : Math.max(2, o.length);
    default: return fixedLength(o.kind) || Math.max(2, o.length);
  }
}

function writeOption(out: Uint8Array, p: number, o: TcpOption): number {
  if (o.bytes) { out.set(o.bytes, p); return p + o.bytes.length; }
  const n = optionSize(o);
  out[p] = o.kind;
  if (o.kind === 0 || o.kind === 1) return p + n; // EOL padding stays zero
  out[p + O.length.at] = n;
  switch (o.kind) {
    case 2: put16(out, p + O.mss.at, o.mss ?? 0); break;
    case 3: out[p + O.wscale.at] = o.wscale ?? 0; break;
    case 5: (o.sack ?? []).forEach((s, i) => { const q = p + entryAt(O.sackBlocks, i); put32(out, q + S.left.at, s.left); put32(out, q + S.right.at, s.right); }); break;
    case 8: put32(out, p + O.tsVal.at, o.tsVal ?? 0); put32(out, p + O.tsEcr.at, o.tsEcr ?? 0); break;
    case 253: case 254: if (o.exp) out.set(encodeTcpOpt(o.exp), p); break;
  }
  return p + n;
}

/** Option area bytes (not padded). */
function encodeTcpOptions(opts: readonly TcpOption[]): Uint8Array {
  let n = 0;
  for (const o of opts) n += optionSize(o);
  const out = new Uint8Array(n);
  let p = 0;
  for (const o of opts) p = writeOption(out, p, o);
  return out;
}

/** The 9 flag bits of TCP_FIELDS.flags (AE is bit 8). */
function flagBits(f: TcpFlags): number {
  return (f.fin ? 1 : 0) | (f.syn ? 2 : 0) | (f.rst ? 4 : 0) | (f.psh ? 8 : 0) | (f.ack ? 0x10 : 0) |
    (f.urg ? 0x20 : 0) | (f.ece ? 0x40 : 0) | (f.cwr ? 0x80 : 0) | (f.ae ? 0x100 : 0);
}

export interface TcpChecksumInput {
  /** IP source / destination (dotted quad or IPv6 text, or 4/16 bytes). */
  src: Uint8Array | string;
  dst: Uint8Array | string;
}

/**
 * Header (+ payload). Header length = max(dataOffset*4, 20 + options rounded up to 4; zero fill
 * = EOL). The checksum field is `v.checksum` unless `ck` is given: then it is computed over the
 * IPv4/IPv6 pseudo-header, header and payload.
 */
export function encodeTcp(v: TcpHeader, payload?: Uint8Array, ck?: TcpChecksumInput): Uint8Array {
  const ob = v.options.length ? encodeTcpOptions(v.options) : EMPTY;
  const hl = Math.max((TCP_MIN_LEN + ob.length + 3) & ~3, Math.min(60, (v.dataOffset & 0xf) * 4));
  const out = new Uint8Array(hl + (payload ? payload.length : 0));
  const w = view.reset(out);
  w.srcPort = v.srcPort;
  w.dstPort = v.dstPort;
  w.seq = v.seq >>> 0;
  w.ack = v.ack >>> 0;
  w.dataOffset = hl >>> 2;
  w.reserved = v.reserved;
  w.flags = flagBits(v.flags);
  w.window = v.window;
  w.urgentPointer = v.urgentPointer;
  out.set(ob, TCP_MIN_LEN);
  if (payload) out.set(payload, hl);
  w.checksum = ck ? transportChecksum(ck.src, ck.dst, 6, out) : v.checksum;
  return out;
}

/** Flags from tcpdump letters or names: 'S', 'S.', 'P.', 'F.', 'R', or 'SYN,ACK' style. */
export function tcpFlags(spec: string): TcpFlags {
  const f: TcpFlags = { fin: false, syn: false, rst: false, psh: false, ack: false, urg: false, ece: false, cwr: false, ae: false };
  const up = spec.toUpperCase();
  if (up.includes('SYN') || up.includes('FIN') || up.includes('ACK') || up.includes('RST') || up.includes('PSH')) {
    for (const n of up.split(/[ ,|+]+/)) {
      const k = n.toLowerCase();
      if (k in f) (f as unknown as Record<string, boolean>)[k] = true;
    }
    return f;
  }
  for (const c of spec) {
    switch (c) {
      case 'F': f.fin = true; break;
      case 'S': f.syn = true; break;
      case 'R': f.rst = true; break;
      case 'P': f.psh = true; break;
      case '.': f.ack = true; break;
      case 'U': f.urg = true; break;
      case 'E': f.ece = true; break;
      case 'W': f.cwr = true; break;
      case 'e': f.ae = true; break;
    }
  }
  return f;
}

export interface TcpInit {
  srcPort: number;
  dstPort: number;
  seq?: number;
  ack?: number;
  /** TcpFlags, or tcpdump letters ('S', 'S.', 'P.') / names ('SYN,ACK'). */
  flags: TcpFlags | string;
  window?: number;
  urgentPointer?: number;
  /** Options without offsets/lengths (filled in); padded to 4 bytes with EOL. */
  options?: readonly Omit<TcpOption, 'offset' | 'length'>[];
}

/** Complete value (offsets, lengths, data offset filled in; checksum 0 — pass `ck` to encodeTcp). */
export function tcpHeader(init: TcpInit): TcpHeader {
  const flags = typeof init.flags === 'string' ? tcpFlags(init.flags) : init.flags;
  const opts: TcpOption[] = (init.options ?? []).map((o) => ({ offset: 0, length: 0, ...o }) as TcpOption);
  for (const o of opts) if (o.length === 0) o.length = o.kind === 1 || o.kind === 0 ? 1 : optionSize({ ...o, length: 0 });
  const skeleton: TcpHeader = {
    srcPort: init.srcPort, dstPort: init.dstPort, seq: init.seq ?? 0, ack: init.ack ?? 0, dataOffset: 0, headerLength: TCP_MIN_LEN,
    reserved: 0, flags, window: init.window ?? 65535, checksum: 0, urgentPointer: init.urgentPointer ?? 0, options: opts,
  };
  return decodeTcp(encodeTcp(skeleton)).value;
}

// ---------- summaries ----------

const FLAG_LETTERS: readonly [keyof TcpFlags, string][] = [
  ['fin', 'F'], ['syn', 'S'], ['rst', 'R'], ['psh', 'P'], ['ack', '.'], ['urg', 'U'], ['ece', 'E'], ['cwr', 'W'], ['ae', 'e'],
];
const FLAG_NAMES: readonly [keyof TcpFlags, string][] = [
  ['syn', 'SYN'], ['fin', 'FIN'], ['rst', 'RST'], ['psh', 'PSH'], ['ack', 'ACK'], ['urg', 'URG'], ['ece', 'ECE'], ['cwr', 'CWR'], ['ae', 'AE'],
];

/** summarizeTcpFlags() by flagBits() (the header's 9 flag bits): 512 texts, each made once (a line
 *  per segment reads one). */
const FLAG_TEXT: (string | undefined)[] = new Array<string | undefined>(512).fill(undefined);

/** tcpdump letters: `S`, `S.`, `P.`, `F.`, `R.`, `SEW`; 'none' when no flag is set. */
export function summarizeTcpFlags(f: TcpFlags): string {
  return (FLAG_TEXT[flagBits(f)] ??= flagLetters(f));
}

function flagLetters(f: TcpFlags): string {
  let s = '';
  for (const [k, c] of FLAG_LETTERS) if (f[k]) s += c;
  return s || 'none';
}

/** Names: `SYN, ACK` ('' when none). */
function tcpFlagNames(f: TcpFlags): string {
  let s = '';
  for (const [k, n] of FLAG_NAMES) if (f[k]) s += (s ? ', ' : '') + n;
  return s;
}

/** One option's text (the -V tree's option line). */
function optionText(o: TcpOption): string {
  const s = new StringSink();
  writeTcpOption(s, o);
  return s.s;
}

/** One option as tcpdump writes it (`mss 1460`, `TS val 1 ecr 2`, `smc-r`), piece by piece into
 *  a sink: the options Linux sends go in as pieces and numbers (smcdump's output buffer writes the
 *  digits; no string per segment), the rare ones as one text. */
function writeTcpOption(s: TextSink, o: TcpOption): void {
  switch (o.kind) {
    case 0: s.text('eol'); return;
    case 1: s.text('nop'); return;
    case 2: if (o.mss !== undefined) { s.text('mss '); s.dec(o.mss); return; } break;
    case 3: if (o.wscale !== undefined) { s.text('wscale '); s.dec(o.wscale); return; } break;
    case 4: if (!o.bytes) { s.text('sackOK'); return; } break;
    case 5: if (o.sack) { s.text(`sack ${o.sack.length} ${o.sack.map((x) => `{${x.left}:${x.right}}`).join('')}`); return; } break;
    case 8: if (o.tsVal !== undefined) { s.text('TS val '); s.dec(o.tsVal); s.text(' ecr '); if (o.tsEcr !== undefined) s.dec(o.tsEcr); else s.text('undefined'); return; } break;
    case 19: if (o.bytes && o.bytes.length === 18) { s.text(`md5 ${hex(o.bytes, 2)}`); return; } break;
    case 29: if (o.keyId !== undefined) { s.text(`tcp-ao keyid ${o.keyId} rnextkeyid ${o.rnextKeyId}`); return; } break;
    case 30: if (o.subtype !== undefined) { s.text(`mptcp ${MPTCP_SUBTYPES[o.subtype] ?? `subtype ${o.subtype}`}`); return; } break;
    case 34: if (o.bytes) { s.text(o.bytes.length > 2 ? `tfo cookie ${hex(o.bytes, 2)}` : 'tfo cookiereq'); return; } break;
    case 253: case 254: {
      const e = o.exp;
      if (e) {
        if (e.name === 'smc-r' || e.name === 'smc-d') { s.text(e.name); if (e.length !== 6) { s.text(' len '); s.dec(e.length); } return; }
        if (e.exidBits) { s.text(`exp-${e.exid.toString(16).padStart(e.exidBits / 4, '0')}${e.data.length ? ':' + hex(e.data) : ''}`); return; }
      }
      break;
    }
  }
  const b = o.bytes;
  s.text(`${OPT_NAMES.has(o.kind) ? tcpOptionName(o.kind) : 'unknown-' + o.kind}${b && b.length > 2 ? ' 0x' + hex(b, 2) : ''}${b && b.length >= 2 && b[1] !== b.length ? ` [bad opt len ${b[1]}]` : ''}`);
}

/** The option list's content (`mss 1460,sackOK,TS val 1 ecr 0,nop,wscale 7`) into a sink. */
function writeTcpOptions(s: TextSink, opts: readonly TcpOption[]): void {
  for (let i = 0; i < opts.length; i++) {
    if (i !== 0) s.text(',');
    writeTcpOption(s, opts[i]!);
  }
}

/** tcpdump style list content: `mss 1460,sackOK,TS val 1 ecr 0,nop,wscale 7,nop,nop,smc-r`. */
export function summarizeTcpOptions(opts: readonly TcpOption[]): string {
  const s = new StringSink();
  writeTcpOptions(s, opts);
  return s.s;
}

export interface TcpSummaryContext {
  /** IP addresses: when given, the line starts `src.port > dst.port: `. */
  src?: string;
  dst?: string;
  /** Initial sequence numbers (ISN) of this direction / of the peer: seq and ack print relative. */
  seqBase?: number;
  ackBase?: number;
}

/**
 * tcpdump style: `Flags [S], seq 0, win 64240, options [mss 1460,sackOK,TS val 1 ecr 0,nop,wscale 7,smc-r], length 0`,
 * prefixed with `10.55.0.1.34608 > 10.55.0.2.12345: ` when addresses are given.
 */
export function summarizeTcp(v: TcpHeader, payloadLength = 0, c?: TcpSummaryContext): string {
  const s = new StringSink();
  writeTcpSummary(s, v, payloadLength, c);
  return s.s;
}

/** summarizeTcp() written into a sink piece by piece (smcdump's output buffer takes the numbers
 *  as digits: no string per number and no joined line). */
export function writeTcpSummary(s: TextSink, v: TcpHeader, payloadLength = 0, c?: TcpSummaryContext): void {
  if (c?.src !== undefined && c.dst !== undefined) {
    s.text(c.src); s.text('.'); s.dec(v.srcPort); s.text(' > '); s.text(c.dst); s.text('.'); s.dec(v.dstPort); s.text(': ');
  }
  s.text('Flags [');
  s.text(summarizeTcpFlags(v.flags));
  s.text(']');
  const f = v.flags;
  if (payloadLength > 0 || f.syn || f.fin || f.rst) {
    const seq = c?.seqBase !== undefined ? (v.seq - c.seqBase) >>> 0 : v.seq;
    s.text(', seq ');
    s.dec(seq);
    if (payloadLength > 0) { s.text(':'); s.dec((seq + payloadLength) >>> 0); }
  }
  if (f.ack) { s.text(', ack '); s.dec(c?.ackBase !== undefined ? (v.ack - c.ackBase) >>> 0 : v.ack); }
  s.text(', win ');
  s.dec(v.window);
  if (f.urg) { s.text(', urg '); s.dec(v.urgentPointer); }
  if (v.options.length) { s.text(', options ['); writeTcpOptions(s, v.options); s.text(']'); }
  s.text(', length ');
  s.dec(payloadLength);
}
