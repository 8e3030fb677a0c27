// One line per frame, tcpdump-style, whose summary speaks SMC. Renderers only print.

import type { ChalkInstance } from 'chalk';
import type { DecodedFrame } from '../frame.js';
import type { FrameNote } from '../tracker/model.js';
import { summarizeTcp, writeTcpSummary } from '../net/tcp.js';
import type { TcpHeader } from '../net/tcp.js';
import { IB_OP, type IbPacket, IB_LINE_OTHER, ibLineShape, writeIbLineHead, writeIbLineTail, writeIbSummary } from '../wire/ib.js';
import { summarizeCdc, writeCdcSummary } from '../wire/cdc.js';
import { summarizeClc, writeClcSummary } from '../wire/clc.js';
import { summarizeLlc, writeLlcSummary } from '../wire/llc.js';
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
  const h = d.tcp;
  if (h && ip && !c) {
    // no colour: the segment's line goes into the sink piece by piece (the text the coloured
    // path below builds as strings); an SMC item's summary is written from its value (the
    // decoder may have made none: smcdump's one-line replay asks it for none)
    writeTcpEnds(s, ip.src, ip.dst, h);
    if (hasClc(d)) { writeClcItems(s, d); return; }
    writeTcpSummary(s, h, d.payloadLength, seq);
    s.text(d.tcpRole === 'clc-part' ? ' [CLC segment, reassembled later]' : d.tcpRole === 'out-of-order' ? ' [out of order]' : d.tcpRole === 'retransmission' ? ' [retransmission]' : '');
    return;
  }
  if (h && ip) {
    const ends = `${ip.src}.${h.srcPort} > ${ip.dst}.${h.dstPort}:`;
    const clc: string[] = [];
    for (const i of d.smc) if (i.proto === 'clc') clc.push(paint(c, 'cyan', summarizeClc(i.value)));
    if (clc.length > 0) { s.text(`${ends} ${clc.join(' ; ')}`); return; }
    let tail = '';
    if (d.tcpRole === 'clc-part') tail = paint(c, 'cyan', ' [CLC segment, reassembled later]');
    else if (d.tcpRole === 'out-of-order') tail = paint(c, 'yellow', ' [out of order]');
    else if (d.tcpRole === 'retransmission') tail = paint(c, 'yellow', ' [retransmission]');
    const tcp = summarizeTcp(h, d.payloadLength, seq);
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
    if (c) {
      for (const i of d.smc) {
        if (i.proto === 'llc') { s.text(' | '); s.text(paint(c, 'magenta', summarizeLlc(i.value))); }
        else if (i.proto === 'cdc') { s.text(' | '); s.text(paint(c, 'blue', summarizeCdc(i.value))); }
      }
    } else writeSendItems(s, d);
    if (roce.icrc === 'bad') s.text(' ' + paint(c, 'red', '[bad ICRC]'));
    return;
  }
  s.text(other(d, ip, withLink));
}

/** `10.0.0.1.32976 > 10.0.0.3.12345: `: a TCP line's start (also the bytes CachedLine keeps per flow). */
function writeTcpEnds(s: TextSink, src: string, dst: string, h: TcpHeader): void {
  s.text(src); s.text('.'); s.dec(h.srcPort); s.text(' > '); s.text(dst); s.text('.'); s.dec(h.dstPort); s.text(': ');
}

function hasClc(d: DecodedFrame): boolean {
  const smc = d.smc;
  for (let i = 0; i < smc.length; i++) if (smc[i]!.proto === 'clc') return true;
  return false;
}

/** The segment's CLC messages, ` ; ` between them. */
function writeClcItems(s: TextSink, d: DecodedFrame): void {
  let first = true;
  for (const i of d.smc) {
    if (i.proto !== 'clc') continue;
    if (!first) s.text(' ; ');
    first = false;
    writeClcSummary(s, i.value);
  }
}

