// The responder of a uroce RC QP (as rxe_resp.c): validates incoming requests — expected PSN
// (a request behind it is a duplicate: re-ACKed, never re-executed; one ahead of it is NAKed
// once with a PSN sequence error and dropped), opcode sequence, payload lengths, a posted
// receive for a SEND (else RNR NAK), rkey / PD / access / bounds for every RDMA WRITE (else
// NAK remote access error, QP to ERR) — places the data straight into registered memory,
// completes receives, and acknowledges: the end of a message at once (or at the end of the
// receive batch), everything else coalesced to one ACK per batch or event-loop turn.
//
// ACK and NAK packets are written in place (engine.txAlloc), the BTH and AETH each in one call
// generated from the wire layer's tables (views/ib.ts): no allocation per ACK.

import { IB_OP, IB_EXT_SIZE, BTH_LEN, ICRC_LEN } from '../../../dissectors/wire/ib.js';
import { DEFAULT_PKEY, writeAeth, writeBth } from '../../../dissectors/wire/views/ib.js';
import { Access, AsyncEventType, QpState, WcFlags, WcOpcode, WcStatus } from '../types.js';
import { PSN_MASK, psnDiff, NAK_SEQ, NAK_INV_REQ, NAK_REM_ACCESS, NAK_REM_OP, AETH_NO_CREDITS, type RecvWqe } from './wqe.js';
import type { RxPacket } from './rxpacket.js';
import { copyBytes } from './views.js';
import type { UroceQp } from './qp.js';

const EMPTY = new Uint8Array(0);
const ACK_LEN = BTH_LEN + IB_EXT_SIZE.AETH + ICRC_LEN;
/** AETH syndrome bits 6–5 (AETH_FIELDS.kindBits). */
const AETH_ACK = 0, AETH_RNR_NAK = 1, AETH_NAK = 3;

/** A request packet for this QP (the QP is in RTR, RTS or SQD). */
export function onRequest(qp: UroceQp, p: RxPacket): void {
  const info = p.info;
  const psn = p.psn;
  const d = psnDiff(psn, qp.ePsn);
  if (d < 0) {
    qp.stats.duplicates++;
    scheduleAck(qp);
    return;
  }
  if (d > 0) {
    qp.stats.outOfSequence++;
    if (!qp.seqNakSent) { qp.seqNakSent = true; nak(qp, NAK_SEQ, qp.ePsn); }
    return;
  }
  const n = p.payloadLength;
  const mtu = qp.mtu;
  if (info.isFirst || info.isMiddle ? n !== mtu : n > mtu || (info.isLast && n === 0)) { invalidRequest(qp, `${info.name} with ${n} payload bytes (path MTU ${mtu})`); return; }

  if (info.isSend && !info.withInvalidate) {
    if (info.isFirst || info.isOnly) {
      if (qp.inMsg !== 0) { invalidRequest(qp, `${info.name} inside a message`); return; }
      if (!hasRecv(qp)) { rnrNak(qp, psn); return; }
      qp.curRecv = takeRecv(qp)!;
      qp.curRecvOff = 0;
      qp.inMsg = 1;
      if (qp.curRecv.localErr) {
        responderError(qp, NAK_REM_OP, qp.curRecv.localErr, AsyncEventType.QP_FATAL, 'receive WQE with a bad SGE');
        return;
      }
    } else if (qp.inMsg !== 1) { invalidRequest(qp, `${info.name} without SEND FIRST`); return; }
    const r = qp.curRecv!;
    if (qp.curRecvOff + n > r.length) {
      responderError(qp, NAK_INV_REQ, WcStatus.LOC_LEN_ERR, AsyncEventType.QP_REQ_ERR, `SEND of more than the ${r.length}-byte receive buffer`);
      return;
    }
    if (n) scatter(r, qp.curRecvOff, p.buf, p.payOff, n);
    qp.curRecvOff += n;
    if (info.isLast || info.isOnly) {
      qp.inMsg = 0;
      qp.curRecv = undefined;
      qp.msn = (qp.msn + 1) & PSN_MASK;
      qp.stats.messagesReceived++;
      const imm = info.withImmediate;
      qp.recvCq.pushWc(r.wrId, WcStatus.SUCCESS, WcOpcode.RECV, qp.curRecvOff, qp.qpNum, qp.destQpn, imm ? WcFlags.WITH_IMM : 0,
        imm ? p.immDt >>> 0 : undefined, p.se);
      qp.releaseRecv(r);
    }
  } else if (info.isWrite && !(p.opcode & 0x10)) {
    const ends = info.isLast || info.isOnly;
    if (ends && info.withImmediate && !hasRecv(qp)) { rnrNak(qp, psn); return; }
    if (info.isFirst || info.isOnly) {
      if (qp.inMsg !== 0) { invalidRequest(qp, `${info.name} inside a message`); return; }
      if (!startWrite(qp, p)) return;
    } else if (qp.inMsg !== 2) { invalidRequest(qp, `${info.name} without RDMA WRITE FIRST`); return; }
    if (n > qp.wrLeft) { invalidRequest(qp, `RDMA WRITE beyond its DMA length ${qp.wrTotal}`); return; }
    if (n) { copyBytes(qp.wrBuf, qp.wrOff, p.buf, p.payOff, n); qp.wrOff += n; qp.wrLeft -= n; }
    if (ends) {
      if (qp.wrLeft !== 0) { invalidRequest(qp, `RDMA WRITE ended ${qp.wrLeft} bytes short of its DMA length ${qp.wrTotal}`); return; }
      qp.inMsg = 0;
      qp.msn = (qp.msn + 1) & PSN_MASK;
      qp.stats.messagesReceived++;
      if (info.withImmediate) {
        const r = takeRecv(qp)!;
        qp.recvCq.pushWc(r.wrId, WcStatus.SUCCESS, WcOpcode.RECV_RDMA_WITH_IMM, qp.wrTotal, qp.qpNum, qp.destQpn, WcFlags.WITH_IMM,
          p.immDt >>> 0, p.se);
        qp.releaseRecv(r);
      }
    }
  } else {
    invalidRequest(qp, `${info.name} not supported by uroce`);
    return;
  }
  qp.ePsn = (qp.ePsn + 1) & PSN_MASK;
  qp.seqNakSent = false;
  if (p.ackReq) {
    // The end of a message is acknowledged before the application sees the receive
    // completion (which it may answer by destroying the QP), as an RNIC does: at once, or,
    // inside a native receive batch, at the end of the batch (completions reach the
    // application only after it). AckReq inside a message and re-ACKs of duplicates are
    // coalesced to one ACK per batch or event-loop turn.
    if ((info.isLast || info.isOnly) && !qp.engine.inBatch) { qp.ackPending = true; flushAck(qp); }
    else scheduleAck(qp);
  }
}

