// LLC request/response pairing as real captures show it. A request is answered by the peer's
// response of the same kind on any link of the group (Linux may answer on another link), a
// REQUEST ADD LINK by the peer starting an ADD LINK, a DELETE LINK also by the peer's own
// DELETE LINK of the same link (both sides deleting it), and a DELETE LINK of the whole group
// by nothing. A capture point may reorder a few frames, so a response seen shortly *before*
// its request still pairs; a response with no request at all (capture began mid-flow) is
// ignored. A request left unanswered is overdue once the protocol's timeout (2 s,
// SMC_LLC_WAIT_TIME) elapsed inside the capture; at the end of a capture that stops earlier it
// is only a note.

import type { LlcMessage } from '../wire/llc.js';
import type { Link, LinkGroup } from './model.js';

/** RFC 7609 Appendix C / Linux SMC_LLC_WAIT_TIME: LLC responses are due within 2 s. */
const LLC_TIMEOUT_NS = 2_000_000_000n;
/** How far a response may precede its request in capture order (capture-point reordering). */
const REORDER_NS = 50_000_000n;

export type LlcKind = LlcMessage['kind'];

export interface LlcRequest {
  lg: LinkGroup;
  link: Link;
  /** Sender end: 0 client side, 1 server side of the group. */
  from: 0 | 1;
  kind: LlcKind;
  /** DELETE LINK: the link id it names. */
  linkId?: number;
  frame: number;
  tsNs: bigint;
}

interface EarlyResponse { lg: LinkGroup; from: 0 | 1; kind: LlcKind; tsNs: bigint }

export interface Unanswered { req: LlcRequest; overdue: boolean }

/** What expire() returns when nothing expired (never changed). */
const NONE_EXPIRED: Unanswered[] = Object.freeze([]) as unknown as Unanswered[];
/** Later than any capture's time: nothing is due. */
const NEVER = 1n << 80n;

export class LlcPairing {
  private readonly pending: LlcRequest[] = [];
  private readonly early: EarlyResponse[] = [];
  /** Nothing expires up to this time (no list and no BigInt arithmetic per frame until then);
   *  may be earlier than the first real deadline (answered requests are not taken out of it). */
  private due = NEVER;
  /** Requests answered before they were seen (reordered capture), for tests and the summary. */
  reordered = 0;

  /** Whether a message of this kind expects an answer at all. */
  static expectsAnswer(m: LlcMessage): boolean {
    return !m.response && !(m.kind === 'delete_link' && m.all);
  }

  request(r: LlcRequest): void {
    // The answer may already be here (reordered): a response of the same kind from the peer
    // just before, or (REQUEST ADD LINK) the peer's ADD LINK.
    const i = this.earlyAnswer(r);
    if (i >= 0) { this.early.splice(i, 1); this.reordered++; return; }
    // A DELETE LINK crossing the peer's DELETE LINK of the same link answers both.
    if (r.kind === 'delete_link') {
      const j = this.crossingDelete(r);
      if (j >= 0) { this.pending.splice(j, 1); return; }
    }
    this.pending.push(r);
    this.dueBy(r.tsNs + LLC_TIMEOUT_NS);
  }

  // The searches below are plain loops that test the group first: `early` holds up to 64
  // responses of every group (each ADD LINK that answered no REQUEST ADD LINK is one), and a
  // closure per entry per request was most of an LLC request's cost on captures with thousands
  // of groups.

  /** The first early response that answers `r`, or -1. */
  private earlyAnswer(r: LlcRequest): number {
    const early = this.early;
    for (let i = 0; i < early.length; i++) {
      const e = early[i]!;
      if (e.lg === r.lg && e.from !== r.from && answers(e.kind, r.kind) && r.tsNs - e.tsNs <= REORDER_NS) return i;
    }
    return -1;
  }

  /** The first pending DELETE LINK of the peer for the same link as `r`, or -1. */
  private crossingDelete(r: LlcRequest): number {
    const pending = this.pending;
    for (let j = 0; j < pending.length; j++) {
      const p = pending[j]!;
      if (p.lg === r.lg && p.from !== r.from && p.kind === 'delete_link' && p.linkId === r.linkId) return j;
    }
    return -1;
  }

  /** The first pending request of `lg` from the peer of `from` that `kind` answers, or -1. */
  private pendingAnswered(lg: LinkGroup, from: 0 | 1, kind: LlcKind): number {
    const pending = this.pending;
    for (let i = 0; i < pending.length; i++) {
      const p = pending[i]!;
      if (p.lg === lg && p.from !== from && answers(kind, p.kind)) return i;
    }
    return -1;
  }

  private dueBy(t: bigint): void { if (t < this.due) this.due = t; }

  /** A response (or an answering request) from `from`; returns the request it answers. */
  answer(lg: LinkGroup, from: 0 | 1, kind: LlcKind, tsNs: bigint): LlcRequest | undefined {
    const i = this.pendingAnswered(lg, from, kind);
    if (i >= 0) return this.pending.splice(i, 1)[0];
    this.early.push({ lg, from, kind, tsNs });
    this.dueBy(tsNs + REORDER_NS);
    if (this.early.length > 64) this.early.shift();
    return undefined;
  }

  /** An ADD LINK request answers a pending REQUEST ADD LINK of the peer (not remembered otherwise). */
  answerRequestAddLink(lg: LinkGroup, from: 0 | 1, tsNs: bigint): LlcRequest | undefined {
    // (answers('request_add_link', k) holds for k = 'request_add_link' only)
    const i = this.pendingAnswered(lg, from, 'request_add_link');
    if (i >= 0) return this.pending.splice(i, 1)[0];
    this.early.push({ lg, from, kind: 'add_link', tsNs });
    this.dueBy(tsNs + REORDER_NS);
    return undefined;
  }

  /** Whether expire(`now`, false) may find anything (false: it would return nothing). */
  mayExpire(now: bigint): boolean { return now > this.due; }

  /** Requests whose timeout elapsed by `now`, or (final) every request still open. */
  expire(now: bigint, final: boolean): Unanswered[] {
    if (!final && now <= this.due) return NONE_EXPIRED;
    const out: Unanswered[] = [];
    let due = NEVER;
    for (let i = this.early.length - 1; i >= 0; i--) {
      const t = this.early[i]!.tsNs + REORDER_NS;
      if (now > t) this.early.splice(i, 1);
      else if (t < due) due = t;
    }
    for (let i = 0; i < this.pending.length;) {
      const p = this.pending[i]!;
      const t = p.tsNs + LLC_TIMEOUT_NS;
      const overdue = now > t;
      if (overdue || final) { this.pending.splice(i, 1); out.push({ req: p, overdue }); } else { i++; if (t < due) due = t; }
    }
    this.due = due;
    return out.length === 0 ? NONE_EXPIRED : out;
  }

  /** Drop the requests of a group that ended (nobody answers on a terminated group). */
  forget(lg: LinkGroup): void {
    for (let i = this.pending.length - 1; i >= 0; i--) if (this.pending[i]!.lg === lg && this.pending[i]!.kind !== 'test_link') this.pending.splice(i, 1);
  }
}

/** Does a message of kind `resp` (a response, or an answering request) answer a request of `req`? */
function answers(resp: LlcKind, req: LlcKind): boolean {
  return resp === req || (req === 'request_add_link' && resp === 'add_link');
}