/** A SEND's LLC or CDC message (the only items a RoCE frame has): ` | ` and its summary. */
function writeSendItems(s: TextSink, d: DecodedFrame): void {
  for (const i of d.smc) {
    if (i.proto === 'llc') { s.text(' | '); writeLlcSummary(s, i.value); }
    else if (i.proto === 'cdc') { s.text(' | '); writeCdcSummary(s, i.value); }
  }
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

/**
 * What a cache slot's bytes are built in: the general renderer's pieces written as bytes (no
 * string and no TextEncoder call per miss: on a capture of many connections every new one
 * misses), then copied out.
 */
class ByteBuilder implements LineSink {
  private buf = new Uint8Array(256);
  private n = 0;
  reset(): this { this.n = 0; return this; }
  text(s: string): void {
    this.room(s.length * 3);
    const b = this.buf;
    let p = this.n;
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i);
      if (c > 127) { p += utf8.encodeInto(s.slice(i), b.subarray(p)).written; break; }
      b[p++] = c;
    }
    this.n = p;
  }
  // digits written in place: String(n) of a number V8 has not cached goes to the runtime
  // (~1 µs a call measured here), and every new connection misses with new numbers
  dec(n: number): void { this.digits(n, 10); }
  int(n: number): void { this.digits(n, 10); }
  hex(n: number): void { this.text('0x'); this.digits(n >>> 0, 16); }
  bytes(src: Uint8Array): void { this.room(src.length); this.buf.set(src, this.n); this.n += src.length; }
  /** The bytes written since reset(), as their own array (EMPTY when none). */
  take(): Uint8Array { return this.n === 0 ? EMPTY : this.buf.slice(0, this.n); }
  /** n (an integer, 0 <= n < 2^53) in base 10 or 16, lower-case, as String(n) / toString(16). */
  private digits(n: number, base: number): void {
    if (!(n >= 0 && n <= Number.MAX_SAFE_INTEGER && Math.floor(n) === n)) { this.text(n.toString(base)); return; }
    let len = 1;
    for (let x = Math.floor(n / base); x > 0; x = Math.floor(x / base)) len++;
    this.room(len);
    const b = this.buf;
    let p = this.n + len;
    this.n = p;
    let x = n;
    do { const d = x % base; b[--p] = d < 10 ? 48 + d : 87 + d; x = Math.floor(x / base); } while (x > 0);
  }
  private room(k: number): void {
    if (this.n + k <= this.buf.length) return;
    const b = new Uint8Array(Math.max(2 * this.buf.length, this.n + k));
    b.set(this.buf.subarray(0, this.n));
    this.buf = b;
  }
}

/** `10.0.0.1 > 10.0.0.2: RoCEv2 RDMA WRITE MIDDLE QP 0x11 psn ` as bytes, and what it depends on. */
interface Head { src: string; dst: string; version: number; opcode: number; qp: number; shape: number; bytes: Uint8Array }
/** `10.0.0.1.32976 > 10.0.0.3.12345: ` as bytes, and what it depends on. */
interface Ends { src: string; dst: string; sp: number; dp: number; bytes: Uint8Array }
/** A note's ` [LG1/L1 c2 c>s]` as bytes (empty: the note shows nothing), and what it depends on. */
interface Tags { link: string | undefined; conn: number | undefined; dir: string | undefined; mode: string | undefined; bytes: Uint8Array }

const ROLE_CLC_PART = utf8.encode(' [CLC segment, reassembled later]');
const ROLE_OUT_OF_ORDER = utf8.encode(' [out of order]');
const ROLE_RETRANSMISSION = utf8.encode(' [retransmission]');

/** An RC RDMA WRITE FIRST or ONLY with its RETH and nothing else of note (no SE/FECN/BECN):
 *  the other line CachedLine writes for RoCE (the first packet of every RDMA write). */
