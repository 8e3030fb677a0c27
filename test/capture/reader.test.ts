import test from 'ava';
import * as fs from 'node:fs';
import * as os from 'node:os';
import { join } from 'node:path';
import { spawn, spawnSync } from 'node:child_process';
import { openCapture, openCaptureSync, readCaptureBuffer, type CaptureReader } from '../../capture/reader.js';
import { CaptureFormatError, LINKTYPE, cloneFrame, linktypeName, type CapturedFrame } from '../../capture/types.js';
import {
  concat, epb, epochStr, i64opt, idb, otherBlock, payload, pb, pcapHeader, pcapRecord, rng, shb, spb, u8opt,
} from './build.js';

const ROOT = process.cwd();
const TMP = fs.mkdtempSync(join(os.tmpdir(), 'smcscope-capture-'));
const HAVE_TSHARK = spawnSync('sh', ['-c', 'command -v tshark && command -v editcap'], { stdio: 'ignore' }).status === 0;

function tmp(name: string, bytes?: Uint8Array): string {
  const p = join(TMP, name);
  if (bytes !== undefined) fs.writeFileSync(p, bytes);
  return p;
}

function collect(r: CaptureReader): CapturedFrame[] {
  const out: CapturedFrame[] = [];
  for (let f = r.next(); f !== null; f = r.next()) out.push(cloneFrame(f));
  return out;
}

function tsharkFields(path: string, fields: string[]): string[][] {
  const args = ['-r', path, '-T', 'fields', '-E', 'separator=|'];
  for (const f of fields) args.push('-e', f);
  const res = spawnSync('tshark', args, { encoding: 'utf8' });
  return res.stdout.trim().split('\n').filter((l) => l !== '').map((l) => l.split('|'));
}

// ---------------------------------------------------------------------------------------
// Real captures. Expected values taken once from
//   capinfos -c -a -e <f>   and
//   tshark -r <f> -T fields -e frame.time_epoch -e frame.cap_len -e frame.len
// (count, first/last frame.time_epoch, sum of caplen, sum of origlen, first/last caplen).

const REAL: [string, number, string, string, number, number, number, number][] = [
  ['pcaps/a-first-contact.pcap', 45, '1795335097.505498000', '1795335099.932361000', 3998, 3998, 42, 62],
  ['pcaps/b-second-contact.pcap', 171, '1795335153.309555000', '1795335163.546955000', 14942, 14942, 42, 62],
  ['pcaps/c1-fallback-tcp-server.pcap', 12, '1795335216.241499000', '1795335217.114267000', 824, 824, 42, 66],
  ['pcaps/c2-fallback-server-decline.pcap', 15, '1795335262.272312000', '1795335263.619463000', 1226, 1226, 42, 66],
  ['pcaps/d-bulk-2MiB.pcap', 2252, '1795335356.641218000', '1795335358.545428000', 2232932, 2232932, 42, 62],
  ['pcaps/e-testlink-teardown.pcap', 72, '1795335403.272197000', '1795335420.381471000', 6472, 6472, 42, 102],
  ['pcaps/external/smcr-v1-clc/smcr-v1-clc.pcap', 14, '1573377000.000050000', '1573377001.000701000', 1377, 1377, 62, 102],
];

for (const [file, count, first, last, capSum, origSum, firstLen, lastLen] of REAL) {
  for (const chunkSize of [2 << 20, 4096]) {
    test(`real capture ${file} (chunk ${chunkSize})`, async (t) => {
      const r = await openCapture(join(ROOT, file), { chunkSize });
      t.is(r.format, 'pcap');
      t.is(r.linktype, LINKTYPE.ETHERNET);
      t.is(r.snaplen, 262144);
      t.is(r.nanosecond, false);
      t.is(r.littleEndian, true);
      t.is(r.fileSize, fs.statSync(join(ROOT, file)).size);
      let n = 0; let caps = 0; let origs = 0; let firstTs = ''; let lastTs = ''; let fl = 0; let ll = 0;
      for (let f = r.next(); f !== null; f = r.next()) {
        if (n === 0) { firstTs = epochStr(f.tsNs); fl = f.caplen; }
        lastTs = epochStr(f.tsNs); ll = f.caplen;
        t.is(f.data.length, f.caplen);
        t.is(f.linktype, 1);
        t.is(f.ifIndex, 0);
        n++; caps += f.caplen; origs += f.origlen;
      }
      t.deepEqual([n, firstTs, lastTs, caps, origs, fl, ll], [count, first, last, capSum, origSum, firstLen, lastLen]);
      t.is(r.framesRead, count);
      t.is(r.bytesRead, r.fileSize);
      t.false(r.truncated);
      t.deepEqual(r.warnings, []);
      t.is(r.next(), null);
      r.close();
    });
  }
}

