// The endpoint's control socket: owner-only Unix socket, state and watch, bad requests never
// hurt the endpoint; smcdump --endpoint reads it.
import test from 'ava';
import { spawn, spawnSync, execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { chmodSync, existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { createConnection, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { serveControl, queryControl, watchControl, defaultControlPath, MAX_CLIENTS, type ControlServer } from '../../endpoint/control.js';
import type { SmcStack } from '../../endpoint/stack.js';
import { ROOT } from '../helpers.js';
import { openPair, exchange } from './pair.js';

let a: SmcStack, b: SmcStack;
let srv: ControlServer;
const dir = mkdtempSync(join(tmpdir(), 'smcscope-ctl-'));
const sockDir = join(dir, 'run');
let done: () => void = () => undefined;

test.before(async () => {
  [a, b] = await openPair(64);
  const x = await exchange(a, b, 20_000, 500);
  done = x.done;
  srv = await serveControl(a, join(sockDir, 'ep.sock'));
});
test.after.always(async () => {
  await srv?.close();
  done();
  await Promise.all([a?.close(), b?.close()]);
  rmSync(dir, { recursive: true, force: true });
});

/** A raw client: send lines, collect answer lines. */
function raw(path: string): { sock: Socket; lines: string[]; next: (n?: number) => Promise<string[]>; closed: Promise<void> } {
  const sock = createConnection(path);
  const lines: string[] = [];
  let buf = '';
  const waiters: Array<() => void> = [];
  sock.setEncoding('utf8');
  sock.on('data', (c: string) => {
    buf += c;
    let i;
    while ((i = buf.indexOf('\n')) >= 0) { lines.push(buf.slice(0, i)); buf = buf.slice(i + 1); }
    for (const w of waiters.splice(0)) w();
  });
  sock.on('error', () => undefined);
  const closed = new Promise<void>((r) => sock.once('close', () => { for (const w of waiters.splice(0)) w(); r(); }));
  const next = async (n = 1): Promise<string[]> => {
    const until = Date.now() + 5000;
    while (lines.length < n && !sock.destroyed && Date.now() < until) await new Promise<void>((r) => { waiters.push(r); setTimeout(r, 200); });
    return lines.splice(0, n);
  };
  return { sock, lines, next, closed };
}

test.serial('directory 0700, socket 0600, owner only', (t) => {
  t.is(statSync(sockDir).mode & 0o777, 0o700);
  const st = statSync(srv.path);
  t.true(st.isSocket());
  t.is(st.mode & 0o777, 0o600);
  if (process.getuid?.() !== 0) { t.pass('not root: cannot try another user'); return; }
  // another user cannot connect (even with the directory opened up, the socket itself is 0600)
  chmodSync(sockDir, 0o755);
  try {
    const r = spawnSync(process.execPath, ['-e', `const s=require('net').createConnection(${JSON.stringify(srv.path)});s.on('connect',()=>{console.log('CONNECTED');process.exit(0)});s.on('error',(e)=>{console.log(e.code);process.exit(0)})`], { uid: 65534, gid: 65534, encoding: 'utf8' });
    t.is(r.stdout.trim(), 'EACCES');
  } finally {
    chmodSync(sockDir, 0o700);
  }
});

test.serial('{"cmd":"state"}: the snapshot as one JSON line', async (t) => {
  const s = await queryControl(srv.path) as { gid: string; pid: number; takenAt: string; linkGroups: Array<{ name: string; links: Array<{ qpn: number; peer: { qpn: number } }> }>; connections: Array<{ key: string; tx: { prod: { count: number } } }> };
  t.is(s.pid, process.pid);
  t.is(s.gid, `::ffff:${(a.opts.device as { address: string }).address}`);
  t.true(Math.abs(Date.parse(s.takenAt) - Date.now()) < 5000);
  t.is(s.linkGroups.length, 1);
  t.is(s.linkGroups[0]!.links[0]!.qpn, [...a.linkGroups][0]!.links.get(1)!.qpn);
  t.is(s.connections.length, 1);
  t.is(s.connections[0]!.tx.prod.count, 20_000);
  // several requests on one connection, answered in order
  const c = raw(srv.path);
  c.sock.write('{"cmd":"state"}\n{"cmd":"state"}\n');
  const two = await c.next(2);
  t.is(two.length, 2);
  for (const l of two) t.is((JSON.parse(l) as { linkGroups: unknown[] }).linkGroups.length, 1);
  c.sock.destroy();
});

test.serial('{"cmd":"watch"}: a snapshot every intervalMs until the client closes', async (t) => {
  const got: Array<{ takenAt: string }> = [];
  const t0 = Date.now();
  const w = watchControl(srv.path, 50, (v) => got.push(v as { takenAt: string }), (e) => t.fail(e.message));
  while (got.length < 5 && Date.now() - t0 < 5000) await new Promise((r) => setTimeout(r, 20));
  t.true(got.length >= 5, `${got.length} snapshots`);
  t.true(Date.parse(got[4]!.takenAt) - Date.parse(got[0]!.takenAt) >= 150);
  t.true(srv.clients >= 1);
  w.close();
  const until = Date.now() + 3000;
  while (srv.clients > 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
  t.is(srv.clients, 0, 'the watcher is gone after it closed');
});

test.serial('bad requests get one error line; the endpoint lives on', async (t) => {
  const c = raw(srv.path);
  c.sock.write('hello\n[1,2]\n{"cmd":"reboot"}\n{"cmd":"watch","intervalMs":1}\n{"cmd":"watch","intervalMs":"x"}\n{"nocmd":true}\n');
  const errs = (await c.next(6)).map((l) => (JSON.parse(l) as { error: string }).error);
  t.is(errs.length, 6);
  t.regex(errs[0]!, /^bad request: not JSON/);
  t.regex(errs[1]!, /^bad request: expected a JSON object/);
  t.regex(errs[2]!, /^bad request: unknown cmd "reboot"/);
  t.regex(errs[3]!, /intervalMs must be an integer from 20/);
  t.regex(errs[4]!, /intervalMs must be an integer/);
  t.regex(errs[5]!, /unknown cmd null/);
  // still answers on the same connection
  c.sock.write('{"cmd":"state"}\n');
  t.truthy((JSON.parse((await c.next())[0]!) as { linkGroups?: unknown }).linkGroups);
  c.sock.destroy();

  // a line without end: cut at 64 KiB with an error, connection closed
  const big = raw(srv.path);
  big.sock.write('{"cmd":"' + 'x'.repeat(100 * 1024));
  const [e] = await big.next();
  t.regex((JSON.parse(e!) as { error: string }).error, /line longer than 65536 bytes/);
  await big.closed;

  // more clients than allowed: the extra one is told and closed, the others keep working
  const many = Array.from({ length: MAX_CLIENTS }, () => raw(srv.path));
  await new Promise((r) => setTimeout(r, 300));
  const extra = raw(srv.path);
  const [x] = await extra.next();
  t.regex((JSON.parse(x!) as { error: string }).error, /too many clients/);
  for (const m of many) m.sock.destroy();
  await new Promise((r) => setTimeout(r, 200));
  // garbage bytes and an abrupt close
  const g = raw(srv.path);
  g.sock.write(Buffer.from([0xff, 0xfe, 0, 10, 0x80, 10]));
  await g.next(2);
  g.sock.destroy();
  t.truthy(await queryControl(srv.path));
  t.is(a.linkGroups.size, 1, 'the endpoint is unharmed');
});

test.serial('default path: $XDG_RUNTIME_DIR/smcscope/<pid>.sock; a live socket is not taken over, a stale one is', async (t) => {
  const old = process.env.XDG_RUNTIME_DIR;
  process.env.XDG_RUNTIME_DIR = join(dir, 'xdg');
  try {
    t.is(defaultControlPath(), join(dir, 'xdg', 'smcscope', `${process.pid}.sock`));
    const s2 = await serveControl(b);
    t.is(s2.path, defaultControlPath());
    t.is(statSync(join(dir, 'xdg', 'smcscope')).mode & 0o777, 0o700);
    await t.throwsAsync(serveControl(b), { message: /is in use by another process/ });
    await s2.close();
    t.throws(() => statSync(s2.path), { code: 'ENOENT' }, 'close() removes the socket');
    // a socket file left by a killed process is replaced
    const path = defaultControlPath();
    const child = spawn(process.execPath, ['-e', `require('net').createServer().listen(${JSON.stringify(path)}, () => console.log('up'))`], { stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise<void>((r) => child.stdout.once('data', () => r()));
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
    t.true(statSync(path).isSocket(), 'stale socket left behind');
    const s3 = await serveControl(b);
    t.truthy(await queryControl(s3.path));
    await s3.close();
  } finally {
    if (old === undefined) delete process.env.XDG_RUNTIME_DIR; else process.env.XDG_RUNTIME_DIR = old;
  }
  delete process.env.XDG_RUNTIME_DIR;
  t.is(defaultControlPath(123), '/run/smcscope/123.sock');
  if (old !== undefined) process.env.XDG_RUNTIME_DIR = old;
  await t.throwsAsync(queryControl(join(dir, 'nope.sock')), { message: /no such socket/ });
});

/** smcdump as a child process, without blocking this process (it serves the control socket). */
async function smcdump(args: string[]): Promise<{ status: number; stdout: string; stderr: string }> {
  try {
    const compiled = join(ROOT, 'dist', 'cli', 'bin', 'smcdump.js');
    const cmd = import.meta.url.includes('/dist/') && existsSync(compiled) ? [compiled] : ['--import', 'tsx', join(ROOT, 'cli', 'bin', 'smcdump.ts')];
    const r = await promisify(execFile)(process.execPath, [...cmd, ...args], { encoding: 'utf8', cwd: ROOT });
    return { status: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (e) {
    const x = e as { code: number; stdout: string; stderr: string };
    return { status: x.code, stdout: x.stdout, stderr: x.stderr };
  }
}

test.serial('smcdump --endpoint SOCK --summary: the smcss-like view of the live endpoint', async (t) => {
  const r = await smcdump(['--endpoint', srv.path, '--summary']);
  t.is(r.status, 0, r.stderr);
  const lg = [...a.linkGroups][0]!;
  t.regex(r.stdout, new RegExp(`Endpoint pid ${process.pid} at `));
  t.regex(r.stdout, new RegExp(`│ ${lg.name} +│ client +│ v2\\.1 +│ ACTIVE `));
  t.regex(r.stdout, new RegExp(`│ ${lg.name}/L1 +│ ACTIVE +│ ${lg.links.get(1)!.port.gid.replace(/\./g, '\\.')} │ 0x${lg.links.get(1)!.qpn.toString(16)} `));
  t.regex(r.stdout, new RegExp(`│ ${lg.name}/\\d+ +│ [\\d.]+:\\d+ ↔ [\\d.]+:\\d+ +│ ACTIVE +│ 0x\\d+/0x\\d+ +│ L1:0x[0-9a-f]+@0x[0-9a-f]+ +│ \\d+ 0:20000 / 0:500`));
  const j = await smcdump(['--endpoint', srv.path, '--json']);
  t.is((JSON.parse(j.stdout) as { pid: number }).pid, process.pid);
  const e = await smcdump(['--endpoint', join(dir, 'none.sock')]);
  t.is(e.status, 1);
  t.regex(e.stderr, /^smcdump: control socket .*none\.sock: no such socket/);
});
