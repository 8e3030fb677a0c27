// Header prediction (dissectors/predict.ts) is an optimisation, not a second interpretation: every
// bundled capture tracked with it (WRITE MIDDLE/LAST and ACK frames of known flows handed to the
// tracker as numbers) and without it gives the same anomalies, summary JSON and text, and smcdump's
// -q, --summary and --summary --json print the same bytes with SMCSCOPE_PREDICT=0; a frame off its
// flow's template in the middle of a flow (TTL, QP, address, port) takes the general path, and
// one that matches but needs the tracker's general steps (a PSN gap) is handed back untouched.
import test from 'ava';
import { execFile } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Chalk } from 'chalk';
import { FrameDecoder } from '../../dissectors/frame.js';
import { HeaderPrediction } from '../../dissectors/predict.js';
import { Tracker } from '../../dissectors/tracker/tracker.js';
import { renderSummary, summaryJson } from '../../dissectors/render/summary.js';
import { jsonReplacer } from '../../dissectors/wire/common.js';
import { finish, sumWords } from '../../dissectors/net/checksum.js';
import { IB_OP, writeIcrc } from '../../dissectors/wire/ib.js';
import { BTH_FIELDS } from '../../dissectors/wire/views/ib.js';
import { ETHERNET_LEN, IPV4_FIELDS, IPV4_MIN_LEN, UDP_FIELDS, UDP_LEN } from '../../dissectors/wire/views/net.js';
import type { CapturedFrame } from '../../capture/types.js';
import { PCAPS, ROOT, pcapPath, readFrames } from '../helpers.js';

const plain = new Chalk({ level: 0 });
const run = promisify(execFile);
const BIN = join(ROOT, 'dist/cli/bin/smcdump.js');
const IP = ETHERNET_LEN, UDP = IP + IPV4_MIN_LEN, BTH = UDP + UDP_LEN;

interface Tracked { tr: Tracker; taken: number; said: string }

/** smcdump's compact path over `frames`, with header prediction or without. */
function track(frames: CapturedFrame[], predict: boolean, icrc = true): Tracked {
  const dec = new FrameDecoder({ icrc, reuse: true, summaries: false });
  const tr = new Tracker({ compact: true, reuseNote: true });
  const p = predict ? new HeaderPrediction(icrc) : undefined;
  for (const f of frames) {
    if (p?.take(f, dec, tr)) continue;
    const d = dec.decode(f);
    p?.learn(f, d);
    tr.feed(d);
  }
  tr.finish();
  const said = [
    JSON.stringify(summaryJson(tr), jsonReplacer),
    renderSummary(tr, plain, { width: Infinity }),
    JSON.stringify({ anomalies: tr.anomalies, totals: [...tr.anomalyTotals], count: tr.anomalyCount, frames: tr.frames, first: tr.firstTs, last: tr.lastTs }, jsonReplacer),
  ].join('\n');
  return { tr, taken: p?.taken ?? 0, said };
}

const captures = (): string[] => readdirSync(PCAPS).filter((n) => /\.pcap(ng)?$/.test(n)).sort();

test('predicted and general paths track every bundled capture the same (ICRC checked and not)', async (t) => {
  const names = captures();
  t.true(names.length >= 10, `${PCAPS}: ${names.join(' ')}`);
  let taken = 0;
  for (const name of names) {
    const frames = await readFrames(join(PCAPS, name));
    for (const icrc of [true, false]) {
      const a = track(frames, true, icrc), b = track(frames, false, icrc);
      t.is(a.said, b.said, `${name} icrc ${icrc}`);
      taken += a.taken;
    }
  }
  // the captures' bulk transfers are mostly WRITE MIDDLE frames: the lane must actually be taken
  t.true(taken > 2_000, `${taken} frames predicted`);
  const bulk = track(await readFrames(pcapPath('d-bulk-2MiB')), true);
  t.true(bulk.taken > bulk.tr.frames / 2, `d-bulk: ${bulk.taken} of ${bulk.tr.frames} predicted`);
});

test('smcdump -q, --summary and --summary --json print the same with SMCSCOPE_PREDICT=0', async (t) => {
  for (const name of captures()) {
    for (const mode of [['-q'], ['--summary'], ['--summary', '--json']]) {
      const args = [...mode, '-r', join(PCAPS, name)];
      const on = await run(process.execPath, [BIN, ...args], { env: { ...process.env, SMCSCOPE_PREDICT: '1' }, maxBuffer: 64 << 20 }).catch((e: { stdout: string; stderr: string }) => e);
      const off = await run(process.execPath, [BIN, ...args], { env: { ...process.env, SMCSCOPE_PREDICT: '0' }, maxBuffer: 64 << 20 }).catch((e: { stdout: string; stderr: string }) => e);
      t.is(on.stdout, off.stdout, `${name} ${mode.join(' ')} stdout`);
      t.is(on.stderr, off.stderr, `${name} ${mode.join(' ')} stderr`);
    }
  }
});

