// Provider-independent parts of the verbs conformance suite: the pair of connected QPs, waiting
// for completions, test data, and the shape of a test case. Everything goes through the verbs
// interface (endpoint/verbs/types.ts) and nothing here opens a device, so the same cases run
// under ava on uroce (harness.ts: *.test.ts) and on the ibverbs provider over rxe in a lab
// guest (test/native/lab-conformance-guest.ts, bundled without ava or uroce).
import { createHash } from 'node:crypto';
import type { ExecutionContext } from 'ava';
import {
  Access, QpState, mtuBytes,
  type Cq, type Device, type Pd, type Qp, type WorkCompletion, type Mtu,
} from '../../endpoint/verbs/types.js';
import type { FaultConfig } from '../../endpoint/verbs/uroce/faults.js';

/** The assertions the cases use: ava's ExecutionContext, or the guest runner's equivalent. */
export type Assert = Pick<ExecutionContext, 'is' | 'not' | 'true' | 'truthy' | 'like' | 'deepEqual' | 'throws' | 'regex' | 'pass' | 'log'>;

/** One test case, provider-independent; its title gets the provider's name in front. */
export interface Case {
  title: string;
  /** Under ava: test.serial (else concurrent, as the ava file always did). The guest runs all in order. */
  serial: boolean;
  run(t: Assert): Promise<void> | void;
}

/** What the cases need to know about a provider beyond the verbs interface. */
export interface SuiteProvider {
  name: string;
  /** Qp.stats has packet-level counters (RNR NAKs, timeouts, retransmissions): uroce. Without
   *  them the cases read the device's counters (counters(); rxe's hw_counters names). */
  qpPacketStats: boolean;
  /** Optional: device-level counters. */
  counters?(dev: Device): Record<string, number>;
  /** Optional: change fault injection on an open device (uroce only). */
  setFaults?(dev: Device, cfg: FaultConfig | undefined): void;
  /** A send opcode the provider refuses at post time (uroce: RDMA READ). Undefined when it posts
   *  every one: the bad-WR case then uses an oversized inline WR as its bad work request. */
  refusedOpcode?: number;
  /** What the IPv4-mapped RoCE v2 GID of the first device looks like. */
  gidPattern: RegExp;
  /** The provider tells solicited from unsolicited receive completions (for solicited-only
   *  notification). The ibverbs provider cannot: a work completion does not carry SE. */
  exactSolicited: boolean;
}

/** The two open devices the cases run on (set by the runner before the first case). */
export interface Devices { a: Device; b: Device }

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

/** The GID (and its index) a device's QPs send from: the device's own choice when it has one
 *  (ibverbs: sourceGid()), else index 0 (uroce's only GID). Same rule as endpoint/verbs sourceGid(). */
export function srcGid(dev: Device): { index: number; gid: string } {
  const d = dev as Device & { sourceGid?: (port: number) => { index: number; gid: string } };
  if (typeof d.sourceGid === 'function') return d.sourceGid(1);
  return { index: 0, gid: dev.queryGid(1, 0) };
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
    const src = srcGid(s.dev), dst = srcGid(peer.dev);
    s.qp.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: 1, qpAccessFlags: o.access ?? (Access.LOCAL_WRITE | Access.REMOTE_WRITE) });
    s.qp.modify({
      qpState: QpState.RTR, pathMtu: mtu, destQpNum: peer.qp.qpNum, rqPsn: peerPsn, maxDestRdAtomic: 0, minRnrTimer: o.minRnrTimer ?? 1,
      ahAttr: { isGlobal: true, portNum: 1, grh: { dgid: dst.gid, sgidIndex: src.index, hopLimit: 64, trafficClass: 0, flowLabel: 0 } },
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

/** Differences of two counter snapshots (keys of `after`). */
export function counterDelta(after: Record<string, number>, before: Record<string, number>): Record<string, number> {
  const d: Record<string, number> = {};
  for (const k of Object.keys(after)) d[k] = after[k]! - (before[k] ?? 0);
  return d;
}
