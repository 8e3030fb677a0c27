// Streaming pcap / pcapng reader.
//
// The file is read in chunks (fs.readSync on an fd) into one internal buffer; frames are
// handed out as subarray views of that buffer. Memory is constant: the buffer is one chunk,
// and only grows (to the record's size) for a record larger than a chunk.
//
// Formats: pcap (µs magic 0xa1b2c3d4 and ns magic 0xa1b23c4d, both byte orders, plus the
// "modified" Kuznetzov variant 0xa1b2cd34 with 24-byte record headers; link-type field
// with its FCS bits) and pcapng (any number of sections, each with its own byte order;
// any number of interfaces with if_tsresol (10^-n or 2^-n), if_tsoffset, if_name,
// if_description, if_fcslen; EPB, SPB, obsolete PB; opt_comment; every other block is
// skipped).
//
// Errors: a file that cannot be read throws CaptureFormatError (a one-line message with the
// byte offset) — from openCapture() for header-level problems, from next() for a corrupt
// record/block in the middle. A file that simply ends inside its last record ends the
// stream normally; `truncated` is set and `warnings` says where.

import * as fs from 'node:fs';
import { CaptureFormatError, MutableFrame, PCAP_MAGIC, PCAPNG_BLOCK, PCAPNG_BYTE_ORDER_MAGIC, byteSwapped32 } from './types.js';
import type { CaptureFileFormat, CaptureInterface, CapturedFrame } from './types.js';
import { hex32 } from '../dissectors/wire/common.js';

export { CaptureFormatError } from './types.js';

export interface CaptureReaderOptions {
  /** Bytes read per fs.readSync (default 2 MiB; minimum 64 bytes). */
  chunkSize?: number;
  /** Largest pcap record / pcapng block accepted (default 64 MiB); larger = corrupt file. */
  maxRecordBytes?: number;
  /** Reuse one frame object (default true). With false every next() returns a new object;
   *  `data` is still a view into the reader's buffer (for readCaptureBuffer() that is the
   *  caller's array, so such frames stay valid). */
  reuseFrame?: boolean;
}

export interface PcapngSectionInfo {
  /** Byte offset of the Section Header Block. */
  offset: number;
  littleEndian: boolean;
  version: string;
  hardware?: string;
  os?: string;
  userAppl?: string;
  comment?: string;
}

export interface CaptureReader extends Iterable<CapturedFrame> {
  readonly format: CaptureFileFormat;
  /** pcap: true for the nanosecond magic. pcapng: undefined (per interface). */
  readonly nanosecond: boolean | undefined;
  /** Byte order of the file header / the current pcapng section. */
  readonly littleEndian: boolean;
  /**
   * The next frame, or null at the end. The returned object is REUSED by the next call
   * (unless reuseFrame: false) and its `data` view is valid only until the next call.
   * Throws CaptureFormatError on a corrupt record or block.
   */
  next(): CapturedFrame | null;
  /** Bytes of the file consumed so far (offset of the next record): progress = bytesRead / fileSize. */
  readonly bytesRead: number;
  /** Size of the file at open time (0 when unknown, e.g. a pipe). */
  readonly fileSize: number;
  readonly framesRead: number;
  /** Non-fatal problems (truncated last record, odd options, ...). */
  readonly warnings: string[];
  /** The file ended inside a record/block (the frames before it were delivered). */
  readonly truncated: boolean;
  /** pcap: one entry from the file header; pcapng: the IDBs seen so far (all sections). */
  readonly interfaces: readonly CaptureInterface[];
  /** pcapng: the sections seen so far; pcap: empty. */
  readonly sections: readonly PcapngSectionInfo[];
  /** Link type of the pcap file / of the first pcapng interface (-1 before any IDB). */
  readonly linktype: number;
  /** Snapshot length of the pcap file / of the first pcapng interface (0 = unknown/unlimited). */
  readonly snaplen: number;
  /** Current size of the internal buffer (diagnostics: shows that memory stays constant). */
  readonly bufferCapacity: number;
  close(): void;
}

const NS = 1_000_000_000n;
const DEFAULT_CHUNK = 2 << 20;
const FIRST_READ = 64 << 10;
const DEFAULT_MAX_RECORD = 64 << 20;
const utf8 = new TextDecoder('utf-8');
const SLEEP = new Int32Array(new SharedArrayBuffer(4));

