// smcperf: qperf / iperf3 for SMC-R. Client and server (`smcperf -s`); throughput (stream,
// reverse) and latency (rr: request/response) tests, a message-size sweep, duration or byte
// count, parallel connections, plain TCP (node:net) to the same peer in the same run (--tcp),
// per-interval reports, latency percentiles, --json, a terminal sparkline and an SVG plot.
//
// Control protocol (docs/smcperf.md), on every connection unless --raw:
//   client → server  "SMCPERF1 " + JSON {"test":"stream"|"reverse"|"rr","size":N,"ms":N,"bytes":N} + "\n"
//                    (at most 1024 bytes; ms = duration, bytes = byte budget, 0 = unlimited)
//   server → client  "SMCPERF1 OK\n"  (or "SMCPERF1 ERR <reason>\n" and close)
//   stream   client sends until its time/bytes are up, then shuts down writing; the server
//            counts, and on EOF answers "SMCPERF1 DONE {"bytes":N,"ms":N,"cpuMs":{…}}\n" and closes.
//   reverse  the server sends SIZE-byte messages until ms/bytes are up, then closes writing.
//   rr       the server echoes every byte; the client sends SIZE bytes and waits for SIZE back.
// --raw: no header; stream writes into any sink, rr needs any echo server, reverse reads any
// source — e.g. a kernel SMC-R peer running socat under smc_run.

import { Command, InvalidArgumentError, Option } from 'commander';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { createServer as netCreateServer, connect as netConnect, isIPv4, type Socket, type Server } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { Duplex } from 'node:stream';
import { createServer, type SmcSocket, type SmcOptions } from '../endpoint/index.js';
import type { DeviceSpec } from '../endpoint/verbs/index.js';
import { CliError, die } from './output.js';
import { lineChartSvg, sparkline, type Series } from './plot.js';
import { cpuSince, latencyHistogram, writePerfReport, type CpuMs } from './perf-report.js';
import { collect, deviceArg, fmtBytes, fmtSize, intArg, numArg, parseSize, resolveHost, sizeArg, sourceAddressFor, versionsArg } from './lib/args.js';
import { busyPollInForce, busyPollOption, connectError, pollMode, describeDevice, listenSide, openEndpoint, shutdownEndpoints, smcOptions, stateOptions, timedConnect, withBusyPoll } from './lib/endpoint.js';
import { cliProgram, say, sleep } from './lib/program.js';
import { stats } from './lib/stats.js';
import { printable, verdictLine, verdictOf, type Verdict } from './lib/verdict.js';

const PORT = 19765;
const MAGIC = 'SMCPERF1';
const MAX_HEADER = 1024;
type Test = 'stream' | 'reverse' | 'rr';

/**
 * --bufsize default: Linux's largest SMC-R buffer (net.smc.wmem/rmem allow up to 512 KiB). The
 * window of an SMC-R connection is the peer's RMB, and every quarter of it costs a CDC, its
 * ACK and a consumer update, so a throughput test with the endpoint's 64 KiB default measures
 * per-message costs (7–8 ms of CPU per MB over uroce, both sides, one process) where TCP on
 * loopback autotunes its window to megabytes; with 512 KiB 3–5 ms/MB (docs/uroce.md).
 */
const DEFAULT_BUFSIZE = 512 * 1024;
type Transport = 'smcr' | 'tcp';

export function buildProgram(): Command {
  const p = new Command('smcperf');
  p.description('Measure SMC-R throughput and latency (like iperf3/qperf), next to plain TCP to the same peer.')
    .usage('HOST [options]  |  -s [options]')
    .argument('[host]', 'an smcperf -s server (or, with --raw, any sink/echo server)')
    .option('-s, --server', 'be the server: SMC-R on PORT, plain TCP on --tcp-port; one server serves every test')
    .option('-p, --port <port>', 'SMC-R (TCP) port', intArg('port', 0, 65535), PORT)
    .option('--tcp-port <port>', 'plain TCP port: server listens there (0 = no plain listener), client measures --tcp there (default PORT+1; with --raw PORT)', intArg('tcp port', 0, 65535))
    .addOption(new Option('-m, --mode <test>', 'stream (client sends), reverse (server sends) or rr (request/response latency)').choices(['stream', 'reverse', 'rr']).default('stream'))
    .option('-R, --reverse', 'same as --mode reverse')
    .option('--latency', 'same as --mode rr')
    .option('--sizes <list>', 'message sizes, a comma list swept in order (e.g. 64,4k,64k,1m; default 64k; rr default 64)', sizeList)
    .option('-t, --time <s>', 'seconds per test (default 5 unless -n)', numArg('time', 0.1, 86400))
    .option('-n, --bytes <size>', 'bytes per test instead of a time (all connections together; e.g. 1g)', sizeArg('bytes', 1, Number.MAX_SAFE_INTEGER))
    .option('-P, --parallel <n>', 'parallel connections', intArg('parallel', 1, 128), 1)
    .option('--tcp', 'also measure plain TCP (node:net) to the same peer, same sizes (runs first: see docs)')
    .option('--raw', 'no control protocol: the peer is a plain sink (stream), echo (rr) or source (reverse)')
    .option('-i, --interval <s>', 'seconds per interval report (default 1; tests shorter than 10 s: a tenth of the test, at least 0.1)', numArg('interval', 0.1, 3600), 1)
    .option('--omit <s>', 'leave the first S seconds of each test out of the totals (slow start, link setup), like iperf3 -O', numArg('omit', 0, 3600), 0)
    .option('--json', 'one JSON document at the end (server: one JSON line per connection)')
    .option('--plot <file.svg>', 'write the interval plot (throughput or latency over time, one line per test) as SVG')
    .option('--report <file.html>', 'write a self-contained HTML report: intervals, latency histogram and CPU per side, SMC-R next to TCP')
    .option('-b, --bind <addr>', 'local IPv4 address (client: TCP source; server: listen address); the uroce device uses it too')
    .option('--device <dev>', 'RDMA device: uroce:ADDR or ibverbs[:NAME] (default uroce on the source address toward HOST)', deviceArg)
    .option('--ueid <ueid>', 'User EID for SMC-Rv2 (repeatable; none = SMC-Rv1 only)', collect)
    .option('--versions <list>', 'SMC-R versions offered, preferred first (default 2,1)', versionsArg)
    .option('--bufsize <size>', 'RMB and send buffer per connection, a power of two 16k…512m (default 512k: Linux\'s largest SMC-R buffer; 64k is the endpoint\'s and Linux\'s default)', sizeArg('bufsize', 16384, 512 * 1024 * 1024), DEFAULT_BUFSIZE)
    .option('--no-tcp-option', 'do not use TCP option 254 (no eBPF, no root); only toward peers known to speak SMC')
    .option('--max-memory <size>', 'server: memory all tests together may hold for their messages (a reverse test holds one SIZE buffer, an rr test one message; more is refused with ERR); SMC-R buffers (2 x --bufsize per connection) come on top', sizeArg('max memory', 1024 * 1024, Number.MAX_SAFE_INTEGER), 256 * 1024 * 1024)
    .option('-v, --verbose', 'print the endpoint\'s protocol log on stderr');
  stateOptions(busyPollOption(p))
    .addHelpText('after', `
Tests:
  stream   the client sends SIZE-byte messages as fast as the connection takes them
  reverse  the server sends (-R)
  rr       request/response: SIZE bytes out, SIZE bytes back, one at a time (--latency);
           reports transactions/s and latency percentiles (p50 p90 p99 p99.9)

Examples:
  smcperf -s -b 10.0.0.2 --ueid MYUEID                          server (SMC-R on 19765, TCP on 19766)
  smcperf 10.0.0.2 --ueid MYUEID                                 5 s stream of 64 KiB messages
  smcperf 10.0.0.2 --ueid MYUEID --sizes 64,4k,64k,1m -t 3 --tcp SMC-R vs TCP per size
  smcperf 10.0.0.2 --ueid MYUEID --latency --sizes 64,1k         latency percentiles
  smcperf 10.0.0.2 --ueid MYUEID -P 4 -n 1g --plot bw.svg        4 connections, 1 GiB, SVG plot
  smcperf 10.0.0.2 -p 5001 --raw --ueid MYUEID                   into a plain sink on an SMC-R host:
                         smc_run socat -u TCP-LISTEN:5001,reuseaddr,fork OPEN:/dev/null
  smcperf 10.0.0.2 -p 5002 --raw --latency --ueid MYUEID         against a plain echo server:
                         smc_run socat TCP-LISTEN:5002,reuseaddr,fork PIPE

Throughput is counted by the receiver where it can be (the server's count in stream mode) over
the time until the receiver confirmed it; intervals are the sender's view. Plain TCP runs go
first, before the SMC-R endpoint (and its TCP option program) is opened, so their SYNs carry
no option 254 and a kernel SMC peer treats them as plain TCP.

Exit status: 0 every test ran, 1 a test failed (connect, peer error, the peer is not an
smcperf server), 2 usage or local error.
Full manual with the control protocol: docs/smcperf.md.`);
  return cliProgram(p);
}

