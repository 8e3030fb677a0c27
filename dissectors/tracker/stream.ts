// Rebuilds one direction of an SMC-R connection's application byte stream, the way the
// receiver's RMBE ring sees it: RDMA WRITEs place bytes at ring offsets, the writer's CDC
// producer cursor releases them in order. What the capture lacks (snaplen, lost frames) is
// reported as missing byte ranges of the stream rather than invented.

export interface StreamChunk { frame: number; offset: number; bytes: Uint8Array }
export interface MissingRange { frame: number; from: number; to: number }

export class RingStream {
  private readonly ring: Uint8Array;
  /** 1 where the ring byte holds data written since it was last released. */
  private readonly have: Uint8Array;
  /** Stream offset of everything released so far. */
  released = 0;
  readonly chunks: StreamChunk[] = [];
  readonly missing: MissingRange[] = [];
  /** Stream offsets of urgent bytes (MSG_OOB), in order. */
  readonly urgent: number[] = [];

  constructor(readonly size: number, private readonly keep: boolean) {
    this.ring = new Uint8Array(keep ? size : 0);
    this.have = new Uint8Array(keep ? size : 0);
  }

  /** The byte at stream offset `at` was sent as urgent data. */
  markUrgent(at: number): void {
    if (this.keep) this.urgent.push(at);
  }

  /** An RDMA WRITE payload placed at ring offset `at` (wraps if it runs past the end). */
  place(at: number, data: Uint8Array): void {
    if (!this.keep || this.size === 0) return;
    let o = ((at % this.size) + this.size) % this.size;
    let i = 0;
    while (i < data.length) {
      const n = Math.min(data.length - i, this.size - o);
      this.ring.set(data.subarray(i, i + n), o);
      this.have.fill(1, o, o + n);
      i += n;
      o = 0;
    }
  }

  /** The writer's producer cursor advanced by `n` bytes from ring offset `from`: release them. */
  release(from: number, n: number, frame: number): void {
    if (n <= 0) return;
    let start = this.released;
    this.released += n;
    if (!this.keep || this.size === 0) return;
    if (n > this.size) {
      // More than one ring released at once (CDCs missing from the capture): the older laps
      // were overwritten in the ring before this cursor update — missing, not invented.
      const lost = n - this.size;
      this.missing.push({ frame, from: start, to: start + lost });
      from += lost;
      start += lost;
      n = this.size;
    }
    const out = new Uint8Array(n);
    let o = ((from % this.size) + this.size) % this.size;
    let gapFrom = -1;
    for (let i = 0; i < n; i++) {
      if (this.have[o] === 1) {
        out[i] = this.ring[o]!;
        this.have[o] = 0;
        if (gapFrom >= 0) { this.missing.push({ frame, from: start + gapFrom, to: start + i }); gapFrom = -1; }
      } else if (gapFrom < 0) gapFrom = i;
      if (++o === this.size) o = 0;
    }
    if (gapFrom >= 0) this.missing.push({ frame, from: start + gapFrom, to: start + n });
    this.chunks.push({ frame, offset: start, bytes: out });
  }
}
