// smcping and smcperf as a user runs them: real processes talking to each other over uroce on
// loopback addresses of our own (127.0.96.x), without the TCP option (no root needed). Verdicts,
// probe counts, JSON shapes, fallback reasons, exit codes, one-line usage errors, the SVG plot.
import test from 'ava';
import { createServer, type Server } from 'node:net';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { runTool, ServerProc, lastJson, type Result } from './run.js';
import { ROOT } from '../helpers.js';

const SRV = '127.0.96.2', CLI = '127.0.96.1', ALT = '127.0.96.3', PERF = '127.0.96.4';
const UEID = 'SMCSCOPE-CLITOOLS';
const common = ['--no-tcp-option'];

function oneLineError(t: { is: (a: unknown, b: unknown, m?: string) => void; regex: (s: string, r: RegExp, m?: string) => void }, r: Result, prog: string, re: RegExp): void {
  t.is(r.code, 2, `exit code; stderr ${r.err}`);
  const lines = r.err.trimEnd().split('\n');
  t.is(lines.length, 1, `one line: ${r.err}`);
  t.regex(lines[0]!, new RegExp(`^${prog}: `));
  t.regex(lines[0]!, re);
  t.is(r.out, '');
}

let ping: ServerProc;
let perf: ServerProc;
let pingPort = 0, perfPort = 0;
const dir = mkdtempSync(join(tmpdir(), 'smcscope-clitools-'));

test.before(async () => {
  ping = await ServerProc.start('smcping', ['-l', '-b', SRV, '-p', '0', '--ueid', UEID, ...common, '--json']);
  pingPort = JSON.parse(ping.out.split('\n')[0]!).port;
  perf = await ServerProc.start('smcperf', ['-s', '-b', PERF, '-p', '0', '--tcp-port', '0', '--ueid', UEID, ...common]);
  // --tcp-port 0 means "no plain listener"; a second server for --tcp below has both
  perfPort = Number(/server on [\d.]+:(\d+)/.exec(perf.out)![1]);
});

test.after.always(async () => {
  await Promise.all([ping?.stop(), perf?.stop()]);
  rmSync(dir, { recursive: true, force: true });
});

test.serial('smcping: SMC-R v2.1, first then subsequent contact, every probe echoed (JSON)', async (t) => {
  const r = await runTool('smcping', [SRV, '-p', String(pingPort), '-b', CLI, '--ueid', UEID, ...common, '-c', '5', '-i', '0', '-a', '2', '--json']);
  t.is(r.code, 0, r.err);
  const j = lastJson(r.out);
  t.like(j, { address: SRV, port: pingPort, local: CLI, size: 56, count: 5, tcpOption: 'ignored', exitCode: 0 });
  t.is(j.attempts.length, 2);
  const [a1, a2] = j.attempts;
  t.like(a1.verdict, { mode: 'smcr', version: 2, release: 1, linkGroupState: 'new', link: 1, ueid: UEID });
  t.like(a2.verdict, { mode: 'smcr', version: 2, release: 1, linkGroupState: 'reused', linkGroup: a1.verdict.linkGroup });
  t.deepEqual(a1.handshake.steps.map((s: { step: string }) => s.step), ['proposal→accept', 'confirm sent', 'confirm link']);
  t.deepEqual(a2.handshake.steps.map((s: { step: string }) => s.step), ['proposal→accept', 'confirm sent'], 'no CONFIRM LINK on subsequent contact');
  for (const a of j.attempts) {
    t.is(a.tcp.option254, 'ignored');
    t.true(a.tcp.connectMs > 0 && a.handshake.totalMs >= a.tcp.connectMs);
    t.deepEqual(a.probes.map((p: { seq: number }) => p.seq), [1, 2, 3, 4, 5]);
    t.true(a.probes.every((p: { ms: number; corrupt?: boolean }) => p.ms > 0 && !p.corrupt));
    t.like(a.stats, { sent: 5, received: 5, lossPct: 0, corrupt: 0 });
    t.true(a.stats.min <= a.stats.avg && a.stats.avg <= a.stats.max && a.stats.p99 <= a.stats.max);
    t.is(a.firstRoundTripMs, a.probes[0].ms);
  }
  t.like(j.verdict, { mode: 'smcr', linkGroupState: 'reused' });
  t.log(`rtt ms min/avg/max ${a2.stats.min}/${a2.stats.avg}/${a2.stats.max}; handshake ${a1.handshake.totalMs} ms first, ${a2.handshake.totalMs} ms subsequent`);
  // the echo peer reported both connections (JSON lines)
  await new Promise((res) => setTimeout(res, 300));
  const events = ping.out.trim().split('\n').map((l) => JSON.parse(l));
  const conns = events.filter((e) => e.event === 'connection');
  t.true(conns.length >= 2);
  t.like(conns[0].verdict, { mode: 'smcr', linkGroupState: 'new' });
  const closes = events.filter((e) => e.event === 'close');
  t.true(closes.some((e) => e.bytes === 5 * 56), JSON.stringify(closes));
});

