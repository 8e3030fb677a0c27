// Robustness: >= 100k mutated, truncated and random frames through the whole pipeline
// (link → IP → TCP/UDP → CLC reassembly / RoCE → LLC/CDC). Nothing may throw (the decoder's
// last-resort guard turns a throw into an 'internal' issue, so we assert none appear), and
// every frame cut inside its IP packet must carry at least one issue.
import test from 'ava';
import { FrameDecoder } from '../../dissectors/frame.js';
import { LINKTYPE, type CapturedFrame } from '../../capture/types.js';
import { KERNEL_CAPTURES, pcapPath, prng, readFrames } from '../helpers.js';

const TOTAL = Number(process.env.FUZZ_FRAMES ?? 120_000);

function frame(data: Uint8Array, linktype: number = LINKTYPE.ETHERNET): CapturedFrame {
  return { data, caplen: data.length, origlen: data.length, tsNs: 0n, linktype, ifIndex: 0 };
}

test('fuzz: mutated, truncated and random frames never break the pipeline', async (t) => {
  const real: Uint8Array[] = [];
  for (const name of KERNEL_CAPTURES) for (const f of await readFrames(pcapPath(name))) real.push(f.data);
  for (const f of await readFrames(pcapPath('external/smcr-v1-clc/smcr-v1-clc.pcap'))) real.push(f.data);
  // Favour the interesting frames (SMC-bearing) over bulk data: keep every small frame, sample big ones.
  const pool = real.filter((b, i) => b.length < 300 || i % 20 === 0);
  t.true(pool.length > 100);

  const rnd = prng(0x5eed);
  const pick = (n: number): number => Math.floor(rnd() * n);
  const dec = new FrameDecoder();
  let n = 0, internal = 0, truncatedWithoutIssue = 0, truncations = 0, withIssues = 0;
  const linktypes = [LINKTYPE.ETHERNET, LINKTYPE.LINUX_SLL, LINKTYPE.LINUX_SLL2, LINKTYPE.RAW];
  while (n < TOTAL) {
    const src = pool[pick(pool.length)]!;
    const kind = n % 4;
    let data: Uint8Array;
    if (kind === 0) {
      // Truncate inside the IP packet (after Ethernet + a bit): must be reported.
      const ipTotal = src.length > 18 && src[12] === 0x08 && src[13] === 0x00 ? ((src[16]! << 8) | src[17]!) : 0;
      const cut = 14 + pick(Math.max(1, Math.min(ipTotal, src.length - 14)));
      data = src.slice(0, cut);
      if (ipTotal > 0 && cut < 14 + ipTotal) truncations++;
      const d = dec.decode(frame(data));
      if (ipTotal > 0 && cut < 14 + ipTotal && d.issues.length === 0) truncatedWithoutIssue++;
      if (d.issues.some((i) => i.code === 'internal')) internal++;
      if (d.issues.length) withIssues++;
      n++;
      continue;
    } else if (kind === 1) {
      data = src.slice();
      const flips = 1 + pick(8);
      for (let i = 0; i < flips; i++) data[pick(data.length)] = pick(256);
    } else if (kind === 2) {
      data = src.slice();
      // Mutate only beyond the IP/UDP headers: exercises the SMC codecs with valid framing.
      const from = Math.min(data.length - 1, 42);
      for (let i = 0; i < 4; i++) data[from + pick(Math.max(1, data.length - from))] = pick(256);
    } else {
      data = new Uint8Array(pick(200));
      for (let i = 0; i < data.length; i++) data[i] = pick(256);
    }
    const d = dec.decode(frame(data, kind === 3 ? linktypes[pick(linktypes.length)]! : LINKTYPE.ETHERNET));
    if (d.issues.some((i) => i.code === 'internal')) internal++;
    if (d.issues.length) withIssues++;
    n++;
  }
  t.log(`${n} frames, ${withIssues} with issues, ${truncations} cut inside IP`);
  t.is(internal, 0, 'a decoder threw');
  t.is(truncatedWithoutIssue, 0, 'a frame cut inside its IP packet decoded without any issue');
  t.true(truncations > TOTAL / 5);
});