test('real capture: frames are views, the frame object is reused, iterator works', (t) => {
  const path = join(ROOT, 'pcaps/a-first-contact.pcap');
  const file = fs.readFileSync(path);
  const r = openCaptureSync(path);
  const f1 = r.next();
  t.truthy(f1);
  const f1data = f1!.data;
  t.is(f1data.byteOffset, 24 + 16); // a view into the reader's buffer, not a copy
  t.deepEqual(Buffer.from(f1data), file.subarray(40, 40 + 42));
  const f2 = r.next();
  t.is(f2, f1!); // reused
  let n = 2;
  for (const f of r) { t.is(f, f1!); n++; }
  t.is(n, 45);
  r.close();

  const r2 = readCaptureBuffer(new Uint8Array(file), { reuseFrame: false });
  const all = [...r2];
  t.is(all.length, 45);
  t.not(all[0], all[1]);
  t.is(all[0]!.data.buffer, all[44]!.data.buffer); // views into the caller's bytes
  t.is(epochStr(all[44]!.tsNs), '1795335099.932361000');
});

// Frames of the reader's own block and of plain Uint8Arrays handed in are made with the
// Uint8Array constructor over the same memory (cheaper than subarray); a Buffer handed in keeps
// subarray views (Buffers, as before). Every path gives the bytes of the record, at the record's
// place in the memory, for pcap and pcapng, at byte offsets other than 0 too.
test('frame views: the bytes of each record at its place, same class as subarray gives, for every input kind', (t) => {
  const pcapPath = join(ROOT, 'pcaps/d-bulk-2MiB.pcap');
  const file = fs.readFileSync(pcapPath);
  // record offsets by walking the pcap headers (little-endian, 16-byte record headers)
  const offs: number[] = [];
  for (let o = 24; o + 16 <= file.length; ) { const cap = file.readUInt32LE(o + 8); offs.push(o + 16); o += 16 + cap; }
  const padded = new Uint8Array(file.length + 5);
  padded.set(file, 3);
  const inputs: Array<[string, () => CaptureReader, (i: number) => Uint8Array, unknown]> = [
    ['file', () => openCaptureSync(pcapPath, { chunkSize: 1 << 16 }), (i) => file.subarray(offs[i]!, offs[i]! + file.readUInt32LE(offs[i]! - 8)), Uint8Array],
    ['Uint8Array at offset 3', () => readCaptureBuffer(padded.subarray(3, 3 + file.length)), (i) => file.subarray(offs[i]!, offs[i]! + file.readUInt32LE(offs[i]! - 8)), Uint8Array],
    ['Buffer', () => readCaptureBuffer(file), (i) => file.subarray(offs[i]!, offs[i]! + file.readUInt32LE(offs[i]! - 8)), Buffer],
  ];
  for (const [name, open, want, cls] of inputs) {
    const r = open();
    let i = 0;
    for (let f = r.next(); f !== null; f = r.next(), i++) {
      const w = want(i);
      if (f.data.length !== w.length || !Buffer.from(f.data.buffer, f.data.byteOffset, f.data.length).equals(w)) { t.fail(`${name}: frame ${i + 1} bytes differ`); return; }
      if (Object.getPrototypeOf(f.data) !== (cls as { prototype: object }).prototype) { t.fail(`${name}: frame ${i + 1} is not a ${(cls as { name: string }).name}`); return; }
    }
    r.close();
    t.is(i, offs.length, `${name}: every record`);
  }
  // the in-memory Uint8Array: views share the caller's memory at the record's place
  const r = readCaptureBuffer(padded.subarray(3, 3 + file.length));
  const f = r.next()!;
  t.is(f.data.buffer, padded.buffer);
  t.is(f.data.byteOffset, 3 + offs[0]!);
});

test('every frame timestamp of d-bulk equals tshark frame.time_epoch', (t) => {
  if (!HAVE_TSHARK) { t.pass('tshark not installed'); return; }
  const path = join(ROOT, 'pcaps/d-bulk-2MiB.pcap');
  const want = tsharkFields(path, ['frame.time_epoch', 'frame.cap_len']);
  const got = collect(openCaptureSync(path, { chunkSize: 10000 })).map((f) => [epochStr(f.tsNs), String(f.caplen)]);
  t.deepEqual(got, want);
});

// ---------------------------------------------------------------------------------------
// pcap variants (hand-built)

function pcapVariant(le: boolean, ns: boolean, modified = false, ltField = 1): Uint8Array {
  const frac1 = ns ? 123456789 : 123456;
  return concat(
    pcapHeader({ le, ns, ltField, snaplen: 1000, modified }),
    pcapRecord(le, 1700000000, frac1, payload(60, 1), 60, modified),
    pcapRecord(le, 1700000001, 0, payload(1, 2), 1514, modified),
    pcapRecord(le, 0xffffffff, ns ? 999999999 : 999999, new Uint8Array(0), 0, modified),
  );
}

