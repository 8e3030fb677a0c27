// Renderers of tracked state: summary tables, ladder diagram (text and SVG).
import test from 'ava';
import { Chalk } from 'chalk';
import { FrameDecoder } from '../../dissectors/frame.js';
import { Tracker } from '../../dissectors/tracker/tracker.js';
import { Ladder } from '../../dissectors/render/ladder.js';
import { renderSummary, timeline } from '../../dissectors/render/summary.js';
import { pcapPath, readFrames } from '../helpers.js';

const plain = new Chalk({ level: 0 });

async function run(name: string): Promise<{ tr: Tracker; ladder: Ladder }> {
  const dec = new FrameDecoder();
  const tr = new Tracker();
  const ladder = new Ladder();
  for (const f of await readFrames(pcapPath(name))) { const d = dec.decode(f); ladder.add(d, tr.feed(d)); }
  tr.finish();
  return { tr, ladder };
}

test('summary: link group, link and connection tables with values from the wire', async (t) => {
  const { tr } = await run('b-second-contact');
  const s = renderSummary(tr, plain);
  t.regex(s, /^171 frames over 10\.\d+s: 4 TCP connection\(s\), 1 link group\(s\), 0 anomalies/);
  t.regex(s, /LG1 .*guesta.*guestb.* v2\.1 .* SMC-LAB-UEID .* 2\/255 .* 1 .* 4 .* active/);
  t.regex(s, /LG1\/L1 .* ::ffff:10\.55\.0\.1 qp 0x11 .* ::ffff:10\.55\.0\.2 qp 0x11 .* 1024 .* 0x00000101 .* active/);
  t.regex(s, /│ 4 │ 10\.55\.0\.1:\d+ → 10\.55\.0\.2:12345 │ smc-r │ LG1 │ 0x4\/0x4 .* 64KiB\/64KiB │ 16 \/ 22 /);
  t.regex(s, /#1 SYN → SYN-ACK \+[\d.]+ms → Proposal \+[\d.]+ms → Accept \+[\d.]+ms → Confirm \+[\d.]+ms → CONFIRM LINK \+[\d.]+ms → first data/);
  t.false(s.includes('\u001b['));
});

test('summary: a fallback in one sentence', async (t) => {
  const { tr } = await run('c2-fallback-server-decline');
  t.regex(renderSummary(tr, plain), /#1 fallback: server declined 0x03030000 NOSMCDEV: no SMC device found, R or D; client offered SMC-LAB-UEID/);
});

test('timeline prints per-step latency', (t) => {
  t.is(timeline([{ name: 'SYN', frame: 1, tsNs: 0n }, { name: 'SYN-ACK', frame: 2, tsNs: 1_500_000n }, { name: 'Proposal', frame: 3, tsNs: 2_001_500_000n }]), 'SYN → SYN-ACK +1.5ms → Proposal +2.000s');
});

test('ladder: TCP/CLC single arrows, RoCE double arrows, bursts folded', async (t) => {
  const { ladder } = await run('a-first-contact');
  const text = ladder.renderText(plain);
  const lines = text.split('\n');
  t.regex(lines[0]!, /10\.55\.0\.1 +10\.55\.0\.2/);
  t.regex(text, /│─+ SYN \[smc-r\] ─+>│ +#3/);
  t.regex(text, /│<─+ CLC Accept v2 ─+│ +#8/);
  t.regex(text, /│<═+ LLC CONFIRM LINK v2 req ═+│ +#12/);
  t.regex(text, /│═+ RDMA WRITE 54B ═+>│ +#20/);
  const bulk = (await run('d-bulk-2MiB')).ladder;
  const folded = bulk.events.filter((e) => e.label === 'RDMA WRITE');
  t.is(folded.reduce((n, e) => n + e.bytes, 0), 2 * 1024 * 1024 + 123 + 27);
  t.true(folded.length < 100, 'WRITE segments folded into rows');
  const svg = ladder.renderSvg();
  t.regex(svg, /^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);
  t.is((svg.match(/<line class="lifeline"/g) ?? []).length, 2);
  t.is((svg.match(/<line class="arrow"/g) ?? []).length, ladder.events.length);
  t.regex(svg, /<line class="arrow"[^>]*stroke-dasharray="6,3"/);
  const arrows = svg.match(/<line class="arrow"[^>]*>/g)!;
  t.false(arrows[0]!.includes('stroke-dasharray'), 'the SYN (TCP) row is solid');
  t.is(arrows.filter((l) => l.includes('stroke-dasharray')).length, ladder.events.filter((e) => e.kind === 'roce').length, 'RoCE rows dashed');
});