function sizeList(v: string): number[] {
  const list = v.split(',').map((s) => s.trim()).filter(Boolean);
  if (!list.length) throw new InvalidArgumentError('--sizes: a comma list such as 64,4k,64k,1m');
  return list.map((s) => {
    const n = parseSize(s);
    if (n > 64 * 1024 * 1024) throw new InvalidArgumentError(`size ${s}: at most 64m`);
    return n;
  });
}

interface Opts {
  server?: boolean; port: number; tcpPort?: number; mode: Test; reverse?: boolean; latency?: boolean; sizes?: number[];
  time?: number; bytes?: number; parallel: number; tcp?: boolean; raw?: boolean; interval: number; json?: boolean; plot?: string;
  omit: number; intervalGiven?: boolean;
  bind?: string; device?: DeviceSpec; ueid: string[]; versions?: Array<1 | 2>; bufsize?: number; tcpOption: boolean; verbose?: boolean;
  control?: string | boolean; stateJson?: string; maxMemory: number;
  /** --busy-poll µs (0: event-driven) */
  busyPoll: number;
  /** --report FILE.html */
  report?: string;
}

async function main(argv: string[]): Promise<number> {
  const program = buildProgram();
  try {
    program.parse(argv);
  } catch (e) {
    if (e instanceof CliError && e.exitCode === 0) return 0;
    throw e;
  }
  const o = program.opts<Opts>();
  o.ueid ??= [];
  o.intervalGiven = program.getOptionValueSource('interval') !== 'default';
  if (o.reverse) o.mode = 'reverse';
  if (o.latency) o.mode = 'rr';
  if (o.reverse && o.latency) throw new CliError('-R and --latency exclude each other', 2);
  if (o.bind !== undefined && !isIPv4(o.bind)) throw new CliError(`--bind ${o.bind}: not an IPv4 address`, 2);
  if (o.bufsize !== undefined && (o.bufsize & (o.bufsize - 1)) !== 0) throw new CliError(`--bufsize ${o.bufsize}: a power of two (16k, 64k, 1m, …)`, 2);
  for (const u of o.ueid) if (u.length === 0 || u.length > 32) throw new CliError(`--ueid "${u}": 1 to 32 characters`, 2);
  const host = program.args[0];
  if (o.server) {
    if (host !== undefined) throw new CliError('-s takes no HOST: it listens (give the address with -b)', 2);
    return serve(o);
  }
  if (host === undefined) throw new CliError('no HOST: smcperf HOST to measure, or smcperf -s to serve (see --help)', 2);
  if (o.port === 0) throw new CliError('-p 0: give the server\'s port', 2);
  if (o.time !== undefined && o.bytes !== undefined) throw new CliError('-t and -n exclude each other: a time or a byte count', 2);
  return client(host, o);
}

// ------------------------------------------------------------------------------------------
// Line reading on a Duplex (the control protocol)
// ------------------------------------------------------------------------------------------

/**
 * Read one "\n"-terminated line (at most `max` bytes). The stream is left paused with the bytes
 * after the line unshifted: the caller attaches its own 'data' listener and calls resume().
 */
/** Read buffer of a stream sink that reads through onread. */
const SINK_BUF = 256 * 1024;

function readLine(s: Duplex, max: number, timeoutMs: number, what: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let acc: Buffer = Buffer.alloc(0);
    const done = (e: Error | undefined, line?: string): void => {
      clearTimeout(t);
      s.off('data', onData); s.off('end', onEnd); s.off('error', onErr); s.off('close', onEnd);
      if (e) reject(e); else resolve(line!);
    };
    const onData = (d: Buffer): void => {
      acc = acc.length ? Buffer.concat([acc, d]) : d;
      const i = acc.indexOf(10);
      if (i >= 0) {
        s.pause();
        const rest = acc.subarray(i + 1);
        if (rest.length) s.unshift(rest);
        done(undefined, acc.subarray(0, i).toString('latin1'));
      } else if (acc.length > max) {
        done(new Error(`${what}: no line end within ${max} bytes`));
      }
    };
    const onEnd = (): void => done(new Error(`${what}: the peer closed the connection${acc.length ? ` after ${JSON.stringify(acc.subarray(0, 60).toString('latin1'))}` : ''}`));
    // writing into a socket already gone (the peer ended the connection during CLC) is its close
    const onErr = (e: NodeJS.ErrnoException): void => (e.code === 'ERR_STREAM_DESTROYED' ? onEnd() : done(new Error(`${what}: ${e.message}`)));
    const t = setTimeout(() => done(new Error(`${what}: nothing within ${timeoutMs / 1000} s`)), timeoutMs);
    s.on('data', onData); s.on('end', onEnd); s.on('error', onErr); s.on('close', onEnd);
    if (s.destroyed) { onEnd(); return; }
    s.resume();
  });
}

interface Header { test: Test; size: number; ms: number; bytes: number; omitMs?: number }

/** The peer answered our control header with something that is not smcperf's: no test can run. */
class NotSmcperf extends CliError {
  constructor(message: string) { super(message, 1); }
}

