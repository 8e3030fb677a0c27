// `smcdump --report FILE.html`: one self-contained HTML file (no network access needed to open
// it) with the diagnosis, the summary tables, a zoomable ladder and the SMC-R stream graphs.
// The page = inline CSS + uPlot (MIT, from node_modules, inlined) + the page script
// (assets/report-client.js, plain browser JavaScript) + the data as one JSON block. Ladder rows
// are columns of small integers (times and frame numbers as deltas) so 100 000 frames stay a
// few MB.

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { existsSync } from 'node:fs';
import type { Tracker } from '../../tracker/tracker.js';
import { summaryJson } from '../summary.js';
import { jsonReplacer } from '../../wire/common.js';
import { KINDS, type ReportRecorder } from './recorder.js';

/** Anomalies embedded one by one (the rest are counted per code). */
const MAX_ANOMALIES = 2000;

export interface ReportSource { title: string; generator: string }

function asset(name: string): string {
  const candidates = [
    new URL(`assets/${name}`, import.meta.url),                                   // running from source (tsx)
    new URL(`../../../../dissectors/render/report/assets/${name}`, import.meta.url), // running from dist/
  ];
  for (const u of candidates) { const p = fileURLToPath(u); if (existsSync(p)) return readFileSync(p, 'utf8'); }
  throw new Error(`report asset ${name} not found`);
}

let uplotCache: { js: string; css: string } | undefined;
function uplot(): { js: string; css: string } {
  if (!uplotCache) {
    const req = createRequire(import.meta.url);
    uplotCache = {
      js: readFileSync(req.resolve('uplot/dist/uPlot.iife.min.js'), 'utf8'),
      css: readFileSync(req.resolve('uplot/dist/uPlot.min.css'), 'utf8'),
    };
  }
  return uplotCache;
}

function deltas(a: number[]): number[] {
  const out = new Array<number>(a.length);
  let prev = 0;
  for (let i = 0; i < a.length; i++) { out[i] = a[i]! - prev; prev = a[i]!; }
  return out;
}

const us = (ns: number): number => Math.round(ns / 1000);

/** The report's data (also what the browser tests compare with). */
function reportData(t: Tracker, rec: ReportRecorder, src: ReportSource): Record<string, unknown> {
  const summary = summaryJson(t) as Record<string, unknown>;
  const byCode: Record<string, { count: number; severity: string; first: number; message: string }> = {};
  for (const a of t.anomalyTotals.values()) byCode[a.code] = { count: a.count, severity: a.severity, first: a.first, message: a.message };
  summary.anomalies = t.anomalies.slice(0, MAX_ANOMALIES);
  summary.anomalyCount = t.anomalyCount;
  summary.anomaliesByCode = byCode;
  const R = rec.rows;
  const conns = [...rec.conns.entries()].sort((a, b) => a[0] - b[0]).map(([index, dirs]) => ({
    index,
    dirs: dirs.map((d) => ({
      seen: d.seen, t: deltas(d.t.map(us)), prod: d.prod, cons: d.cons, flags: d.flags,
      writesSeen: d.writesSeen, wt: deltas(d.wt.map(us)), wdur: d.wt1.map((e, i) => us(e) - us(d.wt[i]!)), wy: d.wy, wlen: d.wlen,
    })),
  }));
  const links = [...rec.links.values()].map((l) => {
    // only the buckets from the link's first packet on; series without any count are empty
    let b0 = Infinity;
    for (const a of [l.pkts[0], l.pkts[1]]) { const i = a.findIndex((v) => v !== 0); if (i >= 0) b0 = Math.min(b0, i); }
    if (!Number.isFinite(b0)) b0 = 0;
    const trim = (a: [number[], number[]]): [number[], number[]] => [0, 1].map((k) => (a[k]!.some((v) => v !== 0) ? a[k]!.slice(b0) : [])) as [number[], number[]];
    return { name: l.name, bucketUs: us(l.bucketNs), firstBucket: b0, pkts: trim(l.pkts), bytes: trim(l.bytes), retx: trim(l.retx), naks: trim(l.naks) };
  });
  // frame numbers: mostly the row before plus one; only the exceptions are listed
  const frameSkips: number[] = [];
  for (let i = 0, prev = 0; i < R.frame.length; i++) { const f = R.frame[i]!; if (f !== prev + 1) frameSkips.push(i, f - prev - 1); prev = f; }
  return {
    title: src.title, generator: src.generator, frames: t.frames,
    startNs: (rec.t0 ?? t.firstTs ?? 0n).toString(),
    spanUs: t.firstTs !== undefined ? us(Number(t.lastTs - t.firstTs)) : 0,
    summary,
    ladder: {
      hosts: rec.hosts, labels: rec.labels, kinds: KINDS, links: rec.linkNames, dropped: rec.rowsDropped,
      styles: rec.styles, t: deltas(R.tNs.map(us)), frameSkips, style: R.style,
    },
    conns, links,
  };
}

const esc = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** JSON inside <script>: no "</script" and no HTML comment openers. */
function scriptJson(v: unknown): string {
  return JSON.stringify(v, jsonReplacer).replace(/</g, '\\u003c').replace(/\u2028/g, '\\u2028').replace(/\u2029/g, '\\u2029');
}

/** Wrap report data and the page script into one HTML document. */
export function reportPage(data: Record<string, unknown>, title: string, script = 'report-client.js'): string {
  const u = uplot();
  return `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(title)}</title>
<style>${u.css}</style>
<style>${asset('report.css')}</style>
</head><body>
<div id="app"><noscript>This report needs JavaScript to draw its tables and graphs.</noscript></div>
<script id="report-data" type="application/json">${scriptJson(data)}</script>
<script>${u.js.replace(/<\/script/gi, '<\\/script')}</script>
<script>${asset(script)}</script>
</body></html>
`;
}

export function renderReport(t: Tracker, rec: ReportRecorder, src: ReportSource): string {
  return reportPage(reportData(t, rec, src), src.title);
}
