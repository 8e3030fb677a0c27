// smcdump --report in a real browser (Debian's chromium, headless, driven by puppeteer-core):
// each capture's report loads without console errors or network requests, shows the diagnosis
// that --summary --json gives, a click on an entry moves the ladder to its first evidence frame,
// the cursor graph holds the cursors the capture's CDCs carry, and the ladder's texts stay in
// their lanes without overlapping (checked on the laid-out page after a screenshot).
import test from 'ava';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'puppeteer-core';
import { decodeCapture, pcapPath, PCAPS, readFrames, ROOT } from '../helpers.js';
import { FrameDecoder } from '../../dissectors/frame.js';
import { ReportRecorder } from '../../dissectors/render/report/recorder.js';
import { renderReport } from '../../dissectors/render/report/html.js';
import { summaryJson } from '../../dissectors/render/summary.js';
import { jsonReplacer } from '../../dissectors/wire/common.js';
import { Tracker } from '../../dissectors/tracker/tracker.js';
import { findChromium, launch, ladderLayout, openReport, overlaps } from './browser.js';

// Browser-side names used inside page.evaluate callbacks (the project compiles without the DOM lib).
 
declare const window: any;
declare const document: any;
type HTMLElement = any;

const compiled = join(ROOT, 'dist', 'cli', 'bin', 'smcdump.js');
const fromDist = import.meta.url.includes('/dist/') && existsSync(compiled);
const cmd = fromDist ? [compiled] : ['--import', 'tsx', join(ROOT, 'cli', 'bin', 'smcdump.ts')];
const dir = mkdtempSync(join(tmpdir(), 'smcreport-'));

/** Every capture in pcaps/ (the lab adds failure captures there). */
const CAPTURES = readdirSync(PCAPS).filter((f) => f.endsWith('.pcap')).map((f) => f.replace(/\.pcap$/, '')).sort();