const BT_SHB = PCAPNG_BLOCK.SHB;
const BT_IDB = PCAPNG_BLOCK.IDB;
const BT_PB = PCAPNG_BLOCK.PB;
const BT_SPB = PCAPNG_BLOCK.SPB;
const BT_EPB = PCAPNG_BLOCK.EPB;
const PCAP_US_SWAPPED = byteSwapped32(PCAP_MAGIC.US);
const PCAP_NS_SWAPPED = byteSwapped32(PCAP_MAGIC.NS);
const PCAP_MODIFIED_SWAPPED = byteSwapped32(PCAP_MAGIC.MODIFIED);


/** Interface state: the public description plus the timestamp converter. */
class Iface implements CaptureInterface {
  name?: string;
  description?: string;
  fcsLen?: number;
  tsBase: 10 | 2 = 10;
  tsExp = 6;
  tsOffsetSec = 0n;
  /** Fast path (10^-3 .. 10^-9): ns = (hi<<32 + lo) * tsMul + offset; 0 = use the bigint path. */
  tsMul = 1000;
  tsMulBig = 1000n;
  /** Cached (hi<<32)*tsMul + offset for the last `hi` seen. */
  tsKey = -1;
  tsBaseNs = 0n;
  offsetNs = 0n;
  /** Units per second of the fast path (10^exp) and if_tsoffset as a number (NaN: too large;
   *  the (seconds, ns) split is then not given). */
  tsPerSec = 1_000_000;
  offsetSecNum = 0;
  constructor(readonly index: number, readonly section: number, readonly linktype: number, readonly snaplen: number) {}

  setResolution(base: 10 | 2, exp: number): void {
    this.tsBase = base;
    this.tsExp = exp;
    this.tsMul = base === 10 && exp >= 3 && exp <= 9 ? 10 ** (9 - exp) : 0;
    this.tsPerSec = base === 10 && exp <= 9 ? 10 ** exp : 0;
    this.tsMulBig = BigInt(this.tsMul);
    this.tsKey = -1;
  }

  setOffset(sec: bigint): void {
    this.tsOffsetSec = sec;
    this.offsetSecNum = sec >= -(2n ** 53n) && sec < 2n ** 53n ? Number(sec) : NaN;
    this.offsetNs = sec * NS;
    this.tsKey = -1;
  }

  /** Exact conversion of a 64-bit timestamp in this interface's units to epoch ns. */
  slowTs(hi: number, lo: number): bigint {
    const units = (BigInt(hi) << 32n) | BigInt(lo);
    let ns: bigint;
    if (this.tsBase === 10) {
      ns = this.tsExp <= 9 ? units * 10n ** BigInt(9 - this.tsExp) : units / 10n ** BigInt(this.tsExp - 9);
    } else {
      ns = (units * NS) >> BigInt(this.tsExp);
    }
    return ns + this.offsetNs;
  }
}

/** for..of support without a generator (one result object, reused like the frame). */
class FrameIterator implements Iterator<CapturedFrame> {
  private readonly res: IteratorResult<CapturedFrame> = { done: false, value: undefined as unknown as CapturedFrame };
  constructor(private readonly r: CaptureReader) {}
  next(): IteratorResult<CapturedFrame> {
    const f = this.r.next();
    const res = this.res;
    if (f === null) { res.done = true; res.value = undefined; } else res.value = f;
    return res;
  }
  [Symbol.iterator](): Iterator<CapturedFrame> { return this; }
}

interface Input {
  fd: number;
  ownsFd: boolean;
  /** true: pread at base+end (regular file); false: sequential reads (pipe). */
  positional: boolean;
  fileSize: number;
  bytes?: Uint8Array;
}

function cstr(b: Uint8Array): string {
  let n = b.length;
  while (n > 0 && b[n - 1] === 0) n--;
  return utf8.decode(n === b.length ? b : b.subarray(0, n));
}

class StreamReader implements CaptureReader {
  readonly format: CaptureFileFormat;
  nanosecond: boolean | undefined = undefined;
  littleEndian = true;
  readonly fileSize: number;
  framesRead = 0;
  readonly warnings: string[] = [];
  truncated = false;
  readonly interfaces: Iface[] = [];
  readonly sections: PcapngSectionInfo[] = [];

