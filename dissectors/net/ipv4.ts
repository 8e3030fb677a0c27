// IPv4 header (RFC 791) with options, DSCP/ECN (RFC 2474/3168), fragmentation fields and a
// verified header checksum.
//
// Layout: IPV4_FIELDS (../wire/views/net.ts), the one declaration; options follow up to IHL × 4.
//
// Checksum policy (decode only reports, it never rejects):
//   * sum correct                → checksumStatus 'ok'
//   * field is 0 and sum wrong    → 'zero' + note `ipv4.checksum-zero`: typical of captures taken on a
//     sender whose NIC fills the checksum in later (tx offload; common on Windows/BSD, rare for the IPv4
//     header on Linux), so it is not treated as a wire error
//   * any other mismatch          → 'bad' + error `ipv4.checksum` (a receiver would drop the packet)
//   * header not fully captured   → 'unverified'
//
// Lengths: `wireLength` (3rd argument, default b.length) is how many bytes of this packet were on
// the wire, i.e. b.length + (frame original length - captured length). A total length larger than
// what was on the wire is a wrong length field (error `ipv4.length`); a packet that was on the wire
// in full but cut by the capture snaplen only gets a note (`ipv4.snaplen`).
// Bytes after `totalLength` are link-layer padding (Ethernet pads to 46 payload bytes); a trailer
// after a packet of 46+ bytes gets a note (`ipv4.trailer`).

import type { Decoded, Issue, Tree } from '../wire/common.js';
import { hex, hexN, issue, parseIpv4, u16, u8 } from '../wire/common.js';
import { addField, bitPicker } from '../wire/views/field.js';
import { IP_OPTION_FIELDS as O, IPV4_FIELDS as F, IPV4_MIN_LEN, IpOptionView, Ipv4View } from '../wire/views/net.js';
import { ipv4At } from './addr.js';
import { finish, sumWords, fold } from './checksum.js';

export const IPPROTO_TCP = 6;
export const IPPROTO_UDP = 17;

const PROTO_NAMES: ReadonlyMap<number, string> = new Map([
  [0, 'HOPOPT'], [1, 'ICMP'], [2, 'IGMP'], [4, 'IPIP'], [6, 'TCP'], [17, 'UDP'], [41, 'IPv6'],
  [43, 'Routing'], [44, 'Fragment'], [46, 'RSVP'], [47, 'GRE'], [50, 'ESP'], [51, 'AH'], [58, 'ICMPv6'],
  [59, 'NoNext'], [60, 'DstOpts'], [88, 'EIGRP'], [89, 'OSPF'], [103, 'PIM'], [112, 'VRRP'],
  [115, 'L2TP'], [132, 'SCTP'], [135, 'Mobility'], [136, 'UDPLite'], [137, 'MPLS-in-IP'],
  [139, 'HIP'], [140, 'Shim6'], [143, 'Ethernet'], [253, 'Experimental'], [254, 'Experimental'],
]);

/** 'TCP', 'UDP', 'ICMPv6', … or the number as text. */
export function ipProtoName(p: number): string {
  return PROTO_NAMES.get(p) ?? String(p);
}

export interface Ipv4Option {
  /** Option type octet (copied flag 0x80 · class 0x60 · number 0x1f). */
  type: number;
  /** Short name ('EOL', 'NOP', 'RR', 'TS', 'LSRR', 'SSRR', 'RA', 'SEC', 'CIPSO', … or 'opt-N'). */
  name: string;
  /** Length octet as on the wire (1 for EOL/NOP, which have none). */
  length: number;
  /** Bytes after type and length (empty for EOL/NOP). Authoritative for encoding. */
  data: Uint8Array;
  /** RR/LSRR/SSRR/TS: pointer octet. */
  pointer?: number;
  /** RR/LSRR/SSRR: route addresses. */
  route?: string[];
  /** TS: overflow count and flag (0 ts only, 1 addr+ts, 3 prespecified). */
  overflow?: number;
  flag?: number;
  timestamps?: { addr?: string; ts: number }[];
  /** RA (router alert, RFC 2113): value. */
  routerAlert?: number;
  /** EOL only: the padding after it when it is not all zero. */
  pad?: Uint8Array;
}

