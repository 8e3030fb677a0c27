// One line per frame, tcpdump-style, whose summary speaks SMC. Renderers only print.

import type { ChalkInstance } from 'chalk';
import type { DecodedFrame } from '../frame.js';
import type { FrameNote } from '../tracker/model.js';
import { summarizeTcp, writeTcpSummary } from '../net/tcp.js';
import { type IbPacket, IB_LINE_OTHER, ibLineShape, writeIbLineHead, writeIbLineTail, writeIbSummary } from '../wire/ib.js';
import { StringSink, type TextSink } from '../wire/common.js';
import { ETHERTYPE } from '../wire/views/net.js';

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
  const s = new StringSink();
  writeLineRest(s, d, o, note);
  return s.s;
}

/** A colour of the line: a chalk style name. */
type Paint = 'dim' | 'red' | 'yellow' | 'cyan' | 'magenta' | 'blue' | 'green';

/** `x` in colour `p`, or as it is without colour (`c` undefined: no chalk call per piece). */
function paint(c: ChalkInstance | undefined, p: Paint, x: string): string { return c ? c[p](x) : x; }

/** What a coloured piece is built in before chalk wraps it (reused: one line at a time). */
const scratch = new StringSink();

/**
 * renderLineRest() written into a sink: smcdump's output buffer takes the pieces as bytes, so
 * the common line (a RoCE packet and its tags, no colour) is never built as a string.
 */
export function writeLineRest(s: TextSink, d: DecodedFrame, o: LineOptions, note?: FrameNote): void {
  const c = o.chalk.level > 0 ? o.chalk : undefined;
  if (o.link !== undefined) s.text(o.link);
  body(s, d, c, o.seq, o.link !== undefined && o.link !== '');
  if (note) tags(s, note, c);
  const issues = d.issues;
  if (issues.length > 0) {
    let worst: Paint = 'dim';
    for (const i of issues) {
      if (i.severity === 'error') { worst = 'red'; break; }
      if (i.severity === 'warn') worst = 'yellow';
    }
    s.text(' ');
    const w = c ? scratch.reset() : s;
    w.text('[');
    w.dec(issues.length);
    w.text(issues.length > 1 ? ' issues: ' : ' issue: ');
    w.text(issues[0]!.code);
    w.text(issues.length > 1 ? ',…]' : ']');
    if (c) s.text(c[worst](scratch.s));
  }
}

/** What the tracker knows: `[LG1/L1 c1 c>s]`, `[c2 fallback]`, then anomalies by code. */
function tags(s: TextSink, n: FrameNote, c: ChalkInstance | undefined): void {
  const mode = n.tcpMode !== undefined && n.link === undefined;
  if ((n.link !== undefined && n.link !== '') || n.conn !== undefined || n.dir !== undefined || mode) {
    s.text(' ');
    const w = c ? scratch.reset() : s;
    w.text('[');
    let first = true;
    if (n.link !== undefined) { w.text(n.link); first = n.link === ''; }
    if (n.conn !== undefined) {
      if (!first) w.text(' ');
      first = false;
      if (n.conn > 0) { w.text('c'); w.dec(n.conn); } else { w.text('c?'); w.dec(-n.conn); }
    }
    if (n.dir !== undefined) { w.text(' '); w.text(n.dir); }
    if (mode) { w.text(' '); w.text(n.tcpMode!); }
    w.text(']');
    if (c) s.text(c.dim(scratch.s));
  }
  for (const a of n.anomalies) {
    s.text(' ');
    if (c) s.text(paint(c, a.severity === 'error' ? 'red' : a.severity === 'warn' ? 'yellow' : 'dim', `{${a.code}}`));
    else { s.text('{'); s.text(a.code); s.text('}'); }
  }
}

