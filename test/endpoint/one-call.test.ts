// One native call per receive batch (issue 17, docs/uroce.md round 12): an answer the
// application writes in its 'data' handler leaves from the receive batch's own call (its CDC
// flush runs at the batch's end, the engine sends there); one written from a promise
// continuation leaves from a microtask the post queues, with the request's ACK; either way the
// native loop skips its second call (after()). An answer written from a later event (a timer,
// an immediate) leaves when written, and after() sends the request's ACK first. A flush that
// waited for an after() the loop skipped would never leave (the retransmission goes through the
// same flush): each round trip has a deadline, and every byte of every answer is compared.
import test from 'ava';
import { createServer, connect, closeAll, endpoint, type SmcSocket, type SmcOptions } from '../../endpoint/index.js';
import type { UroceDevice } from '../../endpoint/verbs/uroce/index.js';
import { loadSockHelper } from '../../endpoint/verbs/uroce/index.js';
import { freePair } from './stacks.js';

const UEID = 'SMCSCOPE-ONECALL';
const ROUNDS = 300;
const SIZE = 64;
let A = '', B = '';
test.before(async () => { [A, B] = await freePair(97); });
test.after.always(() => closeAll());

type How = 'sync' | 'promise' | 'timer' | 'immediate';
const opts = (address: string): SmcOptions => ({ device: { provider: 'uroce', address, gso: true }, ueids: [UEID], tcpOption: 'ignore' });

/** The server's answer to one chunk, written the way `how` says. */
function answer(s: SmcSocket, d: Buffer, how: How): void {
  if (how === 'sync') s.write(d);
  else if (how === 'promise') void Promise.resolve().then(() => Promise.resolve()).then(() => s.write(d));
  else if (how === 'timer') setTimeout(() => s.write(d), 0);
  else setImmediate(() => s.write(d));
}

/** ROUNDS request/response round trips of SIZE bytes, each compared; rejects on a wrong byte
 *  or a round trip over `deadlineMs`. */
async function rr(s: SmcSocket, deadlineMs: number): Promise<void> {
  const req = Buffer.alloc(SIZE);
  let got: Buffer[] = [];
  let have = 0;
  let wake: (() => void) | undefined;
  const onData = (d: Buffer): void => { got.push(d); have += d.length; if (have >= SIZE && wake) { const w = wake; wake = undefined; w(); } };
  s.on('data', onData);
  try {
    for (let i = 0; i < ROUNDS; i++) {
      for (let k = 0; k < SIZE; k++) req[k] = (i * 7 + k) & 0xff;
      s.write(req);
      if (have < SIZE) {
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([
          new Promise<void>((resolve) => { wake = resolve; }),
          new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new Error(`round trip ${i}: no answer within ${deadlineMs} ms`)), deadlineMs); }),
        ]);
        clearTimeout(timer);
      }
      const reply = Buffer.concat(got);
      if (!reply.equals(req)) throw new Error(`round trip ${i}: the answer differs from its request`);
      got = []; have = 0;
    }
  } finally {
    s.off('data', onData);
  }
}

const batched = loadSockHelper() !== undefined && process.env.UROCE_NO_BATCH !== '1';

for (const how of ['sync', 'promise', 'timer', 'immediate'] as const) {
  (batched ? test.serial : test.serial.skip)(`an echo that answers ${how === 'sync' ? 'in its data handler' : `from ${how === 'immediate' ? 'an' : 'a'} ${how}`}: every byte back, the answer leaves at once`, async (t) => {
    const server = createServer(opts(B), (s) => {
      s.on('error', () => undefined); // the client side closes first
      s.on('data', (d: Buffer) => answer(s, d, how));
    });
    const addr = await server.listen(0, B);
    let c: SmcSocket | undefined;
    try {
      c = await connect({ ...opts(A), host: B, port: addr.port, localAddress: A });
      t.is(c.mode, 'smcr');
      const engine = ((await endpoint(opts(B))).device as UroceDevice).engine;
      await rr(c, 10_000); // warm-up
      const before = { ...engine.stats };
      await rr(c, 5000);
      const st = engine.stats;
      const batches = st.rxBatches - before.rxBatches, afters = st.rxAfterCalls - before.rxAfterCalls, sends = st.txSends - before.txSends;
      t.log(`server: ${ROUNDS} answers, ${batches} receive batches, ${afters} after() calls, ${sends} send calls`);
      if (how === 'sync' || how === 'promise') {
        // the answer and the request's ACK in one sendmmsg (a retransmission or a consumer
        // update would add a few)
        t.true(sends <= ROUNDS + ROUNDS / 10, `one send call per answer (${sends} for ${ROUNDS})`);
      } else {
        // from a later event the ACK leaves first (after()), the answer when it is written
        t.true(sends <= 2 * ROUNDS + ROUNDS / 10, `the ACK and the answer (${sends} send calls for ${ROUNDS})`);
      }
      // an answer in the batch's call or its microtasks: no after(); else after() sends the ACK
      if (how === 'sync' || how === 'promise') t.true(afters <= batches / 10, `after() skipped when the answer left with the batch (${afters} of ${batches} batches)`);
      else t.true(afters >= ROUNDS * 0.9, `after() sends the ACK of a request not answered in its turn (${afters} for ${ROUNDS})`);
    } finally {
      c?.destroy();
      await server.close();
    }
  });
}
