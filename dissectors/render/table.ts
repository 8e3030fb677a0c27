// Text tables for the summaries, in linear time (cli-table3 lays out cells quadratically: a
// 20 000-row summary took minutes). Fits a width: columns are dropped by priority (1 = always
// kept), then the widest cells wrap at spaces; a row limit shows the first N rows and says how
// many more there are. Box-drawing like smcss/ss users know from cli-table3's look.

import type { ChalkInstance } from 'chalk';

export interface Column {
  head: string;
  /** 1 = never dropped; higher numbers are dropped first when the table does not fit. */
  prio?: number;
}

export interface TableOptions {
  /** Terminal width to fit (Infinity: no limit). */
  width?: number;
  /** Show at most this many rows, then "… N more". */
  maxRows?: number;
  /** What the user can do to see everything (printed with hidden columns or rows). */
  more?: string;
}

const ANSI = /\u001b\[[0-9;]*m/g;
/** Printed width of a cell: ANSI colour codes take no columns. */
export function visible(s: string): number { return s.includes('\u001b') ? s.replace(ANSI, '').length : s.length; }

export function renderTable(cols: Column[], rows: string[][], c: ChalkInstance, opts: TableOptions = {}): string {
  const out: string[] = [];
  streamTable(cols, rows.length, (i) => rows[i]!, c, opts, (l) => { out.push(l); });
  return out.join('\n');
}

/** renderTable without holding the rows: `row(i)` is asked twice per shown row (once to size
 *  the columns, once to print), each line goes to `emit` — a 300 000-row table in constant
 *  memory. */
export function streamTable(cols: Column[], count: number, row: (i: number) => string[], c: ChalkInstance, opts: TableOptions, emit: (line: string) => void): void {
  const width = opts.width ?? Infinity;
  const shownCount = opts.maxRows !== undefined && count > opts.maxRows ? opts.maxRows : count;
  let keep = cols.map((_, i) => i);
  const natural = cols.map((col) => col.head.length);
  for (let k = 0; k < shownCount; k++) {
    const r = row(k);
    for (let i = 0; i < cols.length; i++) { const v = visible(r[i] ?? ''); if (v > natural[i]!) natural[i] = v; }
  }
  const total = (idx: number[], w: number[]): number => idx.reduce((n, i) => n + w[i]! + 3, 1);
  // Drop optional columns, least important first, down to the important ones (priority 1–2);
  // then wrap the widest cells (down to 18 characters); then drop the rest of the optional
  // columns; then wrap harder (down to 8).
  const w = natural.slice();
  const narrow = (min: number): void => {
    while (total(keep, w) > width) {
      const widest = keep.reduce((a, b) => (w[b]! > w[a]! ? b : a), keep[0]!);
      if (w[widest]! <= min) break;
      w[widest] = Math.max(min, w[widest]! - (total(keep, w) - width));
    }
  };
  const drop = (above: number): void => {
    const byPrio = cols.map((col, i) => ({ i, p: col.prio ?? 1 })).filter((x) => x.p > above && keep.includes(x.i)).sort((a, b) => b.p - a.p || b.i - a.i);
    for (const d of byPrio) {
      if (total(keep, w) <= width) break;
      keep = keep.filter((i) => i !== d.i);
    }
  };
  drop(2);
  narrow(18);
  drop(1);
  narrow(8);
  const line = (l: string, m: string, r: string): string => l + keep.map((i) => '─'.repeat(w[i]! + 2)).join(m) + r;
  emit(line('┌', '┬', '┐'));
  const cell = (cells: string[], head: boolean): void => {
    const wrapped = keep.map((i) => wrap(cells[i] ?? '', w[i]!));
    let h = 0;
    for (const x of wrapped) if (x.length > h) h = x.length;
    for (let k = 0; k < h; k++) {
      let s = '│';
      for (let j = 0; j < keep.length; j++) {
        const t = wrapped[j]![k] ?? '';
        s += ' ' + (head ? c.bold(t) : t) + ' '.repeat(w[keep[j]!]! - visible(t)) + ' │';
      }
      emit(s);
    }
  };
  cell(cols.map((x) => x.head), true);
  emit(line('├', '┼', '┤'));
  for (let k = 0; k < shownCount; k++) cell(row(k), false);
  emit(line('└', '┴', '┘'));
  const notes: string[] = [];
  if (shownCount < count) notes.push(`… ${count - shownCount} more row(s)`);
  if (keep.length < cols.length) notes.push(`column(s) hidden to fit ${width} characters: ${cols.filter((_, i) => !keep.includes(i)).map((x) => x.head).join(', ')}`);
  if (notes.length) emit(c.dim(`${notes.join('; ')}${opts.more ? ` (${opts.more})` : ''}`));
}

/** Wrap a cell at spaces (or hard at the width) into lines of at most `w` visible characters. */
export function wrap(s: string, w: number): string[] {
  if (visible(s) <= w) return [s];
  const plain = s.replace(ANSI, '');
  const lines: string[] = [];
  let rest = plain;
  while (rest.length > w) {
    let cut = rest.lastIndexOf(' ', w);
    if (cut <= 0) cut = w;
    lines.push(rest.slice(0, cut).trimEnd());
    rest = rest.slice(cut).trimStart();
  }
  if (rest) lines.push(rest);
  return lines;
}
