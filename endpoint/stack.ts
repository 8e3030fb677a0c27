// One SMC-R endpoint: an RDMA device (uroce or ibverbs), its identity (system ID, GID, MAC,
// MTU), the TCP option program, and the link groups it shares among connections. Clients and
// servers are made from it (endpoint/index.ts has the node:net-like API).

import type { ConnectionSnapshot, EndpointSnapshot } from './state.js';
import { readFileSync } from 'node:fs';
import { randomInt } from 'node:crypto';
import type { Socket } from 'node:net';
import { openDevice, gidToIpv4, AsyncEventType, type AsyncEvent, type Device, type DeviceSpec, type Mtu } from './verbs/index.js';
import { TcpOptionSignal, type TcpOptionResult } from './tcpopt/index.js';
import { resolveOptions, type ResolvedOptions, type SmcOptions } from './config.js';
import { LinkGroup, type LocalPort, type Role } from './llc/linkgroup.js';
import { clientHandshake, serverHandshake, type HandshakeContext, type HandshakeResult, type LocalIdentity } from './clc/handshake.js';
import { DECL } from './clc/channel.js';
import { CdcConnection } from './cdc/connection.js';
import type { Established } from './clc/handshake.js';
import { endpointStr } from './trace.js';

/** The two ends of a connection's TCP socket, "ip:port" each. */
interface TcpEnds { local: string; remote: string }

/** How long close() waits for connections still closing before deleting the link groups. */
const CLOSE_GRACE_MS = 1000;

// One TCP option program per process: it scopes by the process's cgroup, and a second one on
// the same cgroup would conflict. Every stack of the process shares it.
let sharedOption: Promise<TcpOptionSignal> | undefined;
let optionUsers = 0;
function acquireTcpOption(): Promise<TcpOptionSignal> {
  optionUsers++;
  sharedOption ??= TcpOptionSignal.start();
  const p = sharedOption;
  p.catch(() => { if (sharedOption === p) sharedOption = undefined; });
  return p;
}
async function releaseTcpOption(): Promise<void> {
  if (--optionUsers > 0 || !sharedOption) return;
  const p = sharedOption;
  sharedOption = undefined;
  await p.then((s) => s.close(), () => undefined);
}

// Devices are shared per spec within the process: uroce binds UDP 4791 once per address, and
// several endpoints (different UEIDs, a client and a server) may use the same device.
const devices = new Map<string, { dev: Promise<Device>; users: number }>();
function acquireDevice(spec: DeviceSpec): Promise<Device> {
  const k = JSON.stringify(spec);
  let e = devices.get(k);
  if (!e) {
    e = { dev: openDevice(spec), users: 0 };
    devices.set(k, e);
    const p = e.dev;
    p.catch(() => { if (devices.get(k)?.dev === p) devices.delete(k); });
  }
  e.users++;
  return e.dev;
}
async function releaseDevice(spec: DeviceSpec): Promise<void> {
  const k = JSON.stringify(spec);
  const e = devices.get(k);
  if (!e || --e.users > 0) return;
  devices.delete(k);
  await e.dev.then((d) => d.close(), () => undefined);
}

/** The identity of one local RoCE port: its RoCEv2 GID (the one of the configured address), MAC, MTU, a PD. */
function identityOf(device: Device, spec: DeviceSpec, instance: number): LocalIdentity {
  const port = device.queryPort(1);
  const want = 'address' in spec ? (spec as { address?: string }).address : undefined;
  const table = device.gidTable(1);
  // Without an address (ibverbs): the first IPv4-mapped RoCE v2 GID, as the ibverbs provider's
  // sourceGid(). rxe lists its link-local fe80:: GID first; a kernel peer derives the v2 route
  // from the GID's IPv4 (NOSMCRDEV otherwise) and rxe refuses an IPv6 source towards an
  // IPv4-mapped destination (modify_qp RTR: EINVAL).
  const entry = table.find((g) => g.type === 'RoCE v2' && (want === undefined ? gidToIpv4(g.gid) !== undefined : gidToIpv4(g.gid) === want))
    ?? table.find((g) => g.type === 'RoCE v2') ?? table[0];
  if (!entry) throw new Error(`${device.name}: no GID on port 1`);
  const mac = macOf(entry.ndev ?? port.netdev);
  return { peerId: `${instance}@${mac}`, gid: entry.gid, mac, mtu: port.activeMtu as Mtu, sgidIndex: entry.index, pd: device.allocPd() };
}

