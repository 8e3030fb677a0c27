// One link (QP pair) of a link group, as the model's Link, in fewer objects: its per-direction
// pairs (next PSN, packets, bytes, the WRITE in progress, PSN runs, retransmissions, unclaimed
// WRITE) are two fields each instead of an array each (nine arrays of two took 64 bytes apiece),
// and the last frame from each end is its frame number and the frame's own time (kept by
// reference: nothing allocated per frame), not an object. Reads of the pairs
// give new arrays (the summary and the diagnosis read them once or twice per link); the tracker
// changes them through the methods. What most links never have (a deletion or loss, an
// unanswered TEST LINK, retransmissions, PSN gaps, NAKs, unclaimed WRITEs, RMB entries waiting
// for the link to come up) lives in one side object made on first use: 12 fields fewer, 88
// bytes of each link when every connection has its own link group.

import type { Link, LinkGroup, LinkSent, QpEnd, RetxStats, WriteCont } from './model.js';
import { PsnRuns, type PsnRing } from './psnruns.js';

type Stamp = { frame: number; tsNs: bigint };
type Unclaimed = { rkey: number; va: bigint };

/** The fields most links never set. */
class Rare {
  deleted: Link['deleted'] = undefined;
  lost: Link['lost'] = undefined;
  testLinkUnanswered: Link['testLinkUnanswered'] = undefined;
  retransmits = 0;
  psnGaps = 0;
  naks = 0;
  rnrNaks = 0;
  rx0: RetxStats | undefined = undefined;
  rx1: RetxStats | undefined = undefined;
  un0: Unclaimed | undefined = undefined;
  un1: Unclaimed | undefined = undefined;
  rmbKeys: number[] | undefined = undefined;
}

/** What a link without rare fields points at: never written (the first rare field set gives
 *  the link its own). A shared object rather than undefined, so that every read of a rare field
 *  (retxOf on every frame) is a load with feedback from the first frame on: reads through
 *  undefined left none, and the first link with a Rare threw away the optimised frame path. */
const NO_RARE = new Rare();

// Each field of a Rare written once with another value, on a Rare nobody keeps: V8 treats a
// field that was never changed since its object was made as a constant, and the first link that
// got a retransmission then threw away the optimised code of every function that read the field
// through NO_RARE (the tracker's frame path, measured with --trace-deopt).
{
  const r = new Rare();
  r.deleted = r.lost = r.testLinkUnanswered = r.rx0 = r.rx1 = r.un0 = r.un1 = r.rmbKeys = undefined;
  r.retransmits = r.psnGaps = r.naks = r.rnrNaks = 1;
  const x = {} as never;
  r.deleted = r.lost = r.testLinkUnanswered = r.rx0 = r.rx1 = r.un0 = r.un1 = r.rmbKeys = x;
}

export class LinkState implements Link {
  id = 0;
  uid: number | undefined = undefined;
  confirmedFrame: number | undefined = undefined;
  smcMessages = 0;
  private r: Rare = NO_RARE;
  private np0: number | undefined = undefined;
  private np1: number | undefined = undefined;
  private pk0 = 0;
  private pk1 = 0;
  private by0 = 0;
  private by1 = 0;
  private wr0: WriteCont | undefined = undefined;
  private wr1: WriteCont | undefined = undefined;
  /** PSN rings per direction (-1: none yet). */
  private pr0: PsnRing = -1;
  private pr1: PsnRing = -1;
  /** Last frame from each end (-1: none yet) and its time. */
  private lf0 = -1;
  private lf1 = -1;
  private lt0 = 0n;
  private lt1 = 0n;

  // the two ends' QPs (GID, QPN, MAC, first PSN) as fields: two objects and an array were
  // 288 bytes of each link
  private g0: string;
  private g1: string;
  private q0: number | undefined;
  private q1: number | undefined;
  private m0: string | undefined;
  private m1: string | undefined;
  private p0: number | undefined;
  private p1: number | undefined;

  constructor(public lg: LinkGroup, public name: string, readonly serial: number, ends: [QpEnd, QpEnd],
    public mtu: number, public state: Link['state'], public firstFrame: number, public sent: [LinkSent, LinkSent]) {
    const [a, b] = ends;
    this.g0 = a.gid; this.q0 = a.qpn; this.m0 = a.mac; this.p0 = a.psn;
    this.g1 = b.gid; this.q1 = b.qpn; this.m1 = b.mac; this.p1 = b.psn;
  }

  /** ends[0] = client side, ends[1] = server side, as the model's objects (made on each read;
   *  change them with setEnd / setQpn). */
  get ends(): [QpEnd, QpEnd] { return [this.end(0), this.end(1)]; }
  /** End `i` as the model's object (its keys in the order the tracker always gave them). */
  end(i: 0 | 1): QpEnd {
    return i === 0 ? { gid: this.g0, qpn: this.q0, mac: this.m0, psn: this.p0 } : { gid: this.g1, qpn: this.q1, mac: this.m1, psn: this.p1 };
  }
  gidOf(i: 0 | 1): string { return i === 0 ? this.g0 : this.g1; }
  qpnOf(i: 0 | 1): number | undefined { return i === 0 ? this.q0 : this.q1; }
  setEnd(i: 0 | 1, e: QpEnd): void {
    if (i === 0) { this.g0 = e.gid; this.q0 = e.qpn; this.m0 = e.mac; this.p0 = e.psn; } else { this.g1 = e.gid; this.q1 = e.qpn; this.m1 = e.mac; this.p1 = e.psn; }
  }
  setQpn(i: 0 | 1, qpn: number): void { if (i === 0) this.q0 = qpn; else this.q1 = qpn; }

  /** The side object, made now if missing (only when a rare field is set). */
  private get rare(): Rare { return this.r === NO_RARE ? (this.r = new Rare()) : this.r; }

