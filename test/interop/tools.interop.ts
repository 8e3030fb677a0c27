// smcping and smcperf (the real commands, each its own process over uroce with the eBPF TCP
// option on the host side of the lab bridge) against Linux 6.12 kernel SMC-R servers under
// smc_run in guest B, with guest A's kernel↔kernel figures from the same run: a 56-byte echo
// loop (paced like smcping, back to back like smcperf rr) and iperf3, each over SMC-R and plain
// TCP. Checked: the tools' verdicts and exit codes, B's smc_diag (mode SMCR) for every measured
// connection and its SMC counters, the byte counts each side claims against the capture, and a
// capture with no unexplained anomaly. Scenario: test/lab/scenarios/k-smcping-smcperf.*;
// docs/smcping.md and docs/smcperf.md ("Against Linux kernel SMC-R (lab)").
import test from 'ava';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { DecodedFrame } from '../../dissectors/frame.js';
import type { ClcAcceptConfirm } from '../../dissectors/wire/clc.js';
import type { LlcMessage } from '../../dissectors/wire/llc.js';
import { SCENARIO_DIR } from '../lab/harness.js';
import { anomalies, foreignFrames, items, run } from './support.js';

const A = '10.55.0.1', B = '10.55.0.2', HOST = '10.55.0.254';
const ECHO = 12345, SINK = 5001, IPERF = 5201;

function shVar(v: string): string {
  const m = new RegExp(`^${v}=(\\S+)`, 'm').exec(readFileSync(join(SCENARIO_DIR, 'k-smcping-smcperf.sh'), 'utf8'));
  if (!m) throw new Error(`no ${v}= in k-smcping-smcperf.sh`);
  return m[1]!;
}
const SIZE = Number(shVar('SIZE'));
const PACED = Number(shVar('PACED_COUNT'));
const BULK = Number(/^(\d+)M$/.exec(shVar('BULK'))![1]) << 20;

interface Stats { n: number; min: number; avg: number; p50: number; p99: number; max: number }
interface PingAttempt { n: number; option254: string; verdict: string; linkGroup: string; sent: number; replies: number; smcrReadyMs: number; totalMs: number; firstMs: number; rtt: Stats }
interface PerfRun { transport: string; test: string; verdict: string; bytes?: string; rate?: string; megabytesPerSecond?: number; transactions?: number; transactionsPerSecond?: number; latencyUs?: { min: number; avg: number; p50: number; p99: number; max: number }; error?: string }
interface Tools { runs: Array<{ name: string; rc: number; out: string }>; smcping: PingAttempt[]; stream: PerfRun[]; rr: PerfRun[]; errors: string[] }
interface SummaryConn { index: number; client: { ip: string; port: number }; server: { ip: string; port: number }; mode: string; tcpBytes: [number, number]; smc?: { lg: number; dirs: Array<{ bytes: number }> } }

/** The echo-loop lines guest A printed: label → numbers (ms). */
function echoLoops(log: string): Map<string, { n: number; min: number; avg: number; p50: number; p99: number; max: number; firstMs: number }> {
  const out = new Map();
  for (const m of log.matchAll(/^echo-loop (\S+): (\d+) round trips of \d+ B, interval \S+ s: rtt min\/avg\/p50\/p99\/max = ([\d.]+)\/([\d.]+)\/([\d.]+)\/([\d.]+)\/([\d.]+) ms \(connect [\d.]+ ms, first round trip ([\d.]+) ms\)/gm)) {
    out.set(m[1], { n: Number(m[2]), min: Number(m[3]), avg: Number(m[4]), p50: Number(m[5]), p99: Number(m[6]), max: Number(m[7]), firstMs: Number(m[8]) });
  }
  return out;
}

/** iperf3's receiver lines in guest A's log, in order: [seconds, MBytes, Mbit/s]. */
function iperfReceiver(log: string): Array<[number, number, number]> {
  return [...log.matchAll(/^\[ *\d+\] +0\.00-([\d.]+) +sec +([\d.]+) MBytes +([\d.]+) Mbits\/sec +receiver/gm)].map((m) => [Number(m[1]), Number(m[2]), Number(m[3])]);
}

/** Guest B's smc_diag dumps, one per measurement: signal name → [state, mode, local, peer] of
 *  the connected sockets it listed. */
function diagDumps(log: string): Map<string, string[][]> {
  const out = new Map<string, string[][]>();
  const parts = log.split(/^\[[\d.]+ guestb\] (\S+): smc_diag during it$/m);
  for (let i = 1; i + 1 < parts.length; i += 2) {
    const body = parts[i + 1]!.split(/^\[[\d.]+ guestb\] (?!\$ )/m)[0]!;
    out.set(parts[i]!, [...body.matchAll(/state=(\S+) +mode=(\S+) +(\S+) <-> (\S+)/g)].filter((m) => m[1] !== 'LISTEN').map((m) => m.slice(1, 5)));
  }
  return out;
}

