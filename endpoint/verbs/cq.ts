// A completion queue for providers that produce completions in JavaScript (uroce; the native
// provider feeds it from its completion channel). Completions are stored in order; consumers
// poll() them, or wait without spinning: reqNotify() + 'completion' (ibv_req_notify_cq +
// ibv_get_cq_event), wait()/next() promises, or `for await (const wc of cq)`.
//
// Overrun (more completions than `cqe` waiting) is an error as on hardware: the CQ goes to
// error, the provider is told (onOverrun) so it can move the affected QPs to ERR and raise
// IBV_EVENT_CQ_ERR; later completions are dropped and counted.

import { EventEmitter } from 'node:events';
import { VerbsError, WcStatus, type Cq, type WcOpcode, type WorkCompletion, type WrId } from './types.js';
import { soon } from '../microtask.js';

export class CompletionQueue extends EventEmitter implements Cq {
  readonly cqe: number;
  /**
   * Completions in a ring of slot objects owned by the CQ: entry i of the queue is
   * ring[(head + i) & mask]. A slot is filled in place by push()/pushWc() and never leaves the
   * CQ: pollOne()/poll() hand out copies (the caller keeps them), pollInto() fills the caller's
   * object (ibv_poll_cq's caller-provided array). So a slot can be refilled as soon as it was
   * polled, and the data path allocates no completion object per message (round 11).
   */
  private ring: WorkCompletion[] = [];
  private mask = -1;
  private head = 0;
  private count = 0;
  private armed = 0; // 0 off, 1 any, 2 solicited only
  private notifyScheduled = false;
  private waiters: (() => void)[] = [];
  private destroyed = false;
  /** Set when the CQ overran; completions after that are dropped. */
  overrun = false;
  dropped = 0;
  /** Called once on overrun (the provider moves QPs to ERR and raises CQ_ERR). */
  onOverrun: (() => void) | undefined;
  /** Live QPs using this CQ (destroy() refuses while > 0, like EBUSY). */
  users = 0;
  /** See Cq.onNotify: called instead of emit('completion') — one emit function serves every
   *  emitter of the process, so its lookups are megamorphic, once per message (round 12). */
  onNotify: (() => void) | undefined = undefined;
  /** Someone listens for 'completion' (set by 'newListener', never cleared). */
  private listened = false;

  constructor(cqe: number) {
    super();
    if (!Number.isInteger(cqe) || cqe < 1) throw new VerbsError('EINVAL', `create_cq: cqe ${cqe} must be >= 1`);
    this.cqe = cqe;
    this.on('newListener', (ev: string | symbol) => { if (ev === 'completion') this.listened = true; });
  }

  get pending(): number { return this.count; }

  /** The notification, made once (a closure per completion event otherwise). */
  readonly notifyFn = (): void => {
    this.notifyScheduled = false;
    if (this.destroyed) return;
    const f = this.onNotify;
    if (f !== undefined) f();
    if (f === undefined || this.listened) this.emit('completion');
  };

  /** Provider side: add a completion. `solicited`: the completion of a message with SE set. */
  push(wc: WorkCompletion, solicited = false): void {
    this.pushWc(wc.wrId, wc.status, wc.opcode, wc.byteLen, wc.qpNum, wc.srcQp, wc.wcFlags, wc.immData, solicited, wc.vendorErr);
  }

  /** push() without a completion object: the fields go straight into the CQ's slot. */
  pushWc(wrId: WrId, status: WcStatus, opcode: WcOpcode, byteLen: number, qpNum: number, srcQp: number, wcFlags: number,
    immData: number | undefined, solicited: boolean, vendorErr = 0): void {
    if (this.destroyed) return;
    if (this.overrun || this.count >= this.cqe) {
      this.dropped++;
      if (!this.overrun) {
        this.overrun = true;
        this.onOverrun?.();
      }
      return;
    }
    if (this.count > this.mask) this.grow();
    const w = this.ring[(this.head + this.count++) & this.mask]!;
    w.wrId = wrId; w.status = status; w.opcode = opcode; w.vendorErr = vendorErr; w.byteLen = byteLen;
    w.immData = immData; w.qpNum = qpNum; w.srcQp = srcQp; w.wcFlags = wcFlags;
    if (this.armed === 1 || (this.armed === 2 && (solicited || status !== WcStatus.SUCCESS))) {
      this.armed = 0;
      if (!this.notifyScheduled) {
        this.notifyScheduled = true;
        // at the end of a provider's receive batch, or a microtask (endpoint/microtask.ts)
        soon(this.notifyFn);
      }
    }
    if (this.waiters.length) {
      const w = this.waiters;
      this.waiters = [];
      for (const f of w) f();
    }
  }

