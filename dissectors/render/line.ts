// One line per frame, tcpdump-style, whose summary speaks SMC. Renderers only print.

import type { ChalkInstance } from 'chalk';
import type { DecodedFrame } from '../frame.js';
import type { FrameNote } from '../tracker/model.js';
import { summarizeTcp } from '../net/tcp.js';
import { summarizeIb } from '../wire/ib.js';

export type TimeFormat = 'abs' | 'epoch' | 'rel' | 'none';

export interface LineOptions {
  chalk: ChalkInstance;
  time: TimeFormat;
  /** First frame's timestamp, for relative times. */
  t0?: bigint;
}

const PAD6 = '      ';

export function formatTime(tsNs: bigint, fmt: TimeFormat, t0 = 0n): string {
  if (fmt === 'none') return '';
  if (fmt === 'epoch') {
    const s = tsNs / 1_000_000_000n;
    const us = (tsNs % 1_000_000_000n) / 1000n;
    return `${s}.${us.toString().padStart(6, '0')}`;
  }
  if (fmt === 'rel') {
    const d = tsNs - t0;
    const s = d / 1_000_000_000n;
    const us = (d % 1_000_000_000n) / 1000n;
    return `${s}.${(us < 0n ? -us : us).toString().padStart(6, '0')}`;
  }
  // Time of day in UTC, like tcpdump with TZ=UTC: HH:MM:SS.uuuuuu. The HH:MM:SS part is
  // cached per second: frames come in bursts within one second, and bigint math is slow.
  const sec = tsNs / 1_000_000_000n;
  if (sec !== cachedSec) {
    cachedSec = sec;
    const secOfDay = Number(sec % 86400n);
    const hh = Math.floor(secOfDay / 3600), mm = Math.floor((secOfDay % 3600) / 60), ss = secOfDay % 60;
    cachedHms = `${two(hh)}:${two(mm)}:${two(ss)}.`;
  }
  const us = String(Number(tsNs - sec * 1_000_000_000n) / 1000 | 0);
  return cachedHms + (us.length < 6 ? '000000'.slice(us.length) + us : us);
}

let cachedSec = -1n;
let cachedHms = '';

function two(n: number): string { return n < 10 ? '0' + n : String(n); }

export function renderLine(d: DecodedFrame, o: LineOptions, note?: FrameNote): string {
  const c = o.chalk;
  const num = String(d.n);
  let s = (num.length < 6 ? PAD6.slice(num.length) : '') + num;
  const time = formatTime(d.tsNs, o.time, o.t0);
  if (time) s += ' ' + time;
  s += ' ' + body(d, c);
  if (note) s += tags(note, c);
  if (d.issues.length > 0) {
    let worst = 'note';
    for (const i of d.issues) {
      if (i.severity === 'error') { worst = 'error'; break; }
      if (i.severity === 'warn') worst = 'warn';
    }
    const tag = `[${d.issues.length} issue${d.issues.length > 1 ? 's' : ''}: ${d.issues[0]!.code}${d.issues.length > 1 ? ',…' : ''}]`;
    s += ' ' + (worst === 'error' ? c.red(tag) : worst === 'warn' ? c.yellow(tag) : c.dim(tag));
  }
  return s;
}

/** What the tracker knows: `[LG1/L1 c1 c>s]`, `[c2 fallback]`, then anomalies by code. */
function tags(n: FrameNote, c: ChalkInstance): string {
  let t = '';
  if (n.link !== undefined) t += n.link;
  if (n.conn !== undefined) t += (t ? ' ' : '') + (n.conn > 0 ? `c${n.conn}` : `c?${-n.conn}`);
  if (n.dir !== undefined) t += ' ' + n.dir;
  if (n.tcpMode !== undefined && n.link === undefined) t += ' ' + n.tcpMode;
  let s = t ? ' ' + c.dim(`[${t}]`) : '';
  for (const a of n.anomalies) {
    const tag = `{${a.code}}`;
    s += ' ' + (a.severity === 'error' ? c.red(tag) : a.severity === 'warn' ? c.yellow(tag) : c.dim(tag));
  }
  return s;
}

function body(d: DecodedFrame, c: ChalkInstance): string {
  const ip = d.ip;
  if (d.tcp && ip) {
    const ends = `${ip.src}.${d.tcp.srcPort} > ${ip.dst}.${d.tcp.dstPort}:`;
    const clc = d.smc.filter((i) => i.proto === 'clc');
    if (clc.length > 0) return `${ends} ${clc.map((i) => c.cyan(i.summary)).join(' ; ')}`;
    let tail = '';
    if (d.tcpRole === 'clc-part') tail = c.cyan(' [CLC segment, reassembled later]');
    else if (d.tcpRole === 'out-of-order') tail = c.yellow(' [out of order]');
    else if (d.tcpRole === 'retransmission') tail = c.yellow(' [retransmission]');
    const tcp = summarizeTcp(d.tcp, d.payloadLength);
    const opt = d.smc.some((i) => i.proto === 'tcpopt') ? tcp.replace('smc-r', c.green('smc-r')) : tcp;
    return `${ends} ${opt}${tail}`;
  }
  if (d.roce) {
    const where = ip ? `${ip.src} > ${ip.dst}:` : d.roce.grh ? `${d.roce.grh.sgid} > ${d.roce.grh.dgid}:` : '';
    let s = `${where} RoCE${d.roce.version === 2 ? 'v2' : 'v1'} ${summarizeIb(d.roce.ib)}`;
    for (const i of d.smc) {
      if (i.proto === 'llc') s += ' | ' + c.magenta(i.summary);
      else if (i.proto === 'cdc') s += ' | ' + c.blue(i.summary);
    }
    if (d.roce.icrc === 'bad') s += ' ' + c.red('[bad ICRC]');
    return s;
  }
  if (d.udp && ip) return `${ip.src}.${d.udp.srcPort} > ${ip.dst}.${d.udp.dstPort}: UDP, length ${d.payloadLength}`;
  if (ip) return `${ip.src} > ${ip.dst}: IPv${ip.version} proto ${ip.version === 4 ? (ip.header as { protocol: number }).protocol : (ip.header as { upperProtocol: number }).upperProtocol}`;
  if (d.eth) return `${d.eth.src} > ${d.eth.dst}, ethertype 0x${d.eth.ethertype.toString(16).padStart(4, '0')}, length ${d.origlen}`;
  return `link type ${d.linktype}, length ${d.origlen}`;
}