for (const le of [true, false]) {
  for (const ns of [false, true]) {
    test(`pcap ${le ? 'little' : 'big'}-endian ${ns ? 'ns' : 'µs'}`, (t) => {
      const bytes = pcapVariant(le, ns);
      const r = readCaptureBuffer(bytes);
      t.is(r.format, 'pcap');
      t.is(r.littleEndian, le);
      t.is(r.nanosecond, ns);
      t.is(r.snaplen, 1000);
      const fr = collect(r);
      t.is(fr.length, 3);
      t.is(fr[0]!.tsNs, ns ? 1700000000123456789n : 1700000000123456000n);
      t.deepEqual(fr[0]!.data, payload(60, 1));
      t.is(fr[1]!.tsNs, 1700000001000000000n);
      t.is(fr[1]!.caplen, 1);
      t.is(fr[1]!.origlen, 1514);
      t.is(fr[2]!.tsNs, 4294967295n * 1_000_000_000n + (ns ? 999999999n : 999999000n));
      t.is(fr[2]!.caplen, 0);
      t.false(r.truncated);
      if (HAVE_TSHARK) {
        const p = tmp(`v-${le}-${ns}.pcap`, bytes);
        t.deepEqual(tsharkFields(p, ['frame.time_epoch', 'frame.cap_len', 'frame.len']),
          fr.map((f) => [epochStr(f.tsNs), String(f.caplen), String(f.origlen)]));
      }
    });
  }
}

test('pcap modified (Kuznetzov 0xa1b2cd34) with 24-byte record headers, also as written by editcap', (t) => {
  for (const le of [true, false]) {
    const fr = collect(readCaptureBuffer(pcapVariant(le, false, true)));
    t.is(fr.length, 3);
    t.is(fr[0]!.tsNs, 1700000000123456000n);
    t.deepEqual(fr[0]!.data, payload(60, 1));
    t.is(fr[1]!.origlen, 1514);
  }
  if (!HAVE_TSHARK) return;
  const src = join(ROOT, 'pcaps/c1-fallback-tcp-server.pcap');
  const out = tmp('c1.modpcap');
  spawnSync('editcap', ['-F', 'modpcap', src, out]);
  const a = collect(openCaptureSync(src));
  const b = collect(openCaptureSync(out));
  t.is(b.length, 12);
  t.deepEqual(b, a);
});

test('pcap link-type field: FCS bits, reserved bits, other link types', (t) => {
  // FCS present, 2 units of 16 bits = 4 bytes, link type ETHERNET
  let r = readCaptureBuffer(pcapVariant(true, false, false, (0x04000000 | (2 << 28) | 1) >>> 0));
  t.is(r.linktype, 1);
  t.is(r.interfaces[0]!.fcsLen, 4);
  t.is(r.next()!.linktype, 1);
  t.deepEqual(r.warnings, []);
  r = readCaptureBuffer(pcapVariant(false, false, false, 0x00010000 | LINKTYPE.LINUX_SLL2));
  t.is(r.linktype, 276);
  t.is(r.interfaces[0]!.fcsLen, undefined);
  t.is(r.next()!.linktype, 276);
  t.regex(r.warnings[0] ?? '', /reserved bits/);
  t.is(linktypeName(276), 'LINUX_SLL2');
  t.is(linktypeName(LINKTYPE.INFINIBAND), 'INFINIBAND');
  t.is(linktypeName(9999), 'LINKTYPE_9999');
});

// ---------------------------------------------------------------------------------------
// pcapng (hand-built): two sections (LE, BE), six interfaces, if_tsresol 10^-6, 10^-9,
// 2^-20, 10^-3, 10^-10, if_tsoffset +1000 / -100 s, if_name, snaplen, EPB with two
// comments, SPB, obsolete PB, NRB / ISB / custom blocks skipped.
// Expected timestamps/lengths/comments: tshark 4.0.17 on this file (frame.time_epoch,
// frame.len, frame.cap_len, frame.comment), except that tshark shows frame.interface_id
// section-local (0/1 for the second section) where we count interfaces over the file.

const T = 1795335097n;
function multiSection(): Uint8Array {
  const LE = true; const BE = false;
  return concat(
    shb(LE, [{ code: 4, value: 'hand-built' }, { code: 3, value: 'Linux\0' }]),
    idb(LE, 1, [{ code: 2, value: 'eth0' }]),
    idb(LE, 101, [{ code: 2, value: 'rawif' }, u8opt(9, 9), i64opt(14, 1000n, LE)]),
    idb(LE, 276, [u8opt(9, 0x80 | 20)]),
    idb(LE, 247, [u8opt(9, 3), { code: 3, value: 'ib dev' }, u8opt(13, 4)], 128),
    epb(LE, 0, T * 1000000n + 123456n, payload(60, 1)),
    epb(LE, 1, T * 1000000000n + 123456789n, payload(41, 2), 1500, [{ code: 1, value: 'first comment' }, { code: 1, value: 'second' }]),
    otherBlock(LE, 4, Uint8Array.of(0, 0, 0, 0)),
    epb(LE, 2, (T << 20n) + 777777n, payload(70, 3)),
    epb(LE, 3, T * 1000n + 999n, payload(64, 4), 300),
    spb(LE, 200, payload(200, 5)),
    pb(LE, 1, T * 1000000000n + 5n, payload(33, 6)),
    otherBlock(LE, 0x40000bad, Uint8Array.of(1, 2, 3, 4, 5, 6, 7, 8)),
    otherBlock(LE, 5, new Uint8Array(12)),
    shb(BE),
    idb(BE, 228, [u8opt(9, 6), i64opt(14, -100n, BE)]),
    idb(BE, 1, [u8opt(9, 10), { code: 2, value: 'ten' }]),
    epb(BE, 0, T * 1000000n + 1n, payload(20, 7)),
    epb(BE, 1, T * 10000000000n + 12345678901n, payload(60, 8)),
    epb(BE, 0, (T + 1n) * 1000000n + 999999n, payload(20, 9)),
  );
}

