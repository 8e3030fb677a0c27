// Which SMC connection of a link group a 32-bit value names: a CDC's alert token (link group,
// writer direction, token; valid on every link of the group) or an RDMA WRITE's rkey as the CLC
// announced it (the link the CLC named, writer direction, rkey). The connections' own sides hold
// these values, so a group with few connections is simply scanned, newest first (no map entry,
// key or record per connection: 100 000 connections kept 200 000 token entries and 125 000 RMB
// records in global maps, about 30 MB); a group that grows past SCAN_MAX connections (a
// long-lived group carrying many short connections) gets a map per slot, keyed by the value as a
// small integer. A value announced again (tokens and RMBs are reused) names the latest connection.

import type { Link, LinkGroup, SmcConn } from './model.js';
import type { SmcState } from './smcconn.js';

/** Up to this many connections a group is scanned. */
const SCAN_MAX = 16;

/** The value connection `c` announced for WRITEs or CDCs of direction `dir` in `slot`'s scope
 *  (`link`: the link a WRITE travels on), or undefined when it announced none there. */
export type ConnKey = (c: SmcState, dir: 0 | 1, link: Link) => number | undefined;

export class ConnIndex {
  /** By slot (a link group's or link's number * 2 + direction), once its group outgrew a scan. */
  private readonly big: (Map<number, SmcConn> | undefined)[] = [];

  constructor(private readonly keyOf: ConnKey) {}

  /** The connection of `lg` that announced `value` for `dir` (on `link`), latest first. */
  get(lg: LinkGroup, slot: number, dir: 0 | 1, link: Link, value: number): SmcConn | undefined {
    const m = this.big[slot];
    if (m !== undefined) return m.get(value | 0);
    const cs = lg.conns;
    if (cs.length > SCAN_MAX) return this.grow(lg, slot, dir, link).get(value | 0);
    for (let i = cs.length - 1; i >= 0; i--) if (this.keyOf(cs[i] as SmcState, dir, link) === value) return cs[i];
    return undefined;
  }

  /** `conn` (already in its group's list) announced `value` in `slot`. */
  set(slot: number, value: number, conn: SmcConn): void {
    this.big[slot]?.set(value | 0, conn);
  }

  /** `conn` left its group (declined after its Confirm): its `value` in `slot` names nothing. */
  forget(slot: number, value: number | undefined, conn: SmcConn): void {
    const m = this.big[slot];
    if (m !== undefined && value !== undefined && m.get(value | 0) === conn) m.delete(value | 0);
  }

  /** The slot's map, built from the group's connections in order (later ones win). */
  private grow(lg: LinkGroup, slot: number, dir: 0 | 1, link: Link): Map<number, SmcConn> {
    const m = new Map<number, SmcConn>();
    for (const c of lg.conns) {
      const v = this.keyOf(c as SmcState, dir, link);
      if (v !== undefined) m.set(v | 0, c);
    }
    this.big[slot] = m;
    return m;
  }
}
