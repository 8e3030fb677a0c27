// TCP option 254 (SMC-R: FE 06 E2 D4 C3 D9) on the SYNs and SYN-ACKs of this process's sockets,
// through the eBPF sock_ops program in native/bpf (loaded and attached by its small libbpf
// helper, native/bpf/build/smcr-helper, which this module spawns and talks to over a pipe).
//
//   const sig = await TcpOptionSignal.start();        // or tryStart(): null + one line on failure
//   const sock = net.connect(port, host);              // sockets created from now on are in scope
//   sock.on('connect', async () => { const r = await sig.lookup(sock); r?.synSmc ... });
//   await sig.close();                                  // detach; the helper also does it on exit
//
// The program writes the option on our SYNs, echoes it on our listeners' SYN-ACKs only when the
// client's SYN had it, and reports per socket whether the peer had it (the kernel's syn_smc =
// weSent && peerHad), for both roles. Scope: the cgroup v2 the helper creates under this
// process's own (and moves the process into), or an existing one given as `cgroup` (no move),
// narrowed by optional port ranges. Any failure is a TcpOptionError with a code and a one-line
// message: the endpoint then speaks plain TCP, as RFC 7609 requires (never SMC without it).

import { spawn, type ChildProcess } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { isIP, type Socket } from 'node:net';
import { packageRoot } from '../../native/paths.js';

export type TcpOptionErrorCode =
  | 'no_permission'   // not root / no CAP_BPF + CAP_NET_ADMIN
  | 'no_bpf'          // no bpf() syscall or it failed to probe
  | 'no_sockops'      // no cgroup BPF / sock_ops support
  | 'kernel_too_old'  // no TCP header-option API (Linux < 5.10)
  | 'no_helper'       // native/bpf not built
  | 'no_object'
  | 'load_failed'
  | 'no_cgroup2'
  | 'cgroup'          // cannot create/open the cgroup
  | 'conflict'        // an exclusive sock_ops program on the cgroup or an ancestor
  | 'attach'
  | 'cgroup_move'
  | 'usage'
  | 'timeout'
  | 'helper_exited'
  | 'closed';

/** Why the TCP option cannot be used. `message` is one line. */
export class TcpOptionError extends Error {
  override readonly name = 'TcpOptionError';
  constructor(readonly code: TcpOptionErrorCode, message: string, readonly errno = 0) {
    super(message.replace(/\s*\n\s*/g, ' '));
  }
}

/** A port, or an inclusive range [lo, hi]. */
export type PortRange = number | readonly [number, number];

export interface TcpOptionOptions {
  /** Attach to this existing cgroup v2 directory instead of creating `<own cgroup>/smcscope-<pid>`
   *  and moving the process into it (e.g. a systemd service's cgroup). */
  cgroup?: string;
  /** Only listeners on these local ports get the option (default: all). */
  localPorts?: readonly PortRange[];
  /** Only connect()s to these remote ports send it (default: all). */
  remotePorts?: readonly PortRange[];
  /** Echo the option on syncookie SYN-ACKs too (default false: under syncookies the client's SYN
   *  is not kept, so both sides cleanly fall back to TCP). */
  syncookieEcho?: boolean;
  /** Tests only: echo even when the client's SYN lacked the option (not what RFC 7609 says). */
  synackAlways?: boolean;
  /** The process whose cgroup is used and moved (default: this one). */
  pid?: number;
  /** Run the helper through this command prefix (e.g. ['setpriv', '--reuid=65534', ...]). */
  wrapper?: readonly string[];
  helperPath?: string;
  objectPath?: string;
  /** Start-up time limit, ms (default 10 000). */
  timeoutMs?: number;
}

/** What the program recorded for one socket. */
export interface TcpOptionResult {
  role: 'active' | 'passive';
  /** Our SYN (active) or SYN-ACK (passive) carried the option. */
  weSent: boolean;
  /** The peer's SYN-ACK (active) or SYN (passive) carried it. */
  peerHad: boolean;
  /** weSent && peerHad: the kernel's syn_smc. Only then may SMC be attempted. */
  synSmc: boolean;
  /** The handshake finished and the values are final. */
  done: boolean;
  /** Passive: the client's SYN was not saved (syncookies), peerHad comes from our own echo. */
  synUnknown: boolean;
  /** No room for the option in the TCP header. */
  reserveFailed: boolean;
  /** The socket cookie (SO_COOKIE). */
  cookie: bigint;
}

