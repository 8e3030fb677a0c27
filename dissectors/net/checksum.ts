// Internet checksum (RFC 1071) pieces shared by IPv4, TCP and UDP: a 32-bit accumulator of
// 16-bit big-endian words, folded at the end. Allocation-free.

import { u16 } from '../wire/common.js';
import { addrBytes } from './addr.js';

/** Adds the bytes [o, o+n) as big-endian 16-bit words (odd tail padded with 0) to `acc`. */
export function sumWords(b: Uint8Array, o: number, n: number, acc = 0): number {
  let end = Math.min(b.length, o + n);
  let odd = false;
  if (((end - o) & 1) === 1) { end--; odd = true; }
  let i = o;
  for (; i < end; i += 2) acc += (b[i]! << 8) | b[i + 1]!;
  if (odd && i < b.length) acc += b[i]! << 8;
  // keep the accumulator well inside 2^53 even for 64 KiB+ inputs
  return acc;
}

/** Folds a sum to 16 bits (end-around carry). */
export function fold(acc: number): number {
  while (acc > 0xffff) acc = (acc & 0xffff) + Math.floor(acc / 0x10000);
  return acc;
}

/** Ones' complement of the folded sum: the value to put in a checksum field. */
export function finish(acc: number): number {
  return (~fold(acc)) & 0xffff;
}

/** Sum of the TCP/UDP pseudo-header (IPv4: 12 bytes; IPv6: 40 bytes), not yet folded. */
function pseudoHeaderSum(src: Uint8Array | string, dst: Uint8Array | string, protocol: number, length: number): number {
  const s = addrBytes(src), d = addrBytes(dst);
  let acc = sumWords(s, 0, s.length) + sumWords(d, 0, d.length);
  if (s.length === 16) acc += Math.floor(length / 0x10000) + (length & 0xffff) + protocol;
  else acc += (length & 0xffff) + protocol;
  return acc;
}

/**
 * Verdict on a TCP/UDP checksum (report-only; decoders never flag it themselves).
 *  - 'ok'        sum verifies
 *  - 'partial'   field holds the folded pseudo-header sum only: the sender left the rest to its NIC
 *                (Linux CHECKSUM_PARTIAL, tx checksum offload) and the capture saw it before that
 *  - 'none'      UDP over IPv4 with checksum 0 (no checksum, allowed; RoCEv2 sends this)
 *  - 'zero'      checksum 0 where one is required (TCP; UDP over IPv6)
 *  - 'bad'       anything else
 *  - 'truncated' the segment is not all here (captured < length): cannot verify
 */
export type TransportChecksumStatus = 'ok' | 'partial' | 'none' | 'zero' | 'bad' | 'truncated';

export interface TransportChecksum {
  status: TransportChecksumStatus;
  /** Checksum field as on the wire. */
  wire: number;
  /** The correct value for the field (0 when truncated). */
  expected: number;
}

/**
 * Verifies the checksum of a TCP (protocol 6) or UDP (17; UDP-Lite 136 covers everything too) segment.
 * `src`/`dst`: the IP addresses (4 or 16 bytes, or text); `segment`: header + payload as captured;
 * `length`: the segment length from the IP header (defaults to segment.length).
 */
export function tcpUdpChecksum(src: Uint8Array | string, dst: Uint8Array | string, protocol: number, segment: Uint8Array, length = segment.length): TransportChecksum {
  const off = protocol === 6 ? 16 : 6;
  const wire = u16(segment, off);
  if (segment.length < length || segment.length < off + 2) return { status: 'truncated', wire, expected: 0 };
  const ph = pseudoHeaderSum(src, dst, protocol, length);
  const all = sumWords(segment, 0, length, ph);
  let expected = finish(all - wire);
  if (protocol !== 6 && expected === 0) expected = 0xffff;
  if (fold(all) === 0xffff || wire === expected) return { status: 'ok', wire, expected };
  const v6 = addrBytes(src).length === 16;
  if (wire === 0) return { status: protocol !== 6 && !v6 ? 'none' : 'zero', wire, expected };
  if (wire === fold(ph)) return { status: 'partial', wire, expected };
  return { status: 'bad', wire, expected };
}

/** Checksum field value for a segment whose checksum field is currently 0 (or is to be ignored). */
export function transportChecksum(src: Uint8Array | string, dst: Uint8Array | string, protocol: number, segment: Uint8Array): number {
  const off = protocol === 6 ? 16 : 6;
  const acc = sumWords(segment, 0, segment.length, pseudoHeaderSum(src, dst, protocol, segment.length)) - u16(segment, off);
  const c = finish(acc);
  return protocol !== 6 && c === 0 ? 0xffff : c;
}
