// pcap and pcapng writers: buffered, synchronous (fs.writeSync on an fd), or into any
// ByteSink (e.g. MemorySink for tests / in-memory captures).
//
// PcapWriter: classic pcap, µs (default) or ns timestamps, one link type per file.
// PcapngWriter: SHB (shb_userappl), one IDB per (linktype, ifName) seen, if_tsresol 9 (ns)
// so timestamps are kept to the ns, EPB with caplen/origlen and opt_comment.

import * as fs from 'node:fs';
import { CaptureFormatError, linktypeName, PCAP_MAGIC, PCAPNG_BLOCK, PCAPNG_BYTE_ORDER_MAGIC } from './types.js';
import type { CaptureFileFormat, CapturedFrame } from './types.js';

/** Destination of a writer. `write` must consume the chunk synchronously (it is reused). */
export interface ByteSink {
  write(chunk: Uint8Array): void;
  close?(): void;
}

/** Collects everything written; `toBytes()` returns the file. */
export class MemorySink implements ByteSink {
  private chunks: Uint8Array[] = [];
  length = 0;
  write(chunk: Uint8Array): void {
    this.chunks.push(chunk.slice());
    this.length += chunk.length;
  }
  toBytes(): Uint8Array {
    const out = new Uint8Array(this.length);
    let o = 0;
    for (const c of this.chunks) { out.set(c, o); o += c.length; }
    return out;
  }
}

/** A writer target: a path (created/truncated), an open fd (not closed by close()), or a sink. */
export type WriteTarget = string | number | ByteSink;

export interface CaptureWriter {
  readonly format: CaptureFileFormat;
  write(frame: CapturedFrame): void;
  /** Push buffered bytes to the fd/sink. */
  flush(): void;
  /** Flush, and close the file if the writer opened it. Idempotent. */
  close(): void;
  readonly framesWritten: number;
  /** Bytes handed to the fd/sink plus buffered bytes. */
  readonly bytesWritten: number;
}

const NS = 1_000_000_000n;
const TWO32 = 0x1_0000_0000n;
const DEFAULT_BUFFER = 1 << 20;
/** Cache key that no timestamp matches. */
const NO_KEY = -(1n << 100n);
const utf8 = new TextEncoder();

abstract class BufferedWriter {
  protected buf: Uint8Array;
  protected dv: DataView;
  protected n = 0;
  protected readonly le: boolean;
  framesWritten = 0;
  private flushed = 0;
  private fd = -1;
  private readonly ownsFd: boolean;
  private readonly sink: ByteSink | undefined;
  protected closed = false;

  constructor(target: WriteTarget, littleEndian: boolean, bufferSize: number) {
    this.le = littleEndian;
    this.buf = new Uint8Array(Math.max(4096, bufferSize));
    this.dv = new DataView(this.buf.buffer);
    if (typeof target === 'string') {
      try {
        this.fd = fs.openSync(target, 'w');
      } catch (e) {
        throw new CaptureFormatError(`cannot create ${target}: ${(e as Error).message}`);
      }
      this.ownsFd = true;
    } else if (typeof target === 'number') {
      this.fd = target;
      this.ownsFd = false;
    } else {
      this.sink = target;
      this.ownsFd = false;
    }
  }

  get bytesWritten(): number { return this.flushed + this.n; }

  /** Room for k more bytes in the buffer (grows it for a huge block). */
  protected reserve(k: number): void {
    if (this.n + k <= this.buf.length) return;
    this.flush();
    if (k > this.buf.length) {
      this.buf = new Uint8Array(k);
      this.dv = new DataView(this.buf.buffer);
    }
  }

  protected put(bytes: Uint8Array): void {
    this.buf.set(bytes, this.n);
    this.n += bytes.length;
  }

  protected zero(k: number): void {
    this.buf.fill(0, this.n, this.n + k);
    this.n += k;
  }