export type ChecksumStatus = 'ok' | 'bad' | 'zero' | 'unverified';

export interface Ipv4Header {
  version: number;
  /** Header length in 32-bit words, as on the wire. */
  ihl: number;
  dscp: number;
  /** 0 Not-ECT, 1 ECT(1), 2 ECT(0), 3 CE. */
  ecn: number;
  totalLength: number;
  id: number;
  /** Reserved ("evil") flag bit. */
  reservedFlag: boolean;
  dontFragment: boolean;
  moreFragments: boolean;
  /** Fragment offset in 8-byte units, as on the wire. */
  fragmentOffset: number;
  ttl: number;
  protocol: number;
  checksum: number;
  src: string;
  dst: string;
  /** Shared frozen empty array when there are none (do not push). */
  options: readonly Ipv4Option[];
  /** ihl * 4: offset of the payload. */
  headerLength: number;
  checksumStatus: ChecksumStatus;
}

const NO_OPTIONS: readonly Ipv4Option[] = Object.freeze([]);
const EMPTY = new Uint8Array(0);

const OPT_NAMES: ReadonlyMap<number, string> = new Map([
  [0, 'EOL'], [1, 'NOP'], [7, 'RR'], [11, 'MTUP'], [12, 'MTUR'], [25, 'QS'], [68, 'TS'], [82, 'TR'],
  [130, 'SEC'], [131, 'LSRR'], [133, 'ESEC'], [134, 'CIPSO'], [136, 'SID'], [137, 'SSRR'], [148, 'RA'],
  [30, 'EXP'], [94, 'EXP'], [158, 'EXP'], [222, 'EXP'],
]);

function ipv4OptionName(type: number): string {
  return OPT_NAMES.get(type) ?? `opt-${type}`;
}

const ECN_NAMES = ['Not-ECT', 'ECT(1)', 'ECT(0)', 'CE'];

/** An option's fields (IP_OPTION_FIELDS), read no further than the option's end. */
const optView = new IpOptionView();

/** Decodes an IPv4 option area (`b` = the option bytes only; `cut`: the capture cut it, so an option
 *  running past the end is not an error of its own). Never throws. */
