// Tracker round 6 (docs/smcdump.md): a compact tracker takes clean ACKs and in-order RDMA WRITE
// MIDDLE/LAST frames on a cached link by a short path (fastRoce). It must say and build exactly
// what the general path says and builds, frame by frame, and let the general path have every
// frame it does not fully know: a PSN out of order, a retransmission, a frame lost from the
// capture, a link that appears mid-stream or again in a later copy, a capture without its
// handshake. Each case is a real capture changed the way a capture point changes it.
import test from 'ava';
import { readdirSync } from 'node:fs';
import { FrameDecoder } from '../../dissectors/frame.js';
import { Tracker } from '../../dissectors/tracker/tracker.js';
import { summaryJson } from '../../dissectors/render/summary.js';
import { jsonReplacer } from '../../dissectors/wire/common.js';
import type { CapturedFrame } from '../../capture/types.js';
import { PCAPS, pcapPath, readFrames } from '../helpers.js';

interface Run { notes: string[]; model: string; anomalies: string; fast: number }

/** Feed `frames` into a compact tracker with or without the short path: every frame's note
 *  (with the link and direction the tracker names for it), the summary JSON and the anomalies. */
function run(frames: CapturedFrame[], fastPath: boolean): Run {
  const dec = new FrameDecoder({ icrc: false, reuse: true, summaries: false });
  const tr = new Tracker({ compact: true, reuseNote: true, fastPath });
  const notes: string[] = [];
  for (const f of frames) {
    const n = tr.feed(dec.decode(f));
    notes.push(`${JSON.stringify(n, jsonReplacer)} ${tr.frameLink?.name ?? '-'} ${tr.frameDir}`);
  }
  tr.finish();
  return {
    notes, model: JSON.stringify(summaryJson(tr), jsonReplacer), fast: tr.fastFrames,
    anomalies: JSON.stringify([tr.anomalyCount, tr.anomalies, [...tr.anomalyTotals.values()]], jsonReplacer),
  };
}

/** Both paths over `frames`: the same notes, model and anomalies; how many the short path took. */
function same(t: import('ava').ExecutionContext, frames: CapturedFrame[], what: string): number {
  const fast = run(frames, true), slow = run(frames, false);
  t.is(slow.fast, 0, `${what}: no short path when switched off`);
  for (let i = 0; i < frames.length; i++) if (fast.notes[i] !== slow.notes[i]) { t.is(fast.notes[i], slow.notes[i], `${what}: frame ${i + 1}`); break; }
  t.is(fast.model, slow.model, `${what}: model`);
  t.is(fast.anomalies, slow.anomalies, `${what}: anomalies`);
  return fast.fast;
}

/** Index of the `k`-th frame (0-based) whose BTH opcode is `op`, after frame `from`. */
function nthOp(frames: CapturedFrame[], op: number, k: number, from = 0): number {
  const dec = new FrameDecoder({ icrc: false });
  let seen = 0;
  for (let i = 0; i < frames.length; i++) {
    const d = dec.decode(frames[i]!);
    if (i >= from && d.roce?.ib.bth.opcode === op && seen++ === k) return i;
  }
  throw new Error(`no opcode ${op} #${k}`);
}

const WRITE_FIRST = 0x06, WRITE_MIDDLE = 0x07, ACK = 0x11;

test('every bundled capture: the short path and the general one give the same notes, model and anomalies', async (t) => {
  const names = readdirSync(PCAPS).filter((n) => n.endsWith('.pcap'));
  t.true(names.length >= 10);
  let fast = 0;
  for (const name of names) fast += same(t, await readFrames(pcapPath(name)), name);
  t.true(fast > 2000, `${fast} frames took the short path`);
});

test('d-bulk: most data frames take the short path; changed copies of it fall back where they must', async (t) => {
  const bulk = await readFrames(pcapPath('d-bulk-2MiB'));
  const base = same(t, bulk, 'as captured');
  t.true(base > 2000, `${base} of ${bulk.length} frames`);
  const mid = nthOp(bulk, WRITE_MIDDLE, 200);
  // two WRITE MIDDLEs swapped (reordered at the capture point): a gap, then a late PSN
  const swapped = [...bulk];
  [swapped[mid], swapped[mid + 1]] = [swapped[mid + 1]!, swapped[mid]!];
  t.true(same(t, swapped, 'reordered') < base);
  // a WRITE MIDDLE captured twice: the second is a retransmission
  const twice = [...bulk.slice(0, mid + 1), bulk[mid]!, ...bulk.slice(mid + 1)];
  t.true(same(t, twice, 'retransmitted') <= base);
  // a WRITE MIDDLE missing from the capture: a PSN gap, the rest of its WRITE in order again
  const lost = [...bulk.slice(0, mid), ...bulk.slice(mid + 1)];
  t.true(same(t, lost, 'lost') < base);
  // a WRITE FIRST missing: its MIDDLEs and LAST belong to no placed WRITE (not the one before)
  const first = nthOp(bulk, WRITE_FIRST, 5);
  t.true(same(t, [...bulk.slice(0, first), ...bulk.slice(first + 1)], 'WRITE FIRST lost') < base);
  // an ACK missing and one duplicated: ACKs carry no PSN rule, both paths agree
  const ack = nthOp(bulk, ACK, 10);
  same(t, [...bulk.slice(0, ack), ...bulk.slice(ack + 1)], 'ACK lost');
  same(t, [...bulk.slice(0, ack + 1), bulk[ack]!, ...bulk.slice(ack + 1)], 'ACK twice');
  // the capture begins in the middle of a WRITE (no handshake, no WRITE FIRST): learned links,
  // MIDDLEs whose WRITE is not placed
  same(t, bulk.slice(mid), 'mid-stream');
});

test('a capture repeated: new groups and links on the same addresses and QPNs mid-stream, and frames of two copies interleaved', async (t) => {
  const bulk = await readFrames(pcapPath('d-bulk-2MiB'));
  const first = await readFrames(pcapPath('a-first-contact'));
  // the same hosts and QPNs again after the first copy: the link cache must not answer the old link
  const again = [...bulk, ...first, ...bulk];
  t.true(same(t, again, 'repeated') > 0);
  // a new link group's handshake in the middle of another's bulk transfer
  const mid = nthOp(bulk, WRITE_MIDDLE, 300);
  same(t, [...bulk.slice(0, mid), ...first, ...bulk.slice(mid)], 'handshake inside a WRITE');
});
