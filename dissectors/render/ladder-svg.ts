// `--ladder-svg`: the ladder as an SVG that opens cleanly in a browser. Layout rules:
//
// - One lane per host, not per address: the addresses of one side of a link group (its
//   links' GIDs on that side and the CLC connection's address) are one host, so a host with
//   two RoCE devices (failover) is one lifeline. Its header names the host (the CLC host name
//   when the capture has it) and lists its addresses, one per line.
// - Text is measured, not guessed per case: the font is monospace and a character is at most
//   CHAR_EM of the font size wide in the fonts we name (DejaVu Sans Mono and Menlo 0.602,
//   Liberation Mono and Courier New 0.600, Consolas 0.55), so a string's width is its length
//   times that. Lanes are as wide as the longest label needs (within MIN/MAX_COL).
// - A label never crosses a lifeline: it sits above its arrow in one gap between two
//   lifelines the arrow spans (the one holding the arrow's midpoint if it fits, else the
//   nearest that does); a label too long for any gap is shortened with "…" and the full text
//   is in its <title> (the browser's tooltip). Rows are further apart than a label is high,
//   so labels of different rows never meet; host headers, times and the legend are outside
//   the lifelines' span.
// - Colour tells connections and links apart (Okabe–Ito palette, safe for colour-blind
//   readers; its yellow is left out: unreadable as text on white, and its vermillion marks
//   alerts, which also get "!" and bold). Colour is never the only cue: RoCE links differ by
//   dash pattern (TCP is solid), connection rows carry their number ("C3"), and a legend maps
//   both.

import type { LinkGroup } from '../tracker/model.js';

const FONT_SIZE = 12;
const FONT_FAMILY = "'DejaVu Sans Mono', 'Liberation Mono', Menlo, Consolas, 'Courier New', monospace";
/** Widest advance of one character in the fonts above, in em (see the header). */
const CHAR_EM = 0.61;

/** Okabe–Ito without yellow (#F0E442) and vermillion (#D55E00, alerts). */
const PALETTE = ['#0072B2', '#E69F00', '#009E73', '#CC79A7', '#56B4E9', '#000000'];
const ALERT = '#D55E00';
/** Dash patterns of RoCE links, in order of appearance (TCP and CLC are solid). */
const DASHES = ['6,3', '2,3', '9,3,2,3', '1,2', '12,4'];

const MIN_COL = 220;
const MAX_COL = 560;
/** Space between a label and the lifelines left and right of it. */
const PAD = 8;
const ROW_H = 22;

/** Width in px of `s` in the monospace font at `size` (per code point; see CHAR_EM). */
export function textWidth(s: string, size = FONT_SIZE): number {
  let n = 0;
  for (const _ of s) n++;
  return Math.ceil(n * size * CHAR_EM);
}

/** `s` shortened with "…" to at most `px` wide (whole code points). */
export function fitText(s: string, px: number, size = FONT_SIZE): string {
  if (textWidth(s, size) <= px) return s;
  const cps = [...s];
  const max = Math.max(0, Math.floor(px / (size * CHAR_EM)) - 1);
  return cps.slice(0, max).join('') + '…';
}

export interface SvgRow {
  tsNs: bigint;
  frame: number;
  from: string;
  to: string;
  kind: 'tcp' | 'roce';
  text: string;
  alert: boolean;
  link?: string;
  conn?: number;
}

export interface Lane { name: string; addrs: string[] }

const plainIp = (a: string): string => a.replace(/^::ffff:(\d+\.\d+\.\d+\.\d+)$/, '$1');

/**
 * Hosts from addresses: the addresses of one side of a link group are one host. A link
 * group whose two sides would share an address (both ends on one address) joins nothing.
 * Lanes are in the order their first address appears in `addrs`.
 */