/** First packet of an RDMA WRITE: check its RETH against the MR it names (a zero-length WRITE
 *  is not checked, as IB says). False: the QP went to ERR. */
function startWrite(qp: UroceQp, p: RxPacket): boolean {
  p.readReth();
  const len = p.dmaLen;
  if (len === 0) {
    qp.wrBuf = EMPTY; qp.wrOff = 0;
  } else {
    const rkey = p.rkey;
    const mr = qp.dev.mrByRkey(rkey);
    // the VA and its offset in numbers when exact (no bigint per WRITE), else one bigint
    // subtraction (an offset far outside the MR loses precision in Number() but stays outside)
    const vaNum = p.va;
    const off = !mr ? -1 : vaNum >= 0 && mr.addrNum >= 0 ? vaNum - mr.addrNum : Number(p.rethVa - mr.addr);
    const why = !mr ? `rkey 0x${rkey.toString(16)} unknown`
      : mr.pd !== qp.pd ? `rkey 0x${rkey.toString(16)} belongs to another PD`
      : !(mr.access & Access.REMOTE_WRITE) ? `MR rkey 0x${rkey.toString(16)} has no remote write access`
      : !(qp.accessFlags & Access.REMOTE_WRITE) ? 'QP does not allow remote write'
      : off < 0 || off + len > mr.length ? `va 0x${p.rethVa.toString(16)}+${len} outside the MR`
      : '';
    if (why) { responderError(qp, NAK_REM_ACCESS, WcStatus.REM_ACCESS_ERR, AsyncEventType.QP_ACCESS_ERR, why); return false; }
    qp.wrBuf = mr!.buffer;
    qp.wrOff = off;
  }
  qp.wrLeft = len;
  qp.wrTotal = len;
  qp.inMsg = 2;
  return true;
}

