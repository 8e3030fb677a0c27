// The link group's type over time, named as Linux names it (smc_core.h enum smc_lgr_type) and
// seen from the server side of the group, the side that adds links in Linux:
//   SINGLE            one active link
//   SYMMETRIC         two active links on distinct devices at both ends
//   ASYMMETRIC_LOCAL  two active links sharing the server's device (the server has one device up)
//   ASYMMETRIC_PEER   two active links sharing the client's device (the client has one device up)
// A link counts once its CONFIRM LINK exchange completed and until it is deleted or lost.

import type { LgEvent, LgType, LinkGroup } from './model.js';
import { flat, stringPool } from './intern.js';
import { append } from './lists.js';
import { GroupState, type Sentence } from './group.js';

/** Active links of `lg` (a loop: no list per link change). */
function activeLinks(lg: LinkGroup): number {
  const ls = lg.links;
  let n = 0;
  for (let i = 0; i < ls.length; i++) if (ls[i]!.state === 'active') n++;
  return n;
}

function lgTypeOf(lg: LinkGroup, active: number): LgType {
  if (active === 0) return 'NONE';
  if (active === 1) return 'SINGLE';
  const up = lg.links.filter((l) => l.state === 'active');
  const clientGids = new Set(up.map((l) => l.ends[0].gid));
  const serverGids = new Set(up.map((l) => l.ends[1].gid));
  if (serverGids.size < up.length) return 'ASYMMETRIC_LOCAL';
  if (clientGids.size < up.length) return 'ASYMMETRIC_PEER';
  return 'SYMMETRIC';
}

/** Record the type if it changed (after a link came up, went down or was deleted). */
export function noteType(lg: LinkGroup, frame: number, tsNs: bigint): void {
  // A third link is transient (Linux adds the symmetric link before deleting the asymmetric
  // one): the type changes when the old link goes.
  const active = activeLinks(lg);
  if (active > 2) return;
  const t = lgTypeOf(lg, active);
  const g = lg instanceof GroupState ? lg : undefined;
  const last = g ? g.lastType() : lg.types[lg.types.length - 1]?.type;
  if (last === t) return;
  // NONE between a link going and the group ending is not a type Linux reports.
  if (t === 'NONE' && last !== undefined) return;
  if (g) g.addType(t, frame, tsNs);
  else lg.types = append(lg.types, { type: t, frame, tsNs });
}

/** Event texts seen recently: the same sentence in many groups is kept once; unique texts
 *  pass through a small pool. */
const sharedText = stringPool(1024);

export function lgEvent(lg: LinkGroup, e: LgEvent): void {
  // kept until the end: flat strings, not the template literal's tree of parts
  e.text = sharedText(e.text);
  if (e.link !== undefined) e.link = flat(e.link);
  if (lg instanceof GroupState) lg.addEvent(e);
  else lg.events = append(lg.events, e);
}

export type { Sentence };

/** An event of `link` (its name now) by `by` whose text is one of the common sentences (what
 *  happened follows from it: a first link or an ADD LINK is `link-added`, a confirmation
 *  `link-confirmed`, a rejection `link-rejected`); made into text when read (group.ts). */
export function lgEventSaid(lg: LinkGroup, frame: number, tsNs: bigint, link: string, by: 'client' | 'server', said: Sentence): void {
  if (lg instanceof GroupState) { lg.addSentence(frame, tsNs, link, by, said); return; }
  const probe = new GroupState({ base: tsNs }, lg.id, lg.complete, lg.firstFrame);
  probe.addSentence(frame, tsNs, link, by, said);
  lg.events = append(lg.events, probe.events[0]!);
}

/** "SINGLE → SYMMETRIC → SINGLE": the type history in one line. */
export function typeHistory(lg: LinkGroup): string {
  return lg.types.map((t) => t.type).join(' → ') || '?';
}
