// SMC-R CDC (connection data control) message: formats.md §9.1 (RFC 7609 A.4, Linux smc_cdc),
// The rules over its fields (cursor arithmetic, sequence numbers, window) are cdcrules.ts.
//
// 44 bytes, all big-endian: type 0xFE, length 44, sequence (u16), alert token (u32),
// producer cursor and consumer cursor (reserved u16 · wrap u16 · count u32 each),
// producer flags, connection-state flags, 18 reserved bytes.

import type { Decoded, Issue, TextSink, Tree } from './common.js';
import { hex, hex32, issue, StringSink, writeHexN } from './common.js';
import { CDC_FIELDS, CDC_RESERVED_AT, CdcView } from './views/cdc.js';
import { fieldBits } from './views/field.js';

export const CDC_TYPE = 0xfe;
export const CDC_MSG_SIZE = 44;

/** Flag bits for writers that build the flag bytes whole (the endpoint), from the table. */
export const CDC_PROD_WRITE_BLOCKED = fieldBits(CDC_FIELDS.writeBlocked);
export const CDC_PROD_URG_PENDING = fieldBits(CDC_FIELDS.urgentPending);
export const CDC_PROD_URG_PRESENT = fieldBits(CDC_FIELDS.urgentPresent);
export const CDC_CONN_PEER_DONE_WRITING = fieldBits(CDC_FIELDS.peerDoneWriting);
export const CDC_CONN_PEER_CONN_CLOSED = fieldBits(CDC_FIELDS.peerConnClosed);
export const CDC_CONN_PEER_CONN_ABORT = fieldBits(CDC_FIELDS.peerConnAbort);

/** A ring cursor: wrap sequence + byte offset in the ring. */
export interface CdcCursor {
  wrap: number;
  count: number;
  /** The 2 leading reserved bytes, present only if non-zero. */
  reserved?: number;
}

export interface CdcProducerFlags {
  writeBlocked: boolean;
  urgentPending: boolean;
  urgentPresent: boolean;
  cursorUpdateRequested: boolean;
  failoverValidation: boolean;
  /** Undefined bits (0x07), present only if non-zero. */
  other?: number;
}

export interface CdcConnStateFlags {
  peerDoneWriting: boolean;
  peerConnClosed: boolean;
  peerConnAbort: boolean;
  /** Undefined bits (0x1f), present only if non-zero. */
  other?: number;
}

export interface CdcMessage {
  /** Byte 0, 0xFE. */
  type: number;
  /** Byte 1, 44. */
  length: number;
  seq: number;
  /** The receiver's RMBE alert token. */
  token: number;
  /** How far the sender has written into the receiver's RMBE. */
  prod: CdcCursor;
  /** How far the sender has consumed its own RMBE. */
  cons: CdcCursor;
  prodFlags: CdcProducerFlags;
  connFlags: CdcConnStateFlags;
  /** Bytes 26–43 when any is non-zero (Alibaba kernels put a "credits" byte at 26). */
  reserved?: Uint8Array;
  /** Bytes beyond 44, if any. */
  trailing?: Uint8Array;
}

// Offsets of every field: ./views/cdc.ts. Decode and encode go through one view.
const view = new CdcView();

function cursorOf(wrap: number, count: number, r: number, o: number, issues: Issue[], name: string): CdcCursor {
  const c: CdcCursor = { wrap, count };
  if (r !== 0) {
    c.reserved = r;
    issue(issues, 'warn', 'cdc.reserved', `${name} cursor reserved bytes 0x${r.toString(16).padStart(4, '0')} not zero`, o, 2);
  }
  return c;
}

