#!/bin/sh
//bin/true; f=${0%.js}.cjs; [ -f "$f" ] || f=$0; exec node --max-semi-space-size=8 --verify-snapshot-checksum "$f" "$@"
// The line above is for sh (to JavaScript it is a comment). Run as a program, smcdump starts
// Node with a young generation of at most 2 × 8 MiB instead of 2 × 16 MiB. Replaying 100 000
// connections (4.3 M frames) that keeps peak RSS about 20 MB lower at no measurable CPU cost
// (docs/smcdump.md, "Memory, round 3"); `node dist/cli/bin/smcdump.js` runs Node's defaults.
// --verify-snapshot-checksum: V8 checksums the code cache below when it makes it and rejects a
// damaged one instead of crashing on it (release builds do not check by default; ~1 ms).
// It starts the CommonJS loader beside this file (smcdump.cjs, made by tools/bundle.mjs: all of
// smcdump in one script with V8's code cache, docs/smcdump.md "Start-up") when there is one:
// directly when this file is run by its own path, through the lines below when through a link
// (an installed bin), the ES modules of dist/ when the build made no loader.
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';

if (process.env.SMCSCOPE_BUNDLE !== '0' && existsSync(new URL('smcdump.cjs', import.meta.url))) {
  createRequire(import.meta.url)('./smcdump.cjs');
} else {
  const { run } = await import('../smcdump.js');
  run(process.argv);
}