export function hostLanes(addrs: readonly string[], groups: readonly LinkGroup[] = []): { lanes: Lane[]; laneOf: Map<string, number> } {
  const parent = new Map<string, string>();
  const find = (a: string): string => {
    let r = a;
    while (parent.has(r) && parent.get(r) !== r) r = parent.get(r)!;
    parent.set(a, r);
    return r;
  };
  const union = (a: string, b: string): void => { const ra = find(a), rb = find(b); if (ra !== rb) parent.set(rb, ra); };
  const names = new Map<string, string>();
  for (const g of groups) {
    const sides: Array<Set<string>> = [new Set(), new Set()];
    if (g.firstTcp) { sides[0]!.add(g.firstTcp.client.ip); sides[1]!.add(g.firstTcp.server.ip); }
    for (const l of g.links) for (const e of [0, 1] as const) if (l.ends[e].gid) sides[e]!.add(plainIp(l.ends[e].gid));
    if ([...sides[0]!].some((a) => sides[1]!.has(a))) continue;
    sides.forEach((side, i) => {
      const list = [...side];
      for (const a of list.slice(1)) union(list[0]!, a);
      const host = i === 0 ? g.clientHost : g.serverHost;
      if (host && list.length) names.set(list[0]!, host);
    });
  }
  const lanes: Lane[] = [];
  const laneOfRoot = new Map<string, number>();
  const laneOf = new Map<string, number>();
  for (const raw of addrs) {
    const a = plainIp(raw);
    const root = find(a);
    let i = laneOfRoot.get(root);
    if (i === undefined) { i = lanes.length; lanes.push({ name: '', addrs: [] }); laneOfRoot.set(root, i); }
    if (!lanes[i]!.addrs.includes(a)) lanes[i]!.addrs.push(a);
    laneOf.set(raw, i);
  }
  for (const [a, host] of names) { const i = laneOfRoot.get(find(a)); if (i !== undefined && !lanes[i]!.name) lanes[i]!.name = host; }
  for (const l of lanes) l.name ||= l.addrs[0]!;
  return { lanes, laneOf };
}

const ESC: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' };
const esc = (s: string): string => (/[&<>"]/.test(s) ? s.replace(/[&<>"]/g, (c) => ESC[c]!) : s);

/** Where a label goes: the gap [x1, x2] it is centred in, and its (possibly shortened) text. */
function placeLabel(text: string, a: number, b: number, xs: readonly number[], col: number): { cx: number; shown: string } {
  const lo = Math.min(a, b), hi = Math.max(a, b);
  const w = textWidth(text);
  if (hi === lo + 1) {
    // neighbours (the common case): the one gap between them
    const room = xs[hi]! - xs[lo]! - 2 * PAD;
    return { cx: (xs[lo]! + xs[hi]!) / 2, shown: w <= room ? text : fitText(text, room) };
  }
  const gaps: Array<[number, number]> = [];
  if (lo === hi) gaps.push([xs[lo]! + PAD, xs[lo]! + col - PAD]); // to itself: right of its lifeline
  for (let j = lo; j < hi; j++) gaps.push([xs[j]! + PAD, xs[j + 1]! - PAD]);
  const mid = (xs[a]! + xs[b]!) / 2;
  const byNearness = gaps.map((g, i) => ({ g, i, d: mid >= g[0] && mid <= g[1] ? 0 : Math.min(Math.abs(mid - g[0]), Math.abs(mid - g[1])) }))
    .sort((p, q) => p.d - q.d || p.i - q.i);
  const fits = byNearness.find((p) => p.g[1] - p.g[0] >= w);
  const g = (fits ?? byNearness[0]!).g;
  return { cx: (g[0] + g[1]) / 2, shown: fits ? text : fitText(text, g[1] - g[0]) };
}

