// The tracker's compact form (smcdump -q / --summary / one-line) and its packed model objects
// (TcpState, SmcState, DirState) give the same summary, JSON and diagnosis as the full form, on
// every bundled capture; step times stay exact when frames lie further apart than a double holds.
import test from 'ava';
import { readdirSync } from 'node:fs';
import { Chalk } from 'chalk';
import { FrameDecoder } from '../../dissectors/frame.js';
import { Tracker } from '../../dissectors/tracker/tracker.js';
import { renderSummary, summaryJson } from '../../dissectors/render/summary.js';
import { jsonReplacer } from '../../dissectors/wire/common.js';
import type { CapturedFrame } from '../../capture/types.js';
import { PCAPS, pcapPath, readFrames } from '../helpers.js';

const plain = new Chalk({ level: 0 });

function track(frames: CapturedFrame[], compact: boolean): Tracker {
  const dec = new FrameDecoder({ icrc: false });
  const tr = new Tracker({ compact });
  for (const f of frames) tr.feed(dec.decode(f));
  tr.finish();
  return tr;
}

test('compact and full trackers give the same summary text and JSON on every bundled capture', async (t) => {
  const names = readdirSync(PCAPS).filter((n) => n.endsWith('.pcap'));
  t.true(names.length >= 10);
  for (const name of names) {
    const frames = await readFrames(pcapPath(name));
    const full = track(frames, false), compact = track(frames, true);
    t.is(JSON.stringify(summaryJson(compact), jsonReplacer), JSON.stringify(summaryJson(full), jsonReplacer), name);
    t.is(renderSummary(compact, plain, { width: Infinity }), renderSummary(full, plain, { width: Infinity }), name);
  }
});

test('the full tracker keeps the last cursor moves; the compact one drops only them', async (t) => {
  const frames = await readFrames(pcapPath('d-bulk-2MiB'));
  const full = track(frames, false), compact = track(frames, true);
  const fd = full.tcp[0]!.smc!.dirs[0], cd = compact.tcp[0]!.smc!.dirs[0];
  t.truthy(fd.lastProdMove);
  t.truthy(full.tcp[0]!.smc!.dirs[1].lastConsMove);
  t.is(cd.lastProdMove, undefined);
  t.deepEqual(cd.prod, fd.prod);
  t.deepEqual(cd.lastCdc, fd.lastCdc);
  t.true(fd.prodLinear > 2_000_000);
});

test('handshake steps keep exact nanosecond times across 200 days (beyond a double\'s 2^53 ns)', async (t) => {
  const frames = await readFrames(pcapPath('b-second-contact'));
  const far = 200n * 86_400n * 1_000_000_000n + 123n;
  // the later connections' frames moved 200 days on (a capture left running; the times stay in order)
  const half = Math.floor(frames.length / 2);
  const moved = frames.map((f, i) => (i < half ? f : { ...f, tsNs: f.tsNs + far }));
  const tr = track(moved, true);
  const byFrame = new Map(moved.map((f, i) => [i + 1, f.tsNs]));
  let steps = 0, late = 0;
  for (const c of tr.tcp) {
    for (const s of c.steps) {
      t.is(s.tsNs, byFrame.get(s.frame)!, `connection ${c.index} ${s.name} in frame ${s.frame}`);
      steps++;
      if (s.frame > half) late++;
    }
  }
  t.true(steps >= 16 && late > 0, `${steps} steps, ${late} after the jump`);
  t.is(tr.tcp[0]!.steps[0]!.name, 'SYN');
});
