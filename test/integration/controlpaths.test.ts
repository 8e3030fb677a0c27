// The short paths of issue 16's round 9 (control frames) against what they replace, on every
// bundled capture and on crafted variants:
// - a reusing decoder's refilled NOP, NOP, timestamps option list (net/tcp.ts) decodes every TCP
//   header as decodeOptions does (same value, same issues), and only that exact area takes it;
// - the CLC/LLC decoders' cached address text (net/addr.ts: peerIdAt, macAt, ipv6At, ipv4At) is
//   the formatters' text for any bytes, colliding cache slots and cut buffers included;
// - CLC reassembly's cached direction keys (clcstream.ts) keep connections apart: interleaved
//   connections that share ports (one cache slot) give what each gives alone.
import test from 'ava';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { ClcStreams, type SegmentResult } from '../../dissectors/clcstream.js';
import { FrameDecoder } from '../../dissectors/frame.js';
import { ipv4At, ipv6At, macAt, peerIdAt } from '../../dissectors/net/addr.js';
import { decodeTcpAt, reusableTsOptions } from '../../dissectors/net/tcp.js';
import { ipv4Str, ipv6Str, jsonReplacer, macStr, u16, type Issue } from '../../dissectors/wire/common.js';
import { PCAPS, prng, readFrames } from '../helpers.js';

const captures = (): string[] => readdirSync(PCAPS).filter((n) => /\.pcap(ng)?$/.test(n)).sort();

/** decodeTcpAt of the header at b[off, end) with the refilled list and without: value and issues as JSON. */
function bothWays(b: Uint8Array, off: number, end: number, ts: ReturnType<typeof reusableTsOptions>): [string, string] {
  const i1: Issue[] = [], i2: Issue[] = [];
  const plain = decodeTcpAt(i1, b, off, end);
  const refilled = decodeTcpAt(i2, b, off, end, undefined, end - off, undefined, ts);
  return [JSON.stringify([plain, i1], jsonReplacer), JSON.stringify([refilled, i2], jsonReplacer)];
}

test('the refilled NOP, NOP, timestamps list decodes every TCP header of every bundled capture as decodeOptions', async (t) => {
  const dec = new FrameDecoder();
  const ts = reusableTsOptions();
  let segments = 0, refilled = 0;
  for (const name of captures()) {
    for (const f of await readFrames(join(PCAPS, name))) {
      const d = dec.decode(f);
      if (!d.tcp || !d.ip) continue;
      // the header is found by its ports and sequence number; both decodes read the same bytes
      const b = f.data;
      const end = b.length;
      const off = locateTcp(b, d.tcp.srcPort, d.tcp.dstPort, d.tcp.seq);
      if (off < 0) continue;
      const [a, c] = bothWays(b, off, end, ts);
      segments++;
      if (a !== c) { t.is(c, a, `${name} frame ${d.n}`); return; }
      const again = decodeTcpAt([], b, off, end, undefined, end - off, undefined, ts);
      if (again.options === ts) refilled++;
    }
  }
  t.true(segments > 200, `${segments} segments`);
  // Linux puts NOP, NOP, TS on its data and ACK segments: most take the refilled list
  t.true(refilled > segments / 2, `${refilled} of ${segments} refilled`);
});

/** Offset of the TCP header with these ports and sequence number in b (-1: none). */
function locateTcp(b: Uint8Array, sport: number, dport: number, seq: number): number {
  for (let o = 0; o + 20 <= b.length; o++) {
    if (u16(b, o) === sport && u16(b, o + 2) === dport && ((b[o + 4]! << 24 | b[o + 5]! << 16 | b[o + 6]! << 8 | b[o + 7]!) >>> 0) === seq) return o;
  }
  return -1;
}

test('only the exact NOP, NOP, timestamps area is refilled; variants decode as decodeOptions', (t) => {
  const ts = reusableTsOptions();
  const base = (): Uint8Array => {
    const b = new Uint8Array(40);
    b[0] = 0x12; b[1] = 0x34; b[2] = 0x00; b[3] = 0x50; // ports
    b[12] = 8 << 4; b[13] = 0x10; // data offset 8 words (32 bytes), ACK
    b[20] = 1; b[21] = 1; b[22] = 8; b[23] = 10;
    for (let i = 24; i < 32; i++) b[i] = i;
    return b;
  };
  const variants: [string, (b: Uint8Array) => Uint8Array, boolean][] = [
    ['plain', (b) => b.subarray(0, 32), true],
    ['SYN', (b) => { b[13] = 0x02; return b.subarray(0, 32); }, true],
    ['cut after the timestamps (data offset 9)', (b) => { b[12] = 9 << 4; return b.subarray(0, 32); }, true],
    ['timestamps length 11', (b) => { b[23] = 11; return b.subarray(0, 32); }, false],
    ['EOL instead of a NOP', (b) => { b[21] = 0; return b.subarray(0, 32); }, false],
    ['kind 9', (b) => { b[22] = 9; return b.subarray(0, 32); }, false],
    ['NOP, NOP, TS and more options', (b) => { b[12] = 10 << 4; b[32] = 1; b[33] = 1; b[34] = 1; b[35] = 0; return b; }, false],
    ['no options', (b) => { b[12] = 5 << 4; return b.subarray(0, 32); }, false],
  ];
  for (const [what, make, takes] of variants) {
    const b = make(base());
    const [a, c] = bothWays(b, 0, b.length, ts);
    t.is(c, a, what);
    t.is(decodeTcpAt([], b, 0, b.length, undefined, b.length, undefined, ts).options === ts, takes, `${what}: refilled`);
  }
  // a refilled list is the current segment's: its timestamps change with the bytes
  const b = base();
  b[24] = 0xaa;
  const h = decodeTcpAt([], b, 0, 32, undefined, 32, undefined, ts);
  t.is(h.options[2]!.tsVal, (0xaa << 24 | 25 << 16 | 26 << 8 | 27) >>> 0);
});