/**
 * Why the answer to our control header (`SMCPERF1 {json}\n`) shows the peer is not an smcperf
 * server, in one line: our header echoed back (an echo server, e.g. smcping -l), another
 * control protocol version, other bytes (shown printable, never raw), a close or silence.
 */
function notSmcperf(line: string | undefined, header: string, readError?: string): string {
  const head = 'peer is not an smcperf server';
  const hint = 'use --raw for a plain sink/echo/source';
  if (line === undefined) {
    const why = (readError ?? '').replace(/^server answer: /, '');
    if (/closed the connection|ended by the other party|EPIPE|ECONNRESET/.test(why)) return `${head}: it closed the connection instead of answering the control header${why.includes(' after ') ? ` (${why.replace(/^.* after /, 'it sent ')})` : ''}; ${hint}`;
    if (/no line end/.test(why)) return `${head}: its answer to the control header is not a line (${why}); ${hint}`;
    return `${head}: no answer to the control header (${why || 'none'}); ${hint}`;
  }
  if (line + '\n' === header) return `${head}: it echoed our control header back (an echo server, e.g. smcping -l); ${hint}`;
  const ver = /^SMCPERF(\S*)/.exec(line);
  if (ver && `SMCPERF${ver[1]}` !== MAGIC) return `${head} of this version: it speaks control protocol ${JSON.stringify('SMCPERF' + ver[1]).slice(0, 40)}, we speak ${MAGIC}`;
  return `${head}: it answered ${printable(Buffer.from(line, 'latin1'), 40)} to the control header; ${hint}`;
}

/** CPU use of this process as iperf3 reports it: percent of one core over the wall time (user, system, total). */
export interface CpuPercent { total: number; user: number; system: number }

/** A CPU clock: call the result at the end of the measured span. */
function cpuClock(): () => CpuPercent {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  return () => {
    const d = process.cpuUsage(c0);
    const wallUs = Math.max(1, (performance.now() - t0) * 1000);
    const pct = (us: number): number => Math.round((1000 * us) / wallUs) / 10;
    return { total: pct(d.user + d.system), user: pct(d.user), system: pct(d.system) };
  };
}

const fmtCpu = (c: CpuPercent): string => `${c.total.toFixed(1)}% (${c.user.toFixed(1)}%u/${c.system.toFixed(1)}%s)`;

function parseHeader(line: string): Header | string {
  if (!line.startsWith(`${MAGIC} `)) return 'not an smcperf control header';
  let j: unknown;
  try { j = JSON.parse(line.slice(MAGIC.length + 1)); } catch { return 'header is not JSON'; }
  if (typeof j !== 'object' || j === null) return 'header is not a JSON object';
  const h = j as Record<string, unknown>;
  if (h.test !== 'stream' && h.test !== 'reverse' && h.test !== 'rr') return `unknown test ${JSON.stringify(h.test)}`;
  const int = (v: unknown, lo: number, hi: number): boolean => typeof v === 'number' && Number.isSafeInteger(v) && v >= lo && v <= hi;
  if (!int(h.size, 1, 64 * 1024 * 1024)) return 'size must be 1…64 MiB';
  if (!int(h.ms, 0, 86_400_000)) return 'ms must be 0…86400000';
  if (!int(h.bytes, 0, Number.MAX_SAFE_INTEGER)) return 'bytes must be a non-negative integer';
  if (h.ms === 0 && h.bytes === 0 && h.test === 'reverse') return 'reverse needs ms or bytes';
  // omitMs (optional, newer clients): the server's CPU clock starts that long after the first byte
  const omitMs = int(h.omitMs, 0, 3_600_000) ? h.omitMs as number : 0;
  return { test: h.test, size: h.size as number, ms: h.ms as number, bytes: h.bytes as number, ...(omitMs ? { omitMs } : {}) };
}

function payload(size: number): Buffer {
  const b = Buffer.allocUnsafe(size);
  for (let i = 0; i < size; i++) b[i] = 0x30 + (i % 64);
  return b;
}

/** Resolves when the stream closes or fails. */
function closedOrError(s: Duplex): Promise<void> {
  return new Promise((resolve) => { s.once('close', () => resolve()); s.once('error', () => resolve()); });
}

// ------------------------------------------------------------------------------------------
// Server
// ------------------------------------------------------------------------------------------

async function serve(o: Opts): Promise<number> {
  const { addr, device, log } = listenSide(o, '-s');
  const smc = smcOptions(device, o, log);
  const opt = await openEndpoint('smcperf', smc, o);
  const busyPollUs = await busyPollInForce('smcperf', smc);
  let n = 0;
  const budget = new MemoryBudget(o.maxMemory);
  const emit = (obj: Record<string, unknown>, line: string): void => say(o.json ? JSON.stringify(obj) : line);
  const handle = (s: Duplex & { remoteAddress?: string; remotePort?: number }, transport: Transport, verdict?: Verdict): void => {
    const id = ++n;
    const peer = `${s.remoteAddress}:${s.remotePort}`;
    const how = transport === 'tcp' ? 'plain TCP' : verdictLine(verdict!);
    s.on('error', () => undefined);
    void serveConn(s, budget).then((r) => {
      const rate = r.ms > 0 ? (r.bytes * 8) / (r.ms / 1000) : 0;
      // busy_poll_us: how this side received (SMC-R only; node:net's TCP is always event-driven)
      emit({ event: 'done', n: id, peer, transport, verdict: verdict ?? null, ...r, busy_poll_us: transport === 'smcr' ? busyPollUs : 0 },
        `conn ${id} from ${peer} (${how}): ${r.header ? `${r.header.test} ${fmtSize(r.header.size)}` : 'no test'}`
        + `${r.error ? `: ${r.error}` : `: ${r.bytes} bytes ${r.header?.test === 'reverse' ? 'sent' : 'received'} in ${(r.ms / 1000).toFixed(2)} s (${fmtRate(rate)})`}`
        + `${r.cpu ? `, CPU ${fmtCpu(r.cpu)}` : ''}${transport === 'smcr' ? `, ${pollMode(busyPollUs)}` : ''}`);
    });
  };
  const server = createServer(smc, (s: SmcSocket) => handle(s, 'smcr', verdictOf(s)));
  server.on('error', (e: Error) => emit({ event: 'error', error: e.message }, `smcperf: ${e.message}`));
  const listenErr = (port: number, e: unknown): CliError => {
    const err = e as NodeJS.ErrnoException;
    return new CliError(`listen ${addr}:${port}: ${err.code === 'EADDRINUSE' ? 'address in use' : err.code === 'EADDRNOTAVAIL' ? 'not a local address' : err.message}`, 2);
  };
  let bound;
  try { bound = await server.listen(o.port, addr); } catch (e) { throw listenErr(o.port, e); }
  let plain: Server | undefined;
  const tcpPort = o.tcpPort ?? (o.port === 0 ? 0 : o.port + 1);
  let plainPort: number | null = null;
  if (o.tcpPort !== 0) {
    plain = netCreateServer({ noDelay: true, allowHalfOpen: true }, (s) => handle(s, 'tcp'));
    plain.on('error', (e) => emit({ event: 'error', error: e.message }, `smcperf: plain TCP: ${e.message}`));
    try {
      plain.listen(tcpPort, addr);
      await once(plain, 'listening');
    } catch (e) { throw listenErr(tcpPort, e); }
    plainPort = (plain.address() as { port: number }).port;
  }
  emit({ event: 'listening', address: bound.address, port: bound.port, tcpPort: plainPort, device, ueids: o.ueid, tcpOption: opt.state, busy_poll_us: busyPollUs },
    `smcperf: server on ${bound.address}:${bound.port} (SMC-R via ${describeDevice(device)}, ${pollMode(busyPollUs)}, UEID ${o.ueid.length ? o.ueid.join(', ') : '(none: SMC-Rv1 only)'}, `
    + `option 254 ${opt.state === 'ebpf' ? 'via eBPF' : opt.state === 'ignored' ? 'not used' : 'unavailable'})`
    + `${plainPort !== null ? `, plain TCP on ${bound.address}:${plainPort}` : ''}; Ctrl-C ends`);
  await new Promise<void>((resolve) => { process.once('SIGINT', resolve); process.once('SIGTERM', resolve); });
  plain?.close();
  await Promise.race([server.close(), sleep(1000)]);
  await shutdownEndpoints();
  return 0;
}

