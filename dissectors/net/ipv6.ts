// IPv6 fixed header (RFC 8200) and the extension header chain.
//
//   0 ver(4)|traffic class(8)|flow label(20) · 4 payload length · 6 next header · 7 hop limit
//   8 src (16) · 24 dst (16) · 40 extension headers … upper-layer header
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
import { Tree, hex, hexN, issue, parseIpv6, put16, put32, u16, u32, u8 } from '../wire/common.js';
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
export function isIpv6Extension(nh: number): boolean {
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

export function ipv6OptionName(type: number): string {
  return OPT_NAMES.get(type) ?? `opt-0x${type.toString(16).padStart(2, '0')}`;
}


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
    if (o + 2 > b.length) {
      issue(issues, 'error', 'ipv6.opt-truncated', `option ${name} has no length octet`, base + o, 1);
      list.push({ type, name, data: EMPTY });
      break;
    }
    const len = b[o + 1]!;
    let end = o + 2 + len;
    if (end > b.length) {
      issue(issues, 'error', 'ipv6.opt-truncated', `option ${name} length ${len} runs past its header`, base + o, b.length - o);
      end = b.length;
    }
    const data = b.subarray(o + 2, end);
    if (type === 1) {
      for (let i = 0; i < data.length; i++) {
        if (data[i] !== 0) { issue(issues, 'note', 'ipv6.padn', 'PadN with non-zero contents', base + o + 2, data.length); break; }
      }
    } else if (type === 0xc2) {
      if (len !== 4) issue(issues, 'warn', 'ipv6.jumbo', `Jumbo Payload length ${len}, expected 4`, base + o + 1, 1);
      else jumbo.v = u32(data, 0);
    } else if (type === 5 && len !== 2) {
      issue(issues, 'warn', 'ipv6.opt-length', `Router Alert length ${len}, expected 2`, base + o + 1, 1);
    } else if (!OPT_NAMES.has(type)) {
      issue(issues, 'note', 'ipv6.opt-unknown', `unknown option type ${hexN(type, 2)}`, base + o, end - o);
    }
    list.push({ type, name, data });
    if (t) t.add(name, o, end - o, `type ${hexN(type, 2)} len ${len}${data.length ? ' ' + hex(data) : ''}`);
    o = end;
  }
  return list;
}

