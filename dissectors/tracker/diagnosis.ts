// The diagnosis: what went wrong in a capture, one entry per problem, built from the tracker's
// state after finish(). Each entry has a stable code (listed with what to check next in
// docs/smcdump.md), a severity, what it concerns (link group, link, connection), its evidence
// frames and one sentence a user understands. The tracker's states agree with it (a lost link
// is in state "lost"; a connection whose group died is not "open"), because both come from the
// same judgement in Tracker.finish(). Severities: error = the application was hurt (data
// stalled, connection or link group died); warning = the protocol recovered or may be hurt;
// info = worth knowing, nothing wrong (a decline, a fallback, traffic that is not SMC-R).

import { hex32 } from '../wire/common.js';
import type { Link, LinkGroup, SmcConn, SmcDir, TcpConn } from './model.js';
import { SIDE, WINDOW_STALL_NS, type Tracker } from './tracker.js';
import { typeHistory } from './lgtype.js';

export type DiagnosisSeverity = 'error' | 'warning' | 'info';

export interface Diagnosis {
  code: string;
  severity: DiagnosisSeverity;
  lg?: number;
  link?: string;
  conn?: number;
  /** Evidence frames: the first, the last and how many. */
  frames: { first: number; last: number; count: number };
  message: string;
}

/** A first link or ADD LINK whose CONFIRM LINK had this long to complete and did not. */
const LINK_UP_NS = 4_000_000_000n;
/** An urgent byte not consumed for this long while the writer waits is a stall. */
const URGENT_STALL_NS = WINDOW_STALL_NS;

const RANK: Record<DiagnosisSeverity, number> = { error: 0, warning: 1, info: 2 };

export function diagnose(t: Tracker): Diagnosis[] {
  const out: Diagnosis[] = [];
  for (const g of t.groups) {
    linkNotEstablished(t, g, out);
    linkLost(g, out);
    failover(g, out);
    for (const l of g.links) { retransmits(l, out); testLink(l, out); }
    for (const c of g.conns) {
      for (const dir of [0, 1] as const) { urgentStall(t, c, dir, out); windowStall(c, dir, out); }
      abort(c, out);
    }
    notSmc(g, out);
  }
  for (const c of t.tcp) { tcpReset(c, out); fallback(c, out); }
  for (const f of t.otherRoce.values()) {
    out.push({ code: 'roce.not-smc', severity: 'info', frames: { first: f.first, last: f.last, count: f.packets },
      message: `RoCE traffic, not SMC-R: ${f.packets} ${f.transport} packet(s) ${f.src} → ${f.dst} QP 0x${f.qpn.toString(16)} (SMC-R uses only RC queue pairs)` });
  }
  violations(t, out);
  return out.sort((a, b) => RANK[a.severity] - RANK[b.severity] || a.frames.first - b.frames.first);
}

function ms(ns: bigint): string {
  const v = Number(ns) / 1e6;
  return v >= 1000 ? `${(v / 1000).toFixed(1)} s` : `${v.toFixed(0)} ms`;
}

function qps(l: Link): string {
  const e = (i: 0 | 1): string => `${l.ends[i].gid || '?'} QP ${l.ends[i].qpn !== undefined ? '0x' + l.ends[i].qpn!.toString(16) : '?'}`;
  return `${e(0)} ↔ ${e(1)}`;
}

