// The cached one-line path (render/line.ts CachedLine: the common RoCE and TCP/CLC lines from
// cached bytes) against the general renderer (writeLineRest without colour), frame by frame over
// every bundled capture as smcdump decodes them (reused records, reused note, no summary strings,
// tcpdump's relative TCP numbers or absolute ones); then the caches' keys one by one: a line
// whose addresses, ports, QP, opcode, RoCE version, TCP flags, numbers, options or tags change
// must not come out of a slot made for another, also when many keys share a slot. The SMC
// summaries written as pieces into Out against their string form. And Out's new pieces (int's
// digit pairs, bytes, lineStart) against plain string formatting.

import test from 'ava';
import { Chalk } from 'chalk';
import { readdirSync } from 'node:fs';
import { openCapture } from '../../capture/reader.js';
import { FrameDecoder, type DecodedFrame } from '../../dissectors/frame.js';
import type { FrameNote } from '../../dissectors/tracker/model.js';
import { Tracker } from '../../dissectors/tracker/tracker.js';
import { CachedLine, writeLineRest, type LineOptions, type LineSink } from '../../dissectors/render/line.js';
import { TcpRelative } from '../../dissectors/render/tcpseq.js';
import type { TcpHeader, TcpOption } from '../../dissectors/net/tcp.js';
import { StringSink } from '../../dissectors/wire/common.js';
import { summarizeCdc, writeCdcSummary } from '../../dissectors/wire/cdc.js';
import { summarizeClc, writeClcSummary } from '../../dissectors/wire/clc.js';
import { summarizeLlc, writeLlcSummary } from '../../dissectors/wire/llc.js';
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
function both(cache: CachedLine, d: DecodedFrame, note: FrameNote | undefined, seq?: LineOptions['seq']): [string, string, boolean] {
  plain.seq = seq;
  writeLineRest(general.reset(), d, plain, note);
  plain.seq = undefined;
  const hit = cache.write(cached.reset(), d, note, seq);
  return [general.s, hit ? cached.s : general.s, hit];
}

for (const track of [true, false]) {
  for (const relative of [true, false]) {
    test(`CachedLine = writeLineRest, every frame of every bundled capture (${track ? 'tracked' : '--no-track'}, ${relative ? 'relative' : 'absolute'} TCP numbers)`, async (t) => {
      const names = readdirSync(PCAPS).filter((n) => n.endsWith('.pcap'));
      let frames = 0, hits = 0, bad = 0, tcpHits = 0, clcHits = 0;
      for (const name of names) {
        const r = await openCapture(pcapPath(name));
        // as smcdump's one-line replay decodes: one record per layer and one note, refilled,
        // and no summary strings (the line writes them from the values)
        const dec = new FrameDecoder({ reuse: true, summaries: false });
        const tr = track ? new Tracker({ compact: true, reuseNote: true }) : undefined;
        const rel = relative ? new TcpRelative() : undefined;
        const cache = new CachedLine();
        for (let f = r.next(); f; f = r.next()) {
          const d = dec.decode(f);
          const note = tr?.feed(d);
          const seq = d.tcp && rel ? rel.bases(d) : undefined;
          const [want, got, hit] = both(cache, d, note, seq);
          frames++;
          if (hit) { hits++; if (d.tcp) { tcpHits++; if (d.smc.some((i) => i.proto === 'clc')) clcHits++; } }
          if (got !== want && bad++ < 3) t.is(got, want, `${name} frame ${d.n}`);
          if (!hit && cached.s !== '') { t.fail(`${name} frame ${d.n}: a miss wrote ${cached.s}`); bad++; }
        }
        r.close();
      }
      t.is(bad, 0);
      // most lines of these captures are RoCE WRITE/SEND/ACK lines: the cache must be what writes them
      t.true(hits > frames / 2, `${hits} of ${frames} lines from the cache`);
      // and the TCP segments and CLC messages of the handshakes
      t.true(tcpHits > 250 && clcHits > 40, `${tcpHits} TCP lines, ${clcHits} CLC lines from the cache`);
    });
  }
}

/** The TCP frames of a capture, each decoded into its own records, with its note and bases. */
async function tcpFrames(name: string): Promise<[DecodedFrame, FrameNote, LineOptions['seq']][]> {
  const r = await openCapture(pcapPath(name), { reuseFrame: false });
  const dec = new FrameDecoder({ summaries: false });
  const tr = new Tracker({ compact: true });
  const rel = new TcpRelative();
  const out: [DecodedFrame, FrameNote, LineOptions['seq']][] = [];
  for (let f = r.next(); f; f = r.next()) {
    f.data = f.data.slice();
    const d = dec.decode(f);
    const note = tr.feed(d);
    const b = d.tcp ? rel.bases(d) : undefined;
    if (d.tcp && d.ip) out.push([d, note, b ? { ...b } : undefined]);
  }
  r.close();
  return out;
}

