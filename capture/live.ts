// Live capture: a PacketSource that yields CapturedFrame like the file reader, with the
// kernel's capture timestamp (ns), caplen and original length, and kernel drop counts.
//
// It runs on the project's own libpcap addon (native/src/pcap_live.cc), not on the `cap`
// package: cap throws the timestamp and the original length away, has no pcap_stats, makes
// one JS call per packet and watches its socket on the default libuv loop (it aborts in a
// worker thread). The addon batches packets (one JS call per wake-up), keeps ts/caplen/len,
// reads pcap_stats, and polls on the Env's own loop. The same addon compiles BPF filters
// for frames read from files (BpfMatcher).

import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { endianness } from 'node:os';
import { join } from 'node:path';
import { MutableFrame, type CapturedFrame } from './types.js';
import { packageRoot } from '../native/paths.js';

/** A source of frames in capture order (live capture; file readers have a sync next()). */
export interface PacketSource extends AsyncIterable<CapturedFrame> {
  /** Interface or file name. */
  readonly name: string;
  readonly linktype: number;
  readonly snaplen: number;
  close(): void;
}

export interface LiveCaptureOptions {
  /** Interface name (`lo`, `eth0`, `any`, an RDMA device where libpcap supports it). */
  device: string;
  /** BPF capture filter (pcap-filter syntax). */
  filter?: string;
  /** Bytes kept per frame (default 262144, like tcpdump). */
  snaplen?: number;
  /** Promiscuous mode (default true). */
  promisc?: boolean;
  /** Kernel ring size in bytes (default 32 MiB). */
  bufferSize?: number;
  /** Deliver every packet as soon as it arrives instead of in blocks (more wake-ups). */
  immediate?: boolean;
  /** Longest a packet waits in a partly filled kernel block before delivery (default 50 ms). */
  timeoutMs?: number;
}

export interface LiveStats {
  /** Frames delivered to the consumer. */
  captured: number;
  /** Packets that passed the filter in the kernel (pcap_stats ps_recv), including dropped ones. */
  received: number;
  /** Dropped by the kernel because the ring was full (ps_drop). */
  dropped: number;
  /** Dropped by the interface or its driver (ps_ifdrop), where known. */
  ifDropped: number;
}

export interface InterfaceInfo {
  name: string;
  description?: string;
  loopback: boolean;
  up: boolean;
  running: boolean;
  wireless: boolean;
  connection: string;
  addresses: string[];
}

export type LiveErrorCode = 'EPERM' | 'EPROMISC' | 'ENODEV' | 'ENOTUP' | 'EFILTER' | 'ENOADDON' | 'ERDMA' | 'EPCAP';

/** A capture problem with a one-line message meant for the user; `detail` is libpcap's own text. */
export class LiveCaptureError extends Error {
  override readonly name = 'LiveCaptureError';
  constructor(readonly code: LiveErrorCode, message: string, readonly detail?: string) { super(message); }
}

// ---------------------------------------------------------------------------------------
// The addon

interface AddonStats { received: number; dropped: number; ifDropped: number }
interface AddonOpenInfo { dlt: number; linktype: number; dltName: string; dltDescription: string; snaplen: number; nanosecond: boolean; warning?: string }
interface AddonLiveHandle {
  open(device: string, opts: object, onBatch: (buf: Buffer | null, count: number, err?: Error) => void): AddonOpenInfo;
  stats(): AddonStats;
  flush(): number;
  pause(): void;
  resume(): void;
  close(): void;
}
interface AddonBpfFilter { matches(bytes: Uint8Array, origlen?: number): boolean; close(): void }
interface Addon {
  LiveHandle: new () => AddonLiveHandle;
  BpfFilter: new (linktype: number, snaplen: number, expr: string) => AddonBpfFilter;
  findAllDevs(): InterfaceInfo[];
  dltName(linktype: number): string | null;
  libVersion: string;
  recordHeaderBytes: number;
}

let addon: Addon | undefined;
let addonError: string | undefined;


/** Path of the built addon. */
export function addonPath(): string {
  return join(packageRoot(), 'native', 'build', 'Release', 'pcap_live.node');
}

