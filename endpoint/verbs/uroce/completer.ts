// The completer of a uroce RC QP (as rxe_comp.c): handles the responder's ACKs and NAKs —
// acknowledged WQEs complete in order, a PSN sequence error NAK moves the requester back
// (go-back-N), an RNR NAK makes it wait (rnr_retry, 7 = forever), other NAKs complete the WQE
// with the status libibverbs reports and move the QP to ERR — and the retransmission timeout
// (retry_cnt consecutive timeouts, then IBV_WC_RETRY_EXC_ERR).

// a module binding: the global `performance` is an accessor, looked up per call on the data path
import { performance } from 'node:perf_hooks';
import { QpState, WcStatus } from '../types.js';
import { PSN_MASK, psnDiff, NAK_SEQ, NAK_INV_REQ, NAK_REM_ACCESS, NAK_REM_OP } from './wqe.js';
import { pump, goBack, txPsn, armTimer, waitRnr } from './requester.js';
import type { RxPacket } from './rxpacket.js';
import type { UroceQp } from './qp.js';

/** AETH syndrome bits 6–5 (AETH_FIELDS.kindBits). */
const AETH_ACK = 0, AETH_RNR_NAK = 1, AETH_NAK = 3;

/** An ACKNOWLEDGE (or ATOMIC ACKNOWLEDGE) for this QP's requests. */
export function onResponse(qp: UroceQp, p: RxPacket): void {
  const st = qp.state;
  if (st !== QpState.RTS && st !== QpState.SQD) { qp.stats.drops++; return; }
  const psn = p.psn;
  // Valid: acknowledges something in [unacked - 1, txHigh - 1].
  if (psnDiff(psn, qp.unacked) < -1 || psnDiff(psn, qp.txHigh) >= 0) { qp.stats.drops++; return; }
  p.readAeth();
  const kind = p.kindBits;
  if (kind === AETH_ACK) {
    qp.stats.acksReceived++;
    ackUpTo(qp, psn);
    pump(qp);
    return;
  }
  // A NAK names the PSN the responder expects, never one already acknowledged: below the
  // oldest unacknowledged PSN it is a stale copy (duplicated or reordered on the way), and
  // going back to it would skip the queue entries not sent yet (rxe drops it the same way).
  if (psnDiff(psn, qp.unacked) < 0) { qp.stats.drops++; return; }
  ackUpTo(qp, (psn - 1) & PSN_MASK);
  const code = p.code;
  if (kind === AETH_RNR_NAK) {
    qp.stats.rnrNaksReceived++;
    if (psnDiff(psn, qp.unacked) !== 0 || qp.rnrWait) { pump(qp); return; }
    if (qp.rnrRetry !== 7) {
      if (qp.rnrLeft <= 0) { requesterError(qp, WcStatus.RNR_RETRY_EXC_ERR, 'RNR retry counter exceeded'); return; }
      qp.rnrLeft--;
    }
    waitRnr(qp, psn, code);
    return;
  }
  if (kind !== AETH_NAK) { qp.stats.drops++; return; }
  qp.stats.naksReceived++;
  switch (code) {
    case NAK_SEQ:
      qp.stats.seqNaksReceived++;
      if (qp.rnrWait || psn === qp.lastNakPsn) { pump(qp); return; }
      qp.lastNakPsn = psn;
      goBack(qp, psn);
      qp.deadline = performance.now() + qp.timeoutMs;
      pump(qp);
      return;
    case NAK_INV_REQ: requesterError(qp, WcStatus.REM_INV_REQ_ERR, 'NAK invalid request'); return;
    case NAK_REM_ACCESS: requesterError(qp, WcStatus.REM_ACCESS_ERR, 'NAK remote access error'); return;
    case NAK_REM_OP: requesterError(qp, WcStatus.REM_OP_ERR, 'NAK remote operational error'); return;
    default: requesterError(qp, WcStatus.BAD_RESP_ERR, `NAK code ${code}`); return;
  }
}

/** Everything up to `psn` is acknowledged: progress resets the retry counters and the timeout. */
function ackUpTo(qp: UroceQp, psn: number): void {
  if (psnDiff(psn, qp.unacked) < 0) return;
  qp.unacked = (psn + 1) & PSN_MASK;
  qp.retryLeft = qp.retryCnt;
  qp.rnrLeft = qp.rnrRetry;
  qp.lastNakPsn = -1;
  qp.deadline = performance.now() + qp.timeoutMs;
  if (psnDiff(txPsn(qp), qp.unacked) < 0) goBack(qp, qp.unacked);
  completeUpTo(qp, psn);
}

/** Complete SQ WQEs whose last packet is acknowledged (PSN <= psn), in order. */
function completeUpTo(qp: UroceQp, psn: number): void {
  while (qp.sqHead < qp.sq.length) {
    const w = qp.sq[qp.sqHead]!;
    if (w.localErr || psnDiff(w.lastPsn, psn) > 0) break;
    if (qp.sqHead === qp.txIdx) break; // not (fully) sent yet
    qp.sqHead++;
    qp.stats.messagesSent++;
    if (w.signaled) qp.pushSendWc(w.wrId, WcStatus.SUCCESS, w.opcode, w.length);
    qp.wqePool.release(w); // acknowledged: none of its packets can be resent
  }
  if (qp.sqHead > 256 && qp.sqHead * 2 > qp.sq.length) {
    qp.sq = qp.sq.slice(qp.sqHead);
    qp.txIdx -= qp.sqHead;
    qp.sqHead = 0;
  }
}

/** Local ACK timeout: resend from the oldest unacknowledged PSN, retry_cnt times. */
export function onTimeout(qp: UroceQp): void {
  qp.timer = undefined;
  if ((qp.state !== QpState.RTS && qp.state !== QpState.SQD) || qp.rnrWait || qp.unacked === qp.txHigh) return;
  const now = performance.now();
  if (now < qp.deadline - 0.25) { armTimer(qp); return; }
  qp.stats.timeouts++;
  if (qp.retryLeft <= 0) { requesterError(qp, WcStatus.RETRY_EXC_ERR, 'transport retry counter exceeded'); return; }
  qp.retryLeft--;
  goBack(qp, qp.unacked);
  qp.lastNakPsn = -1;
  qp.deadline = now + qp.timeoutMs;
  pump(qp);
}

/** Complete the head WQE with an error and move the QP to ERR (flushing the rest). */
export function requesterError(qp: UroceQp, status: number, _reason: string): void {
  const w = qp.sq[qp.sqHead];
  if (w) {
    qp.sqHead++;
    qp.pushSendWc(w.wrId, status, w.opcode, 0);
    qp.wqePool.release(w);
  }
  qp.toError();
}
