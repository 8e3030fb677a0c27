// smcperf --report: the page script (plain browser JavaScript, inlined into the HTML file):
// runs table, intervals over time, latency histogram, CPU per side; SMC-R next to TCP.
// window.smcReport exposes the state for the browser tests.
(function () {
  'use strict';
  const D = JSON.parse(document.getElementById('report-data').textContent);
  const app = document.getElementById('app');
  const el = (tag, attrs, ...kids) => {
    const e = document.createElement(tag);
    if (attrs) for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') e.className = v; else if (k.startsWith('on')) e.addEventListener(k.slice(2), v); else e.setAttribute(k, String(v));
    }
    for (const k of kids) if (k !== undefined && k !== null) e.append(k instanceof Node ? k : String(k));
    return e;
  };
  const css = (name) => getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  const size = (n) => n >= 1 << 20 ? n / 1048576 + 'M' : n >= 1024 ? n / 1024 + 'k' : String(n);
  const rr = D.test === 'rr';
  const runName = (r) => `${r.transport === 'smcr' ? (r.connections.length && r.connections.every((c) => c.mode === 'smcr') ? 'SMC-R' : 'SMC (fell back)') : 'TCP'} ${size(r.size)}`;
  const COLS = ['--c0', '--c1', '--c2', '--c3', '--c4', '--c5'];
  const DASH = [[], [8, 4], [2, 3], [12, 3, 2, 3], [4, 4], [1, 2]];
  const themeBtn = el('button', { id: 'theme', onclick: () => {
    const t = document.documentElement.dataset.theme || 'auto';
    const next = { auto: 'light', light: 'dark', dark: 'auto' }[t];
    if (next === 'auto') delete document.documentElement.dataset.theme; else document.documentElement.dataset.theme = next;
    themeBtn.textContent = 'theme: ' + next;
    draw();
  } }, 'theme: auto');
  app.append(el('header', null, el('h1', null, D.title), el('span', { class: 'meta' }, `${D.test}, ${D.parallel} connection(s), ${D.seconds !== null ? D.seconds + ' s' : D.bytes + ' bytes'} per test, ${D.device}`), el('span', { class: 'sp' }), themeBtn));

  // runs table
  const cpuPct = (c, secs) => (c && secs > 0 ? ((c.userMs + c.systemMs) / 10 / secs).toFixed(1) + ' %' : '–');
  const t = el('table', { class: 'sortable', id: 't-runs' });
  const heads = ['run', 'connections', rr ? 'transactions/s' : 'MB/s', rr ? 'p50 µs' : 'Gbit/s', rr ? 'p99 µs' : 'bytes', 'seconds', 'client CPU (of one core)', 'server CPU (of one core)', 'error'];
  t.append(el('thead', null, el('tr', null, ...heads.map((h) => el('th', null, h)))));
  const tb = el('tbody');
  for (const r of D.runs) {
    const tot = r.total || {};
    tb.append(el('tr', null, el('td', null, runName(r)), el('td', null, r.connections.map((c) => c.mode).join(', ')),
      el('td', { class: 'num' }, rr ? tot.transactionsPerSecond ?? '–' : tot.megabytesPerSecond ?? '–'),
      el('td', { class: 'num' }, rr ? (r.latencyUs ? r.latencyUs.p50 : '–') : tot.bitsPerSecond !== undefined ? (tot.bitsPerSecond / 1e9).toFixed(3) : '–'),
      el('td', { class: 'num' }, rr ? (r.latencyUs ? r.latencyUs.p99 : '–') : tot.bytes ?? '–'), el('td', { class: 'num' }, tot.seconds ?? '–'),
      el('td', { class: 'num' }, r.cpu ? `${cpuPct(r.cpu.client, tot.seconds)} (${r.cpu.client.userMs} ms user, ${r.cpu.client.systemMs} ms sys)` : '–'),
      el('td', { class: 'num' }, r.cpu && r.cpu.server ? `${cpuPct(r.cpu.server, tot.seconds)} (${r.cpu.server.userMs} ms user, ${r.cpu.server.systemMs} ms sys)` : 'not reported'),
      el('td', null, r.error || '')));
  }
  t.append(tb);
  app.append(el('h2', null, 'Runs'), el('div', { class: 'tablewrap' }, t),
    el('p', { class: 'none' }, 'CPU: process time of each side during the test (the server reports its own in the stream test\'s DONE answer; other tests: not reported).'));

  // graphs
  const grid = el('div', { class: 'graphs' });
  app.append(el('h2', null, 'Graphs'), grid);
  const cards = {};
  for (const [id, title] of [['g-intervals', rr ? 'Mean latency per interval' : 'Throughput per interval'], ['g-latency', 'Latency histogram'], ['g-cpu', 'CPU per side']]) {
    const plot = el('div');
    grid.append(el('div', { class: 'graph', id }, el('h3', null, title), plot));
    cards[id] = plot;
  }
  const axis = () => ({ stroke: css('--fg'), grid: { stroke: css('--line'), width: 1 }, ticks: { stroke: css('--line'), width: 1 } });
  const plots = [];
  function draw() {
    for (const p of plots) p.destroy();
    plots.length = 0;
    for (const k in cards) cards[k].textContent = '';
    const W = () => cards['g-intervals'].parentElement.clientWidth - 14;
    const runs = D.runs.filter((r) => r.intervals && r.intervals.length);
    // intervals: one x array for all runs (union of interval ends)
    const xs = [...new Set(runs.flatMap((r) => r.intervals.map((iv) => iv.end)))].sort((a, b) => a - b);
    const ys = runs.map((r) => { const m = new Map(r.intervals.map((iv) => [iv.end, rr ? iv.avgUs : iv.bitsPerSecond / 1e9])); return xs.map((x) => (m.has(x) && Number.isFinite(m.get(x)) ? m.get(x) : null)); });
    plots.push(new uPlot({ width: W(), height: 260, scales: { x: { time: false } },
      axes: [Object.assign({ label: 'seconds' }, axis()), Object.assign({ label: rr ? 'µs' : 'Gbit/s', size: 60 }, axis())],
      series: [{ label: 's' }, ...runs.map((r, i) => ({ label: runName(r), stroke: css(COLS[i % COLS.length]), dash: DASH[i % DASH.length], width: 2, spanGaps: true, points: { show: true, size: 5 } }))] },
    [xs, ...ys], cards['g-intervals']));
    // latency histogram: log x; each run its own buckets, merged on one x array of edges
    const hr = D.runs.filter((r) => r.latencyHistogramUs);
    if (hr.length) {
      const hx = [...new Set(hr.flatMap((r) => r.latencyHistogramUs.edges.slice(0, -1)))].sort((a, b) => a - b);
      const hy = hr.map((r) => { const h = r.latencyHistogramUs; const m = new Map(h.edges.slice(0, -1).map((e, i) => [e, h.counts[i]])); return hx.map((x) => m.get(x) ?? null); });
      plots.push(new uPlot({ width: W(), height: 260, scales: { x: { time: false, distr: 3 } },
        axes: [Object.assign({ label: 'latency (µs, log scale)' }, axis()), Object.assign({ label: 'transactions', size: 60 }, axis())],
        series: [{ label: 'µs' }, ...hr.map((r, i) => ({ label: runName(r), stroke: css(COLS[i % COLS.length]), dash: DASH[i % DASH.length], width: 2, paths: uPlot.paths.stepped({ align: 1 }), spanGaps: false, points: { show: true, size: 4 } }))] },
      [hx, ...hy], cards['g-latency']));
    } else cards['g-latency'].append(el('p', { class: 'none' }, rr ? 'No latency samples.' : 'Latency is measured by the rr test (smcperf --latency).'));
    // CPU: HTML bars (text selectable), percent of one core per side
    const max = Math.max(1, ...D.runs.flatMap((r) => [r.cpu && r.cpu.client, r.cpu && r.cpu.server].filter(Boolean).map((c) => (c.userMs + c.systemMs) / 10 / Math.max(r.total ? r.total.seconds : 1, 1e-3))));
    const tbl = el('table', { class: 'sortable', id: 't-cpu' });
    for (const r of D.runs) for (const [side, c] of [['client', r.cpu && r.cpu.client], ['server', r.cpu && r.cpu.server]]) {
      const pct = c ? (c.userMs + c.systemMs) / 10 / Math.max(r.total ? r.total.seconds : 1, 1e-3) : 0;
      tbl.append(el('tr', null, el('td', null, `${runName(r)} ${side}`), el('td', { style: 'width:60%' }, c ? el('div', { style: `background: var(${side === 'client' ? '--c0' : '--c1'}); height: 12px; width:${(100 * pct / max).toFixed(1)}%` }) : 'not reported'), el('td', { class: 'num' }, c ? pct.toFixed(1) + ' %' : '')));
    }
    cards['g-cpu'].append(tbl);
  }
  draw();
  window.addEventListener('resize', draw);
  window.smcReport = { data: D, plots, ready: true, readyMs: performance.now() };
  document.body.dataset.ready = '1';
})();
