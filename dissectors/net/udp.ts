// UDP header (RFC 768). Layout: UDP_FIELDS (../wire/views/net.ts), the one declaration.
//
// `wireLength` (3rd argument, default b.length) = bytes of this datagram on the wire (pass the
// IP payload length bounded by the frame's original length); a length field beyond it is an
// error (`udp.length`), a datagram merely cut by the capture snaplen a note (`udp.snaplen`),
// bytes after the datagram inside the IP payload a warning. The checksum is not verified here
// (RoCEv2 sends 0; offload leaves partial sums): see `tcpUdpChecksum`. Never throws.

import type { Decoded, Issue, Tree } from '../wire/common.js';
import { issue } from '../wire/common.js';
import { addField } from '../wire/views/field.js';
import { UdpView, UDP_FIELDS as F, UDP_LEN } from '../wire/views/net.js';
import { transportChecksum } from './checksum.js';

/** Offsets: ../wire/views/net.ts (UDP_FIELDS); decode and encode go through this view. */
const view = new UdpView();
// per-frame bounds from the table, once (constants, not property loads per frame)
const END_LENGTH = F.length.at + F.length.size, END_DSTPORT = F.dstPort.at + F.dstPort.size;

export interface UdpHeader {
  srcPort: number;
  dstPort: number;
  /** Length field: header + data. */
  length: number;
  checksum: number;
}

export function decodeUdp(b: Uint8Array, t?: Tree, wireLength = b.length): Decoded<UdpHeader> {
  const issues: Issue[] = [];
  const value: UdpHeader = { srcPort: 0, dstPort: 0, length: 0, checksum: 0 };
  decodeUdpAt(value, issues, b, 0, b.length, t, wireLength);
  return { value, issues };
}

/**
 * decodeUdp() of the header at b[off, end) into `value` (every field overwritten), its issues
 * pushed onto `issues` with offsets relative to `off`: the replay path decodes each frame
 * without a view, a result object or an issue array of its own.
 */
export function decodeUdpAt(value: UdpHeader, issues: Issue[], b: Uint8Array, off: number, end: number, t?: Tree, wireLength = end - off): void {
  const v = view.reset(b, off, end);
  const have = v.available;
  value.srcPort = v.srcPort; value.dstPort = v.dstPort; value.length = v.length; value.checksum = v.checksum;
  if (have < UDP_LEN) {
    if (wireLength > have && wireLength >= UDP_LEN) issue(issues, 'note', 'udp.snaplen', `UDP header cut by the capture: ${have} of ${UDP_LEN} bytes captured`, 0, have);
    else issue(issues, 'error', 'udp.truncated', `truncated UDP header: need ${UDP_LEN} bytes, have ${have}`, 0, have);
  }
  if (have >= END_LENGTH) {
    const len = value.length;
    if (len < UDP_LEN) {
      // 0 is legal only for IPv6 jumbograms (RFC 2675)
      issue(issues, len === 0 ? 'warn' : 'error', 'udp.length', `length ${len} < ${UDP_LEN}${len === 0 ? ' (jumbogram?)' : ''}`, F.length.at, F.length.size);
    } else if (len > wireLength) {
      issue(issues, 'error', 'udp.length', `length ${len} exceeds the ${wireLength} bytes on the wire`, F.length.at, F.length.size);
    } else if (len > have) {
      issue(issues, 'note', 'udp.snaplen', `datagram cut by the capture: ${have} of ${len} bytes captured`, 0, have);
    } else if (len < wireLength) {
      issue(issues, 'warn', 'udp.length', `length ${len} < ${wireLength} bytes of IP payload (${wireLength - len} bytes after the datagram)`, F.length.at, F.length.size);
    }
  }
  if (have >= END_DSTPORT && value.dstPort === 0) issue(issues, 'warn', 'udp.port0', 'destination port 0', F.dstPort.at, F.dstPort.size);
  if (t) {
    addField(t, F.srcPort, value.srcPort);
    addField(t, F.dstPort, value.dstPort);
    addField(t, F.length, value.length);
    addField(t, F.checksum, `0x${value.checksum.toString(16).padStart(4, '0')}${value.checksum === 0 ? ' (none)' : ' [unverified]'}`);
  }
}

/**
 * Header (+ payload). Fields are written as given unless `ck` is passed: then the checksum is
 * computed over the pseudo-header (0 result sent as 0xffff). `udpHeader` fills in the length.
 */
export function encodeUdp(v: UdpHeader, payload?: Uint8Array, ck?: { src: Uint8Array | string; dst: Uint8Array | string }): Uint8Array {
  const out = new Uint8Array(UDP_LEN + (payload ? payload.length : 0));
  const w = view.reset(out, 0);
  w.srcPort = v.srcPort & 0xffff;
  w.dstPort = v.dstPort & 0xffff;
  w.length = v.length & 0xffff;
  if (payload) out.set(payload, UDP_LEN);
  w.checksum = (ck ? transportChecksum(ck.src, ck.dst, 17, out) : v.checksum) & 0xffff;
  return out;
}

/** Value with length = 8 + payloadLength and checksum 0 (RoCEv2 style; pass `ck` to encodeUdp to compute one). */
export function udpHeader(init: { srcPort: number; dstPort: number; payloadLength: number; checksum?: number }): UdpHeader {
  return { srcPort: init.srcPort, dstPort: init.dstPort, length: UDP_LEN + init.payloadLength, checksum: init.checksum ?? 0 };
}

/** `UDP, length 44` (payload bytes = length − 8), prefixed `a.p > b.q: ` when addresses are given. */
export function summarizeUdp(v: UdpHeader, c?: { src?: string; dst?: string }): string {
  const pre = c?.src !== undefined && c.dst !== undefined ? `${c.src}.${v.srcPort} > ${c.dst}.${v.dstPort}: ` : '';
  return `${pre}UDP, length ${Math.max(0, v.length - UDP_LEN)}`;
}
