// Hostile and failing peers of established SMC-R connections, servers as separate processes:
// a TCP reset or a bare FIN on the CLC socket (the peer's SMC side says nothing), a client killed
// with SIGKILL mid-transfer (smcping, smcperf), malformed LLC and CDC injected on the RoCE side
// (unknown types, wrong tokens, cursors beyond the ring, a foreign rkey), and a healthy
// connection that pauses for 10 s. Bystander connections' data is checked by SHA-256.
import test from 'ava';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeAll, endpoint } from '../../endpoint/index.js';
import { encodeLlc, llcTypeByte, LlcCode, type LlcMessage } from '../../dissectors/wire/llc.js';
import { encodeCdc, makeCdc } from '../../dissectors/wire/cdc.js';
import type { SmcStack } from '../../endpoint/stack.js';
import type { Established } from '../../endpoint/clc/handshake.js';
import { toolArgv, runTool } from '../cli-tools/run.js';
import { rawConnect, normalPing, EchoCheck, sleep, UEID } from './peer.js';
import { startTarget, alive, type Target } from './servers.js';

const NET = '127.0.95';
let ex: Target, ping: Target, perf: Target;
let bystander: EchoCheck;

test.before(async () => {
  [ex, ping, perf] = await Promise.all([startTarget('example', `${NET}.6`), startTarget('smcping', `${NET}.2`), startTarget('smcperf', `${NET}.4`)]);
  bystander = await EchoCheck.open(ex.addr, ex.port, `${NET}.8`);
});

test.after.always(async () => {
  bystander?.close();
  await closeAll();
  await Promise.all([ex, ping, perf].map((t) => t?.proc.stop()));
});

/** An SMC-R connection made by hand (no SmcSocket): its TCP socket can misbehave while its SMC side stays silent. */
async function bareConnection(from: string, tg: Target): Promise<{ stack: SmcStack; est: Established; tcp: import('node:net').Socket }> {
  const stack = await endpoint({ device: { provider: 'uroce', address: from }, ueids: [UEID], tcpOption: 'ignore', rmbSize: 16384, sndbufSize: 16384 });
  const tcp = await rawConnect(tg.addr, tg.port, from);
  const r = await stack.handshake('client', tcp);
  if (r.mode !== 'smcr') throw new Error(`no SMC-R: ${r.reason}`);
  return { stack, est: r, tcp };
}

test.serial('a TCP reset on the CLC socket of an SMC-R connection ends it within 1 s', async (t) => {
  const { stack, est, tcp } = await bareConnection(`${NET}.11`, ex);
  const conn = stack.attach(est);
  conn.on('abort', () => undefined);
  await sleep(200);
  const from = ex.proc.out.length;
  const t0 = Date.now();
  tcp.resetAndDestroy();
  const line = await ex.proc.waitFor(/^conn \d+: .*ECONNRESET/, 3000, from);
  const ms = Date.now() - t0;
  t.truthy(line, ex.proc.out.slice(from));
  t.log(`RST → server ended the connection after ${ms} ms: ${line}`);
  t.true(ms < 1000, `${ms} ms`);
  t.true(await bystander.roundTrip(10_000) && bystander.verify(), 'bystander intact');
});

test.serial('a bare FIN (peer process gone, no SMC close) ends the connection after the 1.5 s grace', async (t) => {
  const { stack, est, tcp } = await bareConnection(`${NET}.12`, ex);
  const conn = stack.attach(est);
  conn.on('abort', () => undefined);
  await sleep(200);
  const from = ex.proc.out.length;
  const t0 = Date.now();
  tcp.end();
  const line = await ex.proc.waitFor(/^conn \d+: .*peer gone/, 5000, from);
  const ms = Date.now() - t0;
  t.truthy(line, ex.proc.out.slice(from));
  t.log(`FIN without SMC close → aborted after ${ms} ms: ${line}`);
  t.true(ms >= 1400 && ms < 2500, `${ms} ms`);
  t.true(await bystander.roundTrip(10_000) && bystander.verify(), 'bystander intact');
});

test('a healthy connection idle for 10 s is not ended', async (t) => {
  const c = await EchoCheck.open(ex.addr, ex.port, `${NET}.13`);
  t.is(c.sock.mode, 'smcr');
  t.true(await c.roundTrip(50_000));
  await sleep(10_000);
  t.true(await c.roundTrip(50_000), `after the pause: ${c.error}`);
  t.true(c.verify());
  t.is(c.error, undefined);
  c.close();
});

test.serial('smcping client killed with SIGKILL mid-run: the server cleans its connection up within 2 s', async (t) => {
  const from = ping.proc.out.length;
  const argv = [...toolArgv('smcping'), ping.addr, '-p', String(ping.port), '-b', `${NET}.14`, '--ueid', UEID, '--no-tcp-option', '-c', '0', '-i', '0.05'];
  const p = spawn(argv[0]!, argv.slice(1), { stdio: 'ignore' });
  t.truthy(await ping.proc.waitFor(/^conn \d+ from 127\.0\.95\.14:\d+: SMC-R/, 15_000, from));
  await sleep(500);
  const t0 = Date.now();
  p.kill('SIGKILL');
  const line = await ping.proc.waitFor(/^conn \d+ from 127\.0\.95\.14:\d+ closed/, 6000, from);
  const ms = Date.now() - t0;
  t.truthy(line, ping.proc.out.slice(from));
  t.log(`killed client cleaned up after ${ms} ms: ${line}`);
  t.true(ms < 2000 + 300, `${ms} ms`);
  t.true(alive(ping));
  const n = await normalPing(ping.addr, ping.port, `${NET}.15`);
  t.is(n.code, 0, n.err);
});

