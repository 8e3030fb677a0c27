// The requester of a uroce RC QP (as rxe_req.c): turns send WQEs into request packets — PSN
// per packet, segmentation by the path MTU into FIRST/MIDDLE/LAST/ONLY, RETH on the first
// packet of an RDMA WRITE and ImmDt on the last, AckReq on the last packet of every message
// and every `ackReqEvery` packets — within a window of unacknowledged packets; the transmit
// position moves back for retransmissions (go-back-N) and waits out an RNR NAK's timer.
//
// Packets are built in place in the engine's staging buffer (engine.txAlloc): the whole BTH and
// RETH each written in one call generated from the wire layer's tables (views/ib.ts); the
// engine adds the ICRC and sends the turn's packets in batches. No allocation per packet.

// a module binding: the global `performance` is an accessor, looked up per call on the data path
import { performance } from 'node:perf_hooks';
import { ibPadFor, rnrTimerMs, IB_OP, IB_EXT_SIZE, BTH_LEN, ICRC_LEN } from '../../../dissectors/wire/ib.js';
import { put32 } from '../../../dissectors/wire/common.js';
import { DEFAULT_PKEY, IMMDT_FIELDS, RethView, writeBth, writeReth } from '../../../dissectors/wire/views/ib.js';
import { exactAddr, QpState, WrOpcode } from '../types.js';
import { PSN_MASK, psnDiff, type SendWqe } from './wqe.js';
import { requesterError } from './completer.js';
import type { UroceQp } from './qp.js';
import { copyBytes } from './views.js';

/** A RETH whose VA is not exact as a number (at or above 2^53: never an MR of uroce's, but a
 *  verbs user may name one) is written through the view's bigint setter. */
const txReth = new RethView();

/** SEND with immediate (IB_OP holds the opcodes SMC-R uses; verbs users may post these too). */
const SEND_LAST_IMM = 0x03, SEND_ONLY_IMM = 0x05;

/** Send what the window allows (rxe_requester). */
export function pump(qp: UroceQp): void {
  if (qp.pumping || qp.rnrWait) return;
  const st = qp.state;
  if (st !== QpState.RTS && st !== QpState.SQD) return;
  qp.pumping = true;
  // A coalesced ACK still waiting goes out before new requests (it would otherwise trail
  // them by an event-loop turn: request/response protocols wait for it).
  // (unless it waits for the engine's transmit flush: then it follows them in the same one)
  if (qp.ackPending && qp.txIdx < qp.sq.length && !qp.engine.ackDeferred(qp)) qp.flushAck();
  try {
    const win = qp.tune.window;
    while (qp.txIdx < qp.sq.length) {
      const w = qp.sq[qp.txIdx]!;
      if (w.localErr) {
        if (qp.txIdx === qp.sqHead) { requesterError(qp, w.localErr, 'local error in the work request'); return; }
        break;
      }
      const psn = (w.firstPsn + qp.txPkt) & PSN_MASK;
      const inflight = psnDiff(psn, qp.unacked);
      if (inflight >= win) break;
      const wasIdle = qp.unacked === qp.txHigh;
      sendRequest(qp, w, qp.txPkt, psn, inflight + 1 >= win || (inflight + 1) % qp.tune.ackReqEvery === 0);
      if (psnDiff(psn, qp.txHigh) >= 0) qp.txHigh = (psn + 1) & PSN_MASK;
      else qp.stats.retransmits++;
      if (wasIdle) qp.deadline = performance.now() + qp.timeoutMs;
      if (++qp.txPkt >= w.npkts) { qp.txIdx++; qp.txPkt = 0; }
    }
  } finally {
    qp.pumping = false;
  }
  armTimer(qp);
}

/** Copy `len` bytes of the WQE's gather list from offset `off` into out[at …] (no views). */
function gatherInto(w: SendWqe, off: number, len: number, out: Uint8Array, at: number): void {
  const lens = w.segLen;
  let i = 0;
  while (i < w.nSegs && off >= lens[i]!) { off -= lens[i]!; i++; }
  let o = 0;
  while (o < len) {
    const n = Math.min(lens[i]! - off, len - o);
    copyBytes(out, at + o, w.segBuf[i]!, w.segOff[i]! + off, n);
    i++;
    o += n;
    off = 0;
  }
}

function requestOpcode(isWrite: boolean, imm: boolean, first: boolean, last: boolean): number {
  if (isWrite) {
    if (first && last) return imm ? IB_OP.RDMA_WRITE_ONLY_IMM : IB_OP.RDMA_WRITE_ONLY;
    if (first) return IB_OP.RDMA_WRITE_FIRST;
    if (last) return imm ? IB_OP.RDMA_WRITE_LAST_IMM : IB_OP.RDMA_WRITE_LAST;
    return IB_OP.RDMA_WRITE_MIDDLE;
  }
  if (first && last) return imm ? SEND_ONLY_IMM : IB_OP.SEND_ONLY;
  if (first) return IB_OP.SEND_FIRST;
  if (last) return imm ? SEND_LAST_IMM : IB_OP.SEND_LAST;
  return IB_OP.SEND_MIDDLE;
}

