// smcdump as a user runs it: a real process, real files, exit codes, one-line errors.
import test from 'ava';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT, pcapPath } from '../helpers.js';

// From dist/ (npm test) run the compiled command; under tsx run the source.
const compiled = join(ROOT, 'dist', 'cli', 'bin', 'smcdump.js');
const fromDist = import.meta.url.includes('/dist/') && existsSync(compiled);
const cmd = fromDist ? [compiled] : ['--import', 'tsx', join(ROOT, 'cli', 'bin', 'smcdump.ts')];

function smcdump(args: string[], env: Record<string, string> = {}): { code: number | null; out: string; err: string } {
  const r = spawnSync(process.execPath, [...cmd, ...args], { encoding: 'utf8', env: { ...process.env, ...env }, cwd: ROOT });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

test('one line per frame, SMC summaries, closing summary on stderr', (t) => {
  const r = smcdump(['-r', pcapPath('a-first-contact')]);
  t.is(r.code, 0);
  const lines = r.out.trimEnd().split('\n');
  t.is(lines.length, 45);
  t.regex(lines[5]!, /^ +6 \d\d:\d\d:\d\d\.\d{6} 10\.55\.0\.1\.34608 > 10\.55\.0\.2\.12345: CLC Proposal v2 .*SMC-LAB-UEID/);
  t.regex(lines[7]!, /CLC Accept v2 SMC-R first-contact QP 0x11 rkey 0x3d3 token 0x1 buf 64KiB mtu 1024/);
  t.regex(lines[11]!, /RoCEv2 SEND ONLY QP 0x11 .*LLC CONFIRM LINK v2 req link 1/);
  t.regex(lines[19]!, /RDMA WRITE ONLY QP 0x11 psn \d+ va 0xff2b28d5447b0000 rkey 0x3d3 len 54/);
  t.regex(lines[20]!, /CDC seq 1 token 0x0*1 prod 0:54 cons 0:0/);
  t.regex(r.err, /^45 frames; SMC: 2 tcpopt, 3 clc, 8 llc, 5 cdc, 2 rdma; 1 issues \(0 errors\)\n$/);
  t.false(r.out.includes('\u001b['), 'no colour when stdout is not a terminal');
});

test('--only, -c, --json, -V, --time', (t) => {
  const clc = smcdump(['-r', pcapPath('a-first-contact'), '--only', 'clc,llc']);
  t.is(clc.out.trimEnd().split('\n').length, 3 + 8);
  const c5 = smcdump(['-r', pcapPath('d-bulk-2MiB'), '-c', '5']);
  t.is(c5.out.trimEnd().split('\n').length, 5);
  t.regex(c5.err, /^5 frames/);
  const json = smcdump(['-r', pcapPath('c2-fallback-server-decline'), '--json', '--only', 'clc']);
  const objs = json.out.trimEnd().split('\n').map((l) => JSON.parse(l) as { frame: number; time: string; smc: Array<{ proto: string; value: { type: string; diagnosis?: number } }> });
  t.deepEqual(objs.map((o) => o.smc[0]!.value.type), ['proposal', 'decline']);
  t.is(objs[1]!.smc[0]!.value.diagnosis, 0x03030000);
  t.regex(objs[0]!.time, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z$/);
  const tree = smcdump(['-r', pcapPath('a-first-contact'), '-V', '-c', '12', '--only', 'llc']);
  t.regex(tree.out, /link user id: 0x00000101 \[84-87\]/);
  t.regex(tree.out, /0000  52 54 00 55 00 0a 52 54  00 55 00 0b 08 00 45 00  RT\.U\.\.RT\.U\.\.\.\.E\./);
  const epoch = smcdump(['-r', pcapPath('a-first-contact'), '-c', '1', '--time', 'epoch']);
  t.regex(epoch.out, /^ +1 \d{10}\.\d{6} /);
});

test('errors are one line and a non-zero exit, never a stack trace', (t) => {
  const missing = smcdump(['-r', '/nonexistent/x.pcap']);
  t.is(missing.code, 1);
  t.is(missing.err, 'smcdump: cannot open /nonexistent/x.pcap: no such file or directory\n');
  const notPcap = smcdump(['-r', join(ROOT, 'README.md')]);
  t.is(notPcap.code, 1);
  t.regex(notPcap.err, /^smcdump: not a pcap or pcapng file \(magic 0x[0-9a-f]+\)\n$/);
  const dir = mkdtempSync(join(tmpdir(), 'smcdump-'));
  const empty = join(dir, 'empty.pcap');
  writeFileSync(empty, new Uint8Array(0));
  const e = smcdump(['-r', empty]);
  t.is(e.code, 1);
  t.is(e.err.split('\n').length, 2);
  const bad = smcdump(['-r', pcapPath('a-first-contact'), '--only', 'http']);
  t.is(bad.code, 2);
  t.regex(bad.err, /^smcdump: .*unknown protocol "http"/);
  t.is(bad.err.split('\n').length, 2);
  const none = smcdump([]);
  t.is(none.code, 2, 'no input is a usage error');
  t.regex(none.err, /no input/);
  for (const r of [missing, notPcap, e, bad, none]) t.false(/\n\s+at /.test(r.err), 'stack trace');
});

test('--help teaches with examples', (t) => {
  const h = smcdump(['--help']);
  t.is(h.code, 0);
  t.regex(h.out, /Examples:/);
  t.regex(h.out, /--only/);
});

test('a truncated or corrupt file: the frames before the damage, the summary, one line saying where, exit 1', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'smcdump-'));
  const full = readFileSync(pcapPath('a-first-contact'));
  const cut = (name: string, b: Uint8Array): string => { const p = join(dir, name); writeFileSync(p, b); return p; };
  // pcap cut inside its last record
  const r = smcdump(['-r', cut('cut.pcap', full.subarray(0, full.length - 30))]);
  t.is(r.code, 1);
  t.is(r.out.trimEnd().split('\n').length, 44);
  t.regex(r.err, /^44 frames; SMC: .*\nsmcdump: truncated record at byte \d+: \d+ of \d+ bytes present \(the file is cut short\); the 44 frames before it were read\n$/);
  // the same frames as pcapng (written by smcdump -w), cut inside the last block
  const ng = join(dir, 'a.pcapng');
  t.is(smcdump(['-r', pcapPath('a-first-contact'), '-w', ng, '-q']).code, 0);
  const ngb = readFileSync(ng);
  const rn = smcdump(['-r', cut('cut.pcapng', ngb.subarray(0, ngb.length - 10))]);
  t.is(rn.code, 1);
  t.is(rn.out.trimEnd().split('\n').length, 44);
  t.regex(rn.err, /\nsmcdump: truncated block at byte \d+/);
  // a pcapng whose section header is cut: nothing to show, still one line and exit 1
  const rh = smcdump(['-r', cut('head.pcapng', ngb.subarray(0, 20))]);
  t.is(rh.code, 1);
  t.is(rh.out, '');
  t.regex(rh.err, /^0 frames; .*\nsmcdump: truncated section header at byte 0/);
  // a corrupt block length in the middle: frames before it, then the damage
  const bad = Buffer.from(ngb);
  let o = 0, k = 0;
  while (k < 20) { const len = bad.readUInt32LE(o + 4); if (bad.readUInt32LE(o) === 6) k++; o += len; }
  bad.writeUInt32LE(7, o + 4); // a block length that is not a multiple of 4
  const rc = smcdump(['-r', cut('corrupt.pcapng', bad)]);
  t.is(rc.code, 1);
  t.is(rc.out.trimEnd().split('\n').length, 20);
  t.regex(rc.err, /^20 frames; .*\nsmcdump: corrupt block at byte \d+: type 0x00000006 length 7; the 20 frames before it were read\n$/);
  for (const x of [r, rn, rh, rc]) t.false(/\n\s+at /.test(x.err), 'stack trace');
});

