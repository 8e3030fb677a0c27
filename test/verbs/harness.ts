// Provider-independent harness for the verbs conformance suite: everything goes through the
// verbs interface (endpoint/verbs/types.ts), so the native ibverbs provider can run the same
// tests by adding an entry to PROVIDERS. Provider-specific extras (fault injection, engine
// counters, a capture tap) are optional hooks.

import { createHash } from 'node:crypto';
import {
  Access, QpState, WrOpcode, SendFlags, mtuBytes,
  type Cq, type Device, type Mr, type Pd, type Qp, type WorkCompletion, type Mtu,
} from '../../endpoint/verbs/index.js';
import { openUroce, type UroceDevice } from '../../endpoint/verbs/uroce/index.js';
import type { FaultConfig } from '../../endpoint/verbs/uroce/faults.js';
import type { CaptureWriter } from '../../capture/writer.js';

export interface OpenOptions { faults?: FaultConfig; window?: number }

export interface Provider {
  name: string;
  /** Open a device bound to a local IPv4 address. */
  open(address: string, o?: OpenOptions): Promise<Device>;
  /** Optional: change fault injection on an open device. */
  setFaults?(dev: Device, cfg: FaultConfig | undefined): void;
  /** Optional: device-level counters. */
  counters?(dev: Device): Record<string, number>;
  /** Optional: write everything the device sends/receives to a capture writer. */
  capture?(dev: Device, w: CaptureWriter): () => void;
}

export const uroce: Provider = {
  name: 'uroce',
  open: (address, o = {}) => openUroce({ address, ...(o.faults ? { faults: o.faults } : {}), ...(o.window ? { window: o.window } : {}) }),
  setFaults: (dev, cfg) => (dev as UroceDevice).engine.setFaults(cfg),
  counters: (dev) => ({ ...(dev as UroceDevice).engine.stats }),
  capture: (dev, w) => (dev as UroceDevice).engine.captureTo(w),
};

/** Providers the suite runs against (UROCE_PROVIDERS=… could select later). */
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

export interface Side {
  dev: Device;
  pd: Pd;
  cq: Cq;
  qp: Qp;
}

export interface PairOptions {
  mtu?: Mtu;
  /** Local ACK timeout code (default 10 ≈ 4 ms: fast retransmits on loopback). */
  timeout?: number;
  retryCnt?: number;
  rnrRetry?: number;
  minRnrTimer?: number;
  /** qp_access_flags of both QPs (default LOCAL_WRITE | REMOTE_WRITE). */
  access?: number;
  cqe?: number;
  /** CQ size of B only (default: cqe). */
  cqeB?: number;
  maxSendWr?: number;
  maxRecvWr?: number;
  sqSigAll?: boolean;
  maxInlineData?: number;
  psnA?: number;
  psnB?: number;
}

/** Create PD/CQ/QP on both devices and bring the two QPs to RTS, connected to each other. */
export function connectPair(a: Device, b: Device, o: PairOptions = {}): { A: Side; B: Side } {
  const mk = (dev: Device, cqe: number): Side => {
    const pd = dev.allocPd();
    const cq = dev.createCq(cqe);
    const qp = pd.createQp({ sendCq: cq, recvCq: cq, cap: { maxSendWr: o.maxSendWr ?? 1024, maxRecvWr: o.maxRecvWr ?? 1024, maxSendSge: 4, maxRecvSge: 4, maxInlineData: o.maxInlineData ?? 0 }, sqSigAll: o.sqSigAll ?? false });
    return { dev, pd, cq, qp };
  };
  const A = mk(a, o.cqe ?? 4096), B = mk(b, o.cqeB ?? o.cqe ?? 4096);
  const psnA = o.psnA ?? 0x123456, psnB = o.psnB ?? 0xfffff0; // B's PSNs wrap around 2^24 early
  const mtu = o.mtu ?? (Math.min(a.queryPort(1).activeMtu, b.queryPort(1).activeMtu) as Mtu);
  const up = (s: Side, peer: Side, myPsn: number, peerPsn: number): void => {
    s.qp.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: 1, qpAccessFlags: o.access ?? (Access.LOCAL_WRITE | Access.REMOTE_WRITE) });
    s.qp.modify({
      qpState: QpState.RTR, pathMtu: mtu, destQpNum: peer.qp.qpNum, rqPsn: peerPsn, maxDestRdAtomic: 0, minRnrTimer: o.minRnrTimer ?? 1,
      ahAttr: { isGlobal: true, portNum: 1, grh: { dgid: peer.dev.queryGid(1, 0), sgidIndex: 0, hopLimit: 64, trafficClass: 0, flowLabel: 0 } },
    });
    s.qp.modify({ qpState: QpState.RTS, sqPsn: myPsn, timeout: o.timeout ?? 10, retryCnt: o.retryCnt ?? 7, rnrRetry: o.rnrRetry ?? 7, maxRdAtomic: 0 });
  };
  up(A, B, psnA, psnB);
  up(B, A, psnB, psnA);
  return { A, B };
}

/** Wait for n completions on a CQ (no polling loop: awaits the CQ), with a deadline. */
export async function collect(cq: Cq, n: number, ms = 60_000): Promise<WorkCompletion[]> {
  const out: WorkCompletion[] = [];
  const ac = new AbortController();
  const t = setTimeout(() => ac.abort(new Error(`timeout: ${out.length}/${n} completions after ${ms} ms`)), ms);
  try {
    while (out.length < n) {
      await cq.wait(ac.signal);
      out.push(...cq.poll(n - out.length));
    }
  } finally {
    clearTimeout(t);
  }
  return out;
}

/** Wait (without spinning) until cond() holds; false after `ms`. For counters that settle asynchronously. */
export async function until(cond: () => boolean, ms = 5000): Promise<boolean> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) return false;
    await new Promise((r) => setTimeout(r, 5));
  }
  return true;
}

/** Deterministic test data (xorshift32), so both ends can hash what they expect. */
export function pattern(n: number, seed: number): Uint8Array {
  const b = new Uint8Array(n);
  let x = (seed | 1) >>> 0;
  let i = 0;
  for (; i + 4 <= n; i += 4) {
    x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0;
    b[i] = x; b[i + 1] = x >>> 8; b[i + 2] = x >>> 16; b[i + 3] = x >>> 24;
  }
  for (; i < n; i++) { x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0; b[i] = x; }
  return b;
}

export function sha256(b: Uint8Array): string { return createHash('sha256').update(b).digest('hex'); }

export function mtuOf(m: Mtu): number { return mtuBytes(m); }

export { Access, QpState, WrOpcode, SendFlags };
export type { Mr };
