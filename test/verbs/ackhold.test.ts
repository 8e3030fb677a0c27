// uroce's opt-in delayed ACK (UroceOptions.ackHold, docs/uroce.md round 5): between two uroce
// engines on loopback, a request/response exchange acknowledges two batches with one ACK, every
// message still completes (the last one by the engine's release timer, with nothing following),
// and a peer that is not known to be a uroce engine (no IP ID 0 seen yet) gets every ACK at once.
// uroce-specific (engine option and counters), so not part of the provider-neutral cases.
import test from 'ava';
import { createHash } from 'node:crypto';
import { Access, SendFlags, WcOpcode, WcStatus, WrOpcode, type QpStats } from '../../endpoint/verbs/index.js';
import { openUroce, loadSockHelper, type UroceDevice } from '../../endpoint/verbs/uroce/index.js';
import { collect, connectPair, type Side } from './common.js';

// held up to 50 ms: no release by the timer while the exchange runs (even on a loaded machine),
// only at the end; the QPs' ACK timeout (code 16, 268 ms) is far above it
async function pair(ackHold: boolean): Promise<[UroceDevice, UroceDevice]> {
  for (let n = 200; n < 240; n++) {
    let a: UroceDevice | undefined;
    try {
      a = await openUroce({ address: `127.0.${n}.1`, gso: true, ackHold, ackHoldMs: 50 });
      const b = await openUroce({ address: `127.0.${n}.2`, gso: true, ackHold, ackHoldMs: 50 });
      return [a, b];
    } catch (e) {
      await a?.close();
      if ((e as { code?: string }).code !== 'EADDRINUSE') throw e;
    }
  }
  throw new Error('no free loopback pair');
}

const batched = loadSockHelper() !== undefined && process.env.UROCE_NO_BATCH !== '1';
const SIZE = 64;

/**
 * `n` ping-pongs of SIZE-byte SENDs, A → B → A, each side answering as soon as its receive
 * completes (send completions are counted as they come, not waited for: that is what lets an
 * ACK be held until the next request); every answer compared. At the end every send must
 * complete, the last ones with nothing following them.
 */
async function pingPong(A: Side, B: Side, n: number): Promise<void> {
  const mk = (s: Side): { mr: ReturnType<Side['pd']['regMr']>; buf: Uint8Array } => { const buf = new Uint8Array(4 * SIZE); return { buf, mr: s.pd.regMr(buf, Access.LOCAL_WRITE) }; };
  const a = mk(A), b = mk(B);
  const sent = new Map<Side, number>([[A, 0], [B, 0]]);
  /** Wait for the next receive completion on `s`, counting send completions on the way. */
  const nextRecv = async (s: Side, what: string): Promise<void> => {
    for (;;) {
      const [wc] = await collect(s.cq, 1, 5000);
      if (wc!.status !== WcStatus.SUCCESS) throw new Error(`${what}: completion status ${wc!.status}`);
      if (wc!.opcode === WcOpcode.RECV) { if (wc!.byteLen !== SIZE) throw new Error(`${what}: ${wc!.byteLen} bytes`); return; }
      sent.set(s, sent.get(s)! + 1);
    }
  };
  try {
    for (let i = 0; i < n; i++) {
      const msg = createHash('sha256').update(String(i)).digest();
      a.buf.set(msg, 0); a.buf.set(msg, 32);
      B.qp.postRecv({ wrId: i, sgList: [b.mr.sge(SIZE, SIZE)] });
      A.qp.postRecv({ wrId: i, sgList: [a.mr.sge(SIZE, SIZE)] });
      A.qp.postSend({ wrId: i, opcode: WrOpcode.SEND, sgList: [a.mr.sge(0, SIZE)], sendFlags: SendFlags.SIGNALED });
      await nextRecv(B, `B's receive ${i}`);
      b.buf.copyWithin(0, SIZE, 2 * SIZE);
      B.qp.postSend({ wrId: i, opcode: WrOpcode.SEND, sgList: [b.mr.sge(0, SIZE)], sendFlags: SendFlags.SIGNALED });
      await nextRecv(A, `A's receive ${i}`);
      if (Buffer.compare(a.buf.subarray(SIZE, 2 * SIZE), a.buf.subarray(0, SIZE)) !== 0) throw new Error(`answer ${i} differs`);
    }
    // the last sends have nothing behind them: their ACKs leave by the release timer
    for (const s of [A, B]) {
      const left = n - sent.get(s)!;
      const wcs = left > 0 ? await collect(s.cq, left, 5000) : [];
      if (wcs.some((wc) => wc.status !== WcStatus.SUCCESS || wc.opcode !== WcOpcode.SEND)) throw new Error('a send did not complete');
    }
  } finally {
    a.mr.dereg();
    b.mr.dereg();
  }
}

/** `n` ping-pongs between two fresh engines with or without ackHold; the two QPs' counters. */
async function exchange(ackHold: boolean, n: number): Promise<{ qa: QpStats; qb: QpStats }> {
  const [da, db] = await pair(ackHold);
  try {
    const { A, B } = connectPair(da, db, { timeout: 16 });
    await pingPong(A, B, n);
    const r = { qa: { ...A.qp.stats }, qb: { ...B.qp.stats } };
    A.qp.destroy(); B.qp.destroy();
    return r;
  } finally {
    await da.close();
    await db.close();
  }
}

(batched ? test.serial : test.serial.skip)('ackHold: one ACK for two small batches, every message completes, the last one by the release timer', async (t) => {
  const n = 400;
  const { qa, qb } = await exchange(true, n);
  t.log(`A: ${qa.messagesReceived} messages received, ${qa.acksSent} ACKs sent; B: ${qb.messagesReceived} received, ${qb.acksSent} ACKs sent; retransmits ${qa.retransmits + qb.retransmits}`);
  t.is(qa.messagesReceived, n);
  t.is(qb.messagesReceived, n);
  // one ACK per two batches, after the first few (a peer must have sent 8 packets with IP ID 0
  // before it counts as a uroce engine); releases by the timer only at the end
  t.true(qa.acksSent <= n / 2 + 16, 'A: one ACK for two batches');
  t.true(qb.acksSent <= n / 2 + 16, 'B: one ACK for two batches');
  t.is(qa.retransmits + qb.retransmits, 0, 'no held ACK came late enough to make the peer retransmit');
  t.is(qa.timeouts + qb.timeouts, 0);
});

(batched ? test.serial : test.serial.skip)('ackHold off (the default): every batch acknowledged at once', async (t) => {
  const n = 100;
  const { qa, qb } = await exchange(false, n);
  t.true(qa.acksSent >= n && qb.acksSent >= n, `ACKs A ${qa.acksSent}, B ${qb.acksSent} for ${n} messages each`);
});
