// The `ibverbs` provider: the verbs interface (../types.ts) on real RDMA devices through
// libibverbs, via the native addon native/verbs (which opens libibverbs with dlopen, so this
// module loads everywhere and says why RDMA is unavailable).
//
//   const st = ibverbsStatus();            // { available, reason?, devices }
//   const dev = await openIbverbs({ device: 'rxe0' });
//
// Completions: each CQ has a completion channel whose fd libuv polls; the addon drains the CQ
// when it becomes readable and the completions land in the shared CompletionQueue (poll(),
// wait(), next(), async iteration, reqNotify + 'completion'): no busy polling. Memory regions
// keep their Node buffer alive (a native reference) until dereg(). Async events (port down,
// QP fatal, CQ error …) are 'async' events of the device. Every failing verbs call throws a
// VerbsError whose message names the call ("ibv_reg_mr failed: Cannot allocate memory (ENOMEM)").

import { EventEmitter } from 'node:events';
import { createRequire } from 'node:module';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import {
  Access, AsyncEventType as AsyncEvents, QpAttrMask, QpState, QpType, SendFlags, VerbsError, WcOpcode, WrOpcode, addrBig, attrMaskOf, gidBytes, gidText, gidToIpv4, qpStateName,
  type AhAttr, type AsyncEvent, type AsyncEventType, type Cq, type Device, type DeviceAttr, type GidEntry, type GidType,
  type Mr, type Mtu, type Pd, type PortAttr, type Qp, type QpAttr, type QpCap, type QpInitAttr, type QpStats,
  type RecvWr, type SendWr, type Sge, type WcStatus, type WorkCompletion, type WrId,
} from '../types.js';
import { CompletionQueue } from '../cq.js';
import { checkTransition } from '../qpstate.js';
import { packageRoot } from '../../../native/paths.js';

// ---------------------------------------------------------------------------------------------
// The addon
// ---------------------------------------------------------------------------------------------

interface NativeWc { wrId: bigint; status: number; opcode: number; vendorErr: number; byteLen: number; qpNum: number; srcQp: number; wcFlags: number; immData?: number }
interface NativeAsync { type: number; name: string; qp?: number; qpNum?: number; cq?: number; portNum?: number }
interface NativeQpAttr {
  qpState: number; curQpState: number; pathMtu: number; rqPsn: number; sqPsn: number; destQpNum: number; qpAccessFlags: number;
  pkeyIndex: number; portNum: number; minRnrTimer: number; timeout: number; retryCnt: number; rnrRetry: number;
  maxRdAtomic: number; maxDestRdAtomic: number;
  ahAttr: { isGlobal: boolean; dlid: number; sl: number; portNum: number; grh?: { dgid: Uint8Array; sgidIndex: number; hopLimit: number; trafficClass: number; flowLabel: number } };
  cap: QpCap;
}
/** The native module's surface (native/verbs/src/verbs.cc). Handles are numbers. */
export interface VerbsAddon {
  status(): { loaded: boolean; library: string; error?: string };
  deviceList(): Array<{ name: string; guid: bigint }>;
  open(name: string, onAsync: (ev: NativeAsync) => void): number;
  close(ctx: number): void;
  queryDevice(ctx: number): Omit<DeviceAttr, 'maxInlineData'>;
  queryPort(ctx: number, port: number): { state: number; maxMtu: number; activeMtu: number; gidTblLen: number; lid: number; linkLayer: number };
  queryGid(ctx: number, port: number, index: number): { gid: Uint8Array; type?: number; ndevIfindex?: number } | null;
  allocPd(ctx: number): number;
  deallocPd(pd: number): void;
  regMr(pd: number, buf: Uint8Array, access: number): { handle: number; lkey: number; rkey: number; addr: bigint };
  deregMr(mr: number): void;
  createCq(ctx: number, cqe: number, onWc: (wcs: NativeWc[]) => void): { handle: number; cqe: number };
  refCq(cq: number, ref: boolean): void;
  pollCq(cq: number): void;
  destroyCq(cq: number): void;
  createQp(pd: number, scq: number, rcq: number, cap: Record<string, unknown>): { handle: number; qpNum: number; cap: QpCap };
  modifyQp(qp: number, attr: Record<string, unknown>, mask: number): void;
  queryQp(qp: number): NativeQpAttr;
  destroyQp(qp: number): void;
  postSend(qp: number, wrs: Array<Record<string, unknown>>): void;
  postRecv(qp: number, wrs: Array<Record<string, unknown>>): void;
}

/** Why RDMA through libibverbs cannot be used here. `message` is one line starting with
 *  "libibverbs not available: ". */
export class IbverbsUnavailableError extends Error {
  override readonly name = 'IbverbsUnavailableError';
  /** 'ENOADDON' (not built), 'ENOLIB' (no libibverbs), 'ENOSYS' (kernel without RDMA), 'ENODEV' (no devices), … */
  constructor(readonly code: string, message: string) { super(message); }
}