// serial: the other tests here block this worker's event loop in spawnSync, and a SIGINT timer
// that fires only after smcdump has finished the file would test nothing
test.serial('Ctrl-C during -r: --summary prints what was read so far; plain -r stops with the closing summary', async (t) => {
  // 315,000 frames (the first-contact records over and over): several seconds of work
  const dir = mkdtempSync(join(tmpdir(), 'smcdump-'));
  const src = readFileSync(pcapPath('a-first-contact'));
  const big = join(dir, 'big.pcap');
  writeFileSync(big, Buffer.concat([src.subarray(0, 24), ...new Array<Buffer>(7000).fill(src.subarray(24))]));
  // SIGINT once smcdump is reading (its first output: the forced progress bar, or with -l the
  // first line), not while Node is still starting (that would be the default action).
  const interrupted = (args: string[], readyOn: 'stdout' | 'stderr'): Promise<{ code: number | null; out: string; err: string }> => new Promise((res) => {
    const p = spawn(process.execPath, [...cmd, '-r', big, ...args], { cwd: ROOT });
    let out = '', err = '', sent = false;
    const ready = (): void => { if (!sent) { sent = true; setTimeout(() => p.kill('SIGINT'), 200); } };
    p.stdout.on('data', (d: Buffer) => { out += d.toString(); if (readyOn === 'stdout') ready(); });
    p.stderr.on('data', (d: Buffer) => { err += d.toString(); if (readyOn === 'stderr') ready(); });
    // the bar is erased with '\r': keep what follows
    p.on('close', (code) => res({ code, out, err: err.slice(err.lastIndexOf('\r') + 1) }));
  });
  const s = await interrupted(['--summary', '--progress'], 'stderr');
  t.is(s.code, 0, s.err);
  const n = Number(/^(\d+) frames; .* \(interrupted\)\n/.exec(s.err)?.[1]);
  t.true(n > 0 && n < 315_000, `interrupted after ${n} frames: ${JSON.stringify(s.err)}`);
  t.regex(s.out, /^\d+ frames over [\d.]+m?s: \d+ TCP connection/);
  t.regex(s.out, /Link groups/);
  const p = await interrupted(['--no-track', '-l'], 'stdout');
  t.is(p.code, 0, p.err);
  const m = Number(/^(\d+) frames; .* \(interrupted\)\n$/.exec(p.err)?.[1]);
  t.true(m > 0 && m < 315_000, `interrupted after ${m} frames`);
  t.is(p.out.trimEnd().split('\n').length, m, 'every frame counted was printed');
});

