// Which SMC connection recent request PSNs of a link direction carried, to attribute a NAK or
// a retransmission (which repeat old PSNs) to its connection. Consecutive PSNs of one
// connection (an RDMA WRITE's segments and its CDC) form one run, so a small ring of runs
// covers far more PSNs than a per-PSN table, in 192 bytes per direction, allocated on first use
// from a shared slab (a typed array each would cost an ArrayBuffer and its backing store too,
// about 0.6 KiB per direction over 100 000 links). A ring starts with room for SMALL runs (48
// bytes: a connection's handshake and its few CDCs on a link of its own) and moves to one of
// RUNS when it fills, before its first wrap, so it always holds the same last runs.

const RUNS = 16;
const SMALL = 4;
const PSN_MASK = 0xffffff;

/** Rings handed out per slab. */
const PER_SLAB = 4096;

/** A slab handing out rings of `runs` runs. */
class Slab {
  private a = new Int32Array(0);
  private used = PER_SLAB;
  constructor(private readonly runs: number) {}
  /** A new ring: its array, whose base is `this.base` after the call. */
  take(): Int32Array {
    if (this.used === PER_SLAB) { this.a = new Int32Array(PER_SLAB * this.runs * 3); this.used = 0; }
    this.base = this.used++ * this.runs * 3;
    return this.a;
  }
  base = 0;
}
const small = new Slab(SMALL);
const full = new Slab(RUNS);

export class PsnRuns {
  /** start, end, connection of each run: cap * 3 numbers of a shared slab from `base`. */
  private r: Int32Array;
  private base: number;
  private cap = SMALL;
  private head = -1;
  private n = 0;

  constructor() {
    this.r = small.take();
    this.base = small.base;
  }

  /** Request PSN `psn` carried connection `conn` (0: none). */
  record(psn: number, conn: number): void {
    const h = this.head;
    const r = this.r, b = this.base;
    if (h >= 0 && r[b + h * 3 + 2] === conn && ((r[b + h * 3 + 1]! + 1) & PSN_MASK) === psn) { r[b + h * 3 + 1] = psn; return; }
    if (this.n === SMALL && this.cap === SMALL) { this.grow(); this.record(psn, conn); return; }
    const i = (h + 1) % this.cap;
    r[b + i * 3] = psn; r[b + i * 3 + 1] = psn; r[b + i * 3 + 2] = conn;
    this.head = i;
    if (this.n < this.cap) this.n++;
  }

  /** The small ring is full and never wrapped (runs 0 … SMALL-1 in order): the same runs in a full one. */
  private grow(): void {
    const r = full.take(), b = full.base;
    for (let k = 0; k < SMALL * 3; k++) r[b + k] = this.r[this.base + k]!;
    this.r = r; this.base = b; this.cap = RUNS;
  }

  /** The connection of a recently recorded PSN, or undefined. */
  lookup(psn: number): number | undefined {
    const r = this.r, b = this.base;
    for (let k = 0, i = this.head; k < this.n; k++, i = (i - 1 + this.cap) % this.cap) {
      const s = r[b + i * 3]!, c = r[b + i * 3 + 2]!;
      if (((psn - s) & PSN_MASK) <= ((r[b + i * 3 + 1]! - s) & PSN_MASK)) return c !== 0 ? c : undefined;
    }
    return undefined;
  }
}
