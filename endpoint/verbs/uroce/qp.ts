// An RC queue pair of the userspace RoCEv2 engine (IBA vol. 1 ch. 9, RC transport), split the
// way Linux rxe is: this class holds the QP's state and its verbs (modify, query, post), and
// delegates the transport work to
//   requester.ts  (rxe_req.c)  request packets, PSNs, window, go-back-N, RNR wait;
//   responder.ts  (rxe_resp.c) request validation, placement into MRs, receive completions, ACK/NAK;
//   completer.ts  (rxe_comp.c) ACK/NAK handling, send completions, retransmission timeout.
// Received packets are read through one RxPacket (the wire layer's BTH/RETH/AETH tables, each
// header read in one call) and request packets are built in place in the engine's staging buffer: no
// allocation per packet on either side.
//
// The state fields are public so that the three parts can share them, as rxe's do through
// struct rxe_qp; nothing outside endpoint/verbs/uroce touches them (the Qp interface is the API).

import { ROCE_V2_PORT } from '../../../dissectors/wire/ib.js';
import {
  Access, AsyncEventType, Mtu, QpAttrMask, QpState, QpType, SendFlags, VerbsError, WcOpcode, WcStatus, WrOpcode,
  ackTimeoutMs, addrBig, attrMaskOf, exactAddr, gidText, gidToIpv4, mtuBytes, qpStateName,
  type AhAttr, type Pd, type Qp, type QpAttr, type QpCap, type QpInitAttr, type QpStats, type RecvWr, type SendWr, type Sge, type WrId,
} from '../types.js';
import { checkTransition } from '../qpstate.js';
import type { CompletionQueue } from '../cq.js';
import { newTxPort, type UroceEngine, type EngineQp, type TxPort } from './engine.js';
import { NetHeader } from './icrc.js';
import { openSocketSync } from './sockets.js';
import type { UroceDevice, UroceMr } from './device.js';
import { PSN_MASK, SendWqePool, type SendWqe, type RecvWqe, type ResolvedRecv, type RecvSegs } from './wqe.js';
import { RxPacket } from './rxpacket.js';
import { addrOffset } from './views.js';
import { pump } from './requester.js';
import { onRequest, flushAck } from './responder.js';
import { onResponse, onTimeout } from './completer.js';

export { psnDiff } from './wqe.js';

const EMPTY = new Uint8Array(0);
const NO_SGES: readonly Sge[] = [];

