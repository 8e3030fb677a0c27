// Small helpers shared by every smcscope command: colour policy, one-line errors, buffered stdout.

import type { ChalkInstance } from 'chalk';
import { writeSync } from 'node:fs';
import { createRequire } from 'node:module';

/** Colour only on a TTY, never with NO_COLOR (any value) or --no-color. Without colour (every
 *  pipe and file) chalk is not even loaded: PLAIN stands in for it (~10 ms of start-up). */
export function makeChalk(wantColor: boolean, stream: NodeJS.WriteStream = process.stdout): ChalkInstance {
  const tty = stream.isTTY === true;
  const noColor = process.env.NO_COLOR !== undefined && process.env.NO_COLOR !== '';
  if (!(wantColor && tty && !noColor)) return PLAIN;
  // chalk is ES-only; require() loads it synchronously from Node 20.19 on (package.json engines)
  const { Chalk } = createRequire(import.meta.url)('chalk') as typeof import('chalk');
  return new Chalk({ level: 1 });
}

/** Colour models: they take a colour and return a style (`c.hex('#f00')('x')`). */
const MODELS = new Set(['rgb', 'hex', 'ansi256', 'bgRgb', 'bgHex', 'bgAnsi256']);

/**
 * What chalk at level 0 does, without chalk: a style (any name, chained: `c.bold.red`) returns
 * its arguments joined by spaces, `visible` returns '', a colour model returns a style, `level`
 * is 0. test/integration/plainchalk.test.ts holds it to chalk's own level-0 output.
 */
const PLAIN: ChalkInstance = (() => {
  const style = (...args: unknown[]): string => (args.length === 1 ? String(args[0]) : args.join(' '));
  const visible: ChalkInstance = new Proxy(() => '', { get: (_t, k) => (k === 'level' ? 0 : visible) }) as unknown as ChalkInstance;
  const proxy: ChalkInstance = new Proxy(style, {
    get: (_t, k) => (k === 'level' ? 0 : k === 'visible' ? visible : typeof k === 'string' && MODELS.has(k) ? () => proxy : proxy),
  }) as unknown as ChalkInstance;
  return proxy;
})();

/** A user-facing error: printed as one line, exits non-zero, never a stack trace. */
export class CliError extends Error {
  constructor(message: string, readonly exitCode = 1) { super(message); }
}

export function die(prog: string, err: unknown): never {
  const msg = err instanceof Error ? err.message : String(err);
  process.stderr.write(`${prog}: ${msg.split('\n')[0]}\n`);
  // A bug (not a user error) can be traced with SMCSCOPE_DEBUG=1.
  if (process.env.SMCSCOPE_DEBUG && err instanceof Error && err.stack) process.stderr.write(err.stack + '\n');
  process.exit(err instanceof CliError ? err.exitCode : 1);
}

/**
 * Buffered writer to fd 1: lines are encoded straight into one reusable buffer and written with
 * one syscall per ~256 KiB, which is what makes one-line-per-frame output fast (no per-line
 * syscalls, no big joined strings). EPIPE (e.g. `| head`) ends the process quietly.
 */
export class Out {
  private readonly buf: Buffer;
  private pos = 0;
  /** Where lineStart() flushes: early the first time (see there), then with HEADROOM left. */
  private limit: number;
  constructor(private readonly fd = 1, size = 1 << 18) {
    this.buf = Buffer.allocUnsafe(size);
    this.limit = Math.min(FIRST_FLUSH, size >> 1);
  }

  /**
   * Called before a line written piece by piece (smcdump's replay loop): flushes when less than
   * HEADROOM bytes are left, so the pieces' own checks (int, text, bytes, byte) practically never
   * flush. V8 compiles a call that has never run as a deoptimization: a flush first taken inside
   * optimized line code threw it away (and the replay loop it was inlined into) once per piece
   * method. This one call site flushes first after a few dozen lines, before anything is
   * optimized, so its call has feedback when the loop is compiled.
   */
  lineStart(): void {
    if (this.pos > this.limit) {
      this.flush();
      this.limit = this.buf.length > 2 * HEADROOM ? this.buf.length - HEADROOM : this.buf.length >> 1;
    }
  }

  line(s: string): void {
    // Worst case 3 bytes per UTF-16 unit; a line too long for the buffer goes out on its own.
    if (this.pos + s.length * 3 + 1 > this.buf.length) {
      this.flush();
      if (s.length * 3 + 1 > this.buf.length) { this.write(Buffer.from(s + '\n')); return; }
    }
    this.pos += this.buf.write(s, this.pos);
    this.buf[this.pos++] = 10;
  }

  /** Append the decimal digits of the integer `n` (0 <= n < 2^53) left-padded with byte `pad`
   *  (' ' = 32, '0' = 48) to `width` characters, without building a string. */
  int(n: number, width = 0, pad = 32): void {
    if (this.pos + 24 + width > this.buf.length) this.flush();
    const b = this.buf;
    let p: number;
    let end: number;
    if (n <= 0x7fffffff) {
      // 31-bit values (frame numbers, PSNs, lengths, time fractions): the length by comparisons,
      // then two digits per integer division from a table
      const len = digits31(n);
      end = this.pos + (width > len ? width : len);
      p = digitsBefore(b, end, n);
    } else {
      // wider (32-bit TCP sequence numbers and timestamps, epoch seconds): the low eight digits
      // and the rest (< 2^27) each as 31-bit numbers
      const hi = Math.floor(n / 1e8);
      const len = digits31(hi) + 8;
      end = this.pos + (width > len ? width : len);
      p = digitsBefore(b, eightBefore(b, end, n - hi * 1e8), hi);
    }
    while (p > this.pos) b[--p] = pad;
    this.pos = end;
  }

