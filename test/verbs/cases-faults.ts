// Verbs conformance, part 3: reliability under deterministic fault injection — loss,
// reordering, duplication and ICRC corruption at 1, 5 and 10 % on both directions (requests
// and ACK/NAKs) — with every byte checked by SHA-256 and the recovery visible in the counters.
// Needs a provider with a fault-injection hook (uroce); for others it is one skipped case.
import { Mtu } from '../../endpoint/verbs/types.js';
import { connectPair, until, type Assert, type Case, type Devices, type SuiteProvider } from './common.js';
import { stream } from './transfer.js';
import type { FaultConfig } from '../../endpoint/verbs/uroce/faults.js';

type Kind = 'loss' | 'reorder' | 'duplicate' | 'corrupt' | 'corruptPayload';

/** Why a provider cannot run the fault cases, or undefined. */
export function faultsUnsupported(P: SuiteProvider): string | undefined {
  return P.setFaults && P.counters ? undefined : 'provider has no fault injection hook (deterministic loss/reorder/duplication/corruption is a uroce feature)';
}

export function faultCases(P: SuiteProvider, env: Devices): Case[] {
  const cases: Case[] = [];
  const run = async (t: Assert, faults: Partial<Record<Kind, number>>, seed: number, mtu: Mtu = Mtu.MTU_1024): Promise<void> => {
    const cfg: FaultConfig = { seed, ...faults };
    const { a, b } = env;
    const before = { a: P.counters!(a), b: P.counters!(b) };
    P.setFaults!(a, cfg);
    P.setFaults!(b, { ...cfg, seed: seed ^ 0x5555 });
    const { A, B } = connectPair(a, b, { mtu, timeout: 11, retryCnt: 7 });
    try {
      // 2 MiB of RDMA WRITE (in 256 KiB WRs) interleaved with 120 SENDs of 1 B … 20 KB
      const sends = Array.from({ length: 120 }, (_, i) => 1 + ((i * 7919 + seed) % 20_000));
      await stream(A, B, { writeBytes: 2 << 20, sends, seed });
    } finally {
      P.setFaults!(a, undefined);
      P.setFaults!(b, undefined);
    }
    const d = (x: Record<string, number>, y: Record<string, number>, k: string): number => (x[k] ?? 0) - (y[k] ?? 0);
    // retransmissions still in flight when the last WR completed are counted when they land
    await until(() => {
      const xa = P.counters!(a), xb = P.counters!(b);
      return d(xb, before.b, 'icrcErrors') === d(xa, before.a, 'faultCorrupted') && d(xa, before.a, 'icrcErrors') === d(xb, before.b, 'faultCorrupted');
    }, 3000);
    const ca = P.counters!(a), cb = P.counters!(b);
    const injected = (k: string): number => d(ca, before.a, k) + d(cb, before.b, k);
    const sa = A.qp.stats, sb = B.qp.stats;
    t.log(`faults ${JSON.stringify(faults)} seed ${seed}: dropped ${injected('faultDropped')}, duplicated ${injected('faultDuplicated')}, reordered ${injected('faultReordered')}, corrupted ${injected('faultCorrupted')}; ` +
      `requester ${sa.txPackets} pkts, ${sa.retransmits} retransmitted, ${sa.timeouts} timeouts, ${sa.seqNaksReceived} seq NAKs; responder ${sb.duplicates} duplicates, ${sb.outOfSequence} out of sequence`);
    if (faults.loss) { t.true(injected('faultDropped') > 0); t.true(sa.retransmits > 0, 'lost packets were retransmitted'); }
    if (faults.duplicate) { t.true(injected('faultDuplicated') > 0); t.true(sb.duplicates > 0, 'duplicates recognised, not re-executed'); }
    if (faults.reorder) { t.true(injected('faultReordered') > 0); t.true(sb.outOfSequence > 0 || sb.duplicates > 0); }
    if (faults.corrupt || faults.corruptPayload) {
      t.true(injected('faultCorrupted') > 0);
      // every corrupted packet was caught by the receiver's ICRC check, none slipped through
      t.is(d(cb, before.b, 'icrcErrors'), d(ca, before.a, 'faultCorrupted'), 'A→B: ICRC errors = corrupted packets');
      t.is(d(ca, before.a, 'icrcErrors'), d(cb, before.b, 'faultCorrupted'), 'B→A: ICRC errors = corrupted packets');
    } else {
      t.is(d(cb, before.b, 'icrcErrors') + d(ca, before.a, 'icrcErrors'), 0);
    }
    A.qp.destroy(); B.qp.destroy();
  };

  let seed = 1;
  for (const kind of ['loss', 'reorder', 'duplicate', 'corrupt'] as const) {
    for (const rate of [0.01, 0.05, 0.1]) {
      const s = seed++;
      cases.push({ serial: true, title: `${kind} ${rate * 100}% both ways: data intact, recovery in the counters`, run: (t) => run(t, { [kind]: rate }, s * 101) });
    }
  }
  cases.push({ serial: true, title: `payload corruption 5%: caught by the ICRC, data intact`, run: (t) => run(t, { corruptPayload: 0.05 }, 4242) });
  cases.push({ serial: true, title: `everything at once (3% loss, 3% reorder, 3% duplicate, 3% corrupt) at MTU 256`, run: (t) =>
    run(t, { loss: 0.03, reorder: 0.03, duplicate: 0.03, corrupt: 0.03 }, 777, Mtu.MTU_256) });
  cases.push({ serial: true, title: `everything at once (10% each) at MTU 4096`, run: (t) =>
    run(t, { loss: 0.1, reorder: 0.1, duplicate: 0.1, corrupt: 0.1 }, 999, Mtu.MTU_4096) });
  return cases;
}
