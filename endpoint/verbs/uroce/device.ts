// The uroce device: the verbs Device of one engine (one local IPv4 address). Port 1 is an
// Ethernet port whose GID table holds the address's IPv4-mapped GID (RoCE v2); PDs, MRs over
// Node buffers (lkey = rkey, rxe style), CQs and RC QPs are created here.

import { EventEmitter } from 'node:events';
import { networkInterfaces } from 'node:os';
import { readFileSync } from 'node:fs';
import {
  Access, PortState, VerbsError, AsyncEventType, gidFromIpv4, mtuFromBytes, exactAddr,
  type AsyncEvent, type Cq, type Device, type DeviceAttr, type GidEntry, type GidType, type Mr, type Mtu, type Pd, type PortAttr, type Qp, type QpInitAttr, type QpStats, type Sge,
} from '../types.js';
import { CompletionQueue } from '../cq.js';
import { UroceEngine, type BusyPollStats, type EngineStats } from './engine.js';
import { UroceQp, type QpTuning } from './qp.js';
import type { FaultConfig } from './faults.js';

export interface UroceOptions {
  /** Local IPv4 address to speak RoCEv2 on (UDP 4791 is bound there). */
  address: string;
  /** Device name (default uroce0, uroce1, … in the order devices are opened). */
  name?: string;
  /** Max unacknowledged request packets per QP (default 64). */
  window?: number;
  /** AckReq at least every N packets (default window / 4). */
  ackReqEvery?: number;
  /** Receive socket buffer to ask for (default 4 MiB; the kernel caps it at net.core.rmem_max). */
  rcvbuf?: number;
  /** Deterministic fault injection on transmit (tests). */
  faults?: FaultConfig;
  /** Override the port's active MTU (bytes, 256…4096). Default: from the network device's MTU like rxe. */
  mtu?: number;
  /**
   * UDP GSO for runs of equal-size packets: one send per run (up to 64 packets), the packets'
   * ICRCs computed for IP IDs 0, 1, 2 …, the numbers the kernel gives the segments it cuts.
   * The fast path between uroce engines on loopback (see docs/uroce.md); default off, because
   * a capture on lo (tcpdump, smcdump -i lo) then shows one super-datagram per run instead of
   * RoCE packets. Also on with UROCE_GSO=1; UROCE_NO_GSO=1 forces it off. `dev.engine.gso`
   * switches it at run time.
   */
  gso?: boolean;
  /** Ask for UDP_GRO on the receive socket so that a peer's GSO sends arrive whole. Default: on for 127/8 (or with gso). */
  gro?: boolean;
  /**
   * How often (ms) to check that the address is still on its network device; 0 = never. Default
   * 500 for an address listed on a device (not for the implicit 127/8 of lo). The address is the
   * port's link: when it goes (`ip addr del`, the device removed) port 1 goes DOWN with
   * IBV_EVENT_PORT_ERR, and PORT_ACTIVE when it is back, as rxe reports its netdev going down/up.
   */
  watchMs?: number;
  /**
   * Busy polling (µs; 0 = off, the default): after a receive batch, and after a send outside
   * one, the receive loop polls its socket for this long since the last packet instead of
   * sleeping until the next wakes it — perftest's default CQ polling, SO_BUSY_POLL's trade:
   * a core's CPU for the wake-up of every leg. Also UROCE_BUSY_POLL=<µs>; `dev.engine.busyPollUs`
   * switches it at run time (and reads what is in force: 0 where the helper cannot poll,
   * `dev.engine.busyPollNote` says why).
   */
  busyPollUs?: number;
}

/** Is `address` configured on a network device (what port 1 of a uroce device stands on)? */
function addressPresent(address: string): boolean {
  return Object.values(networkInterfaces()).some((list) => list?.some((a) => a.family === 'IPv4' && a.address === address));
}

let deviceCount = 0;

const MAX = { qp: 1 << 16, wr: 16384, sge: 32, cq: 1 << 16, cqe: 1 << 22, mr: 1 << 20, pd: 1 << 16, inline: 256 };

