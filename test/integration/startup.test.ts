// What smcdump loads at start-up: a module hook in a real smcdump process lists every file it
// loads. A plain one-line replay must not load what only other modes use (start-up is most of
// the CPU time of a small capture's replay); the modes that need them must still load them.

import test from 'ava';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { ROOT, pcapPath } from '../helpers.js';

const compiled = join(ROOT, 'dist', 'cli', 'bin', 'smcdump.js');
const fromDist = import.meta.url.includes('/dist/') && existsSync(compiled);

// A loader hook that names each file an ES `import` loads (for a package imported from ES code,
// e.g. cli-table3, its entry file; a require() inside CommonJS is not seen).
const dir = mkdtempSync(join(tmpdir(), 'smcdump-startup-'));
// The hook runs on the loader's own thread: it appends each name to a file synchronously (a
// write to stderr from there can be lost when the process exits first).
writeFileSync(join(dir, 'hooks.mjs'), "import { appendFileSync } from 'node:fs';\nexport async function load(url, ctx, next) { if (url.startsWith('file:')) appendFileSync(process.env.SMCDUMP_LOADED, url + '\\n'); return next(url, ctx); }\n");
writeFileSync(join(dir, 'register.mjs'), `import { register } from 'node:module';\nregister(${JSON.stringify(pathToFileURL(join(dir, 'hooks.mjs')).href)});\n`);

let calls = 0;

/** The files a real smcdump process loads for `args`. */
function loaded(args: string[]): string[] {
  const log = join(dir, `loaded-${calls++}.txt`);
  writeFileSync(log, '');
  const r = spawnSync(process.execPath, ['--import', pathToFileURL(join(dir, 'register.mjs')).href, compiled, ...args], { encoding: 'utf8', cwd: ROOT, env: { ...process.env, NO_COLOR: '', SMCDUMP_LOADED: log } });
  if (r.status !== 0) throw new Error(`smcdump ${args.join(' ')} exited ${r.status}: ${r.stderr.slice(-400)}`);
  return readFileSync(log, 'utf8').split('\n').filter((l) => l !== '');
}

const ONLY_FOR_OTHER_MODES = [
  /\/render\/summary\.js$/, /\/render\/table\.js$/, /\/render\/ladder\.js$/, /\/render\/verbose\.js$/, /\/render\/json\.js$/,
  /\/render\/report\//, /\/cli\/follow\.js$/, /\/cli\/report\.js$/, /\/cli\/statejoin\.js$/, /\/cli\/state\.js$/,
  /\/endpoint\/control\.js$/, /\/capture\/live\.js$/, /\/capture\/writer\.js$/, /\/render\/hexdump\.js$/,
  /\/node_modules\/cli-table3\//, /\/node_modules\/chalk\//,
];

test('a one-line replay loads none of the report, state, live-capture, writer or colour modules', (t) => {
  if (!fromDist) { t.pass('runs from dist/ only'); return; }
  const files = loaded(['-r', pcapPath('a-first-contact')]);
  t.true(files.some((f) => f.endsWith('/dissectors/frame.js')), 'the hook sees the decoder');
  for (const re of ONLY_FOR_OTHER_MODES) t.deepEqual(files.filter((f) => re.test(f)), [], String(re));
  t.true(files.length < 60, `${files.length} files`);
});

test('the modes that need them still load them: --summary, -X -e, -w', (t) => {
  if (!fromDist) { t.pass('runs from dist/ only'); return; }
  const summary = loaded(['-r', pcapPath('a-first-contact'), '--summary']);
  t.true(summary.some((f) => f.endsWith('/render/summary.js')));
  t.true(summary.some((f) => f.endsWith('/render/table.js')));
  const hex = loaded(['-r', pcapPath('a-first-contact'), '-X', '-e', '-c', '3']);
  t.true(hex.some((f) => f.endsWith('/render/hexdump.js')));
  t.true(hex.some((f) => f.endsWith('/render/linkhdr.js')));
  const w = loaded(['-r', pcapPath('a-first-contact'), '-q', '-w', join(dir, 'copy.pcapng')]);
  t.true(w.some((f) => f.endsWith('/capture/writer.js')));
});
