// smcping: "does SMC-R work to that peer, and how fast?" For each attempt (one connection):
// the handshake broken into steps with timings (TCP connect and whether TCP option 254 came
// back, CLC Proposal→Accept, Confirm, CONFIRM LINK, first data round trip), then COUNT small
// round trips over the connection printed like ping, and a verdict: SMC-R (version, release,
// link group new or reused) or TCP fallback with the decoded reason and the side that declined.
// `smcping -l` is the echo peer; any echo server works as a peer too (a kernel SMC-R peer runs
// e.g. `smc_run socat TCP-LISTEN:12345,reuseaddr,fork PIPE`).
//
// Probe format (SIZE bytes, echoed byte for byte by the peer; docs/smcping.md):
//   0..3 "SMCp", 4..7 sequence number (u32 BE, from 1), 8..15 send time (u64 BE, ns, this host's
//   monotonic clock; informational), 16.. filler (seq + i) & 0xff. SIZE ≥ 16.

import { Command, InvalidArgumentError } from 'commander';
import { createSocket } from 'node:dgram';
import { lookup } from 'node:dns/promises';
import { once } from 'node:events';
import { readFileSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { isIPv4, connect as netConnect, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { endpoint, socketFor, closeAll, createServer, handshakeOf, type SmcSocket, type SmcOptions } from '../endpoint/index.js';
import type { DeviceSpec } from '../endpoint/verbs/index.js';
import { CliError, die } from './output.js';
import { serveControl, stateJson } from '../endpoint/control.js';
import { packageRoot } from '../native/paths.js';
import type { TraceEvent } from '../endpoint/trace.js';
import { TraceFormatter, echoLine, peerSmcOf, printable, type EchoResult, type PeerSmc } from './verdict.js';

// ------------------------------------------------------------------------------------------
// Helpers shared with smcperf
// ------------------------------------------------------------------------------------------

export function intArg(name: string, min: number, max: number) {
  return (v: string): number => {
    const n = Number(v);
    if (!/^\d+$/.test(v.trim()) || !Number.isSafeInteger(n) || n < min || n > max) throw new InvalidArgumentError(`${name} must be an integer from ${min} to ${max}`);
    return n;
  };
}

export function numArg(name: string, min: number, max: number) {
  return (v: string): number => {
    const n = Number(v);
    if (v.trim() === '' || !Number.isFinite(n) || n < min || n > max) throw new InvalidArgumentError(`${name} must be a number from ${min} to ${max}`);
    return n;
  };
}

/** "64", "4k", "64K", "1m", "2g" (binary multiples) → bytes. */
export function parseSize(v: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([kmg]?)(i?b)?\s*$/i.exec(v);
  if (!m) throw new InvalidArgumentError(`"${v}" is not a size (e.g. 64, 4k, 64k, 1m)`);
  const mult = { '': 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 }[m[2]!.toLowerCase() as '' | 'k' | 'm' | 'g'];
  const n = Math.round(Number(m[1]) * mult);
  if (!Number.isSafeInteger(n) || n <= 0) throw new InvalidArgumentError(`"${v}" is not a positive size`);
  return n;
}

export function sizeArg(name: string, min: number, max: number) {
  return (v: string): number => {
    const n = parseSize(v);
    if (n < min || n > max) throw new InvalidArgumentError(`${name} must be from ${fmtBytes(min)} to ${fmtBytes(max)}`);
    return n;
  };
}

/** 65536 → "64k", 1000 → "1000" (the way --sizes takes them). */
export function fmtSize(n: number): string {
  for (const [u, m] of [['g', 1024 ** 3], ['m', 1024 ** 2], ['k', 1024]] as const) if (n >= m && n % m === 0) return `${n / m}${u}`;
  return String(n);
}

export function fmtBytes(n: number): string {
  if (n >= 1024 ** 3) return `${(n / 1024 ** 3).toFixed(2)} GiB`;
  if (n >= 1024 ** 2) return `${(n / 1024 ** 2).toFixed(1)} MiB`;
  if (n >= 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${n} B`;
}

export function collect(v: string, prev: string[] | undefined): string[] { return [...(prev ?? []), v]; }

export function versionsArg(v: string): Array<1 | 2> {
  const list = v.split(',').map((s) => s.trim()).filter(Boolean);
  if (!list.length || list.some((s) => s !== '1' && s !== '2') || new Set(list).size !== list.length) {
    throw new InvalidArgumentError('versions: a comma list of 1 and 2, preferred first (e.g. 2,1)');
  }
  return list.map((s) => Number(s) as 1 | 2);
}

/** --device uroce:ADDR | ibverbs[:NAME] */
export function deviceArg(v: string): DeviceSpec {
  const i = v.indexOf(':');
  const kind = (i < 0 ? v : v.slice(0, i)).toLowerCase();
  const rest = i < 0 ? '' : v.slice(i + 1);
  if (kind === 'uroce') {
    if (!isIPv4(rest)) throw new InvalidArgumentError('uroce needs a local IPv4 address: --device uroce:10.0.0.1');
    return { provider: 'uroce', address: rest };
  }
  if (kind === 'ibverbs') return rest ? { provider: 'ibverbs', device: rest } : { provider: 'ibverbs' };
  throw new InvalidArgumentError(`unknown device "${v}" (uroce:ADDR or ibverbs[:NAME])`);
}

/** The first IPv4 address of a host name (uroce speaks IPv4 only). */
export async function resolveHost(host: string): Promise<string> {
  if (isIPv4(host)) return host;
  try {
    return (await lookup(host, { family: 4 })).address;
  } catch {
    throw new CliError(`${host}: cannot resolve to an IPv4 address`, 2);
  }
}

/** The source address the kernel would use toward `host` (a UDP connect sends nothing). */
export async function sourceAddressFor(host: string): Promise<string> {
  const s = createSocket('udp4');
  try {
    s.connect(9, host);
    await once(s, 'connect');
    return s.address().address;
  } catch (e) {
    throw new CliError(`no route to ${host}: ${(e as Error).message}`, 2);
  } finally {
    s.close();
  }
}

export interface Stats { count: number; min: number; avg: number; max: number; mdev: number; p50: number; p90: number; p99: number; p999: number }

/** Percentile of a sorted array (nearest rank). */
export function percentile(sorted: readonly number[], p: number): number {
  if (!sorted.length) return NaN;
  const k = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[k]!;
}

export function stats(values: readonly number[]): Stats | undefined {
  if (!values.length) return undefined;
  const s = [...values].sort((a, b) => a - b);
  const avg = s.reduce((a, b) => a + b, 0) / s.length;
  const sq = s.reduce((a, b) => a + b * b, 0) / s.length;
  return {
    count: s.length, min: s[0]!, avg, max: s[s.length - 1]!, mdev: Math.sqrt(Math.max(0, sq - avg * avg)),
    p50: percentile(s, 50), p90: percentile(s, 90), p99: percentile(s, 99), p999: percentile(s, 99.9),
  };
}

/** Milliseconds with 3 decimals (µs resolution), like ping. */
export const ms3 = (v: number): string => v.toFixed(3);
export const round3 = (v: number): number => Math.round(v * 1000) / 1000;

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
export function withLoopbackGso(device: DeviceSpec): DeviceSpec {
  return device.provider === 'uroce' && device.gso === undefined && device.address.startsWith('127.') ? { ...device, gso: true } : device;
}

export function smcOptions(device: DeviceSpec, o: { ueid: string[]; versions?: Array<1 | 2>; tcpOption: boolean; bufsize?: number }, log?: (l: string) => void): SmcOptions {
  return {
    device: withLoopbackGso(device), ueids: o.ueid, ...(o.versions ? { versions: o.versions } : {}), tcpOption: o.tcpOption ? 'ebpf' : 'ignore',
    ...(o.bufsize ? { rmbSize: o.bufsize, sndbufSize: o.bufsize } : {}), ...(log ? { log } : {}),
  };
}

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
export function listenSide(o: { bind?: string; device?: DeviceSpec; verbose?: boolean | number }, flag: string): { addr: string; device: DeviceSpec; log: ((l: string) => void) | undefined } {
  const addr = o.bind ?? (o.device?.provider === 'uroce' ? o.device.address : undefined);
  if (!addr) throw new CliError(`${flag} needs the address to listen on: -b ADDR (or --device uroce:ADDR)`, 2);
  const device: DeviceSpec = o.device ?? { provider: 'uroce', address: addr };
  const log = o.verbose ? (l: string) => process.stderr.write(`smc: ${l}\n`) : undefined;
  return { addr, device, log };
}

export function tcpOptionWarning(prog: string, why: string | undefined): string {
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

/** The verdict fields of a connected socket (for text and JSON). */
export function verdictOf(sock: SmcSocket): Verdict {
  const hs = handshakeOf(sock);
  if (sock.mode === 'smcr' && sock.smcr) {
    return {
      mode: 'smcr', version: sock.smcr.version, release: sock.smcr.release, linkGroup: String(sock.smcr.linkGroup),
      linkGroupState: sock.smcr.firstContact ? 'new' : 'reused', link: sock.smcr.link,
      ...(hs?.token !== undefined ? { token: hs.token } : {}), ...(hs?.peerToken !== undefined ? { peerToken: hs.peerToken } : {}),
      ...(hs?.eid ? { ueid: hs.eid } : {}), ...(hs?.peerHost ? { peerHost: hs.peerHost } : {}),
    };
  }
  const f = sock.fallback!;
  return {
    mode: 'tcp', code: `0x${f.code.toString(16).padStart(8, '0')}`, name: f.name, meaning: f.meaning,
    declinedBy: hs?.declinedBy ?? 'local', ...(hs?.reason ? { reason: hs.reason } : {}),
  };
}

export type Verdict =
  | { mode: 'smcr'; version: number; release: number; linkGroup: string; linkGroupState: 'new' | 'reused'; link: number; token?: number; peerToken?: number; ueid?: string; peerHost?: string }
  | { mode: 'tcp'; code: string; name: string; meaning: string; declinedBy: 'peer' | 'local'; reason?: string };

export function verdictLine(v: Verdict): string {
  if (v.mode === 'smcr') {
    return `SMC-R v${v.version}${v.version >= 2 ? `.${v.release}` : ''}, link group ${v.linkGroup} ${v.linkGroupState === 'new' ? 'new (first contact)' : 'reused (subsequent contact)'}, link ${v.link}`
      + `${v.ueid ? `, UEID ${v.ueid}` : ''}${v.peerHost ? `, peer host ${v.peerHost}` : ''}`;
  }
  const why = v.reason && !v.reason.includes(v.name) ? `: ${v.reason}` : '';
  return `TCP fallback: ${v.name} ${v.code} (${v.meaning}), declined by ${v.declinedBy === 'peer' ? 'the peer' : 'us (local)'}${why}`;
}

function packageVersion(): string {
  try { return String((JSON.parse(readFileSync(join(packageRoot(), 'package.json'), 'utf8')) as { version?: string }).version ?? '?'); } catch { return '?'; }
}

/** commander wired for one-line errors (exit 2), --help on stdout, --version. */
export function cliProgram(p: Command): Command {
  p.version(`${p.name()} ${packageVersion()} (smcscope)`, '-V, --version');
  p.exitOverride((e) => { throw new CliError(e.message.replace(/^error: /, ''), e.exitCode === 0 ? 0 : 2); });
  p.configureOutput({ writeErr: () => undefined, writeOut: (str) => { try { writeSync(1, str); } catch { /* reader gone */ } } });
  return p;
}

/** Write a line to stdout synchronously (ordering with process.exit). */
export function say(line: string): void {
  try { writeSync(1, line + '\n'); } catch { /* reader gone */ }
}

/** Sleep that an AbortSignal ends early. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted || ms <= 0) { resolve(); return; }
    const t = setTimeout(done, ms);
    function done(): void { clearTimeout(t); signal?.removeEventListener('abort', done); resolve(); }
    signal?.addEventListener('abort', done, { once: true });
  });
}

/** Close every endpoint (DELETE LINK to peers) but never wait more than `ms`. */
export async function shutdownEndpoints(ms = 5000): Promise<void> {
  for (const f of beforeShutdown.splice(0)) await f().catch(() => undefined);
  await Promise.race([closeAll().catch(() => undefined), sleep(ms)]);
}

// ------------------------------------------------------------------------------------------
// smcping
// ------------------------------------------------------------------------------------------

const PORT = 12345;
const MAGIC = 0x534d4370; // "SMCp"

export function buildProgram(): Command {
  const p = new Command('smcping');
  p.description('Check that SMC-R works to a peer and how fast: handshake steps with timings, round trips like ping, and a verdict (SMC-R or TCP fallback with the reason).')
    .usage('HOST [options]  |  -l [options]')
    .argument('[host]', 'peer to probe (an smcping -l, or any TCP echo server on an SMC-R host)')
    .option('-p, --port <port>', 'TCP port', intArg('port', 0, 65535), PORT)
    .option('-c, --count <n>', 'round trips per attempt (0 = until Ctrl-C)', intArg('count', 0, 1e9), 5)
    .option('-i, --interval <s>', 'seconds between probes (0 = back to back)', numArg('interval', 0, 3600), 1)
    .option('-s, --size <bytes>', 'probe size in bytes (16…65536)', intArg('size', 16, 65536), 56)
    .option('--warmup <n>', 'unmeasured back-to-back round trips before the probes (JIT warm-up: the first probes run the endpoint\'s JavaScript cold)', intArg('warmup', 0, 100000), 0)
    .option('-W, --timeout <s>', 'seconds to wait for each reply', numArg('timeout', 0.001, 3600), 2)
    .option('-a, --attempts <n>', 'connections, one after the other (the 2nd reuses the link group)', intArg('attempts', 1, 1000), 1)
    .option('-l, --listen', 'be the echo peer: accept SMC-R connections and echo every byte')
    .option('-b, --bind <addr>', 'local IPv4 address (client: TCP source; -l: listen address); the uroce device uses it too')
    .option('--device <dev>', 'RDMA device: uroce:ADDR (userspace RoCEv2 on local address ADDR) or ibverbs[:NAME] (default uroce on the source address toward HOST)', deviceArg)
    .option('--ueid <ueid>', 'User EID for SMC-Rv2 (repeatable; the peer needs one in common; none = SMC-Rv1 only, like Linux)', collect)
    .option('--versions <list>', 'SMC-R versions offered, preferred first (default 2,1; v2 needs --ueid)', versionsArg)
    .option('--no-tcp-option', 'do not use TCP option 254 (no eBPF, no root needed); only toward peers known to speak SMC')
    .option('--require-smcr', 'SMC-R is required: a TCP fallback (or no SMC on the peer) is a failure, exit 1')
    .option('--json', 'one JSON document at the end (with -l: one JSON line per connection)')
    .option('-v, --verbose', 'each CLC message and LLC exchange with its timing (like ping -v / curl -v); -vv also the endpoint\'s protocol log on stderr', (_v: string, n: number) => n + 1, 0);
  stateOptions(p)
    .addHelpText('after', `
How it works:
  Each attempt opens one connection: TCP (with option 254 on the SYN, via eBPF, unless
  --no-tcp-option), the CLC handshake (Proposal, Accept, Confirm) and, on first contact, the
  link bring-up (CONFIRM LINK). Then COUNT probes of SIZE bytes go over the connection and the
  peer echoes them back; over SMC-R each probe is an RDMA WRITE plus a CDC message each way.
  The verdict says SMC-R (version, release, link group new or reused) or TCP fallback with
  the decline reason, decoded, and which side declined.

Examples:
  smcping -l -b 10.0.0.2 --ueid MYUEID              echo peer (as root for option 254)
  smcping 10.0.0.2 --ueid MYUEID                     5 probes, 1 s apart
  smcping 10.0.0.2 --ueid MYUEID -a 2 -c 100 -i 0    2 connections (2nd reuses the link group), 100 back-to-back probes
  smcping 10.0.0.2 -p 7 --json | jq .verdict         machine-readable
  smcping -l -b 127.0.0.2 --no-tcp-option &  smcping 127.0.0.2 -b 127.0.0.1 --no-tcp-option
                                                     loopback, no root needed

Peers: smcping -l, or a kernel SMC-R host running any echo server under smc_run, e.g.
  smc_run socat TCP-LISTEN:12345,reuseaddr,fork PIPE

Without --ueid only SMC-Rv1 is offered (as Linux does without a UEID); v1 needs both hosts
in the same IP subnet. Option 254 needs root (CAP_BPF and CAP_NET_ADMIN); without it every
connection falls back to TCP, and smcping says so.

Verdict: the last line says SMC-R (version, link group) or TCP fallback, and then whether
the peer speaks SMC at all ("no SMC on the peer": it echoed our CLC Proposal, answered
something else, closed, or said nothing) or declined, and whether the probes came back intact.

Exit status (like ping): 0 at least one probe came back intact and none came back wrong;
1 no intact reply (nothing listens, the peer closed, timeouts, the peer is not an echo
server), any reply with wrong data, or — with --require-smcr — a TCP fallback; 2 usage or
local error. Full manual: docs/smcping.md.`);
  return cliProgram(p);
}

interface Opts {
  port: number; count: number; interval: number; size: number; timeout: number; attempts: number; warmup?: number;
  listen?: boolean; bind?: string; device?: DeviceSpec; ueid: string[]; versions?: Array<1 | 2>;
  tcpOption: boolean; requireSmcr?: boolean; json?: boolean; verbose?: number; control?: string | boolean; stateJson?: string;
}

export async function main(argv: string[]): Promise<number> {
  const program = buildProgram();
  try {
    program.parse(argv);
  } catch (e) {
    if (e instanceof CliError && e.exitCode === 0) return 0;
    throw e;
  }
  const o = program.opts<Opts>();
  o.ueid ??= [];
  const host = program.args[0];
  if (o.bind !== undefined && !isIPv4(o.bind)) throw new CliError(`--bind ${o.bind}: not an IPv4 address`, 2);
  for (const u of o.ueid) if (u.length === 0 || u.length > 32) throw new CliError(`--ueid "${u}": 1 to 32 characters`, 2);
  if (o.listen) {
    if (host !== undefined) throw new CliError('-l takes no HOST: it listens (give the address with -b)', 2);
    return serve(o);
  }
  if (host === undefined) throw new CliError('no HOST: smcping HOST to probe a peer, or smcping -l to be one (see --help)', 2);
  if (o.port === 0) throw new CliError('-p 0: give the peer\'s port', 2);
  return ping(host, o);
}

// ------------------------------------------------------------------------------------------
// Client
// ------------------------------------------------------------------------------------------

interface ProbeResult { seq: number; ms: number | null; late?: boolean; corrupt?: boolean }

interface Attempt {
  n: number;
  error?: string;
  tcp?: { connectMs: number; option254: 'echoed' | 'not-echoed' | 'not-sent' | 'unknown' | 'ignored' | 'unavailable' };
  handshake?: { steps: Array<{ step: string; ms: number }>; clcMs: number; totalMs: number };
  verdict?: Verdict;
  firstRoundTripMs?: number | null;
  probes: ProbeResult[];
  stats?: { sent: number; received: number; lossPct: number; corrupt: number; min?: number; avg?: number; max?: number; mdev?: number; p99?: number };
  closed?: string;
  /** Does the peer speak SMC (from what its side of CLC looked like). */
  peerSmc?: PeerSmc;
  /** The first bytes that came back and were not our probe (printable). */
  wrongData?: string;
  /** -v: the CLC and LLC messages of this attempt, as printed. */
  trace?: string[];
}

const STEP_NAMES: Record<string, string> = {
  'proposal→accept': 'CLC Proposal→Accept', 'confirm sent': 'Confirm sent', 'confirm link': 'CONFIRM LINK',
};

function makeProbe(seq: number, size: number): Buffer {
  const b = Buffer.allocUnsafe(size);
  b.writeUInt32BE(MAGIC, 0);
  b.writeUInt32BE(seq >>> 0, 4);
  b.writeBigUInt64BE(process.hrtime.bigint(), 8);
  for (let i = 16; i < size; i++) b[i] = (seq + i) & 0xff;
  return b;
}

async function ping(hostArg: string, o: Opts): Promise<number> {
  const host = await resolveHost(hostArg);
  const local = o.bind ?? (o.device?.provider === 'uroce' ? o.device.address : o.device ? undefined : await sourceAddressFor(host));
  const device: DeviceSpec = o.device ?? { provider: 'uroce', address: local! };
  const verbose = o.verbose ?? 0;
  const log = verbose >= 2 ? (l: string) => process.stderr.write(`smc: ${l}\n`) : undefined;
  const text = !o.json;
  // The endpoint's protocol trace: always collected for the verdict (the CLC answers tell "no
  // SMC on the peer" apart), printed with -v. One connection at a time, so every event between
  // the TCP connect and the next attempt belongs to the current one.
  let cur: Attempt | undefined;
  let clcIn: TraceEvent[] = [];
  let tuple: string | undefined;
  /** -v lines of the handshake, printed after the attempt's first line (which needs its result). */
  let held: string[] | undefined;
  const fmt = new TraceFormatter(performance.now());
  const trace = (e: TraceEvent): void => {
    const t = performance.now();
    if (e.layer === 'clc') tuple ??= `${e.local} → ${e.remote}`;
    if (e.layer === 'clc' && e.dir === 'in') clcIn.push(e);
    if (!verbose) return;
    const line = fmt.line(e, t);
    if (cur) (cur.trace ??= []).push(line.trim());
    if (!text) return;
    if (held) held.push(line); else say(`  ${line}`);
  };
  const smc: SmcOptions = { ...smcOptions(device, o, log), trace };
  const ac = new AbortController();
  const onSig = (): void => ac.abort();
  process.once('SIGINT', onSig);
  process.once('SIGTERM', onSig);

  const opt = await openEndpoint('smcping', smc, o);
  const offered = (o.versions ?? [2, 1]).filter((v) => v === 1 || o.ueid.length > 0);
  if (text) {
    say(`SMCPING ${hostArg}${hostArg !== host ? ` (${host})` : ''} port ${o.port} from ${local ?? '(any)'} via ${describeDevice(device)}: ${o.size}-byte probes, `
      + `offering SMC-R ${offered.map((v) => `v${v}`).join('+') || '(none)'}${o.ueid.length ? ` (UEID ${o.ueid.join(', ')})` : ''}, `
      + `option 254 ${opt.state === 'ebpf' ? 'via eBPF' : opt.state === 'ignored' ? 'not used (--no-tcp-option)' : 'unavailable'}`);
  }

  const attempts: Attempt[] = [];
  for (let n = 1; n <= o.attempts && !ac.signal.aborted; n++) {
    const a = { n } as Attempt;
    attempts.push(a);
    cur = a;
    clcIn = [];
    tuple = undefined;
    held = [];
    fmt.reset(performance.now());
    let sock: SmcSocket;
    try {
      const c = await timedConnect(smc, host, o.port, local, Math.max(1000, o.timeout * 1000));
      sock = c.sock;
      const optState = opt.state === 'ignored' ? 'ignored' : opt.state === 'unavailable' ? 'unavailable'
        : !c.option ? 'unknown' : !c.option.weSent ? 'not-sent' : c.option.peerHad ? 'echoed' : 'not-echoed';
      a.tcp = { connectMs: round3(c.tcpMs), option254: optState };
      a.handshake = { steps: handshakeOf(sock)?.steps ?? [], clcMs: round3(c.clcMs), totalMs: round3(c.totalMs) };
      a.verdict = verdictOf(sock);
      a.peerSmc = peerSmcOf(clcIn, a.verdict.mode === 'tcp' ? a.verdict : undefined, optState);
    } catch (e) {
      if (!(e instanceof CliError)) throw e;
      held = undefined;
      a.error = e.message;
      a.probes = [];
      if (text) say(`attempt ${n}: ${e.message}`);
      if (n < o.attempts) await sleep(o.interval * 1000, ac.signal);
      continue;
    }
    if (text) {
      const optText: Record<string, string> = {
        echoed: 'option 254 sent and echoed by the peer', 'not-echoed': 'option 254 sent, NOT echoed (the peer does not offer SMC)',
        'not-sent': 'option 254 not on our SYN', unknown: 'option 254 state unknown', ignored: 'option 254 not used', unavailable: 'option 254 unavailable',
      };
      say(`attempt ${n}: TCP connect ${ms3(a.tcp!.connectMs)} ms, ${optText[a.tcp!.option254]}`);
      if (verbose) {
        say(`  ${`+${ms3(a.tcp!.connectMs)} ms`.padStart(12)}  TCP  connected${tuple ? ` ${tuple}` : ''}`);
        for (const l of held ?? []) say(`  ${l}`);
      }
      const steps = a.handshake!.steps.map((s) => `${STEP_NAMES[s.step] ?? s.step} ${s.ms} ms`);
      say(`  handshake: ${steps.length ? steps.join(' · ') + ' (ms after TCP was up) · ' : ''}${a.verdict!.mode === 'smcr' ? 'SMC-R ready' : 'fell back'} after ${ms3(a.handshake!.clcMs)} ms, ${ms3(a.handshake!.totalMs)} ms in all`);
      say(`  ${smcLine(a)}`);
    }
    held = undefined;
    a.probes = [];
    if (o.warmup) {
      const w = await warmUp(sock, o.warmup, o.size, o.timeout * 1000);
      if (text) say(`  warm-up: ${w} of ${o.warmup} round trips (not counted)`);
    }
    await probe(sock, o, a, host, text, ac.signal);
    // Orderly close: our FIN (SMC-R: peer_done_writing), then wait for the peer's.
    sock.on('error', () => undefined);
    sock.end();
    await Promise.race([once(sock, 'close').catch(() => undefined), sleep(3000)]);
    if (!sock.destroyed) sock.destroy();
    if (n < o.attempts && !ac.signal.aborted) await sleep(o.interval * 1000, ac.signal);
  }
  await shutdownEndpoints();
  cur = undefined;
  process.off('SIGINT', onSig);
  process.off('SIGTERM', onSig);

  const intact = attempts.reduce((k, a) => k + (a.stats ? a.stats.received - a.stats.corrupt : 0), 0);
  const wrong = attempts.some((a) => (a.stats?.corrupt ?? 0) > 0 || a.wrongData !== undefined);
  const fellBack = attempts.some((a) => a.verdict?.mode === 'tcp');
  const code = intact === 0 || wrong || (o.requireSmcr && (fellBack || attempts.some((a) => !a.verdict))) ? 1 : 0;
  const last = [...attempts].reverse().find((a) => a.verdict);
  const line = finalVerdict(attempts, last, !!o.requireSmcr);
  if (o.json) {
    say(JSON.stringify({
      host: hostArg, address: host, port: o.port, local: local ?? null, device, size: o.size, count: o.count, interval: o.interval,
      ueids: o.ueid, tcpOption: opt.state, attempts, verdict: last?.verdict ?? null, peerSmc: last?.peerSmc ?? null,
      echo: echoOf(attempts), requireSmcr: !!o.requireSmcr, summary: line, exitCode: code,
    }));
  } else {
    say(`verdict: ${line}`);
  }
  return code;
}

/** The SMC half of the verdict: SMC-R, a fallback the peer declined (it speaks SMC), or no SMC on the peer. */
function smcLine(a: Attempt): string {
  const v = a.verdict!;
  if (v.mode === 'smcr' || a.peerSmc?.smc !== 'no') return verdictLine(v);
  return `TCP fallback: no SMC on the peer (${a.peerSmc.why}); we declined with ${v.name} ${v.code}`;
}

/** The probes of every attempt, added up. */
function echoOf(attempts: readonly Attempt[]): EchoResult {
  const e: EchoResult = { sent: 0, intact: 0, wrong: 0 };
  for (const a of attempts) {
    if (!a.stats) continue;
    e.sent += a.stats.sent;
    e.intact += a.stats.received - a.stats.corrupt;
    e.wrong += a.stats.corrupt + (a.wrongData !== undefined && a.stats.corrupt === 0 ? 1 : 0);
    if (a.wrongData !== undefined) e.firstWrong ??= a.wrongData;
    if (a.closed) e.closed ??= a.closed;
  }
  return e;
}

/** One line: the SMC verdict of the last connection, the data verdict of all, and what --require-smcr made of it. */
function finalVerdict(attempts: readonly Attempt[], last: Attempt | undefined, requireSmcr: boolean): string {
  if (!last) {
    const err = attempts.find((a) => a.error)?.error;
    return `no connection${err ? `: ${err}` : ''}`;
  }
  const v = last.verdict!;
  const transport = v.mode === 'smcr' ? 'SMC-R' : 'TCP';
  const required = requireSmcr && attempts.some((a) => a.verdict?.mode !== 'smcr') ? '; FAIL: SMC-R required (--require-smcr)' : '';
  return `${smcLine(last)}; ${echoLine(echoOf(attempts), transport)}${required}`;
}

/**
 * --warmup: N back-to-back round trips that are not measured. The SMC-R endpoint's data path is
 * JavaScript (uroce, CDC, LLC, streams), which V8 runs in its interpreter until it is hot: over
 * loopback the first ten idle probes took a median 4.3 ms, probes 31–40 1.0 ms (TCP echo: 0.45 ms
 * in both). Kernel TCP has no such warm-up, so a comparison of steady states needs this.
 * Returns how many round trips completed (stops early on timeout or close).
 */
async function warmUp(sock: SmcSocket, n: number, size: number, timeoutMs: number): Promise<number> {
  const data = Buffer.alloc(size, 0x57);
  let have = 0;
  let want = 0;
  let wake: (() => void) | undefined;
  const onData = (d: Buffer): void => { have += d.length; if (have >= want) { const w = wake; wake = undefined; w?.(); } };
  const onGone = (): void => { const w = wake; wake = undefined; w?.(); };
  sock.on('data', onData);
  sock.on('close', onGone);
  sock.on('error', onGone);
  let done = 0;
  try {
    for (; done < n && !sock.destroyed; done++) {
      want += size;
      sock.write(data);
      if (have < want) {
        let t: NodeJS.Timeout | undefined;
        await new Promise<void>((resolve) => { wake = resolve; t = setTimeout(resolve, timeoutMs); });
        clearTimeout(t);
      }
      if (have < want) break;
    }
  } finally {
    sock.off('data', onData);
    sock.off('close', onGone);
    sock.off('error', onGone);
  }
  return done;
}

/** COUNT probes over one connection; fills a.probes, a.stats, a.firstRoundTripMs. */
async function probe(sock: SmcSocket, o: Opts, a: Attempt, host: string, text: boolean, stop: AbortSignal): Promise<void> {
  const size = o.size;
  const sent = new Map<number, { t: number; data: Buffer; result: ProbeResult }>();
  let acc: Buffer = Buffer.alloc(0);
  let nextReply = 1;
  let closed: string | undefined;
  let wake: (() => void) | undefined;
  const kick = (): void => { const w = wake; wake = undefined; w?.(); };
  const t0 = performance.now();

  const onReply = (r: Buffer): void => {
    const seq = nextReply++;
    const s = sent.get(seq);
    if (!s) { a.wrongData ??= printable(r); closed ??= 'the peer sent bytes we did not send (not an echo server?)'; kick(); return; }
    const ms = performance.now() - s.t;
    const late = s.result.ms === null && s.result.late === true;
    s.result.ms = round3(ms);
    if (!r.equals(s.data)) {
      s.result.corrupt = true;
      a.wrongData ??= printable(r);
      // not even our probe's magic: the peer answers something else, it is not an echo server
      if (r.readUInt32BE(0) !== MAGIC) closed ??= `the peer is not an echo server: it sent ${printable(r)} back`;
    }
    if (!late) delete s.result.late;
    if (text) {
      say(`${size} bytes from ${host}: seq=${seq} time=${ms3(ms)} ms${seq === 1 ? (a.verdict?.mode === 'smcr' ? ' (first CDC round trip)' : ' (first round trip)') : ''}`
        + `${late ? ' (late, after the timeout)' : ''}${s.result.corrupt ? ' WRONG DATA' : ''}`);
    }
    sent.delete(seq);
    kick();
  };
  const onData = (d: Buffer): void => {
    acc = acc.length ? Buffer.concat([acc, d]) : d;
    while (acc.length >= size && !closed) {
      const r = acc.subarray(0, size);
      acc = acc.subarray(size);
      onReply(r);
    }
  };
  sock.on('data', onData);
  const onEnd = (): void => { closed ??= 'the peer closed the connection'; kick(); };
  const onErr = (e: NodeJS.ErrnoException): void => {
    closed ??= e.code === 'EPIPE' || e.code === 'ERR_STREAM_WRITE_AFTER_END' || /ended by the other party/.test(e.message) ? 'the peer closed the connection' : `connection error: ${e.message}`;
    kick();
  };
  sock.on('end', onEnd);
  sock.on('error', onErr);
  sock.on('close', onEnd);
  const onAbort = (): void => kick();
  stop.addEventListener('abort', onAbort);

  for (let seq = 1; (o.count === 0 || seq <= o.count) && !stop.aborted && !closed; seq++) {
    const data = makeProbe(seq, size);
    const result: ProbeResult = { seq, ms: null };
    a.probes.push(result);
    const ts = performance.now();
    sent.set(seq, { t: ts, data, result });
    sock.write(data);
    const deadline = ts + o.timeout * 1000;
    while (result.ms === null && !closed && !stop.aborted && performance.now() < deadline) {
      await new Promise<void>((resolve) => {
        wake = resolve;
        const t = setTimeout(() => { if (wake === resolve) { wake = undefined; resolve(); } }, Math.max(0, deadline - performance.now()));
        t.unref?.();
      });
    }
    if (result.ms === null && !closed && !stop.aborted) {
      result.late = true;
      if (text) say(`no reply for seq=${seq} within ${o.timeout} s`);
    }
    if (o.count !== 0 && seq === o.count) break;
    const wait = ts + o.interval * 1000 - performance.now();
    if (wait > 0) await sleep(wait, stop);
  }
  // Probes still out: give them the rest of their timeout.
  const outstanding = a.probes.filter((p) => p.ms === null);
  if (outstanding.length && !closed && !stop.aborted) {
    const until = performance.now() + o.timeout * 1000;
    while (a.probes.some((p) => p.ms === null) && !closed && !stop.aborted && performance.now() < until) {
      await new Promise<void>((resolve) => { wake = resolve; setTimeout(() => { if (wake === resolve) { wake = undefined; resolve(); } }, Math.max(0, until - performance.now())); });
    }
  }
  stop.removeEventListener('abort', onAbort);
  sock.off('data', onData);
  sock.off('end', onEnd);
  sock.off('close', onEnd);
  sock.off('error', onErr);
  sock.resume();
  for (const p of a.probes) if (p.ms === null) delete p.late;
  const rtts = a.probes.filter((p) => p.ms !== null && !p.corrupt).map((p) => p.ms!);
  const st = stats(rtts);
  const sentN = a.probes.length, recv = a.probes.filter((p) => p.ms !== null).length;
  const corrupt = a.probes.filter((p) => p.corrupt).length;
  a.firstRoundTripMs = a.probes[0]?.ms ?? null;
  a.stats = {
    sent: sentN, received: recv, lossPct: sentN ? Math.round(((sentN - recv) / sentN) * 1000) / 10 : 0, corrupt,
    ...(st ? { min: round3(st.min), avg: round3(st.avg), max: round3(st.max), mdev: round3(st.mdev), p99: round3(st.p99) } : {}),
  };
  if (closed && closed !== 'the peer closed the connection') a.closed = closed;
  else if (closed && recv < sentN) a.closed = closed;
  if (text) {
    if (a.closed) say(`  ${a.closed}`);
    say(`--- ${host} port ${o.port} attempt ${a.n} smcping statistics ---`);
    say(`${sentN} probes sent, ${recv} replies${corrupt ? `, ${corrupt} with wrong data` : ''}, ${a.stats.lossPct}% lost, time ${Math.round(performance.now() - t0)} ms`);
    if (st) say(`rtt min/avg/max/mdev = ${ms3(st.min)}/${ms3(st.avg)}/${ms3(st.max)}/${ms3(st.mdev)} ms, p99 ${ms3(st.p99)} ms`);
  }
}

// ------------------------------------------------------------------------------------------
// Echo peer (-l)
// ------------------------------------------------------------------------------------------

async function serve(o: Opts): Promise<number> {
  const { addr, device, log } = listenSide(o, '-l');
  const smc = smcOptions(device, o, log);
  const opt = await openEndpoint('smcping', smc, o);
  let conns = 0;
  const emit = (obj: Record<string, unknown>, line: string): void => say(o.json ? JSON.stringify(obj) : line);
  const server = createServer(smc, (s) => {
    const n = ++conns;
    const peer = `${s.remoteAddress}:${s.remotePort}`;
    const v = verdictOf(s);
    emit({ event: 'connection', n, peer, verdict: v, steps: handshakeOf(s)?.steps ?? [] }, `conn ${n} from ${peer}: ${verdictLine(v)}`);
    let bytes = 0;
    s.on('data', (d: Buffer) => { bytes += d.length; });
    s.on('error', (e) => emit({ event: 'error', n, peer, error: e.message }, `conn ${n}: ${e.message}`));
    s.once('close', () => emit({ event: 'close', n, peer, bytes }, `conn ${n} from ${peer} closed: ${bytes} bytes echoed`));
    s.pipe(s);
  });
  server.on('error', (e: Error) => emit({ event: 'error', error: e.message }, `smcping: ${e.message}`));
  let bound;
  try {
    bound = await server.listen(o.port, addr);
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    throw new CliError(`listen ${addr}:${o.port}: ${err.code === 'EADDRINUSE' ? 'address in use' : err.code === 'EADDRNOTAVAIL' ? 'not a local address' : err.message}`, 2);
  }
  emit({ event: 'listening', address: bound.address, port: bound.port, device, ueids: o.ueid, tcpOption: opt.state },
    `smcping: echo peer listening on ${bound.address}:${bound.port} via ${describeDevice(device)}, `
    + `UEID ${o.ueid.length ? o.ueid.join(', ') : '(none: SMC-Rv1 only)'}, option 254 ${opt.state === 'ebpf' ? 'via eBPF' : opt.state === 'ignored' ? 'not used' : 'unavailable'}; Ctrl-C ends`);
  await new Promise<void>((resolve) => { process.once('SIGINT', resolve); process.once('SIGTERM', resolve); });
  await Promise.race([server.close(), sleep(1000)]);
  await shutdownEndpoints();
  return 0;
}

/** Run as a command: one-line errors, exit status like ping, never a stack trace. */
export function run(argv: string[]): void {
  process.on('uncaughtException', (e) => die('smcping', Object.assign(new CliError(e.message, 2), { stack: e.stack })));
  main(argv).then((code) => process.exit(code), (e: unknown) => die('smcping', e instanceof CliError ? e : new CliError((e as Error)?.message ?? String(e), 2)));
}
