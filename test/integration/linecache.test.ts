// The cached one-line path (render/line.ts CachedLine: the common RoCE lines from cached bytes)
// against the general renderer (writeLineRest without colour), frame by frame over every bundled
// capture as smcdump decodes them (reused records, reused note); then the caches' keys one by
// one: a line whose addresses, QP, opcode, RoCE version or tags change must not come out of a
// slot made for another, also when many keys share a slot. And Out's new pieces (int's digit
// pairs, bytes, lineStart) against plain string formatting.

import test from 'ava';
import { Chalk } from 'chalk';
import { readdirSync } from 'node:fs';
import { openCapture } from '../../capture/reader.js';
import { FrameDecoder, type DecodedFrame } from '../../dissectors/frame.js';
import type { FrameNote } from '../../dissectors/tracker/model.js';
import { Tracker } from '../../dissectors/tracker/tracker.js';
import { CachedLine, writeLineRest, type LineOptions, type LineSink } from '../../dissectors/render/line.js';
import { StringSink } from '../../dissectors/wire/common.js';
import { PCAPS, pcapPath, prng, writtenByOut } from '../helpers.js';

const plain: LineOptions = { chalk: new Chalk({ level: 0 }), time: '', link: undefined, seq: undefined, number: true };

/** A LineSink that builds a string (the bytes decoded back), so a line is checked without a file. */
class StringLineSink extends StringSink implements LineSink {
  private readonly utf8 = new TextDecoder();
  int(n: number): void { this.dec(n); }
  bytes(b: Uint8Array): void { this.s += this.utf8.decode(b); }
}

const general = new StringSink();
const cached = new StringLineSink();

/** One line by the general renderer and by the cache: [general, cached, whether the cache wrote it]. */
function both(cache: CachedLine, d: DecodedFrame, note: FrameNote | undefined): [string, string, boolean] {
  writeLineRest(general.reset(), d, plain, note);
  const hit = cache.write(cached.reset(), d, note);
  return [general.s, hit ? cached.s : general.s, hit];
}

for (const track of [true, false]) {
  test(`CachedLine = writeLineRest, every frame of every bundled capture (${track ? 'tracked' : '--no-track'})`, async (t) => {
    const names = readdirSync(PCAPS).filter((n) => n.endsWith('.pcap'));
    let frames = 0, hits = 0, bad = 0;
    for (const name of names) {
      const r = await openCapture(pcapPath(name));
      // as smcdump's one-line replay decodes: one record per layer and one note, refilled
      const dec = new FrameDecoder({ reuse: true });
      const tr = track ? new Tracker({ compact: true, reuseNote: true }) : undefined;
      const cache = new CachedLine();
      for (let f = r.next(); f; f = r.next()) {
        const d = dec.decode(f);
        const note = tr?.feed(d);
        const [want, got, hit] = both(cache, d, note);
        frames++;
        if (hit) hits++;
        if (got !== want && bad++ < 3) t.is(got, want, `${name} frame ${d.n}`);
        if (!hit && cached.s !== '') { t.fail(`${name} frame ${d.n}: a miss wrote ${cached.s}`); bad++; }
      }
      r.close();
    }
    t.is(bad, 0);
    // most lines of these captures are RoCE WRITE/SEND/ACK lines: the cache must be what writes them
    t.true(hits > frames / 2, `${hits} of ${frames} lines from the cache`);
  });
}

/** The RoCE frames of a capture, each decoded into its own records, with its own note. */
async function roceFrames(name: string): Promise<[DecodedFrame, FrameNote][]> {
  const r = await openCapture(pcapPath(name), { reuseFrame: false });
  const dec = new FrameDecoder();
  const tr = new Tracker({ compact: true });
  const out: [DecodedFrame, FrameNote][] = [];
  for (let f = r.next(); f; f = r.next()) {
    f.data = f.data.slice();
    const d = dec.decode(f);
    const note = tr.feed(d);
    if (d.roce && d.ip) out.push([d, note]);
  }
  r.close();
  return out;
}

test('CachedLine into Out = writeLineRest into Out, d-bulk-2MiB as one output', async (t) => {
  const frames = await roceFrames('d-bulk-2MiB');
  const cache = new CachedLine();
  const want = writtenByOut((o) => { for (const [d, note] of frames) { writeLineRest(o, d, plain, note); o.byte(10); } });
  const got = writtenByOut((o) => { for (const [d, note] of frames) { o.lineStart(); if (!cache.write(o, d, note)) writeLineRest(o, d, plain, note); o.byte(10); } });
  t.is(got, want);
  t.true(frames.length > 1500);
});

