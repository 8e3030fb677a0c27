// Which SMC connection recent request PSNs of a link direction carried, to attribute a NAK or
// a retransmission (which repeat old PSNs) to its connection. Consecutive PSNs of one
// connection (an RDMA WRITE's segments and its CDC) form one run, so a small ring of runs
// covers far more PSNs than a per-PSN table. A ring is a stretch of a shared slab of 32-bit
// integers (its newest run, its number of runs, then start, end and connection per run), named
// by a number: no object per link direction (an object per ring took 64 bytes, 128 per link,
// when every connection has its own link group), and no ArrayBuffer per ring either (about
// 0.6 KiB per direction over 100 000 links). A ring starts with room for SMALL runs (a
// connection's handshake and its few CDCs on a link of its own) and moves to one of RUNS when it
// fills, before its first wrap, so it always holds the same last runs.

const RUNS = 16;
const SMALL = 4;
const PSN_MASK = 0xffffff;
/** Per ring: the newest run's index (-1: none), the number of runs, then the runs. */
const HEAD = 0, COUNT = 1, HDR = 2;

/** Rings handed out per slab array. */
const PER_SLAB = 4096;

/** Rings of `runs` runs, in slab arrays of PER_SLAB rings each. */
class Slabs {
  readonly size: number;
  private readonly arrays: Int32Array[] = [];
  private used = PER_SLAB;
  constructor(readonly runs: number) { this.size = HDR + runs * 3; }
  /** A new empty ring's number. */
  take(): number {
    if (this.used === PER_SLAB) { this.arrays.push(new Int32Array(PER_SLAB * this.size)); this.used = 0; }
    const n = (this.arrays.length - 1) * PER_SLAB + this.used++;
    const a = this.array(n), b = this.base(n);
    a[b + HEAD] = -1; a[b + COUNT] = 0;
    return n;
  }
  array(n: number): Int32Array { return this.arrays[Math.floor(n / PER_SLAB)]!; }
  base(n: number): number { return (n % PER_SLAB) * this.size; }
}
const small = new Slabs(SMALL);
const full = new Slabs(RUNS);

/** A ring's name: its number in its slabs * 2, + 1 for a full one. */
export type PsnRing = number;

/** A new ring. */
export function newPsnRing(): PsnRing { return small.take() * 2; }

/** Request PSN `psn` of ring `h` carried connection `conn` (0: none); the ring's name from now
 *  on (it changes when a small ring moves to a full one). */
export function psnRecord(h: PsnRing, psn: number, conn: number): PsnRing {
  const s = (h & 1) === 1 ? full : small, n = h >> 1;
  const r = s.array(n), b = s.base(n) + HDR, head = r[b - HDR + HEAD]!, count = r[b - HDR + COUNT]!;
  if (head >= 0 && r[b + head * 3 + 2] === conn && ((r[b + head * 3 + 1]! + 1) & PSN_MASK) === psn) { r[b + head * 3 + 1] = psn; return h; }
  if (s === small && count === SMALL) return psnRecord(grow(n), psn, conn);
  const i = (head + 1) % s.runs;
  r[b + i * 3] = psn; r[b + i * 3 + 1] = psn; r[b + i * 3 + 2] = conn;
  r[b - HDR + HEAD] = i;
  if (count < s.runs) r[b - HDR + COUNT] = count + 1;
  return h;
}

/** Small ring `n` is full and never wrapped (runs 0 … SMALL-1 in order): the same runs in a new full one. */
function grow(n: number): PsnRing {
  const m = full.take();
  const from = small.array(n), fb = small.base(n), to = full.array(m), tb = full.base(m);
  for (let k = 0; k < HDR + SMALL * 3; k++) to[tb + k] = from[fb + k]!;
  return m * 2 + 1;
}

/** The connection of a PSN recently recorded in ring `h`, or undefined. */
export function psnLookup(h: PsnRing, psn: number): number | undefined {
  const s = (h & 1) === 1 ? full : small, n = h >> 1;
  const r = s.array(n), b = s.base(n) + HDR, cap = s.runs, count = r[b - HDR + COUNT]!;
  for (let k = 0, i = r[b - HDR + HEAD]!; k < count; k++, i = (i - 1 + cap) % cap) {
    const st = r[b + i * 3]!, c = r[b + i * 3 + 2]!;
    if (((psn - st) & PSN_MASK) <= ((r[b + i * 3 + 1]! - st) & PSN_MASK)) return c !== 0 ? c : undefined;
  }
  return undefined;
}

/** A ring as an object (the model's Link.psnConn, tests). */
export class PsnRuns {
  constructor(private h: PsnRing = newPsnRing()) {}
  /** Request PSN `psn` carried connection `conn` (0: none). */
  record(psn: number, conn: number): void { this.h = psnRecord(this.h, psn, conn); }
  /** The connection of a recently recorded PSN, or undefined. */
  lookup(psn: number): number | undefined { return psnLookup(this.h, psn); }
}
