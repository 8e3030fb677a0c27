// One direction (writer → reader) of an SMC-R connection, as the model's SmcDir, in fewer
// bytes: the tracker keeps two per connection for the whole capture (100 000 connections:
// 200 000). A direction's numbers live in a shared slab (typed arrays handed out in chunks, no
// boxed number or BigInt per value: an object of 21 fields took 192 bytes and its last CDC's
// time a 24-byte BigInt); the object itself only points into it. The cursors and the last CDC
// are read back as the model's objects (made on each read: the summary reads them once); what
// few directions ever have (a blocked writer, stalls, urgent marks, the --follow stream …)
// lives in one side object made on first use.

import type { SmcDir, UrgentMark, WindowStall } from './model.js';
import type { RingStream } from './stream.js';
import type { Epoch } from './tcpconn.js';
import { none } from './lists.js';

type Stamp = { frame: number; tsNs: bigint };
type Cursor = { wrap: number; count: number };

/** Directions per chunk of the slab. */
const PER_CHUNK = 4096;

// Doubles per direction: byte positions and counts that outgrow 32 bits, the last CDC's time
// (ns since the epoch).
const PROD_LINEAR = 0, CONS_LINEAR = 1, WRITE_BYTES = 2, LC_T = 3, F64S = 4;
// 32-bit integers per direction: counters (read unsigned), sequence numbers (-1: none yet),
// flags, cursors (wrap -1: not known yet), the last CDC's frame (-1: none), the ring size.
const CDCS = 0, WRITES = 1, BLOCKED = 2, URGENT = 3, SEQ_GAPS = 4, SEQ = 5, FIRST_SEQ = 6, FLAGS = 7,
  P_WRAP = 8, P_COUNT = 9, C_WRAP = 10, C_COUNT = 11, LC_FRAME = 12, RING = 13, I32S = 14;

const DONE_WRITING = 1, CLOSED = 2, ABORTED = 4, WB_KNOWN = 8, WB_SET = 16;

/** The fields most directions never set. */
interface Rare {
  consAhead: SmcDir['consAhead'];
  blockedSince: Stamp | undefined;
  urgentMarks: UrgentMark[];
  stalls: WindowStall[];
  stream: RingStream | undefined;
  lastConsMove: Stamp | undefined;
  lastProdMove: Stamp | undefined;
  /** The last CDC's time when it is not exact as a double since the epoch. */
  lcTs: bigint | undefined;
}

/** One chunk: PER_CHUNK directions' numbers, link names and rare fields. */
class Chunk {
  readonly f = new Float64Array(PER_CHUNK * F64S);
  readonly i = new Int32Array(PER_CHUNK * I32S);
  readonly link: (string | undefined)[] = new Array<string | undefined>(PER_CHUNK).fill(undefined);
  readonly rare: (Rare | undefined)[] = new Array<Rare | undefined>(PER_CHUNK).fill(undefined);
  used = 0;
  constructor(readonly epoch: Epoch) {}
}

/** Where a tracker's directions keep their numbers (one per tracker: times are relative to its epoch). */
export class DirSlab {
  private chunk: Chunk;
  constructor(private readonly epoch: Epoch) { this.chunk = new Chunk(epoch); }
  /** A new direction; `fromStart`: the handshake was captured, so both cursors start at 0:0. */
  make(ringSize: number, fromStart: boolean): DirState {
    if (this.chunk.used === PER_CHUNK) this.chunk = new Chunk(this.epoch);
    return new DirState(this.chunk, this.chunk.used++, ringSize, fromStart);
  }
}

export class DirState implements SmcDir {
  constructor(private readonly c: Chunk, private readonly k: number, ringSize: number, fromStart: boolean) {
    const i = c.i, o = this.io;
    i[o + SEQ] = -1; i[o + FIRST_SEQ] = -1; i[o + LC_FRAME] = -1;
    i[o + P_WRAP] = fromStart ? 0 : -1;
    i[o + C_WRAP] = fromStart ? 0 : -1;
    i[o + RING] = ringSize;
  }

