// A decoder told to reuse its per-layer records (smcdump's one-line, -q and --summary path)
// decodes every frame of every bundled capture to the same values as a fresh-object decoder,
// as long as each frame is read before the next decode; and it does refill one record. Without
// the items' summaries (-q, --summary) the frames differ in those texts only.
import test from 'ava';
import { readdirSync } from 'node:fs';
import { FrameDecoder } from '../../dissectors/frame.js';
import { jsonReplacer } from '../../dissectors/wire/common.js';
import { Tracker } from '../../dissectors/tracker/tracker.js';
import { summaryJson } from '../../dissectors/render/summary.js';
import { PCAPS, pcapPath, readFrames } from '../helpers.js';

test('reuse: same decoded values as fresh objects on every bundled capture, one BTH/IPv4/UDP record refilled', async (t) => {
  const names = readdirSync(PCAPS).filter((n) => n.endsWith('.pcap'));
  t.true(names.length >= 10);
  let roce = 0;
  for (const name of names) {
    const frames = await readFrames(pcapPath(name));
    const fresh = new FrameDecoder(), reused = new FrameDecoder({ reuse: true });
    const seen = { bth: new Set<object>(), ipv4: new Set<object>(), udp: new Set<object>() };
    for (const f of frames) {
      const a = fresh.decode(f), b = reused.decode(f);
      const sa = JSON.stringify(a, jsonReplacer), sb = JSON.stringify(b, jsonReplacer);
      if (sa !== sb) { t.is(sb, sa, `${name} frame ${a.n}`); return; }
      if (b.roce && b.ip?.version === 4) {
        roce++;
        seen.bth.add(b.roce.ib.bth); seen.ipv4.add(b.ip.header); if (b.udp) seen.udp.add(b.udp);
        t.not(a.roce!.ib.bth, b.roce.ib.bth);
      }
    }
    for (const [k, s] of Object.entries(seen)) if (s.size > 1) t.fail(`${name}: ${s.size} ${k} records`);
  }
  t.true(roce > 10_000, `${roce} RoCE frames compared`);
  // -V keeps its own records per frame even when reuse is asked for (the tree mode keeps frames)
  const frames = await readFrames(pcapPath('a-first-contact'));
  const v = new FrameDecoder({ reuse: true, tree: true });
  const bths = new Set<object>();
  for (const f of frames) { const d = v.decode(f); if (d.roce) bths.add(d.roce.ib.bth); }
  t.true(bths.size > 1);
});

// smcdump's -q and --summary decode without the items' one-line summaries (summaries: false):
// the frames are the same apart from those texts, and what the tracker rebuilds from them (notes,
// the summary JSON, anomaly totals) is the same. If the tracker or the tables ever read an item's
// summary, this fails and smcdump must keep them on in those modes.
test('summaries off: same frames except the item texts, same tracker notes and summary on every bundled capture', async (t) => {
  const names = readdirSync(PCAPS).filter((n) => n.endsWith('.pcap'));
  let items = 0;
  for (const name of names) {
    const frames = await readFrames(pcapPath(name));
    const on = new FrameDecoder({ reuse: true }), off = new FrameDecoder({ reuse: true, summaries: false });
    const ta = new Tracker({ compact: true }), tb = new Tracker({ compact: true });
    for (const f of frames) {
      const a = on.decode(f), b = off.decode(f);
      for (let i = 0; i < b.smc.length; i++) {
        items++;
        if (b.smc[i]!.summary !== '') { t.fail(`${name} frame ${b.n}: summary "${b.smc[i]!.summary}" made with summaries off`); return; }
        t.not(a.smc[i]!.summary, '', `${name} frame ${a.n}: an item without its summary`);
      }
      const sa = JSON.stringify({ ...a, smc: a.smc.map((x) => ({ ...x, summary: '' })) }, jsonReplacer), sb = JSON.stringify(b, jsonReplacer);
      if (sa !== sb) { t.is(sb, sa, `${name} frame ${a.n}`); return; }
      const na = JSON.stringify(ta.feed(a), jsonReplacer), nb = JSON.stringify(tb.feed(b), jsonReplacer);
      if (na !== nb) { t.is(nb, na, `${name} frame ${a.n}: tracker note`); return; }
    }
    ta.finish(); tb.finish();
    t.is(JSON.stringify(summaryJson(tb), jsonReplacer), JSON.stringify(summaryJson(ta), jsonReplacer), `${name}: summary`);
    t.is(tb.anomalyCount, ta.anomalyCount, `${name}: anomalies`);
  }
  t.true(items > 500, `${items} SMC items compared`);
});