function rethPlain(p: IbPacket): boolean {
  const b = p.bth;
  return (b.opcode === IB_OP.RDMA_WRITE_ONLY || b.opcode === IB_OP.RDMA_WRITE_FIRST) && p.reth !== undefined && !b.se && !b.fecn && !b.becn
    && !p.aeth && !p.rdeth && !p.deth && !p.xrceth && !p.feth && !p.atomicEth && !p.atomicAckEth && p.immDt === undefined && p.ieth === undefined;
}

/** A string's length and last two characters mixed (a slot index's part; full compare on hit). */
function tail2(s: string): number {
  const n = s.length;
  return n < 2 ? n : (n << 10) ^ (s.charCodeAt(n - 1) << 5) ^ s.charCodeAt(n - 2);
}

/**
 * writeLineRest() without colour and without -e, for the lines that make up most of a capture:
 * a RoCE packet over IP of a common shape (wire/ib.ts ibLineShape: RDMA WRITE/SEND with their
 * length, ACK) and a TCP segment (its flags, numbers and options, or
 * its CLC messages), with no issue and no anomaly. Such a line is the same text as the one
 * before it on the same QP or flow but for its numbers, so the stable parts (the addresses and
 * the packet's head, the tracker's tags) are kept as bytes, made once by the general renderer's
 * own functions, and copied in whole; the numbers (and an SMC message's summary, from its
 * value) are written per frame. Small direct-mapped caches (a miss rebuilds the slot), so
 * memory stays constant.
 */
export class CachedLine {
  private readonly heads = new Array<Head | undefined>(SLOTS).fill(undefined);
  private readonly ends = new Array<Ends | undefined>(SLOTS).fill(undefined);
  private readonly tags = new Array<Tags | undefined>(SLOTS).fill(undefined);
  private readonly sink = new ByteBuilder();

  /** Write d's line after the number and time columns, as writeLineRest() with neither colour
   *  nor -e would (`seq`: LineOptions.seq); false (and nothing written) when d is not one of the
   *  lines it caches. */
  write(out: LineSink, d: DecodedFrame, note: FrameNote | undefined, seq?: LineOptions['seq']): boolean {
    const ip = d.ip;
    if (ip === undefined || d.issues.length !== 0) return false;
    if (note !== undefined && note.anomalies.length !== 0) return false;
    const tcp = d.tcp;
    if (tcp !== undefined) return this.tcpLine(out, d, tcp, ip.src, ip.dst, note, seq);
    const roce = d.roce;
    if (roce === undefined || roce.icrc === 'bad') return false;
    const p = roce.ib;
    const shape = ibLineShape(p);
    if (shape === IB_LINE_OTHER) return d.smc.length === 0 && rethPlain(p) && this.rethLine(out, ip.src, ip.dst, roce.version, p, note);
    const t = note === undefined ? EMPTY : this.tagBytes(note);
    out.bytes(this.head(ip.src, ip.dst, roce.version, p, shape));
    out.int(p.bth.psn);
    writeIbLineTail(out, p, shape);
    // a SEND's LLC or CDC message, as body() writes them
    if (d.smc.length !== 0) writeSendItems(out, d);
    if (t.length !== 0) out.bytes(t);
    return true;
  }

  /** An RDMA WRITE FIRST/ONLY (rethPlain), as wire/ib.ts writeIbSummary writes it: the head
   *  (the same bytes as the common shapes' head), the PSN, `va 0x… rkey 0x… len N`. */
  private rethLine(out: LineSink, src: string, dst: string, version: number, p: IbPacket, note: FrameNote | undefined): boolean {
    const t = note === undefined ? EMPTY : this.tagBytes(note);
    const r = p.reth!;
    out.bytes(this.head(src, dst, version, p, IB_LINE_OTHER));
    out.int(p.bth.psn);
    out.text(' va 0x'); out.text(r.va.toString(16));
    out.text(' rkey '); out.hex(r.rkey);
    if (r.dmaLen !== p.payload.length) { out.text(' dmalen '); out.int(r.dmaLen); }
    out.text(' len '); out.int(p.payload.length);
    if (t.length !== 0) out.bytes(t);
    return true;
  }

