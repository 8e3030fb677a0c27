// The report's recorder keeps memory bounded: cursor points halved beyond MAX_POINTS (flagged
// points kept, the last kept), link buckets doubled beyond MAX_BUCKETS (counts preserved).
import test from 'ava';
import { FLAG_WB, MAX_BUCKETS, MAX_POINTS, ReportRecorder } from '../../dissectors/render/report/recorder.js';
import type { Tracker } from '../../dissectors/tracker/tracker.js';

 
function fakeTracker(): { t: Tracker; dirs: { prodLinear: number; consLinear: number }[]; link: any } {
  const dirs = [{ prodLinear: 0, consLinear: 0 }, { prodLinear: 0, consLinear: 0 }];
  const link: any = { name: 'LG1/L1', state: 'active', ends: [{ gid: '::ffff:10.0.0.1' }, { gid: '::ffff:10.0.0.2' }] };
  const t = { tcp: [{ smc: { index: 1, dirs } }], orphanConns: [], groups: [{ links: [link] }] } as unknown as Tracker;
  return { t, dirs, link };
}

test('cursor points: bounded, every change counted, flagged and last points kept', (t) => {
  const { t: tr, dirs } = fakeTracker();
  const rec = new ReportRecorder(tr);
  const n = MAX_POINTS * 3 + 17;
  for (let i = 1; i <= n; i++) {
    dirs[0]!.prodLinear = i * 100;
    dirs[0]!.consLinear = i * 100 - 50;
    (rec as any).cdcPoints(1, i * 1000, i % 5000 === 0 ? FLAG_WB : 0, 0);
  }
  const s = rec.conns.get(1)![0];
  t.is(s.seen, n);
  t.true(s.t.length <= MAX_POINTS, `${s.t.length} points kept`);
  t.true(s.t.length > MAX_POINTS / 4);
  t.is(s.prod[s.prod.length - 1], n * 100, 'the last point is kept');
  t.is(s.flags.filter((f) => f & FLAG_WB).length, Math.floor(n / 5000), 'every writer-blocked point is kept');
  for (let i = 1; i < s.t.length; i++) t.true(s.t[i]! > s.t[i - 1]!, 'time order kept');
});

test('link buckets: widened beyond MAX_BUCKETS, no packet lost', (t) => {
  const { t: tr } = fakeTracker();
  const rec = new ReportRecorder(tr);
  const frames = 50_000, spanNs = 100e9; // 100 s: 1 ms buckets would be 100 000
  let bytes = 0;
  for (let i = 0; i < frames; i++) {
    const d: any = { ip: { src: i % 3 ? '10.0.0.1' : '10.0.0.2' }, roce: { ib: { payload: { length: 1000 + (i % 7) } } } };
    bytes += 1000 + (i % 7);
    (rec as any).linkSample('LG1/L1', d, Math.floor((i / frames) * spanNs), i % 100 === 0 ? 'nak' : 'write', i % 50 === 0);
  }
  const l = rec.links.get('LG1/L1')!;
  t.true(l.pkts[0].length <= MAX_BUCKETS && l.pkts[1].length <= MAX_BUCKETS);
  t.true(l.bucketNs >= spanNs / MAX_BUCKETS);
  const sum = (a: number[][]): number => a.flat().reduce((x, y) => x + y, 0);
  t.is(sum(l.pkts), frames);
  t.is(sum(l.bytes), bytes);
  t.is(sum(l.retx), frames / 50);
  t.is(sum(l.naks), frames / 100);
  t.true(l.pkts[0].reduce((x, y) => x + y, 0) > l.pkts[1].reduce((x, y) => x + y, 0), 'directions told apart by the sender');
});