interface ServedConn { header?: Header; bytes: number; ms: number; error?: string; cpu?: CpuPercent }

/** Memory the server's tests hold for their messages, against --max-memory. */
class MemoryBudget {
  used = 0;
  constructor(readonly max: number) {}
  /** Take `n` bytes; false (nothing taken) when they do not fit. */
  take(n: number): boolean {
    if (this.used + n > this.max) return false;
    this.used += n;
    return true;
  }
  give(n: number): void { this.used = Math.max(0, this.used - n); }
}

/** What a test holds: reverse, one SIZE buffer it sends from; rr, one message being echoed. */
function testMemory(h: Header): number { return h.test === 'stream' ? 0 : h.size; }

async function serveConn(s: Duplex, budget: MemoryBudget): Promise<ServedConn> {
  let line: string;
  try {
    line = await readLine(s, MAX_HEADER, 10_000, 'control header');
  } catch (e) {
    s.destroy();
    return { bytes: 0, ms: 0, error: (e as Error).message };
  }
  const h = parseHeader(line);
  if (typeof h === 'string') {
    s.end(`${MAGIC} ERR ${h}\n`);
    s.resume();
    return { bytes: 0, ms: 0, error: h };
  }
  const need = testMemory(h);
  if (!budget.take(need)) {
    const why = `server memory limit: this test needs ${fmtSize(need)}, ${fmtSize(budget.used)} of ${fmtSize(budget.max)} (--max-memory) in use`;
    s.end(`${MAGIC} ERR ${why}\n`);
    s.resume();
    return { header: h, bytes: 0, ms: 0, error: why };
  }
  try {
    return await runTest(s, h);
  } finally {
    budget.give(need);
  }
}

async function runTest(s: Duplex, h: Header): Promise<ServedConn> {
  s.write(`${MAGIC} OK\n`);
  // A client that vanishes (killed, reset, SMC-R abort) is a failed test, not a completed one.
  let lost: string | undefined;
  s.on('error', (e: Error) => { lost ??= e.message; });
  let ended = false;
  s.once('end', () => { ended = true; });
  const closed = closedOrError(s);
  if (h.test === 'reverse') {
    const buf = payload(h.size);
    const t0 = performance.now();
    const end = h.ms ? t0 + h.ms : Infinity;
    const budget = h.bytes || Infinity;
    let sent = 0;
    let gone = false;
    void closed.then(() => { gone = true; });
    s.on('data', () => undefined); // the client sends nothing; drain anyway
    s.resume();
    while (!gone && sent < budget && performance.now() < end) {
      const k = Math.min(h.size, budget - sent);
      sent += k;
      if (!s.write(k === h.size ? buf : buf.subarray(0, k))) await Promise.race([once(s, 'drain').catch(() => undefined), closed]);
    }
    if (!gone) s.end();
    await Promise.race([closed, sleep(30_000)]);
    const early = gone && sent < budget && performance.now() < end;
    return { header: h, bytes: sent, ms: performance.now() - t0, ...(early || lost ? { error: `client went away after ${sent} bytes${lost ? `: ${lost}` : ''}` } : {}) };
  }
  let bytes = 0;
  let t0 = 0;
  let cpu0: NodeJS.CpuUsage | undefined;
  // CPU from the first byte (after the client's omit period) to the end of the stream
  let cpu = cpuClock();
  let omitTimer: NodeJS.Timeout | undefined;
  const done = new Promise<void>((resolve) => { s.once('end', () => resolve()); void closed.then(() => resolve()); });
  const got = (n: number): void => {
    if (!t0) {
      t0 = performance.now();
      cpu0 = process.cpuUsage();
      cpu = cpuClock();
      if (h.omitMs) omitTimer = setTimeout(() => { cpu = cpuClock(); }, h.omitMs);
    }
    bytes += n;
  };
  const smc = s as Partial<SmcSocket>;
  if (h.test === 'stream' && typeof smc.setOnread === 'function' && process.env.SMCPERF_SINK !== 'data') {
    // A stream sink reads into one reused buffer, as iperf3 does (node:net's onread; Node
    // offers it only for sockets it makes, so the plain TCP listener below keeps 'data').
    // SMCPERF_SINK=data: fresh chunks through 'data' on SMC-R too (A/B).
    smc.setOnread({ buffer: Buffer.allocUnsafe(SINK_BUF), callback: got });
  } else {
    s.on('data', (d: Buffer) => {
      got(d.length);
      if (h.test === 'rr' && !s.write(d)) { s.pause(); s.once('drain', () => s.resume()); }
    });
  }
  s.resume();
  await done;
  clearTimeout(omitTimer);
  const ms = t0 ? performance.now() - t0 : 0;
  const usage = cpu();
  const short = incomplete(h, bytes, ms);
  // cpu: percent of one core as iperf3 counts it; cpuMs: process time, for --report
  if (!lost && ended && !s.writableEnded && !s.destroyed) s.end(h.test === 'stream' ? `${MAGIC} DONE ${JSON.stringify({ bytes, ms: Math.round(ms * 1000) / 1000, cpu: usage, ...(cpu0 ? { cpuMs: cpuSince(cpu0) } : {}) })}\n` : undefined);
  await Promise.race([closed, sleep(30_000)]);
  const why = lost ?? (!ended ? 'connection closed without an end' : short);
  return { header: h, bytes, ms, cpu: usage, ...(why ? { error: `client went away after ${bytes} bytes: ${why}` } : {}) };
}

/**
 * A client that was killed ends its TCP fallback connection with a plain FIN, like a finished
 * one: what the header promised tells them apart (a byte count not reached, or a timed test that
 * stopped well before its time).
 */