  /** Append `s` without ending the line (a piece of one: see TextSink in dissectors/wire/common.ts).
   *  ASCII goes in byte by byte; from the first other character on, the rest as UTF-8. */
  text(s: string): void {
    const n = s.length;
    if (this.pos + n * 3 > this.buf.length) {
      this.flush();
      if (n * 3 > this.buf.length) { this.write(Buffer.from(s)); return; }
    }
    const b = this.buf;
    let p = this.pos;
    // the loop costs ~2.5 ns a character, Buffer#write ~110 ns whatever the length (measured):
    // long pieces (an LLC or CDC summary) go through write, which encodes UTF-8 as the loop does
    if (n > 48) { this.pos = p + b.write(s, p); return; }
    for (let i = 0; i < n; i++) {
      const c = s.charCodeAt(i);
      if (c > 127) { this.pos = p + b.write(s.slice(i), p); return; }
      b[p++] = c;
    }
    this.pos = p;
  }

  /** Append the decimal digits of an integer 0 <= n < 2^53. */
  dec(n: number): void { this.int(n); }

  /** Append `0x` and the unpadded lower-case hex digits of `n >>> 0`. */
  hex(n: number): void {
    if (this.pos + 10 > this.buf.length) this.flush();
    const b = this.buf;
    let x = n >>> 0;
    let len = 1;
    for (let y = x >>> 4; y !== 0; y >>>= 4) len++;
    b[this.pos] = 48; // 0
    b[this.pos + 1] = 120; // x
    let p = this.pos + 2 + len;
    this.pos = p;
    do { const d = x & 15; b[--p] = d < 10 ? 48 + d : 87 + d; x >>>= 4; } while (x !== 0);
  }

  /** Append the bytes `src` as they are (a line's cached pieces: dissectors/render/line.ts CachedLine). */
  bytes(src: Uint8Array): void {
    const n = src.length;
    if (this.pos + n > this.buf.length) {
      this.flush();
      if (n > this.buf.length) { this.write(src); return; }
    }
    const b = this.buf;
    let p = this.pos;
    // a byte loop costs ~1.2 ns a byte, TypedArray.set ~20 ns whatever the length (measured)
    if (n < 16) for (let i = 0; i < n; i++) b[p++] = src[i]!;
    else { b.set(src, p); p += n; }
    this.pos = p;
  }

  /** Append one byte (an ASCII character code). */
  byte(c: number): void {
    if (this.pos + 1 > this.buf.length) this.flush();
    this.buf[this.pos++] = c;
  }

  flush(): void {
    if (this.pos === 0) return;
    const n = this.pos;
    this.pos = 0;
    this.write(this.buf.subarray(0, n));
  }

  private write(b: Uint8Array): void {
    try {
      writeAll(this.fd, b);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'EPIPE') process.exit(0);
      throw e;
    }
  }
}

/** Out.lineStart(): the first flush (bytes) and the room kept for a line after it. */
const FIRST_FLUSH = 8192;
const HEADROOM = 16384;

/** "00" … "99" as byte pairs (Out.int writes two digits per division). */
const PAIRS = Uint8Array.from({ length: 200 }, (_, i) => 48 + ((i & 1) === 0 ? Math.floor((i >> 1) / 10) : (i >> 1) % 10));

/** Write the digits of 0 <= x < 2^31 into b ending before `p`, two per division; returns where they start. */
function digitsBefore(b: Buffer, p: number, x: number): number {
  while (x >= 100) {
    const q = (x / 100) | 0;
    const r = (x - q * 100) << 1;
    b[--p] = PAIRS[r + 1]!;
    b[--p] = PAIRS[r]!;
    x = q;
  }
  if (x >= 10) { b[--p] = PAIRS[(x << 1) + 1]!; b[--p] = PAIRS[x << 1]!; } else b[--p] = 48 + x;
  return p;
}

/** Write 0 <= x < 10^8 as exactly eight digits (leading zeros) ending before `p`; returns p - 8. */
function eightBefore(b: Buffer, p: number, x: number): number {
  for (let k = 0; k < 4; k++) {
    const q = (x / 100) | 0;
    const r = (x - q * 100) << 1;
    b[--p] = PAIRS[r + 1]!;
    b[--p] = PAIRS[r]!;
    x = q;
  }
  return p;
}

/** Decimal digits of 0 <= n < 2^31. */
function digits31(n: number): number {
  if (n < 100000) return n < 10 ? 1 : n < 100 ? 2 : n < 1000 ? 3 : n < 10000 ? 4 : 5;
  return n < 1000000 ? 6 : n < 10000000 ? 7 : n < 100000000 ? 8 : n < 1000000000 ? 9 : 10;
}

const PAUSE = new Int32Array(new SharedArrayBuffer(4));

/** Write all of `b` to `fd`. stdout may be a non-blocking pipe: on EAGAIN wait 1 ms and retry. */
export function writeAll(fd: number, b: Uint8Array): void {
  let o = 0;
  while (o < b.length) {
    try {
      o += writeSync(fd, b, o, b.length - o);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EAGAIN') throw e;
      Atomics.wait(PAUSE, 0, 0, 1);
    }
  }
}
