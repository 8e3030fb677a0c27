// One link (QP pair) of a link group, as the model's Link, in fewer objects: its per-direction
// pairs (next PSN, packets, bytes, the WRITE in progress, PSN runs, retransmissions, unclaimed
// WRITE) are two fields each instead of an array each (nine arrays of two took 64 bytes apiece),
// and the last frame from each end is its frame number and the frame's own time (kept by
// reference: nothing allocated per frame), not an object. Reads of the pairs
// give new arrays (the summary and the diagnosis read them once or twice per link); the tracker
// changes them through the methods.

import type { Link, LinkGroup, LinkSent, QpEnd, RetxStats, WriteCont } from './model.js';
import type { PsnRuns } from './psnruns.js';

type Stamp = { frame: number; tsNs: bigint };
type Unclaimed = { rkey: number; va: bigint };

export class LinkState implements Link {
  id = 0;
  uid: number | undefined = undefined;
  confirmedFrame: number | undefined = undefined;
  deleted: Link['deleted'] = undefined;
  lost: Link['lost'] = undefined;
  testLinkUnanswered: Link['testLinkUnanswered'] = undefined;
  smcMessages = 0;
  retransmits = 0;
  psnGaps = 0;
  naks = 0;
  rnrNaks = 0;
  private np0: number | undefined = undefined;
  private np1: number | undefined = undefined;
  private pk0 = 0;
  private pk1 = 0;
  private by0 = 0;
  private by1 = 0;
  private wr0: WriteCont | undefined = undefined;
  private wr1: WriteCont | undefined = undefined;
  private pr0: PsnRuns | undefined = undefined;
  private pr1: PsnRuns | undefined = undefined;
  private rx0: RetxStats | undefined = undefined;
  private rx1: RetxStats | undefined = undefined;
  private un0: Unclaimed | undefined = undefined;
  private un1: Unclaimed | undefined = undefined;
  /** The tracker's RMB entries made for this link by LLC rkey lists while it was not up yet (to
   *  drop them with a link that can never carry a frame: an ADD LINK rejected). */
  rmbKeys: number[] | undefined = undefined;
  /** Last frame from each end (-1: none yet) and its time. */
  private lf0 = -1;
  private lf1 = -1;
  private lt0 = 0n;
  private lt1 = 0n;

  constructor(public lg: LinkGroup, public name: string, readonly serial: number, readonly ends: [QpEnd, QpEnd],
    public mtu: number, public state: Link['state'], public firstFrame: number, public sent: [LinkSent, LinkSent]) {}

  get nextPsn(): [number | undefined, number | undefined] { return [this.np0, this.np1]; }
  set nextPsn(v: [number | undefined, number | undefined]) { this.np0 = v[0]; this.np1 = v[1]; }
  get packets(): [number, number] { return [this.pk0, this.pk1]; }
  get bytes(): [number, number] { return [this.by0, this.by1]; }
  get write(): [WriteCont | undefined, WriteCont | undefined] { return [this.wr0, this.wr1]; }
  get psnConn(): [PsnRuns | undefined, PsnRuns | undefined] { return [this.pr0, this.pr1]; }
  get retx(): [RetxStats | undefined, RetxStats | undefined] { return [this.rx0, this.rx1]; }
  get unclaimed(): [Unclaimed | undefined, Unclaimed | undefined] { return [this.un0, this.un1]; }
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
  psnRunsOf(dir: 0 | 1): PsnRuns | undefined { return dir === 0 ? this.pr0 : this.pr1; }
  setPsnRuns(dir: 0 | 1, r: PsnRuns): void { if (dir === 0) this.pr0 = r; else this.pr1 = r; }
  retxOf(dir: 0 | 1): RetxStats | undefined { return dir === 0 ? this.rx0 : this.rx1; }
  setRetx(dir: 0 | 1, s: RetxStats): void { if (dir === 0) this.rx0 = s; else this.rx1 = s; }
  unclaimedOf(dir: 0 | 1): Unclaimed | undefined { return dir === 0 ? this.un0 : this.un1; }
  setUnclaimed(dir: 0 | 1, u: Unclaimed | undefined): void { if (dir === 0) this.un0 = u; else this.un1 = u; }

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