function macOf(netdev: string | undefined): string {
  if (!netdev) return '00:00:00:00:00:00';
  try { return readFileSync(`/sys/class/net/${netdev}/address`, 'utf8').trim() || '00:00:00:00:00:00'; } catch { return '00:00:00:00:00:00'; }
}

export class SmcStack implements HandshakeContext {
  readonly linkGroups = new Set<LinkGroup>();
  /** Live connections by "LGn/token", and the final state of the last closed ones (for state views). */
  readonly conns = new Map<string, { lg: LinkGroup; conn: CdcConnection; since: number; tcp?: TcpEnds }>();
  /** The TCP 4-tuple of each established handshake, until attach() files it with its connection (for the state view, like ss). */
  private readonly tcpEnds = new WeakMap<Established, TcpEnds>();
  readonly closedConns: ConnectionSnapshot[] = [];
  private closed = false;

  readonly id: LocalIdentity;
  readonly device: Device;

  private constructor(
    readonly opts: ResolvedOptions,
    /** Every local RoCE port; the first is the one CLC announces. */
    readonly ports: readonly LocalIdentity[],
    /** The TCP option program; null when it could not be loaded (then every connection falls back). */
    readonly tcpOption: TcpOptionSignal | null,
    private readonly tcpOptionError: string | undefined,
  ) {
    this.id = ports[0]!;
    this.device = this.id.pd.device;
    for (const p of ports) {
      const listener = (ev: AsyncEvent): void => this.portEvent(p, ev);
      p.pd.device.on('async', listener);
      this.portListeners.push(() => p.pd.device.off('async', listener));
    }
  }

  private readonly portListeners: Array<() => void> = [];

  /**
   * A local port went down or came back (Linux smcr_port_err / smcr_port_add): while down no new
   * link uses it and its links fail over now; when it is back every link group that could use
   * another link asks for one (client: REQUEST ADD LINK) or adds one (server: ADD LINK).
   */
  private portEvent(port: LocalIdentity, ev: AsyncEvent): void {
    if (ev.type !== AsyncEventType.PORT_ERR && ev.type !== AsyncEventType.PORT_ACTIVE) return;
    if (ev.portNum !== undefined && ev.portNum !== 1) return; // we use port 1 of each device
    const p: LocalPort = port;
    const up = ev.type === AsyncEventType.PORT_ACTIVE;
    if (up === !p.down) return; // no change
    p.down = !up;
    this.opts.log(`smc: ${port.pd.device.name} (${port.gid}) port ${up ? 'active again' : 'down'}`);
    for (const lg of this.linkGroups) {
      if (up) void lg.portUp().catch(() => undefined);
      else lg.portDown(p);
    }
  }

  /** Open the device(s) and (unless tcpOption 'ignore') the TCP option program. */
  static async open(options: SmcOptions): Promise<SmcStack> {
    const opts = resolveOptions(options);
    const specs = [opts.device, ...opts.alternates];
    const opened: DeviceSpec[] = [];
    try {
      const ports: LocalIdentity[] = [];
      const instance = randomInt(1, 0xffff);
      for (const spec of specs) {
        let device: Device;
        try { device = await acquireDevice(spec); } finally { opened.push(spec); }
        ports.push(identityOf(device, spec, instance));
      }
      let sig: TcpOptionSignal | null = null;
      let err: string | undefined;
      if (opts.tcpOption === 'ebpf') {
        try {
          sig = await acquireTcpOption();
        } catch (e) {
          optionUsers--;
          err = (e as Error).message;
          opts.log(`smc: TCP option 254 unavailable, connections fall back to TCP: ${err}`);
        }
      }
      return new SmcStack(opts, ports, sig, err);
    } catch (e) {
      for (const spec of opened) await releaseDevice(spec);
      throw e;
    }
  }

  /** The tail of each (role, peer) lock chain; an entry goes when its chain runs empty. */
  private readonly locks = new Map<string, Promise<void>>();

