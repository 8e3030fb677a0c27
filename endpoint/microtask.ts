// A microtask without what Node's queueMicrotask adds per call for async_hooks (an
// AsyncResource and a bound function: ~120 ns and ~300 bytes against ~35 ns here): a reaction
// on one resolved promise. Same V8 microtask queue, same order as queueMicrotask. The data path
// queues one per CDC flush and per CQ notification. A callback that throws becomes an unhandled
// rejection, which Node (default --unhandled-rejections=throw) raises as an uncaught exception,
// as it does for queueMicrotask.

const resolved = Promise.resolve();

export function microtask(fn: () => void): void {
  void resolved.then(fn);
}

/**
 * Work collected during a provider's receive batch (uroce's native loop calls JavaScript once
 * per batch), run by endBatch() at the batch's end instead of in a microtask each. The batch
 * ends with every packet handled and nothing else run in between, which is when a microtask
 * queued during it would have run first; what those functions queue while the batch ends (a
 * CQ notification leads to a socket write, whose CDC flush is deferred too) runs in the same
 * end, in order. So a reaction written synchronously leaves with the batch: the provider can
 * send it from the batch's own call (docs/uroce.md rounds 11 and 12).
 */
export class BatchQueue {
  readonly fns: Array<(() => void) | undefined> = [];
  n = 0;
  prev: BatchQueue | undefined = undefined;
}

/** The batch collecting deferred work now, or undefined: soon() queues a microtask. */
let open: BatchQueue | undefined;

/** Run `fn` at the end of the receive batch running, or in a microtask outside of one. */
export function soon(fn: () => void): void {
  const q = open;
  if (q !== undefined) q.fns[q.n++] = fn;
  else void resolved.then(fn);
}

/** A receive batch starts: soon() defers to endBatch(q). */
export function beginBatch(q: BatchQueue): void {
  q.prev = open;
  open = q;
}

/**
 * The batch is over: run what it deferred, in order, including what those functions defer
 * meanwhile. One that throws does not stop the others; its error is raised after them as a
 * throwing microtask's is (an unhandled rejection).
 */
export function endBatch(q: BatchQueue): void {
  try {
    for (let i = 0; i < q.n; i++) {
      const fn = q.fns[i]!;
      q.fns[i] = undefined;
      try { fn(); } catch (e) { void Promise.reject(e); }
    }
  } finally {
    q.n = 0;
    open = q.prev;
    q.prev = undefined;
  }
}
