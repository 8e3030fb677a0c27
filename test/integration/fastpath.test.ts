// The fast path (dissectors/fastpath.ts: reused objects, views) gives, frame by frame, what the
// full decoders give, on every frame of every bundled capture; and smcdump's outputs with it are
// those of the full path (with SMCDUMP_FASTPATH=1 the CLI uses it for one-line, -q, --summary).
import test from 'ava';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { openCaptureSync } from '../../capture/reader.js';
import { FrameDecoder, type DecodedFrame } from '../../dissectors/frame.js';
import { Tracker } from '../../dissectors/tracker/tracker.js';
import { ROOT } from '../helpers.js';

function bundled(): string[] {
  const dir = join(ROOT, 'pcaps');
  return readdirSync(dir).filter((f) => f.endsWith('.pcap') || f.endsWith('.pcapng')).map((f) => join(dir, f));
}

/** A frame as comparable text: bigints and bytes spelled out, keys sorted (the fast path's
 *  objects have one fixed key order), absent and undefined alike. */
function text(d: unknown): string {
  return JSON.stringify(d, (_k, v: unknown) => {
    if (typeof v === 'bigint') return `${v}n`;
    if (v instanceof Uint8Array) return Buffer.from(v).toString('hex');
    if (v && typeof v === 'object' && !Array.isArray(v)) {
      const o: Record<string, unknown> = {};
      for (const k of Object.keys(v).sort()) o[k] = (v as Record<string, unknown>)[k];
      return o;
    }
    return v;
  });
}

for (const icrc of [true, false]) {
  test(`fast path = full decode on every frame of every bundled capture (icrc ${icrc ? 'on' : 'off'})`, (t) => {
    let fast = 0, frames = 0;
    for (const path of bundled()) {
      const ra = openCaptureSync(path), rb = openCaptureSync(path);
      const full = new FrameDecoder({ icrc }), quick = new FrameDecoder({ icrc, reuse: true });
      const trFull = new Tracker(), trQuick = new Tracker();
      let prev: DecodedFrame | undefined;
      for (let fa = ra.next(), fb = rb.next(); fa && fb; fa = ra.next(), fb = rb.next()) {
        const a = full.decode(fa), b = quick.decode(fb);
        if (b === prev) fast++; // the same object twice in a row: the fast path's reused frame
        prev = b;
        frames++;
        const ta = text(a), tb = text(b);
        if (ta !== tb) { t.fail(`${path} frame ${a.n}:\n full ${ta}\n fast ${tb}`); return; }
        // the tracker sees the same thing either way
        const na = text(trFull.feed(a)), nb = text(trQuick.feed(b));
        if (na !== nb) { t.fail(`${path} frame ${a.n}: tracker notes differ: ${na} vs ${nb}`); return; }
      }
      ra.close(); rb.close();
    }
    t.true(frames > 5000, `${frames} frames`);
    t.true(fast > 1000, `${fast} frames took the fast path`);
  });
}

test('smcdump output is the same with and without the fast path (SMCDUMP_FASTPATH=1)', (t) => {
  t.timeout(600_000); // ~100 smcdump runs
  const bin = join(ROOT, 'dist', 'cli', 'bin', 'smcdump.js');
  const run = (args: string[], env: NodeJS.ProcessEnv): string => {
    const r = spawnSync(process.execPath, [bin, ...args], { encoding: 'utf8', env: { ...process.env, ...env, NO_COLOR: '1' }, maxBuffer: 1 << 28 });
    return `${r.status}\n${r.stdout}\n${r.stderr}`;
  };
  let compared = 0;
  for (const path of bundled()) {
    // -q's closing line is in the one-line run's stderr too; --summary --json has its own writer
    for (const args of [[], ['--summary'], ['--follow', '1'], ['--no-icrc', '-q', '--summary']]) {
      const a = run(['-r', path, ...args], {});
      const b = run(['-r', path, ...args], { SMCDUMP_FASTPATH: '1' });
      t.is(b, a, `${path} ${args.join(' ')}`);
      compared++;
    }
  }
  t.true(compared > 40);
});
