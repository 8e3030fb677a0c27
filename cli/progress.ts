// A progress bar on stderr for long replays (`smcdump -r big.pcap > out.txt`): shown when
// stdout is not a terminal (nothing else tells the user how far along it is) and stderr is
// one, after the replay has run for a moment; --progress forces it, --no-progress hides it.
// One line, redrawn in place with \r at most every 100 ms, erased at the end.

import { writeSync } from 'node:fs';
import { fmtBytes } from '../dissectors/wire/common.js';

export interface ProgressOptions {
  /** Bytes of the whole input (0 = unknown: no percentage). */
  total: number;
  /** fd to draw on (default 2). */
  fd?: number;
  /** Only start drawing after this long (default 1000 ms; 0 with `force`). */
  delayMs?: number;
  /** Line width (default: the terminal's columns, else 80). */
  width?: number;
  /** Use colours/escapes? Only plain ASCII is used, so this only picks the erase method. */
  tty?: boolean;
}

/** Whether to show a progress bar: --progress / --no-progress, else stdout not a TTY and stderr a TTY. */
export function wantProgress(flag: boolean | undefined, stdoutTty = process.stdout.isTTY === true, stderrTty = process.stderr.isTTY === true): boolean {
  if (flag !== undefined) return flag;
  return !stdoutTty && stderrTty;
}

export class Progress {
  private readonly total: number;
  private readonly fd: number;
  private readonly width: number;
  private readonly tty: boolean;
  private readonly start = performance.now();
  private readonly showAt: number;
  private lastDraw = -Infinity;
  private drawn = false;
  private lastLen = 0;

  constructor(o: ProgressOptions) {
    this.total = o.total;
    this.fd = o.fd ?? 2;
    this.tty = o.tty ?? process.stderr.isTTY === true;
    this.width = Math.max(40, Math.min(200, o.width ?? (process.stderr.columns || 80)));
    this.showAt = this.start + (o.delayMs ?? 1000);
  }

  /** Cheap to call often: draws only when due. */
  update(done: number, frames: number): void {
    const now = performance.now();
    if (now < this.showAt || now - this.lastDraw < 100) return;
    this.lastDraw = now;
    this.draw(this.render(done, frames, now));
  }

  /** The bar text (exported for tests through render). */
  render(done: number, frames: number, now = performance.now()): string {
    const elapsed = (now - this.start) / 1000;
    const stats = `${fmtBytes(done, true)}${this.total > 0 ? ` / ${fmtBytes(this.total, true)}` : ''}  ${fmtCount(frames)} frames`;
    if (this.total <= 0) return `${stats}  ${fmtDuration(elapsed)}`;
    const frac = Math.min(1, Math.max(0, done / this.total));
    const pct = `${Math.floor(frac * 100)}%`.padStart(4);
    const rate = elapsed > 0 ? done / elapsed : 0;
    const eta = rate > 0 && frac < 1 ? `  ETA ${fmtDuration((this.total - done) / rate)}` : '';
    const tail = ` ${pct}  ${stats}${eta}`;
    const barWidth = Math.max(10, this.width - tail.length - 3);
    const fill = Math.round(frac * barWidth);
    return `[${'#'.repeat(fill)}${'.'.repeat(barWidth - fill)}]${tail}`;
  }

  /** Erase the bar (if it was drawn) so the closing summary starts on a clean line. */
  end(): void {
    if (!this.drawn) return;
    this.write(this.tty ? '\r\u001b[K' : `\r${' '.repeat(this.lastLen)}\r`);
    this.drawn = false;
  }

  private draw(s: string): void {
    const pad = this.lastLen > s.length ? ' '.repeat(this.lastLen - s.length) : '';
    this.write(`\r${s}${pad}`);
    this.lastLen = s.length;
    this.drawn = true;
  }

  private write(s: string): void {
    try { writeSync(this.fd, s); } catch { /* stderr gone: no progress */ }
  }
}

function fmtCount(n: number): string {
  if (n < 10_000) return String(n);
  if (n < 10_000_000) return `${Math.round(n / 1000)}k`;
  return `${(n / 1e6).toFixed(1)}M`;
}

function fmtDuration(s: number): string {
  const t = Math.round(s);
  const m = Math.floor(t / 60);
  return `${m}:${String(t % 60).padStart(2, '0')}`;
}
