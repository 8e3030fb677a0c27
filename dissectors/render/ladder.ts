// `--ladder` / `--ladder-svg`: the flow between hosts drawn like RFC 7609's figures — one
// column per host, time on the left, TCP/CLC arrows drawn single, RoCE (LLC/CDC/RDMA) double.
// Bursts (RDMA WRITE segments, TCP data, CDC cursor updates) are folded into one row.

import type { ChalkInstance } from 'chalk';
import type { DecodedFrame } from '../frame.js';
import type { FrameNote } from '../tracker/model.js';
import type { LinkGroup } from '../tracker/model.js';
import { opcodeInfo } from '../wire/ib.js';
import { renderLadderSvg } from './ladder-svg.js';

export interface LadderEvent {
  tsNs: bigint;
  frame: number;
  from: string;
  to: string;
  kind: 'tcp' | 'roce';
  label: string;
  /** Folded rows: how many frames and payload bytes this row stands for. */
  count: number;
  bytes: number;
  fold?: string;
  alert: boolean;
  /** The tracker's link (RoCE frames) and SMC connection index, for colours in the SVG. */
  link?: string;
  conn?: number;
}

const MAX_EVENTS = 5000;

export class Ladder {
  readonly events: LadderEvent[] = [];
  readonly hosts: string[] = [];
  dropped = 0;

  add(d: DecodedFrame, note: FrameNote): void {
    const ip = d.ip;
    const r = d.roce;
    const src = ip?.src ?? r?.grh?.sgid;
    const dst = ip?.dst ?? r?.grh?.dgid;
    if (!src || !dst) return;
    const alert = note.anomalies.some((a) => a.severity !== 'note');
    if (d.tcp) {
      const h = d.tcp;
      const clc = d.smc.filter((i) => i.proto === 'clc');
      if (clc.length > 0) { for (const c of clc) this.push(d, src, dst, 'tcp', c.summary.split(' ').slice(0, 3).join(' '), 0, undefined, alert, note); return; }
      const opt = d.smc.some((i) => i.proto === 'tcpopt') ? ' [smc-r]' : '';
      if (h.flags.syn) return this.push(d, src, dst, 'tcp', (h.flags.ack ? 'SYN-ACK' : 'SYN') + opt, 0, undefined, alert, note);
      if (h.flags.rst) return this.push(d, src, dst, 'tcp', 'RST', 0, undefined, alert, note);
      if (h.flags.fin) return this.push(d, src, dst, 'tcp', 'FIN', 0, undefined, alert, note);
      if (d.payloadLength > 0 && d.tcpRole === 'data') return this.push(d, src, dst, 'tcp', 'TCP data', d.payloadLength, 'tcp-data', alert, note);
      return;
    }
    if (!r) return;
    const info = opcodeInfo(r.ib.bth.opcode);
    if (info.isAck) {
      const a = r.ib.aeth;
      if (a && a.kind !== 'ACK') this.push(d, src, dst, 'roce', a.kind === 'NAK' ? 'NAK' : 'RNR NAK', 0, undefined, true, note);
      return;
    }
    if (note.retransmission) return this.push(d, src, dst, 'roce', 'retransmission', 0, 'retx', alert, note);
    if (info.isWrite) return this.push(d, src, dst, 'roce', 'RDMA WRITE', r.ib.payload.length, 'write', alert, note);
    for (const i of d.smc) {
      if (i.proto === 'llc') this.push(d, src, dst, 'roce', 'LLC ' + i.summary.replace(/^LLC /, '').replace(/ (link|n|qp|data) .*$/, ''), 0, undefined, alert, note);
      else if (i.proto === 'cdc') {
        const f = [i.value.prodFlags.writeBlocked ? 'wb' : '', i.value.connFlags.peerDoneWriting ? 'done' : '', i.value.connFlags.peerConnClosed ? 'closed' : '', i.value.connFlags.peerConnAbort ? 'abort' : ''].filter(Boolean);
        const label = `CDC prod ${i.value.prod.wrap}:${i.value.prod.count} cons ${i.value.cons.wrap}:${i.value.cons.count}${f.length ? ' [' + f.join(',') + ']' : ''}`;
        // Plain cursor updates fold; ones with close/blocked flags stand alone.
        this.push(d, src, dst, 'roce', label, 0, f.length ? undefined : 'cdc', alert, note);
      }
    }
  }