  /** A TCP segment's line, as body() writes it without colour. */
  private tcpLine(out: LineSink, d: DecodedFrame, h: TcpHeader, src: string, dst: string, note: FrameNote | undefined, seq: LineOptions['seq']): boolean {
    const clc = hasClc(d);
    const t = note === undefined ? EMPTY : this.tagBytes(note);
    out.bytes(this.flowEnds(src, dst, h));
    if (clc) writeClcItems(out, d);
    else {
      writeTcpSummary(out, h, d.payloadLength, seq); // (no addresses in seq: flowEnds wrote them)
      const role = d.tcpRole;
      if (role === 'clc-part') out.bytes(ROLE_CLC_PART);
      else if (role === 'out-of-order') out.bytes(ROLE_OUT_OF_ORDER);
      else if (role === 'retransmission') out.bytes(ROLE_RETRANSMISSION);
    }
    if (t.length !== 0) out.bytes(t);
    return true;
  }

  private head(src: string, dst: string, version: number, p: IbPacket, shape: number): Uint8Array {
    const opcode = p.bth.opcode;
    const qp = p.bth.destQp;
    const slot = (qp ^ (qp >>> 8) ^ (opcode << 3) ^ tail2(src) ^ (tail2(dst) << 3)) & (SLOTS - 1);
    const h = this.heads[slot];
    if (h !== undefined && h.qp === qp && h.opcode === opcode && h.shape === shape && h.src === src && h.dst === dst && h.version === version) return h.bytes;
    // made by the general renderer's pieces (body() and wire/ib.ts), so the text is theirs
    const s = this.sink.reset();
    s.text(src); s.text(' > '); s.text(dst); s.text(':');
    s.text(version === 2 ? ' RoCEv2 ' : ' RoCEv1 ');
    writeIbLineHead(s, p, shape);
    const bytes = s.take();
    this.heads[slot] = { src, dst, version, opcode, qp, shape, bytes };
    return bytes;
  }

  private flowEnds(src: string, dst: string, h: TcpHeader): Uint8Array {
    const sp = h.srcPort, dp = h.dstPort;
    const slot = (sp ^ (sp >>> 8) ^ (dp << 1) ^ (dp >>> 7) ^ tail2(src) ^ (tail2(dst) << 3)) & (SLOTS - 1);
    const e = this.ends[slot];
    if (e !== undefined && e.sp === sp && e.dp === dp && e.src === src && e.dst === dst) return e.bytes;
    const s = this.sink.reset();
    writeTcpEnds(s, src, dst, h);
    const bytes = s.take();
    this.ends[slot] = { src, dst, sp, dp, bytes };
    return bytes;
  }

  private tagBytes(n: FrameNote): Uint8Array {
    const { link, conn, dir, tcpMode } = n;
    // a connection's frames carry up to five tags (its link's without it, each direction's, the
    // TCP mode's): all in the slot index, so they do not evict each other
    const slot = (((conn ?? 0) << 2) ^ (dir === undefined ? 0 : dir.charCodeAt(0) === 99 ? 1 : 2) ^ (tcpMode === undefined ? 0 : tcpMode.length << 1)
      ^ (link === undefined || link === '' ? 0 : (link.length << 3) ^ (link.charCodeAt(link.length - 1) << 4) ^ (link.charCodeAt(2) << 6))) & (SLOTS - 1);
    const e = this.tags[slot];
    if (e !== undefined && e.conn === conn && e.link === link && e.dir === dir && e.mode === tcpMode) return e.bytes;
    const s = this.sink.reset();
    tags(s, n, undefined);
    const bytes = s.take();
    this.tags[slot] = { link, conn, dir, mode: tcpMode, bytes };
    return bytes;
  }
}
