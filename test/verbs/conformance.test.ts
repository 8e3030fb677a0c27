// Verbs conformance, part 1 (cases-conformance.ts): objects, state machine, and data transfer
// of every size class over every path MTU. Two devices on 127.0.0.1 and 127.0.0.2 (real UDP on
// loopback for uroce). The ibverbs provider runs the same cases over rxe in a lab guest
// (test/native/lab-conformance.ts).
import test from 'ava';
import { PROVIDERS, openPair, registerCases, type Devices } from './harness.js';
import { conformanceCases } from './cases-conformance.js';

for (const P of PROVIDERS) {
  const env = {} as Devices;
  test.before(async () => { [env.a, env.b] = await openPair(P, ['127.0.0.1', '127.0.0.2']); });
  test.after.always(async () => { await env.a?.close(); await env.b?.close(); });
  registerCases(test, P, conformanceCases(P, env));
}