/** CLC completed (or ADD LINK was answered) but the link never got its CONFIRM LINK. */
function linkNotEstablished(t: Tracker, g: LinkGroup, out: Diagnosis[]): void {
  if (!g.complete) return;
  for (const l of g.links) {
    if (l.confirmedFrame !== undefined || l.state === 'unknown') continue;
    const elapsed = t.lastTs - (g.events.find((e) => e.link === l.name && e.what === 'link-added')?.tsNs ?? t.lastTs);
    const gaveUp = g.state === 'failed' || l.state === 'failed' || l.state === 'deleted' || l.state === 'lost';
    const seen: string[] = [];
    const [c2s, s2c] = l.packets;
    if (c2s + s2c === 0) seen.push('no RoCE frame at all was captured on it');
    else {
      if (s2c > 0) seen.push(`${s2c} RoCE packet(s) from the server (${l.ends[1].gid})`);
      if (c2s > 0) seen.push(`${c2s} from the client (${l.ends[0].gid})`);
      else seen.push('none from the client');
      if (l.retx[1]) seen.push(`the server retransmitted ${l.retx[1].count} time(s)`);
    }
    const first = l === g.links[0] ? g.firstTcp : undefined;
    const decl = first?.decline;
    let msg = `${l.name} (${qps(l)}) never came up: no completed CONFIRM LINK exchange; ${seen.join(', ')}`;
    if (decl) msg += `; the ${decl.by} then declined ${hex32(decl.diagnosis)} (frame ${decl.frame}) and connection ${first!.index} fell back to TCP`;
    const sure = gaveUp || elapsed > LINK_UP_NS;
    if (!sure) msg += ' before the capture ended';
    out.push({ code: 'link.not-established', severity: sure ? 'error' : 'info', lg: g.id, link: l.name,
      frames: { first: l.firstFrame, last: decl?.frame ?? l.lastFrom[1]?.frame ?? l.firstFrame, count: c2s + s2c }, message: msg + '.' });
  }
}

/** Links up at a frame: confirmed before it and not deleted or lost by then. */
function upAt(g: LinkGroup, frame: number, except: Link): Link[] {
  return g.links.filter((l) => l !== except && l.confirmedFrame !== undefined && l.confirmedFrame < frame
    && !(l.deleted && l.deleted.frame <= frame) && !(l.lost && l.lost.frame <= frame));
}

function linkLost(g: LinkGroup, out: Diagnosis[]): void {
  for (const l of g.links) {
    if (l.state !== 'lost' || !l.lost) continue;
    const survivors = upAt(g, l.lost.frame, l);
    const moved = g.conns.filter((c) => c.failovers.some((f) => f.from === l.name || (!f.from && f.to !== l.name)));
    const after = survivors.length > 0
      ? `the link group continued on ${survivors.map((s) => s.name).join(', ')}${moved.length ? ` (${moved.length} connection(s) moved)` : ''}`
      : `the link group had no link left: its ${g.conns.length} connection(s) ended with it`;
    const last = Math.max(l.lost.frame, l.retx[0]?.last ?? 0, l.retx[1]?.last ?? 0, l.testLinkUnanswered?.last ?? 0);
    out.push({ code: 'link.lost', severity: survivors.length > 0 ? 'warning' : 'error', lg: g.id, link: l.name,
      frames: { first: l.lost.frame, last, count: l.lost.reasons.length },
      message: `${l.name} (${qps(l)}) stopped working: ${l.lost.reasons.join('; ')}; ${after}.` });
  }
}

function failover(g: LinkGroup, out: Diagnosis[]): void {
  const moves = g.conns.flatMap((c) => c.failovers.map((f) => ({ c, f })));
  if (moves.length === 0) return;
  const conns = [...new Set(moves.map((m) => m.c))];
  const lost = g.links.filter((l) => l.state === 'lost').map((l) => l.name);
  const routes = [...new Set(moves.map((m) => `${m.f.from ?? lost[0] ?? '?'} → ${m.f.to}`))].join(', ');
  const parts = conns.map((c) => {
    const f = c.failovers[0]!;
    const fl = f.inFlight[0] + f.inFlight[1];
    return `connection ${c.index} at stream bytes ${f.at[0]} c>s / ${f.at[1]} s>c (${fl} byte(s) unconsumed, validation CDC from the ${c.failovers.map((x) => x.by).join(' and ')})`;
  });
  let first = Infinity, last = 0;
  for (const m of moves) { first = Math.min(first, m.f.frame); last = Math.max(last, m.f.frame); }
  out.push({ code: 'lgr.failover', severity: 'warning', lg: g.id, link: moves[0]!.f.to, ...(conns.length === 1 ? { conn: conns[0]!.index } : {}),
    frames: { first, last, count: moves.length },
    message: `LG${g.id} failed over ${routes}${lost.length ? ` after losing ${lost.join(', ')}` : ''}: ${parts.join('; ')}; data continued at the same RMB offsets. Link group type ${typeHistory(g)}.` });
}

