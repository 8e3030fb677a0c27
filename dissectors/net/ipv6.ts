// IPv6 fixed header (RFC 8200) and the extension header chain.
//
// Layout: IPV6_FIELDS and IPV6_EXT_FIELDS (../wire/views/net.ts), the one declaration.
//
// Extension headers walked: Hop-by-Hop (0), Routing (43), Fragment (44), Destination Options
// (60), AH (51, length in 4-byte units), Mobility (135), HIP (139), Shim6 (140). The walk stops
// at ESP (50: the rest is encrypted), No Next Header (59), a non-first fragment (the upper-layer
// header is in the first fragment), a truncated header, or any other protocol number, which is
// then the upper-layer protocol: `upperProtocol` + `upperOffset` tell the pipeline where to go on.
//
// Lengths: as for IPv4, `wireLength` (3rd argument, default b.length) = bytes of this packet on
// the wire; a payload length beyond it is an error (`ipv6.length`), one merely cut by the
// capture snaplen is a note (`ipv6.snaplen`). Payload length 0 with a Jumbo option is a
// jumbogram (RFC 2675): the packet then extends to the end of the buffer.

import type { Decoded, Issue } from '../wire/common.js';
import { Tree, hex, hexN, issue, parseIpv6 } from '../wire/common.js';
import { addField } from '../wire/views/field.js';
import { IP_OPTION_FIELDS as O, IPV6_EXT_FIELDS as X, IPV6_FIELDS as F, IPV6_EXT_MIN_LEN, IPV6_LEN, IpOptionView, Ipv6ExtView, Ipv6View } from '../wire/views/net.js';
import { ipv6At } from './addr.js';
import { ipProtoName } from './ipv4.js';

export interface Ipv6Option {
  /** Option type (action bits 0xc0, change bit 0x20). Pad1 (0) has no length/data. */
  type: number;
  name: string;
  data: Uint8Array;
}

export interface Ipv6ExtHeader {
  /** Protocol number of this extension header (0, 43, 44, 60, 51, 135, 139, 140). */
  type: number;
  name: string;
  nextHeader: number;
  /** Second octet as on the wire: Hdr Ext Len (8-byte units beyond the first 8; AH: 4-byte units − 2),
   *  or the reserved octet of a Fragment header. */
  hdrExtLen: number;
  /** Total length of this header in bytes. */
  length: number;
  /** Bytes after the first two (authoritative for encoding). */
  data: Uint8Array;
  /** Hop-by-Hop / Destination Options: the TLV options. */
  options?: Ipv6Option[];
  /** Routing: type, segments left and the addresses (types 0, 2 and 4 = SRH). */
  routingType?: number;
  segmentsLeft?: number;
  addresses?: string[];
  /** Fragment: offset in 8-byte units, M flag, identification. */
  fragmentOffset?: number;
  more?: boolean;
  id?: number;
  /** AH: SPI and sequence number. */
  spi?: number;
  seq?: number;
}

export interface Ipv6Header {
  version: number;
  trafficClass: number;
  flowLabel: number;
  payloadLength: number;
  /** Next header of the fixed header (first extension header or upper-layer protocol). */
  nextHeader: number;
  hopLimit: number;
  src: string;
  dst: string;
  /** Shared frozen empty array when there are none (do not push). */
  extensions: readonly Ipv6ExtHeader[];
  /** Final next header: upper-layer protocol (or 50 ESP / 59 none / where the walk stopped). */
  upperProtocol: number;
  /** Offset of that header in the buffer (= 40 + extension headers walked). */
  upperOffset: number;
  /** Set when the packet is a fragment (Fragment header with offset ≠ 0 or M = 1); null otherwise,
   *  including atomic fragments (RFC 6946: offset 0, M 0), which are whole packets. Only the first
   *  fragment (offset 0) carries the upper-layer header, and only part of its payload. */
  fragment: Ipv6Fragment | null;
}

export interface Ipv6Fragment {
  /** Offset in 8-byte units. */
  offset: number;
  more: boolean;
  id: number;
}

