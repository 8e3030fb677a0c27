// An RC queue pair of the userspace RoCEv2 engine: requester and responder of IBA vol. 1
// ch. 9 (RC transport), as Linux rxe implements them.
//
// Requester: PSNs assigned per WQE at post time; messages cut by the path MTU into
// FIRST/MIDDLE/LAST/ONLY packets (RETH on the first packet of an RDMA WRITE, ImmDt on the
// last); AckReq on the last packet of every message and every `ackReqEvery` packets; a
// window of `window` unacknowledged packets; a retransmission timer (local ACK timeout) with
// retry_cnt; go-back-N from the NAKed PSN on a PSN-sequence-error NAK; RNR NAK → wait the
// responder's RNR timer and resend, rnr_retry times (7 = forever); other NAKs complete the
// WQE with the status libibverbs reports and move the QP to ERR. Completions in order.
//
// Responder: expected PSN; a request behind it is a duplicate (re-ACKed, never re-executed),
// one ahead of it is NAKed once (PSN sequence error) and dropped; a SEND (or RDMA WRITE with
// immediate) without a posted receive gets an RNR NAK; opcode sequence, lengths and, for every
// RDMA WRITE, rkey / PD / access / bounds are checked (remote access error NAK, QP to ERR);
// data is placed straight into the registered memory; ACKs are coalesced (one per receive
// batch of the socket helper, or per event-loop turn without it, for the newest PSN).
//
// Request packets are built in place in the engine's staging buffer (engine.txAlloc): no
// allocation per packet; the engine adds the ICRC and sends the turn's packets in batches.

import { encodeIbPacket, encodeBth, encodeReth, makeAeth, opcodeInfo, rnrTimerMs, ibPadFor, IB_OP, BTH_LEN, ICRC_LEN, type Bth, type IbPacket } from '../../../dissectors/wire/ib.js';
import { put24, put32 } from '../../../dissectors/wire/common.js';
import {
  Access, Mtu, QpAttrMask, QpState, QpType, SendFlags, VerbsError, WcFlags, WcOpcode, WcStatus, WrOpcode, AsyncEventType,
  ackTimeoutMs, attrMaskOf, gidText, gidToIpv4, mtuBytes, qpStateName,
  type AhAttr, type Pd, type Qp, type QpAttr, type QpCap, type QpInitAttr, type QpStats, type RecvWr, type SendWr, type Sge, type WorkCompletion, type WrId,
} from '../types.js';
import { checkTransition } from '../qpstate.js';
import type { CompletionQueue } from '../cq.js';
import { UroceEngine, type EngineQp, type TxPort } from './engine.js';
import { NetHeader } from './icrc.js';
import { openSocketSync } from './sockets.js';
import type { UroceDevice, UroceMr } from './device.js';

const PSN_MASK = 0xffffff;
/** Signed distance a - b in 24-bit PSN space. */
export function psnDiff(a: number, b: number): number { return ((a - b) << 8) >> 8; }

const EMPTY = new Uint8Array(0);

/** NAK codes (AETH syndrome 011xxxxx). */
const NAK_SEQ = 0, NAK_INV_REQ = 1, NAK_REM_ACCESS = 2, NAK_REM_OP = 3;

interface SendWqe {
  wrId: WrId;
  opcode: number;
  signaled: boolean;
  solicited: boolean;
  immData: number | undefined;
  rkey: number;
  remoteAddr: bigint;
  segs: Uint8Array[];
  length: number;
  firstPsn: number;
  lastPsn: number;
  npkts: number;
  /** Local error found at post (completes with it when its turn comes). */
  localErr: number;
  /** RETH of an RDMA WRITE, encoded once (first packet, and its retransmissions). */
  reth?: Uint8Array;
}

interface RecvWqe {
  wrId: WrId;
  segs: Uint8Array[];
  length: number;
  localErr: number;
}

/** UDP source port the way Linux derives it for RoCEv2 (rdma_get_udp_sport): flow label, or one made from both QPNs. */
export function roceSourcePort(flowLabel: number, lqpn: number, rqpn: number): number {
  let fl = flowLabel & 0xfffff;
  if (!fl) {
    let v = BigInt(lqpn) * BigInt(rqpn);
    v ^= v >> 20n;
    v ^= v >> 40n;
    fl = Number(v & 0xfffffn);
  }
  const low = (fl & 0x3fff) ^ ((fl & 0xfc000) >> 14);
  return low | 0xc000;
}

function emptyStats(): QpStats {
  return {
    txPackets: 0, txBytes: 0, rxPackets: 0, rxBytes: 0, retransmits: 0, timeouts: 0, naksSent: 0, naksReceived: 0,
    seqNaksSent: 0, seqNaksReceived: 0, rnrNaksSent: 0, rnrNaksReceived: 0, acksSent: 0, acksReceived: 0,
    duplicates: 0, outOfSequence: 0, drops: 0, messagesSent: 0, messagesReceived: 0,
  };
}

export interface QpTuning {
  /** Max unacknowledged request packets. */
  window: number;
  /** AckReq at least every this many packets. */
  ackReqEvery: number;
}

export class UroceQp implements Qp, EngineQp {
  readonly qpType = QpType.RC;
  readonly sendCq: CompletionQueue;
  readonly recvCq: CompletionQueue;
  readonly stats: QpStats = emptyStats();
  private _state: QpState = QpState.RESET;
  private readonly cap: QpCap;
  private readonly sqSigAll: boolean;
  private destroyed = false;

  // attributes
  private pathMtu: number = 0;
  private mtu = 256;
  private destQpn = 0;
  private rqPsn = 0;
  private sqPsn = 0;
  private accessFlags = 0;
  private minRnrTimer = 0;
  private timeoutCode = 0;
  private timeoutMs = Infinity;
  private retryCnt = 0;
  private rnrRetry = 0;
  private ah: AhAttr | undefined;
  remoteIp = '';
  private tx: TxPort | undefined;
  /** This QP's BTH as encoded by the IB codec (P_Key, DestQP); per packet only the opcode,
   *  SE/PadCnt, AckReq and PSN bytes are patched in place. */
  private bthTpl: Uint8Array = EMPTY;