  get deleted(): Link['deleted'] { return this.r.deleted; }
  set deleted(v: Link['deleted']) { if (v !== undefined || this.r !== NO_RARE) this.rare.deleted = v; }
  get lost(): Link['lost'] { return this.r.lost; }
  set lost(v: Link['lost']) { if (v !== undefined || this.r !== NO_RARE) this.rare.lost = v; }
  get testLinkUnanswered(): Link['testLinkUnanswered'] { return this.r.testLinkUnanswered; }
  set testLinkUnanswered(v: Link['testLinkUnanswered']) { if (v !== undefined || this.r !== NO_RARE) this.rare.testLinkUnanswered = v; }
  get retransmits(): number { return this.r.retransmits; }
  set retransmits(v: number) { if (v !== 0 || this.r !== NO_RARE) this.rare.retransmits = v; }
  get psnGaps(): number { return this.r.psnGaps; }
  set psnGaps(v: number) { if (v !== 0 || this.r !== NO_RARE) this.rare.psnGaps = v; }
  get naks(): number { return this.r.naks; }
  set naks(v: number) { if (v !== 0 || this.r !== NO_RARE) this.rare.naks = v; }
  get rnrNaks(): number { return this.r.rnrNaks; }
  set rnrNaks(v: number) { if (v !== 0 || this.r !== NO_RARE) this.rare.rnrNaks = v; }
  /** The tracker's RMB entries made for this link by LLC rkey lists while it was not up yet (to
   *  drop them with a link that can never carry a frame: an ADD LINK rejected). */
  get rmbKeys(): number[] | undefined { return this.r.rmbKeys; }
  set rmbKeys(v: number[] | undefined) { if (v !== undefined || this.r !== NO_RARE) this.rare.rmbKeys = v; }

  get nextPsn(): [number | undefined, number | undefined] { return [this.np0, this.np1]; }
  set nextPsn(v: [number | undefined, number | undefined]) { this.np0 = v[0]; this.np1 = v[1]; }
  get packets(): [number, number] { return [this.pk0, this.pk1]; }
  get bytes(): [number, number] { return [this.by0, this.by1]; }
  get write(): [WriteCont | undefined, WriteCont | undefined] { return [this.wr0, this.wr1]; }
  get psnConn(): [PsnRuns | undefined, PsnRuns | undefined] {
    return [this.pr0 < 0 ? undefined : new PsnRuns(this.pr0), this.pr1 < 0 ? undefined : new PsnRuns(this.pr1)];
  }
  get retx(): [RetxStats | undefined, RetxStats | undefined] { return [this.r.rx0, this.r.rx1]; }
  get unclaimed(): [Unclaimed | undefined, Unclaimed | undefined] { return [this.r.un0, this.r.un1]; }
  get lastFrom(): [Stamp | undefined, Stamp | undefined] { return [this.lastFromOf(0), this.lastFromOf(1)]; }

  /** Next expected request PSN from end `dir`. */
  nextPsnOf(dir: 0 | 1): number | undefined { return dir === 0 ? this.np0 : this.np1; }
  setNextPsn(dir: 0 | 1, psn: number | undefined): void { if (dir === 0) this.np0 = psn; else this.np1 = psn; }
  /** A packet of `bytes` payload bytes from end `dir`. */
  count(dir: 0 | 1, packets: number, bytes: number): void {
    if (dir === 0) { this.pk0 += packets; this.by0 += bytes; } else { this.pk1 += packets; this.by1 += bytes; }
  }
  writeOf(dir: 0 | 1): WriteCont | undefined { return dir === 0 ? this.wr0 : this.wr1; }
  setWrite(dir: 0 | 1, w: WriteCont | undefined): void { if (dir === 0) this.wr0 = w; else this.wr1 = w; }
  /** The PSN ring of direction `dir` (-1: none yet). */
  psnRingOf(dir: 0 | 1): PsnRing { return dir === 0 ? this.pr0 : this.pr1; }
  setPsnRing(dir: 0 | 1, r: PsnRing): void { if (dir === 0) this.pr0 = r; else this.pr1 = r; }
  retxOf(dir: 0 | 1): RetxStats | undefined { return dir === 0 ? this.r.rx0 : this.r.rx1; }
  setRetx(dir: 0 | 1, s: RetxStats): void { if (dir === 0) this.rare.rx0 = s; else this.rare.rx1 = s; }
  unclaimedOf(dir: 0 | 1): Unclaimed | undefined { return dir === 0 ? this.r.un0 : this.r.un1; }
  setUnclaimed(dir: 0 | 1, u: Unclaimed | undefined): void {
    if (u === undefined && this.r === NO_RARE) return;
    if (dir === 0) this.rare.un0 = u; else this.rare.un1 = u;
  }

  /** End `dir` sent frame `frame` at `tsNs`. */
  seen(dir: 0 | 1, frame: number, tsNs: bigint): void {
    if (dir === 0) { this.lf0 = frame; this.lt0 = tsNs; } else { this.lf1 = frame; this.lt1 = tsNs; }
  }
  /** The last frame end `dir` sent, as the model's object (made on each read). */
  lastFromOf(dir: 0 | 1): Stamp | undefined {
    const f = dir === 0 ? this.lf0 : this.lf1;
    if (f < 0) return undefined;
    return { frame: f, tsNs: dir === 0 ? this.lt0 : this.lt1 };
  }
  /** The time of the last frame end `dir` sent, without an object (undefined: none yet). */
  lastTsOf(dir: 0 | 1): bigint | undefined {
    const f = dir === 0 ? this.lf0 : this.lf1;
    if (f < 0) return undefined;
    return dir === 0 ? this.lt0 : this.lt1;
  }
}