/** Path of the built addon (`node-gyp rebuild -C native/verbs`). */
export function verbsAddonPath(): string {
  return join(packageRoot(), 'native', 'verbs', 'build', 'Release', 'verbs.node');
}

let addon: VerbsAddon | undefined;
let addonError: IbverbsUnavailableError | undefined;

/** The native module, loaded once (throws IbverbsUnavailableError ENOADDON). */
export function loadVerbsAddon(): VerbsAddon {
  if (addon) return addon;
  if (addonError) throw addonError;
  const path = verbsAddonPath();
  try {
    addon = createRequire(import.meta.url)(path) as VerbsAddon;
    return addon;
  } catch (e) {
    const why = existsSync(path) ? (e as Error).message.split('\n')[0] : 'it is not built';
    addonError = new IbverbsUnavailableError('ENOADDON', `libibverbs not available: the smcscope verbs addon cannot be loaded (${why}); build it with \`npm_config_nodedir=/usr node-gyp rebuild -C native/verbs\` (needs libibverbs-dev, g++)`);
    throw addonError;
  }
}

/** Wrap a native call: native errors become VerbsError (message names the call), TypeErrors stay. */
function call<T>(f: () => T): T {
  try {
    return f();
  } catch (e) {
    if (e instanceof TypeError || e instanceof VerbsError) throw e;
    const x = e as Error & { code?: string; badWr?: number };
    if (typeof x.message === 'string' && x.message.startsWith('libibverbs not available')) throw new IbverbsUnavailableError(x.code ?? 'ENOLIB', x.message);
    throw new VerbsError(x.code ?? 'EIO', x.message, x.badWr);
  }
}

export interface IbverbsStatus {
  available: boolean;
  /** One line: "libibverbs not available: …" when not available. */
  reason?: string;
  code?: string;
  devices: Array<{ name: string; guid: bigint }>;
}

/** Can RDMA be used through libibverbs here, and on which devices? Never throws. */
export function ibverbsStatus(): IbverbsStatus {
  try {
    const a = loadVerbsAddon();
    const s = a.status();
    if (!s.loaded) return { available: false, reason: s.error, code: 'ENOLIB', devices: [] };
    const devices = call(() => a.deviceList());
    if (devices.length === 0) {
      return { available: false, code: 'ENODEV', devices, reason: 'libibverbs not available: no RDMA devices (for Soft-RoCE: modprobe rdma_rxe; rdma link add rxe0 type rxe netdev eth0)' };
    }
    return { available: true, devices };
  } catch (e) {
    const err = e as { code?: string; message: string };
    return { available: false, code: err.code ?? 'EIO', reason: err.message, devices: [] };
  }
}

// ---------------------------------------------------------------------------------------------
// Work request ids, validation
// ---------------------------------------------------------------------------------------------

const BIGINT_TAG = 1n << 63n;

/** A WrId as the 64-bit wr_id the addon passes through: numbers as they are, bigints tagged with
 *  bit 63 so completions give back the same JavaScript type. */
export function encodeWrId(id: WrId): bigint {
  if (typeof id === 'number') {
    if (!Number.isSafeInteger(id) || id < 0) throw new TypeError(`wrId ${id} must be a non-negative safe integer or a bigint`);
    return BigInt(id);
  }
  if (typeof id === 'bigint') {
    if (id < 0n || id >= BIGINT_TAG) throw new TypeError(`wrId ${id}n must be a bigint in [0, 2^63)`);
    return id | BIGINT_TAG;
  }
  throw new TypeError(`wrId must be a number or a bigint, got ${typeof id}`);
}

export function decodeWrId(x: bigint): WrId {
  return x & BIGINT_TAG ? x & ~BIGINT_TAG : Number(x);
}

const SEND_OPCODES = new Set<number>([WrOpcode.SEND, WrOpcode.SEND_WITH_IMM, WrOpcode.RDMA_WRITE, WrOpcode.RDMA_WRITE_WITH_IMM, WrOpcode.RDMA_READ]);

function checkSges(sg: readonly Sge[] | undefined, where: string): Array<Record<string, unknown>> {
  if (sg === undefined) return [];
  if (!Array.isArray(sg)) throw new TypeError(`${where}: sgList must be an array`);
  return sg.map((s, i) => {
    if (typeof s !== 'object' || s === null) throw new TypeError(`${where}: sgList[${i}] must be an object`);
    // the addon reads a uint64_t from a bigint: a number address (VerbsAddr) becomes one here
    const addr = typeof s.addr === 'bigint' ? (s.addr >= 0n ? s.addr : undefined) : addrBig(s.addr);
    if (addr === undefined) throw new TypeError(`${where}: sgList[${i}].addr must be a non-negative bigint or safe integer`);
    if (!Number.isInteger(s.length) || s.length < 0 || s.length > 0xffffffff) throw new TypeError(`${where}: sgList[${i}].length must be a 32-bit length`);
    if (!Number.isInteger(s.lkey) || s.lkey < 0 || s.lkey > 0xffffffff) throw new TypeError(`${where}: sgList[${i}].lkey must be a 32-bit key`);
    return { addr, length: s.length, lkey: s.lkey };
  });
}