  // requester
  private sq: SendWqe[] = [];
  private sqHead = 0;
  private nextPsn = 0;
  private txIdx = 0;
  private txPkt = 0;
  private unacked = 0;
  private txHigh = 0;
  private retryLeft = 0;
  private rnrLeft = 0;
  private rnrWait = false;
  private rnrTimer: NodeJS.Timeout | undefined;
  private timer: NodeJS.Timeout | undefined;
  private deadline = 0;
  private lastNakPsn = -1;
  private pumping = false;

  // responder
  private ePsn = 0;
  private msn = 0;
  private rq: RecvWqe[] = [];
  private rqHead = 0;
  /** 0 no message in progress, 1 SEND, 2 RDMA WRITE */
  private inMsg = 0;
  private curRecv: RecvWqe | undefined;
  private curRecvOff = 0;
  private wrBuf: Uint8Array = EMPTY;
  private wrOff = 0;
  private wrLeft = 0;
  private wrTotal = 0;
  private seqNakSent = false;
  private ackPending = false;
  private ackScheduled = false;
  private established = false;

  constructor(readonly qpNum: number, readonly pd: Pd, private readonly dev: UroceDevice, private readonly engine: UroceEngine,
    init: QpInitAttr, private readonly tune: QpTuning) {
    if (init.qpType !== undefined && init.qpType !== QpType.RC) throw new VerbsError('EOPNOTSUPP', `create_qp: uroce implements RC QPs only (qp_type ${init.qpType})`);
    const lim = dev.queryDevice();
    const c = init.cap;
    if (!(c.maxSendWr >= 1 && c.maxSendWr <= lim.maxQpWr) || !(c.maxRecvWr >= 0 && c.maxRecvWr <= lim.maxQpWr)) {
      throw new VerbsError('EINVAL', `create_qp: max_send_wr ${c.maxSendWr} / max_recv_wr ${c.maxRecvWr} outside 1..${lim.maxQpWr}`);
    }
    const sge = (v: number | undefined): number => Math.max(1, v ?? 1);
    if (sge(c.maxSendSge) > lim.maxSge || sge(c.maxRecvSge) > lim.maxSge) throw new VerbsError('EINVAL', `create_qp: more than ${lim.maxSge} SGEs`);
    if ((c.maxInlineData ?? 0) > lim.maxInlineData) throw new VerbsError('EINVAL', `create_qp: max_inline_data above ${lim.maxInlineData}`);
    this.cap = {
      maxSendWr: c.maxSendWr, maxRecvWr: c.maxRecvWr, maxSendSge: sge(c.maxSendSge), maxRecvSge: sge(c.maxRecvSge),
      // like rxe: the inline capacity reported is at least what the SQ entries hold
      maxInlineData: Math.max(c.maxInlineData ?? 0, lim.maxInlineData),
    };
    this.sendCq = init.sendCq as CompletionQueue;
    this.recvCq = init.recvCq as CompletionQueue;
    this.sqSigAll = init.sqSigAll === true;
    this.sendCq.users++;
    this.recvCq.users++;
  }

  get state(): QpState { return this._state; }

  // =====================================================================================
  // modify / query
  // =====================================================================================

  modify(attr: QpAttr, mask?: number): void {
    if (this.destroyed) throw new VerbsError('EINVAL', 'modify_qp on a destroyed QP');
    const m = mask ?? attrMaskOf(attr);
    const cur = this._state;
    const next = (m & QpAttrMask.STATE) ? attr.qpState! : cur;
    checkTransition(cur, m, next, attr.curQpState);
    const port = this.dev.queryPort(1);
    const bad = (what: string): never => { throw new VerbsError('EINVAL', `modify_qp: ${what}`); };
    if ((m & QpAttrMask.PORT) && attr.portNum !== 1) bad(`port ${attr.portNum} (uroce has port 1)`);
    if ((m & QpAttrMask.PKEY_INDEX) && attr.pkeyIndex !== 0) bad(`pkey_index ${attr.pkeyIndex} (only 0)`);
    if ((m & QpAttrMask.PATH_MTU) && !(attr.pathMtu! >= 1 && attr.pathMtu! <= port.maxMtu)) bad(`path_mtu ${attr.pathMtu} (1..${port.maxMtu})`);
    if ((m & QpAttrMask.TIMEOUT) && !(attr.timeout! >= 0 && attr.timeout! <= 31)) bad(`timeout ${attr.timeout}`);
    if ((m & QpAttrMask.RETRY_CNT) && !(attr.retryCnt! >= 0 && attr.retryCnt! <= 7)) bad(`retry_cnt ${attr.retryCnt}`);
    if ((m & QpAttrMask.RNR_RETRY) && !(attr.rnrRetry! >= 0 && attr.rnrRetry! <= 7)) bad(`rnr_retry ${attr.rnrRetry}`);
    if ((m & QpAttrMask.MIN_RNR_TIMER) && !(attr.minRnrTimer! >= 0 && attr.minRnrTimer! <= 31)) bad(`min_rnr_timer ${attr.minRnrTimer}`);
    if ((m & QpAttrMask.DEST_QPN) && !(attr.destQpNum! >= 0 && attr.destQpNum! <= PSN_MASK)) bad(`dest_qp_num ${attr.destQpNum}`);
    if ((m & QpAttrMask.ACCESS_FLAGS) && (attr.qpAccessFlags! & ~(Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ | Access.REMOTE_ATOMIC))) bad(`qp_access_flags 0x${attr.qpAccessFlags!.toString(16)}`);
    let remoteIp = this.remoteIp;
    if (m & QpAttrMask.AV) {
      const ah = attr.ahAttr!;
      if (!ah.isGlobal || !ah.grh) bad('RoCE needs a global route (ah_attr.is_global with a GRH)');
      const g = ah.grh!;
      if (g.sgidIndex < 0 || g.sgidIndex >= this.dev.gidTable(1).length) bad(`sgid_index ${g.sgidIndex}`);
      const ip = gidToIpv4(g.dgid);
      if (!ip) bad(`dgid ${gidText(g.dgid)}: uroce speaks RoCEv2 over IPv4 (IPv4-mapped GIDs) only`);
      remoteIp = ip!;
    }
    // ---- apply ----
    if (m & QpAttrMask.ACCESS_FLAGS) this.accessFlags = attr.qpAccessFlags!;
    if (m & QpAttrMask.PATH_MTU) { this.pathMtu = attr.pathMtu!; this.mtu = mtuBytes(this.pathMtu); }
    if (m & QpAttrMask.DEST_QPN) this.destQpn = attr.destQpNum!;
    if (m & QpAttrMask.RQ_PSN) this.rqPsn = attr.rqPsn! & PSN_MASK;
    if (m & QpAttrMask.SQ_PSN) this.sqPsn = attr.sqPsn! & PSN_MASK;
    if (m & QpAttrMask.MIN_RNR_TIMER) this.minRnrTimer = attr.minRnrTimer!;
    if (m & QpAttrMask.TIMEOUT) { this.timeoutCode = attr.timeout!; this.timeoutMs = Math.max(1, ackTimeoutMs(attr.timeout!)); }
    if (m & QpAttrMask.RETRY_CNT) this.retryCnt = attr.retryCnt!;
    if (m & QpAttrMask.RNR_RETRY) this.rnrRetry = attr.rnrRetry!;
    if (m & QpAttrMask.AV) { this.ah = structuredClone(attr.ahAttr!); this.remoteIp = remoteIp; }

    if (next === cur && !(m & QpAttrMask.STATE)) return;
    switch (next) {
      case QpState.RESET: this.reset(); break;
      case QpState.INIT: break;
      case QpState.RTR:
        if (cur !== QpState.RTR) {
          this.ePsn = this.rqPsn;
          this.msn = 0;
          this.inMsg = 0;
          this.seqNakSent = false;
          this.openTx();
        }
        break;
      case QpState.RTS:
        if (cur === QpState.RTR) {
          this.nextPsn = this.sqPsn;
          this.unacked = this.sqPsn;
          this.txHigh = this.sqPsn;
          this.retryLeft = this.retryCnt;
          this.rnrLeft = this.rnrRetry;
        }
        break;
      case QpState.ERR: this._state = QpState.ERR; this.flushAll(); return;
      default: break;
    }
    this._state = next;
    if (next === QpState.RTS) this.pump();
  }

