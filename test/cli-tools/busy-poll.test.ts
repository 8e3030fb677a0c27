// smcperf and smcping --busy-poll (issue 17 round 16) as a user runs them: real processes over
// uroce on loopback addresses of our own (127.0.116.x), no TCP option. Each side says which
// mode it measured in (text and JSON), the data of an rr and a stream run with polling on both
// sides is complete (the server counts the stream's bytes), the probes come back intact, and
// the flag is refused where it cannot work (ibverbs) or makes no sense.
import test from 'ava';
import { runTool, ServerProc, lastJson } from './run.js';

const SRV = '127.0.116.2', CLI = '127.0.116.1', PING = '127.0.116.3';
const UEID = 'SMCSCOPE-BUSYPOLL';
const common = ['--no-tcp-option', '--ueid', UEID];

let perf: ServerProc;
let ping: ServerProc;
let perfPort = 0, pingPort = 0;

test.before(async () => {
  perf = await ServerProc.start('smcperf', ['-s', '-b', SRV, '-p', '0', '--tcp-port', '0', ...common, '--busy-poll', '50', '--json']);
  const listening = JSON.parse(perf.out.split('\n')[0]!);
  perfPort = listening.port;
  ping = await ServerProc.start('smcping', ['-l', '-b', PING, '-p', '0', ...common, '--busy-poll', '50']);
  pingPort = Number(/listening on [\d.]+:(\d+)/.exec(ping.out)![1]);
});

test.after.always(async () => { await Promise.all([perf?.stop(), ping?.stop()]); });

test.serial('smcperf --busy-poll: rr and a stream with both sides polling, every byte counted, the mode on both sides', async (t) => {
  const listening = JSON.parse(perf.out.split('\n')[0]!);
  t.is(listening.busy_poll_us, 50, 'the server says it polls');
  const rr = await runTool('smcperf', [SRV, '-p', String(perfPort), '-b', CLI, ...common, '--busy-poll', '50', '--latency', '-n', '64000', '--json']);
  t.is(rr.code, 0, rr.err);
  const j = lastJson(rr.out);
  t.is(j.busy_poll_us, 50);
  const run = j.runs[0];
  t.is(run.busy_poll_us, 50);
  t.deepEqual(run.connections.map((c: { mode: string }) => c.mode), ['smcr']);
  t.is(run.total.transactions, 1000, 'a byte budget of 64000 is exactly 1000 round trips of 64 bytes');
  t.true(run.cpu.client.userMs + run.cpu.client.systemMs > 0);
  const stream = await runTool('smcperf', [SRV, '-p', String(perfPort), '-b', CLI, ...common, '--busy-poll', '50', '-n', '4m', '--sizes', '64k', '--json']);
  t.is(stream.code, 0, stream.err);
  const s = lastJson(stream.out).runs[0];
  t.is(s.total.receiverBytes, 4 << 20, 'the server counted every byte');
  t.is(s.busy_poll_us, 50);
  t.true(s.cpu_utilization_percent.remote_total > 0, 'the server\'s CPU came back');
  await new Promise((r) => setTimeout(r, 300));
  const done = perf.out.trim().split('\n').map((l) => JSON.parse(l)).filter((e) => e.event === 'done' && e.transport === 'smcr');
  t.is(done.length, 2);
  for (const d of done) t.is(d.busy_poll_us, 50);
  // text: the mode under the CPU line it was measured in
  const text = await runTool('smcperf', [SRV, '-p', String(perfPort), '-b', CLI, ...common, '--busy-poll', '20', '--latency', '-t', '0.5']);
  t.is(text.code, 0, text.err);
  t.regex(text.out, /\n {2}CPU: local\/sender [\d.]+% [^\n]*\n {2}receive: busy poll 20 µs \(this side/);
  const plain = await runTool('smcperf', [SRV, '-p', String(perfPort), '-b', CLI, ...common, '--latency', '-t', '0.5', '--json']);
  t.is(lastJson(plain.out).busy_poll_us, 0, 'default: event-driven');
});

test.serial('smcping --busy-poll: probes intact, the mode in text and JSON', async (t) => {
  t.regex(ping.out, /\(busy poll 50 µs\)/);
  const r = await runTool('smcping', [PING, '-p', String(pingPort), '-b', CLI, ...common, '--busy-poll', '100', '-c', '20', '-i', '0.01', '--json']);
  t.is(r.code, 0, r.err);
  const j = lastJson(r.out);
  t.is(j.busy_poll_us, 100);
  t.like(j.attempts[0].stats, { sent: 20, received: 20, corrupt: 0 });
  const text = await runTool('smcping', [PING, '-p', String(pingPort), '-b', CLI, ...common, '-c', '2', '-i', '0']);
  t.regex(text.out, /event-driven/);
});

test.serial('--busy-poll is refused with ibverbs and outside 0…10 s; --help says what it trades', async (t) => {
  for (const tool of ['smcperf', 'smcping'] as const) {
    const ib = await runTool(tool, [SRV, '--device', 'ibverbs', '--busy-poll', '50']);
    t.is(ib.code, 2, ib.err);
    t.regex(ib.err, new RegExp(`^${tool}: --busy-poll: not supported with --device ibverbs`));
    t.is(ib.err.trim().split('\n').length, 1);
    const bad = await runTool(tool, [SRV, '--busy-poll', '-5']);
    t.is(bad.code, 2, bad.err);
    const big = await runTool(tool, [SRV, '--busy-poll', '20000000']);
    t.is(big.code, 2, big.err);
    t.regex(big.err, /busy-poll must be an integer from 0 to 10000000/);
    const help = await runTool(tool, ['--help']);
    t.regex(help.out.replace(/\s+/g, ' '), /--busy-poll <us> .*perftest.*SO_BUSY_POLL.*uroce only/);
  }
});