test('--ladder-svg is checked before anything is read; --version', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'smcdump-'));
  for (const [path, why] of [['/nonexistent/dir/l.svg', /no such directory/], [dir, /is a directory/]] as const) {
    const r = smcdump(['-r', pcapPath('a-first-contact'), '--ladder-svg', path]);
    t.is(r.code, 1);
    t.is(r.out, '', 'no frames printed before the error');
    t.regex(r.err, new RegExp(`^smcdump: --ladder-svg ${path}: ${why.source}[^\n]*\n$`));
  }
  const v = smcdump(['--version']);
  t.is(v.code, 0);
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
  t.is(v.out.split('\n')[0], `smcdump ${pkg.version} (smcscope)`);
  t.regex(v.out.split('\n')[1]!, /^libpcap version \d/);
});

test('--summary, --follow, --ladder: reports rebuilt from the wire', (t) => {
  const s = smcdump(['-r', pcapPath('b-second-contact'), '--summary']);
  t.is(s.code, 0);
  t.regex(s.out, /4 TCP connection\(s\), 1 link group\(s\), 0 anomalies/);
  t.regex(s.out, /LG1\/L1 .* qp 0x11 .* qp 0x11/);
  t.regex(s.err, /^171 frames; SMC:/);
  const js = JSON.parse(smcdump(['-r', pcapPath('c2-fallback-server-decline'), '--summary', '--json']).out) as { connections: Array<{ mode: string; why: string; fallbackCode: number }> };
  t.deepEqual([js.connections[0]!.mode, js.connections[0]!.fallbackCode], ['fallback', 0x03030000]);
  t.regex(js.connections[0]!.why, /^server declined 0x03030000 NOSMCDEV/);

  const f = smcdump(['-r', pcapPath('a-first-contact'), '--follow', '10.55.0.2:12345-10.55.0.1:34608']);
  t.is(f.code, 0);
  t.regex(f.out, /\nSMC-R lab first contact: hello from guest A 0123456789\n/);
  t.regex(f.out, /\nACK 54 fnv1a=b5ca2d80\n/);
  t.regex(f.err, /connection 1: 54 bytes 10\.55\.0\.1:34608 → 10\.55\.0\.2:12345; 22 bytes/);
  const raw = spawnSync(process.execPath, [...cmd, '-r', pcapPath('d-bulk-2MiB'), '--follow', '1', '--follow-dir', 'c2s', '--follow-format', 'raw'], { cwd: ROOT, maxBuffer: 64 << 20 });
  t.is(raw.status, 0);
  t.is((raw.stdout as Buffer).length, 2 * 1024 * 1024 + 123);
  // A fallback is followed in its TCP payload after the CLC exchange (guest logs: 30 bytes sent, "ACK 30 fnv1a=2c19b33b").
  const fb = smcdump(['-r', pcapPath('c2-fallback-server-decline'), '--follow', '1']);
  t.is(fb.code, 0);
  t.regex(fb.out, /\nfallback test: server declines\n/);
  t.regex(fb.out, /\nACK 30 fnv1a=2c19b33b\n/);
  t.regex(fb.err, /connection 1 \(fallback, TCP payload\): 30 bytes 10\.55\.0\.1:54306 → 10\.55\.0\.2:12345; 22 bytes/);
  const none = smcdump(['-r', pcapPath('c2-fallback-server-decline'), '--follow', '7']);
  t.is(none.code, 1);
  t.regex(none.err, /^smcdump: no connection matches --follow; connections in this capture: 1 \(10\.55\.0\.1:54306-10\.55\.0\.2:12345 fallback\)\n$/);
  const bad = smcdump(['-r', pcapPath('a-first-contact'), '--follow', 'x']);
  t.is(bad.code, 1);

  const dir = mkdtempSync(join(tmpdir(), 'smcdump-'));
  const svg = join(dir, 'l.svg');
  const l = smcdump(['-r', pcapPath('a-first-contact'), '--ladder', '--ladder-svg', svg]);
  t.is(l.code, 0);
  t.regex(l.out, /│<═+ LLC CONFIRM LINK v2 req ═+│/);
  t.regex(readFileSync(svg, 'utf8'), /^<svg /);
});

test('frames carry their link, connection and anomalies', (t) => {
  const r = smcdump(['-r', pcapPath('e-testlink-teardown'), '--issues']);
  t.is(r.code, 0);
  t.regex(r.out, /LLC DELETE LINK v2 req ALL reason 0x00030000 .* \[LG1\/L1\] \{roce\.retransmission\}/);
  t.regex(r.err, /\n14 anomalies \(0 errors, 0 warnings, 14 notes\): --summary lists them\n$/);
  const line = smcdump(['-r', pcapPath('a-first-contact'), '-c', '21']).out.trimEnd().split('\n');
  t.regex(line[20]!, /CDC seq 1 .* \[LG1\/L1 c1 c>s\]$/);
  t.regex(line[11]!, /LLC CONFIRM LINK v2 req .* \[LG1\/L1\]$/, 'the CONFIRM LINK that names the link already carries its name');
  t.regex(line[5]!, /CLC Proposal .* \[c1 pending\]$/);
  const plain = smcdump(['-r', pcapPath('a-first-contact'), '-c', '21', '--no-track']).out.trimEnd().split('\n');
  t.false(plain[20]!.includes('[LG1'));
});