  query(): ReturnType<Qp['query']> {
    return {
      qpState: this._state, pathMtu: (this.pathMtu || Mtu.MTU_256) as Mtu, rqPsn: this.ePsn, sqPsn: this.nextPsn, destQpNum: this.destQpn,
      qpAccessFlags: this.accessFlags, minRnrTimer: this.minRnrTimer, timeout: this.timeoutCode, retryCnt: this.retryCnt,
      rnrRetry: this.rnrRetry, ...(this.ah ? { ahAttr: structuredClone(this.ah) } : {}), cap: { ...this.cap },
    };
  }

  /** UDP source port in use (0 before RTR). */
  get sourcePort(): number { return this.tx?.port ?? 0; }

  private openTx(): void {
    this.bthTpl = encodeBth({
      opcode: 0, se: false, migReq: false, padCount: 0, tver: 0, pkey: 0xffff, fecn: false, becn: false, resv6: 0,
      destQp: this.destQpn, ackReq: false, resv7: 0, psn: 0,
    });
    const g = this.ah!.grh!;
    const want = roceSourcePort(g.flowLabel ?? 0, this.qpNum, this.destQpn);
    const ttl = g.hopLimit > 0 ? g.hopLimit : 64;
    const tos = g.trafficClass & 0xff;
    this.closeTx();
    const o = openSocketSync({ address: this.engine.address, port: want, tos, ttl, sndbuf: 1 << 20, fallbackToAnyPort: true });
    const tx: TxPort = { sock: o.exact ? o.sock : undefined, port: o.port, ttl, tos, net: new NetHeader(this.engine.address, this.remoteIp, o.port, 4791, ttl, tos), ...(o.fd !== undefined ? { fd: o.fd } : {}) };
    this.tx = tx;
    const attach = (): void => {
      if (this.tx !== tx) { try { o.sock.close(); } catch { /* closed */ } return; } // QP reset/destroyed meanwhile
      tx.sock = o.sock;
      tx.port = o.port;
      o.sock.on('error', () => { this.engine.stats.txErrors++; });
      (tx as { net: NetHeader }).net = new NetHeader(this.engine.address, this.remoteIp, o.port, 4791, ttl, tos);
      this.engine.flushQueued(tx, this.remoteIp);
    };
    if (o.exact) o.sock.on('error', () => { this.engine.stats.txErrors++; });
    else o.ready.then(attach, () => { this.engine.stats.txErrors++; });
  }

  private closeTx(): void {
    const t = this.tx;
    this.tx = undefined;
    if (t) this.engine.flushPort(t);
    if (t?.sock) { try { t.sock.close(); } catch { /* already closed */ } }
  }

  // =====================================================================================
  // posting
  // =====================================================================================

  private resolve(sgl: readonly Sge[] | undefined, forRecv: boolean): { segs: Uint8Array[]; length: number; err: number } {
    const segs: Uint8Array[] = [];
    let length = 0;
    let err = 0;
    for (const s of sgl ?? []) {
      if (!(s.length >= 0)) { err = WcStatus.LOC_LEN_ERR; break; }
      if (s.length === 0) continue;
      const mr: UroceMr | undefined = this.dev.mrByLkey(s.lkey);
      if (!mr || mr.pd !== this.pd || s.addr < mr.addr || s.addr + BigInt(s.length) > mr.addr + BigInt(mr.length) ||
        (forRecv && !(mr.access & Access.LOCAL_WRITE))) { err = WcStatus.LOC_PROT_ERR; break; }
      const off = Number(s.addr - mr.addr);
      segs.push(mr.buffer.subarray(off, off + s.length));
      length += s.length;
    }
    if (length > 0x80000000) err = WcStatus.LOC_LEN_ERR;
    return { segs, length, err };
  }

