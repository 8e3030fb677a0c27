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
        const t = new Date(Number(sec) * 1000);
        const hms = this.utc
          ? `${two(t.getUTCHours())}:${two(t.getUTCMinutes())}:${two(t.getUTCSeconds())}`
          : `${two(t.getHours())}:${two(t.getMinutes())}:${two(t.getSeconds())}`;
        const date = this.mode !== 'date' ? '' : this.utc
          ? `${t.getUTCFullYear()}-${two(t.getUTCMonth() + 1)}-${two(t.getUTCDate())} `
          : `${t.getFullYear()}-${two(t.getMonth() + 1)}-${two(t.getDate())} `;
        this.cachedPrefix = `${date}${hms}.`;
        return this.cachedPrefix + fracNum(Number(tsNs - this.secStartNs), digits);
      }
    }
  }
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