const NO_EXT: readonly Ipv6ExtHeader[] = Object.freeze([]);
const EMPTY = new Uint8Array(0);

const EXT_NAMES: ReadonlyMap<number, string> = new Map([
  [0, 'Hop-by-Hop Options'], [43, 'Routing'], [44, 'Fragment'], [60, 'Destination Options'],
  [51, 'Authentication Header'], [135, 'Mobility'], [139, 'HIP'], [140, 'Shim6'],
]);

/** True for the extension headers this walker steps over. */
function isIpv6Extension(nh: number): boolean {
  return nh === 0 || nh === 43 || nh === 44 || nh === 60 || nh === 51 || nh === 135 || nh === 139 || nh === 140;
}

const OPT_NAMES: ReadonlyMap<number, string> = new Map([
  [0x00, 'Pad1'], [0x01, 'PadN'], [0x04, 'Tunnel Encapsulation Limit'], [0x05, 'Router Alert'],
  [0x07, 'CALIPSO'], [0x08, 'SMF_DPD'], [0x0f, 'PDM'], [0x26, 'Quick-Start'], [0x31, 'IOAM'],
  [0x63, 'RPL'], [0x6d, 'MPL'], [0x8b, 'ILNP Nonce'], [0x8c, 'Line-Identification'],
  [0xc2, 'Jumbo Payload'], [0xc9, 'Home Address'], [0x1e, 'Experimental'], [0x3e, 'Experimental'],
  [0x5e, 'Experimental'], [0x7e, 'Experimental'], [0x9e, 'Experimental'], [0xbe, 'Experimental'],
  [0xde, 'Experimental'], [0xfe, 'Experimental'],
]);

function ipv6OptionName(type: number): string {
  return OPT_NAMES.get(type) ?? `opt-0x${type.toString(16).padStart(2, '0')}`;
}


/** An option's fields (IP_OPTION_FIELDS), read no further than the option's end. */
const optView = new IpOptionView();

/** TLV options of a Hop-by-Hop / Destination Options header (`b` = bytes after the first two). */
function decodeOptions(b: Uint8Array, base: number, issues: Issue[], t: Tree | undefined, jumbo: { v: number }): Ipv6Option[] {
  const list: Ipv6Option[] = [];
  let o = 0;
  while (o < b.length) {
    const type = b[o]!;
    if (type === 0) {
      list.push({ type, name: 'Pad1', data: EMPTY });
      t?.add('Pad1', o, 1);
      o++;
      continue;
    }
    const name = ipv6OptionName(type);
    if (o + O.data.at > b.length) {
      issue(issues, 'error', 'ipv6.opt-truncated', `option ${name} has no length octet`, base + o, 1);
      list.push({ type, name, data: EMPTY });
      break;
    }
    const len = b[o + O.length.at]!;
    let end = o + O.data.at + len;
    if (end > b.length) {
      issue(issues, 'error', 'ipv6.opt-truncated', `option ${name} length ${len} runs past its header`, base + o, b.length - o);
      end = b.length;
    }
    const data = b.subarray(o + O.data.at, end);
    if (type === 1) {
      for (let i = 0; i < data.length; i++) {
        if (data[i] !== 0) { issue(issues, 'note', 'ipv6.padn', 'PadN with non-zero contents', base + o + O.data.at, data.length); break; }
      }
    } else if (type === 0xc2) {
      if (len !== 4) issue(issues, 'warn', 'ipv6.jumbo', `Jumbo Payload length ${len}, expected 4`, base + o + O.length.at, O.length.size);
      else jumbo.v = optView.reset(b, o, end).jumboLength;
    } else if (type === 5 && len !== 2) {
      issue(issues, 'warn', 'ipv6.opt-length', `Router Alert length ${len}, expected 2`, base + o + O.length.at, O.length.size);
    } else if (!OPT_NAMES.has(type)) {
      issue(issues, 'note', 'ipv6.opt-unknown', `unknown option type ${hexN(type, 2)}`, base + o, end - o);
    }
    list.push({ type, name, data });
    if (t) t.add(name, o, end - o, `type ${hexN(type, 2)} len ${len}${data.length ? ' ' + hex(data) : ''}`);
    o = end;
  }
  return list;
}