test('cached address text is the formatters\' text for any bytes (colliding slots, cut buffers)', (t) => {
  const rnd = prng(16);
  const b = new Uint8Array(64);
  for (let round = 0; round < 20_000; round++) {
    // few distinct values per byte position: many hits, many slot collisions
    for (let i = 0; i < b.length; i++) b[i] = rnd() < 0.7 ? (i & 3) : Math.floor(rnd() * 256);
    if (rnd() < 0.3) { b[10] = 0; b[11] = 0; b[12] = 0; b[13] = 0; b[14] = 0; b[15] = 0; b[16] = 0; b[17] = 0; b[18] = 0; b[19] = 0; b[20] = 0xff; b[21] = 0xff; }
    const o = Math.floor(rnd() * 8);
    const cut = rnd() < 0.1 ? b.subarray(0, o + Math.floor(rnd() * 20)) : b;
    t.is(macAt(cut, o), macStr(cut, o));
    t.is(ipv4At(cut, o), ipv4Str(cut, o));
    t.is(ipv6At(cut, o + 10), ipv6Str(cut, o + 10));
    t.is(peerIdAt(cut, o, 2), `${u16(cut, o)}@${macStr(cut, o + 2)}`);
  }
});

/** A SegmentResult as text (role, then each message's bytes, frames and offset). */
function said(r: SegmentResult): string {
  return `${r.role} ${r.messages.map((m) => `${Buffer.from(m.bytes).toString('hex')}/${m.frames.join(',')}/${m.offsetInFrame}`).join(' ')}`;
}

test('CLC reassembly keeps interleaved connections apart when they share ports (one key slot)', async (t) => {
  // the TCP segments (payload and flags) of the bundled captures' connections, replayed as
  // several connections at once: same ports and different addresses (the same key slot),
  // different ports and the same addresses
  interface Seg { sport: number; dport: number; fwd: boolean; seq: number; syn: boolean; fin: boolean; rst: boolean; payload: Uint8Array; frame: number }
  const dec = new FrameDecoder();
  const segs: Seg[] = [];
  for (const name of ['a-first-contact', 'b-second-contact', 'c2-fallback-server-decline']) {
    for (const f of await readFrames(join(PCAPS, `${name}.pcap`))) {
      const d = dec.decode(f);
      if (!d.tcp || !d.ip || d.ip.version !== 4) continue;
      const b = f.data;
      const payload = d.payloadLength > 0 ? b.slice(b.length - d.payloadLength) : new Uint8Array(0);
      const fl = d.tcp.flags;
      segs.push({ sport: d.tcp.srcPort, dport: d.tcp.dstPort, fwd: d.ip.src < d.ip.dst, seq: d.tcp.seq, syn: fl.syn, fin: fl.fin, rst: fl.rst, payload, frame: d.n });
    }
  }
  t.true(segs.some((s) => s.payload.length > 0));
  const copies = [
    { a: '10.0.0.1', b: '10.0.0.2', shift: 0 }, { a: '10.0.1.1', b: '10.0.1.2', shift: 0 },
    { a: '10.0.2.1', b: '10.0.0.2', shift: 0 }, { a: '10.0.0.1', b: '10.0.0.2', shift: 7 },
  ];
  const feed = (cs: ClcStreams, s: Seg, c: typeof copies[number]): string => {
    const [src, dst] = s.fwd ? [c.a, c.b] : [c.b, c.a];
    const p = new Uint8Array(s.payload.length + 4);
    p.set(s.payload, 2);
    return said(cs.segment(src, s.sport + c.shift, dst, s.dport + c.shift, s.seq, s.syn, s.fin, s.rst, p, 2, 2 + s.payload.length, s.frame));
  };
  // each copy alone
  const alone = copies.map((c) => { const cs = new ClcStreams(); return segs.map((s) => feed(cs, s, c)); });
  // all copies interleaved segment by segment through one instance
  const shared = new ClcStreams();
  let clc = 0;
  for (let i = 0; i < segs.length; i++) {
    for (let k = 0; k < copies.length; k++) {
      const got = feed(shared, segs[i]!, copies[k]!);
      if (got !== alone[k]![i]) { t.is(got, alone[k]![i]!, `copy ${k} segment ${i}`); return; }
      if (got.startsWith('clc ')) clc++;
    }
  }
  t.true(clc >= copies.length * 4, `${clc} CLC results`);
});