  /** Offsets of this direction in its chunk's arrays (computed: two fields fewer per direction). */
  private get fo(): number { return this.k * F64S; }
  private get io(): number { return this.k * I32S; }

  get ringSize(): number { return this.c.i[this.io + RING]!; }
  set ringSize(v: number) { this.c.i[this.io + RING] = v; }
  get prodLinear(): number { return this.c.f[this.fo + PROD_LINEAR]!; }
  set prodLinear(v: number) { this.c.f[this.fo + PROD_LINEAR] = v; }
  get consLinear(): number { return this.c.f[this.fo + CONS_LINEAR]!; }
  set consLinear(v: number) { this.c.f[this.fo + CONS_LINEAR] = v; }
  get writeBytes(): number { return this.c.f[this.fo + WRITE_BYTES]!; }
  set writeBytes(v: number) { this.c.f[this.fo + WRITE_BYTES] = v; }
  get cdcs(): number { return this.c.i[this.io + CDCS]! >>> 0; }
  set cdcs(v: number) { this.c.i[this.io + CDCS] = v; }
  get writes(): number { return this.c.i[this.io + WRITES]! >>> 0; }
  set writes(v: number) { this.c.i[this.io + WRITES] = v; }
  get writerBlocked(): number { return this.c.i[this.io + BLOCKED]! >>> 0; }
  set writerBlocked(v: number) { this.c.i[this.io + BLOCKED] = v; }
  get urgent(): number { return this.c.i[this.io + URGENT]! >>> 0; }
  set urgent(v: number) { this.c.i[this.io + URGENT] = v; }
  get seqGaps(): number { return this.c.i[this.io + SEQ_GAPS]! >>> 0; }
  set seqGaps(v: number) { this.c.i[this.io + SEQ_GAPS] = v; }
  /** Writer's CDC sequence number last seen. */
  get seq(): number | undefined { const v = this.c.i[this.io + SEQ]!; return v < 0 ? undefined : v; }
  set seq(v: number | undefined) { this.c.i[this.io + SEQ] = v === undefined ? -1 : v; }
  /** The writer's first CDC sequence number seen (for the state comparison). */
  get firstSeq(): number | undefined { const v = this.c.i[this.io + FIRST_SEQ]!; return v < 0 ? undefined : v; }
  set firstSeq(v: number | undefined) { this.c.i[this.io + FIRST_SEQ] = v === undefined ? -1 : v; }
  /** The link the writer's last CDC travelled on. */
  get link(): string | undefined { return this.c.link[this.k]; }
  set link(v: string | undefined) { this.c.link[this.k] = v; }

  private flag(b: number): boolean { return (this.c.i[this.io + FLAGS]! & b) !== 0; }
  private setFlag(b: number, v: boolean): void { const i = this.c.i, o = this.io + FLAGS; i[o] = v ? i[o]! | b : i[o]! & ~b; }
  get doneWriting(): boolean { return this.flag(DONE_WRITING); }
  set doneWriting(v: boolean) { this.setFlag(DONE_WRITING, v); }
  get closed(): boolean { return this.flag(CLOSED); }
  set closed(v: boolean) { this.setFlag(CLOSED, v); }
  get aborted(): boolean { return this.flag(ABORTED); }
  set aborted(v: boolean) { this.setFlag(ABORTED, v); }
  /** The write-blocked flag of the writer's last CDC (undefined: no CDC yet). */
  get lastWriteBlocked(): boolean | undefined { return this.flag(WB_KNOWN) ? this.flag(WB_SET) : undefined; }
  set lastWriteBlocked(v: boolean | undefined) { this.setFlag(WB_KNOWN, v !== undefined); this.setFlag(WB_SET, v === true); }