  private buf: Uint8Array;
  private dv: DataView;
  /** buf's ArrayBuffer and byte offset when buf is a plain Uint8Array (the reader's own block,
   *  or bytes handed in): frames are then made with `new Uint8Array(ab, off, len)`, about 15 ns
   *  cheaper per frame than `subarray()` (no species lookup). undefined: a subclass (a Buffer
   *  handed to readCaptureBuffer), whose frames stay `subarray()` views of the same class. */
  private ab: ArrayBufferLike | undefined;
  private abOff = 0;
  /** Parse position in buf, end of valid bytes in buf, file offset of buf[0]. */
  private pos = 0;
  private end = 0;
  private base = 0;
  private fd: number;
  private readonly ownsFd: boolean;
  private readonly positional: boolean;
  private srcEof: boolean;
  private done = false;
  private readonly maxRecord: number;
  private readonly reuse: boolean;
  private readonly frame = new MutableFrame();
  private le = true;
  /** Bytes a read fills up to: FIRST_READ until the first refill in mid-stream, then the buffer.
   *  That refill comes after a few dozen frames, before V8 optimizes the frame loop, so the
   *  loop is compiled with the refill call's feedback (a call first taken in optimized code
   *  throws the code away: with 2 MiB at once that happened in every replay). */
  private readCap = FIRST_READ;

  // pcap state
  private recHdr = 16;
  private tsMul = 1000;
  private tsKey = -1;
  private tsBaseNs = 0n;
  private pcapIface: Iface | undefined;

  // pcapng state
  private section = -1;
  private secIfBase = 0;

  constructor(input: Input, opts: CaptureReaderOptions) {
    this.fd = input.fd;
    this.ownsFd = input.ownsFd;
    this.positional = input.positional;
    this.fileSize = input.fileSize;
    this.maxRecord = opts.maxRecordBytes ?? DEFAULT_MAX_RECORD;
    this.reuse = opts.reuseFrame ?? true;
    if (input.bytes !== undefined) {
      this.buf = input.bytes;
      this.end = input.bytes.length;
      this.srcEof = true;
    } else {
      this.buf = new Uint8Array(Math.max(64, opts.chunkSize ?? DEFAULT_CHUNK));
      this.srcEof = false;
    }
    this.dv = new DataView(this.buf.buffer, this.buf.byteOffset, this.buf.byteLength);
    this.bindViews();

    if (!this.ensure(4)) {
      const n = this.remaining();
      throw new CaptureFormatError(n === 0 ? 'empty file (not a pcap or pcapng file)' : `not a pcap or pcapng file (only ${n} bytes)`, 0);
    }
    const magic = this.dv.getUint32(0, false);
    if (magic === BT_SHB) {
      this.format = 'pcapng';
      this.readShb();
      return;
    }
    this.format = 'pcap';
    let le: boolean;
    let ns = false;
    let modified = false;
    switch (magic) {
      case PCAP_MAGIC.US: le = false; break;
      case PCAP_US_SWAPPED: le = true; break;
      case PCAP_MAGIC.NS: le = false; ns = true; break;
      case PCAP_NS_SWAPPED: le = true; ns = true; break;
      case PCAP_MAGIC.MODIFIED: le = false; modified = true; break;
      case PCAP_MODIFIED_SWAPPED: le = true; modified = true; break;
      default: {
        const hint = (magic >>> 16) === 0x1f8b ? '; gzip-compressed? decompress it first' : '';
        throw new CaptureFormatError(`not a pcap or pcapng file (magic ${hex32(magic)}${hint})`, 0);
      }
    }
    if (!this.ensure(24)) throw new CaptureFormatError(`truncated pcap file header (${this.remaining()} of 24 bytes)`, 0);
    const dv = this.dv;
    const major = dv.getUint16(4, le);
    const minor = dv.getUint16(6, le);
    if (major !== 2) throw new CaptureFormatError(`unsupported pcap version ${major}.${minor}`, 4);
    const snaplen = dv.getUint32(16, le);
    const ltField = dv.getUint32(20, le);
    const ifc = new Iface(0, 0, ltField & 0xffff, snaplen);
    ifc.setResolution(10, ns ? 9 : 6);
    if ((ltField & 0x04000000) !== 0) ifc.fcsLen = ((ltField >>> 28) & 0xf) * 2;
    if ((ltField & 0x03ff0000) !== 0) this.warnings.push(`pcap link-type field ${hex32(ltField)} has reserved bits set`);
    this.interfaces.push(ifc);
    this.pcapIface = ifc;
    this.le = le;
    this.littleEndian = le;
    this.nanosecond = ns;
    this.tsMul = ns ? 1 : 1000;
    this.recHdr = modified ? 24 : 16;
    this.pos = 24;
  }