test.serial('smcperf client killed with SIGKILL mid-transfer: reported as failed with the bytes transferred', async (t) => {
  const from = perf.proc.out.length;
  const argv = [...toolArgv('smcperf'), perf.addr, '-p', String(perf.port), '-b', `${NET}.16`, '--ueid', UEID, '--no-tcp-option', '-t', '30', '-P', '2'];
  const p = spawn(argv[0]!, argv.slice(1), { stdio: 'ignore' });
  await sleep(2500);
  p.kill('SIGKILL');
  const line = await perf.proc.waitFor(/^conn \d+ from 127\.0\.95\.16:\d+ .*client went away after \d+ bytes/, 8000, from);
  t.truthy(line, perf.proc.out.slice(from));
  t.log(line!);
  t.notRegex(perf.proc.out.slice(from), /127\.0\.95\.16.*bytes received in/, 'not reported as completed');
  t.true(alive(perf));
  const r = await runTool('smcperf', [perf.addr, '-p', String(perf.port), '-b', `${NET}.17`, '--ueid', UEID, '--no-tcp-option', '-n', '1m'], { timeoutMs: 30_000 });
  t.is(r.code, 0, r.err);
});

test.serial('LLC and CDC with wrong types, tokens, cursors and lengths on the RoCE side: only the targeted connection or link group ends', async (t) => {
  // X and Y share one link group with the server; Y's link carries the junk. Z (another link
  // group, another address) later writes to an rkey that is not its own: that ends its own link
  // group only.
  const from = `${NET}.20`;
  const x = await EchoCheck.open(ex.addr, ex.port, from);
  const { stack, est: y } = await bareConnection(from, ex);
  t.is(x.sock.smcr?.linkGroup, y.lg.name, 'X and Y in one link group');
  const yConn = stack.attach(y);
  const yAborted = new Promise<string>((r) => yConn.once('abort', r));
  t.true(await x.roundTrip(100_000));
  const wr = y.link.wr;
  const v = 2 as const;
  const hdr = (code: number) => ({ llcVersion: v, type: llcTypeByte(code, v), length: 44, lengthOrder: 'le' as const, response: false });
  const zero = { linkId: 0, rkey: 0, vaddr: 0n };
  const junk: Uint8Array[] = [
    Uint8Array.from([0x2f, 44, 0, 0, ...randomBytes(40)]),                 // unknown LLC type
    Uint8Array.from([0x21, 5, 0, 0, 1]),                                   // 5-byte LLC
    Uint8Array.from([0x26, ...randomBytes(8191)]),                         // 8 KiB, length says 44
    encodeLlc({ ...hdr(LlcCode.CONFIRM_RKEY), kind: 'confirm_rkey', negative: false, retry: false, numRtokens: 200, rkey: 0xdead, vaddr: 0xffffffffffffffffn, others: [zero, zero] } as LlcMessage),
    encodeLlc({ ...hdr(LlcCode.DELETE_RKEY), kind: 'delete_rkey', negative: false, numRkeys: 8, errorMask: 0, variable: false, rkeys: [1, 2, 3, 4, 5, 6, 7, 8] } as LlcMessage),
    encodeLlc({ ...hdr(LlcCode.DELETE_LINK), kind: 'delete_link', all: false, orderly: true, linkId: 77, reason: 0x00030000 } as LlcMessage),
    encodeCdc(makeCdc(1, 0x7777, { wrap: 0, count: 10 }, { wrap: 0, count: 0 })),       // unknown token
    Uint8Array.from([0xfe, 44, 0, 1]),                                                  // short CDC
    encodeCdc(makeCdc(1, x.sock.conn ? 0 : 0, { wrap: 0, count: 0 }, { wrap: 0, count: 0 })), // token 0
    encodeCdc(makeCdc(500, y.peerToken, { wrap: 0, count: 0x7fffffff }, { wrap: 0, count: 0 })), // Y: cursor beyond the ring
  ];
  for (const m of junk) await wr.send(m);
  const why = await Promise.race([yAborted, sleep(5000).then(() => 'no abort')]);
  t.log(`Y: ${why}`);
  t.not(why, 'no abort', 'the connection with the bad cursor is aborted by the server');
  t.true(await x.roundTrip(100_000), `X after the junk: ${x.error}`);
  t.true(x.verify(), 'X intact');
  // Z: an RDMA WRITE with X's peer rkey + 1 (not registered for Z) ends Z's link group, no other.
  const z = await bareConnection(`${NET}.21`, ex);
  const zDown = new Promise<string>((r) => z.est.lg.once('terminated', (w: string) => r(String(w))));
  await z.est.link.wr.sendWithWrites([{ mr: z.est.sndbuf.mr, off: 0, len: 64, remoteAddr: z.est.peerRmb.addr, rkey: (z.est.peerRmb.rkey + 0x100) >>> 0 }],
    encodeCdc(makeCdc(1, z.est.peerToken, { wrap: 0, count: 64 }, { wrap: 0, count: 0 }))).catch(() => undefined);
  const zWhy = await Promise.race([zDown, sleep(8000).then(() => 'still up')]);
  t.log(`Z's link group: ${zWhy}`);
  t.true(await x.roundTrip(10_000) && x.verify(), 'X intact after Z');
  t.true(await bystander.roundTrip(10_000) && bystander.verify(), 'bystander intact');
  t.true(alive(ex));
  const n = await normalPing(ex.addr, ex.port, `${NET}.22`);
  t.is(n.code, 0, n.err);
  x.close();
});
