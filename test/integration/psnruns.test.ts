// The tracker's ring of PSN runs (dissectors/tracker/psnruns.ts) starts with room for 4 runs and
// moves to 16 when it fills: lookups must answer as a plain list of the last 16 runs would, across
// the move, the ring's wrap and the 24-bit PSN wrap.
import test from 'ava';
import { PsnRuns } from '../../dissectors/tracker/psnruns.js';

const MASK = 0xffffff;
const KEEP = 16;

/** The reference: every run in order, the last KEEP searched newest first. */
class Runs {
  private runs: Array<{ s: number; e: number; c: number }> = [];
  record(psn: number, conn: number): void {
    const last = this.runs[this.runs.length - 1];
    if (last && last.c === conn && ((last.e + 1) & MASK) === psn) { last.e = psn; return; }
    this.runs.push({ s: psn, e: psn, c: conn });
  }
  lookup(psn: number): number | undefined {
    for (let i = this.runs.length - 1; i >= Math.max(0, this.runs.length - KEEP); i--) {
      const r = this.runs[i]!;
      if (((psn - r.s) & MASK) <= ((r.e - r.s) & MASK)) return r.c !== 0 ? r.c : undefined;
    }
    return undefined;
  }
}

/** A small deterministic PRNG (xorshift32), so a failure repeats. */
function rng(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => { x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0; return x / 0x100000000; };
}

test('PSN runs: same answers as a list of the last 16 runs, through the move from 4 to 16 and both wraps', (t) => {
  let lookups = 0;
  for (let seed = 1; seed <= 400; seed++) {
    const rand = rng(seed);
    const ring = new PsnRuns();
    const ref = new Runs();
    // start near the 24-bit wrap in some sequences
    let psn = seed % 3 === 0 ? MASK - Math.floor(rand() * 40) : Math.floor(rand() * MASK);
    const records = 1 + Math.floor(rand() * (seed % 4 === 0 ? 200 : 20));
    for (let k = 0; k < records; k++) {
      const conn = Math.floor(rand() * 4); // 0: a request of no connection
      const len = 1 + Math.floor(rand() * 3);
      for (let j = 0; j < len; j++) {
        ring.record(psn, conn);
        ref.record(psn, conn);
        psn = (psn + 1) & MASK;
      }
      if (rand() < 0.1) psn = (psn + Math.floor(rand() * 5)) & MASK; // a gap
      // ask about recent PSNs, old ones and ones not sent yet
      for (let q = 0; q < 6; q++) {
        const back = Math.floor(rand() * 80) - 5;
        const p = (psn - back) & MASK;
        lookups++;
        if (ring.lookup(p) !== ref.lookup(p)) { t.fail(`seed ${seed}, record ${k}: PSN ${p} → ${ring.lookup(p)}, expected ${ref.lookup(p)}`); return; }
      }
    }
  }
  t.log(`${lookups} lookups agree`);
  t.pass();
});
