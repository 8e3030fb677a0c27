// The SMC-R endpoint's public API, shaped like node:net:
//
//   const server = smc.createServer({ device: { provider: 'uroce', address: '10.0.0.1' }, ueids: ['X'] },
//                                   (sock) => sock.pipe(sock));
//   await server.listen(12345, '10.0.0.1');
//   const sock = await smc.connect({ device: { provider: 'uroce', address: '10.0.0.2' }, ueids: ['X'], host: '10.0.0.1', port: 12345 });
//   sock.mode      // 'smcr' (sock.smcr: version, release, link group, link) or 'tcp' (sock.fallback: code, name, meaning)
//
// A connection that cannot use SMC-R silently continues over its TCP connection, exactly like
// kernel SMC. connect() resolves once that is decided (after the CLC handshake), so `mode` is
// final when the socket is handed out.
//
// Endpoints (device + link groups + TCP option program) are shared per device and option set
// within the process, so a second connect() to the same peer reuses the link group
// (subsequent contact), as the kernel does.

import { EventEmitter, once } from 'node:events';
import { createServer as netCreateServer, connect as netConnect, type Server, type Socket, type AddressInfo } from 'node:net';
import { SmcStack } from './stack.js';
import { SmcSocket } from './socket/socket.js';
import type { SmcOptions } from './config.js';
import type { HandshakeResult } from './clc/handshake.js';

export { SmcStack } from './stack.js';
export { SmcSocket } from './socket/socket.js';
export type { SmcOptions } from './config.js';
export type { HandshakeResult, Established, Fallback } from './clc/handshake.js';
export type { EndpointSnapshot, LinkGroupSnapshot, LinkSnapshot, ConnectionSnapshot } from './state.js';

const stacks = new Map<string, { stack: Promise<SmcStack>; users: number }>();

function keyOf(o: SmcOptions): string {
  const { log: _log, ...rest } = o;
  return JSON.stringify(rest);
}

/** The process-wide endpoint for these options (opened on first use). */
export async function endpoint(o: SmcOptions): Promise<SmcStack> {
  const k = keyOf(o);
  let e = stacks.get(k);
  if (!e) {
    e = { stack: SmcStack.open(o), users: 0 };
    stacks.set(k, e);
    e.stack.catch(() => stacks.delete(k));
  }
  return e.stack;
}

/** Close every shared endpoint (link groups are deleted, peers told). */
export async function closeAll(): Promise<void> {
  const all = [...stacks.values()];
  stacks.clear();
  await Promise.all(all.map((e) => e.stack.then((s) => s.close(), () => undefined)));
}

/** How a socket's SMC handshake went (for smcping-style reports). */
export interface HandshakeInfo {
  mode: 'smcr' | 'tcp';
  /** Fallback: who declined ('peer' or 'local') and why, in one line. */
  declinedBy?: 'peer' | 'local';
  reason?: string;
  /** Client: the server ended the TCP connection during CLC (errno code, e.g. ECONNRESET): no
   *  Decline was sent and the socket is dead (connect() rejects; smcping reports it). */
  failed?: string;
  /** SMC-R: steps with milliseconds since the TCP connection was up. */
  steps: Array<{ step: string; ms: number }>;
  eid?: string;
  peerHost?: string;
  /** Link group name, our token, the peer's token. */
  linkGroup?: string;
  token?: number;
  peerToken?: number;
}

const handshakes = new WeakMap<SmcSocket, HandshakeInfo>();

/** The handshake record of a socket made by this module. */
export function handshakeOf(s: SmcSocket): HandshakeInfo | undefined { return handshakes.get(s); }

/** Turn a handshake result into the application's socket. */
export function socketFor(stack: SmcStack, tcp: Socket, r: HandshakeResult): SmcSocket {
  if (r.mode === 'tcp') {
    const s = new SmcSocket({
      tcp, mode: 'tcp', fallbackCode: r.code, peerEnded: r.peerEnded === true, strayClc: r.strayClc === true,
      strayWaitMs: stack.opts.clcTimeoutMs, log: stack.opts.log, ...(r.leftover ? { leftover: r.leftover } : {}),
    });
    handshakes.set(s, { mode: 'tcp', declinedBy: r.declinedBy, reason: r.reason, steps: [], ...(r.failed ? { failed: r.failed.code } : {}) });
    return s;
  }
  const conn = stack.attach(r);
  const s = new SmcSocket({
    tcp, mode: 'smcr', conn, peerEnded: r.peerEnded === true, finGraceMs: stack.opts.finGraceMs,
    info: { version: r.version, release: r.release, linkGroup: r.lg.name, link: r.link.id, firstContact: r.firstContact },
  });
  handshakes.set(s, {
    mode: 'smcr', steps: r.steps, linkGroup: r.lg.name, token: r.token, peerToken: r.peerToken,
    ...(r.eid ? { eid: r.eid } : {}), ...(r.peerHost ? { peerHost: r.peerHost } : {}),
  });
  return s;
}

export interface ConnectOptions extends SmcOptions {
  host: string;
  port: number;
  /** Local address of the TCP connection (default: chosen by the OS). */
  localAddress?: string;
  /** TCP connect timeout, ms (default 10 000). */
  connectTimeoutMs?: number;
}

