// The time column, with tcpdump's -t family of meanings, so that a tcpdump user reads it
// without a second thought:
//
//   (default) HH:MM:SS.frac          time of day, local time (TZ), like tcpdump
//   -t        (none)
//   -tt       1795335097.521356      seconds since the epoch
//   -ttt      " 00:00:00.011348"     since the previous frame (leading sign column: ' ' or '-')
//   -tttt     2026-11-22 08:11:37.521356  date and time of day
//   -ttttt    " 00:00:02.351327"     since the first frame
//   rel       2.351327               seconds since the first frame (smcdump's --time rel)
//
// `frac` has 6 digits, or 9 when the capture has nanoseconds (or with --nano). Local time is
// what tcpdump prints; `utc` prints UTC instead (tcpdump users get that with TZ=UTC).

export type TimeMode = 'hms' | 'none' | 'epoch' | 'delta' | 'date' | 'since-first' | 'rel';

/** tcpdump's -t count (1..5) → mode; 0 = tcpdump's default. */
export function timeModeForTCount(n: number): TimeMode {
  return (['hms', 'none', 'epoch', 'delta', 'date', 'since-first'] as const)[Math.min(n, 5)]!;
}

const NS = 1_000_000_000n;

function two(n: number): string { return n < 10 ? '0' + n : String(n); }

export class TimeColumn {
  private prev: bigint | undefined;
  private first: bigint | undefined;
  // Broken-down time changes once a second; frames come in bursts within one second, and
  // Date and bigint arithmetic per frame would cost more than the rest of the line: within the
  // cached second the fraction is one bigint subtraction and number formatting.
  // [secStartNs, secEndNs): the second whose "HH:MM:SS." prefix is cached (empty range at first)
  private secStartNs = 0n;
  private secEndNs = 0n;
  private cachedPrefix = '';

  constructor(private readonly mode: TimeMode, private readonly utc = false) {}

  /** The column for a frame at `tsNs` with `digits` (6 or 9) fraction digits; '' for -t. */
  format(tsNs: bigint, digits: 6 | 9): string {
    const prev = this.prev ?? tsNs;
    this.prev = tsNs;
    this.first ??= tsNs;
    switch (this.mode) {
      case 'none': return '';
      case 'epoch': return `${tsNs / NS}.${frac(tsNs % NS, digits)}`;
      case 'delta': return duration(tsNs - prev, digits);
      case 'since-first': return duration(tsNs - this.first, digits);
      case 'rel': {
        const d = tsNs - this.first;
        const a = d < 0n ? -d : d;
        return `${d < 0n ? '-' : ''}${a / NS}.${frac(a % NS, digits)}`;
      }
      default: {
        // Inside the cached second: one bigint subtraction, the rest in plain numbers.
        if (tsNs >= this.secStartNs && tsNs < this.secEndNs) return this.cachedPrefix + fracNum(Number(tsNs - this.secStartNs), digits);
        // floor division: a timestamp before 1970 still gets a second and a positive fraction
        let sec = tsNs / NS;
        if (tsNs < 0n && sec * NS !== tsNs) sec -= 1n;
        this.secStartNs = sec * NS;
        this.secEndNs = this.secStartNs + NS;
        this.cachedPrefix = secondPrefix(Number(sec), this.mode === 'date', this.utc);
        return this.cachedPrefix + fracNum(Number(tsNs - this.secStartNs), digits);
      }
    }
  }
}

/** Where TimeColumn.writeParts puts the column: cli/output.ts Out (bytes, no strings). */
export interface ColumnSink { bytes(b: Uint8Array): void; int(n: number, width?: number, pad?: number): void; byte(c: number): void }

const ascii = new TextEncoder();

/** Modes whose column depends on the frame's own time only (no previous/first frame). */
const OWN_TIME: ReadonlySet<TimeMode> = new Set(['hms', 'date', 'epoch', 'none']);

export class TimeParts {
  // the "HH:MM:SS." / "YYYY-MM-DD HH:MM:SS." prefix of the second `sec` (changes once a
  // second), kept as bytes: one copy per frame
  private sec = -1;
  private prefix = new Uint8Array(0);
  // the local minute `prefix` lies in: seconds [minStart, minEnd) differ in their two SS digits
  // only (a capture of many connections changes second every few dozen frames; Date's local
  // time and the encoding cost ~2 µs a change, the digits nothing)
  private minStart = 0;
  private minEnd = 0;