  postSend(wrs: SendWr | readonly SendWr[]): void {
    const list: readonly SendWr[] = Array.isArray(wrs) ? wrs : [wrs as SendWr];
    for (let i = 0; i < list.length; i++) {
      const wr = list[i]!;
      if (this.destroyed) throw new VerbsError('EINVAL', 'post_send on a destroyed QP', i);
      const st = this._state;
      if (st === QpState.ERR) { this.pushSendWc(wr.wrId, WcStatus.WR_FLUSH_ERR, wr.opcode, 0); continue; }
      if (st !== QpState.RTS && st !== QpState.SQD) throw new VerbsError('EINVAL', `post_send: QP ${this.qpNum} is in ${qpStateName(st)}`, i);
      const op = wr.opcode;
      if (op !== WrOpcode.SEND && op !== WrOpcode.SEND_WITH_IMM && op !== WrOpcode.RDMA_WRITE && op !== WrOpcode.RDMA_WRITE_WITH_IMM) {
        throw new VerbsError('EINVAL', `post_send: opcode ${op} not supported by uroce (SEND, SEND_WITH_IMM, RDMA_WRITE, RDMA_WRITE_WITH_IMM)`, i);
      }
      if (this.sq.length - this.sqHead >= this.cap.maxSendWr) throw new VerbsError('ENOMEM', `post_send: send queue full (${this.cap.maxSendWr} WRs)`, i);
      const flags = wr.sendFlags ?? 0;
      const isWrite = op === WrOpcode.RDMA_WRITE || op === WrOpcode.RDMA_WRITE_WITH_IMM;
      if (isWrite && !wr.rdma) throw new VerbsError('EINVAL', 'post_send: RDMA WRITE without rdma.remoteAddr/rkey', i);
      if ((op === WrOpcode.SEND_WITH_IMM || op === WrOpcode.RDMA_WRITE_WITH_IMM) && wr.immData === undefined) throw new VerbsError('EINVAL', 'post_send: WITH_IMM without immData', i);
      let segs: Uint8Array[];
      let length: number;
      let err = 0;
      if (flags & SendFlags.INLINE) {
        let data: Uint8Array;
        if (wr.inlineData) data = wr.inlineData.slice();
        else {
          if ((wr.sgList?.length ?? 0) > this.cap.maxSendSge) throw new VerbsError('EINVAL', `post_send: ${wr.sgList!.length} SGEs > max_send_sge ${this.cap.maxSendSge}`, i);
          // Inline: the bytes are copied now; lkeys are not checked (libibverbs semantics), the addresses must be registered memory.
          const r = this.resolveInline(wr.sgList ?? []);
          if (!r) throw new VerbsError('EINVAL', 'post_send: INLINE data address is not in registered memory', i);
          data = r;
        }
        if (data.length > this.cap.maxInlineData) throw new VerbsError('EINVAL', `post_send: ${data.length} inline bytes > max_inline_data ${this.cap.maxInlineData}`, i);
        segs = data.length ? [data] : [];
        length = data.length;
      } else {
        if (wr.inlineData) throw new VerbsError('EINVAL', 'post_send: inlineData needs the INLINE flag', i);
        if ((wr.sgList?.length ?? 0) > this.cap.maxSendSge) throw new VerbsError('EINVAL', `post_send: ${wr.sgList!.length} SGEs > max_send_sge ${this.cap.maxSendSge}`, i);
        const r = this.resolve(wr.sgList, false);
        segs = r.segs; length = r.length; err = r.err;
      }
      const npkts = err ? 0 : Math.max(1, Math.ceil(length / this.mtu));
      const w: SendWqe = {
        wrId: wr.wrId, opcode: op, signaled: this.sqSigAll || (flags & SendFlags.SIGNALED) !== 0,
        solicited: (flags & SendFlags.SOLICITED) !== 0, immData: wr.immData, rkey: wr.rdma?.rkey ?? 0, remoteAddr: wr.rdma?.remoteAddr ?? 0n,
        segs, length, firstPsn: this.nextPsn, lastPsn: (this.nextPsn + Math.max(npkts, 1) - 1) & PSN_MASK, npkts, localErr: err,
      };
      this.nextPsn = (this.nextPsn + npkts) & PSN_MASK;
      this.sq.push(w);
    }
    this.pump();
  }

  private resolveInline(sgl: readonly Sge[]): Uint8Array | undefined {
    let n = 0;
    for (const s of sgl) n += s.length;
    const out = new Uint8Array(n);
    let o = 0;
    for (const s of sgl) {
      if (s.length === 0) continue;
      const mr = this.dev.mrByLkey(s.lkey) ?? this.dev.mrByAddr(s.addr, s.length);
      if (!mr || s.addr < mr.addr || s.addr + BigInt(s.length) > mr.addr + BigInt(mr.length)) return undefined;
      const off = Number(s.addr - mr.addr);
      out.set(mr.buffer.subarray(off, off + s.length), o);
      o += s.length;
    }
    return out;
  }

  postRecv(wrs: RecvWr | readonly RecvWr[]): void {
    const list: readonly RecvWr[] = Array.isArray(wrs) ? wrs : [wrs as RecvWr];
    for (let i = 0; i < list.length; i++) {
      const wr = list[i]!;
      if (this.destroyed) throw new VerbsError('EINVAL', 'post_recv on a destroyed QP', i);
      if (this._state === QpState.RESET) throw new VerbsError('EINVAL', `post_recv: QP ${this.qpNum} is in RESET`, i);
      if (this._state === QpState.ERR) {
        this.pushRecvWc({ wrId: wr.wrId, status: WcStatus.WR_FLUSH_ERR, opcode: WcOpcode.RECV, vendorErr: 0, byteLen: 0, qpNum: this.qpNum, srcQp: this.destQpn, wcFlags: 0 }, false);
        continue;
      }
      if (wr.sgList.length > this.cap.maxRecvSge) throw new VerbsError('EINVAL', `post_recv: ${wr.sgList.length} SGEs > max_recv_sge ${this.cap.maxRecvSge}`, i);
      if (this.rq.length - this.rqHead >= this.cap.maxRecvWr) throw new VerbsError('ENOMEM', `post_recv: receive queue full (${this.cap.maxRecvWr} WRs)`, i);
      const r = this.resolve(wr.sgList, true);
      this.rq.push({ wrId: wr.wrId, segs: r.segs, length: r.length, localErr: r.err });
    }
  }

  // =====================================================================================
  // completions
  // =====================================================================================

  private pushSendWc(wrId: WrId, status: number, wrOpcode: number, len: number): void {
    const opcode = wrOpcode === WrOpcode.RDMA_WRITE || wrOpcode === WrOpcode.RDMA_WRITE_WITH_IMM ? WcOpcode.RDMA_WRITE : WcOpcode.SEND;
    const wc: WorkCompletion = { wrId, status: status as WorkCompletion['status'], opcode, vendorErr: 0, byteLen: len, qpNum: this.qpNum, srcQp: 0, wcFlags: 0 };
    this.sendCq.push(wc, false);
  }

  private pushRecvWc(wc: WorkCompletion, solicited: boolean): void {
    this.recvCq.push(wc, solicited);
  }

