'use strict';
// smcdump's start as a program (copied to dist/cli/bin/smcdump.cjs by tools/bundle.mjs; the
// bin's sh line runs it). It runs dist/cli/bin/smcdump.bundle.cjs, all of smcdump in one
// script, through vm.Script with V8's code cache made at build time: V8 skips parsing and
// compiling what the cache holds, including the functions a replay runs (docs/smcdump.md,
// "Start-up, round six"). Any trouble with the cache (missing, corrupt, made from another bundle, another
// Node or other V8 flags) only costs the compile: the script runs without it.
//
// SMCSCOPE_BUNDLE=0          run the plain ES modules of dist/ instead (for comparisons)
// SMCSCOPE_CODE_CACHE=write  write the cache at exit (the build does, after a real run)
// SMCSCOPE_CODE_CACHE=report say on stderr whether the cache was used, rejected or not there
// SMCSCOPE_CODE_CACHE_FILE   another cache file, read or written (tests)

const { readFileSync, renameSync, writeFileSync } = require('node:fs');
const { join } = require('node:path');
const { Script } = require('node:vm');

// What V8 checks of a cache: its own version, its flags and the source's length. Not the
// source's text: a cache made from another bundle of the same length would be taken (and run
// bytecode that does not match the source), so the cache starts with the bundle's id (the hash
// of its text that the build writes as its last line). Not its own bytes either, in release
// builds: a damaged cache crashes V8 in its deserializer, unless the process runs with
// --verify-snapshot-checksum (the bin's sh line: V8 then checksums the cache it makes and
// rejects one that does not match; no checksum here, which would load node:zlib and its streams
// for ~5 ms of a 90 ms --version).
const MAGIC = 'SMCc';
const ID_LINE = '//# smcdump-bundle-id ';
const ID_LEN = 40;
/** Magic, the id, padding: V8's data starts 8-byte aligned (else V8 copies it). */
const HEAD = 48;

function plain() {
  return import('../smcdump.js').then((m) => m.run(process.argv));
}

/** The bundle's id from its last line; '' when it has none. */
function bundleId(src) {
  const at = src.length - 1 - ID_LEN;
  if (at < ID_LINE.length || src.latin1Slice(at - ID_LINE.length, at) !== ID_LINE) return '';
  return src.latin1Slice(at, at + ID_LEN);
}

function readCache(file, id) {
  let b;
  try { b = readFileSync(file); } catch { return undefined; }
  if (id === '' || b.length <= HEAD || b.latin1Slice(0, MAGIC.length) !== MAGIC || b.latin1Slice(MAGIC.length, MAGIC.length + ID_LEN) !== id) return undefined;
  return b.subarray(HEAD);
}

function writeCache(file, id, data) {
  const head = Buffer.alloc(HEAD, ' ');
  head.write(MAGIC + id, 'latin1');
  writeFileSync(`${file}.tmp`, Buffer.concat([head, data]));
  renameSync(`${file}.tmp`, file);
}

function main() {
  if (process.env.SMCSCOPE_BUNDLE === '0') return plain();
  const file = join(__dirname, 'smcdump.bundle.cjs');
  let src;
  try { src = readFileSync(file); } catch { return plain(); }
  const id = bundleId(src);
  const cacheFile = process.env.SMCSCOPE_CODE_CACHE_FILE || join(__dirname, 'smcdump.cache');
  const write = process.env.SMCSCOPE_CODE_CACHE === 'write' && id !== '';
  const cachedData = write ? undefined : readCache(cacheFile, id);
  // Node's own CommonJS wrapper, on the first line so the bundle's line numbers stay right;
  // the bundle is ASCII (esbuild's charset), so latin1 is its text without a UTF-8 decode.
  const script = new Script(`(function (exports, require, module, __filename, __dirname) {${src.latin1Slice()}\n})`, { filename: file, cachedData });
  if (write) process.on('exit', () => writeCache(cacheFile, id, script.createCachedData()));
  if (process.env.SMCSCOPE_CODE_CACHE === 'report') process.stderr.write(`smcdump: code cache ${cachedData === undefined ? 'none' : script.cachedDataRejected ? 'rejected' : 'used'}\n`);
  const mod = { exports: {} };
  script.runInThisContext()(mod.exports, require, mod, file, __dirname);
  return mod.exports.run(process.argv);
}

main();
