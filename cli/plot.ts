// Interval plots for smcperf: a terminal sparkline (one block character per interval) and a
// small self-contained SVG line chart (one polyline per series, axes with round ticks, legend).

const BLOCKS = '▁▂▃▄▅▆▇█';

/**
 * One character per value, scaled from `lo` (default 0) to the largest value; non-finite values
 * are drawn as a space. An all-zero series is a row of the lowest block.
 */
export function sparkline(values: readonly number[], lo = 0): string {
  const finite = values.filter((v) => Number.isFinite(v));
  const hi = finite.length ? Math.max(...finite) : 0;
  const span = hi - lo;
  let s = '';
  for (const v of values) {
    if (!Number.isFinite(v)) { s += ' '; continue; }
    const k = span > 0 ? Math.round(((Math.max(lo, v) - lo) / span) * (BLOCKS.length - 1)) : 0;
    s += BLOCKS[Math.min(BLOCKS.length - 1, Math.max(0, k))];
  }
  return s;
}

export interface Series {
  label: string;
  /** [x, y] points, x ascending. */
  points: Array<[number, number]>;
}

export interface ChartOptions {
  title: string;
  xLabel: string;
  yLabel: string;
  width?: number;
  height?: number;
}

const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#7f7f7f', '#bcbd22', '#17becf'];

function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

/** A "nice" tick step (1, 2 or 5 × 10^k) giving about `n` ticks over `span`. */
function niceStep(span: number, n = 5): number {
  if (!(span > 0)) return 1;
  const raw = span / n;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const f = raw / mag;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
}

function tickLabel(v: number, step: number): string {
  const digits = step >= 1 ? 0 : Math.min(6, Math.ceil(-Math.log10(step)));
  return v.toFixed(digits);
}

/** An SVG line chart of the series (y axis from 0). */
export function lineChartSvg(series: readonly Series[], o: ChartOptions): string {
  const W = o.width ?? 760, H = o.height ?? 420;
  const m = { l: 78, r: 20, t: 40, b: 52 };
  const legendRows = Math.ceil(series.length / 3);
  const plotH = H - m.t - m.b - legendRows * 18;
  const plotW = W - m.l - m.r;
  const xs = series.flatMap((s) => s.points.map((p) => p[0]));
  const ys = series.flatMap((s) => s.points.map((p) => p[1])).filter((v) => Number.isFinite(v));
  const xMax = Math.max(1e-9, ...xs);
  const xStep = niceStep(xMax, 8);
  const xTop = Math.ceil(xMax / xStep) * xStep;
  const yMax0 = Math.max(0, ...ys);
  const yStep = niceStep(yMax0 > 0 ? yMax0 : 1, 5);
  const yTop = Math.max(yStep, Math.ceil((yMax0 * 1.05) / yStep) * yStep);
  const X = (x: number): number => m.l + (x / xTop) * plotW;
  const Y = (y: number): number => m.t + plotH - (y / yTop) * plotH;
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
    '<rect width="100%" height="100%" fill="white"/>',
    `<text x="${W / 2}" y="22" text-anchor="middle" font-size="15" font-weight="bold">${esc(o.title)}</text>`,
  ];
  for (let y = 0; y <= yTop + yStep / 2; y += yStep) {
    out.push(`<line x1="${m.l}" y1="${Y(y).toFixed(1)}" x2="${m.l + plotW}" y2="${Y(y).toFixed(1)}" stroke="#e5e5e5"/>`);
    out.push(`<text x="${m.l - 6}" y="${(Y(y) + 4).toFixed(1)}" text-anchor="end">${tickLabel(y, yStep)}</text>`);
  }
  for (let x = 0; x <= xTop + xStep / 2; x += xStep) {
    out.push(`<line x1="${X(x).toFixed(1)}" y1="${m.t + plotH}" x2="${X(x).toFixed(1)}" y2="${m.t + plotH + 5}" stroke="#444"/>`);
    out.push(`<text x="${X(x).toFixed(1)}" y="${m.t + plotH + 18}" text-anchor="middle">${tickLabel(x, xStep)}</text>`);
  }
  out.push(`<line x1="${m.l}" y1="${m.t}" x2="${m.l}" y2="${m.t + plotH}" stroke="#444"/>`);
  out.push(`<line x1="${m.l}" y1="${m.t + plotH}" x2="${m.l + plotW}" y2="${m.t + plotH}" stroke="#444"/>`);
  out.push(`<text x="${m.l + plotW / 2}" y="${m.t + plotH + 36}" text-anchor="middle">${esc(o.xLabel)}</text>`);
  out.push(`<text transform="translate(16 ${m.t + plotH / 2}) rotate(-90)" text-anchor="middle">${esc(o.yLabel)}</text>`);
  series.forEach((s, i) => {
    const color = COLORS[i % COLORS.length]!;
    const pts = s.points.filter((p) => Number.isFinite(p[1]));
    if (pts.length) {
      out.push(`<polyline fill="none" stroke="${color}" stroke-width="2" points="${pts.map((p) => `${X(p[0]).toFixed(1)},${Y(p[1]).toFixed(1)}`).join(' ')}"/>`);
      for (const p of pts) out.push(`<circle cx="${X(p[0]).toFixed(1)}" cy="${Y(p[1]).toFixed(1)}" r="2.5" fill="${color}"/>`);
    }
    const lx = m.l + (i % 3) * (plotW / 3), ly = m.t + plotH + 50 + Math.floor(i / 3) * 18;
    out.push(`<line x1="${lx}" y1="${ly - 4}" x2="${lx + 22}" y2="${ly - 4}" stroke="${color}" stroke-width="3"/>`);
    out.push(`<text x="${lx + 28}" y="${ly}">${esc(s.label)}</text>`);
  });
  out.push('</svg>');
  return out.join('\n') + '\n';
}
