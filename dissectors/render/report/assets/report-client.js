// smcdump --report: the page script (plain browser JavaScript, inlined into the HTML file).
// Draws the diagnosis, sortable tables, a virtualised ladder (canvas for arrows, DOM text for
// the rows on screen only) and uPlot graphs (created when scrolled into view).
// window.smcReport exposes the state for the browser tests.
(function () {
  'use strict';
  const D = JSON.parse(document.getElementById('report-data').textContent);
  const S = D.summary;
  const app = document.getElementById('app');
  const FLAG_ALERT = 1, FLAG_RETX = 2, FLAG_WB = 4, FLAG_URG = 8, FLAG_FAILOVER = 16, FLAG_CLOSE = 32;
  const startNs = BigInt(D.startNs);
  const secOfNs = (ns) => Number(BigInt(ns) - startNs) / 1e9;
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
  const fmtBytes = (n) => n >= 1 << 20 ? (n / 1048576).toFixed(2) + ' MiB' : n >= 1024 ? (n / 1024).toFixed(1) + ' KiB' : n + ' B';
  const fmtSec = (s) => s >= 1 ? s.toFixed(3) + ' s' : s >= 1e-3 ? (s * 1e3).toFixed(3) + ' ms' : (s * 1e6).toFixed(1) + ' µs';
  const undelta = (a) => { const o = new Float64Array(a.length); let p = 0; for (let i = 0; i < a.length; i++) { p += a[i]; o[i] = p; } return o; };

  // ------------------------------------------------------------------ ladder rows
  const L = D.ladder;
  const N = L.t.length;
  const rowT = undelta(L.t);           // µs since first frame
  const rowFrame = new Float64Array(N);
  { let sk = 0, f = 0; for (let i = 0; i < N; i++) { f += 1; if (sk < L.frameSkips.length && L.frameSkips[sk] === i) { f += L.frameSkips[sk + 1]; sk += 2; } rowFrame[i] = f; } }
  // per-row look, from the style table: [from, to, kind, label, link, conn, dir, flags]
  const col = (k) => { const o = new Int32Array(N); for (let i = 0; i < N; i++) o[i] = L.styles[L.style[i]][k]; return o; };
  Object.assign(L, { from: col(0), to: col(1), kind: col(2), label: col(3), link: col(4), conn: col(5), dir: col(6), flags: col(7) });
  const GAP_US = 100000;               // a pause of 100 ms or more gets its own labelled row
  const slot = new Float64Array(N);    // row → slot (rows plus gap slots)
  let slots = 0;
  const gapSlots = [];                 // {slot, us}
  for (let i = 0; i < N; i++) {
    if (i > 0 && rowT[i] - rowT[i - 1] >= GAP_US) { gapSlots.push({ slot: slots, us: rowT[i] - rowT[i - 1] }); slots++; }
    slot[i] = slots++;
  }
  const frameToRow = (f) => { let lo = 0, hi = N - 1; if (N === 0) return -1; while (lo < hi) { const m = (lo + hi) >> 1; if (rowFrame[m] < f) lo = m + 1; else hi = m; } return lo; };
  const slotToRow = (s) => { let lo = 0, hi = N - 1; while (lo < hi) { const m = (lo + hi + 1) >> 1; if (slot[m] <= s) lo = m; else hi = m - 1; } return lo; };
  const frameSec = (f) => { const r = frameToRow(f); return r < 0 ? 0 : rowT[r] / 1e6; };

  // ------------------------------------------------------------------ page skeleton
  const theme = () => document.documentElement.dataset.theme || 'auto';
  const themeBtn = el('button', { id: 'theme', title: 'colour theme: auto (system), light, dark', onclick: () => {
    const next = { auto: 'light', light: 'dark', dark: 'auto' }[theme()];
    if (next === 'auto') delete document.documentElement.dataset.theme; else document.documentElement.dataset.theme = next;
    themeBtn.textContent = 'theme: ' + next;
    ladder.draw(); graphs.recolour();
  } }, 'theme: auto');
  const span = D.spanUs / 1e6;
  app.append(el('header', null, el('h1', null, D.title), el('span', { class: 'meta' }, `${D.frames} frames over ${fmtSec(span)} · ${S.linkGroups.length} link group(s) · ${S.connections.length} connection(s) · ${D.generator}`), el('span', { class: 'sp' }), themeBtn));
  app.append(el('nav', { class: 'toc' }, el('a', { href: '#diagnosis' }, 'Diagnosis'), el('a', { href: '#tables' }, 'Link groups, links, connections'), el('a', { href: '#ladder-sec' }, 'Ladder'), el('a', { href: '#cursor-graphs' }, 'Cursor graphs'), el('a', { href: '#link-graphs' }, 'Link graphs')));

  // ------------------------------------------------------------------ diagnosis
  const diagSec = el('section', { id: 'diagnosis' }, el('h2', null, 'Diagnosis'));
  app.append(diagSec);
  if (S.diagnosis.length === 0) diagSec.append(el('p', { class: 'none' }, 'Nothing wrong found: no diagnosis entry.'));
  const ol = el('ol', { class: 'diag' });
  S.diagnosis.forEach((d, i) => {
    const where = [d.lg !== undefined ? 'LG' + d.lg : '', d.link || '', d.conn !== undefined ? 'connection ' + d.conn : ''].filter(Boolean).join(' · ');
    const ev = d.frames.count > 1 ? `frames ${d.frames.first}–${d.frames.last} (${d.frames.count}×)` : `frame ${d.frames.first}`;
    const go = (e) => { e.stopPropagation(); ladder.jump(d.frames.first, true); };
    const links = el('span', { class: 'links' }, el('a', { href: '#ladder-sec', onclick: go }, 'ladder @' + d.frames.first));
    if (d.conn !== undefined && connCard(d.conn)) links.append(el('a', { href: '#cg-' + d.conn + '-0', onclick: (e) => { e.preventDefault(); e.stopPropagation(); graphs.show('conn', d.conn, frameSec(d.frames.first), frameSec(d.frames.last)); } }, 'cursor graph'));
    if (d.link && D.links.some((l) => l.name === d.link)) links.append(el('a', { href: '#lg-' + d.link, onclick: (e) => { e.preventDefault(); e.stopPropagation(); graphs.show('link', d.link, frameSec(d.frames.first), frameSec(d.frames.last)); } }, 'link graph'));
    ol.append(el('li', { class: d.severity, tabindex: 0, 'data-code': d.code, 'data-first': d.frames.first, 'data-index': i,
      title: 'show the first evidence frame in the ladder', onclick: () => ladder.jump(d.frames.first, true), onkeydown: (e) => { if (e.key === 'Enter') ladder.jump(d.frames.first, true); } },
    el('span', { class: 'sev ' + d.severity }, d.severity), el('span', { class: 'code mono' }, d.code), where ? el('span', { class: 'where' }, '[' + where + '] ') : null,
    el('span', { class: 'ev' }, ev), links, el('div', { class: 'msg' }, d.message)));
  });
  diagSec.append(ol);
  function connCard(c) { return D.conns.some((x) => x.index === c); }

  // ------------------------------------------------------------------ tables
  const tabSec = el('section', { id: 'tables' }, el('h2', null, 'Link groups, links, connections'));
  app.append(tabSec);
  function table(id, cols, rows) {
    const t = el('table', { class: 'sortable', id });
    const thead = el('tr');
    cols.forEach((c, ci) => thead.append(el('th', { scope: 'col', onclick: (e) => sortBy(t, ci, e.currentTarget) }, c)));
    t.append(el('thead', null, thead));
    const tb = el('tbody');
    for (const r of rows) {
      const tr = el('tr');
      for (const v of r) {
        const num = typeof v === 'number';
        tr.append(el('td', { class: num ? 'num' : undefined, 'data-v': num ? v : undefined }, v === undefined || v === null ? '?' : String(v)));
      }
      tb.append(tr);
    }
    t.append(tb);
    return el('div', { class: 'tablewrap' }, t);
  }
  function sortBy(t, ci, th) {
    const dir = th.getAttribute('aria-sort') === 'ascending' ? -1 : 1;
    for (const h of t.querySelectorAll('th')) h.removeAttribute('aria-sort');
    th.setAttribute('aria-sort', dir > 0 ? 'ascending' : 'descending');
    const tb = t.tBodies[0];
    const rows = [...tb.rows];
    const key = (r) => { const c = r.cells[ci]; return c.dataset.v !== undefined ? Number(c.dataset.v) : c.textContent; };
    rows.sort((a, b) => { const x = key(a), y = key(b); return (typeof x === 'number' && typeof y === 'number' ? x - y : String(x).localeCompare(String(y), undefined, { numeric: true })) * dir; });
    for (const r of rows) tb.append(r);
  }
  const hx = (v) => v === undefined || v === null ? '?' : '0x' + Number(v).toString(16);
  const qp = (e) => `${e.gid || '?'} QP ${e.qpn !== undefined ? hx(e.qpn) : '?'}`;
  tabSec.append(el('h3', null, 'Link groups'));
  tabSec.append(table('t-lgs', ['LG', 'client peer (host)', 'server peer (host)', 'ver', 'UEID', 'max links', 'max conns', 'links', 'conns', 'type history', 'state'],
    S.linkGroups.map((g) => ['LG' + g.id + (g.complete ? '' : ' (mid-stream)'), (g.clientPeer || '?') + (g.clientHost ? ` (${g.clientHost})` : ''), (g.serverPeer || '?') + (g.serverHost ? ` (${g.serverHost})` : ''),
      g.version !== undefined ? 'v' + g.version + (g.release !== undefined ? '.' + g.release : '') : '?', g.ueid || '-', g.maxLinks, g.maxConns, g.links.length, g.connections.length,
      (g.types || []).map((x) => `${x.type}@${x.frame}`).join(' → '), g.state])));
  const allLinks = S.linkGroups.flatMap((g) => g.links.map((l) => Object.assign({ lg: g.id }, l)));
  tabSec.append(el('h3', null, 'Links'));
  tabSec.append(table('t-links', ['link', 'client QP', 'server QP', 'MTU', 'state', 'pkts c>s', 'pkts s>c', 'bytes c>s', 'bytes s>c', 'retx', 'PSN gaps', 'NAK', 'RNR NAK'],
    allLinks.map((l) => [l.name, qp(l.ends[0]), qp(l.ends[1]), l.mtu || '?', l.state, l.packets[0], l.packets[1], l.bytes[0], l.bytes[1], l.retransmits, l.psnGaps, l.naks, l.rnrNaks])));
  tabSec.append(el('h3', null, 'Connections'));
  const smcRows = [...S.connections.map((c) => ({ c, s: c.smc })), ...(S.midStreamConnections || []).map((s) => ({ c: undefined, s }))];
  tabSec.append(table('t-conns', ['#', 'client → server', 'mode', 'LG', 'link', 'RMBE c/s', 'bytes c>s', 'bytes s>c', 'consumed c>s', 'consumed s>c', 'CDCs c>s/s>c', 'writer blocked', 'urgent', 'stalls', 'failovers', 'state'],
    smcRows.map(({ c, s }) => [s ? s.index : c.index, c ? `${c.client.ip}:${c.client.port} → ${c.server.ip}:${c.server.port}` : 'mid-stream', c ? c.mode : 'smc-r (mid-stream)',
      s ? 'LG' + s.lg : '-', s ? s.link || '?' : '-', s ? `${s.sides[0].rmbeSize ? fmtBytes(s.sides[0].rmbeSize) : '?'}/${s.sides[1].rmbeSize ? fmtBytes(s.sides[1].rmbeSize) : '?'}` : '-',
      s ? s.dirs[0].bytes : c.tcpBytes[0], s ? s.dirs[1].bytes : c.tcpBytes[1], s ? s.dirs[0].consumed : '-', s ? s.dirs[1].consumed : '-',
      s ? `${s.dirs[0].cdcs}/${s.dirs[1].cdcs}` : '-', s ? `${s.dirs[0].writerBlocked}/${s.dirs[1].writerBlocked}` : '-',
      s ? s.dirs.map((d) => d.urgentOffsets.length).join('/') : '-', s ? s.dirs.map((d) => d.stalls.length).join('/') : '-', s ? s.failovers.length : '-', s ? s.state : (c.mode === 'fallback' ? 'fallback: ' + (c.why || '') : '-')])));
  if (S.anomalyCount > 0) {
    tabSec.append(el('h3', null, `Anomalies (${S.anomalyCount})`));
    tabSec.append(table('t-anom', ['code', 'severity', 'count', 'first frame', 'first message'],
      Object.entries(S.anomaliesByCode).map(([k, v]) => [k, v.severity, v.count, v.first, v.message])));
  }

  // ------------------------------------------------------------------ ladder
  const ladSec = el('section', { id: 'ladder-sec' }, el('h2', null, 'Ladder'));
  app.append(ladSec);
  const KSTYLE = {
    tcp: { w: 1, dash: [], col: '--c7' }, clc: { w: 2, dash: [], col: '--c7' }, llc: { w: 2, dash: [], dbl: true }, cdc: { w: 1.5, dash: [6, 3] },
    write: { w: 1.5, dash: [] }, ack: { w: 1, dash: [1, 3], col: '--muted' }, nak: { w: 2.5, dash: [], col: '--err' }, roce: { w: 1, dash: [2, 2] },
  };
  const LINKCOL = ['--c0', '--c2', '--c3', '--c1', '--c4', '--c6'];
  const CONNCOL = ['--c5', '--c0', '--c2', '--c3', '--c1', '--c6'];
  const zoomIn = el('button', { title: 'zoom in (Ctrl+wheel, +)', onclick: () => ladder.zoom(2) }, '+');
  const zoomOut = el('button', { title: 'zoom out (Ctrl+wheel, −)', onclick: () => ladder.zoom(0.5) }, '−');
  const fit = el('button', { title: 'the whole capture', onclick: () => ladder.fit() }, 'whole capture');
  const rowBtn = el('button', { title: 'readable rows', onclick: () => ladder.setRowH(18) }, 'rows');
  const goto = el('input', { type: 'number', min: 1, placeholder: 'frame #', style: 'width:7em', onkeydown: (e) => { if (e.key === 'Enter') ladder.jump(Number(goto.value), true); } });
  const legend = el('span', { class: 'legend' });
  L.links.slice(0, 12).forEach((name, i) => legend.append(el('span', null, el('span', { class: 'swatch', style: `border-color: var(${LINKCOL[i % LINKCOL.length]})` }), name)));
  if (L.links.length > 12) legend.append(el('span', null, `… ${L.links.length - 12} more links (colours repeat; every label names its link)`));
  legend.append(el('span', null, el('span', { class: 'swatch', style: 'border-color: var(--c7)' }), 'TCP/CLC'));
  legend.append(el('span', null, el('span', { class: 'swatch', style: 'border-color: var(--err); border-top-style: solid' }), 'NAK / anomaly (!)'));
  legend.append(el('span', null, el('span', { class: 'swatch', style: 'border-color: var(--c5); border-top-style: dashed' }), 'retransmission'));
  legend.append(el('span', { class: 'mono' }, 'LLC ═ · CDC ╌ · WRITE ─ · ACK ┈'));
  const info = el('span', { class: 'meta mono', id: 'ladder-info' });
  ladSec.append(el('div', { class: 'toolbar' }, zoomOut, zoomIn, fit, rowBtn, goto, info), el('div', { class: 'toolbar' }, legend));
  const box = el('div', { id: 'ladder', tabindex: 0 });
  const view = el('div', { class: 'view' });
  const canvas = el('canvas');
  const lanes = el('div', { class: 'lanes' });
  const labels = el('div', { class: 'labels' });
  const spacer = el('div');
  view.append(canvas, labels, lanes);
  box.append(view, spacer);
  ladSec.append(box);
  if (L.dropped > 0) ladSec.append(el('p', { class: 'none' }, `${L.dropped} more frames not drawn (row limit).`));

  const ladder = (() => {
    const HEAD = 28, TIMEW = 150;
    let rowH = 18, W = 0, H = 0, dpr = 1, selected = -1;
    const laneX = (i) => TIMEW + 60 + (W - TIMEW - 120) * (L.hosts.length <= 1 ? 0.5 : i / (L.hosts.length - 1));
    const total = () => slots * rowH;
    function resize() {
      W = box.clientWidth; H = box.clientHeight;
      dpr = window.devicePixelRatio || 1;
      canvas.width = Math.floor(W * dpr); canvas.height = Math.floor(H * dpr);
      canvas.style.width = W + 'px'; canvas.style.height = H + 'px';
      spacer.style.height = Math.max(0, total() - (H - HEAD) + 8) + 'px';
      lanes.textContent = '';
      L.hosts.forEach((h, i) => lanes.append(el('div', { class: 'lane', 'data-lane': i, style: `left:${laneX(i)}px` }, h)));
      lanes.append(el('div', { class: 'lane', style: 'left:60px' }, 'time (s) · frame'));
    }
    function clampRow(h) { const min = Math.max((H - HEAD) / Math.max(1, slots), 0.001); return Math.min(Math.max(h, min), Math.max(H - HEAD, 20)); }
    function setRowH(h, anchorY) {
      const ay = anchorY === undefined ? (H - HEAD) / 2 : anchorY;
      const s = (box.scrollTop + ay) / rowH;
      rowH = clampRow(h);
      spacer.style.height = Math.max(0, total() - (H - HEAD) + 8) + 'px';
      box.scrollTop = s * rowH - ay;
      draw();
    }
    function draw() {
      const ctx = canvas.getContext('2d');
      ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      ctx.clearRect(0, 0, W, H);
      const top = box.scrollTop;
      const vis0 = Math.max(0, Math.floor(top / rowH) - 1), vis1 = Math.ceil((top + H - HEAD) / rowH) + 1;
      const yOf = (s) => HEAD + s * rowH - top;
      // lifelines
      ctx.strokeStyle = css('--line'); ctx.lineWidth = 1; ctx.setLineDash([]);
      for (let i = 0; i < L.hosts.length; i++) { ctx.beginPath(); ctx.moveTo(laneX(i), HEAD); ctx.lineTo(laneX(i), H); ctx.stroke(); }
      // gaps (compressed pauses)
      const showText = rowH >= 16;
      const frag = document.createDocumentFragment();
      for (const g of gapSlots) {
        if (g.slot < vis0 || g.slot > vis1) continue;
        const y = yOf(g.slot);
        ctx.fillStyle = css('--gap'); ctx.fillRect(0, y, W, Math.max(rowH, 1));
        if (showText) frag.append(el('div', { class: 'gapl', style: `left:${TIMEW}px;width:${W - TIMEW - 20}px;top:${y + (rowH - 13) / 2}px` }, `⋯ pause of ${fmtSec(g.us / 1e6)} (compressed) ⋯`));
      }
      if (N === 0) { labels.replaceChildren(frag); return; }
      const r0 = slotToRow(Math.max(0, vis0)), r1 = slotToRow(Math.min(slots - 1, vis1));
      const cols = LINKCOL.map(css), colOf = {}; for (const k in KSTYLE) colOf[k] = KSTYLE[k].col ? css(KSTYLE[k].col) : null;
      const errCol = css('--err'), hl = css('--hl'), retxCol = css('--c5');
      const lastY = new Map();
      let drawn = 0;
      for (let i = r0; i <= r1; i++) {
        const rt = yOf(slot[i]);
        const a = L.from[i], b = L.to[i];
        const kind = L.kinds[L.kind[i]];
        const st = KSTYLE[kind];
        const lineY = showText ? rt + (rowH - 16) / 2 + 14.5 : rt + rowH / 2;
        if (rowFrame[i] === selected) { ctx.fillStyle = hl; ctx.fillRect(0, rt, W, Math.max(rowH, 2)); }
        const py = Math.round(lineY);
        const key = a * 64 + b * 8 + L.kind[i];
        if (!showText && lastY.get(key) === py && !(L.flags[i] & FLAG_ALERT)) continue;
        lastY.set(key, py);
        const alert = (L.flags[i] & FLAG_ALERT) !== 0;
        const retx = (L.flags[i] & FLAG_RETX) !== 0;
        const col = alert ? errCol : retx ? retxCol : colOf[kind] || (L.link[i] >= 0 ? cols[L.link[i] % cols.length] : colOf.tcp);
        const x1 = laneX(a), x2 = laneX(b);
        ctx.strokeStyle = col; ctx.fillStyle = col; ctx.lineWidth = alert || retx ? st.w + 1 : st.w; ctx.setLineDash(retx ? [4, 2] : st.dash);
        ctx.beginPath();
        if (st.dbl && showText) { ctx.moveTo(x1, lineY - 1.5); ctx.lineTo(x2, lineY - 1.5); ctx.moveTo(x1, lineY + 1.5); ctx.lineTo(x2, lineY + 1.5); ctx.lineWidth = 1; }
        else { ctx.moveTo(x1, lineY); ctx.lineTo(x2, lineY); }
        ctx.stroke();
        drawn++;
        if (rowH >= 4) { // arrow head
          const d = x2 > x1 ? -1 : 1, hs = Math.min(7, rowH / 2 + 2);
          ctx.setLineDash([]); ctx.beginPath(); ctx.moveTo(x2, lineY); ctx.lineTo(x2 + d * hs, lineY - hs / 2); ctx.lineTo(x2 + d * hs, lineY + hs / 2); ctx.closePath(); ctx.fill();
        }
        if (showText) {
          const lo = Math.min(x1, x2), hi = Math.max(x1, x2);
          const ty = rt + (rowH - 16) / 2;
          const conn = L.conn[i] ? `#${L.conn[i]} ${L.dir[i] === 0 ? 'c>s' : L.dir[i] === 1 ? 's>c' : ''} ` : '';
          const link = L.link[i] >= 0 ? `[${L.links[L.link[i]]}] ` : '';
          const text = (alert ? '! ' : '') + link + conn + L.labels[L.label[i]];
          // the connection in its own colour (and underlined: not colour alone)
          const cspan = conn ? el('span', { class: 'conn', style: `color: var(${CONNCOL[L.conn[i] % CONNCOL.length]})` }, conn.trimEnd()) : null;
          frag.append(el('div', { class: 'lbl' + (alert ? ' alert' : '') + (L.flags[i] & FLAG_FAILOVER ? ' failover' : '') + (rowFrame[i] === selected ? ' sel' : ''), 'data-frame': rowFrame[i], 'data-from': a, 'data-to': b, title: `frame ${rowFrame[i]}: ${text}`,
            style: `left:${lo + 10}px;width:${Math.max(0, hi - lo - 20)}px;top:${ty}px` }, (alert ? '! ' : '') + link, cspan, cspan ? ' ' : null, L.labels[L.label[i]]));
          frag.append(el('div', { class: 'tm', 'data-frame': rowFrame[i], style: `top:${ty}px;width:${TIMEW - 8}px` }, `${(rowT[i] / 1e6).toFixed(6)} #${rowFrame[i]}`));
        }
      }
      labels.replaceChildren(frag);
      info.textContent = `frames ${rowFrame[r0]}–${rowFrame[r1]} of ${D.frames} · ${rowH >= 1 ? rowH.toFixed(1) + ' px/row' : (1 / rowH).toFixed(0) + ' rows/px'}`;
      ladder.drawn = drawn;
    }
    function jump(frame, select) {
      const r = frameToRow(frame);
      if (r < 0) return;
      if (select) selected = rowFrame[r];
      if (rowH < 16) setRowH(18);
      box.scrollTop = Math.max(0, slot[r] * rowH - (H - HEAD) / 3);
      document.getElementById('ladder-sec').scrollIntoView({ block: 'start' });
      draw();
    }
    let pending = false;
    box.addEventListener('scroll', () => { if (!pending) { pending = true; requestAnimationFrame(() => { pending = false; draw(); }); } });
    box.addEventListener('wheel', (e) => {
      if (!e.ctrlKey) return;
      e.preventDefault();
      const r = box.getBoundingClientRect();
      setRowH(rowH * (e.deltaY < 0 ? 1.25 : 0.8), e.clientY - r.top - HEAD);
    }, { passive: false });
    box.addEventListener('keydown', (e) => { if (e.key === '+' || e.key === '=') setRowH(rowH * 2); else if (e.key === '-') setRowH(rowH / 2); });
    labels.addEventListener('click', (e) => { const f = e.target.dataset && e.target.dataset.frame; if (f) { selected = Number(f); draw(); graphs.atTime(frameSec(selected)); } });
    window.addEventListener('resize', () => { resize(); draw(); });
    return { resize, draw, jump, setRowH, zoom: (k) => setRowH(rowH * k), fit: () => setRowH(0), get rowH() { return rowH; }, get selectedFrame() { return selected; }, drawn: 0 };
  })();

  // ------------------------------------------------------------------ graphs (uPlot)
  const cgSec = el('section', { id: 'cursor-graphs' }, el('h2', null, 'Cursor graphs'),
    el('p', { class: 'none' }, 'Per connection and direction (the SMC-R counterpart of tcptrace): the writer\'s producer cursor and the reader\'s consumer cursor as stream bytes over time, the window (consumer cursor + the reader\'s RMB size: the writer may not pass it), RDMA WRITEs as segments (one per WRITE operation, from its first to its last packet), urgent bytes (▲), writer-blocked CDCs (◆), window stalls (shaded) and failovers (vertical line). Drag to zoom, double-click to reset.'));
  const cg = el('div', { class: 'graphs' });
  cgSec.append(cg);
  app.append(cgSec);
  const lgSec = el('section', { id: 'link-graphs' }, el('h2', null, 'Link graphs'),
    el('p', { class: 'none' }, 'Per link: RoCE payload throughput per direction, retransmitted packets and NAKs over time.'));
  const lgc = el('div', { class: 'graphs' });
  lgSec.append(lgc);
  app.append(lgSec);
  if (D.conns.length === 0) cg.append(el('p', { class: 'none' }, 'No SMC-R connection data in this capture.'));
  if (D.links.length === 0) lgc.append(el('p', { class: 'none' }, 'No RoCE link in this capture.'));

  const graphs = (() => {
    const cards = []; // {el, kind, id, make(), plot}
    const smcOf = (i) => smcRows.map((x) => x.s).find((s) => s && s.index === i);
    const marks = (u, draw) => { const ctx = u.ctx; ctx.save(); ctx.beginPath(); ctx.rect(u.bbox.left, u.bbox.top, u.bbox.width, u.bbox.height); ctx.clip(); draw(ctx); ctx.restore(); };
    function axisStyle() { const fg = css('--fg'), line = css('--line'); return { stroke: fg, grid: { stroke: line, width: 1 }, ticks: { stroke: line, width: 1 } }; }
    function connPlot(card, c, k) {
      const d = c.dirs[k];
      const s = smcOf(c.index);
      const sd = s ? s.dirs[k] : undefined;
      const ring = sd ? sd.ringSize : 0;
      const t = Array.from(undelta(d.t), (v) => v / 1e6);
      const prod = d.prod, cons = d.cons;
      const win = ring ? cons.map((v) => v + ring) : cons.map(() => null);
      const wt = undelta(d.wt);
      const wdur = d.wdur;
      const col = { p: css('--c0'), c: css('--c1'), w: css('--c2'), wr: css('--c4'), u: css('--c5'), wb: css('--c3'), f: css('--err'), st: css('--gap') };
      const stalls = sd ? sd.stalls.map((x) => [secOfNs(x.tsNs), x.endTsNs !== undefined ? secOfNs(x.endTsNs) : D.spanUs / 1e6]) : [];
      const fails = s ? s.failovers.map((f) => ({ t: secOfNs(f.tsNs), text: `failover ${f.from || '?'} → ${f.to}` })) : [];
      const opts = {
        width: card.clientWidth - 14, height: 260, title: undefined,
        scales: { x: { time: false } },
        axes: [Object.assign({ label: 'seconds since capture start', size: 40 }, axisStyle()), Object.assign({ label: 'stream bytes', size: 84, values: (u, v) => v.map(fmtBytes) }, axisStyle())],
        series: [{ label: 's' },
          { label: 'producer', stroke: col.p, width: 2, paths: uPlot.paths.stepped({ align: 1 }), points: { show: true, size: 4 } },
          { label: 'consumer', stroke: col.c, width: 2, dash: [8, 4], paths: uPlot.paths.stepped({ align: 1 }), points: { show: true, size: 4 } },
          { label: 'window (consumer + RMB)', stroke: col.w, width: 1.5, dash: [2, 3], paths: uPlot.paths.stepped({ align: 1 }), points: { show: false } }],
        cursor: { drag: { x: true, y: false } },
        hooks: { drawClear: [(u) => marks(u, (ctx) => {
          ctx.fillStyle = col.st;
          for (const [a, b] of stalls) { const x1 = u.valToPos(a, 'x', true), x2 = u.valToPos(b, 'x', true); ctx.fillRect(x1, u.bbox.top, Math.max(2, x2 - x1), u.bbox.height); }
        })],
        draw: [(u) => marks(u, (ctx) => {
          const dp = devicePixelRatio || 1;
          ctx.strokeStyle = col.wr; ctx.lineWidth = 2 * dp;
          ctx.beginPath();
          for (let i = 0; i < wt.length; i++) {
            const x = u.valToPos(wt[i] / 1e6, 'x', true), x1 = u.valToPos((wt[i] + wdur[i]) / 1e6, 'x', true);
            const y0 = u.valToPos(d.wy[i], 'y', true);
            ctx.moveTo(x, y0); ctx.lineTo(x1, Math.min(u.valToPos(d.wy[i] + d.wlen[i], 'y', true), y0 - dp));
          }
          ctx.stroke();
          for (let i = 0; i < t.length; i++) {
            const f = d.flags[i];
            if (!(f & (FLAG_URG | FLAG_WB))) continue;
            const x = u.valToPos(t[i], 'x', true), y = u.valToPos(prod[i], 'y', true), r = 4.5 * dp;
            ctx.beginPath();
            if (f & FLAG_URG) { ctx.fillStyle = col.u; ctx.moveTo(x, y - r); ctx.lineTo(x - r, y + r * 0.7); ctx.lineTo(x + r, y + r * 0.7); ctx.closePath(); ctx.fill(); }
            if (f & FLAG_WB) { ctx.fillStyle = col.wb; ctx.beginPath(); ctx.moveTo(x, y - r); ctx.lineTo(x + r, y); ctx.lineTo(x, y + r); ctx.lineTo(x - r, y); ctx.closePath(); ctx.fill(); }
          }
          ctx.strokeStyle = col.f; ctx.lineWidth = 2 * dp; ctx.setLineDash([6 * dp, 4 * dp]); ctx.fillStyle = col.f; ctx.font = `${12 * dp}px sans-serif`; ctx.textAlign = 'left'; ctx.textBaseline = 'alphabetic';
          for (const f of fails) { const x = u.valToPos(f.t, 'x', true); ctx.beginPath(); ctx.moveTo(x, u.bbox.top); ctx.lineTo(x, u.bbox.top + u.bbox.height); ctx.stroke(); ctx.fillText(f.text, x + 4 * dp, u.bbox.top + 14 * dp); }
          ctx.setLineDash([]);
        })] },
      };
      // the x range covers the WRITE segments and the failover lines too
      let xmin = t.length ? t[0] : 0, xmax = t.length ? t[t.length - 1] : 1;
      for (let i = 0; i < wt.length; i++) { xmin = Math.min(xmin, wt[i] / 1e6); xmax = Math.max(xmax, (wt[i] + wdur[i]) / 1e6); }
      for (const f of fails) { xmin = Math.min(xmin, f.t); xmax = Math.max(xmax, f.t); }
      if (xmax <= xmin) xmax = xmin + 1e-3;
      opts.scales.x.range = () => [xmin, xmax];
      // y follows what is in view (uPlot's auto range over the visible x window), like tcptrace
      opts.scales.x.range = (u, a, b) => (a === null || a === undefined || (a === xmin && b === xmax) ? [xmin, xmax] : [a, b]);
      return new uPlot(opts, [t, prod, cons, win], card.plotEl);
    }
    function linkPlot(card, l) {
      const n = Math.max(l.pkts[0].length, l.pkts[1].length, 1);
      for (const a of [l.pkts, l.bytes, l.retx, l.naks]) for (const k of [0, 1]) if (!a[k].length) a[k] = [];
      const bs = l.bucketUs / 1e6;
      const x = [], th0 = [], th1 = [], rt = [], nk = [];
      for (let i = 0; i < n; i++) {
        x.push((i + l.firstBucket) * bs);
        th0.push(((l.bytes[0][i] || 0) * 8) / bs / 1e6); th1.push(((l.bytes[1][i] || 0) * 8) / bs / 1e6);
        const r = (l.retx[0][i] || 0) + (l.retx[1][i] || 0), k = (l.naks[0][i] || 0) + (l.naks[1][i] || 0);
        rt.push(r || null); nk.push(k || null); // only buckets that had some are drawn
      }
      const opts = {
        width: card.clientWidth - 14, height: 260, scales: { x: { time: false }, n: {} },
        axes: [Object.assign({ label: `seconds (buckets of ${fmtSec(bs)})`, size: 40 }, axisStyle()), Object.assign({ label: 'Mbit/s', size: 60 }, axisStyle()), Object.assign({ scale: 'n', side: 1, label: 'packets', size: 50 }, axisStyle(), { grid: { show: false } })],
        series: [{ label: 's' },
          { label: 'c>s Mbit/s', stroke: css('--c0'), width: 2, paths: uPlot.paths.stepped({ align: 1 }) },
          { label: 's>c Mbit/s', stroke: css('--c1'), width: 2, dash: [8, 4], paths: uPlot.paths.stepped({ align: 1 }) },
          { label: 'retransmissions', scale: 'n', stroke: css('--c3'), fill: css('--c3'), width: 2, paths: () => null, points: { show: true, size: 8 } },
          { label: 'NAKs', scale: 'n', stroke: css('--err'), width: 2, paths: () => null, points: { show: true, size: 10, fill: css('--bg') } }],
        cursor: { drag: { x: true, y: false } },
      };
      return new uPlot(opts, [x, th0, th1, rt, nk], card.plotEl);
    }
    function addCard(parent, id, kind, key, title, sub, make) {
      const plotEl = el('div');
      const e = el('div', { class: 'graph', id, 'data-kind': kind, 'data-key': key }, el('h3', null, title), el('div', { class: 'sub' }, sub), plotEl);
      parent.append(e);
      const card = { el: e, plotEl, kind, key, make, plot: null, clientWidth: 0 };
      cards.push(card);
      return card;
    }
    for (const c of D.conns) {
      const s = smcOf(c.index);
      c.dirs.forEach((d, k) => {
        if (d.seen === 0 && d.writesSeen === 0) return;
        const sd = s ? s.dirs[k] : undefined;
        const who = k === 0 ? 'client → server' : 'server → client';
        const sub = `${d.seen} cursor point(s)${d.t.length < d.seen ? ` (${d.t.length} drawn)` : ''}, ${d.writesSeen} RDMA WRITE(s)` + (sd ? `, ${fmtBytes(sd.bytes)} produced, window ${sd.ringSize ? fmtBytes(sd.ringSize) : 'unknown'}, ${sd.urgentOffsets.length} urgent, ${sd.stalls.length} stall(s)` : '') + (s && s.failovers.length ? `, ${s.failovers.length} failover(s)` : '');
        addCard(cg, `cg-${c.index}-${k}`, 'conn', String(c.index), `connection ${c.index} ${k === 0 ? 'c>s' : 's>c'} (${who})`, sub, (card) => connPlot(card, c, k));
      });
    }
    for (const l of D.links) {
      const tot = (a) => a[0].reduce((x, y) => x + y, 0) + a[1].reduce((x, y) => x + y, 0);
      addCard(lgc, 'lg-' + l.name, 'link', l.name, `link ${l.name}`, `${tot(l.pkts)} packets, ${tot(l.retx)} retransmitted, ${tot(l.naks)} NAK(s)`, (card) => linkPlot(card, l));
    }
    function build(card) {
      if (card.plot) return card.plot;
      card.clientWidth = card.el.clientWidth;
      card.plot = card.make(card);
      return card.plot;
    }
    const io = 'IntersectionObserver' in window ? new IntersectionObserver((ents) => { for (const en of ents) if (en.isIntersecting) { const c = cards.find((x) => x.el === en.target); if (c) build(c); } }, { rootMargin: '300px' }) : null;
    for (const c of cards) if (io) io.observe(c.el); else build(c);
    return {
      cards,
      build,
      recolour() { for (const c of cards) if (c.plot) { c.plot.destroy(); c.plot = null; c.plotEl.textContent = ''; build(c); } },
      show(kind, key, a, b) {
        const list = cards.filter((c) => c.kind === kind && c.key === String(key));
        if (!list.length) return;
        list[0].el.scrollIntoView({ block: 'center' });
        for (const c of list) {
          const u = build(c);
          const pad = Math.max((b - a) * 0.2, 0.002);
          u.setScale('x', { min: a - pad, max: b + pad });
          c.el.classList.add('flash'); setTimeout(() => c.el.classList.remove('flash'), 1500);
        }
      },
      atTime(sec) { for (const c of cards) if (c.plot) c.plot.setCursor({ left: c.plot.valToPos(sec, 'x'), top: 10 }); },
    };
  })();

  app.append(el('footer', null, `Generated by ${D.generator}. Self-contained: opens without network access. Graphs drawn with uPlot (MIT).`));

  ladder.resize();
  ladder.setRowH(18);
  box.scrollTop = 0;
  ladder.draw();
  window.smcReport = { data: D, ladder, graphs, ready: true, readyMs: performance.now() };
  document.body.dataset.ready = '1';
})();