export interface TcpOptionStats {
  synOpt: number; synAckOpt: number; synAckPlain: number; synAckCookie: number;
  activePeer: number; activeNoPeer: number; passivePeer: number; passiveNoPeer: number;
  passiveUnknown: number; reserveFailed: number; storeFailed: number;
}

export interface TcpOptionInfo {
  /** The cgroup the program is attached to. */
  cgroup: string;
  /** true when the helper created it (and moved the process in). */
  created: boolean;
  /** true when no cgroup2 was mounted and the helper mounted one privately. */
  mountedCgroup2: boolean;
  progId: number;
}


/** Paths of the built helper and BPF object (`bash native/bpf/build.sh`). */
export function tcpOptionPaths(): { helper: string; object: string } {
  const b = join(packageRoot(), 'native', 'bpf', 'build');
  return { helper: join(b, 'smcr-helper'), object: join(b, 'smcr_opt.bpf.o') };
}

function rangeArg(r: PortRange): string {
  const [lo, hi] = typeof r === 'number' ? [r, r] : r;
  if (!Number.isInteger(lo) || !Number.isInteger(hi) || lo < 1 || hi > 65535 || lo > hi) {
    throw new TcpOptionError('usage', `bad port range ${JSON.stringify(r)}: ports are 1-65535, lo <= hi`);
  }
  return `${lo}-${hi}`;
}

function helperArgs(o: TcpOptionOptions, object: string, probe: boolean): string[] {
  const a = ['--obj', object];
  if (!probe) a.push('--pid', String(o.pid ?? process.pid));
  if (o.cgroup !== undefined) a.push('--cgroup', o.cgroup);
  const lp = o.localPorts ?? [];
  const rp = o.remotePorts ?? [];
  if (lp.length > 8 || rp.length > 8) throw new TcpOptionError('usage', 'at most 8 local and 8 remote port ranges');
  for (const r of lp) a.push('--local-ports', rangeArg(r));
  for (const r of rp) a.push('--remote-ports', rangeArg(r));
  if (o.syncookieEcho) a.push('--syncookie-echo');
  if (o.synackAlways) a.push('--synack-always');
  if (probe) a.push('--probe');
  return a;
}

function parseFatal(line: string): TcpOptionError {
  try {
    const j = JSON.parse(line.slice('FATAL '.length)) as { code: TcpOptionErrorCode; errno: number; message: string };
    return new TcpOptionError(j.code, `TCP option 254 unavailable (${j.code}): ${j.message}`, j.errno);
  } catch {
    return new TcpOptionError('helper_exited', `TCP option 254 unavailable: helper said ${line.slice(0, 200)}`);
  }
}

function normAddr(a: string): string {
  return a.startsWith('::ffff:') && isIP(a.slice(7)) === 4 ? a.slice(7) : a;
}

interface Pending { resolve: (line: string) => void; reject: (e: Error) => void }

/** A started helper: the program is attached while this object is open. */
export class TcpOptionSignal extends EventEmitter {
  private readonly queue: Pending[] = [];
  private buf = '';
  private closed = false;
  private exitError: TcpOptionError | undefined;
  private readonly exited: Promise<void>;

  private constructor(private readonly child: ChildProcess, readonly info: TcpOptionInfo, rest: string) {
    super();
    this.buf = rest;
    this.exited = new Promise((res) => child.once('close', () => res()));
    child.stdout!.on('data', (d: Buffer) => this.onData(d));
    child.once('close', (code, sig) => {
      this.exitError = new TcpOptionError(this.closed ? 'closed' : 'helper_exited',
        this.closed ? 'TCP option signal closed' : `TCP option helper exited (${sig ?? `status ${code}`}): new connections get no option`);
      for (const p of this.queue.splice(0)) p.reject(this.exitError);
      if (!this.closed) { this.closed = true; this.emit('exit', this.exitError); }
    });
    this.idle();
  }

  /** The cgroup the program is attached to. */
  get cgroup(): string { return this.info.cgroup; }

