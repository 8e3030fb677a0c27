// Verbs conformance, part 3 (cases-faults.ts): reliability under deterministic fault injection,
// every byte checked by SHA-256 and the recovery visible in the counters. Needs a provider with
// a fault-injection hook (uroce); others skip it.
import test from 'ava';
import { PROVIDERS, openPair, registerCases, type Devices } from './harness.js';
import { faultCases, faultsUnsupported } from './cases-faults.js';

for (const P of PROVIDERS) {
  const why = faultsUnsupported(P);
  if (why) { test(`${P.name}: fault injection`, (t) => { t.log(why); t.pass(); }); continue; }
  const env = {} as Devices;
  test.before(async () => { [env.a, env.b] = await openPair(P, ['127.0.0.5', '127.0.0.6']); });
  test.after.always(async () => { await env.a?.close(); await env.b?.close(); });
  registerCases(test, P, faultCases(P, env));
}
