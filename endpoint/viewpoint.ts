// Re-pointing a wire-layer view on the data path without its reset().
//
// The wire layer (dissectors/wire/views/field.ts) compiles each view class's reset() from the
// same source text, and V8 gives functions compiled from one source one shared type feedback:
// reset()'s three stores see every view class the process uses and are megamorphic (a generic
// store IC call each; RxPacket's three resets per received packet were 1.6 % of a client's user
// time in an rr profile, docs/uroce.md round 11). The stores here are this function's own and
// see only the few view classes the endpoint's hot paths re-point.

/** view.reset(buf, off, end) for an `end` within `buf` (the caller's packet or message). */
export function pointView(v: { buf: Uint8Array; off: number; end: number }, buf: Uint8Array, off: number, end: number): void {
  v.buf = buf;
  v.off = off;
  v.end = end;
}
