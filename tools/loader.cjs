'use strict';
// smcdump's start as a program (copied to dist/cli/bin/smcdump.cjs by tools/bundle.mjs; the
// bin's sh line runs it). It runs dist/cli/bin/smcdump.bundle.cjs, all of smcdump in one
// script, through vm.Script with V8's code cache made at build time: V8 skips parsing and
// compiling what the cache holds, including the functions a replay runs (docs/smcdump.md,
// "Start-up"). Any trouble with the cache (missing, corrupt, made from another bundle, another
// Node or other V8 flags) only costs the compile: the script runs without it.
//
// SMCSCOPE_BUNDLE=0          run the plain ES modules of dist/ instead (for comparisons)
// SMCSCOPE_CODE_CACHE=write  write the cache at exit (the build does, after a real run)
// SMCSCOPE_CODE_CACHE_FILE   another cache file, read or written (tests)

const { readFileSync, renameSync, writeFileSync } = require('node:fs');
const { join } = require('node:path');
const { Script } = require('node:vm');
const { crc32 } = require('node:zlib');

// Cache file: 'SMCc', CRC-32 of the bundle it was made from, CRC-32 of V8's data, V8's data.
// V8 checks its own version, flags and the source's length, not the source itself or (in
// release builds) every byte of its data: the two CRCs keep a cache of another bundle of the
// same length, or a damaged file, away from V8.
const MAGIC = 0x534d4363;
const HEAD = 12;

function plain() {
  return import('../smcdump.js').then((m) => m.run(process.argv));
}

function readCache(file, srcCrc) {
  let b;
  try { b = readFileSync(file); } catch { return undefined; }
  if (b.length <= HEAD || b.readUInt32BE(0) !== MAGIC || b.readUInt32BE(4) !== srcCrc) return undefined;
  const data = b.subarray(HEAD);
  return crc32(data) === b.readUInt32BE(8) ? data : undefined;
}

function writeCache(file, srcCrc, data) {
  const head = Buffer.alloc(HEAD);
  head.writeUInt32BE(MAGIC, 0);
  head.writeUInt32BE(srcCrc, 4);
  head.writeUInt32BE(crc32(data), 8);
  writeFileSync(`${file}.tmp`, Buffer.concat([head, data]));
  renameSync(`${file}.tmp`, file);
}

function main() {
  if (process.env.SMCSCOPE_BUNDLE === '0') return plain();
  const file = join(__dirname, 'smcdump.bundle.cjs');
  let src;
  try { src = readFileSync(file); } catch { return plain(); }
  const srcCrc = crc32(src);
  const cacheFile = process.env.SMCSCOPE_CODE_CACHE_FILE || join(__dirname, 'smcdump.cache');
  const write = process.env.SMCSCOPE_CODE_CACHE === 'write';
  const cachedData = write ? undefined : readCache(cacheFile, srcCrc);
  // Node's own CommonJS wrapper, on the first line so the bundle's line numbers stay right;
  // the bundle is ASCII (esbuild's charset), so latin1 is its text without a UTF-8 decode.
  const script = new Script(`(function (exports, require, module, __filename, __dirname) {${src.latin1Slice()}\n})`, { filename: file, cachedData });
  if (write) process.on('exit', () => writeCache(cacheFile, srcCrc, script.createCachedData()));
  const mod = { exports: {} };
  script.runInThisContext()(mod.exports, require, mod, file, __dirname);
  return mod.exports.run(process.argv);
}

main();