/** No receive posted for a SEND (or RDMA WRITE with immediate): RNR NAK with min_rnr_timer. */
function rnrNak(qp: UroceQp, psn: number): void {
  qp.ackPending = false;
  sendAck(qp, AETH_RNR_NAK, qp.minRnrTimer, psn);
  qp.seqNakSent = true; // drop what follows until this PSN comes again
}

function sendAck(qp: UroceQp, kind: number, code: number, psn: number): void {
  if (!qp.tx) return;
  const pkt = qp.engine.txAlloc(qp.tx, ACK_LEN);
  writeBth(pkt, 0, IB_OP.ACKNOWLEDGE, false, false, 0, 0, DEFAULT_PKEY, false, false, 0, qp.txDestQp, false, 0, psn & PSN_MASK);
  writeAeth(pkt, BTH_LEN, (kind << 5) | (code & 31), qp.msn & PSN_MASK);
  qp.stats.txPackets++;
  qp.stats.txBytes += pkt.length;
  if (kind === AETH_ACK) qp.stats.acksSent++;
  else if (kind === AETH_RNR_NAK) qp.stats.rnrNaksSent++;
  else { qp.stats.naksSent++; if (code === NAK_SEQ) qp.stats.seqNaksSent++; }
  qp.engine.transmit(qp.tx, pkt, qp.remoteIp);
}

function scheduleAck(qp: UroceQp): void {
  qp.ackPending = true;
  // Inside a native receive batch: one ACK per QP at the end of the batch.
  if (qp.engine.inBatch) { qp.engine.deferAck(qp); return; }
  if (qp.ackScheduled) return;
  qp.ackScheduled = true;
  setImmediate(() => {
    qp.ackScheduled = false;
    flushAck(qp);
  });
}

/** Send the pending (coalesced) ACK for the newest PSN. */
export function flushAck(qp: UroceQp): void {
  if (!qp.ackPending) return;
  qp.ackPending = false;
  const st = qp.state;
  if (st === QpState.RTR || st === QpState.RTS || st === QpState.SQD) sendAck(qp, AETH_ACK, AETH_NO_CREDITS, (qp.ePsn - 1) & PSN_MASK);
}

function nak(qp: UroceQp, code: number, psn: number): void {
  qp.ackPending = false;
  sendAck(qp, AETH_NAK, code, psn);
}

/** Responder detected an error (class C): NAK, complete the receive in progress, QP to ERR, async event. */
function responderError(qp: UroceQp, nakCode: number, recvStatus: number, event: AsyncEventType, reason: string): void {
  nak(qp, nakCode, qp.ePsn);
  if (qp.curRecv) {
    const r = qp.curRecv;
    qp.curRecv = undefined;
    qp.recvCq.pushWc(r.wrId, recvStatus as WcStatus, WcOpcode.RECV, 0, qp.qpNum, qp.destQpn, 0, undefined, false);
  }
  qp.toError();
  qp.dev.emitAsync({ type: event, qp, reason });
}

/** Invalid request (class C): NAK invalid request, QP to ERR, IBV_EVENT_QP_REQ_ERR. */
function invalidRequest(qp: UroceQp, why: string): void {
  responderError(qp, NAK_INV_REQ, WcStatus.REM_INV_REQ_ERR, AsyncEventType.QP_REQ_ERR, why);
}

function takeRecv(qp: UroceQp): RecvWqe | undefined {
  if (qp.rqHead >= qp.rq.length) return undefined;
  const r = qp.rq[qp.rqHead++]!;
  if (qp.rqHead === qp.rq.length) { qp.rq = []; qp.rqHead = 0; }
  else if (qp.rqHead > 256 && qp.rqHead * 2 > qp.rq.length) { qp.rq = qp.rq.slice(qp.rqHead); qp.rqHead = 0; }
  return r;
}

function hasRecv(qp: UroceQp): boolean { return qp.rqHead < qp.rq.length; }

/** Scatter a SEND's payload (n bytes at data[at…]) over the receive WQE's SGEs from byte `off`
 *  of the message (no view of the packet). */
function scatter(r: RecvWqe, off: number, data: Uint8Array, at: number, n: number): void {
  const { bufs, offs, lens } = r.segs;
  let i = 0;
  while (off >= lens[i]!) { off -= lens[i]!; i++; }
  let o = 0;
  while (o < n) {
    const k = Math.min(lens[i]! - off, n - o);
    copyBytes(bufs[i]!, offs[i]! + off, data, at + o, k);
    i++;
    o += k;
    off = 0;
  }
}
