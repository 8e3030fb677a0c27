// Per-direction TCP reassembly that finds CLC messages by their eyecatcher on ANY port.
//
// CLC messages open the TCP stream of an SMC connection (Proposal, Accept, Confirm, Decline)
// and are cut by their Length field, not by segments: a message may span segments, a segment
// may hold several messages, segments may be retransmitted or arrive out of order. Once a
// direction carries bytes that are not a CLC message at a message boundary, it is application
// data (plain TCP or fallback) and we stop buffering it, so memory stays bounded by the small
// CLC phase, not by the stream.

import { clcMessageLength, couldStartClc, CLC_HEADER_LEN } from './wire/clc.js';

/** A CLC message completed by a segment: bytes copied out of the stream (it may span segments). */
export interface ClcChunk {
  bytes: Uint8Array;
  /** Frame indexes (1-based capture numbers) that carried bytes of this message, in stream order. */
  frames: number[];
  /** Offset of the message's first byte within this frame's TCP payload, or -1 when it began in an earlier frame. */
  offsetInFrame: number;
}

export type SegmentRole =
  | 'clc'            // this segment completed (or wholly carries) one or more CLC messages
  | 'clc-part'       // bytes of a CLC message that completes in a later segment
  | 'retransmission' // every byte was already seen
  | 'out-of-order'   // held until the gap before it is filled
  | 'data'           // application payload (not CLC)
  | 'none';          // no payload

export interface SegmentResult {
  role: SegmentRole;
  /** Messages completed by this segment (also those completed by held segments it released).
   *  `bytes` of a message wholly inside this segment is a view of the frame: decode it now. */
  messages: readonly ClcChunk[];
}

const MAX_HELD_SEGMENTS = 64;
/** Slots of the direction-key cache (a power of two). */
const KEY_SLOTS = 1024;
const EMPTY = new Uint8Array(0);
/** CLC lengths are u16; a direction holding more than this without completing a message is not CLC. */
const MAX_PENDING = 65536 + 8;

interface Held { seq: number; data: Uint8Array; frame: number }

interface Direction {
  next: number | undefined;     // next expected sequence number (32-bit, wraps)
  mode: 'clc' | 'data';
  pending: Uint8Array | undefined; // bytes of an incomplete message
  pendingFrames: number[];
  held: Held[];
}

function seqLt(a: number, b: number): boolean { return ((a - b) | 0) < 0; }
function seqDiff(a: number, b: number): number { return (a - b) | 0; }

/** What a segment that changes no direction's state gets (shared: callers only read it). */
const NONE: SegmentResult = Object.freeze({ role: 'none', messages: Object.freeze([]) });
const DATA: SegmentResult = Object.freeze({ role: 'data', messages: Object.freeze([]) });
const RETRANSMISSION: SegmentResult = Object.freeze({ role: 'retransmission', messages: Object.freeze([]) });
const OUT_OF_ORDER: SegmentResult = Object.freeze({ role: 'out-of-order', messages: Object.freeze([]) });

export class ClcStreams {
  private readonly dirs = new Map<string, Direction>();

  /** Number of directions tracked (for tests / memory checks). */
  get size(): number { return this.dirs.size; }

  /**
   * Feed one TCP segment in capture order: the direction src.sport > dst.dport, its payload
   * b[from, to). A pure ACK (no payload, no SYN, FIN or RST: most segments) changes nothing and
   * is answered without the direction's key string or a payload view.
   * @param frame capture frame number, to record where message bytes came from
   */
  segment(src: string, sport: number, dst: string, dport: number, seq: number, syn: boolean, fin: boolean, rst: boolean, b: Uint8Array, from: number, to: number, frame: number): SegmentResult {
    const len = to > from ? to - from : 0;
    if (len === 0 && !syn && !fin && !rst) return NONE;
    return this.segmentOf(this.keyOf(src, sport, dst, dport), seq, syn, fin, rst, len === 0 ? EMPTY : b.subarray(from, to), frame);
  }

  // The direction's key string, from a small direct-mapped cache by ports and addresses: the
  // segments of a connection get the same string object, whose hash V8 keeps, instead of a
  // fresh concatenation to flatten and hash per segment (a CLC phase is several segments each
  // way). The addresses are the decoder's cached strings, so the compares are mostly identity.
  private readonly keySrc: (string | undefined)[] = new Array<string | undefined>(KEY_SLOTS).fill(undefined);
  private readonly keyDst: (string | undefined)[] = new Array<string | undefined>(KEY_SLOTS).fill(undefined);
  private readonly keyPorts = new Int32Array(KEY_SLOTS);
  private readonly keys: string[] = new Array<string>(KEY_SLOTS).fill('');

  private keyOf(src: string, sport: number, dst: string, dport: number): string {
    const ports = (sport << 16) | dport;
    const slot = (ports ^ (ports >>> 11) ^ (sport >>> 5)) & (KEY_SLOTS - 1);
    if (this.keyPorts[slot] === ports && this.keySrc[slot] === src && this.keyDst[slot] === dst) return this.keys[slot]!;
    const key = `${src}.${sport}>${dst}.${dport}`;
    this.keyPorts[slot] = ports; this.keySrc[slot] = src; this.keyDst[slot] = dst; this.keys[slot] = key;
    return key;
  }