function decodeIpv4Options(b: Uint8Array, issues: Issue[], base = 0, t?: Tree, cut = false): Ipv4Option[] {
  const list: Ipv4Option[] = [];
  let o = 0;
  const end = b.length;
  while (o < end) {
    const type = b[o]!;
    if (type === 0) {
      const opt: Ipv4Option = { type, name: 'EOL', length: 1, data: EMPTY };
      let nz = false;
      for (let i = o + 1; i < end; i++) if (b[i] !== 0) { nz = true; break; }
      if (nz) {
        opt.pad = b.subarray(o + 1, end);
        issue(issues, 'note', 'ipv4.opt-pad', 'non-zero bytes after End of Options List', base + o + 1, end - o - 1);
      }
      list.push(opt);
      t?.add('End of Options List (EOL)', o, end - o);
      break;
    }
    if (type === 1) {
      list.push({ type, name: 'NOP', length: 1, data: EMPTY });
      t?.add('No-Operation (NOP)', o, 1);
      o++;
      continue;
    }
    const name = ipv4OptionName(type);
    if (o + O.length.at >= end) {
      if (!cut) issue(issues, 'error', 'ipv4.opt-truncated', `option ${name} (${type}) has no length octet`, base + o, 1);
      list.push({ type, name, length: 0, data: EMPTY });
      break;
    }
    const len = b[o + O.length.at]!;
    if (len < O.data.at) {
      issue(issues, 'error', 'ipv4.opt-length', `option ${name} (${type}) length ${len} < ${O.data.at}`, base + o, O.data.at);
      list.push({ type, name, length: len, data: b.subarray(o + O.data.at, end) });
      break;
    }
    let dend = o + len;
    if (dend > end) {
      if (!cut) issue(issues, 'error', 'ipv4.opt-truncated', `option ${name} (${type}) length ${len} runs past the header (${end - o} bytes left)`, base + o, end - o);
      dend = end;
    }
    const data = b.subarray(o + O.data.at, dend);
    const x = optView.reset(b, o, dend);
    const opt: Ipv4Option = { type, name, length: len, data };
    let desc = `len ${len}`;
    if (type === 7 || type === 131 || type === 137) {
      opt.pointer = x.pointer;
      const route: string[] = [];
      for (let i = o + O.route.at; i + O.route.len <= dend; i += O.route.len) route.push(ipv4At(b, i));
      opt.route = route;
      if ((len - 3) % 4 !== 0) issue(issues, 'warn', 'ipv4.opt-length', `${name} length ${len} is not 3 + 4n`, base + o + O.length.at, O.length.size);
      if (opt.pointer < 4 || (opt.pointer & 3) !== 0) issue(issues, 'warn', 'ipv4.opt-pointer', `${name} pointer ${opt.pointer} invalid (must be 4, 8, …)`, base + o + O.pointer.at, O.pointer.size);
      desc = `ptr ${opt.pointer} ${route.join(' ')}`;
    } else if (type === 68) {
      opt.pointer = x.pointer;
      opt.overflow = x.tsOverflow;
      opt.flag = x.tsFlag;
      const ts: { addr?: string; ts: number }[] = [];
      const step = opt.flag === 0 ? 4 : 8;
      for (let i = o + O.tsEntries.at; i + step <= dend; i += step) {
        if (step === 4) ts.push({ ts: u32at(b, i) });
        else ts.push({ addr: ipv4At(b, i), ts: u32at(b, i + 4) });
      }
      opt.timestamps = ts;
      if (opt.flag !== 0 && opt.flag !== 1 && opt.flag !== 3) issue(issues, 'warn', 'ipv4.opt-ts-flag', `TS flag ${opt.flag} unknown`, base + o + O.tsFlag.at, O.tsFlag.size);
      desc = `ptr ${opt.pointer} oflw ${opt.overflow} flg ${opt.flag} [${ts.map((x) => (x.addr ? x.addr + ' ' : '') + x.ts).join(', ')}]`;
    } else if (type === 148) {
      if (len !== 4) issue(issues, 'warn', 'ipv4.opt-length', `RA length ${len}, expected 4`, base + o + O.length.at, O.length.size);
      opt.routerAlert = x.routerAlert;
      desc = `value ${opt.routerAlert}`;
    } else if (!OPT_NAMES.has(type)) {
      issue(issues, 'note', 'ipv4.opt-unknown', `unknown IPv4 option type ${type}`, base + o, dend - o);
    }
    if (t) t.add(`Option ${name} (${type})`, o, dend - o, desc + (data.length ? ` ${hex(data)}` : ''));
    list.push(opt);
    o = dend;
  }
  return list;
}

function u32at(b: Uint8Array, o: number): number {
  return ((b[o] ?? 0) * 0x1000000) + (((b[o + 1] ?? 0) << 16) | ((b[o + 2] ?? 0) << 8) | (b[o + 3] ?? 0));
}

export function decodeIpv4(b: Uint8Array, t?: Tree, wireLength = b.length): Decoded<Ipv4Header> {
  const issues: Issue[] = [];
  const value = blankIpv4Header();
  decodeIpv4At(value, issues, b, 0, t, wireLength);
  return { value, issues };
}

