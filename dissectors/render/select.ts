// One SMC connection, link group or link across every view (`--conn`, `--lg`, `--link`): a BPF
// filter on the TCP ports would drop the connection's RoCE frames, so the selection is made on
// what the tracker knows about each frame (its link and connection) and on its tables.

import type { FrameNote, LinkGroup, TcpConn } from '../tracker/model.js';
import type { Tracker } from '../tracker/tracker.js';
import type { Diagnosis } from '../tracker/diagnosis.js';

export interface Selection {
  /** Connection index (as in --summary) or a 4-tuple "ip:port-ip:port" (either order). */
  conn?: number | string;
  lg?: number;
  /** Link name as in --summary, e.g. "LG1/L2". */
  link?: string;
}

export function parseSelection(o: { conn?: string; lg?: string; link?: string }): Selection | undefined {
  const s: Selection = {};
  if (o.conn !== undefined) s.conn = /^\d+$/.test(o.conn) ? Number(o.conn) : o.conn;
  if (o.lg !== undefined) s.lg = Number(o.lg.replace(/^LG/i, ''));
  if (o.link !== undefined) s.link = o.link.toUpperCase().replace(/^LG(\d+)\/L/, 'LG$1/L');
  return s.conn !== undefined || s.lg !== undefined || s.link !== undefined ? s : undefined;
}

/** The connection a selection names, once the tracker has seen it. */
function connOf(t: Tracker, sel: Selection): TcpConn | undefined {
  if (typeof sel.conn === 'number') return t.tcp[sel.conn - 1];
  if (typeof sel.conn !== 'string') return undefined;
  for (const c of t.tcp) {
    const a = `${c.client.ip}:${c.client.port}`, b = `${c.server.ip}:${c.server.port}`;
    if (sel.conn === `${a}-${b}` || sel.conn === `${b}-${a}`) return c;
  }
  return undefined;
}

/** Does the frame with this tracker note belong to the selection? */
export function frameSelected(t: Tracker, sel: Selection, note: FrameNote | undefined): boolean {
  if (!note) return false;
  if (sel.conn !== undefined) {
    const c = connOf(t, sel);
    return c !== undefined && note.conn === c.index;
  }
  if (sel.link !== undefined) return note.link === sel.link;
  if (sel.lg !== undefined) {
    if (note.link !== undefined) return note.link.startsWith(`LG${sel.lg}/`);
    return note.conn !== undefined && t.tcp[note.conn - 1]?.smc?.lg.id === sel.lg;
  }
  return true;
}

/** The parts of the tracked state a selection keeps, for --summary. */
export function selectState(t: Tracker, sel: Selection): { groups: Set<LinkGroup>; links: Set<string>; conns: Set<number> } {
  const c = sel.conn !== undefined ? connOf(t, sel) : undefined;
  const groups = new Set<LinkGroup>(), links = new Set<string>(), conns = new Set<number>();
  for (const g of t.groups) {
    const inLg = sel.lg !== undefined && g.id === sel.lg;
    const viaConn = c?.smc?.lg === g;
    for (const l of g.links) {
      const used = c?.smc ? (c.smc.link === l || c.smc.failovers.some((f) => f.from === l.name || f.to === l.name) || c.smc.dirs.some((d) => d.link === l.name)) : false;
      if (inLg || l.name === sel.link || used) { links.add(l.name); groups.add(g); }
    }
    if (inLg || viaConn) groups.add(g);
    for (const s of g.conns) {
      if (inLg || (sel.link !== undefined && (s.link?.name === sel.link || s.failovers.some((f) => f.from === sel.link || f.to === sel.link)))) conns.add(s.index);
    }
  }
  if (c) conns.add(c.index);
  return { groups, links, conns };
}

export function diagnosisSelected(d: Diagnosis, s: ReturnType<typeof selectState>): boolean {
  if (d.conn !== undefined) return s.conns.has(d.conn);
  if (d.link !== undefined) return s.links.has(d.link);
  if (d.lg !== undefined) return [...s.groups].some((g) => g.id === d.lg);
  return false;
}