  private push(d: DecodedFrame, from: string, to: string, kind: 'tcp' | 'roce', label: string, bytes: number, fold: string | undefined, alert: boolean, note: FrameNote): void {
    for (const h of [from, to]) if (!this.hosts.includes(h)) this.hosts.push(h);
    const last = this.events[this.events.length - 1];
    if (fold && last && last.fold === fold && last.from === from && last.to === to && !alert && !last.alert && last.conn === note.conn && last.link === note.link) {
      last.count++;
      last.bytes += bytes;
      if (fold === 'cdc') last.label = label; // keep the latest cursor
      return;
    }
    if (this.events.length >= MAX_EVENTS) { this.dropped++; return; }
    const e: LadderEvent = { tsNs: d.tsNs, frame: d.n, from, to, kind, label, count: 1, bytes, alert };
    if (fold) e.fold = fold;
    if (note.link !== undefined && kind === 'roce') e.link = note.link;
    if (note.conn !== undefined) e.conn = note.conn;
    this.events.push(e);
  }

  private text(e: LadderEvent): string {
    return (e.alert ? '! ' : '') + this.bare(e);
  }

  /** A row's label without the alert mark. */
  private bare(e: LadderEvent): string {
    let s = e.label;
    if (e.count > 1) s += e.fold === 'cdc' ? ` (×${e.count}, last)` : ` ×${e.count}`;
    if (e.bytes > 0) s += ` ${e.bytes}B`;
    return s;
  }

  renderText(c: ChalkInstance, colWidth = 44): string {
    const t0 = this.events[0]?.tsNs ?? 0n;
    const hosts = this.hosts;
    const pos = hosts.map((_, i) => 14 + i * colWidth);
    const width = (pos[pos.length - 1] ?? 14) + 2;
    const lines: string[] = [];
    let head = ' time (s)     ';
    for (let i = 0; i < hosts.length; i++) head = head.padEnd(pos[i]! - Math.floor(hosts[i]!.length / 2)) + hosts[i];
    lines.push(c.bold(head));
    for (const e of this.events) {
      const a = hosts.indexOf(e.from), b = hosts.indexOf(e.to);
      const row = new Array<string>(width).fill(' ');
      for (const p of pos) row[p] = '│';
      const lo = Math.min(pos[a]!, pos[b]!), hi = Math.max(pos[a]!, pos[b]!);
      const bar = e.kind === 'tcp' ? '─' : '═';
      for (let x = lo + 1; x < hi; x++) row[x] = bar;
      if (a < b) row[hi - 1] = '>'; else row[lo + 1] = '<';
      const label = ` ${this.text(e)} `;
      const room = hi - lo - 4;
      const fit = label.length > room ? label.slice(0, Math.max(0, room - 1)) + '…' : label;
      const start = lo + 2 + Math.max(0, Math.floor((room - fit.length) / 2));
      for (let i = 0; i < fit.length; i++) row[start + i] = fit[i]!;
      const time = (Number(e.tsNs - t0) / 1e9).toFixed(6).padStart(12);
      let line = `${time}  ${row.join('').slice(2)}`;
      if (fit.length < label.length) line += c.dim(`  ${this.text(e)}`);
      line = e.alert ? c.red(line) : e.kind === 'roce' ? c.magenta(line) : line;
      lines.push(line + c.dim(`  #${e.frame}`));
    }
    if (this.dropped > 0) lines.push(c.dim(`… ${this.dropped} more rows not drawn (limit ${MAX_EVENTS})`));
    return lines.join('\n');
  }

  /**
   * The ladder as SVG (ladder-svg.ts): one lane per host — with the tracker's link groups,
   * the addresses of one side of a group are one host — labels measured and kept off the
   * lifelines, connections and links in colour and dash.
   */
  renderSvg(groups: readonly LinkGroup[] = []): string {
    const rows = this.events.map((e) => ({
      tsNs: e.tsNs, frame: e.frame, from: e.from, to: e.to, kind: e.kind, text: this.bare(e), alert: e.alert,
      ...(e.link !== undefined ? { link: e.link } : {}), ...(e.conn !== undefined ? { conn: e.conn } : {}),
    }));
    return renderLadderSvg(rows, this.hosts, { groups, dropped: this.dropped });
  }
}