/** The IPv4 header checksum of a frame made right again after a change. */
function fixIpChecksum(b: Uint8Array): void {
  const at = IP + IPV4_FIELDS.checksum.at;
  b[at] = 0; b[at + 1] = 0;
  const c = finish(sumWords(b, IP, IPV4_MIN_LEN));
  b[at] = c >>> 8; b[at + 1] = c & 0xff;
}

/** d-bulk with frame `i` (a WRITE MIDDLE in the middle of a flow) changed by `edit`. */
async function edited(edit: (b: Uint8Array) => void): Promise<{ frames: CapturedFrame[]; original: CapturedFrame[]; i: number }> {
  const frames = await readFrames(pcapPath('d-bulk-2MiB'));
  const writes = frames.map((f, k) => [f, k] as const).filter(([f]) => f.data.length > BTH && f.data[BTH + BTH_FIELDS.opcode.at] === IB_OP.RDMA_WRITE_MIDDLE);
  const i = writes[Math.floor(writes.length / 2)]![1];
  const original = frames.slice();
  const data = frames[i]!.data.slice();
  edit(data);
  fixIpChecksum(data);
  writeIcrc(data, IP, 'v2');
  frames[i] = { ...frames[i]!, data };
  return { frames, original, i };
}

/** Whether the prediction learned over frames [0, i) takes frame i (predict() only). */
function predictedAt(frames: CapturedFrame[], i: number): number {
  const dec = new FrameDecoder({ reuse: true, summaries: false });
  const p = new HeaderPrediction(true);
  for (let k = 0; k < i; k++) if (p.predict(frames[k]!) === 0) p.learn(frames[k]!, dec.decode(frames[k]!));
  return p.predict(frames[i]!);
}

const offTemplate: [string, (b: Uint8Array) => void][] = [
  ['TTL', (b) => { b[IP + IPV4_FIELDS.ttl.at]! -= 1; }],
  ['destination QP', (b) => { b[BTH + BTH_FIELDS.destQp.at + 2]! ^= 0x40; }],
  ['destination address', (b) => { b[IP + IPV4_FIELDS.dst.at + 3]! ^= 0x01; }],
  ['source address', (b) => { b[IP + IPV4_FIELDS.src.at + 3]! ^= 0x01; }],
  ['UDP source port', (b) => { b[UDP + UDP_FIELDS.srcPort.at + 1]! ^= 0x01; }],
  ['destination MAC', (b) => { b[5]! ^= 0x02; }],
];

for (const [what, edit] of offTemplate) {
  test(`a WRITE MIDDLE with another ${what} in the middle of a flow takes the general path, same results`, async (t) => {
    const { frames, original, i } = await edited(edit);
    // the frame as captured is predicted (its flow is known); changed, it is not
    t.not(predictedAt(original, i), 0);
    t.is(predictedAt(frames, i), 0);
    const a = track(frames, true), b = track(frames, false);
    t.is(a.said, b.said);
    t.true(a.taken > 1000);
  });
}

test('a frame on its flow\'s template that the tracker must see whole (PSN gap, a retransmission) is handed back', async (t) => {
  // the PSN is not compared with the template: the prediction matches, the tracker's narrow
  // entry refuses (the general path records the gap or the retransmission)
  for (const delta of [5, -3]) {
    const { frames, i } = await edited((b) => {
      const at = BTH + BTH_FIELDS.psn.at;
      const psn = ((b[at]! << 16) | (b[at + 1]! << 8) | b[at + 2]!) + delta;
      b[at] = (psn >>> 16) & 0xff; b[at + 1] = (psn >>> 8) & 0xff; b[at + 2] = psn & 0xff;
    });
    t.not(predictedAt(frames, i), 0);
    const a = track(frames, true), b = track(frames, false);
    t.is(a.said, b.said, `PSN ${delta}`);
    t.true(b.tr.anomalies.some((x) => x.frame === i + 1), `PSN ${delta}: an anomaly in frame ${i + 1}`);
  }
});

test('a frame whose ICRC is wrong is not predicted', async (t) => {
  const { frames, i } = await edited(() => undefined);
  const data = frames[i]!.data;
  data[data.length - 1]! ^= 0xff;
  t.is(predictedAt(frames, i), 0);
  const a = track(frames, true), b = track(frames, false);
  t.is(a.said, b.said);
  t.true(b.tr.anomalies.some((x) => x.code === 'ib.icrc' && x.frame === i + 1));
});
