// Build step after tsc (`npm run build`, `npm install`'s prepare): smcdump as one script with a
// V8 code cache, so a run as a program starts without resolving, reading and compiling ~100 ES
// modules one by one and without compiling lazily the functions a replay runs
// (docs/smcdump.md, "Start-up, round six").
//
//   dist/cli/bin/smcdump.bundle.cjs  dist/cli/smcdump.js and what it imports, as one CommonJS
//                                    script (esbuild); node_modules packages inside too
//   dist/cli/bin/smcdump.cjs         the loader the bin's sh line runs (a copy of tools/loader.cjs)
//   dist/cli/bin/smcdump.cache       V8's code cache of the bundle, made by a real run of the bin
//                                    on a bundled capture (bytecode of what a replay runs)
//
// Tests import dist/ modules as before; `SMCSCOPE_BUNDLE=0` runs the plain modules.
import { build } from 'esbuild';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { appendFileSync, copyFileSync, existsSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { generateViews } from './views.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const bin = join(root, 'dist/cli/bin');
const bundle = join(bin, 'smcdump.bundle.cjs');
const cache = join(bin, 'smcdump.cache');

// `import.meta.url` has no meaning in a CommonJS bundle: each module's own URL (its file in
// dist/, where the native addons, chalk and the report's assets are found from) is rebuilt
// from the bundle's __dirname and the module's path relative to it.
const metaUrl = {
  name: 'import-meta-url',
  setup(b) {
    b.onLoad({ filter: /\.js$/ }, (args) => {
      const text = readFileSync(args.path, 'utf8');
      if (!text.includes('import.meta.url')) return undefined;
      const rel = JSON.stringify(relative(bin, args.path));
      return { contents: text.replaceAll('import.meta.url', `__smcModuleUrl(${rel})`), loader: 'js' };
    });
  },
};

// commander requires node:child_process (with net, dgram and their streams: ~5 ms) only to
// run a subcommand's executable, which smcdump never has: the module is required when spawn
// is first called.
const COMMANDER_CP = "const childProcess = require('node:child_process');";
const lazyChildProcess = {
  name: 'lazy-child-process',
  setup(b) {
    b.onLoad({ filter: /commander[\\/]lib[\\/]command\.js$/ }, (args) => {
      const text = readFileSync(args.path, 'utf8');
      if (!text.includes(COMMANDER_CP)) {
        process.emitWarning(`tools/bundle.mjs: ${args.path} has no "${COMMANDER_CP}" any more: node:child_process loads at start-up`);
        return undefined;
      }
      return { contents: text.replace(COMMANDER_CP, 'const childProcess = { spawn: (...a) => require("node:child_process").spawn(...a) };'), loader: 'js' };
    });
  },
};

await generateViews();

await build({
  entryPoints: [join(root, 'dist/cli/smcdump.js')],
  outfile: bundle,
  bundle: true,
  platform: 'node',
  format: 'cjs',
  target: 'node20',
  charset: 'ascii', // one-byte source: read as latin1 without decoding UTF-8
  legalComments: 'none',
  logLevel: 'error',
  banner: { js: "const __smcModuleUrl = (rel) => require('node:url').pathToFileURL(require('node:path').join(__dirname, rel)).href;" },
  plugins: [metaUrl, lazyChildProcess],
});
// The bundle's id (the hash of its text) as its last line: the cache is made for this text only
// (tools/loader.cjs reads the id back and compares it with the cache's).
appendFileSync(bundle, `//# smcdump-bundle-id ${createHash('sha1').update(readFileSync(bundle)).digest('hex')}\n`);
copyFileSync(join(root, 'tools/loader.cjs'), join(bin, 'smcdump.cjs'));

// The cache: the bin run as a program (its sh line's Node flags are part of what V8 checks) on
// a capture with CLC, LLC, CDC and RDMA traffic, one-line; the loader writes the cache at exit
// (its stderr is in the error when the run fails, which fails the build: a bin that cannot
// replay a bundled capture is broken).
rmSync(cache, { force: true });
const capture = join(root, 'pcaps/d-bulk-2MiB.pcap');
if (existsSync(capture)) {
  // the build's own environment must not move the cache or turn the bundle off
  const env = { ...process.env, SMCSCOPE_CODE_CACHE: 'write' };
  delete env.SMCSCOPE_CODE_CACHE_FILE;
  delete env.SMCSCOPE_BUNDLE;
  execFileSync(join(bin, 'smcdump.js'), ['-r', capture], { env, stdio: ['ignore', 'ignore', 'pipe'] });
}
