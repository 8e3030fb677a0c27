// Latency statistics for smcping and smcperf (ping's min/avg/max/mdev plus percentiles).

export interface Stats { count: number; min: number; avg: number; max: number; mdev: number; p50: number; p90: number; p99: number; p999: number }

/** Percentile of a sorted array (nearest rank). */
function percentile(sorted: readonly number[], p: number): number {
  if (!sorted.length) return NaN;
  const k = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[k]!;
}

export function stats(values: readonly number[]): Stats | undefined {
  if (!values.length) return undefined;
  const s = [...values].sort((a, b) => a - b);
  const avg = s.reduce((a, b) => a + b, 0) / s.length;
  const sq = s.reduce((a, b) => a + b * b, 0) / s.length;
  return {
    count: s.length, min: s[0]!, avg, max: s[s.length - 1]!, mdev: Math.sqrt(Math.max(0, sq - avg * avg)),
    p50: percentile(s, 50), p90: percentile(s, 90), p99: percentile(s, 99), p999: percentile(s, 99.9),
  };
}

/** Milliseconds with 3 decimals (µs resolution), like ping. */
export const ms3 = (v: number): string => v.toFixed(3);
export const round3 = (v: number): number => Math.round(v * 1000) / 1000;