function body(s: TextSink, d: DecodedFrame, c: ChalkInstance | undefined, seq: LineOptions['seq'], withLink: boolean): void {
  const ip = d.ip;
  if (d.tcp && ip && !c && !d.smc.some((i) => i.proto === 'clc')) {
    // no colour and no CLC: the segment's line goes into the sink piece by piece (the text the
    // coloured path below builds as strings)
    const h = d.tcp;
    s.text(ip.src); s.text('.'); s.dec(h.srcPort); s.text(' > '); s.text(ip.dst); s.text('.'); s.dec(h.dstPort); s.text(': ');
    writeTcpSummary(s, h, d.payloadLength, seq);
    s.text(d.tcpRole === 'clc-part' ? ' [CLC segment, reassembled later]' : d.tcpRole === 'out-of-order' ? ' [out of order]' : d.tcpRole === 'retransmission' ? ' [retransmission]' : '');
    return;
  }
  if (d.tcp && ip) {
    const ends = `${ip.src}.${d.tcp.srcPort} > ${ip.dst}.${d.tcp.dstPort}:`;
    const clc = d.smc.filter((i) => i.proto === 'clc');
    if (clc.length > 0) { s.text(`${ends} ${clc.map((i) => paint(c, 'cyan', i.summary)).join(' ; ')}`); return; }
    let tail = '';
    if (d.tcpRole === 'clc-part') tail = paint(c, 'cyan', ' [CLC segment, reassembled later]');
    else if (d.tcpRole === 'out-of-order') tail = paint(c, 'yellow', ' [out of order]');
    else if (d.tcpRole === 'retransmission') tail = paint(c, 'yellow', ' [retransmission]');
    const tcp = summarizeTcp(d.tcp, d.payloadLength, seq);
    const opt = d.smc.some((i) => i.proto === 'tcpopt') ? tcp.replace('smc-r', paint(c, 'green', 'smc-r')) : tcp;
    s.text(`${ends} ${opt}${tail}`);
    return;
  }
  const roce = d.roce;
  if (roce) {
    if (ip) { s.text(ip.src); s.text(' > '); s.text(ip.dst); s.text(':'); }
    else if (roce.grh) s.text(`${roce.grh.sgid} > ${roce.grh.dgid}:`);
    s.text(roce.version === 2 ? ' RoCEv2 ' : ' RoCEv1 ');
    writeIbSummary(s, roce.ib);
    for (const i of d.smc) {
      if (i.proto === 'llc') { s.text(' | '); s.text(paint(c, 'magenta', i.summary)); }
      else if (i.proto === 'cdc') { s.text(' | '); s.text(paint(c, 'blue', i.summary)); }
    }
    if (roce.icrc === 'bad') s.text(' ' + paint(c, 'red', '[bad ICRC]'));
    return;
  }
  s.text(other(d, ip, withLink));
}

/** Frames that are neither TCP nor RoCE: UDP, other IP, ARP and the rest. */
function other(d: DecodedFrame, ip: DecodedFrame['ip'], withLink: boolean): string {
  if (d.udp && ip) return `${ip.src}.${d.udp.srcPort} > ${ip.dst}.${d.udp.dstPort}: UDP, length ${d.payloadLength}`;
  if (ip) return `${ip.src} > ${ip.dst}: IPv${ip.version} proto ${ip.version === 4 ? (ip.header as { protocol: number }).protocol : (ip.header as { upperProtocol: number }).upperProtocol}`;
  // with -e the link header already said who and what
  if (withLink) return (d.eth?.ethertype ?? d.link?.protocol) === ETHERTYPE.ARP ? 'ARP' : 'not decoded';
  if (d.eth) return `${d.eth.src} > ${d.eth.dst}, ethertype 0x${d.eth.ethertype.toString(16).padStart(4, '0')}, length ${d.origlen}`;
  return `link type ${d.linktype}, length ${d.origlen}`;
}

/** Where the cached line writes: smcdump's output buffer (cli/output.ts Out). */
export interface LineSink extends TextSink {
  /** Append the digits of `n` (0 <= n < 2^53), as dec(). */
  int(n: number): void;
  /** Append these bytes as they are. */
  bytes(b: Uint8Array): void;
}

const SLOTS = 256;
const EMPTY = new Uint8Array(0);
const utf8 = new TextEncoder();

/** `10.0.0.1 > 10.0.0.2: RoCEv2 RDMA WRITE MIDDLE QP 0x11 psn ` as bytes, and what it depends on. */
interface Head { src: string; dst: string; version: number; opcode: number; qp: number; shape: number; bytes: Uint8Array }
/** A note's ` [LG1/L1 c2 c>s]` as bytes (empty: the note shows nothing), and what it depends on. */
interface Tags { link: string | undefined; conn: number | undefined; dir: string | undefined; mode: string | undefined; bytes: Uint8Array }