export function decodeIpv6(b: Uint8Array, t?: Tree, wireLength = b.length): Decoded<Ipv6Header> {
  const issues: Issue[] = [];
  const w0 = u32(b, 0);
  const value: Ipv6Header = {
    version: w0 >>> 28, trafficClass: (w0 >>> 20) & 0xff, flowLabel: w0 & 0xfffff, payloadLength: u16(b, 4),
    nextHeader: u8(b, 6), hopLimit: u8(b, 7), src: ipv6At(b, 8), dst: ipv6At(b, 24), extensions: NO_EXT,
    upperProtocol: u8(b, 6), upperOffset: 40, fragment: null,
  };
  if (b.length < 40) {
    if (wireLength > b.length && wireLength >= 40) issue(issues, 'note', 'ipv6.snaplen', `IPv6 header cut by the capture: ${b.length} of 40 bytes captured`, 0, b.length);
    else issue(issues, 'error', 'ipv6.truncated', `truncated IPv6 header: need 40 bytes, have ${b.length}`, 0, b.length);
  }
  if (value.version !== 6 && b.length > 0) issue(issues, 'error', 'ipv6.version', `IP version ${value.version} in an IPv6 header`, 0, 1);
  if (t) {
    t.add('Version', 0, 1, value.version);
    t.add('Traffic class', 0, 2, `${hexN(value.trafficClass, 2)} (DSCP ${value.trafficClass >>> 2}, ECN ${value.trafficClass & 3})`);
    t.add('Flow label', 1, 3, hexN(value.flowLabel, 5));
    t.add('Payload length', 4, 2, value.payloadLength);
    t.add('Next header', 6, 1, `${ipProtoName(value.nextHeader)} (${value.nextHeader})`);
    t.add('Hop limit', 7, 1, value.hopLimit);
    t.add('Source', 8, 16, value.src);
    t.add('Destination', 24, 16, value.dst);
  }
  if (b.length < 40) return { value, issues };

  // extension header chain
  let nh = value.nextHeader;
  let o = 40;
  let exts: Ipv6ExtHeader[] | undefined;
  const jumbo = { v: -1 };
  while (isIpv6Extension(nh)) {
    const name = EXT_NAMES.get(nh)!;
    if (nh === 0 && o !== 40) issue(issues, 'warn', 'ipv6.hbh-position', 'Hop-by-Hop Options header not first', o, 1);
    if (o + 8 > b.length) {
      cut(issues, o, b.length, wireLength, name);
      break;
    }
    const e1 = b[o + 1]!;
    const len = nh === 44 ? 8 : nh === 51 ? (e1 + 2) * 4 : (e1 + 1) * 8;
    if (o + len > b.length) {
      cut(issues, o, b.length, wireLength, name);
      break;
    }
    const data = b.subarray(o + 2, o + len);
    const ext: Ipv6ExtHeader = { type: nh, name, nextHeader: b[o]!, hdrExtLen: e1, length: len, data };
    const st = t ? t.sub(name, o, len) : undefined;
    if (st) {
      st.add('Next header', 0, 1, `${ipProtoName(ext.nextHeader)} (${ext.nextHeader})`);
      st.add(nh === 44 ? 'Reserved' : 'Length', 1, 1, nh === 44 ? hexN(e1, 2) : `${e1} (${len} bytes)`);
    }
    let stop = false;
    if (nh === 0 || nh === 60) {
      const ot = st ? new Tree(st.base + 2) : undefined;
      ext.options = decodeOptions(data, o + 2, issues, ot, jumbo);
      if (st && ot) for (const n of ot.nodes) st.nodes.push(n);
    } else if (nh === 43) {
      ext.routingType = data[0]!;
      ext.segmentsLeft = data[1]!;
      const addrs: string[] = [];
      if (ext.routingType === 0 || ext.routingType === 2 || ext.routingType === 4) {
        for (let i = 6; i + 16 <= data.length; i += 16) addrs.push(ipv6At(data, i));
      }
      ext.addresses = addrs;
      if (ext.routingType === 0) issue(issues, 'warn', 'ipv6.rh0', 'Type 0 Routing header (deprecated by RFC 5095)', o + 2, 1);
      if (st) {
        st.add('Routing type', 2, 1, ext.routingType);
        st.add('Segments left', 3, 1, ext.segmentsLeft);
        for (let i = 0; i < addrs.length; i++) st.add('Address', 8 + 16 * i, 16, addrs[i]);
      }
    } else if (nh === 44) {
      const fo = u16(data, 0);
      ext.fragmentOffset = fo >>> 3;
      ext.more = (fo & 1) !== 0;
      ext.id = u32(data, 2);
      if (e1 !== 0 || (fo & 6) !== 0) issue(issues, 'note', 'ipv6.frag-reserved', 'Fragment header reserved bits set', o + 1, 3);
      if (ext.fragmentOffset !== 0 || ext.more) {
        value.fragment = { offset: ext.fragmentOffset, more: ext.more, id: ext.id };
        issue(issues, 'note', 'ipv6.fragment', `fragment offset ${ext.fragmentOffset * 8}${ext.more ? ' M' : ''} id ${hexN(ext.id, 8)}`, o, 8);
      }
      if (st) {
        st.add('Offset', 2, 2, ext.fragmentOffset * 8);
        st.add('More fragments', 3, 1, ext.more ? 'yes' : 'no');
        st.add('Identification', 4, 4, hexN(ext.id, 8));
      }
      if (ext.fragmentOffset !== 0) stop = true;
    } else if (nh === 51) {
      ext.spi = u32(data, 2);
      ext.seq = u32(data, 6);
      if (st) {
        st.add('SPI', 4, 4, hexN(ext.spi, 8));
        st.add('Sequence', 8, 4, ext.seq);
        st.add('ICV', 12, len - 12, hex(data, 10));
      }
    }
    (exts ??= []).push(ext);
    o += len;
    nh = ext.nextHeader;
    if (stop) break;
  }
  if (exts) value.extensions = exts;
  value.upperProtocol = nh;
  value.upperOffset = o;

  const pl = value.payloadLength;
  if (pl === 0 && jumbo.v >= 0) {
    if (jumbo.v + 40 > wireLength) issue(issues, 'error', 'ipv6.length', `jumbo payload length ${jumbo.v} exceeds the ${wireLength - 40} bytes on the wire`, 4, 2);
  } else if (40 + pl > wireLength) {
    issue(issues, 'error', 'ipv6.length', `payload length ${pl} exceeds the ${wireLength - 40} bytes on the wire`, 4, 2);
  } else if (40 + pl > b.length) {
    issue(issues, 'note', 'ipv6.snaplen', `packet cut by the capture: ${b.length} of ${40 + pl} bytes captured`, 0, b.length);
  } else {
    if (o > 40 + pl) issue(issues, 'error', 'ipv6.length', `extension headers (${o - 40} bytes) exceed payload length ${pl}`, 4, 2);
    if (40 + pl < b.length && 40 + pl >= 46) issue(issues, 'note', 'ipv6.trailer', `${b.length - 40 - pl} bytes after the IPv6 packet`, 40 + pl, b.length - 40 - pl);
  }
  if (nh === 59 && o < Math.min(b.length, 40 + pl)) {
    issue(issues, 'note', 'ipv6.nonext-data', `${Math.min(b.length, 40 + pl) - o} bytes after No Next Header`, o, Math.min(b.length, 40 + pl) - o);
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
  let hl = 40;
  for (const e of v.extensions) hl += 2 + e.data.length;
  const out = new Uint8Array(hl + (payload ? payload.length : 0));
  put32(out, 0, (((v.version & 0xf) << 28) | ((v.trafficClass & 0xff) << 20) | (v.flowLabel & 0xfffff)) >>> 0);
  put16(out, 4, v.payloadLength);
  out[6] = v.nextHeader & 0xff;
  out[7] = v.hopLimit & 0xff;
  out.set(parseIpv6(v.src), 8);
  out.set(parseIpv6(v.dst), 24);
  let o = 40;
  for (const e of v.extensions) {
    out[o] = e.nextHeader & 0xff;
    out[o + 1] = e.hdrExtLen & 0xff;
    out.set(e.data, o + 2);
    o += 2 + e.data.length;
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
  const d = new Uint8Array(6);
  put16(d, 0, ((offset & 0x1fff) << 3) | (more ? 1 : 0));
  put32(d, 2, id >>> 0);
  return d;
}

/** Routing header body (type, segments left, 4 reserved/type-specific bytes, addresses). */
export function ipv6RoutingBody(routingType: number, segmentsLeft: number, addresses: readonly string[], word = 0): Uint8Array {
  const d = new Uint8Array(6 + 16 * addresses.length);
  d[0] = routingType; d[1] = segmentsLeft;
  put32(d, 2, word >>> 0);
  for (let i = 0; i < addresses.length; i++) d.set(parseIpv6(addresses[i]!), 6 + 16 * i);
  return d;
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
    upperOffset: 40 + extLen, fragment: null,
  };
  const bytes = encodeIpv6(skeleton);
  // copy the extension bodies so the value does not alias the temporary buffer
  return decodeIpv6(bytes.slice(), undefined, 40 + skeleton.payloadLength).value;
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