  /** Load, attach, move this process into the cgroup. Rejects with a TcpOptionError. */
  static async start(opts: TcpOptionOptions = {}): Promise<TcpOptionSignal> {
    const { child, line, rest } = await runHelper(opts, false);
    const info = JSON.parse(line.slice('READY '.length)) as TcpOptionInfo;
    return new TcpOptionSignal(child, info, rest);
  }

  /** start(), or null after logging the one-line reason (the caller then speaks plain TCP). */
  static async tryStart(opts: TcpOptionOptions = {}, log: (line: string) => void = (l) => process.stderr.write(`${l}\n`)): Promise<TcpOptionSignal | null> {
    try {
      return await TcpOptionSignal.start(opts);
    } catch (e) {
      const err = e instanceof TcpOptionError ? e : new TcpOptionError('helper_exited', String((e as Error).message ?? e));
      log(`SMC-R disabled, using TCP: ${err.message}`);
      return null;
    }
  }

  /** Can the program be loaded here (privileges, kernel, built files)? Nothing is attached. */
  static async probe(opts: Pick<TcpOptionOptions, 'wrapper' | 'helperPath' | 'objectPath' | 'timeoutMs'> = {}): Promise<{ ok: true } | { ok: false; error: TcpOptionError }> {
    try {
      const { child } = await runHelper(opts, true);
      await new Promise((res) => { if (child.exitCode !== null) res(undefined); else child.once('exit', res); });
      return { ok: true };
    } catch (e) {
      return { ok: false, error: e instanceof TcpOptionError ? e : new TcpOptionError('helper_exited', String(e)) };
    }
  }

  private onData(d: Buffer): void {
    this.buf += d.toString('utf8');
    let i: number;
    while ((i = this.buf.indexOf('\n')) >= 0) {
      const line = this.buf.slice(0, i);
      this.buf = this.buf.slice(i + 1);
      const p = this.queue.shift();
      if (p) p.resolve(line);
    }
    this.idle();
  }

  /** Keep the event loop alive only while a request is outstanding. */
  private idle(): void {
    const s = this.child.stdout as unknown as { ref(): void; unref(): void };
    if (this.queue.length) { s.ref(); this.child.ref(); } else { s.unref(); this.child.unref(); }
  }

  private request(cmd: string): Promise<string> {
    if (this.closed || this.exitError) return Promise.reject(this.exitError ?? new TcpOptionError('closed', 'TCP option signal closed'));
    return new Promise((resolve, reject) => {
      this.queue.push({ resolve, reject });
      this.idle();
      this.child.stdin!.write(`${cmd}\n`);
    });
  }

  private static parse(line: string): TcpOptionResult | undefined {
    if (line === 'NONE') return undefined;
    if (!line.startsWith('OK ')) throw new TcpOptionError('usage', `lookup failed: ${line.replace(/^ERR /, '')}`);
    const j = JSON.parse(line.slice(3)) as Omit<TcpOptionResult, 'cookie'> & { cookie: string };
    return { ...j, cookie: BigInt(j.cookie) };
  }

  /** The result for a socket file descriptor of this process (`undefined`: not in scope). */
  async lookupFd(fd: number): Promise<TcpOptionResult | undefined> {
    if (!Number.isInteger(fd) || fd < 0) throw new TypeError(`lookupFd: fd must be a non-negative integer, got ${fd}`);
    return TcpOptionSignal.parse(await this.request(`fd ${fd}`));
  }

  /** The result by 4-tuple (addresses as Node prints them; ::ffff:a.b.c.d is IPv4). */
  async lookupTuple(localAddress: string, localPort: number, remoteAddress: string, remotePort: number): Promise<TcpOptionResult | undefined> {
    const la = normAddr(localAddress);
    const ra = normAddr(remoteAddress);
    for (const [a, what] of [[la, 'localAddress'], [ra, 'remoteAddress']] as const) {
      if (!isIP(a)) throw new TypeError(`lookupTuple: ${what} ${JSON.stringify(a)} is not an IP address`);
    }
    for (const [p, what] of [[localPort, 'localPort'], [remotePort, 'remotePort']] as const) {
      if (!Number.isInteger(p) || p < 0 || p > 65535) throw new TypeError(`lookupTuple: ${what} ${p} is not a port`);
    }
    return TcpOptionSignal.parse(await this.request(`tuple ${la} ${localPort} ${ra} ${remotePort}`));
  }

