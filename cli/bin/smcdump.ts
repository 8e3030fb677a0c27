#!/bin/sh
//bin/true; f=$0; case $f in */smcdump.js) [ -f "${f%.js}.cjs" ] && f=${f%.js}.cjs;; esac; exec node --max-semi-space-size=8 --interrupt-budget=135168 --verify-snapshot-checksum "$f" "$@"
// The line above is for sh (to JavaScript it is a comment). Run as a program, smcdump starts
// Node with a young generation of at most 2 × 8 MiB instead of 2 × 16 MiB. Replaying 100 000
// connections (4.3 M frames) that keeps peak RSS about 20 MB lower at no measurable CPU cost
// (docs/smcdump.md, "Memory, round 3"); `node dist/cli/bin/smcdump.js` runs Node's defaults.
// --interrupt-budget 2x V8's default (33 KiB of bytecode run before a function's next tier-up
// check): TurboFan compiles fewer functions, later, with more type feedback. On a 2,252-frame
// capture its compiles were most of the CPU time after start-up. Same-run medians against no
// flag (each side with its own cache): d-bulk one-line 0.77x, synthetic one-line 0.91x, -q 1.00x,
// but many connections -q 1.06-1.14x (per-connection handlers run a few hundred times and wait
// longer for TurboFan); 4x cost those 1.10-1.19x, so 2x is the compromise (docs/smcdump.md,
// "Start-up, round six").
// --verify-snapshot-checksum: V8 checksums the code cache below when it makes it and rejects a
// damaged one instead of crashing on it (release builds do not check by default; ~1 ms).
// With those flags (run as a program: by its path, through a link, from npm's bin) it starts the
// CommonJS loader beside this file (smcdump.cjs, made by tools/bundle.mjs: all of smcdump in one
// script with V8's code cache made under the same flags, docs/smcdump.md "Start-up, round six"): directly
// when run by its own path (the sh line picks it), through the lines below when through a link.
// `node dist/cli/bin/smcdump.js` (other flags: the cache would be rejected), SMCSCOPE_BUNDLE=0
// and a build without the loader run the ES modules of dist/.
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';

if (process.execArgv.includes('--verify-snapshot-checksum') && process.env.SMCSCOPE_BUNDLE !== '0' && existsSync(new URL('smcdump.cjs', import.meta.url))) {
  createRequire(import.meta.url)('./smcdump.cjs');
} else {
  const { run } = await import('../smcdump.js');
  run(process.argv);
}
