// UDP sockets for uroce.
//
// The ICRC of a RoCEv2 packet covers the outer IPv4 header, including the Identification
// field (only TOS, TTL and the header checksum are masked). A process writing to an ordinary
// UDP socket does not choose that field: Linux gives DF packets of an unconnected socket
// ID 0 only when the socket "does not ignore DF", i.e. IP_MTU_DISCOVER = IP_PMTUDISC_DO;
// with Node's default (PMTUDISC_WANT) every datagram gets a hashed, time-perturbed ID that
// the sender cannot know, so its ICRC would be wrong on the wire. Node's dgram has no
// setsockopt, hence a tiny N-API helper (native/uroce/uroce_sock.c) that opens the socket with
// PMTUDISC_DO, IP_TOS and IP_TTL set and hands the fd to dgram (bind({ fd }), public API).
// The same helper carries the engine's batched paths: sendmmsg(2) of staged packets (with
// optional UDP GSO) and, for the engine's receive socket, which dgram never sees, a recvmmsg(2)
// loop on a libuv poll handle that calls JavaScript once per batch.
//
// Without the helper (not built) uroce still runs: it computes ICRCs for ID 0 and DF, which
// another uroce accepts, but a kernel peer (rxe, an RNIC) drops every packet. `exactIcrc`
// tells which mode is on; the engine says so when it opens.

import dgram from 'node:dgram';
import { createRequire } from 'node:module';
import { constants as osConstants } from 'node:os';
import { existsSync } from 'node:fs';
import { VerbsError } from '../types.js';
import { nativePath } from '../../../native/paths.js';
import { icrcBthMask } from '../../../dissectors/wire/ib.js';

/** Opaque handle of a native receive loop (recvStart). */
export interface RxHandle {
  readonly gro: boolean;
  /** The loop calls recvStart's `after` (undefined: a helper built before it had one). */
  readonly after?: boolean;
  /** The loop reads recvStart's `turn` cells (undefined: a helper built before round 12). */
  readonly turn?: boolean;
  /** The loop writes an ICRC verdict per packet into recvStart's `icrc` cells (undefined: a
   *  helper built before round 14). */
  readonly icrc?: boolean;
}

export interface SockHelper {
  openUdp4(address: string, port: number, tos: number, ttl: number, rcvbuf: number, sndbuf: number): number;
  /**
   * sendmmsg(2) of packets laid out in `buf`: desc[3i..3i+2] = offset, length, GSO segment
   * size (0 or >= length: one datagram; else one UDP_SEGMENT send). Returns how many
   * descriptors were taken (fewer on EAGAIN) or -errno if the first one failed.
   * `nJobs` ICRC jobs at desc[jobsAt …] (after icrcInit): (offset, length, prefix CRC) triples;
   * each packet gets its ICRC before anything is sent (-EINVAL, nothing sent, for a job
   * outside `buf`).
   */
  sendPackets(fd: number, addr: number, port: number, buf: Uint8Array, desc: Int32Array, n: number, nJobs?: number, jobsAt?: number): number;
  /** 1 if the kernel has UDP_SEGMENT. */
  gsoSupported(fd: number): number;
  /**
   * Read `fd` (ownership passes to the loop) with recvmmsg(2) from a libuv poll handle; `cb(n)`
   * once per batch, datagram i in buf[i*slotSize …], meta[4i..4i+3] = length (-1 truncated),
   * source IPv4 (host order), source port, GRO segment size (0: one datagram). `after()`, if
   * given, follows each `cb` once the microtasks it led to have run; with `turn` (two cells
   * shared with the loop: [0] = 1 during a batch's turn, set by the loop; [1] = 1 asks for
   * after(), set by the caller) only when asked in that turn. Negative errno on failure.
   * `icrc` (vmax cells per slot) and `table` (4 × a power of two cells), after icrcInit: a
   * verdict per packet before `cb` (engine.ts onBatch says what the values mean).
   */
  recvStart(fd: number, buf: Uint8Array, meta: Int32Array, slots: number, slotSize: number, gro: boolean, cb: (n: number) => void, after?: () => void, turn?: Int32Array, icrc?: Int32Array, table?: Int32Array): RxHandle | number;
  /** Register the mask laid over every IB packet's first bytes for the ICRC's arithmetic
   *  (round 14); undefined in a helper built before it. */
  icrcInit?(mask: Uint8Array): boolean;
  /** Stop the loop and close its fd. */
  recvStop(h: RxHandle): number;
  /** Whether the loop keeps the process alive (default yes). */
  recvRef(h: RxHandle, ref: boolean): number;
  /**
   * Busy polling (round 16, opt-in): after a batch the loop keeps polling recvmmsg for `us` µs
   * since the last packet instead of sleeping in epoll_wait, in slices of at most 0.5 ms between
   * which the event loop runs (timers, other sockets). 0 = off (the default). Returns the
   * budget in force (clamped to 10 s) or -errno; undefined in a helper built before it.
   */
  recvBusyPoll?(h: RxHandle, us: number, yieldCpu?: boolean, backoffMs?: number): number;
  /** Something was sent outside a receive batch: with a budget, poll for the answer from the
   *  loop's next pass (1), else nothing (0). */
  recvSpin?(h: RxHandle): number;
  /** [slices, batches, empty polls, slices ended by preemption, events left to the event path
   *  while backing off] of the busy polling so far. */
  recvSpinStats?(h: RxHandle): number[] | number;
  /** SO_RCVBUF of fd (bytes) or -errno. */
  rcvbufOf(fd: number): number;
  boundPort(fd: number): number;
  closeFd(fd: number): number;
}