test('CachedLine TCP keys: addresses, ports, flags, numbers, options, roles, bases and tags changed one at a time', async (t) => {
  const frames = [...await tcpFrames('a-first-contact'), ...await tcpFrames('c2-fallback-server-decline'), ...await tcpFrames('b-second-contact')];
  const cache = new CachedLine();
  const r = prng(61);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
  const addrs = ['10.55.0.1', '10.55.0.2', '10.55.0.12', '10.1.0.21', 'fe80::1', 'fe80::12', '192.168.100.201'];
  const roles = ['none', 'data', 'clc-part', 'out-of-order', 'retransmission'] as const;
  const modes: FrameNote['tcpMode'][] = [undefined, 'pending', 'smc-r', 'smc-d', 'fallback', 'tcp'];
  const extra: Omit<TcpOption, 'offset' | 'length'>[] = [
    { kind: 1 }, { kind: 0 }, { kind: 2, mss: 9000 }, { kind: 2 }, { kind: 3, wscale: 14 }, { kind: 4 }, { kind: 4, bytes: new Uint8Array([4, 3]) },
    { kind: 8, tsVal: 4294967295, tsEcr: 0 }, { kind: 8, tsVal: 2 ** 31, tsEcr: 2 ** 31 - 1 }, { kind: 5, sack: [{ left: 1, right: 2 }] },
    { kind: 254, exp: { kind: 254, length: 6, exid: 0xe2d4c3d9, exidBits: 32, name: 'smc-r', data: new Uint8Array(0) } },
    { kind: 254, exp: { kind: 254, length: 8, exid: 0xe2d4c3d9, exidBits: 32, name: 'smc-r', data: new Uint8Array(2) } },
    { kind: 253, exp: { kind: 253, length: 6, exid: 0xe2d4c3d9, exidBits: 32, name: 'smc-d', data: new Uint8Array(0) } },
    { kind: 30, subtype: 0, bytes: new Uint8Array([30, 4, 0, 0]) }, { kind: 77, bytes: new Uint8Array([77, 3, 9]) },
  ];
  let hits = 0, misses = 0;
  for (let i = 0; i < 8000; i++) {
    const [d0, note0, seq0] = pick(frames);
    const options = [...d0.tcp!.options];
    const tcp: TcpHeader = { ...d0.tcp!, flags: { ...d0.tcp!.flags }, options };
    const d: DecodedFrame = { ...d0, ip: { ...d0.ip! }, tcp };
    const note: FrameNote = { ...note0 };
    let seq = seq0;
    const k = Math.floor(r() * 8);
    if (k === 0) { d.ip!.src = pick(addrs); d.ip!.dst = pick(addrs); }
    if (k === 1) { tcp.srcPort = pick([12345, 34608, 1, 65535, tcp.dstPort]); tcp.dstPort = Math.floor(r() * 65536); }
    if (k === 2) for (const f of ['fin', 'syn', 'rst', 'psh', 'ack', 'urg', 'ece', 'cwr', 'ae'] as const) tcp.flags[f] = r() < 0.3;
    if (k === 3) {
      tcp.seq = Math.floor(r() * 2 ** 32); tcp.ack = Math.floor(r() * 2 ** 32); tcp.window = Math.floor(r() * 65536);
      tcp.urgentPointer = Math.floor(r() * 65536); d.payloadLength = pick([0, 1, 156, 1448, 65535]);
    }
    if (k === 4) { const o = pick(extra); options.splice(Math.floor(r() * (options.length + 1)), r() < 0.3 ? 1 : 0, { offset: 20, length: 4, ...o } as TcpOption); }
    if (k === 5) d.tcpRole = pick(roles);
    if (k === 6) seq = r() < 0.3 ? undefined : { seqBase: Math.floor(r() * 2 ** 32), ackBase: Math.floor(r() * 2 ** 32) };
    if (k === 7) { if (r() < 0.5) note.conn = r() < 0.2 ? undefined : Math.floor(r() * 900) - 20; note.tcpMode = pick(modes); }
    const [want, got, hit] = both(cache, d, note, seq);
    if (!hit && cached.s !== '') { t.fail(`case ${i}: a miss wrote ${cached.s}`); return; }
    if (hit) hits++; else misses++;
    if (got !== want) { t.is(got, want, `case ${i} (change ${k})`); return; }
  }
  // the cache writes the TCP text with the general renderer's writeTcpSummary, unusual options
  // (sack, MPTCP, unknown, …) included: only frames with issues or anomalies are left to it
  t.true(hits > 4000, `${hits} from the cache, ${misses} not`);
});

test('SMC summaries written into Out = their strings, every item of every bundled capture', async (t) => {
  let n = 0;
  for (const name of readdirSync(PCAPS).filter((x) => x.endsWith('.pcap'))) {
    const r = await openCapture(pcapPath(name));
    const dec = new FrameDecoder();
    const want: string[] = [];
    const got = writtenByOut((o) => {
      for (let f = r.next(); f; f = r.next()) {
        for (const i of dec.decode(f).smc) {
          if (i.proto === 'tcpopt') continue;
          const s = i.proto === 'llc' ? summarizeLlc(i.value) : i.proto === 'cdc' ? summarizeCdc(i.value) : summarizeClc(i.value);
          if (s !== i.summary) t.is(s, i.summary);
          want.push(s);
          if (i.proto === 'llc') writeLlcSummary(o, i.value); else if (i.proto === 'cdc') writeCdcSummary(o, i.value); else writeClcSummary(o, i.value);
          o.byte(10);
          n++;
        }
      }
    });
    r.close();
    t.is(got, want.map((l) => l + '\n').join(''), name);
  }
  t.true(n > 800, `${n} items`);
});

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
