// Packet bytes without a typed-array view per packet (docs/uroce.md round 10).
//
// A `subarray` costs an object of ~100 bytes and its share of a minor GC; an rr round trip made
// ~28 of them. A view is an immutable window, so handing out the same object again for the same
// (offset, length) of the same buffer is the same as making a new one: ViewCache keeps the views
// it made by window, and request/response traffic repeats a few windows of the engine's
// staging and receive buffers and of the WR layer's message slots, so nearly every lookup hits.
// A holder of a view sees what the buffer holds, reused or not: the cache adds no lifetime rule
// that a fresh view did not have. Copies go through a cached view of the source (set() of a
// view is ~45 ns whatever the length up to 1 KiB on this VM); a byte loop is cheaper only for
// the shortest runs (~15 ns for 8 bytes, ~1.6 ns a byte).

/** Runs up to this many bytes are copied by a loop (measured: above it set() of a view is cheaper). */
const SHORT_COPY = 16;

/** Entries of a cache by default (a power of two): direct-mapped by a hash of offset and length. */
const ENTRIES = 128;

export class ViewCache {
  private readonly views: Array<Uint8Array | undefined>;
  /** Window of each entry (offset, length): compared without the views' getters. */
  private readonly offs: Int32Array;
  private readonly lens: Int32Array;
  /** Per entry, the last window that missed and was not cached (see get()). */
  private readonly candOffs: Int32Array;
  private readonly candLens: Int32Array;
  private readonly mask: number;

  /** `entries`: a power of two. */
  constructor(readonly buf: Uint8Array, entries = ENTRIES) {
    this.views = new Array<Uint8Array | undefined>(entries).fill(undefined);
    this.offs = new Int32Array(entries).fill(-1);
    this.lens = new Int32Array(entries);
    this.candOffs = new Int32Array(entries).fill(-1);
    this.candLens = new Int32Array(entries);
    this.mask = entries - 1;
  }

  /** buf[off, off + len) as a view (the cached one if this window was handed out before). */
  get(off: number, len: number): Uint8Array {
    const i = (off ^ (off >>> 7) ^ (off >>> 16) ^ Math.imul(len, 0x9e3779b1) >>> 25) & this.mask;
    if (this.offs[i] === off && this.lens[i] === len) return this.views[i]!;
    // A window is cached the second time it misses in a row at its entry. A stream of windows
    // that do not come back (a ring buffer's moving position) then makes plain short-lived
    // views, as without the cache: a cached view outlives its first scavenge and is promoted,
    // so caching every miss would move that garbage to the old generation.
    if (this.candOffs[i] !== off || this.candLens[i] !== len) {
      this.candOffs[i] = off;
      this.candLens[i] = len;
      return this.buf.subarray(off, off + len);
    }
    this.offs[i] = off;
    this.lens[i] = len;
    return (this.views[i] = this.buf.subarray(off, off + len));
  }
}

/** Copy a short run byte by byte (no view). */
export function copyShort(dst: Uint8Array, dOff: number, src: Uint8Array, sOff: number, n: number): void {
  for (let i = 0; i < n; i++) dst[dOff + i] = src[sOff + i]!;
}

/** Copy src[sOff, sOff + n) to dst[dOff …]: through `views` (a cache over src's buffer, src at
 *  byte `base` of it) when there is one, else through a new view. */
export function copyRun(dst: Uint8Array, dOff: number, src: Uint8Array, sOff: number, n: number, views: ViewCache | undefined, base: number): void {
  if (n <= SHORT_COPY) copyShort(dst, dOff, src, sOff, n);
  else dst.set(views ? views.get(base + sOff, n) : src.subarray(sOff, sOff + n), dOff);
}