let helper: SockHelper | null | undefined;
let helperError = '';


/** Path of the helper addon (env UROCE_SOCK_ADDON overrides). */
export function sockHelperPath(): string | undefined {
  if (process.env.UROCE_SOCK_ADDON) return process.env.UROCE_SOCK_ADDON;
  return nativePath('native/uroce/build/Release/uroce_sock.node');
}

/** The native helper, or undefined (with the reason in sockHelperError()). UROCE_NO_SOCK_ADDON=1 disables it. */
export function loadSockHelper(): SockHelper | undefined {
  if (helper !== undefined) return helper ?? undefined;
  helper = null;
  if (process.env.UROCE_NO_SOCK_ADDON === '1') { helperError = 'disabled by UROCE_NO_SOCK_ADDON=1'; return undefined; }
  const p = sockHelperPath();
  if (!p || !existsSync(p)) { helperError = `socket helper not built (${p ?? 'project root not found'}; build it with: npm_config_nodedir=/usr npx node-gyp rebuild -C native/uroce)`; return undefined; }
  try {
    helper = createRequire(import.meta.url)(p) as SockHelper;
  } catch (e) {
    helperError = `cannot load ${p}: ${(e as Error).message}`;
    helper = null;
  }
  return helper ?? undefined;
}

export function sockHelperError(): string { return helperError; }

let icrcInHelper: boolean | undefined;

/**
 * Whether the helper does the ICRC's arithmetic (round 14; docs/uroce.md): a helper that has
 * icrcInit, given the wire layer's BTH mask once here. UROCE_ICRC=js or SMCSCOPE_CRC=js keep
 * every ICRC in TypeScript (the fallback; A/B and its tests). The rule stays TypeScript's: the
 * mask and every prefix come from the wire layer and icrc.ts.
 */
export function helperIcrc(h: SockHelper): boolean {
  if (process.env.UROCE_ICRC === 'js' || process.env.SMCSCOPE_CRC === 'js') return false; // read per engine
  icrcInHelper ??= typeof h.icrcInit === 'function' && h.icrcInit(icrcBthMask());
  return icrcInHelper;
}

export function errnoName(n: number): string {
  for (const [k, v] of Object.entries(osConstants.errno)) if (v === n) return k;
  return `errno ${n}`;
}

function explain(code: string, address: string, port: number): string {
  switch (code) {
    case 'EADDRINUSE': return `UDP ${address}:${port} is already in use${port === 4791 ? ' (another uroce engine, or the kernel\'s rdma_rxe, owns RoCEv2 on this address)' : ''}`;
    case 'EADDRNOTAVAIL': return `${address} is not an address of this host`;
    case 'EACCES': return `not allowed to bind UDP ${address}:${port}`;
    default: return `cannot bind UDP ${address}:${port}: ${code}`;
  }
}

export interface OpenedSocket {
  sock: dgram.Socket;
  port: number;
  /** True when the kernel will send with IP ID 0 and DF (ICRC exact on the wire). */
  exact: boolean;
}

export interface SocketOptions {
  address: string;
  /** 0 = any free port. */
  port: number;
  tos?: number;
  ttl?: number;
  rcvbuf?: number;
  sndbuf?: number;
  /** If the port is taken, take any free one instead of failing. */
  fallbackToAnyPort?: boolean;
}

