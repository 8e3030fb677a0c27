// Hostile peers on the TCP side (CLC), against smcping -l, smcperf -s and the example
// createServer, each a separate process: partial CLC + FIN, random and malformed CLC, silent
// Proposals, half-open connections. After each: the server process lives, a normal client still
// gets SMC-R, and a long-lived SMC-R connection opened before the attack still echoes every byte
// (SHA-256 both ways).
import test from 'ava';
import { randomBytes } from 'node:crypto';
import { closeAll } from '../../endpoint/index.js';
import { DECL } from '../../endpoint/clc/channel.js';
import { rawConnect, drain, proposal, declineCode, normalPing, EchoCheck, fdCount, sleep } from './peer.js';
import { startTarget, alive, type Target } from './servers.js';
import { runTool } from '../cli-tools/run.js';
import { UEID } from './peer.js';

const NET = '127.0.93';
const CLI = `${NET}.1`, BYSTANDER = `${NET}.8`, ATTACK = `${NET}.50`;
let targets: Target[] = [];
const bystanders = new Map<string, EchoCheck>();

test.before(async () => {
  targets = await Promise.all([startTarget('smcping', `${NET}.2`), startTarget('smcperf', `${NET}.4`), startTarget('example', `${NET}.6`)]);
  // A connection that lives through every attack on each echo server: its data must not change.
  for (const t of targets) if (t.name !== 'smcperf') bystanders.set(t.name, await EchoCheck.open(t.addr, t.port, BYSTANDER));
});

test.after.always(async () => {
  for (const b of bystanders.values()) b.close();
  await closeAll();
  await Promise.all(targets.map((t) => t.proc.stop()));
});

/** The server lives, a normal client gets SMC-R, and the bystander's echo is intact. */
async function stillServes(t: import('ava').ExecutionContext, tg: Target): Promise<void> {
  t.true(alive(tg), `${tg.name} died: ${tg.proc.err}`);
  if (tg.name === 'smcperf') {
    const r = await runTool('smcperf', [tg.addr, '-p', String(tg.port), '-b', CLI, '--ueid', UEID, '--no-tcp-option', '-n', '256k', '--json'], { timeoutMs: 30_000 });
    t.is(r.code, 0, `${tg.name}: normal smcperf failed: ${r.err}`);
    t.is(JSON.parse(r.out).runs?.[0]?.connections?.[0]?.mode, 'smcr', r.out.slice(0, 400));
  } else {
    const p = await normalPing(tg.addr, tg.port, CLI);
    t.is(p.code, 0, `${tg.name}: normal smcping failed: ${p.err}`);
    t.is(p.mode, 'smcr');
    const b = bystanders.get(tg.name)!;
    t.true(await b.roundTrip(4096), `${tg.name}: bystander echo: ${b.error}`);
    t.true(b.verify(), `${tg.name}: bystander data changed`);
    t.is(b.sock.mode, 'smcr');
  }
}

for (const name of ['smcping', 'smcperf', 'example'] as const) {
  test.serial(`${name}: 3 bytes of CLC and a FIN: one line about a truncated CLC message, a SYNCERR Decline, the server lives`, async (t) => {
    const tg = targets.find((x) => x.name === name)!;
    const from = tg.proc.out.length;
    const s = await rawConnect(tg.addr, tg.port, ATTACK);
    s.end('abc');
    const r = await drain(s, 5000);
    t.is(declineCode(r.bytes), DECL.SYNCERR, `got ${r.bytes.toString('hex').slice(0, 80)}`);
    const line = await tg.proc.waitFor(/truncated CLC Proposal/, 3000, from);
    t.truthy(line, tg.proc.out.slice(from));
    t.is(tg.proc.out.slice(from).split('\n').filter((l) => /truncated CLC/.test(l)).length, 1);
    t.log(line!);
    await stillServes(t, tg);
  });
}