/** Offsets: ../wire/views/net.ts (IPV6_FIELDS, IPV6_EXT_FIELDS); decode and encode go through these views. */
const view = new Ipv6View();
const ext = new Ipv6ExtView();

export function decodeIpv6(b: Uint8Array, t?: Tree, wireLength = b.length): Decoded<Ipv6Header> {
  const issues: Issue[] = [];
  const v = view.reset(b);
  const value: Ipv6Header = {
    version: v.version, trafficClass: v.trafficClass, flowLabel: v.flowLabel, payloadLength: v.payloadLength,
    nextHeader: v.nextHeader, hopLimit: v.hopLimit, src: ipv6At(b, F.src.at), dst: ipv6At(b, F.dst.at), extensions: NO_EXT,
    upperProtocol: v.nextHeader, upperOffset: IPV6_LEN, fragment: null,
  };
  if (b.length < IPV6_LEN) {
    if (wireLength > b.length && wireLength >= IPV6_LEN) issue(issues, 'note', 'ipv6.snaplen', `IPv6 header cut by the capture: ${b.length} of ${IPV6_LEN} bytes captured`, 0, b.length);
    else issue(issues, 'error', 'ipv6.truncated', `truncated IPv6 header: need ${IPV6_LEN} bytes, have ${b.length}`, 0, b.length);
  }
  if (value.version !== 6 && b.length > 0) issue(issues, 'error', 'ipv6.version', `IP version ${value.version} in an IPv6 header`, F.version.at, F.version.size);
  if (t) {
    addField(t, F.version, value.version);
    addField(t, F.trafficClass, `${hexN(value.trafficClass, 2)} (DSCP ${value.trafficClass >>> 2}, ECN ${value.trafficClass & 3})`);
    addField(t, F.flowLabel, hexN(value.flowLabel, 5));
    addField(t, F.payloadLength, value.payloadLength);
    addField(t, F.nextHeader, `${ipProtoName(value.nextHeader)} (${value.nextHeader})`);
    addField(t, F.hopLimit, value.hopLimit);
    addField(t, F.src, value.src);
    addField(t, F.dst, value.dst);
  }
  if (b.length < IPV6_LEN) return { value, issues };

  // extension header chain
  let nh = value.nextHeader;
  let o = IPV6_LEN;
  let exts: Ipv6ExtHeader[] | undefined;
  const jumbo = { v: -1 };
  while (isIpv6Extension(nh)) {
    const name = EXT_NAMES.get(nh)!;
    if (nh === 0 && o !== IPV6_LEN) issue(issues, 'warn', 'ipv6.hbh-position', 'Hop-by-Hop Options header not first', o, 1);
    if (o + IPV6_EXT_MIN_LEN > b.length) {
      cut(issues, o, b.length, wireLength, name);
      break;
    }
    const x = ext.reset(b, o);
    const e1 = x.hdrExtLen;
    const len = nh === 44 ? IPV6_EXT_MIN_LEN : nh === 51 ? (e1 + 2) * 4 : (e1 + 1) * 8;
    if (o + len > b.length) {
      cut(issues, o, b.length, wireLength, name);
      break;
    }
    x.reset(b, o, o + len);
    const data = b.subarray(o + X.options.at, o + len);
    const eh: Ipv6ExtHeader = { type: nh, name, nextHeader: x.nextHeader, hdrExtLen: e1, length: len, data };
    const st = t ? t.sub(name, o, len) : undefined;
    if (st) {
      addField(st, X.nextHeader, `${ipProtoName(eh.nextHeader)} (${eh.nextHeader})`);
      addField(st, X.hdrExtLen, nh === 44 ? hexN(e1, 2) : `${e1} (${len} bytes)`, 0, nh === 44 ? 'Reserved' : X.hdrExtLen.label);
    }
    let stop = false;
    if (nh === 0 || nh === 60) {
      const ot = st ? new Tree(st.base + X.options.at) : undefined;
      eh.options = decodeOptions(data, o + X.options.at, issues, ot, jumbo);
      if (st && ot) for (const n of ot.nodes) st.nodes.push(n);
    } else if (nh === 43) {
      eh.routingType = x.routingType;
      eh.segmentsLeft = x.segmentsLeft;
      const addrs: string[] = [];
      if (eh.routingType === 0 || eh.routingType === 2 || eh.routingType === 4) {
        for (let i = o + X.routeAddress.at; i + X.routeAddress.len <= o + len; i += X.routeAddress.len) addrs.push(ipv6At(b, i));
      }
      eh.addresses = addrs;
      if (eh.routingType === 0) issue(issues, 'warn', 'ipv6.rh0', 'Type 0 Routing header (deprecated by RFC 5095)', o + X.routingType.at, X.routingType.size);
      if (st) {
        addField(st, X.routingType, eh.routingType);
        addField(st, X.segmentsLeft, eh.segmentsLeft);
        for (let i = 0; i < addrs.length; i++) addField(st, X.routeAddress, addrs[i]!, X.routeAddress.len * i);
      }
    } else if (nh === 44) {
      eh.fragmentOffset = x.fragOffset;
      eh.more = x.fragMore;
      eh.id = x.fragId;
      if (e1 !== 0 || x.fragReserved !== 0) issue(issues, 'note', 'ipv6.frag-reserved', 'Fragment header reserved bits set', o + X.hdrExtLen.at, X.fragOffset.at + X.fragOffset.size - X.hdrExtLen.at);
      if (eh.fragmentOffset !== 0 || eh.more) {
        value.fragment = { offset: eh.fragmentOffset, more: eh.more, id: eh.id };
        issue(issues, 'note', 'ipv6.fragment', `fragment offset ${eh.fragmentOffset * 8}${eh.more ? ' M' : ''} id ${hexN(eh.id, 8)}`, o, IPV6_EXT_MIN_LEN);
      }
      if (st) {
        addField(st, X.fragOffset, eh.fragmentOffset * 8);
        addField(st, X.fragMoreByte, eh.more ? 'yes' : 'no');
        addField(st, X.fragId, hexN(eh.id, 8));
      }
      if (eh.fragmentOffset !== 0) stop = true;
    } else if (nh === 51) {
      eh.spi = x.ahSpi;
      eh.seq = x.ahSeq;
      if (st) {
        addField(st, X.ahSpi, hexN(eh.spi, 8));
        addField(st, X.ahSeq, eh.seq);
        st.add(X.ahIcv.label, X.ahIcv.at, len - X.ahIcv.at, hex(b, o + X.ahIcv.at, len - X.ahIcv.at));
      }
    }
    (exts ??= []).push(eh);
    o += len;
    nh = eh.nextHeader;
    if (stop) break;
  }
  if (exts) value.extensions = exts;
  value.upperProtocol = nh;
  value.upperOffset = o;

  const pl = value.payloadLength;
  if (pl === 0 && jumbo.v >= 0) {
    if (jumbo.v + IPV6_LEN > wireLength) issue(issues, 'error', 'ipv6.length', `jumbo payload length ${jumbo.v} exceeds the ${wireLength - IPV6_LEN} bytes on the wire`, 4, 2);
  } else if (IPV6_LEN + pl > wireLength) {
    issue(issues, 'error', 'ipv6.length', `payload length ${pl} exceeds the ${wireLength - IPV6_LEN} bytes on the wire`, 4, 2);
  } else if (IPV6_LEN + pl > b.length) {
    issue(issues, 'note', 'ipv6.snaplen', `packet cut by the capture: ${b.length} of ${IPV6_LEN + pl} bytes captured`, 0, b.length);
  } else {
    if (o > IPV6_LEN + pl) issue(issues, 'error', 'ipv6.length', `extension headers (${o - IPV6_LEN} bytes) exceed payload length ${pl}`, 4, 2);
    if (IPV6_LEN + pl < b.length && IPV6_LEN + pl >= 46) issue(issues, 'note', 'ipv6.trailer', `${b.length - IPV6_LEN - pl} bytes after the IPv6 packet`, IPV6_LEN + pl, b.length - IPV6_LEN - pl);
  }
  if (nh === 59 && o < Math.min(b.length, IPV6_LEN + pl)) {
    issue(issues, 'note', 'ipv6.nonext-data', `${Math.min(b.length, IPV6_LEN + pl) - o} bytes after No Next Header`, o, Math.min(b.length, IPV6_LEN + pl) - o);
  }
  return { value, issues };
}