/** A send WR in the addon's shape; throws TypeError naming the bad field. */
export function nativeSendWr(wr: SendWr, i = 0): Record<string, unknown> {
  const where = `ibv_post_send (work request ${i})`;
  if (typeof wr !== 'object' || wr === null) throw new TypeError(`${where}: must be an object`);
  if (!SEND_OPCODES.has(wr.opcode)) throw new TypeError(`${where}: opcode ${String(wr.opcode)} is not SEND, SEND_WITH_IMM, RDMA_WRITE, RDMA_WRITE_WITH_IMM or RDMA_READ`);
  const flags = wr.sendFlags ?? 0;
  if (!Number.isInteger(flags) || flags < 0 || flags > 0x1f) throw new TypeError(`${where}: sendFlags ${flags} is not a SendFlags bit set`);
  const o: Record<string, unknown> = { wrId: encodeWrId(wr.wrId), opcode: wr.opcode, sendFlags: flags };
  if (wr.opcode === WrOpcode.SEND_WITH_IMM || wr.opcode === WrOpcode.RDMA_WRITE_WITH_IMM) {
    if (!Number.isInteger(wr.immData) || wr.immData! < 0 || wr.immData! > 0xffffffff) throw new TypeError(`${where}: immData must be a 32-bit number`);
    o.immData = wr.immData;
  }
  if (wr.opcode === WrOpcode.RDMA_WRITE || wr.opcode === WrOpcode.RDMA_WRITE_WITH_IMM || wr.opcode === WrOpcode.RDMA_READ) {
    const ra = wr.rdma?.remoteAddr;
    const remoteAddr = typeof ra === 'bigint' ? ra : typeof ra === 'number' ? addrBig(ra) : undefined;
    if (remoteAddr === undefined || !Number.isInteger(wr.rdma!.rkey) || wr.rdma!.rkey < 0 || wr.rdma!.rkey > 0xffffffff) {
      throw new TypeError(`${where}: RDMA opcodes need rdma: { remoteAddr: bigint or safe integer, rkey: 32-bit number }`);
    }
    o.rdma = { remoteAddr, rkey: wr.rdma!.rkey };
  }
  if (wr.inlineData !== undefined) {
    if (!(wr.inlineData instanceof Uint8Array)) throw new TypeError(`${where}: inlineData must be a Uint8Array`);
    if (!(flags & SendFlags.INLINE)) throw new TypeError(`${where}: inlineData needs SendFlags.INLINE`);
    if (wr.sgList !== undefined) throw new TypeError(`${where}: give inlineData or sgList, not both`);
    o.inlineData = wr.inlineData;
  } else {
    o.sgList = checkSges(wr.sgList, where);
  }
  return o;
}

export function nativeRecvWr(wr: RecvWr, i = 0): Record<string, unknown> {
  const where = `ibv_post_recv (work request ${i})`;
  if (typeof wr !== 'object' || wr === null) throw new TypeError(`${where}: must be an object`);
  return { wrId: encodeWrId(wr.wrId), sgList: checkSges(wr.sgList, where) };
}

// ---------------------------------------------------------------------------------------------
// Objects
// ---------------------------------------------------------------------------------------------

function sysfs(path: string): string | undefined {
  try { return readFileSync(path, 'utf8').trim(); } catch { return undefined; }
}

function ifnameByIndex(): Map<number, string> {
  const m = new Map<number, string>();
  try {
    for (const n of readdirSync('/sys/class/net')) {
      const i = Number(sysfs(`/sys/class/net/${n}/ifindex`));
      if (i) m.set(i, n);
    }
  } catch { /* no sysfs */ }
  return m;
}

const ZERO_GID = '::';

export class IbvMr implements Mr {
  private dead = false;
  constructor(readonly pd: IbvPd, readonly handle: number, readonly lkey: number, readonly rkey: number, readonly addr: bigint, readonly buffer: Uint8Array, readonly access: number) {}
  get length(): number { return this.buffer.length; }
  sge(offset = 0, length = this.buffer.length - offset): Sge & { addr: bigint } {
    if (!Number.isInteger(offset) || !Number.isInteger(length) || offset < 0 || length < 0 || offset + length > this.buffer.length) {
      throw new RangeError(`sge(${offset}, ${length}) outside the ${this.buffer.length}-byte MR`);
    }
    return { addr: this.addr + BigInt(offset), length, lkey: this.lkey };
  }
  dereg(): void {
    if (this.dead) return;
    call(() => this.pd.dev.native.deregMr(this.handle));
    this.dead = true;
    this.pd.mrs.delete(this);
  }
}

