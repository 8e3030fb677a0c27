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

import { Command } from 'commander';
import { once } from 'node:events';
import { isIPv4 } from 'node:net';
import { performance } from 'node:perf_hooks';
import { createServer, handshakeOf, type SmcSocket, type SmcOptions } from '../endpoint/index.js';
import type { DeviceSpec } from '../endpoint/verbs/index.js';
import type { TraceEvent } from '../endpoint/trace.js';
import { CliError, die } from './output.js';
import { collect, deviceArg, intArg, numArg, resolveHost, sourceAddressFor, versionsArg } from './lib/args.js';
import { busyPollInForce, busyPollOption, describeDevice, pollMode, listenSide, openEndpoint, shutdownEndpoints, smcOptions, stateOptions, timedConnect, withBusyPoll } from './lib/endpoint.js';
import { cliProgram, say, sleep } from './lib/program.js';
import { ms3, round3, stats } from './lib/stats.js';
import { TraceFormatter, echoLine, peerSmcOf, printable, verdictLine, verdictOf, type EchoResult, type PeerSmc, type Verdict } from './lib/verdict.js';

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
  stateOptions(busyPollOption(p))
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
  /** --busy-poll µs (0: event-driven) */
  busyPoll: number;
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
  const device: DeviceSpec = withBusyPoll(o.device ?? { provider: 'uroce', address: local! }, o.busyPoll);
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
  const busyPollUs = await busyPollInForce('smcping', smc);
  const offered = (o.versions ?? [2, 1]).filter((v) => v === 1 || o.ueid.length > 0);
  if (text) {
    say(`SMCPING ${hostArg}${hostArg !== host ? ` (${host})` : ''} port ${o.port} from ${local ?? '(any)'} via ${describeDevice(device)}: ${o.size}-byte probes, `
      + `offering SMC-R ${offered.map((v) => `v${v}`).join('+') || '(none)'}${o.ueid.length ? ` (UEID ${o.ueid.join(', ')})` : ''}, `
      + `option 254 ${opt.state === 'ebpf' ? 'via eBPF' : opt.state === 'ignored' ? 'not used (--no-tcp-option)' : 'unavailable'}, ${pollMode(busyPollUs)}`);
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
      ueids: o.ueid, tcpOption: opt.state, busy_poll_us: busyPollUs, attempts, verdict: last?.verdict ?? null, peerSmc: last?.peerSmc ?? null,
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
  if (v.failed) return `no SMC on the peer (${a.peerSmc.why}); the connection ended during CLC (${v.failed}), nothing to fall back to`;
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
    // EPIPE, write after end, or after the stream was destroyed (a peer that closed during CLC
    // leaves a dead socket behind): all mean the peer is gone
    const gone = ['EPIPE', 'ERR_STREAM_WRITE_AFTER_END', 'ERR_STREAM_DESTROYED'].includes(e.code ?? '') || /ended by the other party/.test(e.message);
    closed ??= gone ? 'the peer closed the connection' : `connection error: ${e.message}`;
    kick();
  };
  sock.on('end', onEnd);
  sock.on('error', onErr);
  sock.on('close', onEnd);
  const onAbort = (): void => kick();
  stop.addEventListener('abort', onAbort);
  if (sock.destroyed) closed = 'the peer closed the connection';

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
  const busyPollUs = await busyPollInForce('smcping', smc);
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
  emit({ event: 'listening', address: bound.address, port: bound.port, device, ueids: o.ueid, tcpOption: opt.state, busy_poll_us: busyPollUs },
    `smcping: echo peer listening on ${bound.address}:${bound.port} via ${describeDevice(device)} (${pollMode(busyPollUs)}), `
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