/** A header value with every field present (decodeIpv4At fills it). */
export function blankIpv4Header(): Ipv4Header {
  return {
    version: 0, ihl: 0, dscp: 0, ecn: 0, totalLength: 0, id: 0,
    reservedFlag: false, dontFragment: false, moreFragments: false, fragmentOffset: 0,
    ttl: 0, protocol: 0, checksum: 0, src: '', dst: '',
    options: NO_OPTIONS, headerLength: 0, checksumStatus: 'unverified',
  };
}

/** Offsets: ../wire/views/net.ts (IPV4_FIELDS); encode goes through this view, decode reads the
 *  bytes at the table's offsets and picks the bit fields with these (one function per field). */
const view = new Ipv4View();
const VERSION = bitPicker(F.version), IHL = bitPicker(F.ihl), DSCP = bitPicker(F.dscp), ECN = bitPicker(F.ecn);
const RF = bitPicker(F.reservedFlag), DF = bitPicker(F.dontFragment), MF = bitPicker(F.moreFragments), FRAG = bitPicker(F.fragmentOffset);
// The offsets read per frame, taken from the table once: a constant each instead of two
// property loads per field per frame (measured on the replay path).
const AT_VER = F.verIhl.at, AT_TOS = F.tos.at, AT_FRAG = F.flagsFragment.at, AT_LEN = F.totalLength.at, AT_ID = F.id.at;
const AT_TTL = F.ttl.at, AT_PROTO = F.protocol.at, AT_CK = F.checksum.at, AT_SRC = F.src.at, AT_DST = F.dst.at;
const END_LEN = AT_LEN + F.totalLength.size, END_FRAG = AT_FRAG + F.flagsFragment.size;

/**
 * decodeIpv4() of the header at b[off…] into `value` (every field overwritten), its issues
 * pushed onto `issues` with offsets relative to `off`: the replay path decodes each frame
 * without a view, a result object or an issue array of its own.
 */