  /** Complete SQ WQEs whose last packet is acknowledged (PSN <= psn). */
  private completeUpTo(psn: number): void {
    while (this.sqHead < this.sq.length) {
      const w = this.sq[this.sqHead]!;
      if (w.localErr || psnDiff(w.lastPsn, psn) > 0) break;
      if (this.sqHead === this.txIdx) break; // not (fully) sent yet
      this.sqHead++;
      this.stats.messagesSent++;
      if (w.signaled) this.pushSendWc(w.wrId, WcStatus.SUCCESS, w.opcode, w.length);
    }
    this.compactSq();
  }

  private compactSq(): void {
    if (this.sqHead > 256 && this.sqHead * 2 > this.sq.length) {
      this.sq = this.sq.slice(this.sqHead);
      this.txIdx -= this.sqHead;
      this.sqHead = 0;
    }
  }

  // =====================================================================================
  // requester: transmit
  // =====================================================================================

  private pump(): void {
    if (this.pumping || this.rnrWait) return;
    const st = this._state;
    if (st !== QpState.RTS && st !== QpState.SQD) return;
    this.pumping = true;
    // A coalesced ACK still waiting goes out before new requests (it would otherwise trail
    // them by an event-loop turn: request/response protocols wait for it).
    // (unless it waits for the engine's transmit flush: then it follows them in the same one)
    if (this.ackPending && this.txIdx < this.sq.length && !this.engine.ackDeferred(this)) this.flushAck();
    try {
      const win = this.tune.window;
      while (this.txIdx < this.sq.length) {
        const w = this.sq[this.txIdx]!;
        if (w.localErr) {
          if (this.txIdx === this.sqHead) { this.requesterError(w.localErr, 'local error in the work request'); return; }
          break;
        }
        const psn = (w.firstPsn + this.txPkt) & PSN_MASK;
        const inflight = psnDiff(psn, this.unacked);
        if (inflight >= win) break;
        const wasIdle = this.unacked === this.txHigh;
        this.sendRequest(w, this.txPkt, psn, inflight + 1 >= win || (inflight + 1) % this.tune.ackReqEvery === 0);
        if (psnDiff(psn, this.txHigh) >= 0) this.txHigh = (psn + 1) & PSN_MASK;
        else this.stats.retransmits++;
        if (wasIdle) this.deadline = performance.now() + this.timeoutMs;
        if (++this.txPkt >= w.npkts) { this.txIdx++; this.txPkt = 0; }
      }
    } finally {
      this.pumping = false;
    }
    this.armTimer();
  }

  /** Copy `len` bytes of the WQE's gather list from offset `off` into out[at …]. */
  private gatherInto(w: SendWqe, off: number, len: number, out: Uint8Array, at: number): void {
    const segs = w.segs;
    let i = 0;
    while (i < segs.length && off >= segs[i]!.length) { off -= segs[i]!.length; i++; }
    let o = 0;
    while (o < len) {
      const s = segs[i++]!;
      const n = Math.min(s.length - off, len - o);
      out.set(off === 0 && n === s.length ? s : s.subarray(off, off + n), at + o);
      o += n;
      off = 0;
    }
  }

  private sendRequest(w: SendWqe, k: number, psn: number, windowAck: boolean): void {
    const mtu = this.mtu;
    const off = k * mtu;
    const len = Math.min(mtu, w.length - off);
    const first = k === 0, last = k === w.npkts - 1;
    const isWrite = w.opcode === WrOpcode.RDMA_WRITE || w.opcode === WrOpcode.RDMA_WRITE_WITH_IMM;
    const imm = w.opcode === WrOpcode.SEND_WITH_IMM || w.opcode === WrOpcode.RDMA_WRITE_WITH_IMM;
    let opcode: number;
    if (isWrite) {
      if (first && last) opcode = imm ? IB_OP.RDMA_WRITE_ONLY_IMM : IB_OP.RDMA_WRITE_ONLY;
      else if (first) opcode = IB_OP.RDMA_WRITE_FIRST;
      else if (last) opcode = imm ? IB_OP.RDMA_WRITE_LAST_IMM : IB_OP.RDMA_WRITE_LAST;
      else opcode = IB_OP.RDMA_WRITE_MIDDLE;
    } else {
      if (first && last) opcode = imm ? 0x05 : IB_OP.SEND_ONLY;
      else if (first) opcode = IB_OP.SEND_FIRST;
      else if (last) opcode = imm ? 0x03 : IB_OP.SEND_LAST;
      else opcode = IB_OP.SEND_MIDDLE;
    }
    const pad = ibPadFor(len);
    const withReth = isWrite && first, withImm = imm && last;
    const hdr = BTH_LEN + (withReth ? 16 : 0) + (withImm ? 4 : 0);
    // Built in place, in the engine's staging buffer: BTH template (P_Key, DestQP from the
    // IB codec) with this packet's fields, RETH / ImmDt, payload, pad; the engine adds the ICRC.
    const pkt = this.engine.txAlloc(this.tx!, hdr + len + pad + ICRC_LEN);
    pkt.set(this.bthTpl, 0);
    pkt[0] = opcode;
    pkt[1] = (last && w.solicited && (!isWrite || imm) ? 0x80 : 0) | (pad << 4); // SE, M 0, PadCnt, TVer 0
    pkt[8] = last || windowAck ? 0x80 : 0; // AckReq
    put24(pkt, 9, psn);
    if (withReth) pkt.set(w.reth ??= encodeReth({ va: w.remoteAddr, rkey: w.rkey, dmaLen: w.length }), BTH_LEN);
    if (withImm) put32(pkt, hdr - 4, w.immData! >>> 0);
    if (len) this.gatherInto(w, off, len, pkt, hdr);
    for (let i = hdr + len, e = hdr + len + pad; i < e; i++) pkt[i] = 0;
    this.stats.txPackets++;
    this.stats.txBytes += pkt.length;
    this.engine.transmit(this.tx!, pkt, this.remoteIp);
  }

  /** Move the transmit position to `psn` (go-back-N). */
  private goBack(psn: number): void {
    for (let i = this.sqHead; i < this.sq.length; i++) {
      const w = this.sq[i]!;
      if (w.localErr) { this.txIdx = i; this.txPkt = 0; return; }
      if (psnDiff(psn, w.firstPsn) >= 0 && psnDiff(psn, w.lastPsn) <= 0) { this.txIdx = i; this.txPkt = psnDiff(psn, w.firstPsn); return; }
    }
    this.txIdx = this.sq.length;
    this.txPkt = 0;
  }

