// Allocation-free address → text for the per-frame hot path.
//
// Every frame carries 2 MACs and 2 IP addresses, and values keep them as strings (readable
// JSON). Building those strings on each frame would dominate the cost of header decoding, yet
// a capture holds few distinct addresses. These helpers keep a small direct-mapped cache
// keyed by the raw address bytes: a hit returns the interned string without allocating; a miss
// builds it with the common.ts formatters (macStr / ipv4Str / ipv6Str) and replaces the slot.
// Output is identical to those formatters.

import { ipv4Str, ipv6Str, macStr, parseIpv4, parseIpv6, u16, u32 } from '../wire/common.js';

const SLOTS = 256;
const MASK = SLOTS - 1;

const macHi = new Int32Array(SLOTS);
const macLo = new Int32Array(SLOTS);
const macVal: (string | undefined)[] = new Array<string | undefined>(SLOTS).fill(undefined);

/** MAC (6 bytes at `o`) as aa:bb:cc:dd:ee:ff, cached. Missing bytes read as 0. */
export function macAt(b: Uint8Array, o: number): string {
  if (o + 6 > b.length) return macStr(b, o);
  const hi = u16(b, o);
  const lo = u32(b, o + 2) | 0;
  const slot = (lo ^ (lo >>> 8) ^ hi) & MASK;
  const s = macVal[slot];
  if (s !== undefined && macHi[slot] === hi && macLo[slot] === lo) return s;
  const made = macStr(b, o);
  macHi[slot] = hi; macLo[slot] = lo; macVal[slot] = made;
  return made;
}

const v4Key = new Int32Array(SLOTS);
const v4Val: (string | undefined)[] = new Array<string | undefined>(SLOTS).fill(undefined);

/** IPv4 address (4 bytes at `o`) as dotted quad, cached. */
export function ipv4At(b: Uint8Array, o: number): string {
  if (o + 4 > b.length) return ipv4Str(b, o);
  const k = u32(b, o) | 0;
  const slot = (k ^ (k >>> 8) ^ (k >>> 16)) & MASK;
  const s = v4Val[slot];
  if (s !== undefined && v4Key[slot] === k) return s;
  const made = ipv4Str(b, o);
  v4Key[slot] = k; v4Val[slot] = made;
  return made;
}

const v6Key = new Int32Array(SLOTS * 4);
const v6Val: (string | undefined)[] = new Array<string | undefined>(SLOTS).fill(undefined);

/** IPv6 address (16 bytes at `o`) in RFC 5952 form (as ipv6Str), cached. */
export function ipv6At(b: Uint8Array, o: number): string {
  if (o + 16 > b.length) return ipv6Str(b, o);
  const a = u32(b, o) | 0, c = u32(b, o + 4) | 0, d = u32(b, o + 8) | 0, e = u32(b, o + 12) | 0;
  const slot = (e ^ (e >>> 8) ^ (e >>> 16) ^ d ^ a) & MASK;
  const s = v6Val[slot];
  const k = slot * 4;
  if (s !== undefined && v6Key[k] === a && v6Key[k + 1] === c && v6Key[k + 2] === d && v6Key[k + 3] === e) return s;
  const made = ipv6Str(b, o);
  v6Key[k] = a; v6Key[k + 1] = c; v6Key[k + 2] = d; v6Key[k + 3] = e; v6Val[slot] = made;
  return made;
}

const pidHi = new Int32Array(SLOTS);
const pidLo = new Int32Array(SLOTS);
const pidVal: (string | undefined)[] = new Array<string | undefined>(SLOTS).fill(undefined);

/** SMC Peer ID (8 bytes at `o`: a u16 instance, then a MAC at `o + macOff`, wire/clc.ts's
 *  layout) as "<instance>@<mac>", cached: a CLC message carries one, and the tracker interns it
 *  (one string object per value keeps its hash). */
export function peerIdAt(b: Uint8Array, o: number, macOff: number): string {
  if (o + 8 > b.length) return `${u16(b, o)}@${macStr(b, o + macOff)}`;
  const hi = u32(b, o) | 0;
  const lo = u32(b, o + 4) | 0;
  const slot = (lo ^ (lo >>> 8) ^ hi ^ (hi >>> 16)) & MASK;
  const s = pidVal[slot];
  if (s !== undefined && pidHi[slot] === hi && pidLo[slot] === lo) return s;
  const made = `${u16(b, o)}@${macStr(b, o + macOff)}`;
  pidHi[slot] = hi; pidLo[slot] = lo; pidVal[slot] = made;
  return made;
}

/** Address text → bytes: dotted quad → 4 bytes, anything with ':' → 16 bytes; bytes pass through. */
export function addrBytes(a: Uint8Array | string): Uint8Array {
  if (typeof a !== 'string') return a;
  return a.includes(':') ? parseIpv6(a) : parseIpv4(a);
}
