// Size and time-to-interactive of `smcdump --report` in headless Chromium (Debian's package).
//   node dist/bench/report.js CAPTURE.pcap [runs]
// A 100 000-frame input: python3 shared/tools/mkbig.py pcaps/d-bulk-2MiB.pcap /tmp/big.pcap 45
// (not committed: it is 100 MB). Prints the smcdump time with and without --report, the report
// size, the time from navigation to the page being ready, and one whole-capture ladder redraw.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { findChromium, launch, openReport } from '../test/report/browser.js';

/* eslint-disable @typescript-eslint/no-explicit-any */
declare const window: any;

const [cap, runsArg] = process.argv.slice(2);
if (!cap) { process.stderr.write('usage: node dist/bench/report.js CAPTURE.pcap [runs]\n'); process.exit(2); }
const runs = Number(runsArg ?? 3);
const chromium = findChromium();
if (!chromium) { process.stderr.write('no chromium (/usr/bin/chromium)\n'); process.exit(3); }
const dir = mkdtempSync(join(tmpdir(), 'smcreport-bench-'));
const bin = join(process.cwd(), 'dist', 'cli', 'bin', 'smcdump.js');
const timed = (args: string[]): number => { const t0 = process.hrtime.bigint(); const r = spawnSync(process.execPath, [bin, ...args], { stdio: ['ignore', 'ignore', 'pipe'] }); if (r.status !== 0) throw new Error(String(r.stderr)); return Number(process.hrtime.bigint() - t0) / 1e6; };
const out = join(dir, 'r.html');
const plain = timed(['-r', cap, '-q', '--summary']);
const withReport = timed(['-r', cap, '-q', '--summary', '--report', out]);
const size = statSync(out).size;
const b = await launch(chromium);
try {
  for (let i = 0; i < runs; i++) {
    const o = await openReport(b, out);
    const fit = await o.page.evaluate(() => { const t0 = performance.now(); window.smcReport.ladder.fit(); window.smcReport.ladder.draw(); return performance.now() - t0; });
    const rows = await o.page.evaluate(() => { const t0 = performance.now(); window.smcReport.ladder.setRowH(18); window.smcReport.ladder.jump(50000, true); return performance.now() - t0; });
    process.stdout.write(`run ${i + 1}: ready ${o.readyMs.toFixed(0)} ms after navigation start (goto+ready ${o.loadMs} ms); whole-capture ladder ${fit.toFixed(0)} ms; jump to frame 50000 ${rows.toFixed(0)} ms; console errors ${o.errors.length}\n`);
    await o.page.close();
  }
} finally { await b.close(); rmSync(dir, { recursive: true, force: true }); }
process.stdout.write(`smcdump -q --summary ${plain.toFixed(0)} ms, with --report ${withReport.toFixed(0)} ms; report ${size} bytes (${(size / 1048576).toFixed(2)} MiB)\n`);