/** Decodes one CDC message (SEND payload starting with 0xFE). Never throws. */
export function decodeCdc(b: Uint8Array, t?: Tree): Decoded<CdcMessage> {
  const issues: Issue[] = [];
  const avail = b.length;
  if (avail < CDC_MSG_SIZE) {
    issue(issues, 'error', 'cdc.truncated', `truncated CDC message: ${avail} of 44 bytes`, 0, avail);
  }
  const v = view.reset(b, 0);
  const type = v.type;
  const length = v.length;
  if (type !== CDC_TYPE && avail >= 1) issue(issues, 'error', 'cdc.type', `CDC type 0x${type.toString(16)}, expected 0xfe`, 0, 1);
  if (length !== CDC_MSG_SIZE && avail >= 2) issue(issues, 'warn', 'cdc.length', `CDC length ${length}, must be 44 (Linux drops it)`, 1, 1);

  const pf = v.prodFlags;
  const cf = v.connFlags;
  const prodFlags: CdcProducerFlags = {
    writeBlocked: v.writeBlocked,
    urgentPending: v.urgentPending,
    urgentPresent: v.urgentPresent,
    cursorUpdateRequested: v.cursorUpdateRequested,
    failoverValidation: v.failoverValidation,
  };
  if (v.prodOther) {
    prodFlags.other = v.prodOther;
    issue(issues, 'warn', 'cdc.flags', `undefined producer flag bits 0x${v.prodOther.toString(16)}`, CDC_FIELDS.prodFlags.at, 1);
  }
  const connFlags: CdcConnStateFlags = {
    peerDoneWriting: v.peerDoneWriting,
    peerConnClosed: v.peerConnClosed,
    peerConnAbort: v.peerConnAbort,
  };
  if (v.connOther) {
    connFlags.other = v.connOther;
    issue(issues, 'warn', 'cdc.flags', `undefined connection state flag bits 0x${v.connOther.toString(16)}`, CDC_FIELDS.connFlags.at, 1);
  }

  const m: CdcMessage = {
    type, length, seq: v.seq, token: v.token,
    prod: cursorOf(v.prodWrap, v.prodCount, v.prodReserved, CDC_FIELDS.prodReserved.at, issues, 'producer'),
    cons: cursorOf(v.consWrap, v.consCount, v.consReserved, CDC_FIELDS.consReserved.at, issues, 'consumer'),
    prodFlags, connFlags,
  };

  // reserved tail 26..43
  const tailEnd = Math.min(CDC_MSG_SIZE, avail);
  let nz = -1, nzCount = 0;
  for (let i = CDC_RESERVED_AT; i < tailEnd; i++) if (b[i] !== 0) { if (nz < 0) nz = i; nzCount++; }
  if (nz >= 0) {
    m.reserved = new Uint8Array(18);
    m.reserved.set(b.subarray(CDC_RESERVED_AT, tailEnd));
    if (nz === CDC_RESERVED_AT && nzCount === 1) {
      issue(issues, 'note', 'cdc.credits', `reserved byte 26 = ${b[CDC_RESERVED_AT]}: looks like the credits byte of Alibaba out-of-tree kernels (non-standard)`, CDC_RESERVED_AT, 1);
    } else {
      issue(issues, 'warn', 'cdc.reserved', 'CDC reserved bytes 26..43 not zero', CDC_RESERVED_AT, tailEnd - CDC_RESERVED_AT);
    }
  }
  if (avail > CDC_MSG_SIZE) {
    m.trailing = b.slice(CDC_MSG_SIZE);
    issue(issues, 'warn', 'cdc.trailing', `${avail - CDC_MSG_SIZE} bytes after the 44-byte CDC message`, CDC_MSG_SIZE, avail - CDC_MSG_SIZE);
  }

  if (t) {
    const F = CDC_FIELDS;
    t.add('type', F.type.at, 1, `0x${type.toString(16)} CDC`);
    t.add('length', F.length.at, 1, length);
    t.add('sequence number', F.seq.at, 2, m.seq);
    t.add('alert token', F.token.at, 4, hex32(m.token));
    t.add('producer cursor', F.prodReserved.at, 8, `wrap ${m.prod.wrap} count ${m.prod.count}${m.prod.reserved ? ` reserved 0x${m.prod.reserved.toString(16)}` : ''}`);
    t.add('consumer cursor', F.consReserved.at, 8, `wrap ${m.cons.wrap} count ${m.cons.count}${m.cons.reserved ? ` reserved 0x${m.cons.reserved.toString(16)}` : ''}`);
    t.add('producer flags', F.prodFlags.at, 1, `0x${pf.toString(16).padStart(2, '0')} ${flagList(m) || '-'}`);
    t.add('connection state flags', F.connFlags.at, 1, `0x${cf.toString(16).padStart(2, '0')}`);
    if (m.reserved) t.add('reserved (non-zero)', CDC_RESERVED_AT, 18, hex(m.reserved));
    if (m.trailing) t.add('trailing', CDC_MSG_SIZE, m.trailing.length, hex(m.trailing));
  }
  return { value: m, issues };
}

