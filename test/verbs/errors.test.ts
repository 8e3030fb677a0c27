// Verbs conformance, part 2 (cases-errors.ts): every error path ends in the completion status
// libibverbs reports for it (and in the QP states and async events that go with it).
import test from 'ava';
import { PROVIDERS, openPair, registerCases, type Devices } from './harness.js';
import { errorCases } from './cases-errors.js';

for (const P of PROVIDERS) {
  const env = {} as Devices;
  test.before(async () => { [env.a, env.b] = await openPair(P, ['127.0.0.3', '127.0.0.4']); });
  test.after.always(async () => { await env.a?.close(); await env.b?.close(); });
  registerCases(test, P, errorCases(P, env));
}