/** One parse target for every QP: a packet is handled to the end before the next is read. */
const rxPacket = new RxPacket();

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
  destroyed = false;

  // attributes
  private pathMtu: number = 0;
  mtu = 256;
  destQpn = 0;
  private rqPsn = 0;
  private sqPsn = 0;
  accessFlags = 0;
  minRnrTimer = 0;
  private timeoutCode = 0;
  timeoutMs = Infinity;
  retryCnt = 0;
  rnrRetry = 0;
  private ah: AhAttr | undefined;
  remoteIp = '';
  tx: TxPort | undefined;
  /** The DestQP this QP's packets carry, fixed when its transmit port opens (RTR); the requester
   *  and responder write each packet's whole BTH with it in one call (views/ib.ts writeBth). */
  txDestQp = 0;

  // send queue: requester and completer (rxe: qp->sq, qp->req, qp->comp)
  sq: SendWqe[] = [];
  /** Completed send WQEs for reuse (bounded by the send queue depth). */
  readonly wqePool: SendWqePool;
  /** Oldest WQE not completed. */
  sqHead = 0;
  /** PSN the next posted WQE gets. */
  nextPsn = 0;
  /** Transmit position: WQE index and packet within it. */
  txIdx = 0;
  txPkt = 0;
  /** Oldest unacknowledged PSN, and one past the highest PSN sent. */
  unacked = 0;
  txHigh = 0;
  retryLeft = 0;
  rnrLeft = 0;
  rnrWait = false;
  rnrTimer: NodeJS.Timeout | undefined;
  timer: NodeJS.Timeout | undefined;
  deadline = 0;
  lastNakPsn = -1;
  pumping = false;
  readonly onTimerFn = (): void => onTimeout(this);

  // receive queue and responder (rxe: qp->rq, qp->resp)
  ePsn = 0;
  msn = 0;
  rq: RecvWqe[] = [];
  rqHead = 0;
  /** 0 no message in progress, 1 SEND, 2 RDMA WRITE */
  inMsg = 0;
  curRecv: RecvWqe | undefined;
  curRecvOff = 0;
  wrBuf: Uint8Array = EMPTY;
  wrOff = 0;
  wrLeft = 0;
  wrTotal = 0;
  seqNakSent = false;
  ackPending = false;
  ackScheduled = false;
  private established = false;

  constructor(readonly qpNum: number, readonly pd: Pd, readonly dev: UroceDevice, readonly engine: UroceEngine,
    init: QpInitAttr, readonly tune: QpTuning) {
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
    this.wqePool = new SendWqePool(this.cap.maxSendWr);
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
      case QpState.ERR: this.toError(); return;
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
    this.txDestQp = this.destQpn;
    const g = this.ah!.grh!;
    const want = roceSourcePort(g.flowLabel ?? 0, this.qpNum, this.destQpn);
    const ttl = g.hopLimit > 0 ? g.hopLimit : 64;
    const tos = g.trafficClass & 0xff;
    this.closeTx();
    const o = openSocketSync({ address: this.engine.address, port: want, tos, ttl, sndbuf: 1 << 20, fallbackToAnyPort: true });
    const tx = newTxPort(o.exact ? o.sock : undefined, o.port, ttl, tos, new NetHeader(this.engine.address, this.remoteIp, o.port, ROCE_V2_PORT, ttl, tos), o.fd);
    this.tx = tx;
    const attach = (): void => {
      if (this.tx !== tx) { try { o.sock.close(); } catch { /* closed */ } return; } // QP reset/destroyed meanwhile
      tx.sock = o.sock;
      tx.port = o.port;
      o.sock.on('error', () => { this.engine.stats.txErrors++; });
      (tx as { net: NetHeader }).net = new NetHeader(this.engine.address, this.remoteIp, o.port, ROCE_V2_PORT, ttl, tos);
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

  /** resolve()'s results besides the error (no result object per post). */
  private rSegs: RecvSegs = { bufs: [], offs: [], lens: [] };
  private rLength = 0;

  /**
   * A receive WR's scatter list as views into the MRs, in rSegs / rLength, or (with `w`) a send
   * WR's gather list as (MR buffer, offset, length) runs into the WQE and its length in rLength;
   * returns 0 or the completion status of a bad SGE.
   */
  private resolve(sgl: readonly Sge[] | undefined, w?: SendWqe): number {
    const segs: RecvSegs | undefined = w ? undefined : { bufs: [], offs: [], lens: [] };
    let length = 0;
    let err = 0;
    for (const s of sgl ?? NO_SGES) {
      if (!(s.length >= 0)) { err = WcStatus.LOC_LEN_ERR; break; }
      if (s.length === 0) continue;
      const mr: UroceMr | undefined = this.dev.mrByLkey(s.lkey);
      // the offset in numbers (a bigint subtraction only for an address a number cannot hold);
      // the bounds are then checked in numbers
      const off = mr ? addrOffset(s.addr, mr.addr, mr.addrNum) : -1;
      if (!mr || mr.pd !== this.pd || off < 0 || off + s.length > mr.buffer.length ||
        (!w && !(mr.access & Access.LOCAL_WRITE))) { err = WcStatus.LOC_PROT_ERR; break; }
      if (w) w.addSeg(mr.buffer, off, s.length); // a send: runs into the WQE, no view per SGE
      else { segs!.bufs.push(mr.buffer); segs!.offs.push(off); segs!.lens.push(s.length); }
      length += s.length;
    }
    if (length > 0x80000000) err = WcStatus.LOC_LEN_ERR;
    if (segs) this.rSegs = segs;
    this.rLength = length;
    return err;
  }

  /**
   * A receive WR's scatter list resolved, cached per sgList array: SMC-R re-posts the same
   * receive WRs for every message. The cache holds while the array still names the same
   * address, length and key and its MR is still registered (else it is resolved again).
   * `hint`: the entry the WQE being refilled was resolved from last (a WR re-posted as soon as
   * its completion was handled gets its own WQE back from the free list: no WeakMap lookup).
   */
  private resolveRecv(sgl: readonly Sge[], hint: RecvWqe | undefined): number {
    const s = sgl.length === 1 ? sgl[0]! : undefined;
    const c = !s ? undefined : hint !== undefined && hint.sgl === sgl ? hint.resolved : this.recvCache.get(sgl);
    if (c && c.addr === s!.addr && c.length === s!.length && c.lkey === s!.lkey && c.mr.live) {
      this.rSegs = c.segs;
      this.rLength = c.length;
      this.rResolved = c;
      return 0;
    }
    this.rResolved = undefined;
    const err = this.resolve(sgl);
    if (s && !err && s.length > 0) {
      const e: ResolvedRecv = { addr: s.addr, length: s.length, lkey: s.lkey, mr: this.dev.mrByLkey(s.lkey)!, segs: this.rSegs };
      this.recvCache.set(sgl, e);
      this.rResolved = e;
    }
    return err;
  }

  /** resolveRecv's cache entry for the list it resolved (undefined: not cacheable). */
  private rResolved: ResolvedRecv | undefined;
  private readonly recvCache = new WeakMap<readonly Sge[], ResolvedRecv>();

  postSend(wrs: SendWr | readonly SendWr[]): void {
    // one WR or a chain, without an array for the one
    const many = Array.isArray(wrs);
    const count = many ? (wrs as readonly SendWr[]).length : 1;
    for (let i = 0; i < count; i++) {
      const wr = many ? (wrs as readonly SendWr[])[i]! : wrs as SendWr;
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
      if (isWrite && typeof wr.rdma!.remoteAddr === 'number' && exactAddr(wr.rdma!.remoteAddr) < 0) {
        throw new VerbsError('EINVAL', `post_send: rdma.remoteAddr ${wr.rdma!.remoteAddr} is not an address (a number must be a non-negative safe integer)`, i);
      }
      if ((op === WrOpcode.SEND_WITH_IMM || op === WrOpcode.RDMA_WRITE_WITH_IMM) && wr.immData === undefined) throw new VerbsError('EINVAL', 'post_send: WITH_IMM without immData', i);
      const w = this.wqePool.take();
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
        if (data.length) w.addSeg(data, 0, data.length);
        length = data.length;
      } else {
        if (wr.inlineData) throw new VerbsError('EINVAL', 'post_send: inlineData needs the INLINE flag', i);
        if ((wr.sgList?.length ?? 0) > this.cap.maxSendSge) throw new VerbsError('EINVAL', `post_send: ${wr.sgList!.length} SGEs > max_send_sge ${this.cap.maxSendSge}`, i);
        err = this.resolve(wr.sgList, w);
        length = this.rLength;
      }
      const npkts = err ? 0 : Math.max(1, Math.ceil(length / this.mtu));
      w.wrId = wr.wrId; w.opcode = op; w.signaled = this.sqSigAll || (flags & SendFlags.SIGNALED) !== 0;
      w.solicited = (flags & SendFlags.SOLICITED) !== 0; w.immData = wr.immData;
      w.rkey = wr.rdma?.rkey ?? 0; w.remoteAddr = wr.rdma?.remoteAddr ?? 0;
      w.length = length; w.firstPsn = this.nextPsn; w.lastPsn = (this.nextPsn + Math.max(npkts, 1) - 1) & PSN_MASK;
      w.npkts = npkts; w.localErr = err;
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
      const a = addrBig(s.addr);
      if (a === undefined) return undefined;
      const mr = this.dev.mrByLkey(s.lkey) ?? this.dev.mrByAddr(a, s.length);
      if (!mr || a < mr.addr || a + BigInt(s.length) > mr.addr + BigInt(mr.length)) return undefined;
      const off = Number(a - mr.addr);
      out.set(mr.buffer.subarray(off, off + s.length), o);
      o += s.length;
    }
    return out;
  }

  postRecv(wrs: RecvWr | readonly RecvWr[]): void {
    const many = Array.isArray(wrs);
    const count = many ? (wrs as readonly RecvWr[]).length : 1;
    for (let i = 0; i < count; i++) {
      const wr = many ? (wrs as readonly RecvWr[])[i]! : wrs as RecvWr;
      if (this.destroyed) throw new VerbsError('EINVAL', 'post_recv on a destroyed QP', i);
      if (this._state === QpState.RESET) throw new VerbsError('EINVAL', `post_recv: QP ${this.qpNum} is in RESET`, i);
      if (this._state === QpState.ERR) {
        this.flushRecvWc(wr.wrId);
        continue;
      }
      if (wr.sgList.length > this.cap.maxRecvSge) throw new VerbsError('EINVAL', `post_recv: ${wr.sgList.length} SGEs > max_recv_sge ${this.cap.maxRecvSge}`, i);
      if (this.rq.length - this.rqHead >= this.cap.maxRecvWr) throw new VerbsError('ENOMEM', `post_recv: receive queue full (${this.cap.maxRecvWr} WRs)`, i);
      // an entry from the free list when there is one (no object per receive WR)
      const r = this.recvFree.pop();
      const err = this.resolveRecv(wr.sgList, r);
      const sgl = this.rResolved ? wr.sgList : undefined;
      if (r) { r.wrId = wr.wrId; r.segs = this.rSegs; r.length = this.rLength; r.localErr = err; r.sgl = sgl; r.resolved = this.rResolved; this.rq.push(r); }
      else this.rq.push({ wrId: wr.wrId, segs: this.rSegs, length: this.rLength, localErr: err, sgl, resolved: this.rResolved });
    }
  }


  /** Completed receive WQEs for reuse (at most max_recv_wr). */
  private readonly recvFree: RecvWqe[] = [];

  /** A receive WQE completed successfully (the responder is done with it): reuse it. */
  releaseRecv(r: RecvWqe): void {
    if (this.recvFree.length < this.cap.maxRecvWr) this.recvFree.push(r);
  }

  /** A send completion on the send CQ (libibverbs' opcode for the WR's). */
  pushSendWc(wrId: WrId, status: number, wrOpcode: number, len: number): void {
    const opcode = wrOpcode === WrOpcode.RDMA_WRITE || wrOpcode === WrOpcode.RDMA_WRITE_WITH_IMM ? WcOpcode.RDMA_WRITE : WcOpcode.SEND;
    this.sendCq.pushWc(wrId, status as WcStatus, opcode, len, this.qpNum, 0, 0, undefined, false);
  }

  /** A receive WR flushed (QP in ERR). */
  private flushRecvWc(wrId: WrId): void {
    this.recvCq.pushWc(wrId, WcStatus.WR_FLUSH_ERR, WcOpcode.RECV, 0, this.qpNum, this.destQpn, 0, undefined, false);
  }

  private pump(): void { pump(this); }

  // =====================================================================================
  // receive: responses to the completer, requests to the responder
  // =====================================================================================

  /** Engine entry point: a packet for this QPN that passed ICRC/P_Key/source checks. */
  receive(buf: Uint8Array): void {
    const p = rxPacket;
    if (!p.parse(buf)) { this.engine.stats.malformed++; return; }
    this.stats.rxPackets++;
    this.stats.rxBytes += buf.length;
    if (p.info.isAck) { onResponse(this, p); return; }
    const st = this._state;
    if (st !== QpState.RTR && st !== QpState.RTS && st !== QpState.SQD) { this.stats.drops++; return; }
    if (!this.established) {
      this.established = true;
      this.dev.emitAsync({ type: AsyncEventType.COMM_EST, qp: this });
    }
    onRequest(this, p);
  }

  /** Send the pending (coalesced) ACK for the newest PSN (the engine calls it at the end of a receive batch). */
  flushAck(): void { flushAck(this); }

  // =====================================================================================
  // errors, reset, destroy
  // =====================================================================================

  private stopTimers(): void {
    if (this.timer) { clearTimeout(this.timer); this.timer = undefined; }
    if (this.rnrTimer) { clearTimeout(this.rnrTimer); this.rnrTimer = undefined; }
    this.rnrWait = false;
  }

  /** The QP goes to ERR (requester or responder error): every outstanding WR is flushed. */
  toError(): void {
    this._state = QpState.ERR;
    this.flushAll();
  }

  /** QP in ERR: every outstanding WR completes with WR_FLUSH_ERR. */
  private flushAll(): void {
    this.stopTimers();
    this.ackPending = false;
    for (let i = this.sqHead; i < this.sq.length; i++) {
      const w = this.sq[i]!;
      this.pushSendWc(w.wrId, WcStatus.WR_FLUSH_ERR, w.opcode, 0);
      this.wqePool.release(w);
    }
    this.sq = []; this.sqHead = 0; this.txIdx = 0; this.txPkt = 0;
    if (this.curRecv) {
      this.flushRecvWc(this.curRecv.wrId);
      this.curRecv = undefined;
    }
    for (let i = this.rqHead; i < this.rq.length; i++) {
      this.flushRecvWc(this.rq[i]!.wrId);
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
