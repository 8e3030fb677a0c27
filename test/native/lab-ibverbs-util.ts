// Shared by the two sides of the ibverbs lab run (lab-ibverbs-guest.ts in the guest,
// lab-ibverbs-host.ts on the host): check bookkeeping, test data, completion collection.
import { createHash } from 'node:crypto';
import type { Cq, WorkCompletion } from '../../endpoint/verbs/types.js';

export const results: Array<{ ok: boolean; what: string }> = [];

/** Record and print one check ("ok - …" / "not ok - …"); returns `ok`. */
export function check(ok: boolean, what: string): boolean {
  results.push({ ok, what });
  console.log(`${ok ? 'ok' : 'not ok'} - ${what}`);
  return ok;
}

export const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');

/** Deterministic test bytes (xorshift32). */
export function pattern(n: number, seed: number): Uint8Array {
  const b = new Uint8Array(n);
  let x = (seed | 1) >>> 0;
  for (let i = 0; i < n; i++) { x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0; b[i] = x & 0xff; }
  return b;
}

/** Wait for `n` completions on `cq` (no busy loop), failing after `ms`. */
export async function collect(cq: Cq, n: number, ms: number): Promise<WorkCompletion[]> {
  const out: WorkCompletion[] = [];
  const ac = new AbortController();
  const t = setTimeout(() => ac.abort(new Error(`timeout: ${out.length}/${n} completions after ${ms} ms`)), ms);
  try {
    while (out.length < n) { await cq.wait(ac.signal); out.push(...cq.poll(n - out.length)); }
  } finally { clearTimeout(t); }
  return out;
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