  private txPsn(): number {
    const w = this.sq[this.txIdx];
    return w ? (w.firstPsn + this.txPkt) & PSN_MASK : this.nextPsn;
  }

  // =====================================================================================
  // requester: timers
  // =====================================================================================

  // The timer is not cleared when everything is acknowledged: request/response traffic would
  // create and cancel a Node timer per message (≈2 % of an SMC-R round trip's CPU). An idle QP's
  // timer fires once more and finds nothing outstanding; a pending one always expires at or
  // before the current deadline (deadlines only move later), and onTimer re-arms for the rest.
  private armTimer(): void {
    if (this.timeoutMs === Infinity || this.rnrWait || this.unacked === this.txHigh || this.destroyed) return;
    if (this.timer) return;
    const wait = Math.max(1, this.deadline - performance.now());
    this.timer = setTimeout(this.onTimerFn, wait);
  }
  private readonly onTimerFn = (): void => this.onTimer();

  private onTimer(): void {
    this.timer = undefined;
    if ((this._state !== QpState.RTS && this._state !== QpState.SQD) || this.rnrWait || this.unacked === this.txHigh) return;
    const now = performance.now();
    if (now < this.deadline - 0.25) { this.armTimer(); return; }
    this.stats.timeouts++;
    if (this.retryLeft <= 0) { this.requesterError(WcStatus.RETRY_EXC_ERR, 'transport retry counter exceeded'); return; }
    this.retryLeft--;
    this.goBack(this.unacked);
    this.lastNakPsn = -1;
    this.deadline = now + this.timeoutMs;
    this.pump();
  }

  // =====================================================================================
  // requester: responses
  // =====================================================================================

  private onResponse(p: IbPacket): void {
    const a = p.aeth;
    if (!a) { this.stats.drops++; return; }
    if (this._state !== QpState.RTS && this._state !== QpState.SQD) { this.stats.drops++; return; }
    const psn = p.bth.psn;
    // Valid: acknowledges something in [unacked - 1, txHigh - 1].
    if (psnDiff(psn, this.unacked) < -1 || psnDiff(psn, this.txHigh) >= 0) { this.stats.drops++; return; }
    if (a.kind === 'ACK') {
      this.stats.acksReceived++;
      this.ackUpTo(psn);
      this.pump();
      return;
    }
    // A NAK names the PSN the responder expects, never one already acknowledged: below the
    // oldest unacknowledged PSN it is a stale copy (duplicated or reordered on the way), and
    // going back to it would skip the queue entries not sent yet (rxe drops it the same way).
    if (psnDiff(psn, this.unacked) < 0) { this.stats.drops++; return; }
    this.ackUpTo((psn - 1) & PSN_MASK);
    if (a.kind === 'RNR NAK') {
      this.stats.rnrNaksReceived++;
      if (psnDiff(psn, this.unacked) !== 0 || this.rnrWait) { this.pump(); return; }
      if (this.rnrRetry !== 7) {
        if (this.rnrLeft <= 0) { this.requesterError(WcStatus.RNR_RETRY_EXC_ERR, 'RNR retry counter exceeded'); return; }
        this.rnrLeft--;
      }
      this.goBack(psn);
      this.rnrWait = true;
      if (this.timer) { clearTimeout(this.timer); this.timer = undefined; }
      this.rnrTimer = setTimeout(() => {
        this.rnrTimer = undefined;
        this.rnrWait = false;
        this.deadline = performance.now() + this.timeoutMs;
        this.pump();
      }, Math.max(1, rnrTimerMs(a.code)));
      return;
    }
    if (a.kind !== 'NAK') { this.stats.drops++; return; }
    this.stats.naksReceived++;
    switch (a.code) {
      case NAK_SEQ:
        this.stats.seqNaksReceived++;
        if (this.rnrWait || psn === this.lastNakPsn) { this.pump(); return; }
        this.lastNakPsn = psn;
        this.goBack(psn);
        this.deadline = performance.now() + this.timeoutMs;
        this.pump();
        return;
      case NAK_INV_REQ: this.requesterError(WcStatus.REM_INV_REQ_ERR, 'NAK invalid request'); return;
      case NAK_REM_ACCESS: this.requesterError(WcStatus.REM_ACCESS_ERR, 'NAK remote access error'); return;
      case NAK_REM_OP: this.requesterError(WcStatus.REM_OP_ERR, 'NAK remote operational error'); return;
      default: this.requesterError(WcStatus.BAD_RESP_ERR, `NAK code ${a.code}`); return;
    }
  }

  private ackUpTo(psn: number): void {
    if (psnDiff(psn, this.unacked) < 0) return;
    this.unacked = (psn + 1) & PSN_MASK;
    this.retryLeft = this.retryCnt;
    this.rnrLeft = this.rnrRetry;
    this.lastNakPsn = -1;
    this.deadline = performance.now() + this.timeoutMs;
    if (psnDiff(this.txPsn(), this.unacked) < 0) this.goBack(this.unacked);
    this.completeUpTo(psn);
  }

  /** Complete the head WQE with an error and move the QP to ERR (flushing the rest). */
  private requesterError(status: number, _reason: string): void {
    const w = this.sq[this.sqHead];
    if (w) {
      this.sqHead++;
      this.pushSendWc(w.wrId, status, w.opcode, 0);
    }
    this._state = QpState.ERR;
    this.flushAll();
  }

  // =====================================================================================
  // responder
  // =====================================================================================

  /** Engine entry point: a packet for this QPN that passed ICRC/P_Key/source checks. */
  receive(buf: Uint8Array): void {
    const d = UroceEngine.decode(buf);
    const p = d.value;
    for (const i of d.issues) if (i.severity === 'error') { this.engine.stats.malformed++; return; }
    this.stats.rxPackets++;
    this.stats.rxBytes += buf.length;
    const info = opcodeInfo(p.bth.opcode);
    if (info.isAck) { this.onResponse(p); return; }
    const st = this._state;
    if (st !== QpState.RTR && st !== QpState.RTS && st !== QpState.SQD) { this.stats.drops++; return; }
    if (!this.established) {
      this.established = true;
      this.dev.emitAsync({ type: AsyncEventType.COMM_EST, qp: this });
    }
    this.onRequest(p, info);
  }