/** Network device and MTU of a local address (127/8 is lo). */
function netdevOf(address: string): { name: string; mtu: number } | undefined {
  let name: string | undefined;
  if (address.startsWith('127.')) name = 'lo';
  else {
    for (const [n, list] of Object.entries(networkInterfaces())) {
      if (list?.some((a) => a.family === 'IPv4' && a.address === address)) { name = n; break; }
    }
  }
  if (!name) return undefined;
  let mtu = 1500;
  try { mtu = Number(readFileSync(`/sys/class/net/${name}/mtu`, 'utf8').trim()) || 1500; } catch { /* keep 1500 */ }
  return { name, mtu };
}

/** Largest IB MTU fitting a link MTU, the way rxe derives its active MTU (80 header bytes). */
function ibMtuForLink(linkMtu: number): Mtu {
  const m = linkMtu - 80;
  return m >= 4096 ? 5 : m >= 2048 ? 4 : m >= 1024 ? 3 : m >= 512 ? 2 : 1;
}

export class UroceMr implements Mr {
  private dead = false;
  /** addr as a number when exact, else -1 (offsets into the MR without bigint arithmetic). */
  readonly addrNum: number;
  constructor(readonly pd: UrocePd, readonly lkey: number, readonly addr: bigint, readonly buffer: Uint8Array, readonly access: number) {
    this.addrNum = exactAddr(addr);
  }
  get rkey(): number { return this.lkey; }
  /** Not deregistered. */
  get live(): boolean { return !this.dead; }
  get length(): number { return this.buffer.length; }
  sge(offset = 0, length = this.buffer.length - offset): Sge & { addr: bigint } {
    if (offset < 0 || length < 0 || offset + length > this.buffer.length) throw new RangeError(`sge(${offset}, ${length}) outside the ${this.buffer.length}-byte MR`);
    return { addr: this.addr + BigInt(offset), length, lkey: this.lkey };
  }
  dereg(): void {
    if (this.dead) return;
    this.dead = true;
    this.pd.dev.mrGone(this);
  }
}

export class UrocePd implements Pd {
  private dead = false;
  constructor(readonly dev: UroceDevice) {}
  get device(): Device { return this.dev; }

  regMr(buffer: Uint8Array, access: number, opts: { iova?: bigint } = {}): Mr {
    if (this.dead) throw new VerbsError('EINVAL', 'reg_mr on a deallocated PD');
    if (!(buffer instanceof Uint8Array)) throw new VerbsError('EINVAL', 'reg_mr: buffer must be a Uint8Array/Buffer');
    if ((access & (Access.REMOTE_WRITE | Access.REMOTE_ATOMIC)) && !(access & Access.LOCAL_WRITE)) {
      throw new VerbsError('EINVAL', 'reg_mr: REMOTE_WRITE/REMOTE_ATOMIC need LOCAL_WRITE');
    }
    return this.dev.newMr(this, buffer, access, opts.iova);
  }

  createQp(init: QpInitAttr): Qp {
    if (this.dead) throw new VerbsError('EINVAL', 'create_qp on a deallocated PD');
    return this.dev.newQp(this, init);
  }

  dealloc(): void {
    if (this.dev.pdInUse(this)) throw new VerbsError('EBUSY', 'dealloc_pd: MRs or QPs still use this PD');
    this.dead = true;
  }
}

export class UroceDevice extends EventEmitter implements Device {
  readonly provider = 'uroce';
  readonly name: string;
  private readonly mrs = new Map<number, UroceMr>();
  private readonly qps = new Map<number, UroceQp>();
  private readonly cqs = new Set<CompletionQueue>();
  private nextMrIndex = 1;
  private nextQpn = 0x11;
  private nextIova: bigint;
  private readonly tune: QpTuning;
  private readonly portAttr: PortAttr;
  private closed = false;