  flush(): void {
    if (this.n === 0) return;
    const chunk = this.buf.subarray(0, this.n);
    if (this.sink !== undefined) {
      this.sink.write(chunk);
    } else {
      let o = 0;
      while (o < chunk.length) o += fs.writeSync(this.fd, chunk, o, chunk.length - o);
    }
    this.flushed += this.n;
    this.n = 0;
  }

  protected finish(): void {
    if (this.closed) return;
    this.closed = true;
    this.flush();
    if (this.ownsFd) fs.closeSync(this.fd);
    else this.sink?.close?.();
    this.fd = -1;
  }

  protected checkOpen(): void {
    if (this.closed) throw new CaptureFormatError('write after close');
  }
}

export interface PcapWriterOptions {
  /** Link type of the file; default: that of the first frame (ETHERNET for an empty file). */
  linktype?: number;
  /** Frames are cut to snaplen bytes (origlen kept). Default 262144. */
  snaplen?: number;
  /** Nanosecond timestamps (magic 0xa1b23c4d); default false = µs (truncated). */
  nanosecond?: boolean;
  /** Write big-endian (default: little-endian). */
  bigEndian?: boolean;
  /** Record an FCS length (bytes, even, <= 30) in the link-type field's FCS bits. */
  fcsLen?: number;
  /** Internal buffer size (default 1 MiB). */
  bufferSize?: number;
}

/** Classic pcap writer. Every frame must have the file's link type (else CaptureFormatError). */
export class PcapWriter extends BufferedWriter implements CaptureWriter {
  readonly format = 'pcap' as const;
  private linktype: number;
  private readonly snaplen: number;
  private readonly ns: boolean;
  private readonly fcsLen: number | undefined;
  private headerDone = false;
  private secKey = NO_KEY;
  private secNum = 0;

  constructor(target: WriteTarget, opts: PcapWriterOptions = {}) {
    super(target, opts.bigEndian !== true, opts.bufferSize ?? DEFAULT_BUFFER);
    this.linktype = opts.linktype ?? -1;
    this.snaplen = opts.snaplen ?? 262144;
    this.ns = opts.nanosecond === true;
    this.fcsLen = opts.fcsLen;
  }

  private header(): void {
    if (this.linktype < 0) this.linktype = 1;
    let lt = this.linktype & 0xffff;
    if (this.fcsLen !== undefined) lt = (lt | 0x04000000 | (((this.fcsLen >>> 1) & 0xf) << 28)) >>> 0;
    this.reserve(24);
    const dv = this.dv;
    const o = this.n;
    dv.setUint32(o, this.ns ? PCAP_MAGIC.NS : PCAP_MAGIC.US, this.le);
    dv.setUint16(o + 4, 2, this.le);
    dv.setUint16(o + 6, 4, this.le);
    dv.setUint32(o + 8, 0, this.le);
    dv.setUint32(o + 12, 0, this.le);
    dv.setUint32(o + 16, this.snaplen, this.le);
    dv.setUint32(o + 20, lt, this.le);
    this.n += 24;
    this.headerDone = true;
  }

  write(f: CapturedFrame): void {
    this.checkOpen();
    if (!this.headerDone) {
      if (this.linktype < 0) this.linktype = f.linktype;
      this.header();
    }
    if (f.linktype !== this.linktype) {
      throw new CaptureFormatError(`pcap holds one link type: file ${linktypeName(this.linktype)}, frame ${linktypeName(f.linktype)} (write pcapng instead)`);
    }
    const data = f.data.length > this.snaplen ? f.data.subarray(0, this.snaplen) : f.data;
    const caplen = data.length;
    const origlen = Math.max(f.origlen, f.data.length);
    // split tsNs into seconds + fraction, caching the current second
    let d = f.tsNs - this.secKey;
    if (d < 0n || d >= NS) {
      let sec = f.tsNs / NS;
      if (f.tsNs < 0n && sec * NS !== f.tsNs) sec -= 1n; // floor
      // Classic pcap has an unsigned 32-bit seconds field: a time before 1970 or after
      // 2106-02-07 would wrap silently into a wrong date. Refuse it instead (pcapng holds it).
      if (sec < 0n || sec > 0xffffffffn) {
        throw new CaptureFormatError(`classic pcap cannot hold the timestamp of frame ${this.framesWritten + 1} (${sec} s since 1970; it holds 0…4294967295, 1970…2106): write pcapng instead`);
      }
      this.secKey = sec * NS;
      this.secNum = Number(sec);
      d = f.tsNs - this.secKey;
    }
    const fracNs = Number(d);
    this.reserve(16 + caplen);
    const dv = this.dv;
    const o = this.n;
    dv.setUint32(o, this.secNum, this.le);
    dv.setUint32(o + 4, this.ns ? fracNs : Math.floor(fracNs / 1000), this.le);
    dv.setUint32(o + 8, caplen, this.le);
    dv.setUint32(o + 12, origlen, this.le);
    this.n += 16;
    this.put(data);
    this.framesWritten++;
  }