export class IbvPd implements Pd {
  private dead = false;
  /** Registered MRs (deregistered by dealloc()/close() of the device). */
  readonly mrs = new Set<IbvMr>();
  constructor(readonly dev: IbvDevice, readonly handle: number) { dev.pds.add(this); }
  get device(): Device { return this.dev; }

  regMr(buffer: Uint8Array, access: number, opts: { iova?: bigint } = {}): Mr {
    if (!(buffer instanceof Uint8Array)) throw new TypeError('ibv_reg_mr: buffer must be a Uint8Array (or Buffer)');
    if (!Number.isInteger(access) || access < 0 || access > 0x7f) throw new TypeError(`ibv_reg_mr: access ${access} is not an Access bit set`);
    if ((access & (Access.REMOTE_WRITE | Access.REMOTE_ATOMIC)) && !(access & Access.LOCAL_WRITE)) {
      throw new VerbsError('EINVAL', 'ibv_reg_mr failed: REMOTE_WRITE/REMOTE_ATOMIC need LOCAL_WRITE (EINVAL)');
    }
    const r = call(() => this.dev.native.regMr(this.handle, buffer, access));
    if (opts.iova !== undefined && opts.iova !== r.addr) {
      call(() => this.dev.native.deregMr(r.handle));
      throw new VerbsError('EOPNOTSUPP', 'ibv_reg_mr: a chosen iova is not supported by the ibverbs provider (the address is the buffer\'s)');
    }
    const mr = new IbvMr(this, r.handle, r.lkey, r.rkey, r.addr, buffer, access);
    this.mrs.add(mr);
    return mr;
  }

  createQp(init: QpInitAttr): Qp {
    if (typeof init !== 'object' || init === null) throw new TypeError('ibv_create_qp: init attributes must be an object');
    if (!(init.sendCq instanceof IbvCq) || !(init.recvCq instanceof IbvCq)) throw new TypeError('ibv_create_qp: sendCq and recvCq must be CQs of the ibverbs provider');
    if (init.sendCq.dev !== this.dev || init.recvCq.dev !== this.dev) throw new VerbsError('EINVAL', 'ibv_create_qp failed: the CQs belong to another device (EINVAL)');
    if ((init.qpType ?? QpType.RC) !== QpType.RC) throw new VerbsError('EOPNOTSUPP', `ibv_create_qp: only RC QPs (qpType ${QpType.RC}) are supported`);
    const c = init.cap;
    if (typeof c !== 'object' || c === null) throw new TypeError('ibv_create_qp: cap must be an object');
    const cap = { maxSendWr: c.maxSendWr, maxRecvWr: c.maxRecvWr, maxSendSge: c.maxSendSge ?? 1, maxRecvSge: c.maxRecvSge ?? 1, maxInlineData: c.maxInlineData ?? 0, sqSigAll: init.sqSigAll === true };
    const r = call(() => this.dev.native.createQp(this.handle, (init.sendCq as IbvCq).handleOf(), (init.recvCq as IbvCq).handleOf(), cap));
    const qp = new IbvQp(this, r.handle, r.qpNum, init.sendCq as IbvCq, init.recvCq as IbvCq, r.cap);
    this.dev.qps.set(r.handle, qp);
    return qp;
  }

  dealloc(): void {
    if (this.dead) return;
    call(() => this.dev.native.deallocPd(this.handle));
    this.dead = true;
    this.dev.pds.delete(this);
  }
}

export class IbvCq extends CompletionQueue {
  private handle = 0;
  constructor(readonly dev: IbvDevice, cqe: number) {
    super(cqe);
    const r = call(() => dev.native.createCq(dev.ctx, cqe, (wcs) => this.deliver(wcs)));
    this.handle = r.handle;
    dev.cqs.set(r.handle, this);
    // The addon drains the kernel CQ as soon as its channel fires, so the CQ that can overrun is
    // this one (`cqe` completions waiting to be polled). As on hardware: its QPs go to ERR and
    // the device raises IBV_EVENT_CQ_ERR; later completions are dropped (counted in `dropped`).
    this.onOverrun = () => {
      for (const q of dev.qps.values()) if (q.sendCq === this || q.recvCq === this) q.toError();
      dev.emit('async', { type: AsyncEvents.CQ_ERR, cq: this, reason: `IBV_EVENT_CQ_ERR: CQ overrun (${cqe} entries waiting)` } satisfies AsyncEvent);
    };
  }
  handleOf(): number { return this.handle; }