  private constructor(readonly engine: UroceEngine, o: UroceOptions) {
    super();
    this.name = o.name ?? `uroce${deviceCount++}`;
    if (process.env.UROCE_STATS_DEBUG) process.on('exit', () => { try { process.stderr.write(`UROCE ${process.pid} ${JSON.stringify(this.stats())}\n`); } catch { /* */ } });
    const window = Math.max(1, Math.min(1 << 14, o.window ?? (Number(process.env.UROCE_WINDOW) || 64)));
    this.tune = { window, ackReqEvery: Math.max(1, o.ackReqEvery ?? Math.max(1, window >> 2)) };
    // Fake but realistic user-space addresses, page aligned, different per device.
    this.nextIova = 0x7f0000000000n + (BigInt(Math.floor(Math.random() * 0xfffff)) << 12n);
    const nd = netdevOf(engine.address);
    let active = ibMtuForLink(nd?.mtu ?? 1500);
    if (o.mtu !== undefined) {
      const m = mtuFromBytes(o.mtu);
      if (!m) throw new VerbsError('EINVAL', `mtu ${o.mtu}: one of 256, 512, 1024, 2048, 4096`);
      active = m;
    }
    this.portAttr = { state: PortState.ACTIVE, maxMtu: 5, activeMtu: active, gidTblLen: 1, lid: 0, linkLayer: 'Ethernet', ...(nd ? { netdev: nd.name } : {}) };
    const watchMs = o.watchMs ?? (addressPresent(engine.address) ? 500 : 0);
    if (watchMs > 0) {
      this.watch = setInterval(() => this.checkAddress(), watchMs);
      this.watch.unref();
    }
  }

  private watch: NodeJS.Timeout | undefined;

  /** Port 1 follows its address: gone → DOWN + PORT_ERR, back → ACTIVE + PORT_ACTIVE. */
  private checkAddress(): void {
    const up = addressPresent(this.engine.address);
    if (up === (this.portAttr.state === PortState.ACTIVE)) return;
    this.portAttr.state = up ? PortState.ACTIVE : PortState.DOWN;
    this.emitAsync({ type: up ? AsyncEventType.PORT_ACTIVE : AsyncEventType.PORT_ERR, portNum: 1, reason: `${this.engine.address} ${up ? 'is back' : 'is gone'}` });
  }

  static async open(o: UroceOptions): Promise<UroceDevice> {
    const engine = await UroceEngine.open(o.address, {
      ...(o.rcvbuf ? { rcvbuf: o.rcvbuf } : {}), ...(o.faults ? { faults: o.faults } : {}),
      ...(o.gso !== undefined ? { gso: o.gso } : {}), ...(o.gro !== undefined ? { gro: o.gro } : {}),
      ...(o.busyPollUs !== undefined ? { busyPollUs: o.busyPollUs } : {}),
    });
    return new UroceDevice(engine, o);
  }

  // ---- queries ----

  queryDevice(): DeviceAttr {
    const ip = this.engine.address.split('.').map(Number);
    const guid = (0x0200_00ffn << 32n) | BigInt((((ip[0]! << 24) | (ip[1]! << 16) | (ip[2]! << 8) | ip[3]!) >>> 0));
    return {
      fwVer: 'uroce 1', nodeGuid: guid, sysImageGuid: guid, vendorId: 0, vendorPartId: 0, hwVer: 0,
      maxQp: MAX.qp, maxQpWr: MAX.wr, maxSge: MAX.sge, maxCq: MAX.cq, maxCqe: MAX.cqe, maxMr: MAX.mr, maxMrSize: 1n << 40n,
      maxPd: MAX.pd, maxQpRdAtom: 0, maxQpInitRdAtom: 0, maxInlineData: MAX.inline, physPortCnt: 1,
    };
  }

  queryPort(port = 1): PortAttr {
    if (port !== 1) throw new VerbsError('EINVAL', `query_port: no port ${port}`);
    return { ...this.portAttr };
  }

  gidTable(port = 1): GidEntry[] {
    if (port !== 1) throw new VerbsError('EINVAL', `no port ${port}`);
    return [{ index: 0, gid: gidFromIpv4(this.engine.address), type: 'RoCE v2', ...(this.portAttr.netdev ? { ndev: this.portAttr.netdev } : {}) }];
  }

  queryGid(port: number, index: number): string {
    const e = this.gidTable(port)[index];
    if (!e) throw new VerbsError('EINVAL', `query_gid: no GID ${index} on port ${port}`);
    return e.gid;
  }

  queryGidType(port: number, index: number): GidType {
    const e = this.gidTable(port)[index];
    if (!e) throw new VerbsError('EINVAL', `query_gid_type: no GID ${index} on port ${port}`);
    return e.type;
  }

  // ---- objects ----

  allocPd(): Pd {
    if (this.closed) throw new VerbsError('EINVAL', 'device closed');
    return new UrocePd(this);
  }