function retransmits(l: Link, out: Diagnosis[]): void {
  for (const dir of [0, 1] as const) {
    const r = l.retx[dir];
    if (!r) continue;
    const afterDelete = l.deleted && l.state === 'deleted' && l.deleted.tsNs <= r.firstTs;
    const serious = r.maxRepeat >= 2 && !afterDelete;
    const who = dir === 0 ? 'client → server' : 'server → client';
    let msg = `${l.name} ${who}: ${r.count} retransmitted packet(s) over ${ms(r.lastTs - r.firstTs)} (frames ${r.first}–${r.last}), a PSN sent up to ${r.maxRepeat + 1} times`;
    msg += r.answered ? '; the peer answered in the end' : '; the peer never acknowledged them';
    if (afterDelete) msg += ' (after the link was deleted: the peer\'s QP was already gone)';
    out.push({ code: 'rdma.retransmit', severity: serious ? 'warning' : 'info', lg: l.lg.id, link: l.name,
      frames: { first: r.first, last: r.last, count: r.count }, message: msg + '.' });
  }
}

function testLink(l: Link, out: Diagnosis[]): void {
  const t = l.testLinkUnanswered;
  if (!t) return;
  out.push({ code: 'llc.testlink-unanswered', severity: 'warning', lg: l.lg.id, link: l.name,
    frames: { first: t.first, last: t.last, count: t.count },
    message: `${t.count} TEST LINK request(s) on ${l.name} got no response: the peer's SMC stack or RoCE device is gone (Linux sends TEST LINK after smcr_testlink_time of silence and takes the link down when it goes unanswered for 2 s).` });
}

/** The writer's urgent byte is never consumed; the writer waits (Linux blocks further sends
 *  until the peer consumed everything) and then stops or closes. */
function urgentStall(t: Tracker, c: SmcConn, dir: 0 | 1, out: Diagnosis[]): void {
  const w: SmcDir = c.dirs[dir];
  const u = w.urgentMarks[w.urgentMarks.length - 1];
  if (!u) return;
  const stuck = w.consLinear <= u.offset;
  const noMore = w.prodLinear === u.offset + 1;
  const ended = w.closed || w.doneWriting || w.aborted || c.tcp?.rst !== undefined || t.lastTs - u.tsNs >= URGENT_STALL_NS;
  if (!stuck || !noMore || !ended) return;
  const reader = SIDE[1 - dir], writer = SIDE[dir];
  const how = w.closed || w.doneWriting ? `the ${writer} then closed (frame ${w.lastCdc?.frame ?? u.frame})` : w.aborted ? `the ${writer} aborted` : `nothing more was sent for ${ms(t.lastTs - u.tsNs)}`;
  out.push({ code: 'cdc.urgent-stall', severity: 'error', lg: c.lg.id, conn: c.index, ...(c.link ? { link: c.link.name } : {}),
    frames: { first: u.frame, last: w.lastCdc?.frame ?? u.frame, count: w.urgentMarks.length },
    message: `connection ${c.index} ${writer} → ${reader}: urgent byte at stream offset ${u.offset} (frame ${u.frame}) never consumed: the ${reader}'s consumer cursor stayed at ${w.consLinear}, the ${writer} waited for it and ${how}.` });
}

function windowStall(c: SmcConn, dir: 0 | 1, out: Diagnosis[]): void {
  const w = c.dirs[dir];
  if (w.stalls.length === 0) return;
  const writer = SIDE[dir], reader = SIDE[1 - dir];
  const parts = w.stalls.map((s) => s.resumed
    ? `${ms(s.endTsNs! - s.tsNs)} from frame ${s.frame} until the consumer update in frame ${s.endFrame}`
    : `from frame ${s.frame} until the capture ended, never resumed`);
  const s0 = w.stalls[0]!, sl = w.stalls[w.stalls.length - 1]!;
  const open = w.stalls.some((s) => !s.resumed);
  out.push({ code: 'cdc.window-stall', severity: open ? 'error' : 'warning', lg: c.lg.id, conn: c.index, ...(c.link ? { link: c.link.name } : {}),
    frames: { first: s0.frame, last: sl.endFrame ?? sl.frame, count: w.stalls.length },
    message: `connection ${c.index} ${writer} → ${reader}: the ${writer} was blocked with a full ${w.ringSize ? `${w.ringSize}-byte ` : ''}ring (the ${reader} did not read) ${parts.join('; ')}.` });
}