export function decodeIpv4At(value: Ipv4Header, issues: Issue[], b: Uint8Array, off: number, t?: Tree, wireLength = b.length - off): void {
  const n = b.length > off ? b.length - off : 0;
  // The replay path's fast form: bytes read directly at the table's offsets (a view's getters
  // measured ~40 ns slower per header here), bit fields picked out by the table's shift/mask.
  const vb = u8(b, off + AT_VER), tos = u8(b, off + AT_TOS), fo = u16(b, off + AT_FRAG);
  const ihl = IHL(vb);
  // every field, in one order (one object shape whether fresh or reused)
  value.version = VERSION(vb); value.ihl = ihl; value.dscp = DSCP(tos); value.ecn = ECN(tos); value.totalLength = u16(b, off + AT_LEN); value.id = u16(b, off + AT_ID);
  value.reservedFlag = RF(fo) !== 0; value.dontFragment = DF(fo) !== 0; value.moreFragments = MF(fo) !== 0; value.fragmentOffset = FRAG(fo);
  value.ttl = u8(b, off + AT_TTL); value.protocol = u8(b, off + AT_PROTO); value.checksum = u16(b, off + AT_CK); value.src = ipv4At(b, off + AT_SRC); value.dst = ipv4At(b, off + AT_DST);
  value.options = NO_OPTIONS; value.headerLength = ihl * 4; value.checksumStatus = 'unverified';
  if (n < IPV4_MIN_LEN) {
    if (wireLength > n && wireLength >= IPV4_MIN_LEN) {
      issue(issues, 'note', 'ipv4.snaplen', `IPv4 header cut by the capture: ${n} of ${IPV4_MIN_LEN}+ bytes captured`, 0, n);
    } else {
      issue(issues, 'error', 'ipv4.truncated', `truncated IPv4 header: need ${IPV4_MIN_LEN} bytes, have ${n}`, 0, n);
    }
  }
  if (value.version !== 4 && n > 0) issue(issues, 'error', 'ipv4.version', `IP version ${value.version} in an IPv4 header`, F.version.at, F.version.size);
  const hl = ihl * 4;
  if (hl < IPV4_MIN_LEN && n > 0) issue(issues, 'error', 'ipv4.ihl', `header length ${hl} < ${IPV4_MIN_LEN} (IHL ${ihl})`, F.ihl.at, F.ihl.size);
  else if (hl > n && n >= IPV4_MIN_LEN) {
    if (wireLength >= hl) issue(issues, 'note', 'ipv4.snaplen', `IPv4 options cut by the capture: ${n} of ${hl} header bytes captured`, IPV4_MIN_LEN, n - IPV4_MIN_LEN);
    else issue(issues, 'error', 'ipv4.truncated', `truncated IPv4 options: header length ${hl}, have ${n}`, IPV4_MIN_LEN, n - IPV4_MIN_LEN);
  }

  // checksum over the full header when it is all here
  if (hl >= IPV4_MIN_LEN && hl <= n) {
    if (ipv4ChecksumOk(b, off, hl)) value.checksumStatus = 'ok';
    else {
      const expected = finish(ipv4HeaderSum(b, off, hl) - value.checksum);
      if (value.checksum === 0) {
        value.checksumStatus = 'zero';
        issue(issues, 'note', 'ipv4.checksum-zero', `header checksum 0 (expected ${hexN(expected, 4)}): checksum offload on the capturing sender?`, F.checksum.at, F.checksum.size);
      } else {
        value.checksumStatus = 'bad';
        issue(issues, 'error', 'ipv4.checksum', `bad header checksum ${hexN(value.checksum, 4)}, expected ${hexN(expected, 4)}`, F.checksum.at, F.checksum.size);
      }
    }
  }

  if (n >= END_LEN) {
    const tl = value.totalLength;
    if (hl >= IPV4_MIN_LEN && tl < hl) {
      issue(issues, 'error', 'ipv4.length', `total length ${tl} < header length ${hl}`, F.totalLength.at, F.totalLength.size);
    } else if (tl > wireLength) {
      issue(issues, 'error', 'ipv4.length', `total length ${tl} exceeds the ${wireLength} bytes on the wire`, F.totalLength.at, F.totalLength.size);
    } else if (tl > n) {
      issue(issues, 'note', 'ipv4.snaplen', `packet cut by the capture: ${n} of ${tl} bytes captured`, 0, n);
    } else if (tl < n && tl >= 46) {
      issue(issues, 'note', 'ipv4.trailer', `${n - tl} bytes after the IPv4 packet (total length ${tl})`, tl, n - tl);
    }
  }
  if (n >= END_FRAG) {
    if (value.reservedFlag) issue(issues, 'warn', 'ipv4.reserved-flag', 'reserved flag bit set', F.flags.at, F.flags.size);
    if (value.dontFragment && (value.moreFragments || value.fragmentOffset !== 0)) issue(issues, 'warn', 'ipv4.frag-df', 'fragment with DF set', F.flagsFragment.at, F.flagsFragment.size);
    else if (value.moreFragments || value.fragmentOffset !== 0) {
      issue(issues, 'note', 'ipv4.fragment', `fragment offset ${value.fragmentOffset * 8}${value.moreFragments ? ' MF' : ''}`, F.flagsFragment.at, F.flagsFragment.size);
    }
  }
  if (n > AT_TTL && value.ttl === 0) issue(issues, 'warn', 'ipv4.ttl', 'TTL 0', F.ttl.at, F.ttl.size);

  if (t) treeIpv4(t, value);
  if (hl > IPV4_MIN_LEN && n > IPV4_MIN_LEN) {
    const ob = b.subarray(off + IPV4_MIN_LEN, off + Math.min(hl, n));
    value.options = decodeIpv4Options(ob, issues, IPV4_MIN_LEN, t ? t.sub('Options', IPV4_MIN_LEN, ob.length, `${hl - IPV4_MIN_LEN} bytes`) : undefined, hl > n && wireLength >= hl);
  }
}