  /** segment() of the direction `key` with its payload as a view. */
  private segmentOf(key: string, seq: number, syn: boolean, fin: boolean, rst: boolean, payload: Uint8Array, frame: number): SegmentResult {
    let d = this.dirs.get(key);
    if (syn) {
      // A (new) connection: stream starts at ISN + 1 and is CLC-capable until proven otherwise.
      d = { next: (seq + 1) >>> 0, mode: 'clc', pending: undefined, pendingFrames: [], held: [] };
      this.dirs.set(key, d);
      if (payload.length === 0) return NONE;
      seq = (seq + 1) >>> 0; // data on a SYN (TFO) follows the ISN
    }
    if (rst) { this.dirs.delete(key); return payload.length ? DATA : NONE; }
    if (payload.length === 0) {
      if (fin) this.dirs.delete(key);
      return NONE;
    }
    if (!d) {
      // Capture began mid-connection: a segment starting with a CLC header starts tracking.
      if (clcMessageLength(payload) === undefined) return DATA;
      d = { next: seq, mode: 'clc', pending: undefined, pendingFrames: [], held: [] };
      this.dirs.set(key, d);
    }
    if (d.mode === 'data') return DATA;
    const next = d.next ?? seq;
    const end = (seq + payload.length) >>> 0;
    if (!seqLt(next, end)) return RETRANSMISSION;
    if (seqLt(next, seq)) {
      // Gap: hold until the missing bytes arrive (bounded).
      if (d.held.length < MAX_HELD_SEGMENTS) d.held.push({ seq, data: payload.slice(), frame });
      else d.mode = 'data';
      return OUT_OF_ORDER;
    }
    // Trim bytes already seen (partial retransmission).
    const fresh = seqDiff(next, seq) > 0 ? payload.subarray(seqDiff(next, seq)) : payload;
    const startOffset = payload.length - fresh.length;
    const out: ClcChunk[] = [];
    let role: SegmentRole = this.consume(d, fresh, frame, startOffset, out);
    d.next = end;
    // Deliver held segments that are now in order.
    let progressed = true;
    while (progressed && d.held.length > 0 && d.mode === 'clc') {
      progressed = false;
      for (let i = 0; i < d.held.length; i++) {
        const h = d.held[i]!;
        const hEnd = (h.seq + h.data.length) >>> 0;
        if (!seqLt(d.next, hEnd)) { d.held.splice(i, 1); i--; continue; }
        if (seqLt(d.next, h.seq)) continue;
        d.held.splice(i, 1);
        this.consume(d, h.data.subarray(seqDiff(d.next, h.seq)), h.frame, -1, out);
        d.next = hEnd;
        progressed = true;
        break;
      }
    }
    if (out.length > 0) role = 'clc';
    if (fin && !d.pending) this.dirs.delete(key);
    return { role, messages: out };
  }

  private consume(d: Direction, bytes: Uint8Array, frame: number, startOffset: number, out: ClcChunk[]): SegmentRole {
    let pos = 0;
    let role: SegmentRole = 'data';
    while (pos < bytes.length && d.mode === 'clc') {
      if (d.pending) {
        // Append to the incomplete message, then see whether it is complete.
        const merged = new Uint8Array(d.pending.length + (bytes.length - pos));
        merged.set(d.pending, 0);
        merged.set(bytes.subarray(pos), d.pending.length);
        if (!d.pendingFrames.includes(frame)) d.pendingFrames.push(frame);
        const len = clcMessageLength(merged);
        if (merged.length < CLC_HEADER_LEN) { d.pending = merged; return 'clc-part'; }
        if (len === undefined) { d.mode = 'data'; d.pending = undefined; return 'data'; }
        if (merged.length < len) {
          if (merged.length > MAX_PENDING) { d.mode = 'data'; d.pending = undefined; return 'data'; }
          d.pending = merged;
          return 'clc-part';
        }
        const used = len - d.pending.length;
        out.push({ bytes: merged.slice(0, len), frames: d.pendingFrames, offsetInFrame: -1 });
        d.pending = undefined;
        d.pendingFrames = [];
        pos += used;
        role = 'clc';
        continue;
      }
      const rest = bytes.subarray(pos);
      if (rest.length < CLC_HEADER_LEN) {
        // Too short to judge: could be the start of a header split across segments.
        if (couldStartClc(rest)) { d.pending = rest.slice(); d.pendingFrames = [frame]; return role === 'clc' ? 'clc' : 'clc-part'; }
        d.mode = 'data';
        return role;
      }
      const len = clcMessageLength(rest);
      if (len === undefined) { d.mode = 'data'; return role; }
      if (rest.length < len) {
        d.pending = rest.slice();
        d.pendingFrames = [frame];
        return role === 'clc' ? 'clc' : 'clc-part';
      }
      out.push({ bytes: rest.subarray(0, len), frames: [frame], offsetInFrame: startOffset >= 0 ? startOffset + pos : -1 });
      pos += len;
      role = 'clc';
    }
    return role;
  }
}

