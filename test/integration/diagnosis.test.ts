// The diagnosis on the real kernel captures: clean captures get no error or warning, and the
// ways real captures differ from the protocol's order (a capture that ends before an answer,
// frames reordered at the capture point, a capture that starts mid-flow) raise no false alarm.
// The failure scenarios themselves are asserted on lab fixtures in failures.test.ts.
import test from 'ava';
import { FrameDecoder } from '../../dissectors/frame.js';
import { Tracker } from '../../dissectors/tracker/tracker.js';
import { diagnose } from '../../dissectors/tracker/diagnosis.js';
import type { CapturedFrame } from '../../capture/types.js';
import { KERNEL_CAPTURES, pcapPath, readFrames } from '../helpers.js';

function track(frames: CapturedFrame[]): Tracker {
  const dec = new FrameDecoder();
  const t = new Tracker();
  for (const f of frames) t.feed(dec.decode(f));
  t.finish();
  return t;
}

/** 1-based numbers of the frames whose LLC summary matches. */
function llcFrames(frames: CapturedFrame[], re: RegExp): number[] {
  const dec = new FrameDecoder();
  const hits: number[] = [];
  frames.forEach((f, i) => { if (dec.decode(f).smc.some((x) => x.proto === 'llc' && re.test(x.summary))) hits.push(i + 1); });
  return hits;
}

const serious = (t: Tracker): string[] => diagnose(t).filter((d) => d.severity !== 'info').map((d) => `${d.code}: ${d.message}`);

test('clean kernel captures: no diagnosis entry of severity error or warning', async (t) => {
  for (const name of KERNEL_CAPTURES) {
    const tr = track(await readFrames(pcapPath(name)));
    t.deepEqual(serious(tr), [], name);
    // …and the tables agree: no link lost or failed, no group failed.
    for (const g of tr.groups) {
      t.not(g.state, 'failed', name);
      t.true(g.links.every((l) => l.state !== 'lost' && l.state !== 'failed'), name);
    }
  }
});

test('the decline and the fallback are info entries with their one-sentence explanation', async (t) => {
  const c2 = diagnose(track(await readFrames(pcapPath('c2-fallback-server-decline'))));
  t.deepEqual(c2.map((d) => [d.code, d.severity]), [['clc.decline', 'info']]);
  t.regex(c2[0]!.message, /server declined 0x03030000 NOSMCDEV/);
  const c1 = diagnose(track(await readFrames(pcapPath('c1-fallback-tcp-server'))));
  t.deepEqual(c1.map((d) => [d.code, d.severity]), [['clc.fallback', 'info']]);
});

test('link group type and events on the first-contact capture: SINGLE, the same-device ADD LINK rejected', async (t) => {
  const tr = track(await readFrames(pcapPath('a-first-contact')));
  const g = tr.groups[0]!;
  t.deepEqual(g.types.map((x) => x.type), ['SINGLE']);
  t.deepEqual(g.events.map((e) => e.what), ['link-added', 'link-confirmed', 'link-added', 'link-rejected']);
  t.is(g.events[3]!.by, 'client');
});

test('a capture that ends before an LLC answer: a note, not a warning', async (t) => {
  const frames = await readFrames(pcapPath('a-first-contact'));
  const [req] = llcFrames(frames, /CONFIRM LINK v2 req/);
  const tr = track(frames.slice(0, req!));
  const nr = tr.anomalies.filter((a) => a.code === 'llc.no-response');
  t.is(nr.length, 1);
  t.is(nr[0]!.severity, 'note');
  t.deepEqual(serious(tr), []);
  // The link never came up inside this capture, but the capture stopped long before any timeout.
  const ne = diagnose(tr).find((d) => d.code === 'link.not-established');
  t.is(ne?.severity, 'info');
});

test('LLC responses reordered before their requests at the capture point still pair', async (t) => {
  const frames = await readFrames(pcapPath('a-first-contact'));
  for (const [reqRe, rspRe] of [[/CONFIRM LINK v2 req/, /CONFIRM LINK v2 rsp/], [/ADD LINK v2 req/, /ADD LINK v2 rsp/]] as const) {
    const [req] = llcFrames(frames, reqRe), [rsp] = llcFrames(frames, rspRe);
    const swapped = frames.slice();
    // Response first: each keeps its own timestamp (a capture point that stamps out of order).
    swapped[req! - 1] = frames[rsp! - 1]!;
    swapped[rsp! - 1] = frames[req! - 1]!;
    const tr = track(swapped);
    t.deepEqual(tr.anomalies.filter((a) => a.code === 'llc.no-response'), [], String(reqRe));
    t.is(tr.llc.reordered, 1, String(reqRe));
    t.deepEqual(serious(tr), [], String(reqRe));
  }
});

test('captures that start mid-flow: no false LLC alarms and no phantom link groups', async (t) => {
  for (const name of ['b-second-contact', 'd-bulk-2MiB', 'e-testlink-teardown']) {
    const frames = await readFrames(pcapPath(name));
    for (const cut of [0.3, 0.5, 0.7]) {
      const tr = track(frames.slice(Math.floor(frames.length * cut)));
      t.deepEqual(tr.anomalies.filter((a) => a.code === 'llc.no-response' && a.severity !== 'note'), [], `${name} from ${cut}`);
      t.true(tr.groups.length <= 1, `${name} from ${cut}: ${tr.groups.length} link groups`);
      t.deepEqual(serious(tr).filter((s) => !s.startsWith('rdma.retransmit')), [], `${name} from ${cut}`);
    }
  }
});

test('--follow names the bytes whose RDMA WRITE the capture lacks, with their offsets', async (t) => {
  const { renderFollow } = await import('../../cli/follow.js');
  const { Chalk } = await import('chalk');
  const frames = await readFrames(pcapPath('d-bulk-2MiB'));
  const dec = new FrameDecoder();
  // Drop the 10th RDMA WRITE ONLY/FIRST packet from a copy of the capture.
  const writes: number[] = [];
  frames.forEach((f, i) => { const d = dec.decode(f); if (d.roce?.ib.reth) writes.push(i); });
  const cut = frames.filter((_, i) => i !== writes[10]);
  const dec2 = new FrameDecoder();
  const tr = new Tracker({ follow: 1 });
  for (const f of cut) tr.feed(dec2.decode(f));
  tr.finish();
  let text = '';
  const closing = renderFollow(tr, 'text', 'c2s', new Chalk({ level: 0 }), (b) => { text += typeof b === 'string' ? b : ''; });
  const miss = tr.followed()!.dirs[0].stream!.missing;
  t.true(miss.length > 0);
  t.regex(text, /MISSING from the capture: \d+-\d+/);
  t.regex(closing, new RegExp(`${2 * 1024 * 1024 + 123} bytes .* of them missing from the capture \\(${miss[0]!.from}-${miss[0]!.to - 1}`));
});