function loadAddon(): Addon {
  if (addon) return addon;
  if (addonError !== undefined) throw new LiveCaptureError('ENOADDON', addonError);
  const path = addonPath();
  try {
    addon = createRequire(import.meta.url)(path) as Addon;
    return addon;
  } catch (e) {
    const why = existsSync(path) ? (e as Error).message.split('\n')[0] : 'not built';
    addonError = `the libpcap addon (${path}) cannot be loaded: ${why}; build it with \`npm run build:native\` (needs libpcap-dev, g++, make)`;
    throw new LiveCaptureError('ENOADDON', addonError);
  }
}

/** "libpcap version 1.10.3 (with TPACKET_V3)". */
export function pcapVersion(): string {
  return loadAddon().libVersion;
}

/** Interfaces libpcap can capture on (pcap_findalldevs); needs no privilege. */
export function listInterfaces(): InterfaceInfo[] {
  try {
    return loadAddon().findAllDevs();
  } catch (e) {
    if (e instanceof LiveCaptureError) throw e;
    throw new LiveCaptureError('EPCAP', `cannot list interfaces: ${(e as Error).message}`);
  }
}

/** RDMA devices of this host (/sys/class/infiniband): mlx5_0, rxe0, ... */
export function rdmaDevices(): string[] {
  try { return readdirSync('/sys/class/infiniband').sort(); } catch { return []; }
}

/** pcap's name of a link type ("EN10MB", "LINUX_SLL2", ...), or undefined. */
export function dltName(linktype: number): string | undefined {
  return loadAddon().dltName(linktype) ?? undefined;
}

function netdevNames(): string[] {
  try { return readdirSync('/sys/class/net'); } catch { return []; }
}

function interfaceNames(): string[] {
  try { return listInterfaces().map((i) => i.name); } catch { return []; }
}

const CAP_NET_ADMIN = 12;
const CAP_NET_RAW = 13;

function capName(c: number): string { return c === CAP_NET_RAW ? 'CAP_NET_RAW' : c === CAP_NET_ADMIN ? 'CAP_NET_ADMIN' : `capability ${c}`; }

/** This process's effective capabilities (Linux /proc/self/status CapEff), or undefined. */
function effectiveCaps(): Set<number> | undefined {
  try {
    const m = /^CapEff:\s*([0-9a-f]+)$/m.exec(readFileSync('/proc/self/status', 'utf8'));
    if (!m) return undefined;
    const bits = BigInt(`0x${m[1]}`);
    const out = new Set<number>();
    for (let i = 0; i < 64; i++) if ((bits >> BigInt(i)) & 1n) out.add(i);
    return out;
  } catch {
    return undefined;
  }
}

/** Turn the addon's error into a one-line message that says what to do. */
function explainOpenError(e: unknown, o: LiveCaptureOptions): LiveCaptureError {
  const err = e as Error & { code?: string };
  const detail = err.message;
  const dev = o.device;
  switch (err.code) {
    case 'EPERM': {
      const caps = effectiveCaps();
      const missing = caps === undefined ? 'CAP_NET_RAW' : [CAP_NET_RAW, CAP_NET_ADMIN].filter((c) => !caps.has(c)).map(capName).join(' and ');
      if (missing === '') {
        return new LiveCaptureError('EPERM', `capturing on ${dev} was refused although this process has CAP_NET_RAW and CAP_NET_ADMIN (a security module or a user namespace?) (libpcap: ${detail})`, detail);
      }
      // Packet sockets need CAP_NET_RAW; CAP_NET_ADMIN is what tcpdump is usually given too
      // (hardware timestamps, some drivers).
      const need = missing.includes('CAP_NET_RAW') ? 'CAP_NET_RAW' : missing;
      return new LiveCaptureError('EPERM',
        `no permission to capture on ${dev}: this process lacks ${need} (run smcdump as root, e.g. with sudo; see docs/smcdump.md "Privileges") (libpcap: ${detail})`, detail);
    }
    case 'EPROMISC':
      return new LiveCaptureError('EPROMISC',
        `no permission to put ${dev} in promiscuous mode: needs CAP_NET_ADMIN; run as root, grant it, or capture without promiscuous mode (-p) (libpcap: ${detail})`, detail);
    case 'ENOTUP':
      return new LiveCaptureError('ENOTUP', `interface ${dev} is down (bring it up: ip link set ${dev} up)`, detail);
    case 'EFILTER':
      return new LiveCaptureError('EFILTER', `bad filter "${o.filter ?? ''}": ${detail}`, detail);
    case 'ENODEV': {
      if (rdmaDevices().includes(dev)) {
        return new LiveCaptureError('ERDMA',
          `${dev} is an RDMA device, but this libpcap (${pcapVersion()}) cannot capture on RDMA devices (built without rdma-core); see docs/smcdump.md "Capturing SMC-R" (known interfaces: ${interfaceNames().join(', ')})`, detail);
      }
      return new LiveCaptureError('ENODEV', `no interface "${dev}" (known: ${interfaceNames().join(', ') || 'none'})`, detail);
    }
    default:
      return new LiveCaptureError('EPCAP', `cannot capture on ${dev}: ${detail}`, detail);
  }
}

