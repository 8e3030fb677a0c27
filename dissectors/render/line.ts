// One line per frame, tcpdump-style, whose summary speaks SMC. Renderers only print.

import type { ChalkInstance } from 'chalk';
import type { DecodedFrame } from '../frame.js';
import type { FrameNote } from '../tracker/model.js';
import { summarizeTcp } from '../net/tcp.js';
import { summarizeIb } from '../wire/ib.js';

export interface LineOptions {
  chalk: ChalkInstance;
  /** The time column as TimeColumn made it ('' = none, -t). */
  time: string;
  /** tcpdump -e: the link-level header text, ending in ": ". */
  link?: string | undefined;
  /** Relative TCP sequence numbers (tcpdump's default): this frame's bases. */
  seq?: { seqBase: number; ackBase: number } | undefined;
  /** The frame-number column (default on). */
  number?: boolean;
}

const PAD6 = '      ';

export function renderLine(d: DecodedFrame, o: LineOptions, note?: FrameNote): string {
  let s = '';
  if (o.number !== false) {
    const num = String(d.n);
    s = (num.length < 6 ? PAD6.slice(num.length) : '') + num + ' ';
  }
  if (o.time) s += o.time + ' ';
  return s + renderLineRest(d, o, note);
}

/** The line after the number and time columns (for a caller that writes those itself). */
export function renderLineRest(d: DecodedFrame, o: LineOptions, note?: FrameNote): string {
  const c = o.chalk;
  let s = (o.link ?? '') + body(d, c, o.seq, o.link !== undefined && o.link !== '');
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

function body(d: DecodedFrame, c: ChalkInstance, seq: LineOptions['seq'], withLink: boolean): string {
  const ip = d.ip;
  if (d.tcp && ip) {
    const ends = `${ip.src}.${d.tcp.srcPort} > ${ip.dst}.${d.tcp.dstPort}:`;
    const clc = d.smc.filter((i) => i.proto === 'clc');
    if (clc.length > 0) return `${ends} ${clc.map((i) => c.cyan(i.summary)).join(' ; ')}`;
    let tail = '';
    if (d.tcpRole === 'clc-part') tail = c.cyan(' [CLC segment, reassembled later]');
    else if (d.tcpRole === 'out-of-order') tail = c.yellow(' [out of order]');
    else if (d.tcpRole === 'retransmission') tail = c.yellow(' [retransmission]');
    const tcp = summarizeTcp(d.tcp, d.payloadLength, seq);
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
  // with -e the link header already said who and what
  if (withLink) return (d.eth?.ethertype ?? d.link?.protocol) === 0x0806 ? 'ARP' : 'not decoded';
  if (d.eth) return `${d.eth.src} > ${d.eth.dst}, ethertype 0x${d.eth.ethertype.toString(16).padStart(4, '0')}, length ${d.origlen}`;
  return `link type ${d.linktype}, length ${d.origlen}`;
}