test.serial('smcping: text output like ping, SMC-Rv1 without a UEID', async (t) => {
  const r = await runTool('smcping', [SRV, '-p', String(pingPort), '-b', CLI, ...common, '-c', '4', '-i', '0.05', '-s', '100']);
  t.is(r.code, 0, r.err);
  t.is(r.err, '');
  const lines = r.out.trimEnd().split('\n');
  t.regex(lines[0]!, /^SMCPING 127\.0\.96\.2 port \d+ from 127\.0\.96\.1 via uroce 127\.0\.96\.1: 100-byte probes, offering SMC-R v1, option 254 not used/);
  t.regex(r.out, /attempt 1: TCP connect \d+\.\d{3} ms, option 254 not used\n  handshake: CLC Proposal→Accept \d+ ms · Confirm sent \d+ ms · CONFIRM LINK \d+ ms/);
  t.regex(r.out, /\n  SMC-R v1, link group LG\d+ new \(first contact\), link 1\n/);
  const probes = lines.filter((l) => /^100 bytes from 127\.0\.96\.2: seq=\d+ time=\d+\.\d{3} ms/.test(l));
  t.is(probes.length, 4);
  t.regex(probes[0]!, /seq=1 .*\(first CDC round trip\)$/);
  t.regex(r.out, /\n4 probes sent, 4 replies, 0% lost, time \d+ ms\nrtt min\/avg\/max\/mdev = [\d.]+\/[\d.]+\/[\d.]+\/[\d.]+ ms, p99 [\d.]+ ms\n/);
  t.regex(lines.at(-1)!, /^verdict: SMC-R v1, link group LG\d+ new \(first contact\)/);
});

test.serial('smcping: no common UEID → NOUEID fallback declined by the peer, probes over TCP', async (t) => {
  const other = await ServerProc.start('smcping', ['-l', '-b', ALT, '-p', '0', '--ueid', 'SOME-OTHER-UEID', '--versions', '2', ...common]);
  try {
    const port = Number(/listening on [\d.]+:(\d+)/.exec(other.out)![1]);
    const args = [ALT, '-p', String(port), '-b', CLI, '--ueid', UEID, '--versions', '2', ...common, '-c', '3', '-i', '0'];
    const r = await runTool('smcping', [...args, '--json']);
    t.is(r.code, 0, r.err);
    const j = lastJson(r.out);
    t.deepEqual(j.verdict, { mode: 'tcp', code: '0x03030008', name: 'NOUEID', meaning: j.verdict.meaning, declinedBy: 'peer', reason: j.verdict.reason });
    t.regex(j.verdict.meaning, /UEID/);
    t.deepEqual(j.attempts[0].handshake.steps, []);
    t.like(j.attempts[0].stats, { sent: 3, received: 3 });
    const txt = await runTool('smcping', args);
    t.is(txt.code, 0);
    t.regex(txt.out, /\nverdict: TCP fallback: NOUEID 0x03030008 \([^)]*UEID[^)]*\), declined by the peer; 3\/3 probes echoed intact over TCP\n$/);
    const strict = await runTool('smcping', [...args, '--require-smcr']);
    t.is(strict.code, 1, 'a fallback fails with --require-smcr');
    t.regex(other.out, /conn 1 from 127\.0\.96\.1:\d+: TCP fallback: NOUEID/);
  } finally {
    await other.stop();
  }
});

test.serial('smcping: no reply → exit 1 (refused; a TCP server that never answers)', async (t) => {
  const refused = await runTool('smcping', [SRV, '-p', '1', '-b', CLI, ...common, '-c', '1']);
  t.is(refused.code, 1);
  t.regex(refused.out, /attempt 1: connect 127\.0\.96\.2:1: connection refused/);
  t.regex(refused.out, /verdict: no connection/);
  // A plain TCP server that reads and never writes: our CLC Proposal gets no Accept (CLC
  // timeout, fallback declined by us), then the probes get no reply.
  const mute: Server = createServer((s) => s.resume());
  mute.listen(0, ALT);
  await once(mute, 'listening');
  try {
    const port = (mute.address() as { port: number }).port;
    const r = await runTool('smcping', [ALT, '-p', String(port), '-b', CLI, ...common, '-c', '2', '-i', '0', '-W', '0.3', '--json']);
    t.is(r.code, 1, r.err);
    const j = lastJson(r.out);
    t.like(j.verdict, { mode: 'tcp', declinedBy: 'local' });
    t.like(j.attempts[0].stats, { sent: 2, received: 0, lossPct: 100 });
    t.is(j.exitCode, 1);
  } finally {
    mute.close();
  }
});