  private deliver(wcs: NativeWc[]): void {
    for (const w of wcs) {
      const wc: WorkCompletion = {
        wrId: decodeWrId(w.wrId), status: w.status as WcStatus, opcode: w.opcode as WorkCompletion['opcode'], vendorErr: w.vendorErr,
        byteLen: w.byteLen, qpNum: w.qpNum, srcQp: w.srcQp, wcFlags: w.wcFlags,
      };
      if (w.immData !== undefined) wc.immData = w.immData;
      const qp = this.dev.qpByNum(w.qpNum);
      // libibverbs defines src_qp for UD only and rxe leaves it 0 on RC; the verbs interface
      // promises the connected QP's number on RC receive completions: filled in from the QP.
      if ((w.opcode & WcOpcode.RECV) && wc.srcQp === 0 && qp?.destQpn !== undefined) wc.srcQp = qp.destQpn;
      if (qp && (w.opcode & WcOpcode.RECV) && w.status === 0) qp.countRecv(w.byteLen);
      // The channel does not say whether a message had SE: receive completions wake a
      // solicited-only waiter (a superset of what hardware would do), sends do not.
      this.push(wc, (w.opcode & WcOpcode.RECV) !== 0);
    }
  }

  override destroy(): void {
    if (this.isDestroyed) return;
    super.destroy(); // throws EBUSY while QPs use it
    call(() => this.dev.native.destroyCq(this.handle));
    this.dev.cqs.delete(this.handle);
  }
}

export class IbvQp implements Qp {
  readonly qpType = QpType.RC;
  private dead = false;
  /** The state the last successful modify() set (the kernel may since have moved it to ERR). */
  private setState: QpState = QpState.RESET;
  /** The connected QP's number (set at RTR). */
  destQpn: number | undefined;
  private readonly st: QpStats = {
    txPackets: 0, txBytes: 0, rxPackets: 0, rxBytes: 0, retransmits: 0, timeouts: 0, naksSent: 0, naksReceived: 0,
    seqNaksSent: 0, seqNaksReceived: 0, rnrNaksSent: 0, rnrNaksReceived: 0, acksSent: 0, acksReceived: 0,
    duplicates: 0, outOfSequence: 0, drops: 0, messagesSent: 0, messagesReceived: 0,
  };

  constructor(readonly pdObj: IbvPd, readonly handle: number, readonly qpNum: number, readonly sendCq: IbvCq, readonly recvCq: IbvCq, readonly cap: QpCap) {
    sendCq.users++;
    if (recvCq !== sendCq) recvCq.users++;
  }
  get pd(): Pd { return this.pdObj; }
  private get native(): VerbsAddon { return this.pdObj.dev.native; }

  get state(): QpState { return call(() => this.native.queryQp(this.handle)).qpState as QpState; }

  modify(attr: QpAttr, mask?: number): void {
    if (typeof attr !== 'object' || attr === null) throw new TypeError('ibv_modify_qp: attr must be an object');
    const m = mask ?? attrMaskOf(attr);
    const cur = this.state;
    const next = attr.qpState ?? cur;
    checkTransition(cur, m, next, attr.curQpState);
    // What the kernel would refuse with a bare EINVAL, refused here with the reason.
    const bad = (what: string): never => { throw new VerbsError('EINVAL', `ibv_modify_qp: ${what} (EINVAL)`); };
    if ((m & QpAttrMask.PATH_MTU) && !(Number.isInteger(attr.pathMtu) && attr.pathMtu! >= 1 && attr.pathMtu! <= 5)) bad(`path_mtu ${attr.pathMtu} is not an ibv_mtu (1..5)`);
    if ((m & QpAttrMask.AV) && attr.ahAttr) {
      const port = attr.ahAttr.portNum ?? attr.portNum ?? 1;
      if ((!attr.ahAttr.isGlobal || !attr.ahAttr.grh) && this.pdObj.dev.queryPort(port).linkLayer === 'Ethernet') {
        bad('RoCE needs a global route (ah_attr.is_global with a GRH)');
      }
    }
    const a: Record<string, unknown> = { ...attr };
    delete a.ahAttr;
    if (attr.ahAttr) {
      const ah = attr.ahAttr;
      const n: Record<string, unknown> = { isGlobal: ah.isGlobal, dlid: ah.dlid ?? 0, sl: ah.sl ?? 0, portNum: ah.portNum ?? 1 };
      if (ah.grh) n.grh = { ...ah.grh, dgid: gidBytes(ah.grh.dgid) };
      a.ahAttr = n;
    }
    call(() => this.native.modifyQp(this.handle, a, m));
    this.setState = next;
    if (m & QpAttrMask.DEST_QPN) this.destQpn = attr.destQpNum;
    else if (next === QpState.RESET) this.destQpn = undefined;
  }

  /** Move to ERR (CQ overrun); never throws. */
  toError(): void {
    if (this.dead) return;
    try { this.native.modifyQp(this.handle, { qpState: QpState.ERR }, QpAttrMask.STATE); this.setState = QpState.ERR; } catch { /* already gone */ }
  }

