// One direction (writer → reader) of an SMC-R connection, as the model's SmcDir, in fewer
// objects: the tracker keeps two per connection for the whole capture (100 000 connections:
// 200 000). The cursors and the last CDC are kept as small integers and read back as the
// model's objects (made on each read: the summary reads them once); what few directions ever
// have (a blocked writer, stalls, urgent marks, the --follow stream …) lives in one side
// object made on first use.

import type { SmcDir, UrgentMark, WindowStall } from './model.js';
import type { RingStream } from './stream.js';
import { none } from './lists.js';

type Stamp = { frame: number; tsNs: bigint };

const DONE_WRITING = 1, CLOSED = 2, ABORTED = 4;
type Cursor = { wrap: number; count: number };

/** The fields most directions never set. */
interface Rare {
  consAhead: SmcDir['consAhead'];
  blockedSince: Stamp | undefined;
  urgentMarks: UrgentMark[];
  stalls: WindowStall[];
  stream: RingStream | undefined;
  lastConsMove: Stamp | undefined;
  lastProdMove: Stamp | undefined;
}

export class DirState implements SmcDir {
  seq: number | undefined = undefined;
  prodLinear = 0;
  consLinear = 0;
  cdcs = 0;
  writes = 0;
  writeBytes = 0;
  writerBlocked = 0;
  urgent = 0;
  link: string | undefined = undefined;
  /** The writer's first CDC sequence number seen and the gaps since (for the state comparison). */
  firstSeq: number | undefined = undefined;
  seqGaps = 0;
  lastWriteBlocked: boolean | undefined = undefined;
  /** DONE_WRITING | CLOSED | ABORTED */
  private flags = 0;
  /** Producer and consumer cursors (wrap -1: not known yet). */
  private pWrap: number;
  private pCount = 0;
  private cWrap: number;
  private cCount = 0;
  /** Last CDC of the writer (frame -1: none yet). */
  private lcFrame = -1;
  private lcTs = 0n;
  private rare: Rare | undefined = undefined;

  /** `fromStart`: the handshake was captured, so both cursors start at 0:0. */
  ringSize: number;

  constructor(ringSize: number, fromStart: boolean) {
    // a small integer field (a size computed as 2^n may arrive as a double: a boxed number each)
    this.ringSize = ringSize | 0;
    this.pWrap = fromStart ? 0 : -1;
    this.cWrap = fromStart ? 0 : -1;
  }

  get doneWriting(): boolean { return (this.flags & DONE_WRITING) !== 0; }
  set doneWriting(v: boolean) { this.flags = v ? this.flags | DONE_WRITING : this.flags & ~DONE_WRITING; }
  get closed(): boolean { return (this.flags & CLOSED) !== 0; }
  set closed(v: boolean) { this.flags = v ? this.flags | CLOSED : this.flags & ~CLOSED; }
  get aborted(): boolean { return (this.flags & ABORTED) !== 0; }
  set aborted(v: boolean) { this.flags = v ? this.flags | ABORTED : this.flags & ~ABORTED; }

  get prod(): Cursor | undefined { return this.pWrap < 0 ? undefined : { wrap: this.pWrap, count: this.pCount }; }
  set prod(v: Cursor | undefined) { this.pWrap = v ? v.wrap : -1; this.pCount = v ? v.count : 0; }
  get cons(): Cursor | undefined { return this.cWrap < 0 ? undefined : { wrap: this.cWrap, count: this.cCount }; }
  set cons(v: Cursor | undefined) { this.cWrap = v ? v.wrap : -1; this.cCount = v ? v.count : 0; }
  /** The producer cursor into `into` (no object made), or undefined when not known yet. */
  prodInto(into: Cursor): Cursor | undefined { if (this.pWrap < 0) return undefined; into.wrap = this.pWrap; into.count = this.pCount; return into; }
  consInto(into: Cursor): Cursor | undefined { if (this.cWrap < 0) return undefined; into.wrap = this.cWrap; into.count = this.cCount; return into; }
  hasCons(): boolean { return this.cWrap >= 0; }

  get lastCdc(): Stamp | undefined { return this.lcFrame < 0 ? undefined : { frame: this.lcFrame, tsNs: this.lcTs }; }
  set lastCdc(v: Stamp | undefined) { this.lcFrame = v ? v.frame : -1; this.lcTs = v ? v.tsNs : 0n; }
  /** The writer sent a CDC in `frame`. */
  noteCdc(frame: number, tsNs: bigint): void { this.lcFrame = frame; this.lcTs = tsNs; }

  private more(): Rare {
    return (this.rare ??= { consAhead: undefined, blockedSince: undefined, urgentMarks: none(), stalls: none(), stream: undefined, lastConsMove: undefined, lastProdMove: undefined });
  }
  get consAhead(): SmcDir['consAhead'] { return this.rare?.consAhead; }
  set consAhead(v: SmcDir['consAhead']) { if (v || this.rare) this.more().consAhead = v; }
  get blockedSince(): Stamp | undefined { return this.rare?.blockedSince; }
  set blockedSince(v: Stamp | undefined) { if (v || this.rare) this.more().blockedSince = v; }
  get urgentMarks(): UrgentMark[] { return this.rare ? this.rare.urgentMarks : none(); }
  set urgentMarks(v: UrgentMark[]) { if (v.length > 0 || this.rare) this.more().urgentMarks = v; }
  get stalls(): WindowStall[] { return this.rare ? this.rare.stalls : none(); }
  set stalls(v: WindowStall[]) { if (v.length > 0 || this.rare) this.more().stalls = v; }
  get stream(): RingStream | undefined { return this.rare?.stream; }
  set stream(v: RingStream | undefined) { if (v || this.rare) this.more().stream = v; }
  get lastConsMove(): Stamp | undefined { return this.rare?.lastConsMove; }
  set lastConsMove(v: Stamp | undefined) { if (v || this.rare) this.more().lastConsMove = v; }
  get lastProdMove(): Stamp | undefined { return this.rare?.lastProdMove; }
  set lastProdMove(v: Stamp | undefined) { if (v || this.rare) this.more().lastProdMove = v; }
}