  createCq(cqe: number): Cq {
    if (this.closed) throw new VerbsError('EINVAL', 'device closed');
    if (cqe > MAX.cqe) throw new VerbsError('EINVAL', `create_cq: cqe ${cqe} > ${MAX.cqe}`);
    const cq = new CompletionQueue(cqe);
    cq.onOverrun = () => {
      for (const qp of this.qps.values()) if (qp.sendCq === cq || qp.recvCq === cq) qp.cqOverrun();
      this.emitAsync({ type: AsyncEventType.CQ_ERR, cq, reason: `CQ overrun (${cqe} entries)` });
    };
    this.cqs.add(cq);
    return cq;
  }

  newMr(pd: UrocePd, buffer: Uint8Array, access: number, iova?: bigint): UroceMr {
    if (this.mrs.size >= MAX.mr) throw new VerbsError('ENOMEM', 'reg_mr: too many MRs');
    const idx = this.nextMrIndex++ & 0xffffff;
    const key = ((idx << 8) | ((Math.random() * 256) & 0xff)) >>> 0;
    const addr = iova ?? this.nextIova;
    if (iova === undefined) this.nextIova += ((BigInt(buffer.length) + 4095n) & ~4095n) + 4096n;
    const mr = new UroceMr(pd, key, addr, buffer, access);
    this.mrs.set(key, mr);
    return mr;
  }

  mrGone(mr: UroceMr): void { this.mrs.delete(mr.lkey); }
  mrByLkey(lkey: number): UroceMr | undefined { return this.mrs.get(lkey >>> 0); }
  mrByRkey(rkey: number): UroceMr | undefined { return this.mrs.get(rkey >>> 0); }
  mrByAddr(addr: bigint, len: number): UroceMr | undefined {
    for (const mr of this.mrs.values()) if (addr >= mr.addr && addr + BigInt(len) <= mr.addr + BigInt(mr.length)) return mr;
    return undefined;
  }

  newQp(pd: UrocePd, init: QpInitAttr): UroceQp {
    if (this.closed) throw new VerbsError('EINVAL', 'device closed');
    if (!(init.sendCq instanceof CompletionQueue) || !(init.recvCq instanceof CompletionQueue) || !this.cqs.has(init.sendCq) || !this.cqs.has(init.recvCq)) {
      throw new VerbsError('EINVAL', 'create_qp: CQs must come from this device');
    }
    if (this.qps.size >= MAX.qp) throw new VerbsError('ENOMEM', 'create_qp: too many QPs');
    let qpn = this.nextQpn;
    while (this.qps.has(qpn) || qpn < 0x11) qpn = (qpn + 1) & 0xffffff;
    this.nextQpn = (qpn + 1) & 0xffffff;
    const qp = new UroceQp(qpn, pd, this, this.engine, init, this.tune);
    this.qps.set(qpn, qp);
    this.engine.register(qp);
    return qp;
  }

  qpDestroyed(qp: UroceQp): void {
    this.qps.delete(qp.qpNum);
    this.engine.unregister(qp.qpNum);
  }

  pdInUse(pd: UrocePd): boolean {
    for (const m of this.mrs.values()) if (m.pd === pd) return true;
    for (const q of this.qps.values()) if (q.pd === pd) return true;
    return false;
  }

  emitAsync(ev: AsyncEvent): void {
    queueMicrotask(() => { if (!this.closed) this.emit('async', ev); });
  }

  // ---- statistics ----

  /** Engine counters and every QP's counters. */
  stats(): { engine: Readonly<EngineStats>; qps: Record<number, Readonly<QpStats>>; busyPoll?: BusyPollStats } {
    const qps: Record<number, QpStats> = {};
    for (const [n, q] of this.qps) qps[n] = { ...q.stats };
    const bp = this.engine.busyPollStats();
    return { engine: { ...this.engine.stats }, qps, ...(bp && bp.slices > 0 ? { busyPoll: bp } : {}) };
  }

  get address(): string { return this.engine.address; }

  async close(): Promise<void> {
    if (this.closed) return;
    clearInterval(this.watch);
    for (const q of [...this.qps.values()]) q.destroy();
    this.closed = true;
    await this.engine.close();
    this.removeAllListeners();
  }
}

/** Open a uroce device on a local IPv4 address. */
export function openUroce(o: UroceOptions): Promise<UroceDevice> {
  return UroceDevice.open(o);
}