  query(): ReturnType<Qp['query']> {
    const q = call(() => this.native.queryQp(this.handle));
    const ah: AhAttr = { isGlobal: q.ahAttr.isGlobal, dlid: q.ahAttr.dlid, sl: q.ahAttr.sl, portNum: q.ahAttr.portNum };
    if (q.ahAttr.grh) ah.grh = { ...q.ahAttr.grh, dgid: gidText(q.ahAttr.grh.dgid) };
    return {
      qpState: q.qpState as QpState, pathMtu: q.pathMtu as Mtu, rqPsn: q.rqPsn, sqPsn: q.sqPsn, destQpNum: q.destQpNum,
      qpAccessFlags: q.qpAccessFlags, minRnrTimer: q.minRnrTimer, timeout: q.timeout, retryCnt: q.retryCnt, rnrRetry: q.rnrRetry,
      ahAttr: ah, cap: q.cap,
    };
  }

  /**
   * ibv_post_send. A bad work request (malformed, more SGEs than max_send_sge, inline data beyond
   * max_inline_data, QP not yet in RTS) throws VerbsError EINVAL naming it, with `badWr` its index;
   * the work requests before it are posted, as libibverbs does.
   */
  postSend(wr: SendWr | readonly SendWr[]): void {
    const list = (Array.isArray(wr) ? wr : [wr]) as readonly SendWr[];
    const nat: Array<Record<string, unknown>> = [];
    let err: VerbsError | undefined;
    for (let i = 0; i < list.length && !err; i++) {
      const w = list[i]!;
      const where = `ibv_post_send (work request ${i})`;
      try {
        if (this.dead) throw new VerbsError('EINVAL', `${where}: the QP is destroyed (EINVAL)`, i);
        // the work request itself first (as libibverbs' provider validates it), then the QP state
        const n = nativeSendWr(w, i);
        const sges = w.sgList?.length ?? 0;
        if (w.inlineData === undefined && sges > this.cap.maxSendSge) throw new VerbsError('EINVAL', `${where}: ${sges} SGEs > max_send_sge ${this.cap.maxSendSge} (EINVAL)`, i);
        if ((w.sendFlags ?? 0) & SendFlags.INLINE) {
          const len = w.inlineData ? w.inlineData.length : (w.sgList ?? []).reduce((s, g) => s + g.length, 0);
          if (len > this.cap.maxInlineData) throw new VerbsError('EINVAL', `${where}: ${len} inline bytes > max_inline_data ${this.cap.maxInlineData} (EINVAL)`, i);
        }
        if (this.setState < QpState.RTS) throw new VerbsError('EINVAL', `${where}: QP ${this.qpNum} is in ${qpStateName(this.setState)}, sending needs RTS (EINVAL)`, i);
        nat.push(n);
      } catch (e) {
        err = e instanceof VerbsError ? e : new VerbsError('EINVAL', `${(e as Error).message} (EINVAL)`, i);
      }
    }
    if (nat.length) {
      call(() => this.native.postSend(this.handle, nat));
      for (let i = 0; i < nat.length; i++) {
        const w = list[i]!;
        this.st.messagesSent++;
        this.st.txBytes += w.inlineData ? w.inlineData.length : (w.sgList ?? []).reduce((s, g) => s + g.length, 0);
      }
    }
    if (err) throw err;
  }

  /** ibv_post_recv; bad work requests as for postSend (RESET: EINVAL; a full RQ: ENOMEM from libibverbs). */
  postRecv(wr: RecvWr | readonly RecvWr[]): void {
    const list = (Array.isArray(wr) ? wr : [wr]) as readonly RecvWr[];
    const nat: Array<Record<string, unknown>> = [];
    let err: VerbsError | undefined;
    for (let i = 0; i < list.length && !err; i++) {
      const where = `ibv_post_recv (work request ${i})`;
      try {
        if (this.dead) throw new VerbsError('EINVAL', `${where}: the QP is destroyed (EINVAL)`, i);
        if (this.setState === QpState.RESET) throw new VerbsError('EINVAL', `${where}: QP ${this.qpNum} is in RESET (EINVAL)`, i);
        const n = nativeRecvWr(list[i]!, i);
        const sges = list[i]!.sgList.length;
        if (sges > this.cap.maxRecvSge) throw new VerbsError('EINVAL', `${where}: ${sges} SGEs > max_recv_sge ${this.cap.maxRecvSge} (EINVAL)`, i);
        nat.push(n);
      } catch (e) {
        err = e instanceof VerbsError ? e : new VerbsError('EINVAL', `${(e as Error).message} (EINVAL)`, i);
      }
    }
    if (nat.length) call(() => this.native.postRecv(this.handle, nat));
    if (err) throw err;
  }

  countRecv(bytes: number): void { this.st.messagesReceived++; this.st.rxBytes += bytes; }

