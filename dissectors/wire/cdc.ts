// SMC-R CDC (connection data control) message: formats.md §9.1 (RFC 7609 A.4, Linux smc_cdc),
// The rules over its fields (cursor arithmetic, sequence numbers, window) are cdcrules.ts.
//
// 44 bytes, all big-endian: type 0xFE, length 44, sequence (u16), alert token (u32),
// producer cursor and consumer cursor (reserved u16 · wrap u16 · count u32 each),
// producer flags, connection-state flags, 18 reserved bytes.

import type { Decoded, Issue, Tree } from './common.js';
import { hex, hex32, issue, put16, put32, u16, u32, u8 } from './common.js';

export const CDC_TYPE = 0xfe;
export const CDC_MSG_SIZE = 44;

export const CDC_PROD_WRITE_BLOCKED = 0x80;
export const CDC_PROD_URG_PENDING = 0x40;
export const CDC_PROD_URG_PRESENT = 0x20;
export const CDC_PROD_CONS_CURS_UPD_REQ = 0x10;
export const CDC_PROD_FAILOVER_VALIDATION = 0x08;
export const CDC_CONN_PEER_DONE_WRITING = 0x80;
export const CDC_CONN_PEER_CONN_CLOSED = 0x40;
export const CDC_CONN_PEER_CONN_ABORT = 0x20;

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

function cursorAt(b: Uint8Array, o: number, issues: Issue[], name: string): CdcCursor {
  const c: CdcCursor = { wrap: u16(b, o + 2), count: u32(b, o + 4) };
  const r = u16(b, o);
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
  const type = u8(b, 0);
  const length = u8(b, 1);
  if (type !== CDC_TYPE && avail >= 1) issue(issues, 'error', 'cdc.type', `CDC type 0x${type.toString(16)}, expected 0xfe`, 0, 1);
  if (length !== CDC_MSG_SIZE && avail >= 2) issue(issues, 'warn', 'cdc.length', `CDC length ${length}, must be 44 (Linux drops it)`, 1, 1);

  const pf = u8(b, 24);
  const cf = u8(b, 25);
  const prodFlags: CdcProducerFlags = {
    writeBlocked: (pf & CDC_PROD_WRITE_BLOCKED) !== 0,
    urgentPending: (pf & CDC_PROD_URG_PENDING) !== 0,
    urgentPresent: (pf & CDC_PROD_URG_PRESENT) !== 0,
    cursorUpdateRequested: (pf & CDC_PROD_CONS_CURS_UPD_REQ) !== 0,
    failoverValidation: (pf & CDC_PROD_FAILOVER_VALIDATION) !== 0,
  };
  if (pf & 0x07) {
    prodFlags.other = pf & 0x07;
    issue(issues, 'warn', 'cdc.flags', `undefined producer flag bits 0x${(pf & 0x07).toString(16)}`, 24, 1);
  }
  const connFlags: CdcConnStateFlags = {
    peerDoneWriting: (cf & CDC_CONN_PEER_DONE_WRITING) !== 0,
    peerConnClosed: (cf & CDC_CONN_PEER_CONN_CLOSED) !== 0,
    peerConnAbort: (cf & CDC_CONN_PEER_CONN_ABORT) !== 0,
  };
  if (cf & 0x1f) {
    connFlags.other = cf & 0x1f;
    issue(issues, 'warn', 'cdc.flags', `undefined connection state flag bits 0x${(cf & 0x1f).toString(16)}`, 25, 1);
  }

  const m: CdcMessage = {
    type, length, seq: u16(b, 2), token: u32(b, 4),
    prod: cursorAt(b, 8, issues, 'producer'), cons: cursorAt(b, 16, issues, 'consumer'),
    prodFlags, connFlags,
  };

  // reserved tail 26..43
  const tailEnd = Math.min(CDC_MSG_SIZE, avail);
  let nz = -1, nzCount = 0;
  for (let i = 26; i < tailEnd; i++) if (b[i] !== 0) { if (nz < 0) nz = i; nzCount++; }
  if (nz >= 0) {
    m.reserved = new Uint8Array(18);
    m.reserved.set(b.subarray(26, tailEnd));
    if (nz === 26 && nzCount === 1) {
      issue(issues, 'note', 'cdc.credits', `reserved byte 26 = ${b[26]}: looks like the credits byte of Alibaba out-of-tree kernels (non-standard)`, 26, 1);
    } else {
      issue(issues, 'warn', 'cdc.reserved', 'CDC reserved bytes 26..43 not zero', 26, tailEnd - 26);
    }
  }
  if (avail > CDC_MSG_SIZE) {
    m.trailing = b.slice(CDC_MSG_SIZE);
    issue(issues, 'warn', 'cdc.trailing', `${avail - CDC_MSG_SIZE} bytes after the 44-byte CDC message`, CDC_MSG_SIZE, avail - CDC_MSG_SIZE);
  }

  if (t) {
    t.add('type', 0, 1, `0x${type.toString(16)} CDC`);
    t.add('length', 1, 1, length);
    t.add('sequence number', 2, 2, m.seq);
    t.add('alert token', 4, 4, hex32(m.token));
    t.add('producer cursor', 8, 8, `wrap ${m.prod.wrap} count ${m.prod.count}${m.prod.reserved ? ` reserved 0x${m.prod.reserved.toString(16)}` : ''}`);
    t.add('consumer cursor', 16, 8, `wrap ${m.cons.wrap} count ${m.cons.count}${m.cons.reserved ? ` reserved 0x${m.cons.reserved.toString(16)}` : ''}`);
    t.add('producer flags', 24, 1, `0x${pf.toString(16).padStart(2, '0')} ${flagList(m) || '-'}`);
    t.add('connection state flags', 25, 1, `0x${cf.toString(16).padStart(2, '0')}`);
    if (m.reserved) t.add('reserved (non-zero)', 26, 18, hex(m.reserved));
    if (m.trailing) t.add('trailing', CDC_MSG_SIZE, m.trailing.length, hex(m.trailing));
  }
  return { value: m, issues };
}

