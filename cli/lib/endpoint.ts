// Opening, exposing and closing the SMC endpoint for smcping and smcperf: options from the
// command line, the TCP option's state, --control/--state-json, a timed connect.

import type { Command } from 'commander';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { connect as netConnect, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { endpoint, socketFor, closeAll, type SmcSocket, type SmcOptions } from '../../endpoint/index.js';
import type { DeviceSpec } from '../../endpoint/verbs/index.js';
import { serveControl, stateJson } from '../../endpoint/control.js';
import { CliError } from '../output.js';
import { intArg } from './args.js';
import { sleep } from './program.js';

/** One line for a connection error (no stack, the errno in words). */
export function connectError(host: string, port: number, e: unknown): string {
  const err = e as NodeJS.ErrnoException;
  const words: Record<string, string> = {
    ECONNREFUSED: 'connection refused (nothing listens there)', ETIMEDOUT: 'timed out', EHOSTUNREACH: 'host unreachable',
    ENETUNREACH: 'network unreachable', ECONNRESET: 'connection reset by peer', EADDRNOTAVAIL: 'local address not available',
  };
  return `connect ${host}:${port}: ${(err.code && words[err.code]) ?? err.message}`;
}

/** Options of the SMC endpoint from the common command-line options. */
/**
 * uroce on a loopback address sends runs of equal-size packets as one UDP GSO datagram (its GRO
 * receive is on for 127/8 anyway): a probe's RDMA WRITE and its CDC leave as one datagram and
 * wake the peer once — rr p50 0.6–0.8× of the same run without GSO (docs/uroce.md). The cost: a
 * capture on lo sees such a run as one datagram, not one frame per packet — UROCE_NO_GSO=1 (or
 * --device with an explicit non-loopback address) keeps one datagram per packet.
 */
function withLoopbackGso(device: DeviceSpec): DeviceSpec {
  return device.provider === 'uroce' && device.gso === undefined && device.address.startsWith('127.') ? { ...device, gso: true } : device;
}

export function smcOptions(device: DeviceSpec, o: { ueid: string[]; versions?: Array<1 | 2>; tcpOption: boolean; bufsize?: number }, log?: (l: string) => void): SmcOptions {
  return {
    device: withLoopbackGso(device), ueids: o.ueid, ...(o.versions ? { versions: o.versions } : {}), tcpOption: o.tcpOption ? 'ebpf' : 'ignore',
    ...(o.bufsize ? { rmbSize: o.bufsize, sndbufSize: o.bufsize } : {}), ...(log ? { log } : {}),
  };
}

/** Largest --busy-poll budget (µs): the helper's own limit. */
const BUSY_POLL_MAX_US = 10_000_000;

/** --busy-poll for smcping and smcperf (perftest's default polling; uroce only). */
export function busyPollOption(p: Command): Command {
  return p.option('--busy-poll <us>', 'poll the receive socket for US µs after every packet instead of sleeping until the next one wakes the process, '
    + 'like perftest\'s default CQ polling or SO_BUSY_POLL: lower latency for a core\'s CPU while traffic flows (0 = off, the default: event-driven); '
    + 'uroce only (not supported with --device ibverbs)', intArg('busy-poll', 0, BUSY_POLL_MAX_US), 0);
}

/** The device with the --busy-poll budget (uroce's device option busyPollUs); a one-line usage
 *  error for ibverbs, whose CQ this endpoint reads through completion events only. */
export function withBusyPoll(device: DeviceSpec, us: number | undefined): DeviceSpec {
  if (!us) return device;
  if (device.provider !== 'uroce') throw new CliError('--busy-poll: not supported with --device ibverbs (uroce only: the endpoint reads an ibverbs CQ through completion events)', 2);
  return { ...device, busyPollUs: us };
}

/** The busy polling budget in force on the endpoint's device (µs; 0 = event-driven), with a
 *  warning on stderr when --busy-poll asked for one the device cannot do. */
export async function busyPollInForce(prog: string, smc: SmcOptions): Promise<number> {
  const asked = smc.device.provider === 'uroce' ? smc.device.busyPollUs ?? 0 : 0;
  const dev = (await endpoint(smc)).device as { engine?: { busyPollUs?: number; busyPollNote?: string } };
  const us = dev.engine?.busyPollUs ?? 0;
  if (asked > 0 && us === 0) process.stderr.write(`${prog}: --busy-poll ${asked}: not available (${dev.engine?.busyPollNote || 'device without busy polling'}); event-driven\n`);
  return us;
}

/** How an SMC-R side receives, for the text output: every figure says which mode it was measured in. */
export function pollMode(us: number): string { return us > 0 ? `busy poll ${us} µs` : 'event-driven'; }

export function describeDevice(d: DeviceSpec): string {
  return d.provider === 'uroce' ? `uroce ${d.address}` : `ibverbs ${(d as { device?: string }).device ?? '(first device)'}`;
}

/** Why the TCP option is not in use, or undefined when it is (the stack logs it at open). */
export async function tcpOptionState(opts: SmcOptions): Promise<{ state: 'ebpf' | 'ignored' | 'unavailable'; why?: string }> {
  let st;
  try {
    st = await endpoint(opts);
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    const why = err.code === 'EADDRINUSE' ? 'UDP port 4791 on that address is taken (another RoCE endpoint, e.g. another smcping/smcperf, runs there)'
      : err.code === 'EADDRNOTAVAIL' ? 'not a local address' : err.message;
    throw new CliError(`cannot open ${describeDevice(opts.device)}: ${why}`, 2);
  }
  if (opts.tcpOption === 'ignore') return { state: 'ignored' };
  if (st.tcpOption) return { state: 'ebpf' };
  const snap = st.snapshot() as { tcpOption?: string };
  return { state: 'unavailable', why: String(snap.tcpOption ?? '').replace(/^unavailable: /, '') };
}

/**
 * Open the endpoint for `prog` and say, once, when option 254 cannot be used. Returns the
 * option state; a device that cannot be opened is a one-line CliError.
 */
export async function openEndpoint(prog: string, smc: SmcOptions, st: StateOpts = {}): Promise<Awaited<ReturnType<typeof tcpOptionState>>> {
  let opt: Awaited<ReturnType<typeof tcpOptionState>>;
  try {
    opt = await tcpOptionState(smc);
  } catch (e) {
    throw e instanceof CliError ? e : new CliError(`cannot open ${describeDevice(smc.device)}: ${(e as Error).message}`, 2);
  }
  if (opt.state === 'unavailable') process.stderr.write(tcpOptionWarning(prog, opt.why) + '\n');
  await exposeState(prog, smc, st);
  return opt;
}

/** --control / --state-json: how the endpoint's state is made visible. */
export interface StateOpts { control?: string | boolean; stateJson?: string }

/** Work to do before the endpoints close (state written, control socket removed). */
const beforeShutdown: Array<() => Promise<void>> = [];

/** Serve the endpoint's live state on a control socket and/or write it as JSON at exit. */
async function exposeState(prog: string, smc: SmcOptions, st: StateOpts): Promise<void> {
  if (!st.control && !st.stateJson) return;
  const stack = await endpoint(smc);
  if (st.control) {
    let srv;
    try {
      srv = await serveControl(stack, typeof st.control === 'string' ? st.control : undefined);
    } catch (e) {
      throw new CliError(`--control: ${(e as Error).message}`, 2);
    }
    process.stderr.write(`${prog}: endpoint state on ${srv.path} (smcdump --endpoint ${srv.path} --summary)\n`);
    beforeShutdown.push(() => srv.close());
  }
  if (st.stateJson) {
    const file = st.stateJson;
    beforeShutdown.push(async () => {
      const text = JSON.stringify(stateJson(stack), null, 1) + '\n';
      if (file === '-') process.stderr.write(text);
      else {
        try { writeFileSync(file, text); } catch (e) { process.stderr.write(`${prog}: --state-json ${file}: ${(e as Error).message}\n`); }
      }
    });
  }
}

/** The --control and --state-json options, for smcping and smcperf. */
export function stateOptions(p: Command): Command {
  return p
    .option('--control [path]', 'serve the endpoint\'s live state on a local control socket (owner only; default $XDG_RUNTIME_DIR/smcscope/PID.sock); read it with smcdump --endpoint PATH --summary')
    .option('--state-json <file>', 'write the endpoint\'s state (link groups, links, connections, cursors) as JSON at exit (- = stderr); compare a capture with it: smcdump -r CAP --state FILE');
}

/** The listening side's address and device from -b / --device (`flag` names the server option). */
export function listenSide(o: { bind?: string; device?: DeviceSpec; verbose?: boolean | number; busyPoll?: number }, flag: string): { addr: string; device: DeviceSpec; log: ((l: string) => void) | undefined } {
  const addr = o.bind ?? (o.device?.provider === 'uroce' ? o.device.address : undefined);
  if (!addr) throw new CliError(`${flag} needs the address to listen on: -b ADDR (or --device uroce:ADDR)`, 2);
  const device: DeviceSpec = withBusyPoll(o.device ?? { provider: 'uroce', address: addr }, o.busyPoll);
  const log = o.verbose ? (l: string) => process.stderr.write(`smc: ${l}\n`) : undefined;
  return { addr, device, log };
}

function tcpOptionWarning(prog: string, why: string | undefined): string {
  return `${prog}: TCP option 254 unavailable (${why ?? 'unknown'}); every connection falls back to TCP. `
    + 'Run as root (CAP_BPF + CAP_NET_ADMIN), or use --no-tcp-option toward a peer known to speak SMC.';
}

/**
 * Connect like endpoint.connect(), timing the TCP connect and looking at the TCP option
 * separately. Rejects with a one-line CliError when the TCP connection cannot be made.
 */
export async function timedConnect(opts: SmcOptions, host: string, port: number, localAddress: string | undefined, timeoutMs: number): Promise<{
  sock: SmcSocket; tcpMs: number; clcMs: number; totalMs: number; option?: { weSent: boolean; peerHad: boolean } | null;
}> {
  const stack = await endpoint(opts);
  const t0 = performance.now();
  const tcp: Socket = netConnect({ host, port, ...(localAddress ? { localAddress } : {}) });
  const timer = setTimeout(() => tcp.destroy(Object.assign(new Error('timed out'), { code: 'ETIMEDOUT' })), timeoutMs);
  try {
    await once(tcp, 'connect');
  } catch (e) {
    throw new CliError(connectError(host, port, e), 1);
  } finally {
    clearTimeout(timer);
  }
  const tcpMs = performance.now() - t0;
  tcp.setNoDelay(true);
  let option: { weSent: boolean; peerHad: boolean } | null | undefined;
  if (opts.tcpOption !== 'ignore' && stack.tcpOption) {
    try {
      const r = await stack.tcpOption.lookup(tcp);
      option = r ? { weSent: r.weSent, peerHad: r.peerHad } : null;
    } catch { option = null; }
  }
  const t1 = performance.now();
  const r = await stack.handshake('client', tcp);
  const sock = socketFor(stack, tcp, r);
  const t2 = performance.now();
  return { sock, tcpMs, clcMs: t2 - t1, totalMs: t2 - t0, ...(option !== undefined ? { option } : {}) };
}

/** Close every endpoint (DELETE LINK to peers) but never wait more than `ms`. */
export async function shutdownEndpoints(ms = 5000): Promise<void> {
  for (const f of beforeShutdown.splice(0)) await f().catch(() => undefined);
  await Promise.race([closeAll().catch(() => undefined), sleep(ms)]);
}