  private sendAck(kind: 'ACK' | 'RNR NAK' | 'NAK', code: number, psn: number): void {
    if (!this.tx) return;
    const bth: Bth = {
      opcode: IB_OP.ACKNOWLEDGE, se: false, migReq: false, padCount: 0, tver: 0, pkey: 0xffff, fecn: false, becn: false, resv6: 0,
      destQp: this.destQpn, ackReq: false, resv7: 0, psn: psn & PSN_MASK,
    };
    const pkt = encodeIbPacket({ bth, aeth: makeAeth(kind, code, this.msn), payload: EMPTY, padCount: 0, icrc: 0 });
    this.stats.txPackets++;
    this.stats.txBytes += pkt.length;
    if (kind === 'ACK') this.stats.acksSent++;
    else if (kind === 'RNR NAK') this.stats.rnrNaksSent++;
    else { this.stats.naksSent++; if (code === NAK_SEQ) this.stats.seqNaksSent++; }
    this.engine.transmit(this.tx, pkt, this.remoteIp);
  }

  private scheduleAck(): void {
    this.ackPending = true;
    // Inside a native receive batch: one ACK per QP at the end of the batch.
    if (this.engine.inBatch) { this.engine.deferAck(this); return; }
    if (this.ackScheduled) return;
    this.ackScheduled = true;
    setImmediate(() => {
      this.ackScheduled = false;
      this.flushAck();
    });
  }

  /** Send the pending (coalesced) ACK for the newest PSN. */
  flushAck(): void {
    if (!this.ackPending) return;
    this.ackPending = false;
    const st = this._state;
    if (st === QpState.RTR || st === QpState.RTS || st === QpState.SQD) this.sendAck('ACK', 31, (this.ePsn - 1) & PSN_MASK);
  }

  private nak(code: number, psn: number): void {
    this.ackPending = false;
    this.sendAck('NAK', code, psn);
  }

  /** Responder detected an error (class C): NAK, complete the receive in progress, QP to ERR, async event. */
  private responderError(nakCode: number, recvStatus: number, event: AsyncEventType, reason: string): void {
    this.nak(nakCode, this.ePsn);
    if (this.curRecv) {
      const r = this.curRecv;
      this.curRecv = undefined;
      this.pushRecvWc({ wrId: r.wrId, status: recvStatus as WorkCompletion['status'], opcode: WcOpcode.RECV, vendorErr: 0, byteLen: 0, qpNum: this.qpNum, srcQp: this.destQpn, wcFlags: 0 }, false);
    }
    this._state = QpState.ERR;
    this.flushAll();
    this.dev.emitAsync({ type: event as AsyncEventType, qp: this, reason });
  }

  private takeRecv(): RecvWqe | undefined {
    if (this.rqHead >= this.rq.length) return undefined;
    const r = this.rq[this.rqHead++]!;
    if (this.rqHead === this.rq.length) { this.rq = []; this.rqHead = 0; }
    else if (this.rqHead > 256 && this.rqHead * 2 > this.rq.length) { this.rq = this.rq.slice(this.rqHead); this.rqHead = 0; }
    return r;
  }

  private hasRecv(): boolean { return this.rqHead < this.rq.length; }

  private onRequest(p: IbPacket, info: ReturnType<typeof opcodeInfo>): void {
    const psn = p.bth.psn;
    const d = psnDiff(psn, this.ePsn);
    if (d < 0) {
      this.stats.duplicates++;
      this.scheduleAck();
      return;
    }
    if (d > 0) {
      this.stats.outOfSequence++;
      if (!this.seqNakSent) { this.seqNakSent = true; this.nak(NAK_SEQ, this.ePsn); }
      return;
    }
    const n = p.payload.length;
    const mtu = this.mtu;
    if (info.isFirst || info.isMiddle ? n !== mtu : n > mtu || (info.isLast && n === 0)) { this.invalidRequest(`${info.name} with ${n} payload bytes (path MTU ${mtu})`); return; }

    if (info.isSend && !info.withInvalidate) {
      if (info.isFirst || info.isOnly) {
        if (this.inMsg !== 0) { this.invalidRequest(`${info.name} inside a message`); return; }
        if (!this.hasRecv()) {
          this.ackPending = false;
          this.sendAck('RNR NAK', this.minRnrTimer, psn);
          this.seqNakSent = true; // drop what follows until this PSN comes again
          return;
        }
        this.curRecv = this.takeRecv()!;
        this.curRecvOff = 0;
        this.inMsg = 1;
        if (this.curRecv.localErr) {
          this.responderError(NAK_REM_OP, this.curRecv.localErr, AsyncEventType.QP_FATAL, 'receive WQE with a bad SGE');
          return;
        }
      } else if (this.inMsg !== 1) { this.invalidRequest(`${info.name} without SEND FIRST`); return; }
      const r = this.curRecv!;
      if (this.curRecvOff + n > r.length) {
        this.responderError(NAK_INV_REQ, WcStatus.LOC_LEN_ERR, AsyncEventType.QP_REQ_ERR, `SEND of more than the ${r.length}-byte receive buffer`);
        return;
      }
      if (n) this.scatter(r, this.curRecvOff, p.payload);
      this.curRecvOff += n;
      if (info.isLast || info.isOnly) {
        this.inMsg = 0;
        this.curRecv = undefined;
        this.msn = (this.msn + 1) & PSN_MASK;
        this.stats.messagesReceived++;
        const wc: WorkCompletion = {
          wrId: r.wrId, status: WcStatus.SUCCESS, opcode: WcOpcode.RECV, vendorErr: 0, byteLen: this.curRecvOff,
          qpNum: this.qpNum, srcQp: this.destQpn, wcFlags: info.withImmediate ? WcFlags.WITH_IMM : 0,
        };
        if (info.withImmediate) wc.immData = p.immDt! >>> 0;
        this.pushRecvWc(wc, p.bth.se);
      }
    } else if (info.isWrite && !(p.bth.opcode & 0x10)) {
      const ends = info.isLast || info.isOnly;
      if (ends && info.withImmediate && !this.hasRecv()) {
        this.ackPending = false;
        this.sendAck('RNR NAK', this.minRnrTimer, psn);
        this.seqNakSent = true;
        return;
      }
      if (info.isFirst || info.isOnly) {
        if (this.inMsg !== 0) { this.invalidRequest(`${info.name} inside a message`); return; }
        const reth = p.reth!;
        const len = reth.dmaLen >>> 0;
        if (len === 0) {
          this.wrBuf = EMPTY; this.wrOff = 0;
        } else {
          const mr = this.dev.mrByRkey(reth.rkey);
          const why = !mr ? `rkey 0x${reth.rkey.toString(16)} unknown`
            : mr.pd !== this.pd ? `rkey 0x${reth.rkey.toString(16)} belongs to another PD`
            : !(mr.access & Access.REMOTE_WRITE) ? `MR rkey 0x${reth.rkey.toString(16)} has no remote write access`
            : !(this.accessFlags & Access.REMOTE_WRITE) ? 'QP does not allow remote write'
            : reth.va < mr.addr || reth.va + BigInt(len) > mr.addr + BigInt(mr.length) ? `va 0x${reth.va.toString(16)}+${len} outside the MR`
            : '';
          if (why) { this.responderError(NAK_REM_ACCESS, WcStatus.REM_ACCESS_ERR, AsyncEventType.QP_ACCESS_ERR, why); return; }
          this.wrBuf = mr!.buffer;
          this.wrOff = Number(reth.va - mr!.addr);
        }
        this.wrLeft = len;
        this.wrTotal = len;
        this.inMsg = 2;
      } else if (this.inMsg !== 2) { this.invalidRequest(`${info.name} without RDMA WRITE FIRST`); return; }
      if (n > this.wrLeft) { this.invalidRequest(`RDMA WRITE beyond its DMA length ${this.wrTotal}`); return; }
      if (n) { this.wrBuf.set(p.payload, this.wrOff); this.wrOff += n; this.wrLeft -= n; }
      if (ends) {
        if (this.wrLeft !== 0) { this.invalidRequest(`RDMA WRITE ended ${this.wrLeft} bytes short of its DMA length ${this.wrTotal}`); return; }
        this.inMsg = 0;
        this.msn = (this.msn + 1) & PSN_MASK;
        this.stats.messagesReceived++;
        if (info.withImmediate) {
          const r = this.takeRecv()!;
          this.pushRecvWc({
            wrId: r.wrId, status: WcStatus.SUCCESS, opcode: WcOpcode.RECV_RDMA_WITH_IMM, vendorErr: 0, byteLen: this.wrTotal,
            immData: p.immDt! >>> 0, qpNum: this.qpNum, srcQp: this.destQpn, wcFlags: WcFlags.WITH_IMM,
          }, p.bth.se);
        }
      }
    } else {
      this.invalidRequest(`${info.name} not supported by uroce`);
      return;
    }
    this.ePsn = (this.ePsn + 1) & PSN_MASK;
    this.seqNakSent = false;
    if (p.bth.ackReq) {
      // The end of a message is acknowledged before the application sees the receive
      // completion (which it may answer by destroying the QP), as an RNIC does: at once, or,
      // inside a native receive batch, at the end of the batch (completions reach the
      // application only after it). AckReq inside a message and re-ACKs of duplicates are
      // coalesced to one ACK per batch or event-loop turn.
      if ((info.isLast || info.isOnly) && !this.engine.inBatch) { this.ackPending = true; this.flushAck(); }
      else this.scheduleAck();
    }
  }

