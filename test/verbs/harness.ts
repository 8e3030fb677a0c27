// The ava side of the verbs conformance suite: providers that open devices on loopback
// addresses (uroce), the device pair, and registering provider-independent cases (common.ts,
// cases-*.ts) as ava tests. The ibverbs provider runs the same cases in a lab guest over rxe
// (test/native/lab-conformance.ts). Provider-specific extras (fault injection, engine
// counters, a capture tap) are optional hooks.

import type { TestFn } from 'ava';
import { Access, QpState, WrOpcode, SendFlags, type Device, type Mr } from '../../endpoint/verbs/index.js';
import { openUroce, type UroceDevice } from '../../endpoint/verbs/uroce/index.js';
import type { FaultConfig } from '../../endpoint/verbs/uroce/faults.js';
import type { CaptureWriter } from '../../capture/writer.js';
import type { Case, SuiteProvider } from './common.js';

export * from './common.js';

export interface OpenOptions { faults?: FaultConfig; window?: number }

export interface Provider extends SuiteProvider {
  /** Open a device bound to a local IPv4 address. */
  open(address: string, o?: OpenOptions): Promise<Device>;
  /** Optional: write everything the device sends/receives to a capture writer. */
  capture?(dev: Device, w: CaptureWriter): () => void;
}

export const uroce: Provider = {
  name: 'uroce',
  qpPacketStats: true,
  refusedOpcode: WrOpcode.RDMA_READ,
  gidPattern: /^::ffff:127\.0\.\d+\.1$/,
  exactSolicited: true,
  open: (address, o = {}) => openUroce({ address, ...(o.faults ? { faults: o.faults } : {}), ...(o.window ? { window: o.window } : {}) }),
  setFaults: (dev, cfg) => (dev as UroceDevice).engine.setFaults(cfg),
  counters: (dev) => ({ ...(dev as UroceDevice).engine.stats }),
  capture: (dev, w) => (dev as UroceDevice).engine.captureTo(w),
};

/** Providers the suite runs against under ava (the ibverbs provider needs RDMA: lab only). */
export const PROVIDERS: Provider[] = [uroce];

/**
 * Two devices on a pair of loopback addresses: `preferred` first (e.g. 127.0.0.1/127.0.0.2,
 * as the acceptance asks), then 127.0.<n>.1/.2 if another process (a parallel test file,
 * another developer's run) holds UDP 4791 there.
 */
export async function openPair(p: Provider, preferred: [string, string], o: OpenOptions = {}): Promise<[Device, Device]> {
  const candidates: [string, string][] = [preferred];
  for (let n = 100; n < 140; n++) candidates.push([`127.0.${n}.1`, `127.0.${n}.2`]);
  let last: unknown;
  for (const [x, y] of candidates) {
    let a: Device | undefined;
    try {
      a = await p.open(x, o);
      const b = await p.open(y, o);
      return [a, b];
    } catch (e) {
      last = e;
      await a?.close();
      if ((e as { code?: string }).code !== 'EADDRINUSE') throw e;
    }
  }
  throw last;
}

/** Register cases as ava tests titled "<provider>: <title>". */
export function registerCases(test: TestFn, P: SuiteProvider, cases: readonly Case[]): void {
  for (const c of cases) (c.serial ? test.serial : test)(`${P.name}: ${c.title}`, (t) => c.run(t));
}

export { Access, QpState, WrOpcode, SendFlags };
export type { Mr };
