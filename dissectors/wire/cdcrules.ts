// The CDC rules (formats.md §9.2; RFC 7609 4.5, 4.7; Linux smc_cdc.h / smc_cdc.c / smc_tx.c):
// cursor arithmetic on the RMBE ring, sequence numbers, what a receiver accepts, the urgent
// byte and the consumer-update window. One home for both sides of the project: the analyzer's
// tracker judges a capture with them (anomalies) and the endpoint's connection judges its peer
// with them (abort). Pure functions over numbers and cursors; no state.

import type { CdcCursor } from './cdc.js';

// ---- cursor arithmetic ----

/**
 * Bytes between two cursors on a ring of `ringSize` bytes, as Linux `smc_curs_diff`:
 * same wrap → new.count − old.count; different wrap → (ringSize − old.count) + new.count;
 * never negative. Handles one wrap step only (larger jumps are a protocol anomaly).
 */
export function cursorDiff(old: CdcCursor, cur: CdcCursor, ringSize: number): number {
  const d = old.wrap !== cur.wrap ? ringSize - old.count + cur.count : cur.count - old.count;
  return d > 0 ? d : 0;
}

/**
 * Signed distance in bytes from `old` to `cur` counting whole wraps (16-bit serial arithmetic on
 * the wrap sequence): (Δwrap)·ringSize + Δcount. Negative when `cur` is behind `old`.
 * Use to detect multi-wrap jumps that cursorDiff() cannot express.
 */
export function cursorDistance(old: CdcCursor, cur: CdcCursor, ringSize: number): number {
  const dw = (((cur.wrap - old.wrap) & 0xffff) << 16) >> 16;
  return dw * ringSize + (cur.count - old.count);
}

/** The wire cursor of a byte total on a ring (the wrap sequence is 16 bits). */
export function cursorAt(total: number, ringSize: number): CdcCursor {
  return { wrap: Math.floor(total / ringSize) & 0xffff, count: total % ringSize };
}

/**
 * True when `cur` is more than one wrap ahead of `old`. Linux moves a cursor at most one wrap
 * per CDC (the ring never holds more than one ring of unconsumed data), so this only happens
 * when CDCs are missing (a capture gap) or the sender is broken.
 */
export function movedMultiWrap(old: CdcCursor, cur: CdcCursor): boolean {
  const dw = (cur.wrap - old.wrap) & 0xffff;
  return dw > 1 && seqNewer(cur.wrap, old.wrap);
}

/** True when a received cursor's count is no position in a ring of `ringSize` bytes. */
export function cursorOutOfRing(c: CdcCursor, ringSize: number): boolean {
  return c.count >= ringSize;
}

/**
 * The writer may be at most one ring ahead of what the reader consumed; beyond that it would
 * overwrite unread data (linear byte totals of one direction).
 */
export function overrunBytes(prodTotal: number, consTotal: number, ringSize: number): number {
  const over = prodTotal - consTotal - ringSize;
  return over > 0 ? over : 0;
}

// ---- sequence numbers ----

/** 16-bit serial-number compare: true when sequence `a` is newer than `b` (Linux: !smc_cdc_before(a, b) && a != b). */
export function seqNewer(a: number, b: number): boolean {
  const d = (((a - b) & 0xffff) << 16) >> 16;
  return d > 0;
}

/**
 * A received sequence number against the last one accepted from that sender: 'next' (+1),
 * 'gap' (newer, CDCs missing: only a capture can lack them; RC delivers every one), 'stale'
 * (not newer: a replay after failover — Linux drops it), or 'first' when none was seen.
 */
export function seqCheck(last: number | undefined, seq: number): 'first' | 'next' | 'gap' | 'stale' {
  if (last === undefined) return 'first';
  if (seq === ((last + 1) & 0xffff)) return 'next';
  return seqNewer(seq, last) ? 'gap' : 'stale';
}

/**
 * Failover validation (Linux smc_cdc_msg_validate): the CDC names the sender's last
 * acknowledged sequence number; a number newer than the last one received means CDCs were lost
 * with the old link and the connection is out of sync (Linux aborts it).
 */
export function validationOutOfSync(lastReceived: number, validationSeq: number): boolean {
  return seqNewer(validationSeq, lastReceived);
}

// ---- urgent data and the window ----

/**
 * Offset (byte total) of the urgent byte announced by a CDC with urg_data_present: the last
 * byte before its producer cursor (Linux smc_cdc_handle_urg_data_arrival).
 */
export function urgentByteAt(prodTotalAfter: number): number {
  return prodTotalAfter - 1;
}

/** Linux SOCK_MIN_SNDBUF / 2 (2 × TCP_SKB_MIN_TRUESIZE / 2): the smallest update limit. */
const MIN_UPDATE_LIMIT = 2304;

/**
 * Consumed bytes after which the reader announces its consumer cursor unasked (Linux
 * rmbe_update_limit = max(RMBE/10, SOCK_MIN_SNDBUF/2), used by smc_tx_consumer_update).
 */
export function consumerUpdateLimit(rmbeSize: number): number {
  return Math.max(Math.floor(rmbeSize / 10), MIN_UPDATE_LIMIT);
}
