// Which SMC connection recent request PSNs of a link direction carried, to attribute a NAK or
// a retransmission (which repeat old PSNs) to its connection. Consecutive PSNs of one
// connection (an RDMA WRITE's segments and its CDC) form one run, so a small ring of runs
// covers far more PSNs than a per-PSN table, in 192 bytes per direction, allocated on first use.

const RUNS = 16;
const PSN_MASK = 0xffffff;

export class PsnRuns {
  /** start, end, connection of each run, in one buffer. */
  private readonly r = new Int32Array(RUNS * 3);
  private head = -1;
  private n = 0;

  /** Request PSN `psn` carried connection `conn` (0: none). */
  record(psn: number, conn: number): void {
    const h = this.head;
    const r = this.r;
    if (h >= 0 && r[h * 3 + 2] === conn && ((r[h * 3 + 1]! + 1) & PSN_MASK) === psn) { r[h * 3 + 1] = psn; return; }
    const i = (h + 1) % RUNS;
    r[i * 3] = psn; r[i * 3 + 1] = psn; r[i * 3 + 2] = conn;
    this.head = i;
    if (this.n < RUNS) this.n++;
  }

  /** The connection of a recently recorded PSN, or undefined. */
  lookup(psn: number): number | undefined {
    for (let k = 0, i = this.head; k < this.n; k++, i = (i - 1 + RUNS) % RUNS) {
      const s = this.r[i * 3]!, c = this.r[i * 3 + 2]!;
      if (((psn - s) & PSN_MASK) <= ((this.r[i * 3 + 1]! - s) & PSN_MASK)) return c !== 0 ? c : undefined;
    }
    return undefined;
  }
}
