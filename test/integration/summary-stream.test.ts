// --summary in constant memory: the streamed JSON is the same text as the object form, the
// streamed tables the same lines, and a capture with many connections (a real one repeated
// with new hosts per copy) is summarised with top-N rows and "… N more".
import test from 'ava';
import { Chalk } from 'chalk';
import { FrameDecoder } from '../../dissectors/frame.js';
import { Tracker } from '../../dissectors/tracker/tracker.js';
import { renderSummary, summaryJson, writeSummary, writeSummaryJson } from '../../dissectors/render/summary.js';
import { renderTable, streamTable } from '../../dissectors/render/table.js';
import { jsonReplacer } from '../../dissectors/wire/common.js';
import type { CapturedFrame } from '../../capture/types.js';
import { KERNEL_CAPTURES, pcapPath, readFrames } from '../helpers.js';

const plain = new Chalk({ level: 0 });

function track(frames: CapturedFrame[]): Tracker {
  const dec = new FrameDecoder({ icrc: false });
  const tr = new Tracker();
  for (const f of frames) tr.feed(dec.decode(f));
  tr.finish();
  return tr;
}

/** `copies` copies of a capture, each copy's IPv4 addresses moved to 10.<r>.<r>.x (headers
 *  and the GIDs inside CLC/LLC): every copy is a new link group with its own connections. */
function many(frames: CapturedFrame[], copies: number): CapturedFrame[] {
  const ips: string[] = [];
  for (const f of frames) {
    const d = f.data;
    if (d.length < 34 || d[12] !== 0x08 || d[13] !== 0x00) continue;
    for (const o of [26, 30]) { const a = Buffer.from(d.subarray(o, o + 4)).toString('hex'); if (!ips.includes(a)) ips.push(a); }
  }
  const span = frames[frames.length - 1]!.tsNs - frames[0]!.tsNs + 1_000_000n;
  const out: CapturedFrame[] = [];
  for (let r = 0; r < copies; r++) {
    for (const f of frames) {
      const d = Buffer.from(f.data);
      ips.forEach((hex, k) => {
        const from = Buffer.from(hex, 'hex'), to = Buffer.from([10, (r >> 8) & 0xff, r & 0xff, from[3]! + k]);
        for (let i = d.indexOf(from); i >= 0; i = d.indexOf(from, i + 4)) to.copy(d, i);
      });
      if (d.length >= 34 && d[12] === 0x08 && d[13] === 0x00) {
        // the IPv4 header checksum over the new addresses
        const ihl = (d[14]! & 0x0f) * 4;
        d.writeUInt16BE(0, 24);
        let sum = 0;
        for (let i = 14; i < 14 + ihl; i += 2) sum += d.readUInt16BE(i);
        while (sum > 0xffff) sum = (sum & 0xffff) + (sum >>> 16);
        d.writeUInt16BE(~sum & 0xffff, 24);
      }
      out.push({ ...f, data: d, tsNs: f.tsNs + span * BigInt(r) });
    }
  }
  return out;
}

test('--summary --json streamed piece by piece is the text JSON.stringify gives, on every kernel capture', async (t) => {
  for (const name of KERNEL_CAPTURES) {
    const tr = track(await readFrames(pcapPath(name)));
    let streamed = '';
    writeSummaryJson(tr, undefined, {}, jsonReplacer, (s) => { streamed += s; });
    t.is(streamed, JSON.stringify(summaryJson(tr), jsonReplacer), name);
    let withExtra = '';
    writeSummaryJson(tr, undefined, { extra: { a: 1n }, skipped: undefined }, jsonReplacer, (s) => { withExtra += s; });
    t.is(withExtra, JSON.stringify({ ...(summaryJson(tr) as object), extra: { a: 1n } }, jsonReplacer), `${name} with extra fields`);
  }
});

test('streamTable prints what renderTable prints, asking each row only when needed', (t) => {
  const rows = Array.from({ length: 30 }, (_, i) => [String(i), 'x'.repeat(i), i % 2 ? 'odd row with words to wrap' : 'even']);
  const cols = [{ head: '#', prio: 1 }, { head: 'long', prio: 3 }, { head: 'text', prio: 1 }];
  for (const opts of [{}, { width: 40 }, { width: 40, maxRows: 5, more: 'use --json' }]) {
    const lines: string[] = [];
    let asked = 0;
    streamTable(cols, rows.length, (i) => { asked++; return rows[i]!; }, plain, opts, (l) => { lines.push(l); });
    t.is(lines.join('\n'), renderTable(cols, rows, plain, opts));
    t.is(asked, 2 * Math.min(rows.length, opts.maxRows ?? Infinity), 'each shown row twice (size, print), the others never');
  }
});

test('many connections: every row to a pipe, the top rows and "… N more" on a terminal, the same lines streamed', async (t) => {
  const copies = 150;
  const tr = track(many(await readFrames(pcapPath('b-second-contact')), copies));
  t.is(tr.tcp.length, 4 * copies);
  t.is(tr.groups.length, copies);
  t.deepEqual([...tr.anomalyTotals.values()].map((a) => `${a.code} ${a.count}`), [], 'clean traffic: no anomaly from the repetition');
  const all = renderSummary(tr, plain, { width: Infinity });
  t.is(all.split('\n').filter((l) => /^ {2}#\d+ SYN → /.test(l)).length, 4 * copies, 'a handshake line per connection');
  const top = renderSummary(tr, plain, { width: 100, maxRows: 10 });
  t.true(top.includes(`… ${copies - 10} more (--json lists all)`), 'link groups cut to 10');
  t.true(top.includes(`… ${4 * copies - 10} more (--json lists all)`), 'connections cut to 10');
  const lines: string[] = [];
  writeSummary(tr, plain, { width: 100, maxRows: 10 }, (l) => { lines.push(l); });
  t.is(lines.join('\n'), top);
  const j = summaryJson(tr) as { connections: { index: number; smc?: { lg: number } }[] };
  t.is(j.connections.length, 4 * copies);
  t.deepEqual(j.connections.slice(-4).map((c) => c.smc?.lg), [copies, copies, copies, copies], 'the last copy is the last link group');
});
