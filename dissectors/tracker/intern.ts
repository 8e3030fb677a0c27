// Strings the tracker keeps for the whole capture. V8 builds a string made by concatenation
// (a template literal, `a + b`) as a tree of its parts: a MAC address formatted byte by byte
// is six leaves and five inner nodes, about 240 bytes instead of 40. Kept once per connection
// over 100 000 connections, the trees are a tenth of the tracker's memory. Called when the
// model stores a string, never per frame.

/** V8 makes no cons (or sliced) string shorter than this (ConsString::kMinLength): a shorter
 *  string is flat already, e.g. "LG12/L1" or "10.0.0.1" made by concatenation. */
const MIN_TREE = 13;

/** A flat copy of `s` (JSON's round trip always builds a fresh sequential string; ~0.5 µs, once
 *  per link name and address before strings too short to be trees were let through). */
export function flat(s: string): string {
  return s.length < MIN_TREE ? s : (JSON.parse(JSON.stringify(s)) as string);
}

/** A pool of flat strings (one instance per distinct value) that starts over when it holds
 *  `max` values (bounded on hostile input). */
export function stringPool(max: number): (s: string) => string {
  const pool = new Map<string, string>();
  return (s) => {
    const hit = pool.get(s);
    if (hit !== undefined) return hit;
    if (pool.size >= max) pool.clear();
    const v = flat(s);
    pool.set(v, v);
    return v;
  };
}

/** One flat instance of values that repeat across connections (addresses, GIDs, MACs, peer
 *  ids, host names, UEIDs). */
export const intern = stringPool(1 << 16);

/** intern() over an optional value. */
export function internMaybe(s: string | undefined): string | undefined {
  return s === undefined ? undefined : intern(s);
}