  close(): void {
    if (this.closed) return;
    if (!this.headerDone) this.header();
    this.finish();
  }
}

export interface PcapngWriterOptions {
  /** shb_userappl (default "smcscope"). */
  userAppl?: string;
  /** shb_hardware / shb_os / SHB opt_comment, when given. */
  hardware?: string;
  os?: string;
  comment?: string;
  /** IDB snaplen (default 0 = no limit). Frames are not cut. */
  snaplen?: number;
  /** Write a big-endian section (default: little-endian). */
  bigEndian?: boolean;
  /** Internal buffer size (default 1 MiB). */
  bufferSize?: number;
}

/** pcapng writer: one section; interfaces are created on first use of (linktype, ifName). */
export class PcapngWriter extends BufferedWriter implements CaptureWriter {
  readonly format = 'pcapng' as const;
  private readonly ifaces = new Map<string, number>();
  private nIfaces = 0;
  private lastLt = -1;
  private lastName: string | undefined = undefined;
  private lastId = -1;
  private readonly snaplen: number;
  private hiKey = NO_KEY;
  private hiNum = 0;

  constructor(target: WriteTarget, opts: PcapngWriterOptions = {}) {
    super(target, opts.bigEndian !== true, opts.bufferSize ?? DEFAULT_BUFFER);
    this.snaplen = opts.snaplen ?? 0;
    const opt: [number, Uint8Array][] = [];
    if (opts.comment !== undefined) opt.push([1, utf8.encode(opts.comment)]);
    if (opts.hardware !== undefined) opt.push([2, utf8.encode(opts.hardware)]);
    if (opts.os !== undefined) opt.push([3, utf8.encode(opts.os)]);
    opt.push([4, utf8.encode(opts.userAppl ?? 'smcscope')]);
    const blen = 28 + optionsLength(opt);
    this.reserve(blen);
    const dv = this.dv;
    const o = this.n;
    dv.setUint32(o, PCAPNG_BLOCK.SHB, this.le);
    dv.setUint32(o + 4, blen, this.le);
    dv.setUint32(o + 8, PCAPNG_BYTE_ORDER_MAGIC, this.le);
    dv.setUint16(o + 12, 1, this.le);
    dv.setUint16(o + 14, 0, this.le);
    dv.setBigInt64(o + 16, -1n, this.le); // section length unknown
    this.n += 24;
    this.putOptions(opt);
    this.dv.setUint32(this.n, blen, this.le);
    this.n += 4;
  }

  /** Id of the interface for (linktype, name), writing its IDB on first use. */
  addInterface(linktype: number, name?: string): number {
    const key = `${linktype}\0${name ?? ''}\0${name === undefined ? 0 : 1}`;
    const known = this.ifaces.get(key);
    if (known !== undefined) return known;
    const opt: [number, Uint8Array][] = [];
    if (name !== undefined) opt.push([2, utf8.encode(name)]);
    opt.push([9, Uint8Array.of(9)]); // if_tsresol: 10^-9
    const blen = 20 + optionsLength(opt);
    this.reserve(blen);
    const dv = this.dv;
    const o = this.n;
    dv.setUint32(o, PCAPNG_BLOCK.IDB, this.le);
    dv.setUint32(o + 4, blen, this.le);
    dv.setUint16(o + 8, linktype & 0xffff, this.le);
    dv.setUint16(o + 10, 0, this.le);
    dv.setUint32(o + 12, this.snaplen, this.le);
    this.n += 16;
    this.putOptions(opt);
    this.dv.setUint32(this.n, blen, this.le);
    this.n += 4;
    const id = this.nIfaces++;
    this.ifaces.set(key, id);
    return id;
  }

