// Host-side part of scenario k-smcping-smcperf: the real smcping and smcperf commands (cli/bin,
// each its own process: its own uroce device on the bridge address 10.55.0.254, its own eBPF
// TCP option program, its own link group, deleted when it exits) against guest B's kernel SMC-R
// servers, after guest A has measured kernel↔kernel (a.kk-done):
//   smcping B -p 12345 -a 2 -c 40 -i 0.2       socat echo: first contact, then subsequent contact
//   smcperf B -p 5001 --raw --tcp -n 32m        socat sink: plain TCP, then SMC-R, 64 KiB writes
//   smcperf B -p 12345 --raw --latency --tcp    socat echo: 56-byte request/response, 5 s each
// While each SMC-R measurement runs, host.{ping,stream,rr}-running tells guest B to dump
// smc_diag (the same one dump A's measurements get). Outputs: $LAB_RUN/smcping.txt,
// smcperf-stream.txt, smcperf-rr.txt (verbatim stdout) and tools.json (commands, exit codes,
// the numbers parsed from the text output).
import { spawn } from 'node:child_process';
import { writeFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';

const hostIp = process.env.LAB_HOST_IP ?? '10.55.0.254';
const guestB = process.env.LAB_GUEST_B ?? '10.55.0.2';
const sync = process.env.LAB_SYNC;
const runDir = process.env.LAB_RUN;
const root = process.env.LAB_ROOT ?? process.cwd();
if (!sync || !runDir) { console.error('host part: LAB_SYNC/LAB_RUN not set (run through the lab harness)'); process.exit(2); }

const UEID = 'SMC-LAB-UEID';
const ECHO_PORT = 12345, SINK_PORT = 5001;
const SECS = 5, BULK = '32m', PACED_COUNT = 40, PACED_IVAL = 0.2, SIZE = 56;
const t0 = Date.now();
const stamp = (): string => ((Date.now() - t0) / 1000).toFixed(3).padStart(8);
const say = (l: string): void => console.log(`[${stamp()}] ${l}`);
const common = ['-b', hostIp, '--device', `uroce:${hostIp}`, '--ueid', UEID];

interface ToolRun { name: string; argv: string[]; rc: number | null; seconds: number; out: string; err: string; signalled?: string }
const out: { runs: ToolRun[]; smcping?: unknown; stream?: unknown; rr?: unknown; errors: string[] } = { runs: [], errors: [] };
const save = (): void => writeFileSync(join(runDir, 'tools.json'), JSON.stringify(out, null, 2));

const giveUp = setTimeout(() => { say('host part: not finished within 440 s'); out.errors.push('timeout'); save(); process.exit(1); }, 440_000);

async function waitSync(name: string, s: number): Promise<boolean> {
  const end = Date.now() + s * 1000;
  while (!existsSync(join(sync!, name))) {
    if (Date.now() > end) return false;
    await new Promise((r) => setTimeout(r, 200));
  }
  return true;
}

/** Run one tool; at the first stdout line matching `marker` (after a line matched `after`, if
 *  given), write host.SIGNAL so guest B dumps smc_diag while the measurement runs. */
function tool(name: string, bin: 'smcping' | 'smcperf', args: string[], signal: string, after: RegExp | null, marker: RegExp): Promise<ToolRun> {
  const argv = [bin, ...args];
  say(`$ ${argv.join(' ')}`);
  const s0 = Date.now();
  const c = spawn(process.execPath, ['--import', 'tsx', join(root, 'cli', 'bin', `${bin}.ts`), ...args], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, NO_COLOR: '1' } });
  const r: ToolRun = { name, argv, rc: null, seconds: 0, out: '', err: '' };
  let partial = '';
  let armed = after === null;
  c.stdout.setEncoding('utf8');
  c.stderr.setEncoding('utf8');
  c.stdout.on('data', (d: string) => {
    r.out += d;
    partial += d;
    const lines = partial.split('\n');
    partial = lines.pop()!;
    for (const l of lines) {
      console.log(`  ${name} | ${l}`);
      if (!armed && after?.test(l)) armed = true;
      else if (armed && r.signalled === undefined && marker.test(l)) {
        r.signalled = signal;
        writeFileSync(join(sync!, `host.${signal}`), '');
        say(`signal ${signal} (smc_diag in guest B)`);
      }
    }
  });
  c.stderr.on('data', (d: string) => { r.err += d; for (const l of d.trimEnd().split('\n')) console.log(`  ${name} ! ${l}`); });
  return new Promise((resolve) => c.on('close', (code, sig) => {
    r.rc = code ?? (sig ? -1 : null);
    r.seconds = (Date.now() - s0) / 1000;
    writeFileSync(join(runDir!, `${name}.txt`), `$ ${argv.join(' ')}\n${r.out}${r.err ? `--- stderr\n${r.err}` : ''}`);
    say(`${name}: exit ${r.rc} after ${r.seconds.toFixed(1)} s`);
    out.runs.push(r);
    save();
    resolve(r);
  }));
}

