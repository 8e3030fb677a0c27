// smcdump run as a program goes through one bundled script and V8's code cache (tools/bundle.mjs,
// tools/loader.cjs; docs/smcdump.md "Start-up, round six"). It must print exactly what the plain ES modules
// of dist/ print, on every bundled capture, and a cache that does not fit (damaged, of another
// bundle, made under other V8 flags, cut short) must only cost time: same output, no crash.

import test from 'ava';
import { execFile } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ROOT, PCAPS } from '../helpers.js';

const run = promisify(execFile);
const bin = join(ROOT, 'dist', 'cli', 'bin');
const program = join(bin, 'smcdump.js');
const cache = join(bin, 'smcdump.cache');
const built = import.meta.url.includes('/dist/') && existsSync(join(bin, 'smcdump.cjs')) && existsSync(cache);
const tmp = mkdtempSync(join(tmpdir(), 'smcdump-bundle-'));

interface Result { code: number; out: string; err: string; cache: string }

const REPORT = /^smcdump: code cache (used|rejected|none)\n/;

/** smcdump's stdout, stderr and exit code; `asProgram`: run by its path (the bin's sh line, the
 *  bundle), else `node dist/cli/bin/smcdump.js` (the ES modules). */
async function smcdump(args: string[], asProgram: boolean, env: Record<string, string> = {}): Promise<Result> {
  const file = asProgram ? program : process.execPath;
  const argv = asProgram ? args : [program, ...args];
  const opts = { cwd: ROOT, encoding: 'utf8' as const, maxBuffer: 256 << 20, env: { ...process.env, NO_COLOR: '', SMCSCOPE_CODE_CACHE: 'report', ...env } };
  let code = 0, out: string, err: string;
  try {
    ({ stdout: out, stderr: err } = await run(file, argv, opts));
  } catch (e) {
    const x = e as { code?: number; stdout?: string; stderr?: string };
    if (typeof x.code !== 'number') throw e;
    code = x.code; out = x.stdout ?? ''; err = x.stderr ?? '';
  }
  const m = REPORT.exec(err);
  return { code, out, err: m ? err.slice(m[0].length) : err, cache: m ? m[1]! : '' };
}

/** Every capture in pcaps/ (the bundled kernel captures and the external ones). */
const captures = [
  ...readdirSync(PCAPS).filter((f) => /\.pcap(ng)?$/.test(f)).map((f) => join(PCAPS, f)),
  ...readdirSync(join(PCAPS, 'external')).filter((f) => /\.pcap(ng)?$/.test(f)).map((f) => join(PCAPS, 'external', f)),
];
const MODES: [string, string[]][] = [['one-line', []], ['-q', ['-q']], ['--summary --json', ['--summary', '--json']]];

test('the bundled, cached entry prints what the ES modules print: every capture in pcaps/, one-line, -q, --summary --json', async (t) => {
  if (!built) { t.pass('runs from a built dist/ only'); return; }
  t.true(captures.length >= 10, `${captures.length} captures`);
  for (const [name, mode] of MODES) {
    for (const pcap of captures) {
      const args = [...mode, '-r', pcap];
      const [bundled, plain] = await Promise.all([smcdump(args, true), smcdump(args, false)]);
      const what = `${name} ${pcap.slice(PCAPS.length + 1)}`;
      t.is(bundled.cache, 'used', `${what}: the cache made at build time is used`);
      t.is(plain.cache, '', `${what}: node dist/cli/bin/smcdump.js runs the ES modules`);
      t.is(bundled.code, plain.code, what);
      t.true(bundled.out === plain.out, `${what}: stdout differs`);
      t.is(bundled.err, plain.err, what);
    }
  }
});

test('--version, --help and a bad option: same text and exit code from the bundle', async (t) => {
  if (!built) { t.pass('runs from a built dist/ only'); return; }
  for (const args of [['--version'], ['--help'], ['--no-such-option'], ['-r', join(tmp, 'missing.pcap')]]) {
    const [bundled, plain] = await Promise.all([smcdump(args, true), smcdump(args, false)]);
    t.is(bundled.cache, 'used');
    t.deepEqual({ code: bundled.code, out: bundled.out, err: bundled.err }, { code: plain.code, out: plain.out, err: plain.err }, args.join(' '));
  }
});

test('a cache that does not fit falls back to compiling: damaged, another bundle, other V8 flags, cut short, not there', async (t) => {
  if (!built) { t.pass('runs from a built dist/ only'); return; }
  const good = readFileSync(cache);
  const args = ['-r', join(PCAPS, 'a-first-contact.pcap')];
  const want = await smcdump(args, false);
  const cases: [string, Buffer, string][] = [];
  // bytes flipped inside V8's data at a few places (its header, early objects, the middle)
  for (const at of [60, 200, 5000, good.length >> 1]) {
    const b = Buffer.from(good);
    for (let i = 0; i < 16; i++) b[at + i]! ^= 0x5a;
    cases.push([`damaged at ${at}`, b, 'rejected']);
  }
  const other = Buffer.from(good);
  other.write('0000000000000000000000000000000000000000', 4, 'latin1');
  cases.push(['another bundle id', other, 'none']);
  cases.push(['cut short', good.subarray(0, good.length >> 1), 'rejected']);
  cases.push(['empty', Buffer.alloc(0), 'none']);
  cases.push(['not a cache', Buffer.from('hello, not a code cache at all, 48 bytes and more of it'), 'none']);
  // made by the same bundle under other V8 flags (V8 keeps a hash of its flags in the cache)
  const flagsFile = join(tmp, 'flags.cache');
  await run(process.execPath, ['--max-semi-space-size=4', '--verify-snapshot-checksum', join(bin, 'smcdump.cjs'), ...args], { cwd: ROOT, env: { ...process.env, SMCSCOPE_CODE_CACHE: 'write', SMCSCOPE_CODE_CACHE_FILE: flagsFile } });
  cases.push(['other V8 flags', readFileSync(flagsFile), 'rejected']);
  for (const [name, bytes, verdict] of cases) {
    const file = join(tmp, `${name.replace(/\W/g, '-')}.cache`);
    writeFileSync(file, bytes);
    const r = await smcdump(args, true, { SMCSCOPE_CODE_CACHE_FILE: file });
    t.is(r.cache, verdict, name);
    t.deepEqual({ code: r.code, out: r.out, err: r.err }, { code: want.code, out: want.out, err: want.err }, name);
  }
  const r = await smcdump(args, true, { SMCSCOPE_CODE_CACHE_FILE: join(tmp, 'no-such.cache') });
  t.is(r.cache, 'none');
  t.is(r.out, want.out);
  // the good cache copied elsewhere is still used (the id, not the place, ties it to the bundle)
  copyFileSync(cache, join(tmp, 'copy.cache'));
  t.is((await smcdump(args, true, { SMCSCOPE_CODE_CACHE_FILE: join(tmp, 'copy.cache') })).cache, 'used');
});
