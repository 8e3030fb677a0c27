// smcperf --report: the histogram helper, and the page in a real browser (runs made up here:
// the endpoint tests run smcperf itself; this checks what the report shows of its runs).
import test from 'ava';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser } from 'puppeteer-core';
import { latencyHistogram, renderPerfReport } from '../../cli/perf-report.js';
import { findChromium, launch, openReport } from './browser.js';

// Browser-side names used inside page.evaluate callbacks (the project compiles without the DOM lib).
 
declare const window: any;

test('latency histogram: log buckets hold every sample', (t) => {
  const s = Array.from({ length: 1000 }, (_, i) => 10 + (i % 97) * 1.5 + (i === 999 ? 5000 : 0));
  const h = latencyHistogram(s);
  t.is(h.counts.reduce((a, b) => a + b, 0), s.length);
  t.is(h.edges.length, h.counts.length + 1);
  t.true(h.edges[0]! <= 10 && h.edges[h.edges.length - 1]! > 5000);
  for (let i = 1; i < h.edges.length; i++) t.true(h.edges[i]! > h.edges[i - 1]!);
});

const run = (transport: string, test: string, size: number, mbps: number, lat?: number[]): Record<string, unknown> => ({
  transport, test, size, parallel: 1, connections: [{ mode: transport === 'smcr' ? 'smcr' : 'plain-tcp', handshakeMs: 1 }],
  intervals: [1, 2, 3].map((s) => ({ start: s - 1, end: s, bytes: mbps * 1e6, transactions: 0, bitsPerSecond: mbps * 8e6, ...(lat ? { avgUs: lat[s]! } : {}) })),
  total: { bytes: mbps * 3e6, seconds: 3, bitsPerSecond: mbps * 8e6, megabytesPerSecond: mbps, ...(lat ? { transactions: 3000, transactionsPerSecond: 1000 } : {}) },
  cpu: { client: { userMs: 900, systemMs: 300 }, server: { userMs: 600, systemMs: 200 } },
  ...(lat ? { latencyHistogramUs: latencyHistogram(lat), latencyUs: { count: lat.length, min: 1, avg: 2, p50: 2, p90: 3, p99: 4, p999: 5, max: 6, mdev: 1 } } : {}),
});

const chromium = findChromium();
let browser: Browser | undefined;
const dir = mkdtempSync(join(tmpdir(), 'smcperfreport-'));
test.before(async () => { if (chromium) browser = await launch(chromium); });
test.after.always(async () => { await browser?.close(); rmSync(dir, { recursive: true, force: true }); });
const btest = chromium ? test.serial : test.skip;

for (const mode of ['stream', 'rr'] as const) {
  btest(`smcperf --report (${mode}): SMC-R next to TCP, intervals, histogram, CPU per side, no console errors`, async (t) => {
    const lat = (base: number): number[] => Array.from({ length: 3000 }, (_, i) => base + (i % 50) + (i % 1000 === 0 ? 400 : 0));
    const runs = mode === 'rr' ? [run('tcp', 'rr', 64, 0, lat(40)), run('smcr', 'rr', 64, 0, lat(12))] : [run('tcp', 'stream', 65536, 900), run('smcr', 'stream', 65536, 1500)];
    const f = join(dir, `${mode}.html`);
    writeFileSync(f, renderPerfReport({ host: '10.0.0.2', port: 19765, test: mode, sizes: [mode === 'rr' ? 64 : 65536], parallel: 1, seconds: 3, bytes: null, device: 'uroce:10.0.0.1', runs }));
    const o = await openReport(browser!, f);
    try {
      t.is(await o.page.$$eval('#t-runs tbody tr', (r) => r.length), 2);
      const names = await o.page.$$eval('#t-runs tbody tr td:first-child', (c) => c.map((x) => (x as any).textContent));
      t.deepEqual(names, mode === 'rr' ? ['TCP 64', 'SMC-R 64'] : ['TCP 64k', 'SMC-R 64k']);
      const plots = await o.page.evaluate(() => window.smcReport.plots.map((p: any) => p.series.length));
      t.deepEqual(plots, mode === 'rr' ? [3, 3] : [3], 'interval plot (+ histogram for rr) with one series per run');
      t.is(await o.page.$$eval('#t-cpu tr', (r) => r.length), 4, 'CPU of client and server for both runs');
      if (mode === 'rr') {
        const total = await o.page.evaluate(() => window.smcReport.plots[1].data[1].reduce((a: number, b: number | null) => a + (b ?? 0), 0));
        t.is(total, 3000, 'the histogram holds every transaction');
      }
      await o.page.click('#theme');
      await o.page.screenshot({ path: join(dir, `${mode}.png`) });
      t.deepEqual(o.errors, []);
    } finally { await o.page.close(); }
  });
}
