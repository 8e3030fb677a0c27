// uroce's transmit flush on the request/response path (issue 17): an answer the application
// posts in reaction to a receive completion — a few microtasks deep, as SMC-R's CDC layer posts
// from a microtask queued by the socket write the completion led to — leaves in the same send
// system call as the ACK for the request it answers: one sendmmsg(2) per answer, so one
// wake-up of the peer. A flush that ran between the completion and the answer (a microtask
// flush: UROCE_FLUSH_MICROTASK=1) sends the ACK alone first, two calls per answer.
// uroce-specific (engine counters), so not part of the provider-neutral cases.
import test from 'ava';
import { WrOpcode, type Cq, type WorkCompletion } from '../../endpoint/verbs/index.js';
import { openUroce, loadSockHelper, type UroceDevice } from '../../endpoint/verbs/uroce/index.js';
import { Access } from './harness.js';
import { connectPair, type Side } from './common.js';

const ROUNDS = 300;
const SIZE = 64;

async function pair(): Promise<[UroceDevice, UroceDevice]> {
  for (let n = 200; n < 240; n++) {
    let a: UroceDevice | undefined;
    try {
      a = await openUroce({ address: `127.0.${n}.1`, gso: true });
      const b = await openUroce({ address: `127.0.${n}.2`, gso: true });
      return [a, b];
    } catch (e) {
      await a?.close();
      if ((e as { code?: string }).code !== 'EADDRINUSE') throw e;
    }
  }
  throw new Error('no free loopback pair');
}

/** Call `fn` with each receive completion of `cq` (other completions are dropped). */
function onRecv(cq: Cq, fn: (wc: WorkCompletion) => void): void {
  cq.on('completion', () => {
    for (let wc = cq.pollOne(); wc; wc = cq.pollOne()) if (wc.opcode >= 128) fn(wc);
    cq.reqNotify();
  });
  cq.reqNotify();
}

const batched = loadSockHelper() !== undefined && process.env.UROCE_NO_BATCH !== '1' && process.env.UROCE_NO_GSO !== '1';

(batched ? test.serial : test.serial.skip)('an answer posted microtasks after the request\'s completion leaves with the request\'s ACK in one sendmmsg', async (t) => {
  const [a, b] = await pair();
  try {
    const { A, B } = connectPair(a, b, { timeout: 14 });
    const mem = (s: Side) => s.pd.regMr(new Uint8Array(2 * SIZE), Access.LOCAL_WRITE);
    const ma = mem(A), mb = mem(B);
    for (const [s, m] of [[A, ma], [B, mb]] as const) for (let i = 0; i < 4; i++) s.qp.postRecv({ wrId: i, sgList: [m.sge(SIZE, SIZE)] });
    let answered = 0;
    let wrong = 0;
    let done: () => void = () => undefined;
    const finished = new Promise<void>((resolve) => { done = resolve; });
    const send = (s: Side, m: typeof ma, id: number) => s.qp.postSend({ wrId: id, opcode: WrOpcode.SEND, sgList: [m.sge(0, SIZE)] });
    // B answers two microtasks after its completion handler ran (as deep as SMC-R's answer)
    onRecv(B.cq, (wc) => {
      void Promise.resolve().then(() => Promise.resolve()).then(() => {
        mb.buffer.copyWithin(0, SIZE, 2 * SIZE);
        B.qp.postRecv({ wrId: wc.wrId, sgList: [mb.sge(SIZE, SIZE)] });
        send(B, mb, answered);
      });
    });
    // A checks the echo and sends the next request from its own completion handler
    onRecv(A.cq, (wc) => {
      if (ma.buffer[SIZE] !== (answered & 0xff)) wrong++;
      A.qp.postRecv({ wrId: wc.wrId, sgList: [ma.sge(SIZE, SIZE)] });
      if (++answered === ROUNDS) { done(); return; }
      ma.buffer.fill(answered & 0xff, 0, SIZE);
      send(A, ma, answered);
    });
    const before = { ...b.engine.stats };
    ma.buffer.fill(0, 0, SIZE);
    send(A, ma, 0);
    const timer = setTimeout(done, 20_000);
    await finished;
    clearTimeout(timer);
    const sb = b.engine.stats;
    const sends = sb.txSends - before.txSends, dgrams = sb.txDatagrams - before.txDatagrams, pkts = sb.txPackets - before.txPackets;
    t.log(`B answered ${answered}: ${pkts} packets, ${dgrams} datagrams in ${sends} send calls`);
    t.is(answered, ROUNDS, 'every request answered');
    t.is(wrong, 0, 'every answer is the request echoed');
    // each answer: its SEND and the ACK of the request in one call (here even one datagram: the
    // shorter ACK ends the SEND's GSO run; SMC-R's answer already ends with its shorter CDC
    // SEND, so its ACK is a second datagram of the same call); a retransmission would add a few
    t.true(pkts >= 2 * ROUNDS, 'an answer and an ACK per request');
    t.true(sends <= ROUNDS + ROUNDS / 20, `one send call per answer (${sends} for ${ROUNDS})`);
    A.qp.destroy();
    B.qp.destroy();
  } finally {
    await a.close();
    await b.close();
  }
});