test.serial('usage errors: one line, exit 2, no stack trace', async (t) => {
  oneLineError(t, await runTool('smcping', []), 'smcping', /no HOST/);
  oneLineError(t, await runTool('smcping', ['-l']), 'smcping', /-b ADDR/);
  oneLineError(t, await runTool('smcping', [SRV, '-c', 'many']), 'smcping', /count must be an integer/);
  oneLineError(t, await runTool('smcping', [SRV, '-s', '8']), 'smcping', /size must be an integer from 16/);
  oneLineError(t, await runTool('smcping', [SRV, '--bogus']), 'smcping', /unknown option '--bogus'/);
  oneLineError(t, await runTool('smcping', [SRV, '--device', 'uroce:nowhere']), 'smcping', /uroce needs a local IPv4 address/);
  oneLineError(t, await runTool('smcping', ['-l', '-b', '10.255.255.254', ...common]), 'smcping', /cannot open uroce 10\.255\.255\.254: not a local address/);
  oneLineError(t, await runTool('smcping', ['-l', '-b', SRV, ...common]), 'smcping', /UDP port 4791 on that address is taken/);
  oneLineError(t, await runTool('smcperf', []), 'smcperf', /no HOST/);
  oneLineError(t, await runTool('smcperf', [SRV, '-t', '1', '-n', '1m']), 'smcperf', /-t and -n exclude each other/);
  oneLineError(t, await runTool('smcperf', [SRV, '--sizes', '64,lots']), 'smcperf', /"lots" is not a size/);
  oneLineError(t, await runTool('smcperf', [SRV, '-m', 'sideways']), 'smcperf', /Allowed choices are stream, reverse, rr/);
  oneLineError(t, await runTool('smcperf', [SRV, '--bufsize', '100k']), 'smcperf', /power of two/);
  const help = await runTool('smcping', ['--help']);
  t.is(help.code, 0);
  t.regex(help.out, /Exit status \(like ping\)/);
  t.regex(help.out, /smc_run socat TCP-LISTEN/);
  const phelp = await runTool('smcperf', ['--help']);
  t.is(phelp.code, 0);
  t.regex(phelp.out, /--raw/);
});

test.serial('smcperf: stream with a size sweep, server-counted bytes, SVG plot (JSON)', async (t) => {
  const svg = join(dir, 'bw.svg');
  const r = await runTool('smcperf', [PERF, '-p', String(perfPort), '-b', CLI, '--ueid', UEID, ...common, '--sizes', '4k,64k', '-t', '1.2', '-i', '0.4', '--json', '--plot', svg]);
  t.is(r.code, 0, r.err);
  const j = lastJson(r.out);
  t.like(j, { test: 'stream', sizes: [4096, 65536], seconds: 1.2, parallel: 1, raw: false, exitCode: 0 });
  t.is(j.runs.length, 2);
  for (const [i, run] of j.runs.entries()) {
    t.like(run, { transport: 'smcr', test: 'stream', size: [4096, 65536][i] });
    t.falsy(run.error);
    t.like(run.connections[0], { mode: 'smcr', verdict: { mode: 'smcr', version: 2, release: 1 } });
    t.true(run.total.receiverBytes > 0);
    t.is(run.total.receiverBytes, run.total.senderBytes, 'the server counted every byte sent');
    t.true(run.intervals.length >= 2, `${run.intervals.length} intervals`);
    t.is(run.intervals.reduce((a: number, iv: { bytes: number }) => a + iv.bytes, 0) <= run.total.senderBytes, true);
    t.true(run.total.seconds >= 1.2);
  }
  t.is(j.runs[1].connections[0].verdict.linkGroupState, 'reused');
  const s = readFileSync(svg, 'utf8');
  t.regex(s, /^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);
  t.is((s.match(/<polyline /g) ?? []).length, 2);
  t.regex(s, /SMC-R 4k/);
  t.regex(s, /throughput \(Gbit\/s\)/);
  t.log(`SMC-R stream: 4k ${j.runs[0].total.megabytesPerSecond} MB/s, 64k ${j.runs[1].total.megabytesPerSecond} MB/s`);
  await new Promise((res) => setTimeout(res, 300));
  t.regex(perf.out, /conn \d+ from 127\.0\.96\.1:\d+ \(SMC-R v2\.1, link group LG\d+ new .*\): stream 4k: \d+ bytes received in/);
});