/**
 * Destination address for the TCP/UDP pseudo-header (RFC 8200 §8.1): the final destination when a
 * Routing header with segments left is present (type 0: last address; type 2: the home address;
 * type 4 SRH: Segment List[0]), otherwise `dst`.
 */
export function ipv6PseudoDestination(v: Ipv6Header): string {
  for (const e of v.extensions) {
    if (e.type !== 43 || !e.segmentsLeft || !e.addresses || e.addresses.length === 0) continue;
    if (e.routingType === 4) return e.addresses[0]!;
    if (e.routingType === 0 || e.routingType === 2) return e.addresses[e.addresses.length - 1]!;
  }
  return v.dst;
}

function cut(issues: Issue[], o: number, have: number, wire: number, name: string): void {
  if (wire > have) issue(issues, 'note', 'ipv6.snaplen', `${name} header cut by the capture`, o, have - o);
  else issue(issues, 'error', 'ipv6.ext-truncated', `truncated ${name} header at ${o}`, o, have - o);
}

/** Header + extension headers (+ payload). Every field is written as given. */
export function encodeIpv6(v: Ipv6Header, payload?: Uint8Array): Uint8Array {
  let hl = IPV6_LEN;
  for (const e of v.extensions) hl += X.options.at + e.data.length;
  const out = new Uint8Array(hl + (payload ? payload.length : 0));
  const w = view.reset(out);
  w.version = v.version;
  w.trafficClass = v.trafficClass;
  w.flowLabel = v.flowLabel;
  w.payloadLength = v.payloadLength;
  w.nextHeader = v.nextHeader;
  w.hopLimit = v.hopLimit;
  out.set(parseIpv6(v.src), F.src.at);
  out.set(parseIpv6(v.dst), F.dst.at);
  let o = IPV6_LEN;
  for (const e of v.extensions) {
    const x = ext.reset(out, o);
    x.nextHeader = e.nextHeader;
    x.hdrExtLen = e.hdrExtLen;
    out.set(e.data, o + X.options.at);
    o += X.options.at + e.data.length;
  }
  if (payload) out.set(payload, hl);
  return out;
}

