// The SVG ladder in a real browser (headless Chromium via puppeteer-core, as the report tests):
// for every bundled capture, the ladder rendered, then its geometry measured in the page —
// no text's box (getBBox) crosses a lifeline, no two texts overlap, each label is no wider
// than the width the renderer measured for it (so the fixed per-character width is
// conservative), one lane per host (the failover captures have two addresses per host), and
// the SVG renders to a PNG. Skipped only without chromium; under CI=true that is a failure.
import test from 'ava';
import { readdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import type { Browser } from 'puppeteer-core';
import { FrameDecoder } from '../../dissectors/frame.js';
import { Tracker } from '../../dissectors/tracker/tracker.js';
import { Ladder } from '../../dissectors/render/ladder.js';
import { fitText, hostLanes, renderLadderSvg, textWidth, type SvgRow } from '../../dissectors/render/ladder-svg.js';
import { PCAPS, ROOT, readFrames } from '../helpers.js';
import { findChromium, launch } from '../report/browser.js';

// Browser-side names inside page.evaluate (the project compiles without the DOM lib).
declare const document: any;

const chromium = findChromium();
const inCi = process.env.CI === 'true';
const btest = chromium ? test.serial : test.skip;
if (!chromium && inCi) test('chromium is installed in CI (install.sh)', (t) => t.fail('no /usr/bin/chromium: install.sh should have installed it'));

const captures = readdirSync(PCAPS).filter((f) => f.endsWith('.pcap')).sort();

async function ladderOf(file: string): Promise<{ svg: string; ladder: Ladder; tr: Tracker }> {
  const dec = new FrameDecoder();
  const tr = new Tracker();
  const ladder = new Ladder();
  for (const f of await readFrames(join(PCAPS, file))) { const d = dec.decode(f); ladder.add(d, tr.feed(d)); }
  tr.finish();
  return { svg: ladder.renderSvg(tr.groups), ladder, tr };
}

test('text measure: monospace width per code point; "…" shortening fits', (t) => {
  t.is(textWidth('abcd'), Math.ceil(4 * 12 * 0.61));
  t.is(textWidth('×…→'), textWidth('abc'));
  const s = 'LLC ADD LINK v2 rsp REJECT (unspecified) and more words';
  const f = fitText(s, 120);
  t.true(f.endsWith('…') && textWidth(f) <= 120, f);
  t.is(fitText('short', 120), 'short');
});

test('hosts: the two addresses of one side of a link group are one lane', async (t) => {
  const { ladder, tr } = await ladderOf('l-failover.pcap');
  t.true(ladder.hosts.length >= 4, ladder.hosts.join(' '));
  const { lanes } = hostLanes(ladder.hosts, tr.groups);
  t.is(lanes.length, 2, JSON.stringify(lanes));
  t.deepEqual(lanes.map((l) => [...l.addrs].sort()), [['10.55.0.1', '10.55.0.11'], ['10.55.0.12', '10.55.0.2']]);
  // without the link groups every address is its own lane (the old picture)
  t.is(hostLanes(ladder.hosts).lanes.length, ladder.hosts.length);
});

interface Geometry {
  lifelines: Array<{ x: number; y1: number; y2: number }>;
  texts: Array<{ x: number; y: number; w: number; h: number; cls: string; dw: number | null; text: string }>;
  colours: string[];
  dashes: string[];
}

let browser: Browser | undefined;
test.after.always(async () => { await browser?.close(); });

async function measure(svg: string): Promise<{ g: Geometry; errors: string[]; png: Uint8Array }> {
  browser ??= await launch(chromium!);
  const page = await browser.newPage();
  try {
    await page.setViewport({ width: 1600, height: 1200 });
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push((e as Error).message));
    await page.setContent(`<!doctype html><html><body style="margin:0">${svg}</body></html>`, { waitUntil: 'load' });
    await page.evaluate('document.fonts.ready');
    const g = await page.evaluate(() => {
      const root = document.querySelector('svg');
      const num = (e: any, a: string): number => Number(e.getAttribute(a));
      return {
        lifelines: [...root.querySelectorAll('line.lifeline')].map((l: any) => ({ x: num(l, 'x1'), y1: num(l, 'y1'), y2: num(l, 'y2') })),
        texts: [...root.querySelectorAll('text')].map((e: any) => {
          const b = e.getBBox();
          const own = [...e.childNodes].filter((n: any) => n.nodeType === 3).map((n: any) => n.nodeValue).join('');
          return { x: b.x, y: b.y, w: b.width, h: b.height, cls: e.getAttribute('class') ?? '', dw: e.dataset.w ? Number(e.dataset.w) : null, text: own };
        }),
        colours: [...new Set([...root.querySelectorAll('line.arrow')].map((l: any) => l.getAttribute('stroke')))] as string[],
        dashes: [...new Set([...root.querySelectorAll('line.arrow')].map((l: any) => l.getAttribute('stroke-dasharray') ?? ''))] as string[],
      };
    }) as Geometry;
    const png = await page.screenshot({ type: 'png', clip: { x: 0, y: 0, width: 1200, height: 800 } });
    return { g, errors, png };
  } finally {
    await page.close();
  }
}