/** The ones' complement sum of the IPv4 header b[off, off + hl), not folded. */
function ipv4HeaderSum(b: Uint8Array, off: number, hl: number): number {
  let acc = 0;
  for (let i = off; i < off + hl; i += 2) acc += (b[i]! << 8) | b[i + 1]!;
  return acc;
}

/** The header checksum rule: the header b[off, off + hl) (all captured) sums to 0xffff. The
 *  decoder's verdict 'ok' and header prediction's (dissectors/predict.ts) are this one test. */
export function ipv4ChecksumOk(b: Uint8Array, off: number, hl: number): boolean {
  return fold(ipv4HeaderSum(b, off, hl)) === 0xffff;
}

/** The `-V` nodes of the fixed header (a function of its own: decodeIpv4At stays small enough to
 *  inline into the frame decoder). */
function treeIpv4(t: Tree, value: Ipv4Header): void {
  const hl = value.headerLength, ihl = value.ihl;
  addField(t, F.version, value.version);
  addField(t, F.ihl, `${hl} bytes (${ihl})`);
  addField(t, F.tos, `DSCP ${value.dscp}, ECN ${ECN_NAMES[value.ecn]}`);
  addField(t, F.totalLength, value.totalLength);
  addField(t, F.id, `${hexN(value.id, 4)} (${value.id})`);
  addField(t, F.flags, flagText(value) || 'none');
  addField(t, F.fragmentOffset, `${value.fragmentOffset * 8}`);
  addField(t, F.ttl, value.ttl);
  addField(t, F.protocol, `${ipProtoName(value.protocol)} (${value.protocol})`);
  addField(t, F.checksum, `${hexN(value.checksum, 4)} [${value.checksumStatus}]`);
  addField(t, F.src, value.src);
  addField(t, F.dst, value.dst);
}

function flagText(v: Ipv4Header, sep = '+'): string {
  let s = '';
  if (v.reservedFlag) s += 'RF';
  if (v.dontFragment) s += (s ? sep : '') + 'DF';
  if (v.moreFragments) s += (s ? sep : '') + 'MF';
  return s;
}

/** Serialised option area, padded with zeros to a multiple of 4. */
function encodeIpv4Options(opts: readonly Ipv4Option[]): Uint8Array {
  let n = 0;
  for (const o of opts) n += o.type === 0 || o.type === 1 ? 1 + (o.pad ? o.pad.length : 0) : 2 + o.data.length;
  const out = new Uint8Array((n + 3) & ~3);
  let p = 0;
  for (const o of opts) {
    out[p++] = o.type;
    if (o.type === 0) { if (o.pad) { out.set(o.pad, p); p += o.pad.length; } continue; }
    if (o.type === 1) continue;
    out[p++] = o.length;
    out.set(o.data, p);
    p += o.data.length;
  }
  return out;
}

/** One option value from type + data (name, length and decoded fields filled in). */
export function ipv4Option(type: number, data: Uint8Array = EMPTY): Ipv4Option {
  const raw = type === 0 || type === 1 ? Uint8Array.of(type) : Uint8Array.of(type, data.length + 2, ...data);
  const list = decodeIpv4Options(raw, []);
  return list[0]!;
}

export interface Ipv4EncodeOptions {
  /** Compute the header checksum instead of writing `v.checksum`. */
  checksum?: boolean;
}

/**
 * Header (+ payload). Header length = max(ihl*4, 20 + padded options); IHL written accordingly.
 * `totalLength` is written as given (see `ipv4Header` to compute it); checksum as given unless asked.
 */