  /** Message counts kept by this provider; packet-level counters are the device's
   *  (/sys/class/infiniband/DEV/ports/N/hw_counters), not per QP, and stay 0 here. */
  get stats(): Readonly<QpStats> { return this.st; }

  destroy(): void {
    if (this.dead) return;
    call(() => this.native.destroyQp(this.handle));
    this.dead = true;
    this.sendCq.users--;
    if (this.recvCq !== this.sendCq) this.recvCq.users--;
    this.pdObj.dev.qps.delete(this.handle);
    // flushed completions that arrived with the destroy
    if (!this.sendCq.isDestroyed) call(() => this.native.pollCq(this.sendCq.handleOf()));
  }
}

export interface IbverbsOptions {
  /** Device name (ibv_devices); default: the first device. */
  device?: string;
  /** Port the endpoint uses (default 1); checked at open. */
  port?: number;
  /** GID index QPs send from (ahAttr.grh.sgidIndex); default: the port's first IPv4-mapped
   *  RoCE v2 GID (see sourceGid()). Checked at open: the entry must exist. */
  gidIndex?: number;
}

export class IbvDevice extends EventEmitter implements Device {
  readonly provider = 'ibverbs';
  readonly qps = new Map<number, IbvQp>();
  readonly cqs = new Map<number, IbvCq>();
  readonly pds = new Set<IbvPd>();
  private maxInline: number | undefined;
  private closed = false;

  /** The port and GID index chosen at open (IbverbsOptions). */
  readonly port: number;
  readonly gidIndex: number | undefined;
  private srcGid = new Map<number, GidEntry>();

  constructor(readonly native: VerbsAddon, readonly name: string, readonly ctx: number, opts: { port?: number; gidIndex?: number } = {}) {
    super();
    this.port = opts.port ?? 1;
    this.gidIndex = opts.gidIndex;
  }

  /** The GID QPs of this device send from on `port`: the configured gidIndex, else the first
   *  IPv4-mapped RoCE v2 GID, else the first RoCE v2 GID, else index 0. Looked up once. */
  sourceGid(port = this.port): GidEntry {
    const known = this.srcGid.get(port);
    if (known) return known;
    let e: GidEntry | undefined;
    if (this.gidIndex !== undefined && port === this.port) {
      e = this.entry(port, this.gidIndex);
      if (!e) throw new VerbsError('ENODATA', `ibv_query_gid: ${this.name} port ${port} GID index ${this.gidIndex} is empty`);
    } else {
      const table = this.gidTable(port);
      e = table.find((g) => g.type === 'RoCE v2' && gidToIpv4(g.gid) !== undefined) ?? table.find((g) => g.type === 'RoCE v2') ?? table[0];
      if (!e) throw new VerbsError('ENODATA', `ibv_query_gid: ${this.name} port ${port} has no GID`);
    }
    this.srcGid.set(port, e);
    return e;
  }

  qpByNum(n: number): IbvQp | undefined {
    for (const q of this.qps.values()) if (q.qpNum === n) return q;
    return undefined;
  }

  onNativeAsync(ev: NativeAsync): void {
    const out: AsyncEvent = { type: ev.type as AsyncEventType, reason: `IBV_EVENT_${ev.name}` };
    if (ev.qp !== undefined) { const q = this.qps.get(ev.qp); if (q) out.qp = q; }
    if (ev.cq !== undefined) { const c = this.cqs.get(ev.cq); if (c) out.cq = c; }
    if (ev.portNum !== undefined) out.portNum = ev.portNum;
    this.emit('async', out);
  }

  queryDevice(): DeviceAttr {
    const d = call(() => this.native.queryDevice(this.ctx));
    return { ...d, maxInlineData: this.probeMaxInline() };
  }

  /** ibv_query_device does not report it: the largest inline size a test QP is granted. */
  private probeMaxInline(): number {
    if (this.maxInline !== undefined) return this.maxInline;
    let best = 0;
    let pd: number | undefined;
    let cq: number | undefined;
    try {
      pd = this.native.allocPd(this.ctx);
      cq = this.native.createCq(this.ctx, 1, () => {}).handle;
      for (const want of [1024, 512, 256, 128, 64]) {
        try {
          const q = this.native.createQp(pd, cq, cq, { maxSendWr: 1, maxRecvWr: 1, maxInlineData: want });
          best = q.cap.maxInlineData;
          this.native.destroyQp(q.handle);
          break;
        } catch { /* try smaller */ }
      }
    } catch { /* leave 0 */ } finally {
      if (cq !== undefined) try { this.native.destroyCq(cq); } catch { /* ignore */ }
      if (pd !== undefined) try { this.native.deallocPd(pd); } catch { /* ignore */ }
    }
    this.maxInline = best;
    return best;
  }

