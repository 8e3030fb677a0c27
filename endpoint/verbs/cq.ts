// A completion queue for providers that produce completions in JavaScript (uroce; the native
// provider feeds it from its completion channel). Completions are stored in order; consumers
// poll() them, or wait without spinning: reqNotify() + 'completion' (ibv_req_notify_cq +
// ibv_get_cq_event), wait()/next() promises, or `for await (const wc of cq)`.
//
// Overrun (more completions than `cqe` waiting) is an error as on hardware: the CQ goes to
// error, the provider is told (onOverrun) so it can move the affected QPs to ERR and raise
// IBV_EVENT_CQ_ERR; later completions are dropped and counted.

import { EventEmitter } from 'node:events';
import { VerbsError, WcStatus, type Cq, type WorkCompletion } from './types.js';
import { microtask } from '../microtask.js';

export class CompletionQueue extends EventEmitter implements Cq {
  readonly cqe: number;
  /** Completions q[head, tail); slots before head are cleared. The array is reused: once
   *  drained, head and tail go back to 0 and later pushes store into the slots already there
   *  (a new array per drain, grown again by every push, was an allocation per message). */
  private readonly q: (WorkCompletion | undefined)[] = [];
  private head = 0;
  private tail = 0;
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

  constructor(cqe: number) {
    super();
    if (!Number.isInteger(cqe) || cqe < 1) throw new VerbsError('EINVAL', `create_cq: cqe ${cqe} must be >= 1`);
    this.cqe = cqe;
  }

  get pending(): number { return this.tail - this.head; }

  /** The notification, made once (a closure per completion event otherwise). */
  private readonly notifyFn = (): void => { this.notifyScheduled = false; if (!this.destroyed) this.emit('completion'); };

  /** Provider side: add a completion. `solicited`: the completion of a message with SE set. */
  push(wc: WorkCompletion, solicited = false): void {
    if (this.destroyed) return;
    if (this.overrun || this.pending >= this.cqe) {
      this.dropped++;
      if (!this.overrun) {
        this.overrun = true;
        this.onOverrun?.();
      }
      return;
    }
    this.q[this.tail++] = wc;
    if (this.armed === 1 || (this.armed === 2 && (solicited || wc.status !== WcStatus.SUCCESS))) {
      this.armed = 0;
      if (!this.notifyScheduled) {
        this.notifyScheduled = true;
        microtask(this.notifyFn);
      }
    }
    if (this.waiters.length) {
      const w = this.waiters;
      this.waiters = [];
      for (const f of w) f();
    }
  }

  poll(max = 16): WorkCompletion[] {
    const n = Math.min(max, this.pending);
    if (n <= 0) return [];
    const out = this.q.slice(this.head, this.head + n) as WorkCompletion[];
    this.q.fill(undefined, this.head, this.head + n);
    this.head += n;
    this.compact();
    return out;
  }

  /** Take one completion, or undefined. */
  pollOne(): WorkCompletion | undefined {
    if (this.head >= this.tail) return undefined;
    const wc = this.q[this.head];
    this.q[this.head++] = undefined;
    this.compact();
    return wc;
  }

  /** Drained: start over at slot 0. Never drained (a consumer that polls less than arrives):
   *  move the waiting ones to the front once half the array is behind head. */
  private compact(): void {
    if (this.head === this.tail) { this.head = 0; this.tail = 0; }
    else if (this.head > 4096 && this.head * 2 > this.tail) {
      this.q.copyWithin(0, this.head, this.tail);
      this.q.fill(undefined, this.tail - this.head, this.tail);
      this.tail -= this.head;
      this.head = 0;
    }
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