test.serial('smcperf: latency (rr) with a byte budget over 2 connections: exact transaction count, percentiles', async (t) => {
  const r = await runTool('smcperf', [PERF, '-p', String(perfPort), '-b', CLI, '--ueid', UEID, ...common, '--latency', '--sizes', '100', '-n', '40000', '-P', '2', '--json']);
  t.is(r.code, 0, r.err);
  const run = lastJson(r.out).runs[0];
  t.like(run, { transport: 'smcr', test: 'rr', size: 100, parallel: 2 });
  t.is(run.connections.length, 2);
  t.true(run.connections.every((c: { mode: string }) => c.mode === 'smcr'));
  t.is(run.total.transactions, 400);
  t.is(run.latencyUs.count, 400);
  const l = run.latencyUs;
  t.true(l.min <= l.p50 && l.p50 <= l.p90 && l.p90 <= l.p99 && l.p99 <= l.p999 && l.p999 <= l.max, JSON.stringify(l));
  t.log(`SMC-R rr 100 B: ${run.total.transactionsPerSecond} tx/s, p50 ${l.p50} µs, p99 ${l.p99} µs`);
});

test.serial('smcperf: reverse with a byte budget delivers exactly that many bytes', async (t) => {
  const r = await runTool('smcperf', [PERF, '-p', String(perfPort), '-b', CLI, '--ueid', UEID, ...common, '-R', '-n', '3m', '--sizes', '1m', '--json']);
  t.is(r.code, 0, r.err);
  const run = lastJson(r.out).runs[0];
  t.like(run, { test: 'reverse', size: 1 << 20 });
  t.is(run.total.bytes, 3 << 20);
});

test.serial('smcperf --omit: short-test intervals, omitted start left out, CPU per side, iperf3 JSON names', async (t) => {
  const r = await runTool('smcperf', [PERF, '-p', String(perfPort), '-b', CLI, '--ueid', UEID, ...common, '--sizes', '64k', '-t', '1', '--omit', '0.5', '--json']);
  t.is(r.code, 0, r.err);
  const j = lastJson(r.out);
  t.like(j, { omit: 0.5, interval: 0.1 });
  const run = j.runs[0];
  t.falsy(run.error);
  t.is(run.total.receiverBytes, run.total.senderBytes, 'the server counted every byte sent, the omitted ones too');
  t.true(run.omitted >= 0.5 && run.omitted < 1, String(run.omitted));
  const omitted = run.intervals.filter((iv: { omitted: boolean }) => iv.omitted);
  const counted = run.intervals.filter((iv: { omitted: boolean }) => !iv.omitted);
  t.true(omitted.length >= 2 && counted.length >= 5, `${omitted.length} omitted, ${counted.length} counted intervals of 0.1 s`);
  t.true(omitted.at(-1).end <= counted[0].start + 1e-9, 'the omitted intervals end where the counted ones start');
  for (const iv of run.intervals) t.is(iv.bits_per_second, iv.bitsPerSecond);
  t.true(run.total.bytes < run.total.receiverBytes, 'the total leaves out what was sent before the omit boundary');
  // the omit boundary is a timer: on a loaded machine it fires late, so the counted span may be short of 1 s
  t.true(run.total.seconds > 0.5 && run.total.seconds < 2, String(run.total.seconds));
  t.like(run.sum_received, { bytes: run.total.bytes, seconds: run.total.seconds });
  t.is(run.sum_sent.seconds, run.total.seconds);
  const cpu = run.cpu_utilization_percent;
  for (const k of ['host_total', 'host_user', 'host_system', 'remote_total', 'remote_user', 'remote_system']) t.true(typeof cpu[k] === 'number' && cpu[k] >= 0, `${k}: ${cpu[k]}`);
  t.true(Math.abs(cpu.host_total - cpu.host_user - cpu.host_system) < 0.3);
  const text = await runTool('smcperf', [PERF, '-p', String(perfPort), '-b', CLI, '--ueid', UEID, ...common, '--sizes', '64k', '-t', '0.6', '--omit', '0.2']);
  t.is(text.code, 0, text.err);
  t.regex(text.out, /\n +0\.00-0\.\d\d s .*\(omitted\)\n/);
  t.regex(text.out, /\n  CPU: local\/sender [\d.]+% \([\d.]+%u\/[\d.]+%s\), remote\/receiver [\d.]+% \([\d.]+%u\/[\d.]+%s\)\n/);
});