// ---------------------------------------------------------------------------------------
// Live capture

const LE = endianness() === 'LE';
const NS = 1_000_000_000n;
const TWO32 = 0x1_0000_0000;


/** One batch from the addon: records (see pcap_live.cc) in one buffer; `u8`/`dv` view it. */
interface Batch { u8: Uint8Array; count: number; pos: number; left: number; dv: DataView }

export class LiveCapture implements PacketSource {
  readonly name: string;
  /** LINKTYPE_* of every frame (Ethernet on lo/eth*, LINUX_SLL2 on `any`). */
  readonly linktype: number;
  /** libpcap's name and description of the link type: "EN10MB", "Ethernet". */
  readonly dltName: string;
  readonly dltDescription: string;
  readonly snaplen: number;
  /** Timestamps carry nanoseconds (else microseconds, scaled to ns). */
  readonly nanosecond: boolean;
  /** libpcap's warning from activation (e.g. promiscuous mode not supported), if any. */
  readonly warning: string | undefined;
  readonly filter: string | undefined;
  private readonly timeoutMs: number;
  private readonly immediate: boolean;
  private handle: AddonLiveHandle | undefined;
  private captured = 0;
  private finalStats: LiveStats | undefined;
  private onFrame: ((f: CapturedFrame) => void) | undefined;
  private onError: ((e: Error) => void) | undefined;
  private afterBatch: (() => void) | undefined;
  private error: Error | undefined;
  private readonly queue: Batch[] = [];
  private queuedFrames = 0;
  private paused = false;
  private waiter: (() => void) | undefined;
  private halted = false;
  private readonly frame = new MutableFrame();
  private secKey = -1;
  private secNs = 0n;
  /** Iterator mode: pause reading (the kernel ring takes over) above this many queued frames. */
  static maxQueuedFrames = 200_000;

  private constructor(o: LiveCaptureOptions) {
    const a = loadAddon();
    // Unknown names are reported as such even without privileges (libpcap would say
    // "permission denied" first).
    if (!interfaceNames().includes(o.device) && !netdevNames().includes(o.device)) {
      throw explainOpenError(Object.assign(new Error('No such device exists'), { code: 'ENODEV' }), o);
    }
    this.name = o.device;
    this.filter = o.filter;
    this.timeoutMs = o.timeoutMs ?? 50;
    this.immediate = o.immediate === true;
    const user = o.filter !== undefined && o.filter.trim() !== '' ? o.filter : undefined;
    // On a loopback device every packet reaches packet sockets twice (going out, coming in)
    // and libpcap keeps only the incoming copy: the kernel is asked not to queue the
    // outgoing one at all (PACKET_IGNORE_OUTGOING), which halves ring use and copying.
    const loopback = a.findAllDevs().some((i) => i.name === o.device && i.loopback);
    const h = new a.LiveHandle();
    let info: AddonOpenInfo;
    try {
      info = h.open(o.device, {
        snaplen: o.snaplen ?? 262144, promisc: o.promisc !== false, bufferSize: o.bufferSize ?? 32 << 20,
        timeoutMs: this.timeoutMs, immediate: this.immediate, filter: user, ignoreOutgoing: loopback,
      }, (buf, count, err) => this.onBatch(buf, count, err));
    } catch (e) {
      throw explainOpenError(e, o);
    }
    this.handle = h;
    this.linktype = info.linktype;
    this.dltName = info.dltName;
    this.dltDescription = info.dltDescription;
    this.snaplen = info.snaplen;
    this.nanosecond = info.nanosecond;
    this.warning = info.warning;
    this.frame.linktype = info.linktype;
    this.frame.ifName = o.device;
  }

