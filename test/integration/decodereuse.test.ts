// A decoder told to reuse its per-layer records (smcdump's one-line, -q and --summary path)
// decodes every frame of every bundled capture to the same values as a fresh-object decoder,
// as long as each frame is read before the next decode; and it does refill one record.
import test from 'ava';
import { readdirSync } from 'node:fs';
import { FrameDecoder } from '../../dissectors/frame.js';
import { jsonReplacer } from '../../dissectors/wire/common.js';
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