  constructor(private readonly mode: TimeMode, private readonly utc = false) {}

  /** Whether writeParts() prints this mode (-ttt, -ttttt and rel need the frames before: format()). */
  get supported(): boolean { return OWN_TIME.has(this.mode); }

  /**
   * The column TimeColumn.format() makes, plus its separating space, for a frame at `sec`
   * seconds and `subNs` (< 1e9) nanoseconds since the epoch, written straight into `out`:
   * two numbers, no BigInt arithmetic, no string per frame.
   */
  writeParts(out: ColumnSink, sec: number, subNs: number, digits: 6 | 9): void {
    const mode = this.mode;
    if (mode === 'none') return;
    if (mode === 'epoch') out.int(sec);
    else {
      if (sec !== this.sec) {
        this.sec = sec;
        if (sec >= this.minStart && sec < this.minEnd) {
          // same local minute: the prefix's SS digits (it is copied into the line, never kept)
          const p = this.prefix, ss = sec - this.minStart;
          p[p.length - 3] = 48 + ((ss / 10) | 0);
          p[p.length - 2] = 48 + (ss % 10);
        } else this.newMinute(sec, mode === 'date');
      }
      out.bytes(this.prefix);
    }
    if (mode === 'epoch') out.byte(46); // '.'
    out.int(digits === 9 ? subNs : Math.floor(subNs / 1000), digits, 48);
    out.byte(32);
  }

  /** The prefix of `sec` from Date, and the local minute around it in which only SS changes:
   *  the minute's first and last seconds must read the same but `00` and `59` (an offset change
   *  inside it, of any size, makes one read otherwise: then each of its seconds goes through Date). */
  private newMinute(sec: number, date: boolean): void {
    const text = secondPrefix(sec, date, this.utc);
    this.prefix = ascii.encode(text);
    const start = sec - Number(text.slice(-3, -1));
    const minute = text.slice(0, -3);
    const ok = Number.isSafeInteger(start) && secondPrefix(start, date, this.utc) === minute + '00.' && secondPrefix(start + 59, date, this.utc) === minute + '59.';
    this.minStart = start;
    this.minEnd = ok ? start + 60 : start;
  }
}

/** "HH:MM:SS." (with "YYYY-MM-DD " before it for `date`) of second `sec`, local time or UTC. */
function secondPrefix(sec: number, date: boolean, utc: boolean): string {
  const t = new Date(sec * 1000);
  const hms = utc
    ? `${two(t.getUTCHours())}:${two(t.getUTCMinutes())}:${two(t.getUTCSeconds())}`
    : `${two(t.getHours())}:${two(t.getMinutes())}:${two(t.getSeconds())}`;
  const day = !date ? '' : utc
    ? `${t.getUTCFullYear()}-${two(t.getUTCMonth() + 1)}-${two(t.getUTCDate())} `
    : `${t.getFullYear()}-${two(t.getMonth() + 1)}-${two(t.getDate())} `;
  return `${day}${hms}.`;
}

/** Fraction digits of `ns` nanoseconds (0 ≤ ns < 1e9, a plain number). */
function fracNum(ns: number, digits: 6 | 9): string {
  const v = String(digits === 9 ? ns : Math.floor(ns / 1000));
  return v.length < digits ? '000000000'.slice(0, digits - v.length) + v : v;
}

function frac(ns: bigint, digits: 6 | 9): string {
  const v = digits === 9 ? String(ns) : String(ns / 1000n);
  return v.length < digits ? '000000000'.slice(0, digits - v.length) + v : v;
}

/** tcpdump's -ttt/-ttttt form: a sign column (' ' or '-'), then hours:minutes:seconds.frac. */
function duration(d: bigint, digits: 6 | 9): string {
  const a = d < 0n ? -d : d;
  const s = Number(a / NS);
  return `${d < 0n ? '-' : ' '}${two(Math.floor(s / 3600))}:${two(Math.floor(s / 60) % 60)}:${two(s % 60)}.${frac(a % NS, digits)}`;
}
