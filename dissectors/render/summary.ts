// `--summary`: what `smcss -a`, `smcr linkgroup` and `smcr stats` would show from a kernel,
// rebuilt from the wire by the tracker — link groups, links, connections, the handshake
// timeline with per-step latency, every fallback in one sentence, and the anomalies.

import Table from 'cli-table3';
import type { ChalkInstance } from 'chalk';
import type { Tracker } from '../tracker/tracker.js';
import type { Link, SmcConn, Step, TcpConn } from '../tracker/model.js';
import { diagnose, type Diagnosis } from '../tracker/diagnosis.js';
import { typeHistory } from '../tracker/lgtype.js';
import { fmtSize, hex32 } from '../wire/common.js';

function table(head: string[], c: ChalkInstance): Table.Table {
  return new Table({ head: head.map((h) => c.bold(h)), style: { head: [], border: [] } });
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

function qp(e: Link['ends'][0]): string {
  return `${e.gid || '?'} qp ${e.qpn !== undefined ? '0x' + e.qpn.toString(16) : '?'}${e.mac ? ' ' + e.mac : ''}`;
}

/** How the connection ended, as the diagnosis judged it (a connection of a dead group is not open). */
export function closeState(s: SmcConn): string {
  const parts: string[] = [];
  const who = ['client', 'server'];
  s.dirs.forEach((d, i) => {
    if (d.aborted) parts.push(`${who[i]} aborted`);
    else if (d.closed) parts.push(`${who[i]} closed`);
    else if (d.doneWriting) parts.push(`${who[i]} done writing`);
  });
  const open = !s.dirs.every((d) => d.closed || d.aborted);
  if (open && s.tcp?.rst) parts.push(`reset by the ${s.tcp.rst.by}`);
  if (open && s.lg.state === 'failed') parts.push('link group lost');
  else if (open && s.lg.state === 'terminated' && !s.tcp?.rst) parts.push('link group terminated');
  const f = s.failovers[s.failovers.length - 1];
  if (f) parts.push(`failed over to ${f.to}`);
  return parts.join(', ') || 'open';
}

const SEV_ORDER = { error: 0, warning: 1, info: 2 } as const;

function renderDiagnosis(ds: Diagnosis[], c: ChalkInstance): string[] {
  const out = [c.bold('Diagnosis')];
  for (const d of ds) {
    const col = d.severity === 'error' ? c.red : d.severity === 'warning' ? c.yellow : c.dim;
    const where = [d.lg !== undefined && !d.link ? `LG${d.lg}` : '', d.link ?? '', d.conn !== undefined ? `conn ${d.conn}` : ''].filter(Boolean).join(' ');
    const ev = d.frames.count > 1 || d.frames.first !== d.frames.last ? `frames ${d.frames.first}–${d.frames.last}, ${d.frames.count}×` : `frame ${d.frames.first}`;
    out.push(`  ${col(d.severity.padEnd(7))} ${c.bold(d.code)}${where ? ` [${where}]` : ''} (${ev})`);
    out.push(`          ${d.message}`);
  }
  return out;
}

export function renderSummary(t: Tracker, c: ChalkInstance): string {
  const out: string[] = [];
  const span = t.firstTs !== undefined ? ms(t.lastTs - t.firstTs) : '0';
  out.push(c.bold(`${t.frames} frames over ${span}: ${t.tcp.length} TCP connection(s), ${t.groups.length} link group(s), ${t.anomalies.length} anomal${t.anomalies.length === 1 ? 'y' : 'ies'}`));
  const diag = diagnose(t);
  const wrong = diag.some((d) => SEV_ORDER[d.severity] < 2);
  // Something wrong: the diagnosis comes first; only notes: after the tables.
  if (wrong) out.push('', ...renderDiagnosis(diag, c));

  if (t.groups.length > 0) {
    out.push('', c.bold('Link groups'));
    const lt = table(['LG', 'client peer (host)', 'server peer (host)', 'ver', 'UEID', 'max links/conns', 'links', 'conns', 'type', 'state'], c);
    for (const g of t.groups) {
      lt.push([
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
      ]);
    }
    out.push(lt.toString());

    out.push('', c.bold('Links'));
    const kt = table(['link', 'client QP', 'server QP', 'MTU', 'uid', 'state', 'pkts c>s / s>c', 'payload c>s / s>c', 'retx', 'PSN gaps', 'NAK', 'RNR'], c);
    for (const g of t.groups) {
      for (const l of g.links) {
        kt.push([
          l.name, qp(l.ends[0]), qp(l.ends[1]), l.mtu ? String(l.mtu) : '?', l.uid !== undefined ? hex32(l.uid) : '?', l.state,
          `${l.packets[0]} / ${l.packets[1]}`, `${l.bytes[0]} / ${l.bytes[1]}`,
          String(l.retransmits), String(l.psnGaps), String(l.naks), String(l.rnrNaks),
        ]);
      }
    }
    out.push(kt.toString());
  }

  if (t.tcp.length > 0) {
    out.push('', c.bold('Connections'));
    const ct = table(['#', 'client → server', 'mode', 'LG', 'tokens c/s', 'rkeys c/s', 'RMBE c/s', 'bytes c>s / s>c', 'wblk', 'close'], c);
    for (const x of t.tcp) {
      const s = x.smc;
      const ends = `${x.client.ip}:${x.client.port} → ${x.server.ip}:${x.server.port}`;
      if (!s) {
        ct.push([String(x.index), ends, x.mode, '-', '-', '-', '-', `${x.tcpBytes[0]} / ${x.tcpBytes[1]} (TCP)`, '-', x.closed ? 'closed' : 'open']);
        continue;
      }
      const [cl, sv] = s.sides;
      ct.push([
        String(x.index), ends, c.green(x.mode), `LG${s.lg.id}`,
        `${hx(cl.token)}/${hx(sv.token)}`, `${hx(cl.rkey)}/${hx(sv.rkey)}`,
        `${cl.rmbeSize ? fmtSize(cl.rmbeSize) : '?'}/${sv.rmbeSize ? fmtSize(sv.rmbeSize) : '?'}`,
        `${s.dirs[0].prodLinear} / ${s.dirs[1].prodLinear}`,
        `${s.dirs[0].writerBlocked}/${s.dirs[1].writerBlocked}`, closeState(s),
      ]);
    }
    for (const s of t.orphanConns) {
      ct.push([`?${-s.index}`, `${s.sides[0].gid} ↔ ${s.sides[1].gid}`, 'smc-r (mid-stream)', `LG${s.lg.id}`,
        `${hx(s.sides[0].token)}/${hx(s.sides[1].token)}`, '?', '?', `≥${s.dirs[0].prodLinear} / ≥${s.dirs[1].prodLinear}`,
        `${s.dirs[0].writerBlocked}/${s.dirs[1].writerBlocked}`, closeState(s)]);
    }
    out.push(ct.toString());

    out.push('', c.bold('Handshakes'));
    for (const x of t.tcp) out.push(`  #${x.index} ${timeline(connSteps(x))}`);
    const fb = t.tcp.filter((x) => x.why && x.mode !== 'smc-r');
    if (fb.length > 0) {
      out.push('', c.bold('Not SMC-R'));
      for (const x of fb) out.push(`  #${x.index} ${x.mode}: ${x.why}`);
    }
  }

  if (t.otherRoce.size > 0) {
    out.push('', c.bold('RoCE traffic, not SMC-R'));
    for (const f of t.otherRoce.values()) out.push(`  ${f.src} → ${f.dst} QP 0x${f.qpn.toString(16)}: ${f.packets} ${f.transport} packets, ${f.bytes} bytes (frames ${f.first}–${f.last})`);
  }

  const events = t.groups.flatMap((g) => g.events.filter((e) => e.what !== 'link-added' || e.frame !== g.firstFrame));
  if (events.length > 0) {
    out.push('', c.bold('Link group events'));
    for (const e of events.sort((a, b) => a.frame - b.frame)) out.push(`  #${e.frame} ${e.what.padEnd(16)} ${e.text}`);
  }

  if (!wrong && diag.length > 0) out.push('', ...renderDiagnosis(diag, c));

  if (t.anomalies.length > 0) {
    out.push('', c.bold('Anomalies'));
    const byCode = new Map<string, { n: number; sev: string; first: number; msg: string }>();
    for (const a of t.anomalies) {
      const e = byCode.get(a.code);
      if (e) e.n++;
      else byCode.set(a.code, { n: 1, sev: a.severity, first: a.frame, msg: a.message });
    }
    for (const [code, e] of byCode) {
      const col = e.sev === 'error' ? c.red : e.sev === 'warn' ? c.yellow : c.dim;
      out.push(`  ${col(e.sev.padEnd(5))} ${code} ×${e.n} (first #${e.first}): ${e.msg}`);
    }
  }
  return out.join('\n');
}

function hx(v: number | undefined): string { return v === undefined ? '?' : '0x' + v.toString(16); }

/** The tracked state as plain JSON (no back-references), for `--summary --json`. */
export function summaryJson(t: Tracker): unknown {
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
    diagnosis: diagnose(t),
    linkGroups: t.groups.map((g) => ({
      id: g.id, complete: g.complete, clientPeer: g.clientPeer, serverPeer: g.serverPeer, clientHost: g.clientHost, serverHost: g.serverHost,
      version: g.version, release: g.release, ueid: g.ueid, maxLinks: g.maxLinks, maxConns: g.maxConns, state: g.state,
      types: g.types, events: g.events,
      links: g.links.map((l) => ({
        name: l.name, id: l.id, uid: l.uid, ends: l.ends, mtu: l.mtu, state: l.state, packets: l.packets, bytes: l.bytes,
        retransmits: l.retransmits, psnGaps: l.psnGaps, naks: l.naks, rnrNaks: l.rnrNaks, deleted: l.deleted, lost: l.lost,
        testLinkUnanswered: l.testLinkUnanswered,
      })),
      connections: g.conns.map((s) => s.index),
    })),
    otherRoce: [...t.otherRoce.values()],
    connections: t.tcp.map((x) => ({
      index: x.index, client: x.client, server: x.server, mode: x.mode, why: x.why, fallbackCode: x.fallbackCode,
      synSmc: x.synSmc, synAckSmc: x.synAckSmc, tcpBytes: x.tcpBytes, timeline: connSteps(x), smc: x.smc ? conn(x.smc) : undefined,
    })),
    midStreamConnections: t.orphanConns.map(conn),
    anomalies: t.anomalies,
  };
}
