// `--summary`: what `smcss -a`, `smcr linkgroup` and `smcr stats` would show from a kernel,
// rebuilt from the wire by the tracker — link groups, links, connections, the handshake
// timeline with per-step latency, every fallback in one sentence, and the anomalies.

import type { ChalkInstance } from 'chalk';
import type { Tracker } from '../tracker/tracker.js';
import type { LgEvent, Link, SmcConn, Step, TcpConn } from '../tracker/model.js';
import { diagnose, type Diagnosis } from '../tracker/diagnosis.js';
import { typeHistory } from '../tracker/lgtype.js';
import { GroupState } from '../tracker/group.js';
import { streamTable, visible, wrap, type Column } from './table.js';
import { diagnosisSelected, selectState, type Selection } from './select.js';
import type { LinkGroup } from '../tracker/model.js';

export interface SummaryOptions {
  /** Width to fit (terminal columns); Infinity = every column at full width (--wide). */
  width?: number;
  /** Rows shown per table and list; the rest is counted ("… N more, use --json"). */
  maxRows?: number;
  /** Only this connection, link group or link (--conn, --lg, --link). */
  select?: Selection;
}

/** What the summary shows: everything, or what a selection keeps. */
interface View { groups: LinkGroup[]; links: Link[]; tcp: TcpConn[]; orphans: SmcConn[]; diag: Diagnosis[]; other: boolean }

function view(t: Tracker, sel: Selection | undefined): View {
  const diag = diagnose(t);
  if (!sel) return { groups: t.groups, links: t.groups.flatMap((g) => g.links), tcp: t.tcp, orphans: t.orphanConns, diag, other: true };
  const s = selectState(t, sel);
  const groups = t.groups.filter((g) => s.groups.has(g));
  return {
    groups,
    links: groups.flatMap((g) => g.links).filter((l) => s.links.size === 0 || s.links.has(l.name) || sel.lg !== undefined),
    tcp: t.tcp.filter((x) => s.conns.has(x.index)),
    orphans: t.orphanConns.filter((x) => s.conns.has(x.index)),
    diag: diag.filter((d) => diagnosisSelected(d, s)),
    other: false,
  };
}
import { fmtSize, hex32 } from '../wire/common.js';

const cols = (...h: [string, number][]): Column[] => h.map(([head, prio]) => ({ head, prio }));

/** The first `max` items in the order of `score` (highest first) when they do not all fit. */
function top<T>(items: readonly T[], max: number, score: (x: T) => number): readonly T[] {
  if (items.length <= max) return items;
  return items.map((x, i) => ({ x, i, s: score(x) })).sort((a, b) => b.s - a.s || a.i - b.i).slice(0, max).sort((a, b) => a.i - b.i).map((e) => e.x);
}

function moreLine<T>(all: readonly T[], shown: readonly T[], c: ChalkInstance): string[] {
  return all.length > shown.length ? [c.dim(`  … ${all.length - shown.length} more (--json lists all)`)] : [];
}
function ms(ns: bigint): string {
  const v = Number(ns) / 1e6;
  return v >= 1000 ? `${(v / 1000).toFixed(3)}s` : `${v.toFixed(1)}ms`;
}

/** "SYN → SYN-ACK +11.3ms → Proposal +12.2ms …": each step with the time since the previous one. */
export function timeline(steps: Step[]): string {
  return steps.map((s, i) => (i === 0 ? s.name : `${s.name} +${ms(s.tsNs - steps[i - 1]!.tsNs)}`)).join(' → ');
}

function connSteps(c: TcpConn): Step[] {
  const s = [...c.steps];
  if (c.smc?.firstData) s.push(c.smc.firstData);
  return s.sort((a, b) => (a.tsNs < b.tsNs ? -1 : a.tsNs > b.tsNs ? 1 : a.frame - b.frame));
}