function incomplete(h: Header, bytes: number, ms: number): string | undefined {
  if (h.test !== 'stream') return undefined;
  if (h.bytes > 0 && bytes < h.bytes) return `${bytes} of ${h.bytes} bytes`;
  if (h.bytes === 0 && h.ms > 0 && bytes > 0 && ms < h.ms - Math.max(500, h.ms * 0.1)) return `stopped after ${(ms / 1000).toFixed(2)} s of ${(h.ms / 1000).toFixed(2)} s`;
  return undefined;
}

// ------------------------------------------------------------------------------------------
// Client
// ------------------------------------------------------------------------------------------

interface Interval {
  start: number; end: number; bytes: number; transactions: number; avgUs?: number; bitsPerSecond: number;
  /** iperf3's names for the same interval */
  seconds: number; bits_per_second: number; omitted: boolean;
}

/** iperf3's end.sum_sent / end.sum_received. */
interface Iperf3Sum { start: number; end: number; seconds: number; bytes: number; bits_per_second: number }

interface Run {
  transport: Transport;
  test: Test;
  size: number;
  parallel: number;
  /** SMC-R runs: this client's busy polling budget in µs (0: event-driven; the server reports its own). */
  busy_poll_us?: number;
  connections: Array<{ mode: 'smcr' | 'tcp' | 'plain-tcp'; verdict?: Verdict; handshakeMs: number }>;
  intervals: Interval[];
  total?: { bytes: number; seconds: number; bitsPerSecond: number; megabytesPerSecond: number; transactions?: number; transactionsPerSecond?: number; receiverBytes?: number; senderBytes?: number };
  latencyUs?: { count: number; min: number; avg: number; p50: number; p90: number; p99: number; p999: number; max: number; mdev: number };
  /** Process CPU during the test: this client, and the server (stream tests: from its DONE answer). */
  cpu?: { client: CpuMs; server?: CpuMs };
  /** --report: latency samples in log-spaced buckets (µs). */
  latencyHistogramUs?: { edges: number[]; counts: number[] };
  /** Seconds left out at the start (--omit); totals, latencies and CPU cover the rest. */
  omitted?: number;
  sum_sent?: Iperf3Sum;
  sum_received?: Iperf3Sum;
  /** iperf3's cpu_utilization_percent: this process (host) and the smcperf server (remote, stream tests). */
  cpu_utilization_percent?: { host_total: number; host_user: number; host_system: number; remote_total?: number; remote_user?: number; remote_system?: number };
  error?: string;
  /** The peer answered the control header with something else: the remaining runs are not tried. */
  notSmcperf?: boolean;
}

function fmtRate(bps: number): string {
  return bps >= 1e9 ? `${(bps / 1e9).toFixed(2)} Gbit/s` : bps >= 1e6 ? `${(bps / 1e6).toFixed(1)} Mbit/s` : `${(bps / 1e3).toFixed(1)} kbit/s`;
}
const span = (a: number, b: number): string => `${a.toFixed(2)}-${b.toFixed(2)}`.padStart(13) + ' s';
const r1 = (v: number): number => Math.round(v * 10) / 10;
const r3 = (v: number): number => Math.round(v * 1000) / 1000;

async function client(hostArg: string, o: Opts): Promise<number> {
  const host = await resolveHost(hostArg);
  const local = o.bind ?? (o.device?.provider === 'uroce' ? o.device.address : o.device ? undefined : await sourceAddressFor(host));
  const device: DeviceSpec = withBusyPoll(o.device ?? { provider: 'uroce', address: local! }, o.busyPoll);
  const log = o.verbose ? (l: string) => process.stderr.write(`smc: ${l}\n`) : undefined;
  const smc = smcOptions(device, o, log);
  const sizes = o.sizes ?? [o.mode === 'rr' ? 64 : 65536];
  const seconds = o.bytes === undefined ? (o.time ?? 5) : 0;
  const tcpPort = o.tcpPort ?? (o.raw ? o.port : o.port + 1);
  const text = !o.json;
  // A short test gets intervals of a tenth of it (at least 0.1 s), so a 2 s test shows a ramp, not one line.
  const interval = o.intervalGiven || seconds === 0 || seconds >= 10 ? o.interval : Math.max(0.1, Math.round(seconds * 10) / 100);
  const stop = new AbortController();
  const onSig = (): void => stop.abort();
  process.once('SIGINT', onSig);
  process.once('SIGTERM', onSig);

  const runs: Run[] = [];
  const plan: Array<{ transport: Transport; size: number }> = [];
  // Plain TCP first: before the SMC endpoint (and its option-254 program) exists in this process.
  if (o.tcp) for (const size of sizes) plan.push({ transport: 'tcp', size });
  for (const size of sizes) plan.push({ transport: 'smcr', size });
  if (text) {
    say(`smcperf ${o.mode} to ${hostArg}${hostArg !== host ? ` (${host})` : ''} port ${o.port}${o.tcp ? ` (plain TCP port ${tcpPort})` : ''} from ${local ?? '(any)'} via ${describeDevice(device)}: `
      + `sizes ${sizes.map(fmtSize).join(',')}, ${o.bytes !== undefined ? fmtBytes(o.bytes) : `${seconds} s`} each${o.omit ? ` after ${o.omit} s omitted` : ''}, ${o.parallel} connection${o.parallel > 1 ? 's' : ''}${o.raw ? ', raw (no control protocol)' : ''}${o.busyPoll ? `, SMC-R receive busy-polled ${o.busyPoll} µs` : ''}`);
  }
  let warned = false;
  /** The client's busy polling in force (µs, 0: event-driven), known once the endpoint is open. */
  let busyPollUs = 0;
  for (const step of plan) {
    if (stop.signal.aborted) break;
    if (step.transport === 'smcr' && !warned) {
      warned = true;
      await openEndpoint('smcperf', smc, o);
      busyPollUs = await busyPollInForce('smcperf', smc);
    }
    const r = await runOne(step.transport, step.size, { o, host, local, smc, seconds, tcpPort, text, stop: stop.signal, interval, busyPollUs });
    runs.push(r);
    if (r.notSmcperf) break;
  }
  await shutdownEndpoints();
  process.off('SIGINT', onSig);
  process.off('SIGTERM', onSig);
  const failed = runs.some((r) => r.error) || runs.length === 0;
  if (o.plot) {
    const rr = o.mode === 'rr';
    const series: Series[] = runs.filter((r) => r.intervals.length).map((r) => ({
      label: `${r.transport === 'smcr' ? (r.connections.every((c) => c.mode === 'smcr') ? 'SMC-R' : 'SMC (fell back to TCP)') : 'TCP'} ${fmtSize(r.size)}`,
      points: r.intervals.map((iv) => [iv.end, rr ? (iv.avgUs ?? NaN) : iv.bitsPerSecond / 1e9] as [number, number]),
    }));
    try {
      writeFileSync(o.plot, lineChartSvg(series, {
        title: `smcperf ${o.mode} → ${hostArg}:${o.port}`, xLabel: 'seconds', yLabel: rr ? 'mean latency per interval (µs)' : 'throughput (Gbit/s)',
      }));
    } catch (e) {
      throw new CliError(`--plot ${o.plot}: ${(e as Error).message}`, 2);
    }
  }
  if (o.json) {
    say(JSON.stringify({
      host: hostArg, address: host, port: o.port, tcpPort: o.tcp ? tcpPort : null, local: local ?? null, device, test: o.mode, sizes,
      seconds: o.bytes === undefined ? seconds : null, bytes: o.bytes ?? null, parallel: o.parallel, raw: !!o.raw, omit: o.omit, interval, busy_poll_us: busyPollUs, runs, exitCode: failed ? 1 : 0,
    }));
  } else if (runs.length > 1) {
    say('');
    say('summary');
    const bySize = new Map<number, { smcr?: Run; tcp?: Run }>();
    for (const r of runs) bySize.set(r.size, { ...bySize.get(r.size), [r.transport]: r });
    const cell = (r: Run | undefined): string => {
      if (!r) return '';
      if (r.error) return 'failed';
      if (o.mode === 'rr') return r.latencyUs ? `${r.total?.transactionsPerSecond?.toFixed(0)} tx/s p50 ${r.latencyUs.p50.toFixed(1)} µs p99 ${r.latencyUs.p99.toFixed(1)} µs` : '-';
      return r.total ? `${r.total.megabytesPerSecond.toFixed(1)} MB/s (${fmtRate(r.total.bitsPerSecond)})` : '-';
    };
    say(`  ${'size'.padEnd(6)} ${'SMC-R'.padEnd(42)} ${o.tcp ? 'TCP'.padEnd(42) + ' SMC-R/TCP' : ''}`);
    for (const [size, e] of bySize) {
      const ratio = e.smcr?.total && e.tcp?.total && !e.smcr.error && !e.tcp.error ? (o.mode === 'rr'
        ? (e.smcr.total.transactionsPerSecond ?? 0) / (e.tcp.total.transactionsPerSecond || 1)
        : e.smcr.total.bitsPerSecond / (e.tcp.total.bitsPerSecond || 1)) : undefined;
      const note = e.smcr && e.smcr.connections.some((c) => c.mode !== 'smcr') ? ' (fell back)' : '';
      say(`  ${fmtSize(size).padEnd(6)} ${(cell(e.smcr) + note).padEnd(42)} ${o.tcp ? cell(e.tcp).padEnd(42) + (ratio !== undefined ? ` ${ratio.toFixed(2)}` : '') : ''}`.trimEnd());
    }
  }
  if (o.plot && text) say(`plot: ${o.plot}`);
  if (o.report) {
    try {
      writePerfReport(o.report, { host: hostArg, port: o.port, test: o.mode, sizes, parallel: o.parallel, seconds: o.bytes === undefined ? seconds : null, bytes: o.bytes ?? null, device: describeDevice(device), runs });
    } catch (e) {
      throw new CliError(`--report ${o.report}: ${(e as Error).message}`, 2);
    }
    if (text) say(`report: ${o.report}`);
  }
  return failed ? 1 : 0;
}

