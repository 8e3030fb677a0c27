// Lists the model keeps for each of 100 000 connections but that are usually empty or short
// (handshake steps, stalls, urgent marks, failovers). An empty `[]` is a 32-byte object, and
// the first push() grows its backing store to 17 slots: 170 bytes for a list of one to six
// entries. These start as one shared frozen empty list and grow to exactly their length;
// long lists (hostile or very busy captures) switch to push() and amortized growth.

const EMPTY = Object.freeze([]);
/** The shared empty list, typed for its use: never pushed to (frozen, a push would throw);
 *  grow it with append(). */
export function none<T>(): T[] { return EMPTY as unknown as T[]; }

/** Up to this length a list is copied to its exact size on each append. */
const EXACT_MAX = 8;

/** `list` with `x` appended: a new exact-size array while short, else `list` itself. */
export function append<T>(list: T[], x: T): T[] {
  if (list.length >= EXACT_MAX) { list.push(x); return list; }
  // concat makes exactly the room it needs, and copies without a loop of ours (a loop's turns
  // count towards optimising the caller's code: docs/smcdump.md, "Tracker, round 6")
  return list.concat([x]);
}

/** A [0, 0] counter pair shared until the first count (then replaced by its own array). */
export const ZERO_PAIR = Object.freeze([0, 0]) as unknown as [number, number];