/** The groups' events (but the first link's, shown with the group) in frame order, equal frames
 *  in group and event order; the `i`th made when read. A group's events are made from its
 *  packed history on each read (tracker/group.ts), so the order is kept as numbers (frame, group,
 *  event, position: 20 bytes per event) and the lists of the few groups being printed are cached. */
function eventOrder(groups: readonly LinkGroup[]): { count: number; at(i: number): LgEvent } {
  // counted first, then kept in arrays of their exact size (no growing lists left behind)
  const scan = (f: (gi: number, ei: number, frame: number) => void): void => {
    for (let gi = 0; gi < groups.length; gi++) {
      const g = groups[gi]!;
      let ei = 0;
      const each = (fr: number, what: LgEvent['what']): void => {
        if (what !== 'link-added' || fr !== g.firstFrame) f(gi, ei, fr);
        ei++;
      };
      // the tracker's groups tell frames without making their events
      if (g instanceof GroupState) g.forEachEvent(each);
      else for (const e of g.events) each(e.frame, e.what);
    }
  };
  let count = 0;
  scan(() => { count++; });
  const frame = new Float64Array(count), group = new Uint32Array(count), event = new Uint32Array(count);
  let k = 0;
  scan((gi, ei, fr) => { frame[k] = fr; group[k] = gi; event[k] = ei; k++; });
  const order = new Uint32Array(count);
  for (let i = 0; i < count; i++) order[i] = i;
  // positions are in group and event order: ties keep it
  order.sort((a, b) => frame[a]! - frame[b]! || a - b);
  const cache = new Map<number, LgEvent[]>();
  return {
    count,
    at(i: number): LgEvent {
      const j = order[i]!, gi = group[j]!;
      let es = cache.get(gi);
      if (es === undefined) {
        if (cache.size >= 64) cache.clear();
        es = groups[gi]!.events;
        cache.set(gi, es);
      }
      return es[event[j]!]!;
    },
  };
}

/** At full width the GID, QPN and MAC; fitted to a terminal "10.55.0.1 qp 0x11" (an
 *  IPv4-mapped GID as the address it maps). */
function qp(e: Link['ends'][0], full: boolean): string {
  const gid = !full && e.gid.startsWith('::ffff:') && e.gid.includes('.') ? e.gid.slice(7) : e.gid;
  return `${gid || '?'} qp ${e.qpn !== undefined ? '0x' + e.qpn.toString(16) : '?'}${full && e.mac ? ' ' + e.mac : ''}`;
}

/** How the connection ended, as the diagnosis judged it (a connection of a dead group is not open). */
export function closeState(s: SmcConn): string {
  // once per connection in the summary and its JSON: the directions read once, no list, no
  // closure (100 000 connections made 200 000 of each)
  const dirs = s.dirs, d0 = dirs[0], d1 = dirs[1];
  let text = also(endOf(d0, 'client'), endOf(d1, 'server'));
  const open = !((d0.closed || d0.aborted) && (d1.closed || d1.aborted));
  const rst = s.tcp?.rst;
  if (open && rst) text = also(text, `reset by the ${rst.by}`);
  if (open && s.lg.state === 'failed') text = also(text, 'link group lost');
  else if (open && s.lg.state === 'terminated' && !rst) text = also(text, 'link group terminated');
  const f = s.failovers[s.failovers.length - 1];
  if (f) text = also(text, `failed over to ${f.to}`);
  return text || 'open';
}

/** How writer direction `d` of the `who` side ended, or '' while it is open. */
function endOf(d: SmcConn['dirs'][0], who: string): string {
  return d.aborted ? `${who} aborted` : d.closed ? `${who} closed` : d.doneWriting ? `${who} done writing` : '';
}

/** `a, b` (either alone when the other is empty). */
function also(a: string, b: string): string {
  return a === '' ? b : b === '' ? a : `${a}, ${b}`;
}

const SEV_ORDER = { error: 0, warning: 1, info: 2 } as const;

