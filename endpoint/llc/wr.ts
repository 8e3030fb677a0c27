// The work-request layer of one SMC-R link (Linux net/smc/smc_wr.c's job): one RC QP, a pool of
// registered send slots for LLC/CDC messages, a ring of posted receive buffers that is re-posted
// as messages arrive, RDMA WRITE of data from a registered send buffer, and completion handling
// without busy polling. Everything above (LLC flows, CDC connections) talks to a link through
// this class and never touches verbs directly.
//
// Memory access is the least the protocol needs: send slots and receive buffers are LOCAL_WRITE
// only (SENDs land in posted receives, not by remote write). Only RMBs (registered by the link
// group) carry REMOTE_WRITE.

import { EventEmitter } from 'node:events';
import {
  Access, QpState, WrOpcode, SendFlags, WcStatus, WcOpcode, addrPlus, exactAddr, wcStatusStr,
  type Cq, type Mr, type Mtu, type Pd, type Qp, type RecvWr, type SendWr, type Sge, type VerbsAddr, type WorkCompletion,
} from '../verbs/index.js';
import { emptyWc } from '../verbs/cq.js';

/** Sizes and depths of one link (Linux: SMC_WR_BUF_CNT = 16 sends, 3× that receives). */
export interface WrOptions {
  /** Send slots (messages in flight). */
  sendSlots?: number;
  /** Posted receive buffers. */
  recvCount?: number;
  /** Bytes of one send slot / receive buffer: 44 for SMC-Rv1 links, up to 8192 for v2 LLC. */
  bufSize?: number;
}

/** The peer end of the QP as CLC/LLC learnt it. */
export interface QpPeer {
  qpn: number;
  psn: number;
  gid: string;
  mtu: Mtu;
}

/** QP settings Linux uses (net/smc/smc_ib.c). */
const SMC_QP = {
  minRnrTimer: 5,
  timeout: 15,
  retryCnt: 7,
  /** 7 = infinite RNR retries. */
  rnrRetry: 7,
  hopLimit: 64,
} as const;

/** The link went down (error completion, flush, async QP error, or close()). */
export class LinkDownError extends Error {
  constructor(message: string) { super(message); this.name = 'LinkDownError'; }
}

/** Called once when a message was acknowledged (undefined) or will never be (the error); may run
 *  synchronously inside the completion handling or the post. */
export type SendDone = (err: Error | undefined) => void;

/** An RDMA WRITE to post just before a message (see sendWithWrites). */
export interface PendingWrite { mr: Mr; off: number; len: number; remoteAddr: VerbsAddr; rkey: number }

/** RDMA WRITEs one message may carry (a CDC's data split at the ring's wrap: 2). */
export const MAX_WRITES_PER_MSG = 4;

const NO_WRITES: readonly PendingWrite[] = [];

// Work request ids: kind × 2^28 + index, plain numbers (both providers take them): bigint ids
// cost an allocation per arithmetic step and a slower Map key, several times per message on
// the hot path. Every id is below 2^30, a small integer to V8: an id above that is a heap
// number, boxed anew each time it is stored into a work request, WQE or completion (round 11).
const WRID_KIND = 2 ** 28;
const WRID_SEND = 1 * WRID_KIND;
const WRID_WRITE = 2 * WRID_KIND;
const WRID_RECV = 3 * WRID_KIND;
/** A SEND's id is WRID_SEND + sequence × SLOT_SPAN + slot: its completion finds its slot by
 *  arithmetic (a Map entry and an object per message otherwise). */
const SLOT_SPAN = 1024;
const SEQ_WRAP = WRID_KIND / SLOT_SPAN;

/**
 * One link's QP with message slots. Events: 'message' (bytes: Uint8Array — a view valid only
 * during the call; copy to keep), 'down' (reason: string) once.
 */