  lgrLock(role: Role, peer: string): Promise<() => void> {
    const key = `${role}/${peer}`;
    let release!: () => void;
    const mine = new Promise<void>((r) => { release = r; });
    const prev = this.locks.get(key) ?? Promise.resolve();
    const tail = prev.then(() => mine);
    this.locks.set(key, tail);
    let done = false;
    return prev.then(() => () => {
      if (done) return;
      done = true;
      release();
      if (this.locks.get(key) === tail) this.locks.delete(key);
    });
  }

  private slotsUsed = 0;
  private readonly slotWaiters: Array<() => void> = [];

  /** A handshake slot (admission control, opts.maxHandshakes), waiting at most half the CLC timeout. */
  handshakeSlot(): Promise<(() => void) | undefined> {
    const grant = (): () => void => {
      this.slotsUsed++;
      let done = false;
      return () => {
        if (done) return;
        done = true;
        this.slotsUsed--;
        this.slotWaiters.shift()?.();
      };
    };
    if (this.slotsUsed < this.opts.maxHandshakes) return Promise.resolve(grant());
    return new Promise((resolve) => {
      const wake = (): void => { clearTimeout(t); resolve(grant()); };
      const t = setTimeout(() => {
        const i = this.slotWaiters.indexOf(wake);
        if (i >= 0) this.slotWaiters.splice(i, 1);
        resolve(undefined);
      }, Math.floor(this.opts.clcTimeoutMs / 2));
      this.slotWaiters.push(wake);
    });
  }

  /** Handshakes holding a slot now (for tests and the state view). */
  get handshakesInProgress(): number { return this.slotsUsed; }

  findLinkGroup(match: (lg: LinkGroup) => boolean): LinkGroup | undefined {
    for (const lg of this.linkGroups) if (lg.state !== 'TERMINATING' && lg.state !== 'TERMINATED' && match(lg)) return lg;
    return undefined;
  }

  newLinkGroup(role: Role, version: 1 | 2, release: number, peerId: string, maxConns: number, maxLinks: number): LinkGroup {
    const lg = new LinkGroup(role, version, release, peerId, this.ports, maxConns, maxLinks, {
      llcTimeoutMs: this.opts.llcTimeoutMs, testLinkMs: this.opts.testLinkMs, idleMs: this.opts.idleLinkGroupMs,
    }, this.opts.log);
    lg.trace = this.opts.trace;
    this.linkGroups.add(lg);
    lg.once('terminated', () => this.linkGroups.delete(lg));
    return lg;
  }

  /**
   * Run the SMC side of a TCP connection that just came up: check the TCP option, then CLC.
   * Resolves to SMC-R or to a TCP fallback with its reason; never throws.
   */
  async handshake(role: Role, tcp: Socket): Promise<HandshakeResult> {
    if (this.closed) return { mode: 'tcp', code: DECL.INTERR, declinedBy: 'local', reason: 'endpoint closed' };
    if (this.opts.tcpOption === 'ebpf') {
      if (!this.tcpOption) return { mode: 'tcp', code: DECL.PEERNOSMC, declinedBy: 'local', reason: `TCP option 254 unavailable: ${this.tcpOptionError}` };
      let r: TcpOptionResult | undefined;
      try { r = await this.tcpOption.lookup(tcp); } catch (e) { r = undefined; this.opts.log(`smc: TCP option lookup: ${(e as Error).message}`); }
      if (!r?.synSmc) {
        return { mode: 'tcp', code: DECL.PEERNOSMC, declinedBy: 'local', reason: r ? 'peer did not send TCP option 254 (no SMC)' : 'TCP option state unknown for this socket' };
      }
    }
    const r = await (role === 'client' ? clientHandshake(this, tcp) : serverHandshake(this, tcp));
    if (r.mode === 'smcr') this.tcpEnds.set(r, { local: endpointStr(tcp.localAddress, tcp.localPort), remote: endpointStr(tcp.remoteAddress, tcp.remotePort) });
    return r;
  }