const MULTI_EXPECTED: [string, number, string | undefined, number, number, number, string | undefined][] = [
  // time_epoch, ifIndex, ifName, linktype, origlen, caplen, comment
  ['1795335097.123456000', 0, 'eth0', 1, 60, 60, undefined],
  ['1795336097.123456789', 1, 'rawif', 101, 1500, 41, 'first comment\nsecond'],
  ['1795335097.741745948', 2, undefined, 276, 70, 70, undefined],
  ['1795335097.999000000', 3, undefined, 247, 300, 64, undefined],
  ['0.000000000', 0, 'eth0', 1, 200, 200, undefined], // SPB: no timestamp
  ['1795336097.000000005', 1, 'rawif', 101, 33, 33, undefined],
  ['1795334997.000001000', 4, undefined, 228, 20, 20, undefined],
  ['1795335098.234567890', 5, 'ten', 1, 60, 60, undefined],
  ['1795334998.999999000', 4, undefined, 228, 20, 20, undefined],
];

function summarize(fr: CapturedFrame[]): unknown[] {
  return fr.map((f) => [epochStr(f.tsNs), f.ifIndex, f.ifName, f.linktype, f.origlen, f.caplen, f.comment]);
}

for (const chunkSize of [1 << 20, 64]) {
  test(`pcapng multi-section / multi-interface (chunk ${chunkSize})`, (t) => {
    const bytes = multiSection();
    const r = openCaptureSync(tmp(`multi-${chunkSize}.pcapng`, bytes), { chunkSize });
    t.is(r.format, 'pcapng');
    const fr = collect(r);
    t.deepEqual(summarize(fr), MULTI_EXPECTED);
    t.deepEqual(fr[0]!.data, payload(60, 1));
    t.deepEqual(fr[1]!.data, payload(41, 2));
    t.deepEqual(fr[4]!.data, payload(200, 5));
    t.deepEqual(fr[7]!.data, payload(60, 8));
    t.deepEqual(r.warnings, []);
    t.false(r.truncated);
    t.is(r.bytesRead, bytes.length);
    t.is(r.littleEndian, false); // current (second) section
    t.deepEqual(r.sections.map((s) => [s.offset, s.littleEndian, s.version, s.userAppl, s.os]),
      [[0, true, '1.0', 'hand-built', 'Linux'], [r.sections[1]!.offset, false, '1.0', undefined, undefined]]);
    t.deepEqual(r.interfaces.map((i) => [i.index, i.section, i.linktype, i.name, i.tsBase, i.tsExp, i.tsOffsetSec, i.snaplen]), [
      [0, 0, 1, 'eth0', 10, 6, 0n, 0],
      [1, 0, 101, 'rawif', 10, 9, 1000n, 0],
      [2, 0, 276, undefined, 2, 20, 0n, 0],
      [3, 0, 247, undefined, 10, 3, 0n, 128],
      [4, 1, 228, undefined, 10, 6, -100n, 0],
      [5, 1, 1, 'ten', 10, 10, 0n, 0],
    ]);
    t.is(r.interfaces[3]!.description, 'ib dev');
    t.is(r.interfaces[3]!.fcsLen, 4);
    t.is(r.linktype, 1);
  });
}

test('pcapng multi-section file: tshark agrees on times, lengths and comments', (t) => {
  if (!HAVE_TSHARK) { t.pass('tshark not installed'); return; }
  const p = tmp('multi-tshark.pcapng', multiSection());
  // tshark shows the custom block as a record of its own; drop records without frame.len of a packet
  const rows = tsharkFields(p, ['frame.time_epoch', 'frame.len', 'frame.cap_len', 'frame.comment', 'frame.interface_name'])
    .filter((r) => r[0] !== '' || r[1] === '200');
  t.deepEqual(rows.map((r) => [r[0] === '' ? '0.000000000' : r[0], Number(r[1]), Number(r[2]), r[3] === '' ? undefined : r[3]!.replace(',', '\n')]),
    MULTI_EXPECTED.map((e) => [e[0], e[4], e[5], e[6]]));
  // section 1 interface names as tshark shows them (if_description when there is no if_name)
  t.deepEqual(rows.slice(0, 6).map((r) => r[4]), ['eth0', 'rawif', 'unknown', 'ib dev', 'eth0', 'rawif']);
});

test('pcapng written by editcap from a real pcap reads identically', (t) => {
  if (!HAVE_TSHARK) { t.pass('tshark not installed'); return; }
  const src = join(ROOT, 'pcaps/b-second-contact.pcap');
  const out = tmp('b.pcapng');
  spawnSync('editcap', ['-F', 'pcapng', src, out]);
  const r = openCaptureSync(out);
  const b = collect(r);
  t.is(r.format, 'pcapng');
  t.deepEqual(b, collect(openCaptureSync(src)));
  t.is(r.sections.length, 1);
  t.regex(r.sections[0]!.userAppl ?? '', /Editcap/i);
});