/** Open a connection: TCP (with option 254), then CLC; SMC-R or TCP fallback. */
export async function connect(o: ConnectOptions): Promise<SmcSocket> {
  const { host, port, localAddress, connectTimeoutMs, ...smc } = o;
  const stack = await endpoint(smc);
  // Half-open allowed: a Decline must still be sendable after the peer's FIN.
  const tcp = netConnect({ host, port, allowHalfOpen: true, ...(localAddress ? { localAddress } : {}) });
  const t = setTimeout(() => tcp.destroy(Object.assign(new Error(`connect ETIMEDOUT ${host}:${port}`), { code: 'ETIMEDOUT' })), connectTimeoutMs ?? 10_000);
  try {
    await once(tcp, 'connect');
  } finally {
    clearTimeout(t);
  }
  tcp.setNoDelay(true);
  const r = await stack.handshake('client', tcp);
  if (r.mode === 'tcp' && r.failed) {
    // Like Linux (no fallback when the server closed during CLC), not a dead fallback socket.
    tcp.destroy();
    throw Object.assign(new Error(`connect ${r.failed.code} ${host}:${port}: ${r.failed.message}`), { code: r.failed.code });
  }
  return socketFor(stack, tcp, r);
}

/**
 * An SMC-R server: a TCP listener whose connections go through the CLC handshake; 'connection'
 * gets an SmcSocket (mode 'smcr' or 'tcp'). Events: 'listening', 'connection', 'error', 'close'.
 */
export class SmcServer extends EventEmitter {
  readonly tcp: Server;
  private stack: SmcStack | undefined;
  private pending = 0;

  constructor(readonly options: SmcOptions, onConnection?: (s: SmcSocket) => void) {
    super();
    if (onConnection) this.on('connection', onConnection);
    // Half-open allowed: a Decline must still be sendable after the client's FIN.
    this.tcp = netCreateServer({ pauseOnConnect: true, noDelay: true, allowHalfOpen: true });
    this.tcp.on('connection', (sock) => this.admit(sock));
    this.tcp.on('error', (e) => this.fail(e));
  }

  /**
   * Listen (opens the endpoint first). Resolves with the bound address. The backlog defaults to
   * maxPendingConnections (the kernel caps it at net.core.somaxconn), not node:net's 511: the
   * Proposal deadline runs from accept, and when the accept queue overflows the kernel drops the
   * client's ACK and its Proposal; the Proposal then comes back only with a backed-off TCP
   * retransmission, seconds later, and a live client would be closed as silent.
   */
  async listen(port: number, host?: string, backlog?: number): Promise<AddressInfo> {
    this.stack = await endpoint(this.options);
    this.tcp.listen({ port, ...(host ? { host } : {}), backlog: backlog ?? this.stack.opts.maxPendingConnections });
    await once(this.tcp, 'listening');
    this.emit('listening');
    return this.tcp.address() as AddressInfo;
  }

  address(): AddressInfo | null { return this.tcp.address() as AddressInfo | null; }

  /** Stop accepting (existing connections continue). */
  async close(): Promise<void> {
    await new Promise<void>((resolve) => this.tcp.close(() => resolve()));
    this.emit('close');
  }

  /** Connections accepted and still in their handshake. */
  get handshaking(): number { return this.pending; }

  /** An error nobody listens for is logged, not thrown: a peer must not be able to end the process. */
  private fail(e: Error): void {
    if (this.listenerCount('error') > 0) this.emit('error', e);
    else this.stack?.opts.log(`smc server: ${e.message}`);
  }

  /** Back-pressure on accept: beyond maxPendingConnections a new connection is reset at once. */
  private admit(tcp: Socket): void {
    tcp.on('error', () => undefined); // until the handshake owns it: a reset must not be unhandled
    const limit = this.stack?.opts.maxPendingConnections ?? Infinity;
    if (!this.stack || this.pending >= limit) {
      this.stack?.opts.log(`smc server: ${this.pending} connections in handshake (limit ${limit}): connection from ${tcp.remoteAddress}:${tcp.remotePort} reset`);
      tcp.resetAndDestroy();
      return;
    }
    void this.accept(tcp);
  }

  private async accept(tcp: Socket): Promise<void> {
    const stack = this.stack!;
    this.pending++;
    try {
      // Stays paused until the CLC reader is attached (ClcChannel resumes it): the TCP option
      // lookup comes first and is asynchronous, and a flowing socket without a 'data' listener
      // would drop the client's Proposal if it arrived meanwhile.
      const r = await stack.handshake('server', tcp);
      if (r.mode === 'tcp' && r.drop) { tcp.destroy(); return; }
      if (tcp.destroyed) { if (r.mode === 'smcr') stack.attach(r).abort('TCP connection gone before the handshake finished'); return; }
      this.emit('connection', socketFor(stack, tcp, r));
    } catch (e) {
      tcp.destroy();
      this.fail(e as Error);
    } finally {
      this.pending--;
    }
  }
}

export function createServer(options: SmcOptions, onConnection?: (s: SmcSocket) => void): SmcServer {
  return new SmcServer(options, onConnection);
}