/** Open and bind a UDP socket (with the helper when available). Errors are VerbsErrors with a clear message. */
export async function openSocket(o: SocketOptions): Promise<OpenedSocket> {
  const h = loadSockHelper();
  if (h) {
    let fd = h.openUdp4(o.address, o.port, o.tos ?? 0, o.ttl ?? 0, o.rcvbuf ?? 0, o.sndbuf ?? 0);
    if (fd < 0 && o.fallbackToAnyPort && o.port !== 0 && errnoName(-fd) === 'EADDRINUSE') {
      fd = h.openUdp4(o.address, 0, o.tos ?? 0, o.ttl ?? 0, o.rcvbuf ?? 0, o.sndbuf ?? 0);
    }
    if (fd < 0) {
      const code = errnoName(-fd);
      throw new VerbsError(code, explain(code, o.address, o.port));
    }
    const sock = dgram.createSocket({ type: 'udp4' });
    try {
      sock.bind({ fd });
    } catch (e) {
      h.closeFd(fd);
      throw new VerbsError('EINVAL', `dgram cannot use fd ${fd}: ${(e as Error).message}`);
    }
    return { sock, port: h.boundPort(fd), exact: true };
  }
  const tryBind = (port: number): Promise<dgram.Socket> => new Promise((resolve, reject) => {
    const sock = dgram.createSocket({ type: 'udp4', ...(o.rcvbuf ? { recvBufferSize: o.rcvbuf } : {}), ...(o.sndbuf ? { sendBufferSize: o.sndbuf } : {}) });
    const onErr = (e: NodeJS.ErrnoException): void => { sock.close(); reject(new VerbsError(e.code ?? 'EIO', explain(e.code ?? 'EIO', o.address, port))); };
    sock.once('error', onErr);
    sock.bind({ port, address: o.address, exclusive: true }, () => {
      sock.off('error', onErr);
      if (o.ttl) { try { sock.setTTL(o.ttl); } catch { /* keep default */ } }
      resolve(sock);
    });
  });
  let sock: dgram.Socket;
  try {
    sock = await tryBind(o.port);
  } catch (e) {
    if (!(o.fallbackToAnyPort && o.port !== 0 && (e as VerbsError).code === 'EADDRINUSE')) throw e;
    sock = await tryBind(0);
  }
  return { sock, port: sock.address().port, exact: false };
}

/**
 * A bound socket fd from the helper, not handed to dgram (the engine's receive socket, read
 * by the helper's own batched receive loop). Errors are VerbsErrors with a clear message.
 */
export function openFd(h: SockHelper, o: SocketOptions): number {
  const fd = h.openUdp4(o.address, o.port, o.tos ?? 0, o.ttl ?? 0, o.rcvbuf ?? 0, o.sndbuf ?? 0);
  if (fd < 0) {
    const code = errnoName(-fd);
    throw new VerbsError(code, explain(code, o.address, o.port));
  }
  return fd;
}

/**
 * Synchronous variant for sockets the engine needs at once (a QP's send socket at RTR):
 * with the helper the fd is bound before this returns; without it the dgram socket binds
 * asynchronously and `ready` resolves when the port is known.
 */
export function openSocketSync(o: SocketOptions): { sock: dgram.Socket; port: number; exact: boolean; ready: Promise<void>; fd?: number } {
  const h = loadSockHelper();
  if (h) {
    let fd = h.openUdp4(o.address, o.port, o.tos ?? 0, o.ttl ?? 0, o.rcvbuf ?? 0, o.sndbuf ?? 0);
    if (fd < 0 && o.fallbackToAnyPort && o.port !== 0) fd = h.openUdp4(o.address, 0, o.tos ?? 0, o.ttl ?? 0, o.rcvbuf ?? 0, o.sndbuf ?? 0);
    if (fd < 0) { const code = errnoName(-fd); throw new VerbsError(code, explain(code, o.address, o.port)); }
    const sock = dgram.createSocket({ type: 'udp4' });
    sock.bind({ fd });
    return { sock, port: h.boundPort(fd), exact: true, ready: Promise.resolve(), fd };
  }
  const res = { sock: undefined as unknown as dgram.Socket, port: 0, exact: false, ready: Promise.resolve() };
  res.ready = openSocket(o).then((r) => { res.sock = r.sock; res.port = r.port; });
  return res;
}