test('pcapng: SPB cut to the interface snaplen; EPB options other than comments ignored', (t) => {
  const le = true;
  const bytes = concat(
    shb(le),
    idb(le, 1, [], 50),
    spb(le, 200, payload(100, 1)), // 100 bytes stored, snaplen 50
    epb(le, 0, 5n, payload(10, 2), 10, [{ code: 2, value: Uint8Array.of(1, 0, 0, 0) }, { code: 1, value: 'x' }]),
  );
  const fr = collect(readCaptureBuffer(bytes));
  t.is(fr[0]!.caplen, 50);
  t.is(fr[0]!.origlen, 200);
  t.deepEqual(fr[0]!.data, payload(100, 1).subarray(0, 50));
  t.is(fr[1]!.tsNs, 5000n);
  t.is(fr[1]!.comment, 'x');
});

test('pcapng: a block with no interface yet is an error; empty sections are fine', (t) => {
  const le = true;
  const e = t.throws(() => collect(readCaptureBuffer(concat(shb(le), epb(le, 0, 0n, payload(4, 1))))), { instanceOf: CaptureFormatError });
  t.is(e?.message, 'corrupt packet block at byte 28: interface 0 not defined (section has 0)');
  const two = concat(shb(le), idb(le, 1), shb(false), shb(le), idb(le, 101), epb(le, 0, 1n, payload(4, 1)));
  const r = readCaptureBuffer(two);
  const fr = collect(r);
  t.is(fr.length, 1);
  t.is(fr[0]!.ifIndex, 1);
  t.is(fr[0]!.linktype, 101);
  t.is(r.sections.length, 3);
});

// ---------------------------------------------------------------------------------------
// Large files, large frames, constant memory

test('streaming: a file much bigger than the chunk keeps the buffer at one chunk', (t) => {
  const le = true;
  const parts: Uint8Array[] = [pcapHeader({ le, ltField: 1, snaplen: 65535 })];
  const N = 20000;
  for (let i = 0; i < N; i++) parts.push(pcapRecord(le, 1700000000 + (i >> 10), i % 1000000, payload(60 + (i % 200), i), 1514));
  const p = tmp('stream.pcap', concat(...parts));
  const size = fs.statSync(p).size;
  const chunk = 16384;
  const r = openCaptureSync(p, { chunkSize: chunk });
  const ab0 = process.memoryUsage().arrayBuffers;
  let n = 0; let maxCap = 0; let ok = true;
  for (let f = r.next(); f !== null; f = r.next()) {
    if (f.caplen !== 60 + (n % 200) || f.data[0] !== payload(1, n)[0]) ok = false;
    if (f.tsNs !== BigInt(1700000000 + (n >> 10)) * 1_000_000_000n + BigInt((n % 1000000) * 1000)) ok = false;
    maxCap = Math.max(maxCap, r.bufferCapacity);
    n++;
  }
  t.true(ok);
  t.is(n, N);
  t.true(size > 50 * chunk);
  t.is(maxCap, chunk);
  t.true(process.memoryUsage().arrayBuffers - ab0 < 4 << 20);
  t.is(r.bytesRead, size);
  r.close();
});

test('a frame larger than the chunk (pcap and pcapng) is read whole', (t) => {
  const big = payload(300_000, 9);
  const le = true;
  const pc = concat(pcapHeader({ le, ltField: 1, snaplen: 262144 }), pcapRecord(le, 1, 2, payload(10, 1)), pcapRecord(le, 3, 4, big), pcapRecord(le, 5, 6, payload(10, 2)));
  const ng = concat(shb(le), idb(le, 1), epb(le, 0, 1n, payload(10, 1)), epb(le, 0, 2n, big), epb(le, 0, 3n, payload(10, 2)));
  for (const [name, bytes] of [['big.pcap', pc], ['big.pcapng', ng]] as const) {
    const r = openCaptureSync(tmp(name, bytes), { chunkSize: 65536 });
    const fr = collect(r);
    t.is(fr.length, 3, name);
    t.deepEqual(fr[1]!.data, big);
    t.deepEqual(fr[2]!.data, payload(10, 2));
    t.true(r.bufferCapacity >= 300_000 && r.bufferCapacity <= 1 << 20);
    t.false(r.truncated);
  }
});

test('reads from a pipe (FIFO), sequentially', async (t) => {
  const fifo = join(TMP, 'fifo');
  if (spawnSync('mkfifo', [fifo]).status !== 0) { t.pass('no mkfifo'); return; }
  const src = join(ROOT, 'pcaps/d-bulk-2MiB.pcap');
  const child = spawn('sh', ['-c', `cat ${src} > ${fifo}`]);
  const done = new Promise((res) => child.on('exit', res));
  const r = await openCapture(fifo, { chunkSize: 65536 });
  t.is(r.fileSize, 0);
  let n = 0; let last = 0n;
  for (const f of r) { n++; last = f.tsNs; }
  r.close();
  await done;
  t.is(n, 2252);
  t.is(epochStr(last), '1795335358.545428000');
  t.false(r.truncated);
});

// ---------------------------------------------------------------------------------------
// Errors, truncation, garbage