interface Ctx {
  o: Opts; host: string; local: string | undefined; smc: SmcOptions; seconds: number; tcpPort: number; text: boolean; stop: AbortSignal; interval: number;
  /** This side's busy polling in force (SMC-R runs), µs; 0: event-driven. */
  busyPollUs: number;
}

interface Conn { s: Duplex; mode: 'smcr' | 'tcp' | 'plain-tcp'; verdict?: Verdict; handshakeMs: number }

async function openConn(transport: Transport, c: Ctx): Promise<Conn> {
  if (transport === 'smcr') {
    const r = await timedConnect(c.smc, c.host, c.o.port, c.local, 10_000);
    return { s: r.sock, mode: r.sock.mode, verdict: verdictOf(r.sock), handshakeMs: r3(r.totalMs) };
  }
  const t0 = performance.now();
  const s: Socket = netConnect({ host: c.host, port: c.tcpPort, allowHalfOpen: true, ...(c.local ? { localAddress: c.local } : {}) });
  const timer = setTimeout(() => s.destroy(Object.assign(new Error('timed out'), { code: 'ETIMEDOUT' })), 10_000);
  try {
    await once(s, 'connect');
  } catch (e) {
    throw new CliError(connectError(c.host, c.tcpPort, e), 1);
  } finally {
    clearTimeout(timer);
  }
  s.setNoDelay(true);
  return { s, mode: 'plain-tcp', handshakeMs: r3(performance.now() - t0) };
}

interface Counters { bytes: number; tx: number; latSumUs: number; latCount: number; lat: number[] }