  /**
   * Turn an established handshake into a live CDC connection: data path over the link group,
   * CDCs queued during the handshake delivered, token and buffers returned when it ends.
   */
  attach(est: Established): CdcConnection {
    const { lg, token } = est;
    const conn = new CdcConnection({
      localToken: token, peerToken: est.peerToken,
      buffers: { rmbe: est.rmb.mr.buffer, sndbuf: est.sndbuf.mr, peerRmbeSize: est.peerRmbeSize },
      transport: {
        write: (srcOff, len, dstOff) => lg.writeFor(token, est.sndbuf.mr, srcOff, len, dstOff),
        sendCdc: (msg) => lg.sendCdcFor(token, msg),
        sendCdcCb: (msg, done) => lg.sendCdcForCb(token, msg, done),
      },
      log: (l) => this.opts.log(`${lg.name} conn ${token}: ${l}`),
    });
    const key = `${lg.name}/${token}`;
    const tcp = this.tcpEnds.get(est);
    this.conns.set(key, { lg, conn, since: Date.now(), ...(tcp ? { tcp } : {}) });
    let released = false;
    const release = (): void => {
      if (released) return;
      released = true;
      this.conns.delete(key);
      this.closedConns.push({ key, linkGroup: lg.name, ...(tcp ? { tcp } : {}), ...conn.state(), closedAt: new Date().toISOString() });
      if (this.closedConns.length > 256) this.closedConns.shift();
      lg.removeConn(token);
      lg.putBuffers(est.rmb, est.sndbuf);
    };
    conn.once('closed', release);
    conn.once('abort', release);
    est.sink.attach({
      receiveCdc: (b) => conn.receiveCdc(b),
      linkGroupDown: (why) => conn.linkDown(why),
      // Failover (4.6): the connection re-validates and replays on the surviving link.
      linkSwitched: (why) => {
        const c = conn as CdcConnection & { switchLink?: (reason: string) => void };
        if (c.switchLink) c.switchLink(why);
        else conn.linkDown(`${why} (no failover in this build)`);
      },
    });
    return conn;
  }

  /** State of every link group (for --state-json and the control socket; schema: state.ts). */
  snapshot(): EndpointSnapshot {
    return {
      device: this.device.name, provider: this.device.provider, peerId: this.id.peerId, gid: this.id.gid, mac: this.id.mac, mtu: this.id.mtu,
      tcpOption: this.opts.tcpOption === 'ebpf' ? (this.tcpOption ? 'ebpf' : `unavailable: ${this.tcpOptionError}`) : 'ignored',
      linkGroups: [...this.linkGroups].map((lg) => lg.snapshot()),
      connections: [...this.conns.entries()].map(([key, c]) => ({ key, linkGroup: c.lg.name, ...(c.tcp ? { tcp: c.tcp } : {}), since: new Date(c.since).toISOString(), ...c.conn.state() })),
      closedConnections: this.closedConns,
    };
  }

  /** Delete every link group (telling peers) and close the device. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    // Connections still closing (their last CDCs, the peer's DELETE RKEY) get a moment to finish
    // before the link groups go: tearing down under them makes the peer wait for LLC timeouts.
    const closing = [...this.conns.values()].map((c) => new Promise<void>((resolve) => {
      if (c.conn.stateName === 'CLOSED') { resolve(); return; }
      c.conn.once('closed', () => resolve());
    }));
    if (closing.length > 0) {
      let t: NodeJS.Timeout | undefined;
      await Promise.race([Promise.all(closing), new Promise<void>((r) => { t = setTimeout(r, CLOSE_GRACE_MS); })]);
      clearTimeout(t);
      await new Promise((r) => setTimeout(r, 20)); // the peer's DELETE RKEY follows its last CDC
    }
    const ends = [...this.linkGroups].map((lg) => new Promise<void>((resolve) => {
      if (lg.state === 'TERMINATED') { resolve(); return; }
      lg.once('terminated', () => resolve());
      lg.terminate('endpoint closed', true);
    }));
    await Promise.all(ends);
    if (this.tcpOption) await releaseTcpOption().catch(() => undefined);
    for (const off of this.portListeners.splice(0)) off();
    for (const spec of [this.opts.device, ...this.opts.alternates]) await releaseDevice(spec);
  }
}