  get bytesRead(): number { return this.base + this.pos; }
  get bufferCapacity(): number { return this.buf.length; }
  get linktype(): number { return this.interfaces[0]?.linktype ?? -1; }
  get snaplen(): number { return this.interfaces[0]?.snaplen ?? 0; }

  next(): CapturedFrame | null {
    if (this.done) return null;
    return this.format === 'pcap' ? this.nextPcap() : this.nextNg();
  }

  [Symbol.iterator](): Iterator<CapturedFrame> {
    return new FrameIterator(this);
  }

  close(): void {
    this.done = true;
    if (this.fd >= 0 && this.ownsFd) fs.closeSync(this.fd);
    this.fd = -1;
  }

  // ---- buffer management ----

  /** Set what frameView() makes views with, for the current buf. */
  private bindViews(): void {
    const plain = Object.getPrototypeOf(this.buf) === Uint8Array.prototype;
    this.ab = plain ? this.buf.buffer : undefined;
    this.abOff = this.buf.byteOffset;
  }

  /** buf[start, start + len) as a view of the same class as buf: what `subarray` gives. */
  private frameView(start: number, len: number): Uint8Array {
    const ab = this.ab;
    return ab !== undefined ? new Uint8Array(ab, this.abOff + start, len) : this.buf.subarray(start, start + len);
  }

  /** Bytes of the input not yet consumed (exact for files and memory; for pipes after EOF). */
  private remaining(): number {
    return this.positional ? this.fileSize - this.base - this.pos : this.end - this.pos;
  }

  /** Make at least n bytes available at buf[pos..]; false if the input ends before that. */
  private ensure(n: number): boolean {
    return this.end - this.pos >= n || this.refill(n);
  }

  private refill(n: number): boolean {
    if (this.fd < 0 || this.srcEof) return false;
    if (this.positional && this.base + this.pos + n > this.fileSize) return false;
    if (this.pos > 0) {
      if (this.end > this.pos) this.buf.copyWithin(0, this.pos, this.end);
      this.base += this.pos;
      this.end -= this.pos;
      this.pos = 0;
    }
    if (n > this.buf.length) {
      const nb = new Uint8Array(Math.max(n, Math.min(this.buf.length * 2, this.maxRecord)));
      nb.set(this.buf.subarray(0, this.end));
      this.buf = nb;
      this.dv = new DataView(nb.buffer, nb.byteOffset, nb.byteLength);
      this.bindViews();
    }
    while (this.end < n) {
      let got: number;
      const len = Math.min(this.buf.length - this.end, Math.max(this.readCap - this.end, n - this.end));
      try {
        got = fs.readSync(this.fd, this.buf, this.end, len, this.positional ? this.base + this.end : null);
      } catch (e) {
        const err = e as NodeJS.ErrnoException;
        if (err.code === 'EAGAIN') { Atomics.wait(SLEEP, 0, 0, 2); continue; }
        this.done = true;
        throw new CaptureFormatError(`read error at byte ${this.base + this.end}: ${err.message}`, this.base + this.end);
      }
      if (got === 0) { this.srcEof = true; return false; }
      this.end += got;
    }
    if (this.base > 0) this.readCap = this.buf.length;
    return true;
  }

  private eof(need: number, what: string): null {
    const avail = this.remaining();
    this.done = true;
    if (avail > 0) {
      this.truncated = true;
      this.warnings.push(`truncated ${what} at byte ${this.base + this.pos}: ${avail} of ${need} bytes present`);
    }
    return null;
  }

  private fail(msg: string, offset: number): never {
    this.done = true;
    throw new CaptureFormatError(msg, offset);
  }

  // ---- pcap ----