test.serial('random and malformed CLC bytes: each is declined (SYNCERR), no server dies', async (t) => {
  const eye = Buffer.from([0xe2, 0xd4, 0xc3, 0xd9]);
  const junk: Array<[string, Buffer]> = [
    ['1 KiB random', randomBytes(1024)],
    ['eyecatcher + length 65535', Buffer.concat([eye, Buffer.from([1, 0xff, 0xff, 0x10]), randomBytes(40)])],
    ['eyecatcher + length 11', Buffer.concat([eye, Buffer.from([1, 0x00, 0x0b, 0x10]), randomBytes(40)])],
    ['Proposal with a random body', (() => { const p = Buffer.from(proposal(ATTACK)); randomBytes(p.length - 16).copy(p, 8); return p; })()],
    ['Proposal cut short, then FIN', Buffer.from(proposal(ATTACK)).subarray(0, 30)],
  ];
  for (const tg of targets) {
    for (const [what, bytes] of junk) {
      const s = await rawConnect(tg.addr, tg.port, ATTACK);
      s.end(bytes);
      const r = await drain(s, 5000);
      const code = declineCode(r.bytes);
      t.true(code !== undefined && (code & 0xff000000) >>> 0 !== 0, `${tg.name} / ${what}: ${r.bytes.subarray(0, 40).toString('hex')}`);
      t.true(alive(tg), `${tg.name} died after ${what}`);
    }
    await stillServes(t, tg);
  }
});

test.serial('20 silent Proposals do not delay a normal smcping by more than 100 ms', async (t) => {
  const tg = targets.find((x) => x.name === 'smcping')!;
  // Baseline: first contacts from two fresh addresses (no link group yet), the slower counts.
  const base = await Promise.all([normalPing(tg.addr, tg.port, `${NET}.11`), normalPing(tg.addr, tg.port, `${NET}.12`)].map(async (p) => p));
  const baseMs = Math.max(...base.map((b) => b.totalMs ?? Infinity));
  const silent = await Promise.all(Array.from({ length: 20 }, () => rawConnect(tg.addr, tg.port, ATTACK)));
  for (const s of silent) s.write(proposal(ATTACK));
  const answers = silent.map((s) => drain(s, 8000));
  await sleep(100); // the first of them is now waiting for a Confirm that never comes
  const p = await normalPing(tg.addr, tg.port, `${NET}.13`);
  t.is(p.code, 0, p.err);
  t.is(p.mode, 'smcr');
  t.log(`smcping handshake: ${p.totalMs} ms under 20 silent Proposals, baseline ${baseMs} ms`);
  t.true(p.totalMs! <= baseMs + 100, `${p.totalMs} ms vs ${baseMs} ms`);
  // The silent ones cost only themselves: each is declined within two CLC timeouts.
  const got = await Promise.all(answers);
  const declined = got.filter((g) => g.bytes.length > 0 && g.bytes.includes(Buffer.from([0xe2, 0xd4, 0xc3, 0xd9, 0x04])));
  t.is(declined.length, 20, 'every silent Proposal ends in a Decline');
  await stillServes(t, tg);
});

test.serial('500 half-open connections are closed after the CLC timeout (2 s); the server accepts afterwards', async (t) => {
  for (const tg of targets) {
    const fd0 = fdCount(tg.proc.proc.pid!);
    const t0 = Date.now();
    const socks = await Promise.all(Array.from({ length: 500 }, () => rawConnect(tg.addr, tg.port, ATTACK)));
    const ends = await Promise.all(socks.map((s) => drain(s, 6000)));
    const closed = ends.filter((e) => e.closedAfterMs !== undefined);
    const last = Math.max(...closed.map((e) => e.closedAfterMs!));
    t.log(`${tg.name}: 500 half-open sockets closed by the server, the last ${last} ms after the connects (${Date.now() - t0} ms in all)`);
    t.is(closed.length, 500);
    t.true(ends.every((e) => e.bytes.length === 0), 'nothing is sent to a peer that never sent a Proposal');
    t.true(last <= 2000 + 1500, `last close after ${last} ms`);
    await sleep(200);
    t.true(fdCount(tg.proc.proc.pid!) <= fd0 + 5, `descriptors ${fd0} → ${fdCount(tg.proc.proc.pid!)}`);
    await stillServes(t, tg);
  }
});