function renderDiagnosis(all: Diagnosis[], c: ChalkInstance, o: { width: number; maxRows: number }): string[] {
  const out = [c.bold('Diagnosis')];
  const ds = all.slice(0, o.maxRows);
  for (const d of ds) {
    const col = d.severity === 'error' ? c.red : d.severity === 'warning' ? c.yellow : c.dim;
    const where = [d.lg !== undefined && !d.link ? `LG${d.lg}` : '', d.link ?? '', d.conn !== undefined ? `conn ${d.conn}` : ''].filter(Boolean).join(' ');
    const ev = d.frames.count > 1 || d.frames.first !== d.frames.last ? `frames ${d.frames.first}–${d.frames.last}, ${d.frames.count}×` : `frame ${d.frames.first}`;
    out.push(`  ${col(d.severity.padEnd(7))} ${c.bold(d.code)}${where ? ` [${where}]` : ''} (${ev})`);
    for (const l of wrap(d.message, Math.max(30, o.width - 10))) out.push(`          ${l}`);
  }
  return out.concat(moreLine(all, ds, c));
}

export function renderSummary(t: Tracker, c: ChalkInstance, opts: SummaryOptions = {}): string {
  const out: string[] = [];
  writeSummary(t, c, opts, (l) => { out.push(l); });
  return out.join('\n');
}

/** The summary line by line into `emit` (nothing holds all rows: 300 000 connections print in
 *  constant memory and linear time). */