  private nextPcap(): CapturedFrame | null {
    const h = this.recHdr;
    if (!this.ensure(h)) return this.eof(h, 'record header');
    const le = this.le;
    let dv = this.dv;
    let p = this.pos;
    const caplen = dv.getUint32(p + 8, le);
    if (caplen > this.maxRecord) {
      this.fail(`corrupt record at byte ${this.base + p}: caplen ${caplen} exceeds the maximum of ${this.maxRecord}`, this.base + p);
    }
    const total = h + caplen;
    if (!this.ensure(total)) return this.eof(total, 'record');
    p = this.pos;
    dv = this.dv;
    const sec = dv.getUint32(p, le);
    const frac = dv.getUint32(p + 4, le);
    const f = this.reuse ? this.frame : new MutableFrame();
    f.data = this.frameView(p + h, caplen);
    f.caplen = caplen;
    f.origlen = dv.getUint32(p + 12, le);
    if (sec !== this.tsKey) {
      this.tsKey = sec;
      this.tsBaseNs = BigInt(sec) * NS;
    }
    const sub = frac * this.tsMul;
    f.tsNs = this.tsBaseNs + BigInt(sub);
    // the same instant as two numbers (a fraction field too large to be one carries: bigint only)
    f.tsSec = sub < 1e9 ? sec : -1;
    f.tsSubNs = sub;
    f.linktype = (this.pcapIface as Iface).linktype;
    this.pos = p + total;
    this.framesRead++;
    return f;
  }

  // ---- pcapng ----

  private nextNg(): CapturedFrame | null {
    for (;;) {
      if (!this.ensure(8)) return this.eof(8, 'block header');
      let p = this.pos;
      const type = this.dv.getUint32(p, this.le);
      if (type === BT_SHB) {
        if (!this.readShb()) return null;
        continue;
      }
      const blen = this.dv.getUint32(p + 4, this.le);
      if (blen < 12 || (blen & 3) !== 0 || blen > this.maxRecord) {
        this.fail(`corrupt block at byte ${this.base + p}: type ${hex32(type)} length ${blen}`, this.base + p);
      }
      if (!this.ensure(blen)) return this.eof(blen, 'block');
      p = this.pos;
      const dv = this.dv;
      const le = this.le;
      const trailer = dv.getUint32(p + blen - 4, le);
      if (trailer !== blen) {
        this.fail(`corrupt block at byte ${this.base + p}: length ${blen} but trailing length ${trailer}`, this.base + p);
      }
      switch (type) {
        case BT_EPB:
        case BT_PB: {
          if (blen < 32) this.fail(`corrupt packet block at byte ${this.base + p}: length ${blen} < 32`, this.base + p);
          const local = type === BT_EPB ? dv.getUint32(p + 8, le) : dv.getUint16(p + 8, le);
          const ifc = this.iface(local, p);
          const caplen = dv.getUint32(p + 20, le);
          if (caplen > blen - 32) {
            this.fail(`corrupt packet block at byte ${this.base + p}: caplen ${caplen} exceeds the block (${blen} bytes)`, this.base + p);
          }
          const hi = dv.getUint32(p + 12, le);
          const lo = dv.getUint32(p + 16, le);
          const f = this.reuse ? this.frame : new MutableFrame();
          f.data = this.frameView(p + 28, caplen);
          f.caplen = caplen;
          f.origlen = dv.getUint32(p + 24, le);
          if (ifc.tsMul !== 0) {
            if (hi !== ifc.tsKey) {
              ifc.tsKey = hi;
              ifc.tsBaseNs = (BigInt(hi) << 32n) * ifc.tsMulBig + ifc.offsetNs;
            }
            f.tsNs = ifc.tsBaseNs + BigInt(lo * ifc.tsMul);
            // as two numbers too while the units are exact in a double (µs resolution: always)
            if (hi < 0x200000) {
              const units = hi * 4294967296 + lo;
              const per = ifc.tsPerSec;
              const s0 = Math.floor(units / per);
              const sec = s0 + ifc.offsetSecNum;
              f.tsSec = sec >= 0 && sec <= Number.MAX_SAFE_INTEGER ? sec : -1;
              f.tsSubNs = (units - s0 * per) * ifc.tsMul;
            } else f.tsSec = -1;
          } else {
            f.tsNs = ifc.slowTs(hi, lo);
            f.tsSec = -1;
          }
          f.linktype = ifc.linktype;
          f.ifIndex = ifc.index;
          f.ifName = ifc.name;
          const optStart = p + 28 + ((caplen + 3) & ~3);
          const optEnd = p + blen - 4;
          f.comment = optStart < optEnd ? this.packetComment(optStart, optEnd) : undefined;
          this.pos = p + blen;
          this.framesRead++;
          return f;
        }
        case BT_SPB: {
          if (blen < 16) this.fail(`corrupt simple packet block at byte ${this.base + p}: length ${blen} < 16`, this.base + p);
          const ifc = this.iface(0, p);
          const origlen = dv.getUint32(p + 8, le);
          let caplen = Math.min(origlen, blen - 16);
          if (ifc.snaplen !== 0 && caplen > ifc.snaplen) caplen = ifc.snaplen;
          const f = this.reuse ? this.frame : new MutableFrame();
          f.data = this.frameView(p + 12, caplen);
          f.caplen = caplen;
          f.origlen = origlen;
          f.tsNs = 0n;
          f.tsSec = -1;
          f.linktype = ifc.linktype;
          f.ifIndex = ifc.index;
          f.ifName = ifc.name;
          f.comment = undefined;
          this.pos = p + blen;
          this.framesRead++;
          return f;
        }
        case BT_IDB:
          this.readIdb(p, blen);
          this.pos = p + blen;
          continue;
        default:
          this.pos = p + blen;
          continue;
      }
    }
  }

