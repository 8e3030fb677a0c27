// UDP header (RFC 768): 0 src port · 2 dst port · 4 length (header + data) · 6 checksum.
//
// `wireLength` (3rd argument, default b.length) = bytes of this datagram on the wire (pass the
// IP payload length bounded by the frame's original length); a length field beyond it is an
// error (`udp.length`), a datagram merely cut by the capture snaplen a note (`udp.snaplen`),
// bytes after the datagram inside the IP payload a warning. The checksum is not verified here
// (RoCEv2 sends 0; offload leaves partial sums): see `tcpUdpChecksum`. Never throws.

import type { Decoded, Issue, Tree } from '../wire/common.js';
import { issue } from '../wire/common.js';
import { UdpView, UDP_FIELDS } from '../wire/views/net.js';
import { transportChecksum } from './checksum.js';

export { tcpUdpChecksum, pseudoHeaderSum, transportChecksum, type TransportChecksum, type TransportChecksumStatus } from './checksum.js';

/** Offsets: ../wire/views/net.ts (UDP_FIELDS); decode and encode go through this view. */
const view = new UdpView();

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
  if (have < 8) {
    if (wireLength > have && wireLength >= 8) issue(issues, 'note', 'udp.snaplen', `UDP header cut by the capture: ${have} of 8 bytes captured`, 0, have);
    else issue(issues, 'error', 'udp.truncated', `truncated UDP header: need 8 bytes, have ${have}`, 0, have);
  }
  if (have >= 6) {
    const len = value.length;
    if (len < 8) {
      // 0 is legal only for IPv6 jumbograms (RFC 2675)
      issue(issues, len === 0 ? 'warn' : 'error', 'udp.length', `length ${len} < 8${len === 0 ? ' (jumbogram?)' : ''}`, 4, 2);
    } else if (len > wireLength) {
      issue(issues, 'error', 'udp.length', `length ${len} exceeds the ${wireLength} bytes on the wire`, 4, 2);
    } else if (len > have) {
      issue(issues, 'note', 'udp.snaplen', `datagram cut by the capture: ${have} of ${len} bytes captured`, 0, have);
    } else if (len < wireLength) {
      issue(issues, 'warn', 'udp.length', `length ${len} < ${wireLength} bytes of IP payload (${wireLength - len} bytes after the datagram)`, 4, 2);
    }
  }
  if (have >= 4 && value.dstPort === 0) issue(issues, 'warn', 'udp.port0', 'destination port 0', 2, 2);
  if (t) {
    const F = UDP_FIELDS;
    t.add('Source port', F.srcPort.at, 2, value.srcPort);
    t.add('Destination port', F.dstPort.at, 2, value.dstPort);
    t.add('Length', F.length.at, 2, value.length);
    t.add('Checksum', F.checksum.at, 2, `0x${value.checksum.toString(16).padStart(4, '0')}${value.checksum === 0 ? ' (none)' : ' [unverified]'}`);
  }
}

/**
 * Header (+ payload). Fields are written as given unless `ck` is passed: then the checksum is
 * computed over the pseudo-header (0 result sent as 0xffff). `udpHeader` fills in the length.
 */
export function encodeUdp(v: UdpHeader, payload?: Uint8Array, ck?: { src: Uint8Array | string; dst: Uint8Array | string }): Uint8Array {
  const out = new Uint8Array(8 + (payload ? payload.length : 0));
  const w = view.reset(out, 0);
  w.srcPort = v.srcPort & 0xffff;
  w.dstPort = v.dstPort & 0xffff;
  w.length = v.length & 0xffff;
  if (payload) out.set(payload, 8);
  w.checksum = (ck ? transportChecksum(ck.src, ck.dst, 17, out) : v.checksum) & 0xffff;
  return out;
}

/** Value with length = 8 + payloadLength and checksum 0 (RoCEv2 style; pass `ck` to encodeUdp to compute one). */
export function udpHeader(init: { srcPort: number; dstPort: number; payloadLength: number; checksum?: number }): UdpHeader {
  return { srcPort: init.srcPort, dstPort: init.dstPort, length: 8 + init.payloadLength, checksum: init.checksum ?? 0 };
}

/** `UDP, length 44` (payload bytes = length − 8), prefixed `a.p > b.q: ` when addresses are given. */
export function summarizeUdp(v: UdpHeader, c?: { src?: string; dst?: string }): string {
  const pre = c?.src !== undefined && c.dst !== undefined ? `${c.src}.${v.srcPort} > ${c.dst}.${v.dstPort}: ` : '';
  return `${pre}UDP, length ${Math.max(0, v.length - 8)}`;
}