function smcdump(args: string[]): { code: number | null; out: string; err: string } {
  const r = spawnSync(process.execPath, [...cmd, ...args], { encoding: 'utf8', cwd: ROOT, maxBuffer: 256 << 20 });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

const reports = new Map<string, string>();
const summaries = new Map<string, Summary>();
/** The report of a capture and its `--summary --json`, built in-process the way smcdump does
 *  (decode → Tracker.feed → ReportRecorder.add; finish) — a process per capture would double
 *  the test time; the command line itself is tested below. */
async function build(name: string): Promise<void> {
  if (reports.has(name)) return;
  const dec = new FrameDecoder();
  const tr = new Tracker();
  const rec = new ReportRecorder(tr);
  for (const f of await readFrames(pcapPath(name))) { const d = dec.decode(f); rec.add(d, tr.feed(d)); }
  tr.finish();
  const f = join(dir, `${name}.html`);
  writeFileSync(f, renderReport(tr, rec, { title: name, generator: 'test' }));
  reports.set(name, f);
  summaries.set(name, JSON.parse(JSON.stringify(summaryJson(tr), jsonReplacer)) as Summary);
}
function report(name: string): string { return reports.get(name)!; }

interface Diag { code: string; severity: string; frames: { first: number; last: number; count: number }; conn?: number; link?: string }
interface Summary { diagnosis: Diag[]; connections: { smc?: { dirs: { bytes: number }[] } }[]; linkGroups: { links: unknown[] }[] }
/** `--summary --json` of a capture (what the report must agree with). */
function summary(name: string): Summary { return summaries.get(name)!; }
const diagnosis = (name: string): Diag[] => summary(name).diagnosis;

const chromium = findChromium();
const inCi = process.env.CI === 'true';
let browser: Browser | undefined;
test.before(async () => { if (chromium) browser = await launch(chromium); });
test.after.always(async () => { await browser?.close(); rmSync(dir, { recursive: true, force: true }); });

const btest = chromium ? test.serial : test.skip;
if (!chromium) {
  process.stderr.write('report browser tests: skipped: no chromium (/usr/bin/chromium); install.sh installs the Debian package, or set CHROMIUM=/path\n');
  // CI installs chromium with install.sh: there the browser tests must run
  if (inCi) test('chromium is installed in CI (install.sh)', (t) => t.fail('no /usr/bin/chromium: install.sh should have installed it'));
}

test('smcdump -r CAP --report FILE: one self-contained file, uPlot and the data inline, nothing fetched', (t) => {
  const f = join(dir, 'cli-a.html');
  const r = smcdump(['-r', pcapPath('a-first-contact'), '--report', f]);
  t.is(r.code, 0, r.err);
  t.regex(r.out, /CLC Proposal/, 'frames are still printed (no -q)');
  const html = readFileSync(f, 'utf8');
  const bad = smcdump(['-r', pcapPath('a-first-contact'), '--report', join(dir, 'no-such-dir', 'x.html')]);
  t.is(bad.code, 1);
  t.regex(bad.err, /--report .*no such directory/, 'an unwritable --report path is refused before reading');
  t.is(bad.out, '');
  t.regex(html, /^<!DOCTYPE html>/);
  t.notRegex(html, /<script[^>]+src=|<link[^>]+href=|@import|url\(http/i);
  t.true(html.includes('var uPlot='));
  t.true(html.includes('id="report-data"'));
});

async function withPage<T>(name: string, f: (page: Page, errors: string[]) => Promise<T>): Promise<T> {
  await build(name);
  const o = await openReport(browser!, report(name));
  try { return await f(o.page, o.errors); } finally { await o.page.close(); }
}

async function checkLayout(t: import('ava').ExecutionContext, page: Page, what: string, shot = false): Promise<void> {
  if (shot) await page.screenshot({ path: join(dir, `${what}.png`) }); // the layout as painted
  const L = await ladderLayout(page);
  t.true(L.lanes.length >= 2, `${what}: lanes drawn`);
  for (let i = 0; i < L.lanes.length; i++) for (let j = i + 1; j < L.lanes.length; j++) t.false(overlaps(L.lanes[i]!.box, L.lanes[j]!.box), `${what}: lane names ${i} and ${j} overlap`);
  const laneX = new Map(L.lanes.map((l) => [l.i, l.x]));
  for (const b of L.labels) {
    const a = laneX.get(b.from!)!, c = laneX.get(b.to!)!;
    t.true(b.x >= Math.min(a, c) - 0.5 && b.x + b.w <= Math.max(a, c) + 0.5, `${what}: label of frame ${b.frame} (${b.text}) is outside its lanes`);
    t.true(b.x >= L.ladder.x && b.x + b.w <= L.ladder.x + L.ladder.w, `${what}: label of frame ${b.frame} outside the ladder`);
  }
  const texts = [...L.labels, ...L.times, ...L.gaps];
  for (let i = 0; i < texts.length; i++) for (let j = i + 1; j < texts.length; j++) {
    if (overlaps(texts[i]!, texts[j]!)) t.fail(`${what}: "${texts[i]!.text}" overlaps "${texts[j]!.text}"`);
  }
  t.true(L.labels.length > 0, `${what}: ladder labels shown`);
}

for (const name of CAPTURES) {
  btest(`report of ${name}: loads cleanly, shows the diagnosis, a click jumps the ladder, layout holds`, async (t) => {
    await build(name);
    const want = diagnosis(name);
    await withPage(name, async (page, errors) => {
      const shown = await page.$$eval('#diagnosis li[data-code]', (ls) => ls.map((l) => ({ code: (l as HTMLElement).dataset.code!, first: Number((l as HTMLElement).dataset.first) })));
      t.deepEqual(shown, want.map((d) => ({ code: d.code, first: d.frames.first })), 'the diagnosis entries of --summary --json, in order');
      // tables carry the --summary --json data
      const json = summary(name);
      t.true(await page.$$eval('#t-conns tbody tr', (r) => r.length) >= json.connections.length);
      t.is(await page.$$eval('#t-links tbody tr', (r) => r.length), json.linkGroups.reduce((n, g) => n + g.links.length, 0));
      if (want.length > 0) {
        // click each entry (at most 4): the ladder selects the first evidence frame (or the next one drawn) and shows it
        for (let i = 0; i < Math.min(4, want.length); i++) {
          const d = want[i]!;
          await page.click(`#diagnosis li[data-index="${i}"] .msg`);
          const sel = await page.evaluate(() => (window as unknown as { smcReport: { ladder: { selectedFrame: number } } }).smcReport.ladder.selectedFrame);
          t.true(sel >= d.frames.first && sel <= Math.max(d.frames.last, d.frames.first), `${d.code}: ladder selected frame ${sel}, evidence ${d.frames.first}–${d.frames.last}`);
          const visible = await page.evaluate((f) => {
            const e = document.querySelector(`#ladder .lbl[data-frame="${f}"]`);
            if (!e) return false;
            const r = e.getBoundingClientRect(), b = document.getElementById('ladder')!.getBoundingClientRect();
            return r.top >= b.top && r.bottom <= b.bottom && r.top >= 0 && r.bottom <= window.innerHeight;
          }, sel);
          t.true(visible, `${d.code}: frame ${sel} is on screen in the ladder`);
          await checkLayout(t, page, `${name}-diag${i}`, i === 0);
        }
      } else {
        await page.evaluate(() => document.getElementById('ladder-sec')!.scrollIntoView());
        await checkLayout(t, page, `${name}-top`, true);
      }
      // zoom out to the whole capture and back: still no errors
      await page.click('#ladder-sec .toolbar button[title="the whole capture"]');
      await page.click('#ladder-sec .toolbar button[title="readable rows"]');
      await checkLayout(t, page, `${name}-rows`);
      // every graph builds (dark theme too)
      await page.evaluate(() => { const g = (window as unknown as { smcReport: { graphs: { cards: unknown[]; build(c: unknown): void } } }).smcReport.graphs; for (const c of g.cards) g.build(c); });
      await page.click('#theme'); await page.click('#theme');
      t.deepEqual(errors, [], 'no console errors, no network requests');
    });
  });
}

btest('cursor graph of d-bulk-2MiB holds the producer and consumer cursors of the capture\'s CDCs', async (t) => {
  // independent of the report: the CDCs of connection 1 as decoded and attributed by the tracker
  const frames = await decodeCapture('d-bulk-2MiB');
  const tr = new Tracker();
  const prodC2s = new Set<number>(), consC2s = new Set<number>();
  const ring = 65536; // the server's RMBE (CLC Accept)
  for (const d of frames) {
    const note = tr.feed(d);
    if (note.conn !== 1) continue;
    for (const i of d.smc) {
      if (i.proto !== 'cdc') continue;
      // the stream starts at 0:0 in this capture: linear position = wrap × RMB + count
      if (note.dir === 'c>s') prodC2s.add(i.value.prod.wrap * ring + i.value.prod.count);
      else consC2s.add(i.value.cons.wrap * ring + i.value.cons.count);
    }
  }
  t.true(prodC2s.size > 10);
  await withPage('d-bulk-2MiB', async (page, errors) => {
    const g = await page.evaluate(() => {
      const R = (window as unknown as { smcReport: { graphs: { cards: { el: HTMLElement; plot: { data: number[][] } | null }[]; build(c: unknown): { data: number[][] } } } }).smcReport;
      const card = R.graphs.cards.find((c) => c.el.id === 'cg-1-0')!;
      const u = R.graphs.build(card);
      return { prod: [...u.data[1]!], cons: [...u.data[2]!], win: [...u.data[3]!] };
    });
    const gp = new Set(g.prod.filter((v) => v > 0));
    const gc = new Set(g.cons.filter((v) => v > 0));
    t.deepEqual([...gp].sort((a, b) => a - b), [...prodC2s].filter((v) => v > 0).sort((a, b) => a - b), 'producer points = the client\'s CDC producer cursors');
    t.deepEqual([...gc].sort((a, b) => a - b), [...consC2s].filter((v) => v > 0).sort((a, b) => a - b), 'consumer points = the server\'s CDC consumer cursors');
    t.is(Math.max(...g.prod), summary('d-bulk-2MiB').connections[0]!.smc!.dirs[0]!.bytes, 'the whole stream (2 MiB and a little)');
    for (let i = 0; i < g.cons.length; i++) t.is(g.win[i], g.cons[i]! + ring, 'window = consumer cursor + RMB');
    t.deepEqual(errors, []);
  });
});

btest('a 20 000-frame capture: report small and interactive within 2 s', async (t) => {
  // d-bulk repeated (timestamps shifted), built here: no big file in the repo
  const src = readFileSync(pcapPath('d-bulk-2MiB'));
  const recs: Buffer[] = [];
  let off = 24;
  const le = src.readUInt32LE(0) === 0xa1b2c3d4 || src.readUInt32LE(0) === 0xa1b23c4d;
  const rd = (o: number): number => (le ? src.readUInt32LE(o) : src.readUInt32BE(o));
  const first = rd(24), last: number[] = [];
  while (off + 16 <= src.length) { const cl = rd(off + 8); recs.push(src.subarray(off, off + 16 + cl)); last[0] = rd(off); off += 16 + cl; }
  const span = last[0]! - first + 1;
  const parts: Buffer[] = [src.subarray(0, 24)];
  const reps = Math.ceil(20000 / recs.length);
  for (let r = 0; r < reps; r++) for (const rec of recs) {
    const c = Buffer.from(rec);
    if (le) c.writeUInt32LE(rec.readUInt32LE(0) + r * span, 0); else c.writeUInt32BE(rec.readUInt32BE(0) + r * span, 0);
    parts.push(c);
  }
  const big = join(dir, 'big.pcap');
  writeFileSync(big, Buffer.concat(parts));
  const out = join(dir, 'big.html');
  const r = smcdump(['-r', big, '-q', '--report', out]);
  t.is(r.code, 0, r.err);
  const size = readFileSync(out).length;
  const frames = reps * recs.length;
  t.true(size < frames * 50 + 400_000, `report ${size} bytes for ${frames} frames (≤ 50 B/frame: 100 000 frames stay under 5 MB)`);
  const o = await openReport(browser!, out);
  try {
    t.log(`${frames} frames: ${size} bytes, ready ${o.readyMs.toFixed(0)} ms after navigation (load+ready ${o.loadMs} ms)`);
    t.true(o.readyMs < 2000, `ready in ${o.readyMs} ms`);
    // zoom out to the whole capture and scroll: one redraw stays fast
    const ms = await o.page.evaluate(() => {
      const R = (window as unknown as { smcReport: { ladder: { fit(): void; draw(): void; setRowH(h: number): void } } }).smcReport;
      const t0 = performance.now(); R.ladder.fit(); R.ladder.draw(); return performance.now() - t0;
    });
    t.true(ms < 500, `whole-capture ladder drawn in ${ms.toFixed(0)} ms`);
    t.deepEqual(o.errors, []);
  } finally { await o.page.close(); }
});

// Failure captures (the lab's l-failover, m-device-removal, o-urgent-stall, p-window-stall…):
// whichever diagnosis they raise, the report shows its moment.
const failover = CAPTURES.filter((n) => /failover|device-removal/.test(n));
(failover.length && chromium ? test.serial : test.skip)(`failover in one click: the lgr.failover entry shows the validation CDC in the ladder and the cursor graph marks it${failover.length ? '' : ' (no failover capture in pcaps/ yet)'}`, async (t) => {
  let seen = 0;
  for (const name of failover) {
    await build(name);
    const want = diagnosis(name);
    const i = want.findIndex((d) => d.code === 'lgr.failover');
    if (i < 0) continue;
    seen++;
    const d = want[i]!;
    await withPage(name, async (page, errors) => {
      await page.click(`#diagnosis li[data-index="${i}"] .msg`); // one click
      const label = await page.evaluate(() => {
        const f = window.smcReport.ladder.selectedFrame;
        return { f, text: document.querySelector(`#ladder .lbl[data-frame="${f}"]`)?.textContent ?? '' };
      });
      t.is(label.f, d.frames.first, `${name}: the first failover frame is selected`);
      t.regex(label.text, /failover/, `${name}: frame ${label.f} is the failover validation CDC: ${label.text}`);
      if (d.conn !== undefined) {
        const lines = await page.evaluate((c: number) => {
          const g = window.smcReport.graphs;
          const card = g.cards.find((x: any) => x.el.id === `cg-${c}-0` || x.el.id === `cg-${c}-1`);
          return card ? card.el.querySelector('.sub').textContent : '';
        }, d.conn);
        t.regex(lines, /failover/, `${name}: the cursor graph of connection ${d.conn} counts the failover`);
      }
      t.deepEqual(errors, []);
    });
  }
  t.true(seen > 0, 'a failover capture with an lgr.failover diagnosis');
});

const stalls = CAPTURES.filter((n) => /stall/.test(n));
(stalls.length && chromium ? test.serial : test.skip)(`urgent and window stalls are marked in the cursor graphs${stalls.length ? '' : ' (no stall capture in pcaps/ yet)'}`, async (t) => {
  for (const name of stalls) {
    await build(name);
    const want = diagnosis(name).filter((d) => d.code === 'cdc.urgent-stall' || d.code === 'cdc.window-stall');
    for (const d of want) {
      await withPage(name, async (page, errors) => {
        const marks = await page.evaluate((c: number) => {
          const D = window.smcReport.data;
          const conn = D.conns.find((x: any) => x.index === c);
          const urg = conn ? conn.dirs.some((x: any) => x.flags.some((f: number) => (f & 8) !== 0)) : false;
          const subs = window.smcReport.graphs.cards.filter((x: any) => x.el.id.startsWith(`cg-${c}-`)).map((x: any) => x.el.querySelector('.sub').textContent);
          return { urg, subs };
        }, d.conn!);
        if (d.code === 'cdc.urgent-stall') t.true(marks.urg, `${name}: an urgent CDC point on connection ${d.conn}`);
        else t.true(marks.subs.some((s: string) => /[1-9]\d* stall/.test(s)), `${name}: stall counted: ${marks.subs.join(' | ')}`);
        t.deepEqual(errors, []);
      });
    }
  }
  t.pass();
});
