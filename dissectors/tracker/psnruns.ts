// Which SMC connection recent request PSNs of a link direction carried, to attribute a NAK or
// a retransmission (which repeat old PSNs) to its connection. Consecutive PSNs of one
// connection (an RDMA WRITE's segments and its CDC) form one run, so a small ring of runs
// covers far more PSNs than a per-PSN table, in 192 bytes per direction, allocated on first use
// from a shared slab (a typed array each would cost an ArrayBuffer and its backing store too,
// about 0.6 KiB per direction over 100 000 links).

const RUNS = 16;
const PSN_MASK = 0xffffff;

/** Rings handed out per slab. */
const PER_SLAB = 4096;
let slab = new Int32Array(0);
let slabUsed = PER_SLAB;

export class PsnRuns {
  /** start, end, connection of each run: RUNS * 3 numbers of a shared slab from `base`. */
  private readonly r: Int32Array;
  private readonly base: number;
  private head = -1;
  private n = 0;

  constructor() {
    if (slabUsed === PER_SLAB) { slab = new Int32Array(PER_SLAB * RUNS * 3); slabUsed = 0; }
    this.r = slab;
    this.base = slabUsed++ * RUNS * 3;
  }

  /** Request PSN `psn` carried connection `conn` (0: none). */
  record(psn: number, conn: number): void {
    const h = this.head;
    const r = this.r, b = this.base;
    if (h >= 0 && r[b + h * 3 + 2] === conn && ((r[b + h * 3 + 1]! + 1) & PSN_MASK) === psn) { r[b + h * 3 + 1] = psn; return; }
    const i = (h + 1) % RUNS;
    r[b + i * 3] = psn; r[b + i * 3 + 1] = psn; r[b + i * 3 + 2] = conn;
    this.head = i;
    if (this.n < RUNS) this.n++;
  }

  /** The connection of a recently recorded PSN, or undefined. */
  lookup(psn: number): number | undefined {
    const r = this.r, b = this.base;
    for (let k = 0, i = this.head; k < this.n; k++, i = (i - 1 + RUNS) % RUNS) {
      const s = r[b + i * 3]!, c = r[b + i * 3 + 2]!;
      if (((psn - s) & PSN_MASK) <= ((r[b + i * 3 + 1]! - s) & PSN_MASK)) return c !== 0 ? c : undefined;
    }
    return undefined;
  }
}