/** TLV option area for Hop-by-Hop / Destination Options, padded (Pad1/PadN) to 8n − 2 bytes. */
export function ipv6OptionsBody(opts: readonly { type: number; data?: Uint8Array }[]): Uint8Array {
  const parts: number[] = [];
  for (const op of opts) {
    parts.push(op.type);
    if (op.type !== 0) { parts.push(op.data?.length ?? 0); if (op.data) parts.push(...op.data); }
  }
  const pad = (8 - ((parts.length + 2) % 8)) % 8;
  if (pad === 1) parts.push(0);
  else if (pad > 1) { parts.push(1, pad - 2); for (let i = 0; i < pad - 2; i++) parts.push(0); }
  return Uint8Array.from(parts);
}

/** Extension header skeleton from its body (bytes after the first two); length octet computed. */
export interface Ipv6ExtInit { type: number; body: Uint8Array }

/** Fragment header body: offset (8-byte units), M flag, identification. */
export function ipv6FragmentBody(offset: number, more: boolean, id: number): Uint8Array {
  const h = new Uint8Array(IPV6_EXT_MIN_LEN);
  const x = ext.reset(h);
  x.fragOffset = offset;
  x.fragMore = more;
  x.fragId = id >>> 0;
  return h.slice(X.options.at);
}