async function runOne(transport: Transport, size: number, c: Ctx): Promise<Run> {
  const { o, text } = c;
  const test = o.mode;
  const run: Run = { transport, test, size, parallel: o.parallel, ...(transport === 'smcr' ? { busy_poll_us: c.busyPollUs } : {}), connections: [], intervals: [] };
  const label = transport === 'smcr' ? 'SMC-R' : 'TCP';
  const conns: Conn[] = [];
  try {
    for (let i = 0; i < o.parallel; i++) {
      const k = await openConn(transport, c);
      conns.push(k);
      run.connections.push({ mode: k.mode, ...(k.verdict ? { verdict: k.verdict } : {}), handshakeMs: k.handshakeMs });
      k.s.on('error', () => undefined);
    }
    if (!o.raw) {
      const omitMs = Math.round(o.omit * 1000);
      const header = `${MAGIC} ${JSON.stringify({ test, size, ms: c.seconds > 0 ? Math.round((c.seconds + o.omit) * 1000) : 0, bytes: o.bytes ? Math.ceil(o.bytes / o.parallel) : 0, ...(omitMs ? { omitMs } : {}) })}\n`;
      await Promise.all(conns.map(async (k) => {
        k.s.write(header);
        let line: string;
        try {
          line = await readLine(k.s, MAX_HEADER, 10_000, 'server answer');
        } catch (e) {
          throw new NotSmcperf(notSmcperf(undefined, header, (e as Error).message));
        }
        if (line.startsWith(`${MAGIC} ERR`)) throw new CliError(`server refused the test: ${line.slice(MAGIC.length + 5)}`, 1);
        if (line !== `${MAGIC} OK`) throw new NotSmcperf(notSmcperf(line, header));
      }));
    }
  } catch (e) {
    for (const k of conns) k.s.destroy();
    run.error = e instanceof CliError ? e.message : (e as Error).message;
    if (e instanceof NotSmcperf) run.notSmcperf = true;
    if (text) say(`== ${label} ${test} ${fmtSize(size)}: ${run.error}`);
    return run;
  }
  if (text) {
    const v = conns[0]!.verdict;
    const how = transport === 'tcp' ? `plain TCP to port ${c.tcpPort}` : v ? verdictLine(v) : '';
    const modes = transport === 'smcr' && conns.length > 1 ? ` (${conns.filter((k) => k.mode === 'smcr').length}/${conns.length} SMC-R)` : '';
    say(`== ${label} ${test} ${fmtSize(size)} x ${conns.length}: ${how}${modes}`);
  }
  const ctr: Counters = { bytes: 0, tx: 0, latSumUs: 0, latCount: 0, lat: [] };
  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  let serverCpu: CpuMs | undefined;
  // --omit: the test runs omit + seconds; the omitted start is reported (marked) but not counted
  const omitMs = o.omit * 1000;
  const deadline = c.seconds > 0 ? t0 + c.seconds * 1000 + omitMs : Infinity;
  let last = { t: t0, bytes: 0, tx: 0, latSumUs: 0, latCount: 0 };
  /** Counters where the counted part starts (t0 without --omit). */
  let from = { t: t0, bytes: 0, tx: 0, lat: 0 };
  let cpu = cpuClock();
  let omitting = omitMs > 0;
  const tick = (force = false): void => {
    const now = performance.now();
    if (!force && now - last.t < c.interval * 200) return;
    const iv: Interval = {
      start: r3((last.t - t0) / 1000), end: r3((now - t0) / 1000), bytes: ctr.bytes - last.bytes, transactions: ctr.tx - last.tx,
      bitsPerSecond: Math.round(((ctr.bytes - last.bytes) * 8) / ((now - last.t) / 1000)),
      ...(test === 'rr' ? { avgUs: ctr.latCount > last.latCount ? r1((ctr.latSumUs - last.latSumUs) / (ctr.latCount - last.latCount)) : NaN } : {}),
      seconds: 0, bits_per_second: 0, omitted: omitting,
    };
    iv.seconds = r3(iv.end - iv.start);
    iv.bits_per_second = iv.bitsPerSecond;
    run.intervals.push(iv);
    last = { t: now, bytes: ctr.bytes, tx: ctr.tx, latSumUs: ctr.latSumUs, latCount: ctr.latCount };
    if (text) {
      const tag = iv.omitted ? '  (omitted)' : '';
      say(test === 'rr'
        ? `  ${span(iv.start, iv.end)}  ${String(Math.round(iv.transactions / (iv.end - iv.start))).padStart(8)} tx/s  avg ${Number.isFinite(iv.avgUs!) ? iv.avgUs!.toFixed(1) : '-'} µs${tag}`
        : `  ${span(iv.start, iv.end)}  ${fmtBytes(iv.bytes).padStart(10)}  ${fmtRate(iv.bitsPerSecond).padStart(14)}${tag}`);
    }
  };
  const ticker = setInterval(tick, c.interval * 1000);
  const endOmit = (): void => {
    // libuv's timers count from a millisecond clock cached per loop turn, so a timer can fire up
    // to ~1 ms before its delay has passed on performance.now(): wait out the rest, so the
    // omitted span is never shorter than asked (iperf3 -O)
    const left = t0 + omitMs - performance.now();
    if (left > 0) { omitTimer = setTimeout(endOmit, Math.ceil(left)); return; }
    omitTimer = undefined;
    tick(true); // the omitted intervals end exactly here
    omitting = false;
    from = { t: performance.now(), bytes: ctr.bytes, tx: ctr.tx, lat: ctr.lat.length };
    cpu = cpuClock();
  };
  let omitTimer = omitting ? setTimeout(endOmit, omitMs) : undefined;
  const share = o.bytes ? Math.ceil(o.bytes / o.parallel) : Infinity;
  let endT = t0;
  let receiverBytes: number | undefined;
  let peerCpu: CpuPercent | undefined;
  let hostCpu: CpuPercent | undefined;
  try {
    const results = await Promise.all(conns.map((k) => worker(k.s, test, size, share, deadline, ctr, o.raw === true, c.stop)));
    endT = performance.now();
    hostCpu = cpu();
    if (!o.raw && test === 'stream') receiverBytes = results.reduce((a, r) => a + (r.peerBytes ?? 0), 0);
    for (const r of results) if (r.peerCpuMs) serverCpu = { userMs: (serverCpu?.userMs ?? 0) + r.peerCpuMs.userMs, systemMs: (serverCpu?.systemMs ?? 0) + r.peerCpuMs.systemMs };
    // one server process serves all parallel connections: each reports that process's CPU; take the busiest span
    for (const r of results) if (r.peerCpu && (!peerCpu || r.peerCpu.total > peerCpu.total)) peerCpu = r.peerCpu;
    const err = results.find((r) => r.error)?.error;
    if (err) run.error = err;
  } catch (e) {
    run.error = (e as Error).message;
    endT = performance.now();
  } finally {
    clearInterval(ticker);
    clearTimeout(omitTimer);
    tick();
    for (const k of conns) if (!k.s.destroyed) k.s.destroy();
  }
  hostCpu ??= cpu();
  // Every byte the server counted is checked against what was sent (omitted part included); the
  // rate leaves out what was sent before the omit boundary (the sender's count there: the
  // receiver reports only its total).
  const secs = Math.max(0, (endT - from.t) / 1000);
  const bytes = Math.max(0, (receiverBytes ?? ctr.bytes) - from.bytes);
  const tx = ctr.tx - from.tx;
  if (o.omit > 0) run.omitted = r3((from.t - t0) / 1000);
  run.total = {
    bytes, seconds: r3(secs), bitsPerSecond: Math.round(secs > 0 ? (bytes * 8) / secs : 0), megabytesPerSecond: r1(secs > 0 ? bytes / 1e6 / secs : 0),
    ...(test === 'stream' ? { senderBytes: ctr.bytes, ...(receiverBytes !== undefined ? { receiverBytes } : {}) } : {}),
    ...(test === 'rr' ? { transactions: tx, transactionsPerSecond: r1(secs > 0 ? tx / secs : 0) } : {}),
  };
  const sum = (b: number): Iperf3Sum => ({ start: 0, end: r3(secs), seconds: r3(secs), bytes: b, bits_per_second: Math.round(secs > 0 ? (b * 8) / secs : 0) });
  run.sum_sent = sum(Math.max(0, ctr.bytes - from.bytes));
  if (receiverBytes !== undefined || test !== 'stream') run.sum_received = sum(bytes);
  run.cpu_utilization_percent = {
    host_total: hostCpu.total, host_user: hostCpu.user, host_system: hostCpu.system,
    ...(peerCpu ? { remote_total: peerCpu.total, remote_user: peerCpu.user, remote_system: peerCpu.system } : {}),
  };
  if (receiverBytes !== undefined && receiverBytes !== ctr.bytes && !run.error) run.error = `the server received ${receiverBytes} of the ${ctr.bytes} bytes sent`;
  run.cpu = { client: cpuSince(cpu0), ...(serverCpu ? { server: serverCpu } : {}) };
  if (o.report && ctr.lat.length) run.latencyHistogramUs = latencyHistogram(from.lat ? ctr.lat.slice(from.lat) : ctr.lat);
  const st = stats(from.lat ? ctr.lat.slice(from.lat) : ctr.lat);
  if (st) run.latencyUs = { count: st.count, min: r1(st.min), avg: r1(st.avg), p50: r1(st.p50), p90: r1(st.p90), p99: r1(st.p99), p999: r1(st.p999), max: r1(st.max), mdev: r1(st.mdev) };
  if (text) {
    const t = run.total;
    if (test === 'rr') {
      say(`  ${span((from.t - t0) / 1000, (endT - t0) / 1000)}  ${String(Math.round(t.transactionsPerSecond ?? 0)).padStart(8)} tx/s  total ${t.transactions} transactions of ${fmtSize(size)}`);
      if (st) say(`  latency µs: min ${st.min.toFixed(1)} avg ${st.avg.toFixed(1)} p50 ${st.p50.toFixed(1)} p90 ${st.p90.toFixed(1)} p99 ${st.p99.toFixed(1)} p99.9 ${st.p999.toFixed(1)} max ${st.max.toFixed(1)}`);
    } else {
      say(`  ${span((from.t - t0) / 1000, (endT - t0) / 1000)}  ${fmtBytes(bytes).padStart(10)}  ${fmtRate(t.bitsPerSecond).padStart(14)}  ${t.megabytesPerSecond.toFixed(1)} MB/s  `
        + `${receiverBytes !== undefined ? 'counted by the server' : test === 'reverse' ? 'received' : 'sent'}`);
    }
    const hostRole = test === 'reverse' ? 'receiver' : 'sender';
    const peerRole = test === 'reverse' ? 'sender' : 'receiver';
    say(`  CPU: local/${hostRole} ${fmtCpu(hostCpu)}${peerCpu ? `, remote/${peerRole} ${fmtCpu(peerCpu)}` : ''}`);
    // the CPU above was spent in this mode (a polling side uses a core while traffic flows)
    if (transport === 'smcr') say(`  receive: ${pollMode(c.busyPollUs)} (this side; the server prints its own)`);
    const vals = run.intervals.filter((iv) => !iv.omitted).map((iv) => (test === 'rr' ? iv.avgUs ?? NaN : iv.bitsPerSecond));
    const fin = vals.filter((v) => Number.isFinite(v));
    if (vals.length > 1 && fin.length) {
      const lo = Math.min(...fin), hi = Math.max(...fin);
      say(`  ${sparkline(vals)}  ${test === 'rr' ? `${lo.toFixed(1)}…${hi.toFixed(1)} µs` : `${fmtRate(lo)}…${fmtRate(hi)}`} per interval`);
    }
    if (run.error) say(`  error: ${run.error}`);
  }
  return run;
}