  /** Double the ring (the queue in order from slot 0), at least 16 slots. Slots are only ever
   *  added, so a full CQ of `cqe` entries costs `cqe` objects once, not one per completion. */
  private grow(): void {
    const size = Math.max(16, (this.mask + 1) * 2);
    const next: WorkCompletion[] = [];
    for (let i = 0; i < this.count; i++) next.push(this.ring[(this.head + i) & this.mask]!);
    while (next.length < size) next.push(emptyWc());
    this.ring = next;
    this.mask = size - 1;
    this.head = 0;
  }

  poll(max = 16): WorkCompletion[] {
    const n = Math.min(max, this.count);
    const out: WorkCompletion[] = [];
    for (let i = 0; i < n; i++) out.push(this.pollOne()!);
    return out;
  }

  /** Take one completion (a copy the caller keeps), or undefined. */
  pollOne(): WorkCompletion | undefined {
    if (this.count === 0) return undefined;
    const wc = copyWc(this.ring[this.head]!);
    this.take();
    return wc;
  }

  /** Fill `out` with the oldest completion and remove it; false (out untouched) when empty. */
  pollInto(out: WorkCompletion): boolean {
    if (this.count === 0) return false;
    const w = this.ring[this.head]!;
    out.wrId = w.wrId; out.status = w.status; out.opcode = w.opcode; out.vendorErr = w.vendorErr; out.byteLen = w.byteLen;
    out.immData = w.immData; out.qpNum = w.qpNum; out.srcQp = w.srcQp; out.wcFlags = w.wcFlags;
    this.take();
    return true;
  }

  /** The head slot was read: drop its wrId (it may be an application's object) and advance. */
  private take(): void {
    this.ring[this.head]!.wrId = 0;
    this.head = (this.head + 1) & this.mask;
    if (--this.count === 0) this.head = 0;
  }

  reqNotify(solicitedOnly = false): void {
    if (this.destroyed) throw new VerbsError('EINVAL', 'req_notify_cq on a destroyed CQ');
    this.armed = solicitedOnly ? 2 : 1;
  }

  wait(signal?: AbortSignal): Promise<void> {
    if (this.pending > 0) return Promise.resolve();
    if (this.destroyed) return Promise.reject(new VerbsError('EINVAL', 'CQ destroyed'));
    return new Promise((resolve, reject) => {
      const done = (): void => { signal?.removeEventListener('abort', onAbort); if (this.destroyed && this.pending === 0) reject(new VerbsError('EINVAL', 'CQ destroyed')); else resolve(); };
      const onAbort = (): void => {
        const i = this.waiters.indexOf(done);
        if (i >= 0) this.waiters.splice(i, 1);
        reject(signal?.reason ?? new Error('aborted'));
      };
      if (signal?.aborted) { onAbort(); return; }
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiters.push(done);
    });
  }

  async next(signal?: AbortSignal): Promise<WorkCompletion> {
    for (;;) {
      const wc = this.pollOne();
      if (wc) return wc;
      await this.wait(signal);
    }
  }

  async *[Symbol.asyncIterator](): AsyncIterator<WorkCompletion> {
    for (;;) {
      const wc = this.pollOne();
      if (wc) { yield wc; continue; }
      if (this.destroyed) return;
      try { await this.wait(); } catch { return; }
    }
  }

  destroy(): void {
    if (this.destroyed) return;
    if (this.users > 0) throw new VerbsError('EBUSY', `destroy_cq: ${this.users} QP(s) still use this CQ`);
    this.destroyed = true;
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
    this.removeAllListeners();
  }

  get isDestroyed(): boolean { return this.destroyed; }
}

/** A completion with every field present (one shape for every slot and every pollInto target). */
export function emptyWc(): WorkCompletion {
  return { wrId: 0, status: WcStatus.SUCCESS, opcode: 0 as WcOpcode, vendorErr: 0, byteLen: 0, immData: undefined, qpNum: 0, srcQp: 0, wcFlags: 0 };
}

/** A completion the caller keeps: immData only when there is one (as providers push it). */
function copyWc(w: WorkCompletion): WorkCompletion {
  const wc: WorkCompletion = { wrId: w.wrId, status: w.status, opcode: w.opcode, vendorErr: w.vendorErr, byteLen: w.byteLen, qpNum: w.qpNum, srcQp: w.srcQp, wcFlags: w.wcFlags };
  if (w.immData !== undefined) wc.immData = w.immData;
  return wc;
}