test.serial('smcperf --tcp: plain TCP first, then SMC-R, same sizes; text output with sparkline and summary', async (t) => {
  const both = await ServerProc.start('smcperf', ['-s', '-b', ALT, '-p', '0', '--ueid', UEID, ...common]);
  try {
    const m = /server on [\d.]+:(\d+) .*plain TCP on [\d.]+:(\d+)/.exec(both.out)!;
    t.truthy(m, both.out);
    const r = await runTool('smcperf', [ALT, '-p', m[1]!, '--tcp-port', m[2]!, '-b', CLI, '--ueid', UEID, ...common, '--tcp', '--sizes', '64k', '-t', '1.5', '-i', '0.5']);
    t.is(r.code, 0, r.err);
    const tcpAt = r.out.indexOf('== TCP stream 64k x 1: plain TCP to port');
    const smcAt = r.out.indexOf('== SMC-R stream 64k x 1: SMC-R v2.1');
    t.true(tcpAt > 0 && smcAt > tcpAt, r.out);
    t.regex(r.out, /\n +0\.00-0\.5\d s +[\d.]+ [KMG]iB +[\d.]+ [MG]bit\/s\n/);
    t.regex(r.out, /\n  [▁▂▃▄▅▆▇█]{2,} +[\d.]+ [kMG]bit\/s…[\d.]+ [kMG]bit\/s per interval\n/);
    t.regex(r.out, /\nsummary\n +size +SMC-R +TCP +SMC-R\/TCP\n +64k +[\d.]+ MB\/s \([^)]+\) +[\d.]+ MB\/s \([^)]+\) +\d+\.\d\d\n$/);
    t.log(r.out.split('\n').slice(-2).join(' | '));
  } finally {
    await both.stop();
  }
});

test.serial('smcperf --raw against a plain echo peer (smcping -l); without --raw it says what is wrong', async (t) => {
  const rr = await runTool('smcperf', [SRV, '-p', String(pingPort), '--raw', '-b', CLI, '--ueid', UEID, ...common, '--latency', '-n', '6400', '--json']);
  t.is(rr.code, 0, rr.err);
  t.is(lastJson(rr.out).runs[0].total.transactions, 100);
  const st = await runTool('smcperf', [SRV, '-p', String(pingPort), '--raw', '-b', CLI, '--ueid', UEID, ...common, '-n', '2m', '--json']);
  t.is(st.code, 0, st.err);
  t.is(lastJson(st.out).runs[0].total.bytes, 2 << 20);
  const wrong = await runTool('smcperf', [SRV, '-p', String(pingPort), '-b', CLI, '--ueid', UEID, ...common, '-t', '1']);
  t.is(wrong.code, 1);
  t.regex(wrong.out, /peer is not an smcperf server: it echoed our control header back .*use --raw/);
});

test.serial('smcping --state-json: the endpoint state at exit, readable by smcdump --state', async (t) => {
  const sdir = mkdtempSync(join(tmpdir(), 'smcping-state-'));
  try {
    const file = join(sdir, 'state.json');
    const r = await runTool('smcping', [SRV, '-p', String(pingPort), '-b', CLI, '--ueid', UEID, ...common, '-c', '3', '-i', '0', '--state-json', file, '--control', join(sdir, 'ctl.sock')]);
    t.is(r.code, 0, r.err);
    t.regex(r.err, /endpoint state on .*ctl\.sock/);
    const st = JSON.parse(readFileSync(file, 'utf8')) as { linkGroups: Array<{ role: string; links: unknown[] }>; closedConnections: Array<{ counters: { bytesSent: number } }> };
    t.is(st.linkGroups[0]?.role, 'client');
    t.true(st.linkGroups[0]!.links.length >= 1);
    t.true(st.closedConnections.length >= 1);
    const compiled = join(ROOT, 'dist', 'cli', 'bin', 'smcdump.js');
    const smcdump = import.meta.url.includes('/dist/') && existsSync(compiled) ? [compiled] : ['--import', 'tsx', join(ROOT, 'cli', 'bin', 'smcdump.ts')];
    const d = spawnSync(process.execPath, [...smcdump, '--state', file, '--summary'], { encoding: 'utf8', env: { ...process.env, NO_COLOR: '1' } });
    t.is(d.status, 0, d.stderr);
    t.regex(d.stdout, /Link groups/);
  } finally {
    rmSync(sdir, { recursive: true, force: true });
  }
});