  /**
   * Open and activate a capture (throws LiveCaptureError with a one-line message). Frames are
   * read from the kernel at once; until a consumer is attached (start() or for-await) they
   * are queued.
   */
  static open(o: LiveCaptureOptions): LiveCapture {
    return new LiveCapture(o);
  }

  /**
   * Deliver frames to `onFrame`, synchronously, in capture order. The frame object is
   * reused and valid only during the call (clone it to keep it). `onError` receives a read
   * error (the capture is closed then). An exception thrown by `onFrame` ends the capture
   * and goes to `onError` (or, without one, becomes an uncaught exception). `afterBatch`
   * runs after each batch of frames (a good moment to flush output).
   */
  start(onFrame: (f: CapturedFrame) => void, onError?: (e: Error) => void, afterBatch?: () => void): void {
    this.onFrame = onFrame;
    this.onError = onError;
    this.afterBatch = afterBatch;
    while (this.queue.length > 0 && !this.halted) this.deliverBatch(this.queue.shift()!);
    this.queuedFrames = 0;
    if (this.paused && this.handle) { this.paused = false; this.handle.resume(); }
    if (this.error) this.fail(this.error);
  }

  /** Frames delivered so far. */
  get framesCaptured(): number { return this.captured; }

  /** Counters now (or at close). */
  stats(): LiveStats {
    if (this.finalStats) return { ...this.finalStats };
    if (!this.handle) return { captured: this.captured, received: 0, dropped: 0, ifDropped: 0 };
    const s = this.handle.stats();
    return { captured: this.captured, received: s.received, dropped: s.dropped, ifDropped: s.ifDropped };
  }

  /**
   * Stop capturing and close. With `drain` (default) first collect what the kernel still
   * holds: packets wait in a partly filled block until it has been current for a whole
   * timeout period (so up to two timeouts), hence this waits 2 x timeoutMs + 50 ms, then
   * reads everything readable. Without it (e.g. -c reached) it stops at once: no further
   * frame is delivered. Resolves with the final counters.
   */
  async stop(opts: { drain?: boolean } = {}): Promise<LiveStats> {
    if (!this.handle) return this.stats();
    if (opts.drain !== false && !this.halted) {
      if (!this.immediate) await new Promise((r) => setTimeout(r, 2 * this.timeoutMs + 50));
      if (this.handle) {
        try { this.handle.flush(); } catch (e) { this.fail(e as Error); }
      }
    }
    this.halted = true;
    this.close();
    return this.stats();
  }

  /** Stop at once (no further frames), keeping the final counters. Idempotent. */
  close(): void {
    this.halted = true;
    const h = this.handle;
    if (!h) return;
    try {
      const s = h.stats();
      this.finalStats = { captured: this.captured, received: s.received, dropped: s.dropped, ifDropped: s.ifDropped };
    } catch {
      this.finalStats = { captured: this.captured, received: 0, dropped: 0, ifDropped: 0 };
    }
    this.handle = undefined;
    h.close();
    this.wake();
  }

  private onBatch(buf: Buffer | null, count: number, err?: Error): void {
    if (err || !buf) {
      this.error = new LiveCaptureError('EPCAP', `capture on ${this.name} failed: ${err?.message ?? 'unknown error'}`, err?.message);
      if (this.onFrame) this.fail(this.error); else this.wake();
      return;
    }
    if (this.halted) return;
    // Plain Uint8Array views (Buffer#subarray is several times slower per frame).
    const b: Batch = { u8: new Uint8Array(buf.buffer, buf.byteOffset, buf.length), count, pos: 0, left: count, dv: new DataView(buf.buffer, buf.byteOffset, buf.length) };
    if (this.onFrame) {
      this.deliverBatch(b);
      return;
    }
    this.queue.push(b);
    this.queuedFrames += count;
    if (this.queuedFrames > LiveCapture.maxQueuedFrames && this.handle && !this.paused) {
      this.paused = true;
      this.handle.pause();
    }
    this.wake();
  }