export function renderLadderSvg(rows: readonly SvgRow[], hostsSeen: readonly string[], opts: { groups?: readonly LinkGroup[]; dropped?: number } = {}): string {
  const { lanes, laneOf } = hostLanes(hostsSeen, opts.groups);
  const t0 = rows[0]?.tsNs ?? 0n;
  // colours and dashes in order of appearance
  const connIx = new Map<number, number>(), linkIx = new Map<string, number>();
  for (const r of rows) {
    if (r.conn !== undefined && !connIx.has(r.conn)) connIx.set(r.conn, connIx.size);
    if (r.kind === 'roce' && r.link !== undefined && !linkIx.has(r.link)) linkIx.set(r.link, linkIx.size);
  }
  const linkColour = (l: string): string => PALETTE[(linkIx.get(l)! + connIx.size) % PALETTE.length]!;
  const colourOf = (r: SvgRow): string => (r.alert ? ALERT
    : r.conn !== undefined ? PALETTE[connIx.get(r.conn)! % PALETTE.length]!
      : r.kind === 'roce' && r.link !== undefined ? linkColour(r.link) : '#555555');
  const dashOf = (r: SvgRow): string | undefined => (r.kind === 'roce' ? (r.link !== undefined ? DASHES[linkIx.get(r.link)! % DASHES.length] : DASHES[0]) : undefined);
  const labelOf = (r: SvgRow): string => `${r.alert ? '! ' : ''}${r.conn !== undefined ? `C${r.conn} ` : ''}${r.text}`;

  // geometry
  const headers = lanes.map((l) => [l.name, ...(l.addrs.length > 1 || l.addrs[0] !== l.name ? l.addrs : [])]);
  const headerW = Math.max(0, ...headers.flat().map((s) => textWidth(s)));
  const adjacentLabelW = Math.max(0, ...rows.map((r) => textWidth(labelOf(r))));
  const col = Math.min(MAX_COL, Math.max(MIN_COL, headerW + 2 * PAD, adjacentLabelW + 2 * PAD));
  const timeW = Math.max(textWidth('time (s)'), ...rows.slice(-1).map((r) => textWidth((Number(r.tsNs - t0) / 1e9).toFixed(6))));
  const left = 8 + timeW + 16;
  const xs = lanes.map((_, i) => left + col / 2 + i * col);
  const headerLines = Math.max(1, ...headers.map((h) => h.length));
  const lineH = FONT_SIZE + 3;
  const lifeTop = 14 + headerLines * lineH + 4;
  const top = lifeTop + 24;
  const lifeBottom = top + Math.max(0, rows.length - 1) * ROW_H + 10;
  const legend: Array<{ kind: 'conn' | 'link'; key: string; colour: string; dash?: string }> = [
    ...[...connIx.keys()].map((c) => ({ kind: 'conn' as const, key: `C${c}`, colour: PALETTE[connIx.get(c)! % PALETTE.length]! })),
    ...[...linkIx.keys()].map((l) => ({ kind: 'link' as const, key: l, colour: linkColour(l), dash: DASHES[linkIx.get(l)! % DASHES.length]! })),
  ];
  const legendTop = lifeBottom + 28;
  const notes = (opts.dropped ? 1 : 0);
  const legendW = Math.max(0, ...legend.map((e) => 56 + textWidth(e.kind === 'conn' ? `${e.key}: SMC connection ${e.key.slice(1)} (its TCP, CLC, CDC and RDMA WRITEs)` : `${e.key}: RoCE link ${e.key} (LLC, ACK/NAK)`)), legend.length ? 8 + textWidth(`legend (colour and dash; RoCE dashed, TCP/CLC solid, ! = anomaly in ${ALERT})`) : 0);
  // a row from a host to itself loops right of its lifeline: the last lane then needs room on its right
  const selfOnLast = rows.some((r) => laneOf.get(r.from) === laneOf.get(r.to) && laneOf.get(r.from) === lanes.length - 1);
  const width = Math.max(left + Math.max(1, lanes.length) * col + (selfOnLast ? col / 2 : 0), legendW) + 8;
  const height = legendTop + (legend.length + 1 + notes) * ROW_H + 8;

  const colours = [...new Set([...PALETTE, ALERT, '#555555'])];
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="${esc(FONT_FAMILY)}" font-size="${FONT_SIZE}">`,
    `<defs>${colours.map((c, i) => `<marker id="a${i}" markerWidth="8" markerHeight="8" refX="7" refY="4" orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="${c}"/></marker>`).join('')}</defs>`,
    '<rect width="100%" height="100%" fill="white"/>',
    `<text class="head" x="8" y="${14 + lineH - 3}" fill="#555555">time (s)</text>`,
  ];
  lanes.forEach((_, i) => {
    headers[i]!.forEach((s, k) => out.push(`<text class="head" x="${xs[i]}" y="${14 + (k + 1) * lineH - 3}" text-anchor="middle"${k === 0 ? ' font-weight="bold"' : ' fill="#555555"'}>${esc(s)}</text>`));
    out.push(`<line class="lifeline" x1="${xs[i]}" y1="${lifeTop}" x2="${xs[i]}" y2="${lifeBottom}" stroke="#888888"/>`);
  });
  rows.forEach((r, k) => {
    const y = top + k * ROW_H;
    const a = laneOf.get(r.from)!, b = laneOf.get(r.to)!;
    const colour = colourOf(r);
    const dash = dashOf(r);
    const marker = `url(#a${colours.indexOf(colour)})`;
    out.push(`<text class="time" x="8" y="${y + 4}" fill="#555555">${(Number(r.tsNs - t0) / 1e9).toFixed(6)}</text>`);
    if (a === b) {
      // both ends on one host: a small loop right of its lifeline
      out.push(`<path d="M${xs[a]},${y - 3} h18 v8 h-16" fill="none" stroke="${colour}" stroke-width="1.5"${dash ? ` stroke-dasharray="${dash}"` : ''} marker-end="${marker}"/>`);
    } else {
      out.push(`<line class="arrow" x1="${xs[a]}" y1="${y}" x2="${xs[b]! + (b > a ? -1 : 1)}" y2="${y}" stroke="${colour}" stroke-width="${r.alert ? 2.5 : 1.5}"${dash ? ` stroke-dasharray="${dash}"` : ''} marker-end="${marker}"/>`);
    }
    const full = labelOf(r);
    const p = placeLabel(full, a, b, xs, col);
    const x = a === b ? Math.min(p.cx, xs[a]! + col - PAD - textWidth(p.shown) / 2) : p.cx;
    out.push(`<text class="label" x="${x}" y="${y - 5}" text-anchor="middle" fill="${colour}"${r.alert ? ' font-weight="bold"' : ''} data-frame="${r.frame}" data-w="${textWidth(p.shown)}"><title>${esc(`#${r.frame} ${full}`)}</title>${esc(p.shown)}</text>`);
  });
  if (legend.length) {
    out.push(`<text class="legend" x="8" y="${legendTop}" font-weight="bold">legend (colour and dash; RoCE dashed, TCP/CLC solid, ! = anomaly in ${ALERT})</text>`);
    legend.forEach((e, i) => {
      const y = legendTop + (i + 1) * ROW_H;
      out.push(`<line class="swatch" x1="8" y1="${y - 4}" x2="48" y2="${y - 4}" stroke="${e.colour}" stroke-width="2"${e.dash ? ` stroke-dasharray="${e.dash}"` : ''}/>`);
      out.push(`<text class="legend" x="56" y="${y}" fill="${e.colour}">${esc(e.kind === 'conn' ? `${e.key}: SMC connection ${e.key.slice(1)} (its TCP, CLC, CDC and RDMA WRITEs)` : `${e.key}: RoCE link ${e.key} (LLC, ACK/NAK)`)}</text>`);
    });
  }
  if (opts.dropped) out.push(`<text class="legend" x="8" y="${legendTop + (legend.length + 1) * ROW_H}" fill="#555555">… ${opts.dropped} more rows not drawn</text>`);
  out.push('</svg>');
  return out.join('\n');
}
