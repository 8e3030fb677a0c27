// `smcperf --report FILE.html`: the run as one self-contained HTML page — intervals over time,
// the latency histogram and CPU per side, SMC-R next to TCP (same page machinery and uPlot as
// `smcdump --report`).

import { writeFileSync } from 'node:fs';
import { reportPage } from '../dissectors/render/report/html.js';

export interface CpuMs { userMs: number; systemMs: number }

/** CPU used by this process since `from` (process.cpuUsage()), in ms. */
export function cpuSince(from: NodeJS.CpuUsage): CpuMs {
  const d = process.cpuUsage(from);
  return { userMs: Math.round(d.user / 100) / 10, systemMs: Math.round(d.system / 100) / 10 };
}

/** Latency samples (µs) in buckets of 10^(1/20) (about 12 % wide) from the smallest to the largest. */
export function latencyHistogram(us: readonly number[]): { edges: number[]; counts: number[] } {
  const STEP = 20;
  let lo = Infinity, hi = 0;
  for (const v of us) { if (v > 0 && v < lo) lo = v; if (v > hi) hi = v; }
  if (!Number.isFinite(lo)) return { edges: [0, 1], counts: [us.length] };
  const k0 = Math.floor(Math.log10(lo) * STEP), k1 = Math.floor(Math.log10(hi) * STEP);
  const edges: number[] = [], counts = new Array<number>(k1 - k0 + 1).fill(0);
  for (let k = k0; k <= k1 + 1; k++) edges.push(Math.round(10 ** (k / STEP) * 100) / 100);
  for (const v of us) { const k = Math.min(k1, Math.max(k0, Math.floor(Math.log10(Math.max(v, lo)) * STEP))); counts[k - k0]!++; }
  return { edges, counts };
}

export interface PerfReportInput {
  host: string; port: number; test: string; sizes: number[]; parallel: number; seconds: number | null; bytes: number | null; device: string;
  runs: unknown[];
}

export function renderPerfReport(r: PerfReportInput): string {
  const title = `smcperf ${r.test} → ${r.host}:${r.port}`;
  return reportPage({ kind: 'smcperf', title, generator: 'smcperf (smcscope) --report', ...r }, title, 'perf-client.js');
}

export function writePerfReport(file: string, r: PerfReportInput): void {
  writeFileSync(file, renderPerfReport(r));
}