export function writeSummary(t: Tracker, c: ChalkInstance, opts: SummaryOptions, emit: (line: string) => void): void {
  const o = { width: opts.width ?? Infinity, maxRows: opts.maxRows ?? Infinity };
  const tbl = { width: o.width, maxRows: Infinity, more: '--json lists all; --wide shows every column' };
  // Lines longer than the width wrap with a hanging indent (tables already fit).
  const put = o.width === Infinity ? emit : (l: string): void => {
    if (l.includes('\n')) { for (const x of l.split('\n')) put(x); return; }
    if (visible(l) <= o.width) { emit(l); return; }
    const indent = /^ */.exec(l)![0].length + 4;
    const parts = wrap(l, o.width - indent);
    emit(parts[0]!);
    for (let i = 1; i < parts.length; i++) emit(' '.repeat(indent) + parts[i]!);
  };
  const lines = (ls: readonly string[]): void => { for (const l of ls) put(l); };
  const span = t.firstTs !== undefined ? ms(t.lastTs - t.firstTs) : '0';
  put(c.bold(`${t.frames} frames over ${span}: ${t.tcp.length} TCP connection(s), ${t.groups.length} link group(s), ${t.anomalyCount} anomal${t.anomalyCount === 1 ? 'y' : 'ies'}`));
  const V = view(t, opts.select);
  if (opts.select) put(c.dim(`only ${opts.select.conn !== undefined ? `connection ${opts.select.conn}` : opts.select.link !== undefined ? `link ${opts.select.link}` : `link group LG${opts.select.lg}`}: ${V.tcp.length} connection(s), ${V.groups.length} link group(s), ${V.links.length} link(s)`));
  const diag = V.diag;
  const wrong = diag.some((d) => SEV_ORDER[d.severity] < 2);
  // Something wrong: the diagnosis comes first; only notes: after the tables.
  if (wrong) { put(''); lines(renderDiagnosis(diag, c, o)); }
  // When rows must be cut, those with problems and the busiest come first.
  const troubled = new Set<string>();
  for (const d of diag) if (d.severity !== 'info') { if (d.lg !== undefined) troubled.add(`LG${d.lg}`); if (d.link) troubled.add(d.link); if (d.conn !== undefined) troubled.add(`c${d.conn}`); }

  if (V.groups.length > 0) {
    put(''); put(c.bold('Link groups'));
    const groups = top(V.groups, o.maxRows, (g) => (troubled.has(`LG${g.id}`) ? 1e12 : 0) + g.conns.length);
    streamTable(cols(['LG', 1], ['client peer (host)', 5], ['server peer (host)', 5], ['ver', 4], ['UEID', 6], ['max links/conns', 7], ['links', 3], ['conns', 3], ['type', 2], ['state', 1]),
      groups.length, (i) => groupRow(groups[i]!), c, tbl, put);
    lines(moreLine(V.groups, groups, c));

    put(''); put(c.bold('Links'));
    const links = V.links;
    const shownLinks = top(links, o.maxRows, (l) => (troubled.has(l.name) ? 1e15 : 0) + (l.retransmits + l.psnGaps + l.naks) * 1e9 + l.packets[0] + l.packets[1]);
    streamTable(cols(['link', 1], ['client QP', 2], ['server QP', 2], ['MTU', 6], ['uid', 7], ['state', 1], ['pkts c>s / s>c', 4], ['payload c>s / s>c', 5], ['retx', 3], ['PSN gaps', 4], ['NAK', 4], ['RNR', 6]),
      shownLinks.length, (i) => linkRow(shownLinks[i]!, o.width === Infinity), c, tbl, put);
    lines(moreLine(links, shownLinks, c));
  }

  if (V.tcp.length > 0) {
    put(''); put(c.bold('Connections'));
    const conns = top(V.tcp, o.maxRows, (x) => (troubled.has(`c${x.index}`) ? 1e15 : 0) + (x.smc ? x.smc.dirs[0].prodLinear + x.smc.dirs[1].prodLinear : x.tcpBytes[0] + x.tcpBytes[1]));
    const orphans = V.orphans.length > o.maxRows ? V.orphans.slice(0, o.maxRows) : V.orphans;
    streamTable(cols(['#', 1], ['client → server', 1], ['mode', 1], ['LG', 3], ['tokens c/s', 5], ['rkeys c/s', 6], ['RMBE c/s', 4], ['bytes c>s / s>c', 2], ['wblk', 5], ['close', 1]),
      conns.length + orphans.length, (i) => (i < conns.length ? connRow(conns[i]!, c) : orphanRow(orphans[i - conns.length]!)), c, tbl, put);
    lines(moreLine(V.tcp, conns, c)); lines(moreLine(V.orphans, orphans, c));

    put(''); put(c.bold('Handshakes'));
    for (const x of conns) put(`  #${x.index} ${timeline(connSteps(x))}`);
    lines(moreLine(V.tcp, conns, c));
    // the first rows of the fallbacks and how many there are, in one pass
    let fbCount = 0;
    for (const x of V.tcp) {
      if (!x.why || x.mode === 'smc-r') continue;
      if (fbCount === 0) { put(''); put(c.bold('Not SMC-R')); }
      if (fbCount++ < o.maxRows) put(`  #${x.index} ${x.mode}: ${x.why}`);
    }
    if (fbCount > o.maxRows) put(c.dim(`  … ${fbCount - o.maxRows} more (--json lists all)`));
  }

  if (V.other && t.otherRoce.size > 0) {
    put(''); put(c.bold('RoCE traffic, not SMC-R'));
    let n = 0;
    for (const f of t.otherRoce.values()) {
      if (n++ >= o.maxRows) break;
      put(`  ${f.src} → ${f.dst} QP 0x${f.qpn.toString(16)}: ${f.packets} ${f.transport} packets, ${f.bytes} bytes (frames ${f.first}–${f.last})`);
    }
    if (t.otherRoce.size > o.maxRows) put(c.dim(`  … ${t.otherRoce.size - o.maxRows} more (--json lists all)`));
  }

  const ev = eventOrder(V.groups);
  if (ev.count > 0) {
    put(''); put(c.bold('Link group events'));
    const shown = ev.count > o.maxRows ? o.maxRows : ev.count;
    for (let i = 0; i < shown; i++) { const e = ev.at(i); put(`  #${e.frame} ${e.what.padEnd(16)} ${e.text}`); }
    if (ev.count > shown) put(c.dim(`  … ${ev.count - shown} more (--json lists all)`));
  }

  if (!wrong && diag.length > 0) { put(''); lines(renderDiagnosis(diag, c, o)); }

  if (t.anomalyCount > 0) {
    put(''); put(c.bold('Anomalies'));
    for (const e of t.anomalyTotals.values()) {
      const col = e.severity === 'error' ? c.red : e.severity === 'warn' ? c.yellow : c.dim;
      put(`  ${col(e.severity.padEnd(5))} ${e.code} ×${e.count} (first #${e.first}): ${e.message}`);
    }
  }
}

