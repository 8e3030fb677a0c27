// Which SMC connection a CDC's alert token names: (link group, writer direction, token). A
// token is the receiver's, valid on every link of its group (DESIGN.md "Correlation keys"). The
// connections' own sides hold the tokens, so a group with few connections is simply scanned
// (no map entry and no key per connection: 100 000 connections kept 200 000 entries in one
// global map, about 10 MB); a group that grows past SCAN_MAX connections (a long-lived group
// carrying many short connections) gets a map per direction, keyed by the token as a small
// integer.

import type { LinkGroup, SmcConn } from './model.js';
import type { SmcState } from './smcconn.js';

/** Up to this many connections a group is scanned, newest first. */
const SCAN_MAX = 16;

export class TokenIndex {
  /** Per link group id * 2 + writer direction, once the group outgrew a scan. */
  private readonly big: (Map<number, SmcConn> | undefined)[] = [];

  /** The connection a CDC written in direction `dir` with `token` belongs to: the one whose
   *  receiving side (1 - dir) announced the token, the latest one when a token was reused. */
  get(lg: LinkGroup, dir: 0 | 1, token: number): SmcConn | undefined {
    const m = this.big[lg.id * 2 + dir];
    if (m !== undefined) return m.get(token | 0);
    const cs = lg.conns;
    if (cs.length > SCAN_MAX) return this.grow(lg, dir).get(token | 0);
    const recv = (1 - dir) as 0 | 1;
    for (let i = cs.length - 1; i >= 0; i--) if ((cs[i] as SmcState).tokenOf(recv) === token) return cs[i];
    return undefined;
  }

  /** `conn` (already in lg.conns) was given `token` for CDCs written in direction `dir`. */
  set(lg: LinkGroup, dir: 0 | 1, token: number, conn: SmcConn): void {
    this.big[lg.id * 2 + dir]?.set(token | 0, conn);
  }

  /** `conn` left its group (declined after its Confirm): its tokens name nothing any more. */
  forget(lg: LinkGroup, conn: SmcConn): void {
    for (const dir of [0, 1] as const) {
      const m = this.big[lg.id * 2 + dir];
      const t = (conn as SmcState).tokenOf((1 - dir) as 0 | 1);
      if (m !== undefined && t !== undefined && m.get(t | 0) === conn) m.delete(t | 0);
    }
  }

  /** The group's map for `dir`, built from its connections in order (later ones win). */
  private grow(lg: LinkGroup, dir: 0 | 1): Map<number, SmcConn> {
    const m = new Map<number, SmcConn>();
    const recv = (1 - dir) as 0 | 1;
    for (const c of lg.conns) {
      const t = (c as SmcState).tokenOf(recv);
      if (t !== undefined) m.set(t | 0, c);
    }
    this.big[lg.id * 2 + dir] = m;
    return m;
  }
}