function putCursor(b: Uint8Array, o: number, c: CdcCursor): void {
  put16(b, o, c.reserved ?? 0);
  put16(b, o + 2, c.wrap);
  put32(b, o + 4, c.count);
}

/** Value → exact 44 bytes (+ trailing). */
export function encodeCdc(m: CdcMessage): Uint8Array {
  const b = new Uint8Array(CDC_MSG_SIZE + (m.trailing?.length ?? 0));
  b[0] = m.type & 0xff;
  b[1] = m.length & 0xff;
  put16(b, 2, m.seq);
  put32(b, 4, m.token);
  putCursor(b, 8, m.prod);
  putCursor(b, 16, m.cons);
  const p = m.prodFlags;
  b[24] = (p.writeBlocked ? CDC_PROD_WRITE_BLOCKED : 0) | (p.urgentPending ? CDC_PROD_URG_PENDING : 0)
    | (p.urgentPresent ? CDC_PROD_URG_PRESENT : 0) | (p.cursorUpdateRequested ? CDC_PROD_CONS_CURS_UPD_REQ : 0)
    | (p.failoverValidation ? CDC_PROD_FAILOVER_VALIDATION : 0) | ((p.other ?? 0) & 0x07);
  const c = m.connFlags;
  b[25] = (c.peerDoneWriting ? CDC_CONN_PEER_DONE_WRITING : 0) | (c.peerConnClosed ? CDC_CONN_PEER_CONN_CLOSED : 0)
    | (c.peerConnAbort ? CDC_CONN_PEER_CONN_ABORT : 0) | ((c.other ?? 0) & 0x1f);
  if (m.reserved) b.set(m.reserved.subarray(0, 18), 26);
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
  let s = `CDC seq ${m.seq} token ${hex32(m.token)} prod ${m.prod.wrap}:${m.prod.count} cons ${m.cons.wrap}:${m.cons.count}`;
  const f = flagList(m);
  if (f) s += ` [${f}]`;
  if (m.type !== CDC_TYPE || m.length !== CDC_MSG_SIZE) s += ` (type 0x${m.type.toString(16)} len ${m.length})`;
  return s;
}