  /** Invalid request (class C): NAK invalid request, QP to ERR, IBV_EVENT_QP_REQ_ERR. */
  private invalidRequest(why: string): void {
    this.responderError(NAK_INV_REQ, WcStatus.REM_INV_REQ_ERR, AsyncEventType.QP_REQ_ERR, why);
  }

  private scatter(r: RecvWqe, off: number, data: Uint8Array): void {
    const segs = r.segs;
    let i = 0;
    while (off >= segs[i]!.length) { off -= segs[i]!.length; i++; }
    let o = 0;
    while (o < data.length) {
      const s = segs[i++]!;
      const k = Math.min(s.length - off, data.length - o);
      s.set(data.subarray(o, o + k), off);
      o += k;
      off = 0;
    }
  }

  // =====================================================================================
  // errors, reset, destroy
  // =====================================================================================

  private stopTimers(): void {
    if (this.timer) { clearTimeout(this.timer); this.timer = undefined; }
    if (this.rnrTimer) { clearTimeout(this.rnrTimer); this.rnrTimer = undefined; }
    this.rnrWait = false;
  }

  /** QP in ERR: every outstanding WR completes with WR_FLUSH_ERR. */
  private flushAll(): void {
    this.stopTimers();
    this.ackPending = false;
    for (let i = this.sqHead; i < this.sq.length; i++) this.pushSendWc(this.sq[i]!.wrId, WcStatus.WR_FLUSH_ERR, this.sq[i]!.opcode, 0);
    this.sq = []; this.sqHead = 0; this.txIdx = 0; this.txPkt = 0;
    if (this.curRecv) {
      this.pushRecvWc({ wrId: this.curRecv.wrId, status: WcStatus.WR_FLUSH_ERR, opcode: WcOpcode.RECV, vendorErr: 0, byteLen: 0, qpNum: this.qpNum, srcQp: this.destQpn, wcFlags: 0 }, false);
      this.curRecv = undefined;
    }
    for (let i = this.rqHead; i < this.rq.length; i++) {
      this.pushRecvWc({ wrId: this.rq[i]!.wrId, status: WcStatus.WR_FLUSH_ERR, opcode: WcOpcode.RECV, vendorErr: 0, byteLen: 0, qpNum: this.qpNum, srcQp: this.destQpn, wcFlags: 0 }, false);
    }
    this.rq = []; this.rqHead = 0;
    this.inMsg = 0;
  }

  /** The CQ of this QP overran: to ERR (as hardware does). */
  cqOverrun(): void {
    if (this._state === QpState.RESET || this._state === QpState.ERR) return;
    this._state = QpState.ERR;
    this.flushAll();
  }

  private reset(): void {
    this.stopTimers();
    this.sq = []; this.sqHead = 0; this.txIdx = 0; this.txPkt = 0;
    this.rq = []; this.rqHead = 0;
    this.curRecv = undefined;
    this.inMsg = 0;
    this.ackPending = false;
    this.established = false;
    this.closeTx();
    this.remoteIp = '';
    this.ah = undefined;
  }

  destroy(): void {
    if (this.destroyed) return;
    this.flushAck();
    this.reset();
    this.destroyed = true;
    this._state = QpState.RESET;
    this.sendCq.users--;
    this.recvCq.users--;
    this.dev.qpDestroyed(this);
  }
}