/** Routing header body (type, segments left, 4 reserved/type-specific bytes, addresses). */
export function ipv6RoutingBody(routingType: number, segmentsLeft: number, addresses: readonly string[], word = 0): Uint8Array {
  const h = new Uint8Array(X.routeAddress.at + X.routeAddress.len * addresses.length);
  const x = ext.reset(h);
  x.routingType = routingType;
  x.segmentsLeft = segmentsLeft;
  x.routeWord = word >>> 0;
  for (let i = 0; i < addresses.length; i++) h.set(parseIpv6(addresses[i]!), X.routeAddress.at + X.routeAddress.len * i);
  return h.slice(X.options.at);
}

export interface Ipv6Init {
  src: string;
  dst: string;
  /** Upper-layer protocol. */
  protocol: number;
  /** Bytes after all extension headers. */
  payloadLength: number;
  hopLimit?: number;
  trafficClass?: number;
  flowLabel?: number;
  extensions?: readonly Ipv6ExtInit[];
}

/** Complete value: next-header chain, length octets, payload length and the derived fields filled in. */
export function ipv6Header(init: Ipv6Init): Ipv6Header {
  const list = init.extensions ?? [];
  const exts: Ipv6ExtHeader[] = [];
  let extLen = 0;
  for (let i = 0; i < list.length; i++) {
    const e = list[i]!;
    const len = e.body.length + 2;
    const hdrExtLen = e.type === 44 ? 0 : e.type === 51 ? (len >>> 2) - 2 : (len >>> 3) - 1;
    exts.push({ type: e.type, name: '', nextHeader: list[i + 1]?.type ?? init.protocol, hdrExtLen, length: len, data: e.body });
    extLen += len;
  }
  const skeleton: Ipv6Header = {
    version: 6, trafficClass: init.trafficClass ?? 0, flowLabel: init.flowLabel ?? 0,
    payloadLength: extLen + init.payloadLength, nextHeader: list[0]?.type ?? init.protocol, hopLimit: init.hopLimit ?? 64,
    src: init.src, dst: init.dst, extensions: exts.length ? exts : NO_EXT, upperProtocol: init.protocol,
    upperOffset: IPV6_LEN + extLen, fragment: null,
  };
  const bytes = encodeIpv6(skeleton);
  // copy the extension bodies so the value does not alias the temporary buffer
  return decodeIpv6(bytes.slice(), undefined, IPV6_LEN + skeleton.payloadLength).value;
}

function extSummary(e: Ipv6ExtHeader): string {
  switch (e.type) {
    case 0: return `HBH${e.options?.filter((x) => x.type > 1).map((x) => ' ' + x.name).join('') ?? ''}`;
    case 60: return `DSTOPT${e.options?.filter((x) => x.type > 1).map((x) => ' ' + x.name).join('') ?? ''}`;
    case 43: return `RT type ${e.routingType} segleft ${e.segmentsLeft}`;
    case 44: return `frag (0x${(e.id ?? 0).toString(16).padStart(8, '0')}:${(e.fragmentOffset ?? 0) * 8}${e.more ? '|more' : ''})`;
    case 51: return `AH spi 0x${(e.spi ?? 0).toString(16)} seq ${e.seq}`;
    default: return e.name;
  }
}

/** tcpdump -v flavoured: `fe80::1 > ff02::1: flowlabel 0x12345, hlim 64, [HBH RA, frag …], next-header TCP (6), payload length 40`. */
export function summarizeIpv6(v: Ipv6Header): string {
  let s = `${v.src} > ${v.dst}:`;
  if (v.trafficClass) s += ` class 0x${v.trafficClass.toString(16)},`;
  if (v.flowLabel) s += ` flowlabel 0x${v.flowLabel.toString(16).padStart(5, '0')},`;
  s += ` hlim ${v.hopLimit}`;
  if (v.extensions.length) s += `, [${v.extensions.map(extSummary).join(', ')}]`;
  s += `, next-header ${ipProtoName(v.upperProtocol)} (${v.upperProtocol}), payload length ${v.payloadLength}`;
  return s;
}