// ---- parsing the tools' text output (their documented formats, docs/smcping.md, docs/smcperf.md)
interface Stats { n: number; min: number; avg: number; p50: number; p99: number; max: number }
function stats(v: number[]): Stats | undefined {
  if (!v.length) return undefined;
  const r = [...v].sort((a, b) => a - b);
  const pct = (p: number): number => r[Math.min(r.length - 1, Math.max(0, Math.ceil((p * r.length) / 100) - 1))]!;
  return { n: r.length, min: r[0]!, avg: r.reduce((a, b) => a + b, 0) / r.length, p50: pct(50), p99: pct(99), max: r[r.length - 1]! };
}
function parseSmcping(text: string) {
  const parts = text.split(/^(?=attempt \d+:)/m).slice(1);
  return parts.map((p) => {
    const n = Number(/^attempt (\d+):/.exec(p)![1]);
    const tcp = /TCP connect ([\d.]+) ms, (.*)$/m.exec(p);
    const ready = /SMC-R ready after ([\d.]+) ms, ([\d.]+) ms in all/.exec(p);
    const steps = /handshake: (.*?)(?: · SMC-R ready| \(ms after)/.exec(p);
    const verdict = /^ {2}(SMC-R v\S+, link group \S+ (new|reused) .*)$/m.exec(p);
    const probes = [...p.matchAll(/^\d+ bytes from \S+: seq=(\d+) time=([\d.]+) ms/gm)].map((m) => Number(m[2]));
    const summary = /(\d+) probes sent, (\d+) replies, (\d+)% lost/.exec(p);
    return {
      n, tcpConnectMs: tcp ? Number(tcp[1]) : null, option254: tcp?.[2] ?? null, handshake: steps?.[1] ?? null,
      smcrReadyMs: ready ? Number(ready[1]) : null, totalMs: ready ? Number(ready[2]) : null,
      verdict: verdict?.[1] ?? null, linkGroup: verdict?.[2] ?? null,
      sent: summary ? Number(summary[1]) : 0, replies: summary ? Number(summary[2]) : 0,
      firstMs: probes[0] ?? null, rtt: stats(probes), rttAfterFirst: stats(probes.slice(1)),
    };
  });
}
function parseSmcperf(text: string) {
  const parts = text.split(/^(?=== )/m).slice(1).filter((p) => /^== (SMC-R|TCP) /.test(p));
  return parts.map((p) => {
    const head = /^== (SMC-R|TCP) (\w+) (\S+) x \d+: (.*)$/m.exec(p)!;
    const stream = /^ +0\.00-[\d.]+ s +([\d.]+ \S+) +([\d.]+ [KMG]?bit\/s) +([\d.]+) MB\/s +(\S.*)$/m.exec(p);
    const rrTotal = /^ +0\.00-[\d.]+ s +(\d+) tx\/s +total (\d+) transactions/m.exec(p);
    const lat = /latency µs: min ([\d.]+) avg ([\d.]+) p50 ([\d.]+) p90 ([\d.]+) p99 ([\d.]+) p99\.9 ([\d.]+) max ([\d.]+)/.exec(p);
    const err = /^ +error: (.*)$/m.exec(p) ?? /^== \S+ \w+ \S+: (.*)$/m.exec(p);
    return {
      transport: head[1], test: head[2], size: head[3], verdict: head[4],
      ...(stream ? { bytes: stream[1], rate: stream[2], megabytesPerSecond: Number(stream[3]), counted: stream[4] } : {}),
      ...(rrTotal ? { transactionsPerSecond: Number(rrTotal[1]), transactions: Number(rrTotal[2]) } : {}),
      ...(lat ? { latencyUs: { min: Number(lat[1]), avg: Number(lat[2]), p50: Number(lat[3]), p90: Number(lat[4]), p99: Number(lat[5]), max: Number(lat[7]) } } : {}),
      ...(err ? { error: err[1] } : {}),
    };
  });
}

if (!(await waitSync('b.listening', 300))) { say('guest B never listened'); out.errors.push('b.listening'); save(); process.exit(1); }
say(`guest B serves on ${guestB}: echo :${ECHO_PORT}, sink :${SINK_PORT}; waiting for guest A's kernel↔kernel measurements`);
if (!(await waitSync('a.kk-done', 360))) { say('guest A never finished'); out.errors.push('a.kk-done'); save(); process.exit(1); }

const ping = await tool('smcping', 'smcping', [guestB, '-p', String(ECHO_PORT), ...common, '-a', '2', '-c', String(PACED_COUNT), '-i', String(PACED_IVAL), '-s', String(SIZE), '--require-smcr'],
  'ping-running', /^attempt 2:/, /bytes from .*seq=3 /);
out.smcping = parseSmcping(ping.out);
const stream = await tool('smcperf-stream', 'smcperf', [guestB, '-p', String(SINK_PORT), ...common, '--raw', '--tcp', '--sizes', '64k', '-n', BULK],
  'stream-running', null, /^== SMC-R stream/);
out.stream = parseSmcperf(stream.out);
const rr = await tool('smcperf-rr', 'smcperf', [guestB, '-p', String(ECHO_PORT), ...common, '--raw', '--latency', '--tcp', '--sizes', String(SIZE), '-t', String(SECS)],
  'rr-running', null, /^== SMC-R rr/);
out.rr = parseSmcperf(rr.out);

// A run that never reached its marker leaves guest B waiting: signal anyway, so B goes on.
for (const s of ['ping-running', 'stream-running', 'rr-running']) if (!existsSync(join(sync, `host.${s}`))) { out.errors.push(`never signalled ${s}`); writeFileSync(join(sync, `host.${s}`), ''); }
for (const r of out.runs) if (r.rc !== 0) out.errors.push(`${r.name} exit ${r.rc}`);
save();
writeFileSync(join(sync, 'host.tools-done'), '');
clearTimeout(giveUp);
say(`host part ${out.errors.length ? `FAILED: ${out.errors.join('; ')}` : 'done'}`);
process.exit(out.errors.length ? 1 : 0);
