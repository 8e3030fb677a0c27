// Headless Chromium for the report tests: Debian's chromium package driven by puppeteer-core
// (which never downloads a browser). CHROMIUM=/path overrides where it is looked for.
import { existsSync } from 'node:fs';
import type { Browser, Page } from 'puppeteer-core';

// Browser-side names used inside page.evaluate callbacks (the project compiles without the DOM lib).
 
declare const window: any;
declare const document: any;
type Element = any;
type HTMLElement = any;

export function findChromium(): string | undefined {
  for (const p of [process.env.CHROMIUM, '/usr/bin/chromium', '/usr/bin/chromium-browser']) if (p && existsSync(p)) return p;
  return undefined;
}

export async function launch(executablePath: string): Promise<Browser> {
  const { default: puppeteer } = await import('puppeteer-core');
  return puppeteer.launch({
    executablePath, headless: true,
    // root in CI has no user namespace sandbox; no GPU on the test machines
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run', '--no-default-browser-check'],
  });
}

export interface Opened { page: Page; errors: string[]; readyMs: number; loadMs: number }

/** Open a report file and wait until its script says it is ready; console errors are collected. */
export async function openReport(b: Browser, file: string, viewport = { width: 1400, height: 1000 }): Promise<Opened> {
  const page = await b.newPage();
  await page.setViewport(viewport);
  const errors: string[] = [];
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warn') errors.push(`console.${m.type()}: ${m.text()}`); });
  page.on('pageerror', (e) => errors.push(`page error: ${(e as Error).message}`));
  page.on('requestfailed', (r) => errors.push(`request failed: ${r.url()}`));
  // a self-contained report asks for nothing: any request other than the file itself is an error
  await page.setRequestInterception(true);
  page.on('request', (r) => { if (r.url().startsWith('file://') && r.url().endsWith(file)) void r.continue(); else { errors.push(`network request: ${r.url()}`); void r.abort(); } });
  const t0 = Date.now();
  await page.goto('file://' + file, { waitUntil: 'load' });
  await page.waitForFunction('window.smcReport && window.smcReport.ready === true', { timeout: 15000 });
  const loadMs = Date.now() - t0;
  const readyMs = await page.evaluate(() => (window as unknown as { smcReport: { readyMs: number } }).smcReport.readyMs);
  return { page, errors, readyMs, loadMs };
}

export interface Box { x: number; y: number; w: number; h: number; text: string; cls: string; frame?: number; from?: number; to?: number }

/** The boxes of the ladder's visible texts and lanes, for the layout checks. */
export async function ladderLayout(page: Page): Promise<{ labels: Box[]; times: Box[]; gaps: Box[]; lanes: { i: number; x: number; box: Box }[]; ladder: Box }> {
  return page.evaluate(() => {
    const box = (e: Element): Box => {
      const r = e.getBoundingClientRect();
      const h = e as HTMLElement;
      return { x: r.left, y: r.top, w: r.width, h: r.height, text: h.textContent ?? '', cls: h.className,
        ...(h.dataset.frame ? { frame: Number(h.dataset.frame) } : {}), ...(h.dataset.from ? { from: Number(h.dataset.from), to: Number(h.dataset.to) } : {}) };
    };
    const q = (s: string): Element[] => [...document.querySelectorAll(s)];
    return {
      labels: q('#ladder .lbl').map(box), times: q('#ladder .tm').map(box), gaps: q('#ladder .gapl').map(box),
      lanes: q('#ladder .lane[data-lane]').map((e) => { const b = box(e); return { i: Number((e as HTMLElement).dataset.lane), x: b.x + b.w / 2, box: b }; }),
      ladder: box(document.getElementById('ladder')!),
    };
  });
}

export function overlaps(a: Box, b: Box): boolean {
  return a.x < b.x + b.w - 0.5 && b.x < a.x + a.w - 0.5 && a.y < b.y + b.h - 0.5 && b.y < a.y + a.h - 0.5;
}