function formatError(t: import('ava').ExecutionContext, fn: () => unknown, message: string | RegExp): void {
  const e = t.throws(fn, { instanceOf: CaptureFormatError });
  if (typeof message === 'string') t.is(e?.message, message); else t.regex(e?.message ?? '', message);
}

test('header-level errors are CaptureFormatError with one-line messages', async (t) => {
  formatError(t, () => readCaptureBuffer(new Uint8Array(0)), 'empty file (not a pcap or pcapng file)');
  formatError(t, () => readCaptureBuffer(Uint8Array.of(0xd4, 0xc3)), 'not a pcap or pcapng file (only 2 bytes)');
  formatError(t, () => readCaptureBuffer(Uint8Array.of(0x12, 0x34, 0x56, 0x78, 0, 0)), 'not a pcap or pcapng file (magic 0x12345678)');
  formatError(t, () => readCaptureBuffer(Uint8Array.of(0x1f, 0x8b, 8, 0, 0, 0)), /gzip-compressed/);
  formatError(t, () => readCaptureBuffer(pcapHeader({ le: true, ltField: 1 }).subarray(0, 20)), 'truncated pcap file header (20 of 24 bytes)');
  const v = pcapHeader({ le: true, ltField: 1 }); v[4] = 3;
  formatError(t, () => readCaptureBuffer(v), 'unsupported pcap version 3.4');
  const badBom = shb(true); badBom[8] = 0x99;
  formatError(t, () => readCaptureBuffer(badBom), 'corrupt pcapng section header at byte 0: byte-order magic 0x993c2b1a');
  formatError(t, () => readCaptureBuffer(shb(true, [], [2, 0])), 'unsupported pcapng version 2.0 at byte 0');
  const shortShb = shb(true); shortShb[4] = 13;
  formatError(t, () => readCaptureBuffer(shortShb), 'corrupt pcapng section header at byte 0: length 13');
  await t.throwsAsync(openCapture(join(TMP, 'does-not-exist.pcap')), { instanceOf: CaptureFormatError, message: /^cannot open .*does-not-exist\.pcap: no such file or directory$/ });
  await t.throwsAsync(openCapture(TMP), { instanceOf: CaptureFormatError, message: /is a directory/ });
  t.is(new CaptureFormatError('x', 5).offset, 5);
});

test('corrupt records in the middle: the frames before are delivered, then CaptureFormatError', (t) => {
  const le = true;
  // pcap record with an absurd caplen
  const pc = concat(pcapHeader({ le, ltField: 1 }), pcapRecord(le, 1, 0, payload(10, 1)), pcapRecord(le, 2, 0, payload(10, 2)));
  new DataView(pc.buffer).setUint32(24 + 26 + 8, 0x7fffffff, true);
  let r = readCaptureBuffer(pc);
  t.is(r.next()!.caplen, 10);
  formatError(t, () => r.next(), 'corrupt record at byte 50: caplen 2147483647 exceeds the maximum of 67108864');
  t.is(r.next(), null); // stays ended
  // maxRecordBytes is configurable
  r = readCaptureBuffer(concat(pcapHeader({ le, ltField: 1 }), pcapRecord(le, 1, 0, payload(100, 1))), { maxRecordBytes: 99 });
  formatError(t, () => r.next(), /caplen 100 exceeds the maximum of 99/);

  const ng = () => concat(shb(le), idb(le, 1), epb(le, 0, 1n, payload(8, 1)), epb(le, 0, 2n, payload(8, 2)));
  const epb2 = 28 + 20 + 40; // offset of the second EPB
  let b = ng(); b[epb2 + 4] = 41; // length not a multiple of 4
  r = readCaptureBuffer(b);
  t.truthy(r.next());
  formatError(t, () => r.next(), `corrupt block at byte ${epb2}: type 0x00000006 length 41`);
  b = ng(); b[epb2 + 39] = 0xff; // trailing length
  r = readCaptureBuffer(b);
  t.truthy(r.next());
  formatError(t, () => r.next(), `corrupt block at byte ${epb2}: length 40 but trailing length 4278190120`);
  b = ng(); b[epb2 + 20] = 9; // caplen > room in block
  r = readCaptureBuffer(b);
  t.truthy(r.next());
  formatError(t, () => r.next(), `corrupt packet block at byte ${epb2}: caplen 9 exceeds the block (40 bytes)`);
  b = ng(); b[epb2 + 8] = 3; // undefined interface
  r = readCaptureBuffer(b);
  t.truthy(r.next());
  formatError(t, () => r.next(), `corrupt packet block at byte ${epb2}: interface 3 not defined (section has 1)`);
});