function groupRow(g: LinkGroup): string[] {
  return [
    `LG${g.id}${g.complete ? '' : ' (mid-stream)'}`,
    `${g.clientPeer ?? '?'}${g.clientHost ? ` (${g.clientHost})` : ''}`,
    `${g.serverPeer ?? '?'}${g.serverHost ? ` (${g.serverHost})` : ''}`,
    g.version !== undefined ? `v${g.version}${g.release !== undefined ? '.' + g.release : ''}` : '?',
    g.ueid ?? '-',
    `${g.maxLinks ?? '?'}/${g.maxConns ?? '?'}`,
    String(g.links.length),
    String(g.conns.length),
    typeHistory(g),
    g.state,
  ];
}

function linkRow(l: Link, full: boolean): string[] {
  return [
    l.name, qp(l.ends[0], full), qp(l.ends[1], full), l.mtu ? String(l.mtu) : '?', l.uid !== undefined ? hex32(l.uid) : '?', l.state,
    `${l.packets[0]} / ${l.packets[1]}`, `${l.bytes[0]} / ${l.bytes[1]}`,
    String(l.retransmits), String(l.psnGaps), String(l.naks), String(l.rnrNaks),
  ];
}

function connRow(x: TcpConn, c: ChalkInstance): string[] {
  const s = x.smc;
  const ends = `${x.client.ip}:${x.client.port} → ${x.server.ip}:${x.server.port}`;
  if (!s) return [String(x.index), ends, x.mode, '-', '-', '-', '-', `${x.tcpBytes[0]} / ${x.tcpBytes[1]} (TCP)`, '-', x.rst ? `reset by the ${x.rst.by}` : x.closed ? 'closed' : 'open'];
  const [cl, sv] = s.sides;
  const [d0, d1] = s.dirs; // (a new pair per read)
  return [
    String(x.index), ends, c.green(x.mode), `LG${s.lg.id}`,
    `${hx(cl.token)}/${hx(sv.token)}`, `${hx(cl.rkey)}/${hx(sv.rkey)}`,
    `${cl.rmbeSize ? fmtSize(cl.rmbeSize) : '?'}/${sv.rmbeSize ? fmtSize(sv.rmbeSize) : '?'}`,
    `${d0.prodLinear} / ${d1.prodLinear}`,
    `${d0.writerBlocked}/${d1.writerBlocked}`, closeState(s),
  ];
}

function orphanRow(s: SmcConn): string[] {
  return [`?${-s.index}`, `${s.sides[0].gid} ↔ ${s.sides[1].gid}`, 'smc-r (mid-stream)', `LG${s.lg.id}`,
    `${hx(s.sides[0].token)}/${hx(s.sides[1].token)}`, '?', '?', `≥${s.dirs[0].prodLinear} / ≥${s.dirs[1].prodLinear}`,
    `${s.dirs[0].writerBlocked}/${s.dirs[1].writerBlocked}`, closeState(s)];
}

function hx(v: number | undefined): string { return v === undefined ? '?' : '0x' + v.toString(16); }

/** A JSON array written item by item (--summary --json streams it). */
class LazyArray<T> {
  constructor(readonly items: readonly T[], readonly map: (x: T) => unknown) {}
}