/** The layout rules, measured: texts off the lifelines, no two texts overlapping, widths as measured. */
function checkGeometry(t: { deepEqual: (a: unknown, b: unknown, m?: string) => void; true: (v: boolean, m?: string) => void }, g: Geometry): void {
  const labels = g.texts.filter((x) => x.cls === 'label');
  t.true(labels.length > 0, 'arrows have labels');
  const crossing = g.texts.filter((b) => g.lifelines.some((l) => b.x < l.x && l.x < b.x + b.w && b.y < l.y2 && b.y + b.h > l.y1));
  t.deepEqual(crossing.map((b) => b.text), [], 'texts on a lifeline');
  const byY = [...g.texts].sort((p, q) => p.y - q.y);
  const clashes: string[] = [];
  for (let i = 0; i < byY.length; i++) {
    const a = byY[i]!;
    for (let j = i + 1; j < byY.length && byY[j]!.y < a.y + a.h; j++) {
      const b = byY[j]!;
      if (a.x < b.x + b.w && b.x < a.x + a.w) clashes.push(`${a.text} / ${b.text}`);
    }
  }
  t.deepEqual(clashes, [], 'overlapping texts');
  // the fixed per-character width is never less than what the browser draws
  const wider = labels.filter((b) => b.dw !== null && b.w > b.dw + 0.5);
  t.deepEqual(wider.map((b) => `${b.text}: ${b.w} > ${b.dw}`), [], 'labels wider than measured');
}

for (const file of captures) {
  btest(`ladder SVG of ${file}: no label on a lifeline, no two labels overlap, measured widths hold`, async (t) => {
    const { svg, tr, ladder } = await ladderOf(file);
    const { g, errors, png } = await measure(svg);
    t.deepEqual(errors, []);
    checkGeometry(t, g);
    // one lane per host, every lane drawn
    t.is(g.lifelines.length, hostLanes(ladder.hosts, tr.groups).lanes.length);
    t.true(png.length > 2000, `png ${png.length} bytes`);
    t.log(`${g.texts.filter((x) => x.cls === 'label').length} labels, ${g.lifelines.length} lanes, ${g.colours.length} colours, ${g.dashes.length} dash styles`);
  });
}

btest('three hosts: labels of arrows across a lane go in a gap, too long ones are shortened with the full text as tooltip', async (t) => {
  const long = 'LLC CONFIRM RKEY v2 req rkey 0x482 va 0xff26dd40be300000 +1 link 2 rkey 0x483 va 0xff26dd40be300000 and then some more text to be sure';
  const rows: SvgRow[] = [
    { tsNs: 0n, frame: 1, from: '10.0.0.1', to: '10.0.0.3', kind: 'tcp', text: 'SYN', alert: false, conn: 1 },
    { tsNs: 1000n, frame: 2, from: '10.0.0.3', to: '10.0.0.1', kind: 'roce', text: long, alert: false, link: 'LG1/L1' },
    { tsNs: 2000n, frame: 3, from: '10.0.0.2', to: '10.0.0.2', kind: 'roce', text: 'loop ' + long, alert: true, link: 'LG1/L2' },
    { tsNs: 3000n, frame: 4, from: '10.0.0.2', to: '10.0.0.3', kind: 'roce', text: 'CDC prod 0:54 cons 0:0', alert: false, link: 'LG1/L2', conn: 2 },
    { tsNs: 4000n, frame: 5, from: '10.0.0.3', to: '10.0.0.2', kind: 'roce', text: long, alert: false, link: 'LG1/L2' },
  ];
  const svg = renderLadderSvg(rows, ['10.0.0.1', '10.0.0.3', '10.0.0.2']);
  const { g, errors } = await measure(svg);
  t.deepEqual(errors, []);
  checkGeometry(t, g);
  t.is(g.lifelines.length, 3);
  const labels = g.texts.filter((x) => x.cls === 'label');
  t.true(labels.filter((l) => l.text.endsWith('…')).length >= 2, labels.map((l) => l.text).join(' | '));
  t.true(svg.includes(`<title>#2 ${long}</title>`), 'full text in the tooltip');
  t.regex(svg, /<text class="label"[^>]*font-weight="bold"[^>]*><title>#3 ! loop/);
});

test('failover captures: two hosts, two lanes; links differ by dash and colour, connections by colour and tag, legend maps them', async (t) => {
  t.is(((await ladderOf('l2-failover-client.pcap')).svg.match(/<line class="lifeline"/g) ?? []).length, 2, 'l2: two hosts, two lanes');
  const { svg } = await ladderOf('l-failover.pcap');
  t.is((svg.match(/<line class="lifeline"/g) ?? []).length, 2, 'two hosts, two lanes');
  const dashes = new Set([...svg.matchAll(/<line class="arrow"[^>]*stroke-dasharray="([^"]+)"/g)].map((m) => m[1]));
  t.true(dashes.size >= 2, `links by dash: ${[...dashes].join(' | ')}`);
  t.regex(svg, /<text class="legend"[^>]*>LG\d+\/L1: RoCE link/);
  t.regex(svg, /<text class="legend"[^>]*>LG\d+\/L2: RoCE link/);
  t.regex(svg, /<text class="legend"[^>]*>C\d+: SMC connection/);
  t.regex(svg, /<text class="label"[^>]*>(?:<title>[^<]*<\/title>)C\d+ CDC/);
});

test('smcdump --ladder-svg writes the same picture (one lane per host)', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'smcscope-ladder-'));
  try {
    const out = join(dir, 'l.svg');
    const r = spawnSync(process.execPath, [join(ROOT, 'dist', 'cli', 'bin', 'smcdump.js'), '-r', join(PCAPS, 'l-failover.pcap'), '-q', '--ladder-svg', out], { encoding: 'utf8' });
    t.is(r.status, 0, r.stderr);
    const s = readFileSync(out, 'utf8');
    t.is((s.match(/<line class="lifeline"/g) ?? []).length, 2);
    t.regex(s, />10\.55\.0\.11</);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
