// Packet bytes without a typed-array view per packet (docs/uroce.md round 10).
//
// A `subarray` costs an object of ~100 bytes and its share of a minor GC; an rr round trip made
// ~28 of them. Two ways around it, used where each fits:
//  - copyBytes: the QP code copies (buffer, offset, length) runs itself — a loop for the short
//    runs SMC-R sends (CDC messages, small writes), a view only for long ones, where its cost
//    is small against the copy.
//  - ViewCache: the ICRC code (icrc.ts, the wire layer) takes a packet as one Uint8Array of its
//    exact extent. A view is an immutable window, so handing out the same object again for the
//    same (offset, length) of the same buffer is the same as making a new one; request/response
//    traffic repeats a few windows of the staging and receive buffers, so nearly every lookup
//    hits. A holder of a view sees what the buffer holds, reused or not: the cache adds no
//    lifetime rule that a fresh view did not have.

import { addrBig, exactAddr, type VerbsAddr } from '../types.js';

/** Runs up to this many bytes are copied by a loop. A microbenchmark alone favours set() of a
 *  new view above ~16 bytes (~45 ns against ~1.6 ns a byte), but in the rr A/B between two
 *  processes the loops used less CPU than copies through cached views (round 10): SMC-R's
 *  runs (44-byte CDCs, small writes) stay loops. */
const SHORT_COPY = 128;

// Short runs by 32-bit words when both ends are 4-byte aligned in their ArrayBuffers (round 13):
// a 64-byte run is 16 word moves instead of 64 byte moves (~60 against ~140 ns measured with
// views over other buffers' middles). IB packets are multiples of 4 bytes and SMC-R's buffers
// and slots are aligned, so the data path's runs (the payload into the staging buffer, out of
// the receive buffer into an RMB or a receive slot) nearly always are. The Int32Array of a
// buffer is found by the identity of the Uint8Array (the `buffer` getter is a C++ call of
// ~30 ns: it is read once per array, when the array is first seen), in a small table refilled
// round robin; the views on the data path (MR buffers, staging buffers, the receive views of
// the engine's cache) are few and long-lived. Word copies keep the bytes' order: endianness
// does not matter for a copy.
const WORD_SLOTS = 16;
const MIN_WORDS = 12;
const wKeys: Array<Uint8Array | undefined> = new Array<Uint8Array | undefined>(WORD_SLOTS).fill(undefined);
const wViews: Int32Array[] = new Array<Int32Array>(WORD_SLOTS).fill(new Int32Array(0));
/** Byte offset of each key in its ArrayBuffer. */
const wOffs = new Int32Array(WORD_SLOTS);
let wNext = 0;
/** wordsOf's answer (two values without an object). */
let wView: Int32Array = wViews[0]!;
let wOff = 0;

function wordsOf(u: Uint8Array): void {
  for (let i = 0; i < WORD_SLOTS; i++) {
    if (wKeys[i] === u) { wView = wViews[i]!; wOff = wOffs[i]!; return; }
  }
  const k = wNext;
  wNext = (k + 1) & (WORD_SLOTS - 1);
  const ab = u.buffer;
  wKeys[k] = u;
  wView = wViews[k] = new Int32Array(ab, 0, ab.byteLength >>> 2);
  wOff = wOffs[k] = u.byteOffset;
}

/** Copy n bytes from src[sOff…] to dst[dOff…] (different buffers, or non-overlapping). */
export function copyBytes(dst: Uint8Array, dOff: number, src: Uint8Array, sOff: number, n: number): void {
  if (n <= SHORT_COPY) {
    let i = 0;
    if (n >= MIN_WORDS) {
      wordsOf(dst);
      const dw = wView, a = wOff + dOff;
      wordsOf(src);
      const sw = wView, b = wOff + sOff;
      if (((a | b) & 3) === 0) {
        const m = n >>> 2, x = a >>> 2, y = b >>> 2;
        for (let k = 0; k < m; k++) dw[x + k] = sw[y + k]!;
        i = m << 2;
      }
    }
    for (; i < n; i++) dst[dOff + i] = src[sOff + i]!;
    return;
  }
  dst.set(src.subarray(sOff, sOff + n), dOff);
}

/** Entries of a cache (a power of two): direct-mapped by a hash of offset and length. */
const ENTRIES = 128;

export class ViewCache {
  private readonly views: Array<Uint8Array | undefined> = new Array<Uint8Array | undefined>(ENTRIES).fill(undefined);
  /** Window of each entry (offset, length): compared without the views' getters. */
  private readonly offs = new Int32Array(ENTRIES).fill(-1);
  private readonly lens = new Int32Array(ENTRIES);

  constructor(readonly buf: Uint8Array) {}

  /** buf[off, off + len) as a view (the cached one if this window was handed out before). */
  get(off: number, len: number): Uint8Array {
    const i = (off ^ (off >>> 7) ^ (off >>> 16) ^ Math.imul(len, 0x9e3779b1) >>> 25) & (ENTRIES - 1);
    if (this.offs[i] === off && this.lens[i] === len) return this.views[i]!;
    this.offs[i] = off;
    this.lens[i] = len;
    return (this.views[i] = this.buf.subarray(off, off + len));
  }
}

// 64-bit addresses without bigints on the data path (round 11): the verbs interface carries
// addresses as bigints, but arithmetic on them allocates (every +, -, >> makes a new bigint),
// several per RDMA WRITE. uroce's MRs sit below 2^47, where a number is exact, so offsets and
// RETH VAs are computed in numbers, and in bigints only when an address is not exact.

/** a - base as a number; `baseNum` is exactAddr(base). An offset far outside loses precision
 *  in the bigint fallback but stays outside (the callers check bounds). */
export function addrOffset(a: VerbsAddr, base: bigint, baseNum: number): number {
  const n = baseNum >= 0 ? exactAddr(a) : -1;
  if (n >= 0) return n - baseNum;
  const b = addrBig(a);
  return b === undefined ? -1 : Number(b - base); // not an address: outside every MR
}