interface WorkerResult { peerBytes?: number; peerCpu?: CpuPercent; peerCpuMs?: CpuMs; error?: string }

async function worker(s: Duplex, test: Test, size: number, budget: number, deadline: number, ctr: Counters, raw: boolean, stop: AbortSignal): Promise<WorkerResult> {
  let gone: string | undefined;
  let onGone: (() => void) | undefined;
  const closed = new Promise<void>((resolve) => { onGone = resolve; });
  const fail = (why: string): void => { gone ??= why; onGone?.(); };
  s.on('error', (e) => fail(`connection error: ${e.message}`));
  s.on('close', () => fail('the peer closed the connection'));
  const expired = (): boolean => stop.aborted || performance.now() >= deadline;

  if (test === 'stream') {
    const buf = payload(size);
    let queued = 0;
    s.on('data', () => undefined); // a raw echo peer sends our bytes back: discard them
    s.resume();
    // The control reply comes after our end(); set it up first.
    const waitMs = (Number.isFinite(deadline) ? deadline - performance.now() : 86_400_000) + 120_000;
    const done = raw ? null : readLine(s, MAX_HEADER, waitMs, 'server result');
    while (!gone && queued < budget && !expired()) {
      const k = Math.min(size, budget - queued);
      queued += k;
      if (!s.write(k === size ? buf : buf.subarray(0, k), (e) => { if (!e) ctr.bytes += k; })) {
        await Promise.race([once(s, 'drain').catch(() => undefined), closed]);
      }
    }
    if (gone) return { error: gone };
    s.end();
    if (done) {
      try {
        const line = await done;
        if (!line.startsWith(`${MAGIC} DONE `)) return { error: `unexpected server result ${JSON.stringify(line.slice(0, 60))}` };
        const j = JSON.parse(line.slice(MAGIC.length + 6)) as { bytes?: number; cpu?: CpuPercent; cpuMs?: CpuMs };
        const c = j.cpu;
        const peerCpu = c && [c.total, c.user, c.system].every((v) => typeof v === 'number' && Number.isFinite(v)) ? { total: c.total, user: c.user, system: c.system } : undefined;
        return { peerBytes: Number(j.bytes ?? 0), ...(peerCpu ? { peerCpu } : {}), ...(j.cpuMs ? { peerCpuMs: j.cpuMs } : {}) };
      } catch (e) {
        return { error: (e as Error).message };
      }
    }
    // raw: the sink closes after our FIN; some never do (then the last write's callback is the end)
    await Promise.race([once(s, 'end').catch(() => undefined), closed, sleep(10_000)]);
    return {};
  }

  if (test === 'reverse') {
    s.on('data', (d: Buffer) => { ctr.bytes += d.length; });
    const ended = new Promise<void>((resolve) => s.once('end', () => resolve()));
    s.resume();
    if (raw) {
      // a plain source never stops by itself: stop at the deadline/budget
      while (!gone && !expired() && ctr.bytes < budget) await Promise.race([sleep(20), ended, closed]);
      s.destroy();
      return {};
    }
    await Promise.race([ended, closed]);
    if (!s.writableEnded) s.end();
    return gone && gone !== 'the peer closed the connection' ? { error: gone } : {};
  }

  // rr: one SIZE-byte request, wait for SIZE bytes back, repeat
  const buf = payload(size);
  let have = 0;
  let want = 0;
  let wake: (() => void) | undefined;
  s.on('data', (d: Buffer) => {
    have += d.length;
    if (have >= want && wake) { const w = wake; wake = undefined; w(); }
  });
  s.resume();
  let sent = 0;
  while (!gone && sent < budget && !expired()) {
    const t = performance.now();
    want += size;
    sent += size;
    s.write(buf);
    if (have < want) await Promise.race([new Promise<void>((resolve) => { wake = resolve; }), closed]);
    if (gone) break;
    const us = (performance.now() - t) * 1000;
    ctr.tx++;
    ctr.bytes += size;
    ctr.latSumUs += us;
    ctr.latCount++;
    ctr.lat.push(us);
  }
  if (gone) return { error: gone };
  s.end();
  await Promise.race([once(s, 'end').catch(() => undefined), closed, sleep(5000)]);
  return {};
}

/** Run as a command: one-line errors, exit status, never a stack trace. */
export function run(argv: string[]): void {
  process.on('uncaughtException', (e) => die('smcperf', Object.assign(new CliError(e.message, 2), { stack: e.stack })));
  main(argv).then((code) => process.exit(code), (e: unknown) => die('smcperf', e instanceof CliError ? e : Object.assign(new CliError((e as Error)?.message ?? String(e), 2), { stack: (e as Error)?.stack })));
}