function expectPrefix(t: import('ava').ExecutionContext, full: Uint8Array, recordEnds: number[], headerLen: number, name: string): void {
  for (let cut = 0; cut <= full.length; cut++) {
    const bytes = full.subarray(0, cut);
    let r: CaptureReader;
    try {
      r = readCaptureBuffer(bytes);
    } catch (e) {
      if (!(e instanceof CaptureFormatError) || cut >= headerLen) t.fail(`${name} cut ${cut}: ${String(e)}`);
      continue;
    }
    if (cut < headerLen) { t.fail(`${name} cut ${cut}: header accepted`); continue; }
    const fr = collect(r);
    const whole = recordEnds.filter((e) => e <= cut).length;
    if (fr.length !== whole) t.fail(`${name} cut ${cut}: ${fr.length} frames, want ${whole}`);
    const atBoundary = cut === headerLen || recordEnds.includes(cut);
    if (r.truncated === atBoundary) t.fail(`${name} cut ${cut}: truncated=${r.truncated}`);
    if (!atBoundary && !/^truncated (record|block|record header|block header) at byte \d+: \d+ of \d+ bytes present$/.test(r.warnings[0] ?? '')) {
      t.fail(`${name} cut ${cut}: warning ${r.warnings[0]}`);
    }
  }
  t.pass();
}

test('truncation at every byte: frames before the damage are kept, truncated flag + warning', (t) => {
  const le = true;
  const recs = [pcapRecord(le, 1, 1, payload(30, 1)), pcapRecord(le, 2, 2, payload(7, 2)), pcapRecord(le, 3, 3, payload(50, 3))];
  const pc = concat(pcapHeader({ le, ltField: 1 }), ...recs);
  const ends: number[] = []; let o = 24;
  for (const r of recs) { o += r.length; ends.push(o); }
  expectPrefix(t, pc, ends, 24, 'pcap');

  const head = concat(shb(le), idb(le, 1));
  const blocks = [epb(le, 0, 1n, payload(30, 1)), otherBlock(le, 5, new Uint8Array(8)), epb(le, 0, 2n, payload(7, 2)), spb(le, 9, payload(9, 3))];
  const ng = concat(head, ...blocks);
  const nge: number[] = []; o = head.length;
  for (const b of blocks) { o += b.length; if (b[0] !== 5) nge.push(o); else nge.push(-1); }
  // the ISB (no frame) boundary: cutting there is a clean end with one frame
  const isbEnd = head.length + blocks[0]!.length + blocks[1]!.length;
  for (let cut = 0; cut <= ng.length; cut++) {
    let r: CaptureReader;
    try { r = readCaptureBuffer(ng.subarray(0, cut)); } catch (e) {
      if (!(e instanceof CaptureFormatError) || cut >= 28) t.fail(`pcapng cut ${cut}: ${String(e)}`);
      continue;
    }
    const fr = collect(r);
    const whole = nge.filter((e) => e > 0 && e <= cut).length;
    if (fr.length !== whole) t.fail(`pcapng cut ${cut}: ${fr.length} frames, want ${whole}`);
    const boundary = cut === 28 || cut === head.length || cut === isbEnd || nge.includes(cut);
    if (r.truncated === boundary) t.fail(`pcapng cut ${cut}: truncated=${r.truncated} ${r.warnings.join()}`);
  }
  // the whole multi-section file too: never anything but frames or CaptureFormatError
  const multi = multiSection();
  for (let cut = 0; cut <= multi.length; cut++) {
    try { collect(readCaptureBuffer(multi.subarray(0, cut))); } catch (e) {
      if (!(e instanceof CaptureFormatError)) t.fail(`multi cut ${cut}: ${String(e)}`);
    }
  }
});

test('a truncated file on disk keeps its frames (d-bulk cut in the middle of a record)', (t) => {
  const full = fs.readFileSync(join(ROOT, 'pcaps/d-bulk-2MiB.pcap'));
  const p = tmp('cut.pcap', full.subarray(0, 1_000_000));
  const r = openCaptureSync(p, { chunkSize: 65536 });
  const fr = collect(r);
  t.true(r.truncated);
  t.is(r.warnings.length, 1);
  t.regex(r.warnings[0]!, /^truncated record at byte \d+: \d+ of \d+ bytes present$/);
  // same frames as the first n of the full file
  const ref = collect(readCaptureBuffer(new Uint8Array(full))).slice(0, fr.length);
  t.deepEqual(fr, ref);
  t.true(fr.length > 900);
});

test('random bytes and random mutations give only frames or CaptureFormatError', (t) => {
  const rand = rng(12345);
  const seeds: Uint8Array[] = [
    multiSection(),
    pcapVariant(true, false), pcapVariant(false, true), pcapVariant(true, false, true),
    new Uint8Array(fs.readFileSync(join(ROOT, 'pcaps/a-first-contact.pcap'))),
  ];
  let frames = 0; let errors = 0;
  const run = (bytes: Uint8Array, label: string): void => {
    try {
      const r = readCaptureBuffer(bytes, { maxRecordBytes: 1 << 20 });
      for (let f = r.next(); f !== null; f = r.next()) {
        if (f.data.length !== f.caplen || typeof f.tsNs !== 'bigint') t.fail(`${label}: bad frame`);
        frames++;
      }
    } catch (e) {
      if (!(e instanceof CaptureFormatError)) t.fail(`${label}: ${String(e)}`);
      else errors++;
    }
  };
  for (let i = 0; i < 3000; i++) {
    const src = seeds[i % seeds.length]!;
    const b = src.slice();
    const flips = 1 + Math.floor(rand() * 8);
    for (let k = 0; k < flips; k++) {
      const at = Math.floor(rand() * b.length);
      b[at] = rand() < 0.5 ? Math.floor(rand() * 256) : b[at]! ^ (1 << Math.floor(rand() * 8));
    }
    run(b.subarray(0, rand() < 0.3 ? Math.floor(rand() * b.length) : b.length), `mutation ${i}`);
  }
  for (let i = 0; i < 1000; i++) {
    const n = Math.floor(rand() * 300);
    const b = new Uint8Array(n);
    for (let k = 0; k < n; k++) b[k] = Math.floor(rand() * 256);
    // keep a valid magic half of the time so the body parsers see garbage
    if (i % 2 === 0 && n >= 4) b.set([[0xd4, 0xc3, 0xb2, 0xa1], [0x0a, 0x0d, 0x0d, 0x0a], [0xa1, 0xb2, 0x3c, 0x4d]][i % 3]!, 0);
    if (i % 6 === 2 && n >= 12) b.set([0x4d, 0x3c, 0x2b, 0x1a], 8);
    run(b, `random ${i}`);
  }
  t.true(frames > 1000);
  t.true(errors > 100);
});