/** Packet k (PSN `psn`) of a WQE. */
function sendRequest(qp: UroceQp, w: SendWqe, k: number, psn: number, windowAck: boolean): void {
  const mtu = qp.mtu;
  const off = k * mtu;
  const len = Math.min(mtu, w.length - off);
  const first = k === 0, last = k === w.npkts - 1;
  const isWrite = w.opcode === WrOpcode.RDMA_WRITE || w.opcode === WrOpcode.RDMA_WRITE_WITH_IMM;
  const imm = w.opcode === WrOpcode.SEND_WITH_IMM || w.opcode === WrOpcode.RDMA_WRITE_WITH_IMM;
  const pad = ibPadFor(len);
  const withReth = isWrite && first, withImm = imm && last;
  const hdr = BTH_LEN + (withReth ? IB_EXT_SIZE.RETH : 0) + (withImm ? IB_EXT_SIZE.ImmDt : 0);
  // BTH (every field in one call: no template copy, no call per field), RETH / ImmDt, payload,
  // pad; the engine adds the ICRC.
  const pkt = qp.engine.txAlloc(qp.tx!, hdr + len + pad + ICRC_LEN);
  writeBth(pkt, 0, requestOpcode(isWrite, imm, first, last), last && w.solicited && (!isWrite || imm), false, pad, 0,
    DEFAULT_PKEY, false, false, 0, qp.txDestQp, last || windowAck, 0, psn);
  if (withReth) {
    // the VA as a number when exact (the view's 64-bit setter works in bigints: several per WRITE);
    // post_send let through only valid addresses, so the fallback is a bigint at or above 2^53
    const va = exactAddr(w.remoteAddr);
    writeReth(pkt, BTH_LEN, va >= 0 ? va : 0, w.rkey, w.length);
    if (va < 0) txReth.reset(pkt, BTH_LEN, BTH_LEN + IB_EXT_SIZE.RETH).va = BigInt(w.remoteAddr);
  }
  if (withImm) put32(pkt, hdr - IB_EXT_SIZE.ImmDt + IMMDT_FIELDS.immDt.at, w.immData! >>> 0);
  if (len) gatherInto(w, off, len, pkt, hdr);
  for (let i = hdr + len, e = hdr + len + pad; i < e; i++) pkt[i] = 0;
  qp.stats.txPackets++;
  qp.stats.txBytes += pkt.length;
  qp.engine.transmit(qp.tx!, pkt, qp.remoteIp);
}

/** Move the transmit position to `psn` (go-back-N). */
export function goBack(qp: UroceQp, psn: number): void {
  for (let i = qp.sqHead; i < qp.sq.length; i++) {
    const w = qp.sq[i]!;
    if (w.localErr) { qp.txIdx = i; qp.txPkt = 0; return; }
    if (psnDiff(psn, w.firstPsn) >= 0 && psnDiff(psn, w.lastPsn) <= 0) { qp.txIdx = i; qp.txPkt = psnDiff(psn, w.firstPsn); return; }
  }
  qp.txIdx = qp.sq.length;
  qp.txPkt = 0;
}

/** PSN of the next packet to transmit. */
export function txPsn(qp: UroceQp): number {
  const w = qp.sq[qp.txIdx];
  return w ? (w.firstPsn + qp.txPkt) & PSN_MASK : qp.nextPsn;
}

// The retransmission timer is not cleared when everything is acknowledged: request/response
// traffic would create and cancel a Node timer per message (≈2 % of an SMC-R round trip's
// CPU). An idle QP's timer fires once more and finds nothing outstanding; a pending one always
// expires at or before the current deadline (deadlines only move later), and the completer's
// timeout handler re-arms it for the rest.
export function armTimer(qp: UroceQp): void {
  if (qp.timeoutMs === Infinity || qp.rnrWait || qp.unacked === qp.txHigh || qp.destroyed) return;
  if (qp.timer) return;
  const wait = Math.max(1, qp.deadline - performance.now());
  qp.timer = setTimeout(qp.onTimerFn, wait);
}

/** RNR NAK for the oldest unacknowledged PSN: send nothing until the responder's RNR timer
 *  (its code) has run out, then resend from `psn` (rxe's rnr_nak_timer). */
export function waitRnr(qp: UroceQp, psn: number, code: number): void {
  goBack(qp, psn);
  qp.rnrWait = true;
  if (qp.timer) { clearTimeout(qp.timer); qp.timer = undefined; }
  qp.rnrTimer = setTimeout(() => {
    qp.rnrTimer = undefined;
    qp.rnrWait = false;
    qp.deadline = performance.now() + qp.timeoutMs;
    pump(qp);
  }, Math.max(1, rnrTimerMs(code)));
}
