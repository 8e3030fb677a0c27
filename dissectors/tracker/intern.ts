// Strings the tracker keeps for the whole capture. V8 builds a string made by concatenation
// (a template literal, `a + b`) as a tree of its parts: a MAC address formatted byte by byte
// is six leaves and five inner nodes, about 240 bytes instead of 40. Kept once per connection
// over 100 000 connections, the trees are a tenth of the tracker's memory. Called when the
// model stores a string, never per frame.

/** A flat copy of `s` (JSON's round trip always builds a fresh sequential string). */
export function flat(s: string): string {
  return s.length < 2 ? s : (JSON.parse(JSON.stringify(s)) as string);
}

const pool = new Map<string, string>();
/** Distinct values kept before the pool starts over (bounds it on hostile input). */
const POOL_MAX = 1 << 16;

/** One flat instance of values that repeat across connections (addresses, GIDs, MACs, peer
 *  ids, host names, UEIDs). */
export function intern(s: string): string {
  const hit = pool.get(s);
  if (hit !== undefined) return hit;
  if (pool.size >= POOL_MAX) pool.clear();
  const v = flat(s);
  pool.set(v, v);
  return v;
}

/** intern() over an optional value. */
export function internMaybe(s: string | undefined): string | undefined {
  return s === undefined ? undefined : intern(s);
}