test('CachedLine keys: addresses, QP, opcode, version and tags changed one at a time, many keys per slot', async (t) => {
  const frames = await roceFrames('d-bulk-2MiB');
  const cache = new CachedLine();
  const r = prng(16);
  const addrs = ['10.55.0.1', '10.55.0.2', '10.55.0.11', '10.1.0.1', 'fe80::1', '192.168.100.201'];
  const links = [undefined, '', 'LG1/L1', 'LG1/L2', 'LG11/L1', 'LG2/L1'];
  const dirs = [undefined, 'c>s', 's>c'] as const;
  let hits = 0, n = 0;
  for (let i = 0; i < 6000; i++) {
    const [d0, note0] = frames[Math.floor(r() * frames.length)]!;
    // a changed copy of the frame's IP info, BTH and note (the decoded frame is shared)
    const bth = { ...d0.roce!.ib.bth };
    const d: DecodedFrame = { ...d0, ip: { ...d0.ip! }, roce: { ...d0.roce!, ib: { ...d0.roce!.ib, bth } } };
    const note: FrameNote = { ...note0 };
    const k = Math.floor(r() * 6);
    if (k === 0) { d.ip!.src = addrs[Math.floor(r() * addrs.length)]!; d.ip!.dst = addrs[Math.floor(r() * addrs.length)]!; }
    if (k === 1) bth.destQp = Math.floor(r() * 4) === 0 ? Math.floor(r() * 0x1000000) : 0x11 + Math.floor(r() * 600);
    if (k === 2) d.roce!.version = d.roce!.version === 2 ? 1 : 2;
    if (k === 3) { note.link = links[Math.floor(r() * links.length)]; note.conn = r() < 0.3 ? undefined : Math.floor(r() * 700) - 20; }
    if (k === 4) { note.dir = dirs[Math.floor(r() * dirs.length)]; note.tcpMode = r() < 0.2 ? 'smc-r' : undefined; }
    if (k === 5) { bth.psn = Math.floor(r() * 0x1000000); bth.se = r() < 0.5; bth.becn = r() < 0.2; }
    const [want, got, hit] = both(cache, d, note);
    if (!hit && cached.s !== '') { t.fail(`case ${i}: a miss wrote ${cached.s}`); return; }
    n++;
    if (hit) hits++;
    if (got !== want) { t.is(got, want, `case ${i} (change ${k})`); return; }
  }
  t.true(hits > n / 2, `${hits} of ${n} from the cache`);
});

test('CachedLine: frames it must leave to the general renderer (issues, anomalies, bad ICRC) write nothing', async (t) => {
  const [d0, note0] = (await roceFrames('d-bulk-2MiB')).find(([d]) => d.smc.length === 0)!;
  const cache = new CachedLine();
  const cases: [DecodedFrame, FrameNote][] = [
    [{ ...d0, issues: [{ severity: 'note', code: 'x.y', message: 'm', offset: 0, length: 0 }] }, note0],
    [d0, { ...note0, anomalies: [{ code: 'a.b', severity: 'warn', message: 'm', frames: [1] } as unknown as FrameNote['anomalies'][number]] }],
    [{ ...d0, roce: { ...d0.roce!, icrc: 'bad' } }, note0],
    [{ ...d0, ip: undefined }, note0],
  ];
  for (const [d, note] of cases) t.is(writtenByOut((o) => { t.false(new CachedLine().write(o, d, note)); t.false(cache.write(o, d, note)); }), '');
  t.true(writtenByOut((o) => { t.true(cache.write(o, d0, note0)); }).length > 20);
});

test('Out.int: every power of ten and its neighbours, random 31-bit and wider values, widths and pads', (t) => {
  const r = prng(7);
  const values: number[] = [0, 1, 2 ** 31 - 1, 2 ** 31, 2 ** 32, 2 ** 53 - 1];
  for (let p = 1; p <= 1e15; p *= 10) values.push(p - 1, p, p + 1);
  for (let i = 0; i < 2000; i++) values.push(Math.floor(r() * 2 ** 31), Math.floor(r() * 2 ** 53));
  const widths = [0, 1, 6, 9, 12];
  const got = writtenByOut((o) => { for (const v of values) for (const w of widths) { o.int(v, w, w === 9 ? 48 : 32); o.byte(124); } }, 512);
  const want = values.map((v) => widths.map((w) => String(v).padStart(w, w === 9 ? '0' : ' ') + '|').join('')).join('');
  t.is(got, want);
});

test('Out.bytes and lineStart: short and long pieces, across flushes, longer than the buffer', (t) => {
  const enc = new TextEncoder();
  const pieces = ['a', 'RoCEv2 ', '10.55.0.1 > 10.55.0.2: RoCEv2 RDMA WRITE MIDDLE QP 0x11 psn ', ' [LG1/L1 c2 c>s]', 'y'.repeat(700), ''];
  const bytes = pieces.map((p) => enc.encode(p));
  for (const size of [64, 1024, 1 << 18]) {
    const got = writtenByOut((o) => { for (let i = 0; i < 400; i++) { o.lineStart(); for (const b of bytes) o.bytes(b); o.byte(10); } }, size);
    t.is(got, (pieces.join('') + '\n').repeat(400), `buffer of ${size}`);
  }
});