  /** Interface `local` of the current section. */
  private iface(local: number, p: number): Iface {
    const ifc = this.interfaces[this.secIfBase + local];
    if (ifc === undefined) {
      const n = this.interfaces.length - this.secIfBase;
      this.fail(`corrupt packet block at byte ${this.base + p}: interface ${local} not defined (section has ${n})`, this.base + p);
    }
    return ifc;
  }

  /** Section Header Block at pos; false when the file ends inside it. */
  private readShb(): boolean {
    const start = this.base + this.pos;
    if (!this.ensure(12)) { this.eof(12, 'section header'); return false; }
    let p = this.pos;
    const bom = this.dv.getUint32(p + 8, false);
    let le: boolean;
    if (bom === PCAPNG_BYTE_ORDER_MAGIC) le = false;
    else if (bom === byteSwapped32(PCAPNG_BYTE_ORDER_MAGIC)) le = true;
    else this.fail(`corrupt pcapng section header at byte ${start}: byte-order magic ${hex32(bom)}`, start);
    const blen = this.dv.getUint32(p + 4, le);
    if (blen < 28 || (blen & 3) !== 0 || blen > this.maxRecord) {
      this.fail(`corrupt pcapng section header at byte ${start}: length ${blen}`, start);
    }
    if (!this.ensure(blen)) { this.eof(blen, 'section header'); return false; }
    p = this.pos;
    const dv = this.dv;
    const trailer = dv.getUint32(p + blen - 4, le);
    if (trailer !== blen) this.fail(`corrupt pcapng section header at byte ${start}: length ${blen} but trailing length ${trailer}`, start);
    const major = dv.getUint16(p + 12, le);
    const minor = dv.getUint16(p + 14, le);
    if (major !== 1) this.fail(`unsupported pcapng version ${major}.${minor} at byte ${start}`, start);
    const info: PcapngSectionInfo = { offset: start, littleEndian: le, version: `${major}.${minor}` };
    this.le = le;
    this.littleEndian = le;
    this.section++;
    this.secIfBase = this.interfaces.length;
    this.options(p + 24, p + blen - 4, start, (code, o, len) => {
      const s = cstr(this.buf.subarray(o, o + len));
      if (code === 1) info.comment = info.comment === undefined ? s : `${info.comment}\n${s}`;
      else if (code === 2) info.hardware = s;
      else if (code === 3) info.os = s;
      else if (code === 4) info.userAppl = s;
    });
    this.sections.push(info);
    this.pos = p + blen;
    return true;
  }