  private deliverBatch(b: Batch): void {
    const f = this.frame;
    const cb = this.onFrame!;
    try {
      while (b.left > 0 && !this.halted) {
        this.parseInto(b, f);
        this.captured++;
        cb(f);
      }
      if (this.afterBatch) this.afterBatch();
    } catch (e) {
      this.fail(e as Error);
    }
  }

  /** Parse the next record of `b` into `f` (advances b). */
  private parseInto(b: Batch, f: MutableFrame): void {
    const dv = b.dv;
    const o = b.pos;
    const sec = dv.getUint32(o, LE) + dv.getUint32(o + 4, LE) * TWO32;
    const frac = dv.getUint32(o + 8, LE);
    const caplen = dv.getUint32(o + 12, LE);
    f.origlen = dv.getUint32(o + 16, LE);
    f.caplen = caplen;
    f.data = b.u8.subarray(o + 24, o + 24 + caplen);
    if (sec !== this.secKey) { this.secKey = sec; this.secNs = BigInt(sec) * NS; }
    f.tsNs = this.secNs + BigInt(this.nanosecond ? frac : frac * 1000);
    b.pos = o + 24 + ((caplen + 7) & ~7);
    b.left--;
  }

  private fail(e: Error): void {
    const handler = this.onError;
    this.close();
    if (handler) handler(e);
    else throw e;
  }

  private wake(): void {
    const w = this.waiter;
    this.waiter = undefined;
    if (w) w();
  }

  /** Iterate frames (each a new object; its bytes stay valid). Ends when the capture is
   *  closed; a read error is thrown. Do not combine with start(). */
  async *[Symbol.asyncIterator](): AsyncIterator<CapturedFrame> {
    if (this.onFrame) throw new Error('LiveCapture: start() already attached a consumer');
    for (;;) {
      const b = this.queue[0];
      if (b) {
        if (b.left === 0) { this.queue.shift(); continue; }
        const f = new MutableFrame();
        f.linktype = this.frame.linktype;
        f.ifName = this.frame.ifName;
        this.parseInto(b, f);
        this.captured++;
        this.queuedFrames--;
        if (this.paused && this.handle && this.queuedFrames < LiveCapture.maxQueuedFrames / 2) {
          this.paused = false;
          this.handle.resume();
        }
        yield f;
        continue;
      }
      if (this.error) throw this.error;
      if (!this.handle) return;
      await new Promise<void>((r) => { this.waiter = r; });
    }
  }
}

// ---------------------------------------------------------------------------------------
// BPF on frames from files

/**
 * A capture filter (pcap-filter syntax) applied to frames read from a file: compiled with
 * libpcap for each link type met (pcapng files can mix them) and run by pcap_offline_filter.
 * A filter libpcap rejects throws LiveCaptureError('EFILTER') quoting libpcap's message.
 */
export class BpfMatcher {
  private readonly byLinktype = new Map<number, AddonBpfFilter>();
  private lastLt = -1;
  private last: AddonBpfFilter | undefined;

  constructor(readonly expression: string, private readonly snaplen = 262144) {
    loadAddon();
  }

  /** Compile for a link type now (to report a bad filter before reading). */
  compile(linktype: number): void {
    this.filterFor(linktype);
  }

  matches(f: CapturedFrame): boolean {
    const flt = f.linktype === this.lastLt && this.last ? this.last : this.filterFor(f.linktype);
    return flt.matches(f.data, f.origlen);
  }

  private filterFor(linktype: number): AddonBpfFilter {
    let flt = this.byLinktype.get(linktype);
    if (!flt) {
      try {
        flt = new (loadAddon().BpfFilter)(linktype, this.snaplen, this.expression);
      } catch (e) {
        const msg = (e as Error).message;
        throw new LiveCaptureError('EFILTER', `bad filter "${this.expression}": ${msg}`, msg);
      }
      this.byLinktype.set(linktype, flt);
    }
    this.lastLt = linktype;
    this.last = flt;
    return flt;
  }

  close(): void {
    for (const f of this.byLinktype.values()) f.close();
    this.byLinktype.clear();
    this.last = undefined;
    this.lastLt = -1;
  }
}