/** Value → exact 44 bytes (+ trailing). */
export function encodeCdc(m: CdcMessage): Uint8Array {
  const b = new Uint8Array(CDC_MSG_SIZE + (m.trailing?.length ?? 0));
  const w = view.reset(b, 0);
  w.type = m.type & 0xff;
  w.length = m.length & 0xff;
  w.seq = m.seq;
  w.token = m.token;
  w.prodReserved = m.prod.reserved ?? 0; w.prodWrap = m.prod.wrap; w.prodCount = m.prod.count;
  w.consReserved = m.cons.reserved ?? 0; w.consWrap = m.cons.wrap; w.consCount = m.cons.count;
  const p = m.prodFlags;
  w.writeBlocked = p.writeBlocked; w.urgentPending = p.urgentPending; w.urgentPresent = p.urgentPresent;
  w.cursorUpdateRequested = p.cursorUpdateRequested; w.failoverValidation = p.failoverValidation; w.prodOther = p.other ?? 0;
  const c = m.connFlags;
  w.peerDoneWriting = c.peerDoneWriting; w.peerConnClosed = c.peerConnClosed; w.peerConnAbort = c.peerConnAbort; w.connOther = c.other ?? 0;
  if (m.reserved) b.set(m.reserved.subarray(0, 18), CDC_RESERVED_AT);
  if (m.trailing) b.set(m.trailing, CDC_MSG_SIZE);
  return b;
}

/** A CDC with everything zero/false except what is given (for endpoint builders). */
export function makeCdc(seq: number, token: number, prod: CdcCursor, cons: CdcCursor,
  prodFlags?: Partial<CdcProducerFlags>, connFlags?: Partial<CdcConnStateFlags>): CdcMessage {
  return {
    type: CDC_TYPE, length: CDC_MSG_SIZE, seq, token, prod, cons,
    prodFlags: {
      writeBlocked: false, urgentPending: false, urgentPresent: false, cursorUpdateRequested: false,
      failoverValidation: false, ...prodFlags,
    },
    connFlags: { peerDoneWriting: false, peerConnClosed: false, peerConnAbort: false, ...connFlags },
  };
}

function flagList(m: CdcMessage): string {
  const p = m.prodFlags, c = m.connFlags;
  let s = '';
  if (p.writeBlocked) s += ',wb';
  if (p.urgentPending) s += ',urgpend';
  if (p.urgentPresent) s += ',urg';
  if (p.cursorUpdateRequested) s += ',curreq';
  if (p.failoverValidation) s += ',failover';
  if (p.other) s += ',p?' + p.other.toString(16);
  if (c.peerDoneWriting) s += ',done';
  if (c.peerConnClosed) s += ',closed';
  if (c.peerConnAbort) s += ',abort';
  if (c.other) s += ',c?' + c.other.toString(16);
  return s.slice(1);
}

/** e.g. `CDC seq 3 token 0x00000001 prod 1:1004 cons 0:0 [wb,done]`. */
export function summarizeCdc(m: CdcMessage): string {
  const s = new StringSink();
  writeCdcSummary(s, m);
  return s.s;
}

/** summarizeCdc() written into a sink (smcdump's one-line output takes its numbers as digits). */
export function writeCdcSummary(s: TextSink, m: CdcMessage): void {
  s.text('CDC seq '); s.dec(m.seq);
  s.text(' token '); writeHexN(s, m.token, 8);
  s.text(' prod '); s.dec(m.prod.wrap); s.text(':'); s.dec(m.prod.count);
  s.text(' cons '); s.dec(m.cons.wrap); s.text(':'); s.dec(m.cons.count);
  const f = flagList(m);
  if (f) { s.text(' ['); s.text(f); s.text(']'); }
  if (m.type !== CDC_TYPE || m.length !== CDC_MSG_SIZE) s.text(` (type 0x${m.type.toString(16)} len ${m.length})`);
}