  write(f: CapturedFrame): void {
    this.checkOpen();
    let id = this.lastId;
    if (f.linktype !== this.lastLt || f.ifName !== this.lastName || id < 0) {
      id = this.addInterface(f.linktype, f.ifName);
      this.lastLt = f.linktype;
      this.lastName = f.ifName;
      this.lastId = id;
    }
    const data = f.data;
    const caplen = data.length;
    const padded = (caplen + 3) & ~3;
    let comment: Uint8Array | undefined;
    let optLen = 0;
    if (f.comment !== undefined) {
      comment = utf8.encode(f.comment);
      if (comment.length > 0xffff) comment = comment.subarray(0, 0xffff);
      optLen = 4 + ((comment.length + 3) & ~3) + 4;
    }
    const blen = 32 + padded + optLen;
    // 64-bit ns timestamp split into hi/lo, caching the current hi
    let d = f.tsNs - this.hiKey;
    if (d < 0n || d >= TWO32) {
      const u = BigInt.asUintN(64, f.tsNs);
      const hi = u >> 32n;
      this.hiNum = Number(hi);
      this.hiKey = f.tsNs - (u - (hi << 32n));
      d = f.tsNs - this.hiKey;
    }
    this.reserve(blen);
    const dv = this.dv;
    const le = this.le;
    const o = this.n;
    dv.setUint32(o, PCAPNG_BLOCK.EPB, le);
    dv.setUint32(o + 4, blen, le);
    dv.setUint32(o + 8, id, le);
    dv.setUint32(o + 12, this.hiNum, le);
    dv.setUint32(o + 16, Number(d), le);
    dv.setUint32(o + 20, caplen, le);
    dv.setUint32(o + 24, Math.max(f.origlen, caplen), le);
    this.n += 28;
    this.put(data);
    this.zero(padded - caplen);
    if (comment !== undefined) {
      this.putOptions([[1, comment]]);
    }
    this.dv.setUint32(this.n, blen, le);
    this.n += 4;
    this.framesWritten++;
  }

  /** Options + opt_endofopt (caller reserved optionsLength() bytes). */
  private putOptions(opts: [number, Uint8Array][]): void {
    for (const [code, v] of opts) {
      this.dv.setUint16(this.n, code, this.le);
      this.dv.setUint16(this.n + 2, v.length, this.le);
      this.n += 4;
      this.put(v);
      this.zero(((v.length + 3) & ~3) - v.length);
    }
    this.dv.setUint32(this.n, 0, this.le);
    this.n += 4;
  }

  close(): void {
    this.finish();
  }
}

function optionsLength(opts: [number, Uint8Array][]): number {
  let n = 4; // opt_endofopt
  for (const [, v] of opts) n += 4 + ((v.length + 3) & ~3);
  return n;
}

export interface CaptureWriterOptions extends PcapWriterOptions, PcapngWriterOptions {
  /** Default: pcapng when the path ends in .pcapng/.ntar, else pcap. */
  format?: CaptureFileFormat;
}

/** A pcap or pcapng writer for `target` (format from opts.format or the file name). */
export function createCaptureWriter(target: WriteTarget, opts: CaptureWriterOptions = {}): CaptureWriter {
  const fmt = opts.format ?? (typeof target === 'string' && /\.(pcapng|ntar)$/i.test(target) ? 'pcapng' : 'pcap');
  return fmt === 'pcapng' ? new PcapngWriter(target, opts) : new PcapWriter(target, opts);
}