function abort(c: SmcConn, out: Diagnosis[]): void {
  const a = c.abort;
  if (!a) return;
  out.push({ code: 'conn.abort', severity: 'warning', lg: c.lg.id, conn: c.index,
    frames: { first: a.frame, last: a.frame, count: 1 },
    message: `connection ${c.index} aborted by the ${a.by} (peer_conn_abort, frame ${a.frame}) with ${a.unread} byte(s) it had not read: the other side sees the connection reset.` });
}

function notSmc(g: LinkGroup, out: Diagnosis[]): void {
  if (g.complete || g.links.some((l) => l.smcMessages > 0)) return;
  const pk = g.links.reduce((n, l) => n + l.packets[0] + l.packets[1], 0);
  let last = 0;
  for (const l of g.links) last = Math.max(last, l.lastFrom[0]?.frame ?? 0, l.lastFrom[1]?.frame ?? 0, l.firstFrame);
  out.push({ code: 'roce.not-smc', severity: 'info', lg: g.id, frames: { first: g.firstFrame, last, count: pk },
    message: `RoCE traffic, not SMC-R: ${pk} RC packet(s) between ${[...new Set(g.links.flatMap((l) => l.ends.map((e) => e.gid)))].join(' and ')} carried no LLC or CDC message.` });
}

function tcpReset(c: TcpConn, out: Diagnosis[]): void {
  const r = c.rst;
  if (!r || !c.smc) return;
  const s = c.smc;
  const orderly = s.dirs.every((d) => d.closed || d.aborted);
  const lgDead = s.lg.state !== 'active';
  out.push({ code: 'tcp.reset', severity: orderly ? 'info' : 'error', lg: s.lg.id, conn: c.index,
    frames: { first: r.frame, last: r.frame, count: 1 },
    message: orderly
      ? `TCP RST from the ${r.by} on the CLC connection of SMC-R connection ${c.index} (frame ${r.frame}) after the SMC connection had closed.`
      : `TCP RST from the ${r.by} on the CLC connection of SMC-R connection ${c.index} (frame ${r.frame}) while it was open: the ${r.by}'s kernel killed the socket${lgDead ? ' because its link group went down (device removed or link lost)' : ''}; the application saw the connection reset.` });
}

function fallback(c: TcpConn, out: Diagnosis[]): void {
  if (c.mode !== 'fallback' || !c.why) return;
  const d = c.decline;
  const first = c.steps[0]?.frame ?? 0;
  out.push({ code: d ? 'clc.decline' : 'clc.fallback', severity: 'info', conn: c.index,
    frames: { first: d?.frame ?? first, last: d?.frame ?? first, count: 1 },
    message: `connection ${c.index} uses TCP: ${c.why}.` });
}

/** Protocol violations the tracker flagged as errors, one entry per code and connection/link. */
function violations(t: Tracker, out: Diagnosis[]): void {
  const by = new Map<string, Diagnosis>();
  for (const a of t.anomalies) {
    if (a.severity !== 'error') continue;
    const k = `${a.code}|${a.conn ?? ''}|${a.link ?? ''}`;
    const e = by.get(k);
    if (e) { e.frames.count++; e.frames.last = a.frame; continue; }
    const d: Diagnosis = { code: a.code, severity: 'error', frames: { first: a.frame, last: a.frame, count: 1 }, message: a.message };
    if (a.conn !== undefined) d.conn = a.conn;
    if (a.link !== undefined) d.link = a.link;
    by.set(k, d);
  }
  for (const d of by.values()) {
    if (d.frames.count > 1) d.message += ` (${d.frames.count} times, frames ${d.frames.first}–${d.frames.last})`;
    out.push(d);
  }
}