  private readIdb(p: number, blen: number): void {
    const start = this.base + p;
    if (blen < 20) this.fail(`corrupt interface description block at byte ${start}: length ${blen} < 20`, start);
    const dv = this.dv;
    const le = this.le;
    const ifc = new Iface(this.interfaces.length, this.section, dv.getUint16(p + 8, le), dv.getUint32(p + 12, le));
    this.options(p + 16, p + blen - 4, start, (code, o, len) => {
      switch (code) {
        case 2: ifc.name = cstr(this.buf.subarray(o, o + len)); break;
        case 3: ifc.description = cstr(this.buf.subarray(o, o + len)); break;
        case 9:
          if (len >= 1) {
            const v = this.buf[o] ?? 6;
            ifc.setResolution((v & 0x80) !== 0 ? 2 : 10, v & 0x7f);
          }
          break;
        case 13:
          if (len >= 1) ifc.fcsLen = this.buf[o] ?? 0;
          break;
        case 14:
          if (len >= 8) ifc.setOffset(dv.getBigInt64(o, le));
          break;
      }
    });
    this.interfaces.push(ifc);
  }

  /** opt_comment(s) of a packet block (no closure: this runs per frame when options exist). */
  private packetComment(o: number, end: number): string | undefined {
    const dv = this.dv;
    const le = this.le;
    let comment: string | undefined;
    while (o + 4 <= end) {
      const code = dv.getUint16(o, le);
      const len = dv.getUint16(o + 2, le);
      o += 4;
      if (code === 0 || o + len > end) break;
      if (code === 1) {
        const s = cstr(this.buf.subarray(o, o + len));
        comment = comment === undefined ? s : `${comment}\n${s}`;
      }
      o += (len + 3) & ~3;
    }
    return comment;
  }

  /** Walk the TLV options in buf[o..end); bad lengths end the walk with a warning. */
  private options(o: number, end: number, blockOffset: number, visit: (code: number, valueOffset: number, len: number) => void): void {
    const dv = this.dv;
    const le = this.le;
    while (o + 4 <= end) {
      const code = dv.getUint16(o, le);
      const len = dv.getUint16(o + 2, le);
      o += 4;
      if (code === 0) return;
      if (o + len > end) {
        if (this.warnings.length < 100) this.warnings.push(`option ${code} overruns its block at byte ${blockOffset}`);
        return;
      }
      visit(code, o, len);
      o += (len + 3) & ~3;
    }
  }
}

/**
 * Open a pcap or pcapng file (format auto-detected) for streaming. `path` "-" reads stdin.
 * Throws (rejects with) CaptureFormatError for unreadable files and bad file headers.
 */
export async function openCapture(path: string, opts: CaptureReaderOptions = {}): Promise<CaptureReader> {
  return openCaptureSync(path, opts);
}

/** Synchronous openCapture(). */
export function openCaptureSync(path: string, opts: CaptureReaderOptions = {}): CaptureReader {
  let input: Input;
  if (path === '-') {
    let size = 0;
    try { const st = fs.fstatSync(0); if (st.isFile()) size = st.size; } catch { /* unknown */ }
    input = { fd: 0, ownsFd: false, positional: false, fileSize: size };
  } else {
    let fd: number;
    try {
      fd = fs.openSync(path, 'r');
    } catch (e) {
      throw new CaptureFormatError(`cannot open ${path}: ${errnoText(e)}`);
    }
    let st: fs.Stats;
    try {
      st = fs.fstatSync(fd);
    } catch (e) {
      fs.closeSync(fd);
      throw new CaptureFormatError(`cannot open ${path}: ${errnoText(e)}`);
    }
    if (st.isDirectory()) {
      fs.closeSync(fd);
      throw new CaptureFormatError(`cannot open ${path}: is a directory`);
    }
    input = st.isFile()
      ? { fd, ownsFd: true, positional: true, fileSize: st.size }
      : { fd, ownsFd: true, positional: false, fileSize: 0 };
  }
  try {
    return new StreamReader(input, opts);
  } catch (e) {
    if (input.ownsFd) fs.closeSync(input.fd);
    throw e;
  }
}

/**
 * A reader over bytes in memory (tests, live capture buffers). Frames are views into
 * `bytes`; with reuseFrame: false they stay valid as long as `bytes` does.
 */
export function readCaptureBuffer(bytes: Uint8Array, opts: CaptureReaderOptions = {}): CaptureReader {
  return new StreamReader({ fd: -1, ownsFd: false, positional: false, fileSize: bytes.length, bytes }, opts);
}

/** "no such file or directory" rather than "ENOENT: no such file or directory, open '…'". */
function errnoText(e: unknown): string {
  const err = e as NodeJS.ErrnoException;
  const m = /^[A-Z]+: ([^,]+)/.exec(err.message ?? '');
  return m ? m[1]! : String(err.message ?? e);
}