export class WrLink extends EventEmitter {
  readonly qp: Qp;
  readonly cq: Cq;
  readonly bufSize: number;
  /** Our initial send PSN (sent to the peer in CLC / ADD LINK). */
  readonly psn: number;
  private readonly sendMr: Mr;
  private readonly recvMr: Mr;
  /** The view of each receive slot handed to 'message' last (reused: no view per message). */
  private readonly recvViews: Array<Uint8Array | undefined> = [];
  private readonly freeSlots: number[] = [];
  /** Sends waiting for a slot, posted in order by releaseSlot. */
  private readonly sendQueue: Array<{ msg: Uint8Array; writes: readonly PendingWrite[]; done: SendDone }> = [];
  /** Per send slot: the id of the SEND in it (-1: free) and its completion callback. */
  private readonly slotWrId: number[] = [];
  private readonly slotDone: Array<SendDone | undefined> = [];
  private readonly recvCount: number;
  /** The receive WRs, one per buffer, made once (re-posted as they are). */
  private readonly recvWrs: RecvWr[] = [];
  /** Per send slot: its SEND WR, made once; wrId and length are set per message. A provider
   *  copies what it needs at post (ibv_post_send semantics), so the objects can be reused. */
  private readonly sendWrs: Array<SendWr & { sgList: Sge[] }> = [];
  /** RDMA WRITE WRs of one message, made once, filled per message (at most MAX_WRITES_PER_MSG). */
  private readonly writeWrs: Array<SendWr & { sgList: Sge[]; rdma: { remoteAddr: VerbsAddr; rkey: number } }> = [];
  /** The MR of the last write and its address as a number (exactAddr): a WRITE's source address
   *  is that plus the offset, a number where exact — no bigint per WRITE (round 18). */
  private addrMr: Mr | undefined;
  private addrMrNum = -1;
  /** chains[n]: the n writes and the SEND posted as one chain (the SEND element is set per message). */
  private readonly chains: SendWr[][] = [];
  private nextSendId = 0;
  private downReason: string | undefined;
  private readonly onCompletion = (): void => this.drain();
  /**
   * The link group's handler of each received message, called directly (round 12: one emit
   * function serves every emitter of the process, so its lookups are megamorphic, once per
   * message). 'message' is still emitted once anyone listens for it (tests watch a link).
   */
  onMessage: ((msg: Uint8Array) => void) | undefined = undefined;
  /** Someone listens for 'message' (set by 'newListener', never cleared). */
  private messageListened = false;
  /** The entry drain() polls into (handle() reads it before the next poll). */
  private readonly wc: WorkCompletion = emptyWc();
  stats = { sent: 0, received: 0, writes: 0, writeBytes: 0 };

  constructor(readonly pd: Pd, o: WrOptions = {}) {
    super();
    const slots = o.sendSlots ?? 16;
    if (!(slots >= 1 && slots <= SLOT_SPAN)) throw new RangeError(`sendSlots ${slots}: 1 … ${SLOT_SPAN}`);
    this.recvCount = o.recvCount ?? 48;
    this.bufSize = o.bufSize ?? 8192;
    // every message may carry MAX_WRITES_PER_MSG writes, and only `slots` messages are in flight
    const maxWrites = slots * MAX_WRITES_PER_MSG;
    this.cq = pd.device.createCq(slots + maxWrites + this.recvCount + 16);
    this.qp = pd.createQp({
      sendCq: this.cq, recvCq: this.cq,
      cap: { maxSendWr: slots + maxWrites, maxRecvWr: this.recvCount, maxSendSge: 2, maxRecvSge: 1, maxInlineData: 0 },
    });
    this.sendMr = pd.regMr(new Uint8Array(slots * this.bufSize), Access.LOCAL_WRITE);
    this.recvMr = pd.regMr(new Uint8Array(this.recvCount * this.bufSize), Access.LOCAL_WRITE);
    for (let i = 0; i < slots; i++) { this.freeSlots.push(i); this.slotWrId.push(-1); this.slotDone.push(undefined); }
    // Work request pieces that never change, made once: the receive buffers' gather lists and
    // the send slots' addresses (an SGE address is a bigint: an addition per message otherwise).
    // Work requests are made once and reused: the data path posts a SEND (and its writes) per
    // CDC and re-posts a receive per message; objects per post were a measurable part of a
    // round trip's allocation (and so of its GC).
    for (let i = 0; i < this.recvCount; i++) this.recvWrs.push({ wrId: WRID_RECV + i, sgList: [this.recvMr.sge(i * this.bufSize, this.bufSize)] });
    // SEND and RDMA WRITE WRs with the same fields in the same order (one hidden class: the
    // provider's post_send reads both kinds in one loop, and two shapes made its loads
    // polymorphic, round 13's inline-cache log)
    for (let i = 0; i < slots; i++) {
      this.sendWrs.push({ wrId: WRID_SEND, opcode: WrOpcode.SEND, sgList: [this.sendMr.sge(i * this.bufSize, this.bufSize)], sendFlags: SendFlags.SIGNALED | SendFlags.SOLICITED, rdma: undefined });
    }
    for (let i = 0; i < MAX_WRITES_PER_MSG; i++) {
      this.writeWrs.push({ wrId: WRID_WRITE, opcode: WrOpcode.RDMA_WRITE, sgList: [{ addr: 0, length: 0, lkey: 0 }], sendFlags: 0, rdma: { remoteAddr: 0, rkey: 0 } });
    }
    // chains[n] (1 … MAX_WRITES_PER_MSG): n write WRs and a place for the SEND
    this.chains.push([]);
    for (let n = 1; n <= MAX_WRITES_PER_MSG; n++) this.chains.push([...this.writeWrs.slice(0, n), this.sendWrs[0]!]);
    // Linux: get_random_bytes for the initial PSN (24 bits).
    this.psn = (Math.random() * 0x1000000) >>> 0;
    this.on('newListener', (ev: string | symbol) => { if (ev === 'message') this.messageListened = true; });
    // the CQ calls drain() directly where it can (Cq.onNotify), else through 'completion'
    if ('onNotify' in this.cq) this.cq.onNotify = this.onCompletion;
    else this.cq.on('completion', this.onCompletion);
    this.cq.reqNotify();
  }