  /**
   * The result for a connected Node socket: by its fd (Node's internal `_handle.fd`), else by
   * 4-tuple. An accepted socket can reach JS a few µs before the kernel has run the program on
   * it; a result that is not `done` yet is asked again (5 × 2 ms).
   */
  async lookup(socket: Socket): Promise<TcpOptionResult | undefined> {
    const fd = (socket as unknown as { _handle?: { fd?: number } })._handle?.fd;
    for (let i = 0; ; i++) {
      let r: TcpOptionResult | undefined;
      if (typeof fd === 'number' && fd >= 0) r = await this.lookupFd(fd);
      else if (socket.localAddress && socket.remoteAddress && socket.localPort && socket.remotePort) {
        r = await this.lookupTuple(socket.localAddress, socket.localPort, socket.remoteAddress, socket.remotePort);
      }
      if ((r && r.done) || i >= 5) return r;
      await new Promise((res) => setTimeout(res, 2));
    }
  }

  /** Counters of the program (since it was loaded). */
  async stats(): Promise<TcpOptionStats> {
    const line = await this.request('stats');
    if (!line.startsWith('STATS ')) throw new TcpOptionError('usage', `stats failed: ${line}`);
    return JSON.parse(line.slice(6)) as TcpOptionStats;
  }

  /** Detach the program, move the process back to its cgroup, remove ours. */
  async close(): Promise<void> {
    if (this.closed) { await this.exited; return; }
    this.closed = true;
    this.child.ref();
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.stdin!.end('quit\n');
    const t = setTimeout(() => this.child.kill('SIGTERM'), 3000);
    await this.exited;
    clearTimeout(t);
  }
}

async function runHelper(opts: TcpOptionOptions, probe: boolean): Promise<{ child: ChildProcess; line: string; rest: string }> {
  const paths = tcpOptionPaths();
  const helper = opts.helperPath ?? paths.helper;
  const object = opts.objectPath ?? paths.object;
  if (!existsSync(helper)) {
    throw new TcpOptionError('no_helper', `TCP option 254 unavailable (no_helper): ${helper} is not built; run \`bash native/bpf/build.sh\` (needs clang, gcc, libbpf-dev)`);
  }
  const args = helperArgs(opts, object, probe);
  const wrapper = opts.wrapper ?? [];
  const [cmd, ...pre] = wrapper.length ? wrapper : [helper];
  const child = spawn(cmd!, wrapper.length ? [...pre, helper, ...args] : args, { stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => { if (stderr.length < 4096) stderr += d.toString(); });
  child.stdin!.on('error', () => { /* EPIPE after exit: reported by 'exit' */ });
  return new Promise((resolve, reject) => {
    let buf = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new TcpOptionError('timeout', `TCP option 254 unavailable (timeout): the helper did not start within ${opts.timeoutMs ?? 10000} ms`));
    }, opts.timeoutMs ?? 10000);
    const onData = (d: Buffer): void => {
      buf += d.toString('utf8');
      const i = buf.indexOf('\n');
      if (i < 0) return;
      const line = buf.slice(0, i);
      const rest = buf.slice(i + 1);
      clearTimeout(timer);
      child.stdout!.off('data', onData);
      child.off('close', onExit);
      child.off('error', onError);
      if (line.startsWith('READY ')) resolve({ child, line, rest });
      else {
        reject(line.startsWith('FATAL ') ? parseFatal(line) : new TcpOptionError('helper_exited', `TCP option 254 unavailable: unexpected helper output ${JSON.stringify(line.slice(0, 200))}`));
        child.kill('SIGTERM');
      }
    };
    const onExit = (code: number | null, sig: string | null): void => {
      clearTimeout(timer);
      const why = stderr.trim().split('\n').pop() ?? '';
      reject(new TcpOptionError('helper_exited', `TCP option 254 unavailable (helper_exited): ${helper} exited (${sig ?? `status ${code}`})${why ? `: ${why}` : ''}`));
    };
    const onError = (e: Error): void => {
      clearTimeout(timer);
      reject(new TcpOptionError('no_helper', `TCP option 254 unavailable (no_helper): cannot run ${cmd}: ${e.message}`));
    };
    child.stdout!.on('data', onData);
    // 'close', not 'exit': the FATAL line may still be in the pipe when the process has exited
    child.once('close', onExit);
    child.once('error', onError);
  });
}
