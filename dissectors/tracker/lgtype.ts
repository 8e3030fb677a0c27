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
import { hexQp } from '../wire/common.js';

export function lgTypeOf(lg: LinkGroup): LgType {
  const up = lg.links.filter((l) => l.state === 'active');
  if (up.length === 0) return 'NONE';
  if (up.length === 1) return 'SINGLE';
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
  if (lg.links.filter((l) => l.state === 'active').length > 2) return;
  const t = lgTypeOf(lg);
  const last = lg.types[lg.types.length - 1];
  if (last?.type === t) return;
  // NONE between a link going and the group ending is not a type Linux reports.
  if (t === 'NONE' && lg.types.length > 0) return;
  lg.types = append(lg.types, { type: t, frame, tsNs });
}

/** Event texts seen recently: the same sentence in many groups (e.g. "ADD LINK of link 2
 *  rejected by the client" in each of 25 000 groups) is kept once; unique texts pass through
 *  a small pool. */
const sharedText = stringPool(1024);

export function lgEvent(lg: LinkGroup, e: LgEvent): void {
  // kept until the end: flat strings, not the template literal's tree of parts
  e.text = sharedText(e.text);
  if (e.link !== undefined) e.link = flat(e.link);
  lg.events = append(lg.events, e);
}

/** The sentences of the events nearly every group has, made when read: kept as text they took
 *  70–90 bytes per event, three per group. */
export type Sentence =
  | { kind: 'first-link'; conn: number }
  | { kind: 'confirmed' }
  | { kind: 'add-link'; gid: string; qpn: number };

const KINDS: readonly Sentence['kind'][] = ['first-link', 'confirmed', 'add-link'];

class SentenceEvent implements LgEvent {
  /** The sentence's kind and who said it in one number (kind * 2 + 1 when the server): two
   *  fields fewer, 16 bytes of each of three events per group. */
  private readonly code: number;
  constructor(readonly frame: number, readonly tsNs: bigint, readonly link: string, by: 'client' | 'server',
    kind: Sentence['kind'], private readonly s: string | undefined, private readonly n: number) {
    this.code = KINDS.indexOf(kind) * 2 + (by === 'server' ? 1 : 0);
  }

  private get kind(): Sentence['kind'] { return KINDS[this.code >> 1]!; }
  get by(): 'client' | 'server' { return (this.code & 1) === 1 ? 'server' : 'client'; }
  /** Follows from the sentence: a first link or an ADD LINK is a link added. */
  get what(): LgEvent['what'] { return this.kind === 'confirmed' ? 'link-confirmed' : 'link-added'; }

  get text(): string {
    switch (this.kind) {
      case 'first-link': return `first link proposed in the CLC handshake (connection ${this.n})`;
      case 'confirmed': return `${this.link} up (CONFIRM LINK answered by the ${this.by})`;
      default: return `ADD LINK ${this.link} proposed by the ${this.by} (${this.s!} QP ${hexQp(this.n)})`;
    }
  }

  /** The same JSON as the plain event objects. */
  toJSON(): LgEvent {
    return { frame: this.frame, tsNs: this.tsNs, what: this.what, link: this.link, by: this.by, text: this.text };
  }
}

/** An event of `link` (its name now) by `by` whose text is one of the common sentences (what
 *  happened follows from it: a first link or an ADD LINK is `link-added`, a confirmation
 *  `link-confirmed`). */
export function lgEventSaid(lg: LinkGroup, frame: number, tsNs: bigint, link: string, by: 'client' | 'server', said: Sentence): void {
  const s = said.kind === 'add-link' ? said.gid : undefined;
  const n = said.kind === 'first-link' ? said.conn : said.kind === 'add-link' ? said.qpn : 0;
  lg.events = append(lg.events, new SentenceEvent(frame, tsNs, flat(link), by, said.kind, s, n));
}

/** "SINGLE → SYMMETRIC → SINGLE": the type history in one line. */
export function typeHistory(lg: LinkGroup): string {
  return lg.types.map((t) => t.type).join(' → ') || '?';
}