  get qpn(): number { return this.qp.qpNum; }
  get isDown(): boolean { return this.downReason !== undefined; }
  get reason(): string | undefined { return this.downReason; }

  /** RESET → INIT with remote write allowed (RMBs are written by the peer) and receives posted. */
  init(): void {
    this.qp.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: 1, qpAccessFlags: Access.LOCAL_WRITE | Access.REMOTE_WRITE });
    for (let i = 0; i < this.recvCount; i++) this.postRecv(i);
  }

  /** INIT → RTR toward the peer's QP. */
  rtr(peer: QpPeer, sgidIndex = 0): void {
    this.qp.modify({
      qpState: QpState.RTR, pathMtu: peer.mtu, destQpNum: peer.qpn, rqPsn: peer.psn, maxDestRdAtomic: 1, minRnrTimer: SMC_QP.minRnrTimer,
      ahAttr: { isGlobal: true, portNum: 1, grh: { dgid: peer.gid, sgidIndex, hopLimit: SMC_QP.hopLimit, trafficClass: 0, flowLabel: 0 } },
    });
  }

  /** RTR → RTS with our send PSN. */
  rts(): void {
    this.qp.modify({ qpState: QpState.RTS, sqPsn: this.psn, timeout: SMC_QP.timeout, retryCnt: SMC_QP.retryCnt, rnrRetry: SMC_QP.rnrRetry, maxRdAtomic: 1 });
  }

  /**
   * SEND one message (≤ bufSize bytes) from a send slot, solicited and signaled. Resolves when
   * the peer's RNIC acknowledged it; rejects with LinkDownError when the link fails first.
   * Waits for a free slot when all are in flight (the caller's backpressure).
   */
  send(msg: Uint8Array): Promise<void> {
    return this.sendWithWrites(NO_WRITES, msg);
  }

  /**
   * RDMA WRITEs and then the message that announces them, posted together once a send slot is
   * free: the send queue never holds more than (slots × (1 + writes per message)) requests, so
   * posting cannot overrun it however many connections share the link (Linux reserves the CDC
   * slot before posting a connection's writes for the same reason).
   */
  sendWithWrites(writes: readonly PendingWrite[], msg: Uint8Array): Promise<void> {
    return new Promise<void>((resolve, reject) => this.sendWithWritesCb(writes, msg, (e) => { if (e) reject(e); else resolve(); }));
  }

  /**
   * sendWithWrites with a callback instead of a promise: the CDC data path sends a message per
   * write and per consumer update, and a promise, its executor and its reactions per message
   * were a measurable part of a round trip's CPU. `done` may run synchronously (an error at post).
   */
  sendWithWritesCb(writes: readonly PendingWrite[], msg: Uint8Array, done: SendDone): void {
    if (msg.length > this.bufSize) { done(new RangeError(`message of ${msg.length} bytes exceeds the link's ${this.bufSize}-byte buffers`)); return; }
    if (writes.length > MAX_WRITES_PER_MSG) { done(new RangeError(`${writes.length} RDMA WRITEs for one message (at most ${MAX_WRITES_PER_MSG})`)); return; }
    if (this.downReason !== undefined) { done(new LinkDownError(this.downReason)); return; }
    // Posted in the caller's turn when a slot is free and nobody waits (no promise hop: that was
    // a microtask and two promises per CDC). Otherwise queued, and posted in FIFO order by the
    // completion that frees a slot (releaseSlot): a connection's CDCs, and the writes before
    // them, must reach the QP in the order they were sent — a later CDC overtaking an earlier
    // one would announce bytes whose RDMA WRITE is not posted yet.
    if (this.sendQueue.length === 0) {
      const slot = this.freeSlots.pop();
      if (slot !== undefined) { this.sendInSlot(slot, msg, writes, done); return; }
    }
    // the caller may reuse its writes array and objects once this returns: keep copies
    this.sendQueue.push({ msg: msg.slice(), writes: writes.map((w) => ({ ...w })), done });
  }

  private sendInSlot(slot: number, msg: Uint8Array, writes: readonly PendingWrite[], done: SendDone): void {
    const off = slot * this.bufSize;
    this.sendMr.buffer.set(msg, off);
    const wrId = WRID_SEND + this.nextSendId * SLOT_SPAN + slot;
    this.nextSendId = (this.nextSendId + 1) % SEQ_WRAP;
    this.slotWrId[slot] = wrId;
    this.slotDone[slot] = done;
    // the writes and the SEND in one post (one ibv_post_send chain): the provider runs its
    // transmit path once for the message instead of once per work request
    const send = this.sendWrs[slot]!;
    send.wrId = wrId;
    send.sgList[0]!.length = msg.length;
    let chain: SendWr | SendWr[] = send;
    try {
      const n = writes.length;
      if (n) {
        chain = this.chains[n]!;
        for (let i = 0; i < n; i++) {
          const w = writes[i]!;
          if (w.off < 0 || w.len < 0 || w.off + w.len > w.mr.buffer.length) throw new RangeError(`RDMA WRITE of ${w.len} bytes at ${w.off} outside the ${w.mr.buffer.length}-byte buffer`);
          const wr = this.writeWrs[i]!;
          const sge = wr.sgList[0]!;
          const mr = w.mr;
          if (mr !== this.addrMr) { this.addrMr = mr; this.addrMrNum = exactAddr(mr.addr); }
          sge.addr = addrPlus(mr.addr, this.addrMrNum, w.off);
          sge.length = w.len;
          sge.lkey = w.mr.lkey;
          wr.rdma.remoteAddr = w.remoteAddr;
          wr.rdma.rkey = w.rkey;
        }
        chain[n] = send;
      }
      this.qp.postSend(chain);
      for (const w of writes) { this.stats.writes++; this.stats.writeBytes += w.len; }
      this.stats.sent++;
    } catch (e) {
      this.untrack(slot);
      this.releaseSlot(slot);
      done(this.downReason !== undefined ? new LinkDownError(this.downReason) : e as Error);
    }
  }

  /** Fail the link: pending sends reject, the QP goes to ERR, 'down' is emitted once. */
  fail(reason: string): void {
    if (this.downReason !== undefined) return;
    this.downReason = reason;
    try { if (this.qp.state !== QpState.ERR && this.qp.state !== QpState.RESET) this.qp.modify({ qpState: QpState.ERR }); } catch { /* already gone */ }
    const err = new LinkDownError(reason);
    // in the order they were posted (ids grow with the sequence)
    const pend: Array<{ id: number; done: SendDone }> = [];
    for (let s = 0; s < this.slotWrId.length; s++) {
      const id = this.slotWrId[s]!, d = this.slotDone[s];
      if (id >= 0 && d) pend.push({ id, done: d });
      this.untrack(s);
    }
    pend.sort((x, y) => x.id - y.id);
    for (const p of pend) p.done(err);
    for (const q of this.sendQueue.splice(0)) q.done(err);
    this.emit('down', reason);
  }

  /** Tear down the QP and free the buffers (after fail() or an orderly DELETE LINK). */
  private destroyed = false;

  destroy(): void {
    this.fail('link destroyed');
    this.destroyed = true;
    if (this.cq.onNotify === this.onCompletion) this.cq.onNotify = undefined;
    else this.cq.off('completion', this.onCompletion);
    try { this.qp.destroy(); } catch { /* best effort */ }
    try { this.sendMr.dereg(); this.recvMr.dereg(); } catch { /* best effort */ }
    try { this.cq.destroy(); } catch { /* best effort */ }
  }

  // ---- internals ----

  /** The slot of a SEND completion's id, or -1 when no SEND with that id is in flight. */
  private slotOf(id: number): number {
    const slot = (id % WRID_KIND) % SLOT_SPAN;
    return slot < this.slotWrId.length && this.slotWrId[slot] === id ? slot : -1;
  }

  private untrack(slot: number): void {
    this.slotWrId[slot] = -1;
    this.slotDone[slot] = undefined;
  }

  private releaseSlot(slot: number): void {
    const q = this.downReason === undefined ? this.sendQueue.shift() : undefined;
    if (!q) { this.freeSlots.push(slot); return; }
    this.sendInSlot(slot, q.msg, q.writes, q.done);
  }

  private postRecv(i: number): void {
    this.qp.postRecv(this.recvWrs[i]!);
  }

  private drain(): void {
    for (;;) {
      if (this.destroyed) return; // a handler destroyed the link (and its CQ) under us
      // one completion at a time into the link's own entry: no array and no object per drain
      const wc = this.wc;
      if (!this.cq.pollInto(wc)) break;
      this.handle(wc);
    }
    if (!this.destroyed && (this.downReason === undefined || this.cq.pending > 0)) this.cq.reqNotify();
  }

  private handle(wc: WorkCompletion): void {
    const id = Number(wc.wrId);
    const kind = id - (id % WRID_KIND);
    if (wc.status !== WcStatus.SUCCESS) {
      const slot = kind === WRID_SEND ? this.slotOf(id) : -1;
      if (slot >= 0) { this.untrack(slot); this.releaseSlot(slot); }
      if (wc.status !== WcStatus.WR_FLUSH_ERR || this.downReason === undefined) {
        const what = kind === WRID_RECV ? 'receive' : kind === WRID_WRITE ? 'RDMA WRITE' : 'SEND';
        this.fail(`${what} completed with ${wcStatusStr(wc.status)} (status ${wc.status})`);
      }
      return;
    }
    if (kind === WRID_RECV) {
      if (wc.opcode !== WcOpcode.RECV) return;
      const i = id % WRID_KIND;
      const off = i * this.bufSize;
      // the slot's last view again when the size repeats (CDC and LLC messages: 44 bytes); a
      // view only names the slot's bytes, which the next post_recv lets the peer overwrite anyway
      let view = this.recvViews[i];
      if (view === undefined || view.length !== wc.byteLen) view = this.recvViews[i] = this.recvMr.buffer.subarray(off, off + wc.byteLen);
      this.stats.received++;
      try {
        const f = this.onMessage;
        if (f !== undefined) f(view);
        if (f === undefined || this.messageListened) this.emit('message', view);
      } catch (e) {
        // A handler bug must not take the process down; the link cannot be trusted after it.
        this.fail(`internal error handling a message: ${(e as Error).message}`);
      } finally {
        if (this.downReason === undefined) {
          try { this.postRecv(i); } catch (e) { this.fail(`post_recv: ${(e as Error).message}`); }
        }
      }
      return;
    }
    const slot = kind === WRID_SEND ? this.slotOf(id) : -1;
    if (slot >= 0) {
      const done = this.slotDone[slot]!;
      this.untrack(slot);
      this.releaseSlot(slot);
      done(undefined);
    }
  }
}