// ---------------------------------------------------------------------------------------
// Performance (logged; the assertions are loose so a loaded machine does not fail them)

test('performance: frames/s of the reader alone', (t) => {
  const path = join(ROOT, 'pcaps/d-bulk-2MiB.pcap');
  let best = Infinity;
  for (let k = 0; k < 20; k++) {
    const t0 = performance.now();
    const r = openCaptureSync(path);
    let n = 0;
    for (let f = r.next(); f !== null; f = r.next()) n += f.caplen > 0 ? 1 : 1;
    r.close();
    best = Math.min(best, performance.now() - t0);
    t.is(n, 2252);
  }
  const real = 2252 / best * 1000;
  // synthetic 300k small frames, pcap and pcapng, from disk with the default chunk
  const le = true;
  const N = 300_000;
  const pcParts: Uint8Array[] = [pcapHeader({ le, ltField: 1, snaplen: 65535 })];
  const ngParts: Uint8Array[] = [shb(le), idb(le, 1, [u8opt(9, 9)])];
  const rec = payload(66, 1);
  for (let i = 0; i < 1000; i++) {
    pcParts.push(pcapRecord(le, 1700000000 + (i >> 8), i * 1000, rec));
    ngParts.push(epb(le, 0, 1700000000_000000000n + BigInt(i) * 1000n, rec));
  }
  const pcBlock = concat(...pcParts.slice(1)); const ngBlock = concat(...ngParts.slice(2));
  const rates: Record<string, number> = {};
  for (const [name, head, body] of [['pcap', pcParts[0]!, pcBlock], ['pcapng', concat(ngParts[0]!, ngParts[1]!), ngBlock]] as const) {
    const p = join(TMP, `perf.${name}`);
    const fd = fs.openSync(p, 'w');
    fs.writeSync(fd, head);
    for (let i = 0; i < N / 1000; i++) fs.writeSync(fd, body);
    fs.closeSync(fd);
    let b = Infinity;
    for (let k = 0; k < 4; k++) {
      const t0 = performance.now();
      const r = openCaptureSync(p);
      let n = 0;
      for (let f = r.next(); f !== null; f = r.next()) n++;
      r.close();
      b = Math.min(b, performance.now() - t0);
      t.is(n, N);
    }
    rates[name] = N / b * 1000;
  }
  t.log(`reader: d-bulk ${(real / 1e6).toFixed(2)} M frames/s; 300k x 66 B: pcap ${(rates.pcap! / 1e6).toFixed(2)} M/s, pcapng ${(rates.pcapng! / 1e6).toFixed(2)} M/s`);
  t.true(real > 500_000);
  t.true(rates.pcap! > 500_000);
  t.true(rates.pcapng! > 500_000);
});

test.after.always(() => { fs.rmSync(TMP, { recursive: true, force: true }); });

test('(seconds, ns) numbers beside tsNs: the same instant wherever given (pcap always; pcapng at µs/ms resolution, with if_tsoffset); never for SPB', (t) => {
  const check = (r: CaptureReader): boolean[] => {
    const given: boolean[] = [];
    for (let f = r.next(); f !== null; f = r.next()) {
      const sec = f.tsSec ?? -1;
      given.push(sec >= 0);
      if (sec >= 0) {
        t.true(f.tsSubNs! >= 0 && f.tsSubNs! < 1e9 && Number.isInteger(f.tsSubNs));
        t.is(BigInt(sec) * 1_000_000_000n + BigInt(f.tsSubNs!), f.tsNs);
      }
    }
    r.close();
    return given;
  };
  // µs (if 0), ns with offset (1), 2^-20 (2), ms (3), SPB, PB ns; then µs with -100 s offset, 10^-10, µs
  t.deepEqual(check(openCaptureSync(tmp('parts.pcapng', multiSection()))), [true, false, false, true, false, false, true, false, true]);
  for (const [name] of REAL) {
    const given = check(openCaptureSync(join(ROOT, name)));
    t.true(given.length > 0 && given.every(Boolean), name);
  }
  for (const [le, ns] of [[true, false], [false, true]] as const) t.true(check(readCaptureBuffer(pcapVariant(le, ns))).every(Boolean));
});