/** The frames captured in the `seconds` before frame n (oldest first). */
function before(frames: DecodedFrame[], n: number, seconds: number): DecodedFrame[] {
  const t0 = frames[n - 1]!.tsNs - BigInt(Math.round(seconds * 1e9));
  let i = n - 1;
  while (i > 0 && frames[i - 1]!.tsNs >= t0) i--;
  return frames.slice(i, n - 1);
}
const fromTo = (f: DecodedFrame, src: string, dst: string): boolean => f.ip?.src === src && f.ip?.dst === dst;
const isDeleteAll = (f: DecodedFrame): boolean => f.smc.some((i) => i.proto === 'llc' && i.value.kind === 'delete_link' && (i.value as Extract<LlcMessage, { kind: 'delete_link' }>).all);

/** Why a tracker anomaly is not a protocol fault, checked against the frames; undefined = unexplained.
 *  - llc.no-response on a kernel LLC request sent within 3 s after our DELETE LINK ALL: a
 *    DELETE LINK ALL gets no response (Linux answers one with its own DELETE LINK ALL request,
 *    then terminates; the sender only waits for the send completion), and a DELETE RKEY the
 *    kernel had started before it processed our DELETE LINK ALL crossed it: we had already
 *    terminated the link group (Linux does the same once its links are inactive). The kernel
 *    then waits out its 2 s LLC timeout before it answers ours with its DELETE LINK ALL, so
 *    ours is flagged too: explained when that answer came within 3 s.
 *  - cdc.cons-beyond-prod where the reader had already ACKed (RoCE ACK) the PSN of the writer's
 *    next CDC before the flagged frame: the capture on the bridge recorded the writer's CDC after
 *    the reader's answer to it (capture order); the cursors themselves are consistent.
 *  - notes that are true events, not faults: cdc.abort (iperf3's data connection; a connection
 *    the kernel still held when a tool deleted its link group 2 ms after both sides closed) and
 *    roce.retransmission (a TCG guest stalled past the sender's ACK timeout; the PSNs were then
 *    ACKed: a PSN gap or NAK would be its own, unexplained, anomaly). */
function explained(a: { frame: number; code: string; severity: string }, frames: DecodedFrame[]): string | undefined {
  const f = frames[a.frame - 1]!;
  if (a.severity === 'note' && (a.code === 'cdc.abort' || a.code === 'roce.retransmission')) return 'a true event (note)';
  if (a.code === 'llc.no-response' && fromTo(f, HOST, B) && isDeleteAll(f)) {
    const theirs = frames.slice(a.frame).find((g) => g.tsNs - f.tsNs > 3_000_000_000n || (fromTo(g, B, HOST) && isDeleteAll(g)));
    return theirs && fromTo(theirs, B, HOST) ? `our DELETE LINK ALL, answered late by the kernel's (frame ${theirs.n}; it first waited out a crossing LLC request)` : undefined;
  }
  if (a.code === 'llc.no-response' && f.ip?.src === B && f.smc.some((i) => i.proto === 'llc')) {
    const ours = before(frames, a.frame, 3).find((g) => fromTo(g, HOST, B) && isDeleteAll(g));
    return ours ? `kernel request after our DELETE LINK ALL (frame ${ours.n})` : undefined;
  }
  if (a.code === 'cdc.cons-beyond-prod' && f.ip && f.smc.some((i) => i.proto === 'cdc')) {
    const reader = f.ip.src, writer = f.ip.dst;
    const next = frames.slice(a.frame).find((g) => fromTo(g, writer, reader) && g.smc.some((i) => i.proto === 'cdc'));
    if (!next?.roce) return undefined;
    const psn = next.roce.ib.bth.psn;
    const acked = before(frames, a.frame, 1).some((g) => fromTo(g, reader, writer) && g.roce?.ib.aeth?.kind === 'ACK' && g.roce.ib.bth.psn === psn);
    return acked ? `capture order: PSN ${psn} (frame ${next.n}) was ACKed before frame ${a.frame}` : undefined;
  }
  return undefined;
}