/**
 * writeLineRest() without colour and without -e, for the lines that make up most of a capture:
 * a RoCE packet over IP of a common shape (wire/ib.ts ibLineShape: RDMA WRITE/SEND with their
 * length, ACK) with no issue and no anomaly (a SEND's LLC or CDC summary follows as text). Such a line is the same text as the
 * one before it on the same QP but for its numbers, so the stable parts (the addresses and the
 * packet's head, the tracker's tags) are kept as bytes, made once by the general renderer's own
 * functions, and copied in whole; only the PSN and the tail's numbers are written per frame.
 * Small direct-mapped caches (a miss rebuilds the slot), so memory stays constant.
 */
export class CachedLine {
  private readonly heads = new Array<Head | undefined>(SLOTS).fill(undefined);
  private readonly tags = new Array<Tags | undefined>(SLOTS).fill(undefined);
  private readonly sink = new StringSink();

  /** Write d's line after the number and time columns, as writeLineRest() with neither colour
   *  nor -e would; false (and nothing written) when d is not one of the lines it caches. */
  write(out: LineSink, d: DecodedFrame, note: FrameNote | undefined): boolean {
    const roce = d.roce;
    const ip = d.ip;
    if (roce === undefined || ip === undefined || d.tcp !== undefined || d.issues.length !== 0 || roce.icrc === 'bad') return false;
    if (note !== undefined && note.anomalies.length !== 0) return false;
    const p = roce.ib;
    const shape = ibLineShape(p);
    if (shape === IB_LINE_OTHER) return false;
    const t = note === undefined ? EMPTY : this.tagBytes(note);
    out.bytes(this.head(ip.src, ip.dst, roce.version, p, shape));
    out.int(p.bth.psn);
    writeIbLineTail(out, p, shape);
    // a SEND's LLC or CDC message (the only items a RoCE frame has), as body() writes them
    for (const i of d.smc) if (i.proto === 'llc' || i.proto === 'cdc') { out.text(' | '); out.text(i.summary); }
    if (t.length !== 0) out.bytes(t);
    return true;
  }

  private head(src: string, dst: string, version: number, p: IbPacket, shape: number): Uint8Array {
    const opcode = p.bth.opcode;
    const qp = p.bth.destQp;
    const slot = (qp ^ (qp >>> 8) ^ (opcode << 3) ^ src.length ^ (src.charCodeAt(src.length - 1) << 2) ^ (dst.charCodeAt(dst.length - 1) << 5)) & (SLOTS - 1);
    const h = this.heads[slot];
    if (h !== undefined && h.qp === qp && h.opcode === opcode && h.shape === shape && h.src === src && h.dst === dst && h.version === version) return h.bytes;
    // made by the general renderer's pieces (body() and wire/ib.ts), so the text is theirs
    const s = this.sink.reset();
    s.text(src); s.text(' > '); s.text(dst); s.text(':');
    s.text(version === 2 ? ' RoCEv2 ' : ' RoCEv1 ');
    writeIbLineHead(s, p, shape);
    const bytes = utf8.encode(s.s);
    this.heads[slot] = { src, dst, version, opcode, qp, shape, bytes };
    return bytes;
  }

  private tagBytes(n: FrameNote): Uint8Array {
    const { link, conn, dir, tcpMode } = n;
    const slot = ((conn ?? 0) ^ (link === undefined || link === '' ? 0 : (link.length << 3) ^ (link.charCodeAt(link.length - 1) << 5))) & (SLOTS - 1);
    const e = this.tags[slot];
    if (e !== undefined && e.conn === conn && e.link === link && e.dir === dir && e.mode === tcpMode) return e.bytes;
    const s = this.sink.reset();
    tags(s, n, undefined);
    const bytes = s.s === '' ? EMPTY : utf8.encode(s.s);
    this.tags[slot] = { link, conn, dir, mode: tcpMode, bytes };
    return bytes;
  }
}