  get prod(): Cursor | undefined { return this.prodInto({ wrap: 0, count: 0 }); }
  set prod(v: Cursor | undefined) { const i = this.c.i, o = this.io; i[o + P_WRAP] = v ? v.wrap : -1; i[o + P_COUNT] = v ? v.count : 0; }
  get cons(): Cursor | undefined { return this.consInto({ wrap: 0, count: 0 }); }
  set cons(v: Cursor | undefined) { const i = this.c.i, o = this.io; i[o + C_WRAP] = v ? v.wrap : -1; i[o + C_COUNT] = v ? v.count : 0; }
  /** The producer cursor into `into` (no object made), or undefined when not known yet. */
  prodInto(into: Cursor): Cursor | undefined {
    const i = this.c.i, o = this.io;
    if (i[o + P_WRAP]! < 0) return undefined;
    into.wrap = i[o + P_WRAP]!; into.count = i[o + P_COUNT]! >>> 0;
    return into;
  }
  consInto(into: Cursor): Cursor | undefined {
    const i = this.c.i, o = this.io;
    if (i[o + C_WRAP]! < 0) return undefined;
    into.wrap = i[o + C_WRAP]!; into.count = i[o + C_COUNT]! >>> 0;
    return into;
  }
  hasCons(): boolean { return this.c.i[this.io + C_WRAP]! >= 0; }

  /** Last CDC of the writer. */
  get lastCdc(): Stamp | undefined {
    const frame = this.c.i[this.io + LC_FRAME]!;
    if (frame < 0) return undefined;
    const big = this.c.rare[this.k]?.lcTs;
    return { frame, tsNs: big ?? this.c.epoch.base + BigInt(this.c.f[this.fo + LC_T]!) };
  }
  set lastCdc(v: Stamp | undefined) {
    if (v) this.noteCdc(v.frame, v.tsNs);
    else { this.c.i[this.io + LC_FRAME] = -1; if (this.c.rare[this.k]) this.more().lcTs = undefined; }
  }
  /** The writer sent a CDC in `frame`. */
  noteCdc(frame: number, tsNs: bigint): void {
    this.c.i[this.io + LC_FRAME] = frame;
    const rel = Number(tsNs - this.c.epoch.base);
    const exact = Number.isSafeInteger(rel);
    this.c.f[this.fo + LC_T] = exact ? rel : 0;
    if (!exact) this.more().lcTs = tsNs;
    else if (this.c.rare[this.k]) this.more().lcTs = undefined;
  }

  private more(): Rare {
    return (this.c.rare[this.k] ??= { consAhead: undefined, blockedSince: undefined, urgentMarks: none(), stalls: none(), stream: undefined, lastConsMove: undefined, lastProdMove: undefined, lcTs: undefined });
  }
  private get rare(): Rare | undefined { return this.c.rare[this.k]; }
  get consAhead(): SmcDir['consAhead'] { return this.rare?.consAhead; }
  set consAhead(v: SmcDir['consAhead']) { if (v || this.rare) this.more().consAhead = v; }
  get blockedSince(): Stamp | undefined { return this.rare?.blockedSince; }
  set blockedSince(v: Stamp | undefined) { if (v || this.rare) this.more().blockedSince = v; }
  get urgentMarks(): UrgentMark[] { const r = this.rare; return r ? r.urgentMarks : none(); }
  set urgentMarks(v: UrgentMark[]) { if (v.length > 0 || this.rare) this.more().urgentMarks = v; }
  get stalls(): WindowStall[] { const r = this.rare; return r ? r.stalls : none(); }
  set stalls(v: WindowStall[]) { if (v.length > 0 || this.rare) this.more().stalls = v; }
  get stream(): RingStream | undefined { return this.rare?.stream; }
  set stream(v: RingStream | undefined) { if (v || this.rare) this.more().stream = v; }
  get lastConsMove(): Stamp | undefined { return this.rare?.lastConsMove; }
  set lastConsMove(v: Stamp | undefined) { if (v || this.rare) this.more().lastConsMove = v; }
  get lastProdMove(): Stamp | undefined { return this.rare?.lastProdMove; }
  set lastProdMove(v: Stamp | undefined) { if (v || this.rare) this.more().lastProdMove = v; }
}