test('smcping and smcperf against kernel SMC-R in guest B, next to kernel↔kernel figures of the same run', async (t) => {
  const r = await run(t, { name: 'k-smcping-smcperf' });
  const { frames, result, guestLog } = r;
  const tools = JSON.parse(readFileSync(join(result.runDir, 'tools.json'), 'utf8')) as Tools;
  const logA = guestLog('a'), logB = guestLog('b');

  // ---- the tools' own view
  t.deepEqual(tools.errors, []);
  t.deepEqual(tools.runs.map((x) => [x.name, x.rc]), [['smcping', 0], ['smcperf-stream', 0], ['smcperf-rr', 0]]);
  const [p1, p2] = tools.smcping;
  t.deepEqual(tools.smcping.map((a) => [a.option254, a.linkGroup, a.sent, a.replies]),
    [['option 254 sent and echoed by the peer', 'new', PACED, PACED], ['option 254 sent and echoed by the peer', 'reused', PACED, PACED]]);
  t.regex(p1!.verdict, /^SMC-R v2\.1, link group LG1 new \(first contact\), link 1, UEID SMC-LAB-UEID, peer host guestb$/);
  t.regex(p2!.verdict, /^SMC-R v2\.1, link group LG1 reused \(subsequent contact\)/);
  t.deepEqual(tools.stream.map((x) => [x.transport, x.bytes, x.error]), [['TCP', `${BULK >> 20}.0 MiB`, undefined], ['SMC-R', `${BULK >> 20}.0 MiB`, undefined]]);
  t.regex(tools.stream[1]!.verdict, /^SMC-R v2\.1, link group LG1 new/);
  t.deepEqual(tools.rr.map((x) => [x.transport, x.error]), [['TCP', undefined], ['SMC-R', undefined]]);
  t.regex(tools.rr[1]!.verdict, /^SMC-R v2\.1, link group LG1 new/);
  t.true(tools.rr.every((x) => x.transactions! > 0 && x.latencyUs!.p50 > 0));

  // ---- the kernel's view: smc_diag during every SMC-R measurement, and B's counters
  const diag = diagDumps(logB);
  const ends = (sig: string): string[] => (diag.get(sig) ?? []).map(([state, mode, local, peer]) => `${state} ${mode} ${local} ${peer!.replace(/:\d+$/, '')}`);
  t.deepEqual(ends('a.paced-running'), [`ACTIVE SMCR ${B}:${ECHO} ${A}`]);
  t.deepEqual(ends('a.rr-running'), [`ACTIVE SMCR ${B}:${ECHO} ${A}`]);
  t.true(ends('a.iperf-running').includes(`ACTIVE SMCR ${B}:${IPERF} ${A}`), `iperf3 over SMC-R seen by smc_diag: ${ends('a.iperf-running').join('; ')}`);
  t.deepEqual(ends('host.ping-running'), [`ACTIVE SMCR ${B}:${ECHO} ${HOST}`]);
  t.deepEqual(ends('host.stream-running'), [`ACTIVE SMCR ${B}:${SINK} ${HOST}`]);
  t.deepEqual(ends('host.rr-running'), [`ACTIVE SMCR ${B}:${ECHO} ${HOST}`]);
  t.regex(logB, /lgrinfo: role=SERVER [^\n]*peer_gid=0000:0000:0000:0000:0000:ffff:0a37:00fe/);
  // SMC-R: A's 2 echo loops + iperf3 control and data, smcping ×2, smcperf stream and rr;
  // fallbacks (plain TCP SYNs): A's TCP loop + iperf3 ×2, smcperf's two --tcp runs.
  t.regex(logB, /srv_v2_succ = 8\b/);
  t.regex(logB, /srv_fback_cnt = 5\b/);
  for (const g of ['a', 'b'] as const) {
    const dmesg = readFileSync(join(result.runDir, `dmesg-full-${g}.txt`), 'utf8');
    t.deepEqual(dmesg.split('\n').filter((l) => /WARNING:|BUG:|Call Trace:|Oops|general protection/.test(l)), [], `no kernel warnings in guest ${g}`);
  }

  // ---- the capture: clean, and what each side claims matches what went over the wire
  t.deepEqual(anomalies(frames), [], 'no decoder issues');
  t.deepEqual(foreignFrames(frames), [], 'only lab addresses on the bridge');
  t.deepEqual(frames.filter((f) => f.roce && f.roce.icrc !== 'ok').map((f) => f.n), [], 'every ICRC verifies (uroce\'s and rxe\'s)');
  const summary = result.smcSummary!;
  const unexplained = summary.anomalies.filter((a) => !explained(a, frames)).map((a) => `#${a.frame} ${a.severity} ${a.code}: ${a.message}`);
  t.deepEqual(unexplained, [], 'no unexplained correlation anomaly');
  for (const a of summary.anomalies) t.log(`explained anomaly #${a.frame} ${a.code}: ${explained(a, frames)}`);

  const conns = summary.connections as unknown as SummaryConn[];
  const smcConns = (client: string, port: number) => conns.filter((c) => c.client.ip === client && c.server.port === port && c.mode === 'smc-r');
  const bytes = (c: SummaryConn): [number, number] => [c.smc!.dirs[0]!.bytes, c.smc!.dirs[1]!.bytes];
  // our side: every probe echoed (c>s = s>c = probes × size), the stream's bytes all arrived
  const hostEcho = smcConns(HOST, ECHO);
  t.deepEqual(hostEcho.map(bytes), [[PACED * SIZE, PACED * SIZE], [PACED * SIZE, PACED * SIZE], [tools.rr[1]!.transactions! * SIZE, tools.rr[1]!.transactions! * SIZE]]);
  t.deepEqual(smcConns(HOST, SINK).map(bytes), [[BULK, 0]], 'smcperf\'s SMC-R stream: every byte it counted went by RDMA WRITE');
  t.is(new Set(hostEcho.slice(0, 2).map((c) => c.smc!.lg)).size, 1, 'smcping\'s attempts share a link group');
  t.is(new Set([hostEcho[0]!, hostEcho[2]!, smcConns(HOST, SINK)[0]!].map((c) => c.smc!.lg)).size, 3, 'each tool process has its own link group');
  // guest A's side, the same way
  const loops = echoLoops(logA);
  t.deepEqual([...loops.keys()], ['smc-r-paced', 'smc-r-b2b', 'tcp-b2b']);
  t.is(loops.get('smc-r-paced')!.n, PACED);
  t.deepEqual(smcConns(A, ECHO).map(bytes), [[PACED * SIZE, PACED * SIZE], [loops.get('smc-r-b2b')!.n * SIZE, loops.get('smc-r-b2b')!.n * SIZE]]);
  const iperfData = smcConns(A, IPERF).map(bytes).find(([c2s]) => c2s >= BULK);
  t.truthy(iperfData, 'iperf3\'s SMC-R data connection carried the whole byte budget by RDMA WRITE');
  const iperf = iperfReceiver(logA);
  t.is(iperf.length, 2);

  // the CLC/LLC story of our three link groups (the kernel server offers a second link; we
  // have one device and reject it, as the kernel client does on one RoCE device)
  const clcHost = items(frames, 'clc').filter((c) => c.f.ip!.src === B && c.f.ip!.dst === HOST && c.value.type === 'accept');
  t.deepEqual(clcHost.map((c) => (c.value as ClcAcceptConfirm).firstContact), [true, false, true, true]);
  const llc = items(frames, 'llc') as Array<{ value: LlcMessage; f: DecodedFrame }>;
  const hostLlc = (kind: string, src: string) => llc.filter((l) => l.value.kind === kind && l.f.ip!.src === src && (l.f.ip!.dst === HOST || l.f.ip!.src === HOST));
  t.is(hostLlc('confirm_link', B).length, 3, 'CONFIRM LINK request per link group');
  t.true(hostLlc('confirm_link', HOST).every((l) => l.value.response));
  t.is(hostLlc('delete_link', HOST).filter((l) => (l.value as Extract<LlcMessage, { kind: 'delete_link' }>).all).length, 3, 'each tool deletes its link group on exit');

  // ---- the comparison (same run; TCG guests: absolute numbers are low)
  const ms = (v: number): string => v.toFixed(2);
  const kp = loops.get('smc-r-paced')!, kb = loops.get('smc-r-b2b')!, kt = loops.get('tcp-b2b')!;
  const rrS = tools.rr[1]!, rrT = tools.rr[0]!;
  t.log(`56-byte round trip, paced 0.2 s (p50/min ms): kernel A→B SMC-R ${ms(kp.p50)}/${ms(kp.min)}; smcping uroce→B SMC-R first contact ${ms(p1!.rtt.p50)}/${ms(p1!.rtt.min)}, subsequent ${ms(p2!.rtt.p50)}/${ms(p2!.rtt.min)}`);
  t.log(`56-byte round trip, back to back (p50 ms, round trips/s): kernel A→B SMC-R ${ms(kb.p50)} (${(kb.n / 5).toFixed(0)}/s), TCP ${ms(kt.p50)} (${(kt.n / 5).toFixed(0)}/s); smcperf rr uroce→B SMC-R ${ms(rrS.latencyUs!.p50 / 1000)} (${rrS.transactionsPerSecond}/s), TCP ${ms(rrT.latencyUs!.p50 / 1000)} (${rrT.transactionsPerSecond}/s)`);
  t.log(`throughput ${BULK >> 20} MiB, 64 KiB writes: iperf3 A→B SMC-R ${iperf[0]![2]} Mbit/s, TCP ${iperf[1]![2]} Mbit/s (receiver); smcperf uroce→B SMC-R ${tools.stream[1]!.rate}, TCP ${tools.stream[0]!.rate}`);
});
