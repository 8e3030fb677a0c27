// The one-line text written as bytes into smcdump's output buffer (writeLineRest into Out: the
// replay path) against the same line built as a string (renderLineRest), frame by frame over
// real kernel captures, with and without colour; and Out's text/hex pieces on their own
// (non-ASCII, flushes in the middle of a piece, pieces longer than the buffer).

import test from 'ava';
import { Chalk } from 'chalk';
import { openCapture } from '../../capture/reader.js';
import { FrameDecoder, type DecodedFrame } from '../../dissectors/frame.js';
import type { FrameNote } from '../../dissectors/tracker/model.js';
import { Tracker } from '../../dissectors/tracker/tracker.js';
import { renderLineRest, writeLineRest, type LineOptions } from '../../dissectors/render/line.js';
import { pcapPath, writtenByOut } from '../helpers.js';

for (const level of [0, 1] as const) {
  test(`writeLineRest into Out = renderLineRest, every frame of six kernel captures (colour level ${level})`, async (t) => {
    const opts: LineOptions = { chalk: new Chalk({ level }), time: '', link: undefined, seq: undefined, number: true };
    let frames = 0, roce = 0;
    for (const name of ['a-first-contact', 'b-second-contact', 'd-bulk-2MiB', 'e-testlink-teardown', 'l-failover', 'o-urgent-stall']) {
      const r = await openCapture(pcapPath(name));
      const dec = new FrameDecoder();
      const tr = new Tracker({ compact: true });
      const want: string[] = [];
      const decoded: [DecodedFrame, FrameNote | undefined][] = [];
      for (let f = r.next(); f; f = r.next()) {
        const d = dec.decode(f);
        const note = tr.feed(d);
        decoded.push([d, note]);
        want.push(renderLineRest(d, opts, note));
        if (d.roce) roce++;
      }
      r.close();
      frames += decoded.length;
      const got = writtenByOut((o) => { for (const [d, note] of decoded) { writeLineRest(o, d, opts, note); o.byte(10); } });
      t.is(got, want.map((l) => l + '\n').join(''), name);
    }
    t.true(frames > 3000 && roce > 2500, `${frames} frames, ${roce} RoCE`);
  });
}

test('Out.text: ASCII and UTF-8 pieces, flushed mid-piece, longer than the buffer; Out.hex', (t) => {
  const pieces = ['10.55.0.1', ' > ', '[1 issues: x,…]', 'ü€😀 mixed', 'x'.repeat(5000), '', 'tail'];
  const hexes = [0, 9, 10, 0x11, 0xabcdef, 0xffffffff, -1, 2 ** 32 + 5];
  const got = writtenByOut((o) => {
    for (let i = 0; i < 300; i++) for (const p of pieces) o.text(p);
    for (const h of hexes) { o.hex(h); o.byte(44); }
  }, 256);
  const want = pieces.join('').repeat(300) + hexes.map((h) => '0x' + (h >>> 0).toString(16) + ',').join('');
  t.is(got, want);
});

// Without colour a TCP segment's line is written piece by piece (writeTcpSummary); with colour
// it is built as strings (summarizeTcp, the CLC and role tails painted): both must say the same
// text. Every frame of every bundled capture, relative and absolute sequence numbers.
test('no colour = colour with its escapes stripped, every frame of every bundled capture (TCP lines: pieces vs strings)', async (t) => {
  const { readdirSync } = await import('node:fs');
  const { PCAPS } = await import('../helpers.js');
  const { TcpRelative } = await import('../../dissectors/render/tcpseq.js');
  const plain: LineOptions = { chalk: new Chalk({ level: 0 }), time: '', link: undefined, seq: undefined, number: true };
  const colour: LineOptions = { chalk: new Chalk({ level: 1 }), time: '', link: undefined, seq: undefined, number: true };
  const strip = (s: string): string => s.replace(/\u001b\[[0-9;]*m/g, '');
  let tcp = 0;
  for (const name of readdirSync(PCAPS).filter((n) => n.endsWith('.pcap'))) {
    for (const relative of [true, false]) {
      const r = await openCapture(pcapPath(name));
      const dec = new FrameDecoder();
      const tr = new Tracker({ compact: true });
      const rel = relative ? new TcpRelative() : undefined;
      for (let f = r.next(); f; f = r.next()) {
        const d = dec.decode(f);
        const note = tr.feed(d);
        const seq = d.tcp && rel ? rel.bases(d) : undefined;
        plain.seq = seq; colour.seq = seq;
        const a = writtenByOut((o) => writeLineRest(o, d, plain, note));
        const b = strip(renderLineRest(d, colour, note));
        if (a !== b) { t.is(a, b, `${name} frame ${d.n}`); r.close(); return; }
        if (d.tcp) tcp++;
      }
      r.close();
    }
  }
  t.true(tcp > 500, `${tcp} TCP lines compared`);
});