/** The summary's fields in order; the long arrays (link groups, connections) stay lazy. */
function summaryFields(t: Tracker, select?: Selection): Record<string, unknown> {
  const V = view(t, select);
  const keepLink = new Set(V.links);
  const conn = (s: SmcConn): unknown => ({
    index: s.index, lg: s.lg.id, sides: s.sides,
    dirs: s.dirs.map((d, i) => ({
      dir: i === 0 ? 'c>s' : 's>c', ringSize: d.ringSize, bytes: d.prodLinear, consumed: d.consLinear, prod: d.prod, cons: d.cons,
      cdcs: d.cdcs, writes: d.writes, writeBytes: d.writeBytes, writerBlocked: d.writerBlocked, urgent: d.urgent,
      doneWriting: d.doneWriting, closed: d.closed, aborted: d.aborted, urgentOffsets: d.urgentMarks.map((u) => u.offset), stalls: d.stalls,
    })),
    link: s.link?.name, failovers: s.failovers, abort: s.abort, state: closeState(s),
  });
  return {
    frames: t.frames,
    ...(select ? { selection: select } : {}),
    diagnosis: V.diag,
    linkGroups: new LazyArray(V.groups, (g) => ({
      id: g.id, complete: g.complete, clientPeer: g.clientPeer, serverPeer: g.serverPeer, clientHost: g.clientHost, serverHost: g.serverHost,
      version: g.version, release: g.release, ueid: g.ueid, maxLinks: g.maxLinks, maxConns: g.maxConns, state: g.state,
      types: g.types, events: g.events,
      links: g.links.filter((l) => keepLink.has(l)).map((l) => ({
        name: l.name, id: l.id, uid: l.uid, ends: l.ends, mtu: l.mtu, state: l.state, packets: l.packets, bytes: l.bytes,
        retransmits: l.retransmits, psnGaps: l.psnGaps, naks: l.naks, rnrNaks: l.rnrNaks, deleted: l.deleted, lost: l.lost,
        testLinkUnanswered: l.testLinkUnanswered,
      })),
      connections: g.conns.map((s) => s.index),
    })),
    otherRoce: V.other ? [...t.otherRoce.values()] : [],
    connections: new LazyArray(V.tcp, (x) => ({
      index: x.index, client: x.client, server: x.server, mode: x.mode, why: x.why, fallbackCode: x.fallbackCode,
      synSmc: x.synSmc, synAckSmc: x.synAckSmc, tcpBytes: x.tcpBytes, timeline: connSteps(x), smc: x.smc ? conn(x.smc) : undefined,
    })),
    midStreamConnections: new LazyArray(V.orphans, conn),
    anomalyTotals: [...t.anomalyTotals.values()],
    anomalies: t.anomalies,
  };
}

/** The tracked state as plain JSON (no back-references), for `--summary --json`. */
export function summaryJson(t: Tracker, select?: Selection): unknown {
  const f = summaryFields(t, select);
  for (const k of Object.keys(f)) { const v = f[k]; if (v instanceof LazyArray) f[k] = v.items.map(v.map); }
  return f;
}

/** `JSON.stringify({...summaryJson(t, select), ...extra}, replacer)` written in pieces to
 *  `emit`, one link group or connection at a time: the same text without holding it all. */
export function writeSummaryJson(t: Tracker, select: Selection | undefined, extra: Record<string, unknown>, replacer: (k: string, v: unknown) => unknown, emit: (s: string) => void): void {
  const f = { ...summaryFields(t, select), ...extra };
  let first = true;
  emit('{');
  for (const k of Object.keys(f)) {
    const v = f[k];
    if (v instanceof LazyArray) {
      emit(`${first ? '' : ','}${JSON.stringify(k)}:[`);
      let n = 0;
      for (const x of v.items) {
        const s = JSON.stringify(v.map(x), replacer);
        emit(n++ === 0 ? s : ',' + s);
      }
      emit(']');
    } else {
      const s = JSON.stringify(v, replacer) as string | undefined;
      if (s === undefined) continue; // as JSON.stringify leaves out undefined values
      emit(`${first ? '' : ','}${JSON.stringify(k)}:${s}`);
    }
    first = false;
  }
  emit('}');
}