export function encodeIpv4(v: Ipv4Header, payload?: Uint8Array, o?: Ipv4EncodeOptions): Uint8Array {
  const ob = v.options.length ? encodeIpv4Options(v.options) : EMPTY;
  const hl = Math.max(IPV4_MIN_LEN + ob.length, Math.min(60, (v.ihl & 0xf) * 4));
  const out = new Uint8Array(hl + (payload ? payload.length : 0));
  const w = view.reset(out);
  w.version = v.version;
  w.ihl = hl >>> 2;
  w.dscp = v.dscp;
  w.ecn = v.ecn;
  w.totalLength = v.totalLength;
  w.id = v.id;
  w.reservedFlag = v.reservedFlag;
  w.dontFragment = v.dontFragment;
  w.moreFragments = v.moreFragments;
  w.fragmentOffset = v.fragmentOffset;
  w.ttl = v.ttl;
  w.protocol = v.protocol;
  out.set(parseIpv4(v.src), F.src.at);
  out.set(parseIpv4(v.dst), F.dst.at);
  out.set(ob, IPV4_MIN_LEN);
  w.checksum = o?.checksum ? finish(sumWords(out, 0, hl)) : v.checksum;
  if (payload) out.set(payload, hl);
  return out;
}

export interface Ipv4Init {
  src: string;
  dst: string;
  protocol: number;
  /** Bytes after the IPv4 header (total length = header + this). */
  payloadLength: number;
  ttl?: number;
  id?: number;
  /** Default true (Linux sets DF on TCP and on RoCEv2). */
  df?: boolean;
  dscp?: number;
  ecn?: number;
  options?: Ipv4Option[];
}

/** Complete value from the essentials: IHL, total length and a correct checksum filled in. */
export function ipv4Header(init: Ipv4Init): Ipv4Header {
  const opts = init.options && init.options.length ? init.options : NO_OPTIONS;
  const olen = opts.length ? encodeIpv4Options(opts).length : 0;
  const v: Ipv4Header = {
    version: 4, ihl: 5 + (olen >>> 2), dscp: init.dscp ?? 0, ecn: init.ecn ?? 0,
    totalLength: IPV4_MIN_LEN + olen + init.payloadLength, id: init.id ?? 0, reservedFlag: false, dontFragment: init.df ?? true, moreFragments: false,
    fragmentOffset: 0, ttl: init.ttl ?? 64, protocol: init.protocol, checksum: 0, src: init.src, dst: init.dst,
    options: opts, headerLength: IPV4_MIN_LEN + olen, checksumStatus: 'ok',
  };
  v.checksum = view.reset(encodeIpv4(v, undefined, { checksum: true })).checksum;
  return v;
}

function optSummary(o: Ipv4Option): string {
  switch (o.type) {
    case 0: return 'EOL';
    case 1: return 'NOP';
    case 7: case 131: case 137: return `${o.name} ${o.route?.join(' ') ?? ''}`.trimEnd();
    case 68: return `TS{${o.timestamps?.map((x) => (x.addr ? x.addr + '@' : '') + x.ts).join(' ') ?? ''}}`;
    case 148: return `RA value ${o.routerAlert}`;
    default: return `${o.name} len ${o.length}`;
  }
}

/**
 * tcpdump -v style: `10.55.0.1 > 10.55.0.2: tos 0x0, ttl 64, id 20817, offset 0, flags [DF], proto TCP (6), length 68`
 * (plus `, options (…)` and `, bad cksum …!` when relevant).
 */
export function summarizeIpv4(v: Ipv4Header): string {
  let s = `${v.src} > ${v.dst}: tos 0x${((v.dscp << 2) | v.ecn).toString(16)}`;
  if (v.ecn) s += ` (${ECN_NAMES[v.ecn]})`;
  s += `, ttl ${v.ttl}, id ${v.id}, offset ${v.fragmentOffset * 8}, flags [${flagText(v, ',') || 'none'}], proto ${ipProtoName(v.protocol)} (${v.protocol}), length ${v.totalLength}`;
  if (v.options.length) s += `, options (${v.options.map(optSummary).join(',')})`;
  if (v.checksumStatus === 'bad') s += `, bad cksum ${v.checksum.toString(16)}!`;
  return s;
}