  queryPort(port = 1): PortAttr {
    const p = call(() => this.native.queryPort(this.ctx, port));
    const out: PortAttr = {
      state: p.state, maxMtu: p.maxMtu as Mtu, activeMtu: p.activeMtu as Mtu, gidTblLen: p.gidTblLen, lid: p.lid,
      linkLayer: p.linkLayer === 2 ? 'Ethernet' : 'InfiniBand',
    };
    const nd = sysfs(`/sys/class/infiniband/${this.name}/ports/${port}/gid_attrs/ndevs/0`);
    if (nd) out.netdev = nd;
    return out;
  }

  private entry(port: number, index: number, names?: Map<number, string>): GidEntry | undefined {
    const g = call(() => this.native.queryGid(this.ctx, port, index));
    if (!g) return undefined;
    const gid = gidText(g.gid);
    if (gid === ZERO_GID) return undefined;
    let type: GidType;
    if (g.type !== undefined) type = g.type === 2 ? 'RoCE v2' : 'IB/RoCE v1';
    else type = sysfs(`/sys/class/infiniband/${this.name}/ports/${port}/gid_attrs/types/${index}`) === 'RoCE v2' ? 'RoCE v2' : 'IB/RoCE v1';
    const e: GidEntry = { index, gid, type };
    const nd = g.ndevIfindex ? (names ?? ifnameByIndex()).get(g.ndevIfindex) : sysfs(`/sys/class/infiniband/${this.name}/ports/${port}/gid_attrs/ndevs/${index}`);
    if (nd) e.ndev = nd;
    return e;
  }

  queryGid(port: number, index: number): string {
    return this.entry(port, index)?.gid ?? ZERO_GID;
  }

  queryGidType(port: number, index: number): GidType {
    const e = this.entry(port, index);
    if (!e) throw new VerbsError('ENODATA', `ibv_query_gid_type: port ${port} GID index ${index} is empty`);
    return e.type;
  }

  gidTable(port = 1): GidEntry[] {
    const len = this.queryPort(port).gidTblLen;
    const names = ifnameByIndex();
    const out: GidEntry[] = [];
    for (let i = 0; i < len; i++) {
      const e = this.entry(port, i, names);
      if (e) out.push(e);
    }
    return out;
  }

  allocPd(): Pd { return new IbvPd(this, call(() => this.native.allocPd(this.ctx))); }

  createCq(cqe: number): Cq {
    if (!Number.isInteger(cqe) || cqe < 1) throw new VerbsError('EINVAL', `ibv_create_cq: cqe ${cqe} must be >= 1`);
    return new IbvCq(this, cqe);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    for (const q of [...this.qps.values()]) q.destroy();
    for (const p of [...this.pds]) {
      for (const m of [...p.mrs]) m.dereg();
      p.dealloc();
    }
    for (const c of [...this.cqs.values()]) c.destroy();
    call(() => this.native.close(this.ctx));
    this.closed = true;
    this.removeAllListeners();
  }
}

/** Open an RDMA device through libibverbs. Throws IbverbsUnavailableError (one line) when there
 *  is none, VerbsError when the device cannot be opened. */
export async function openIbverbs(opts: IbverbsOptions = {}): Promise<Device> {
  if (typeof opts !== 'object' || opts === null) throw new TypeError('openIbverbs: options must be an object');
  if (opts.device !== undefined && (typeof opts.device !== 'string' || opts.device === '')) throw new TypeError('openIbverbs: device must be a non-empty string');
  if (opts.port !== undefined && !(Number.isInteger(opts.port) && opts.port >= 1 && opts.port <= 255)) throw new TypeError('openIbverbs: port must be an integer 1..255');
  if (opts.gidIndex !== undefined && !(Number.isInteger(opts.gidIndex) && opts.gidIndex >= 0)) throw new TypeError('openIbverbs: gidIndex must be a non-negative integer');
  const st = ibverbsStatus();
  if (!st.available) throw new IbverbsUnavailableError(st.code ?? 'ENODEV', st.reason ?? 'libibverbs not available');
  const name = opts.device ?? st.devices[0]!.name;
  if (!st.devices.some((d) => d.name === name)) {
    throw new IbverbsUnavailableError('ENODEV', `libibverbs not available: no RDMA device ${name} (devices: ${st.devices.map((d) => d.name).join(', ')})`);
  }
  const native = loadVerbsAddon();
  // `let`: the async-event callback below refers to the device created from its own context.
  // eslint-disable-next-line prefer-const
  let dev: IbvDevice | undefined;
  const ctx = call(() => native.open(name, (ev) => dev?.onNativeAsync(ev)));
  dev = new IbvDevice(native, name, ctx, { ...(opts.port !== undefined ? { port: opts.port } : {}), ...(opts.gidIndex !== undefined ? { gidIndex: opts.gidIndex } : {}) });
  try {
    dev.queryPort(dev.port); // the port exists
    if (opts.gidIndex !== undefined) dev.sourceGid(dev.port); // the GID entry exists
  } catch (e) {
    await dev.close();
    throw e;
  }
  return dev;
}
