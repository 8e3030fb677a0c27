import test from 'ava';
import * as fs from 'node:fs';
import * as os from 'node:os';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { openCaptureSync, readCaptureBuffer } from '../../capture/reader.js';
import { MemorySink, PcapWriter, PcapngWriter, createCaptureWriter } from '../../capture/writer.js';
import { CaptureFormatError, LINKTYPE, cloneFrame, type CapturedFrame } from '../../capture/types.js';
import { epochStr, payload } from './build.js';

const ROOT = process.cwd();
const TMP = fs.mkdtempSync(join(os.tmpdir(), 'smcscope-capw-'));
const HAVE_TSHARK = spawnSync('sh', ['-c', 'command -v tshark && command -v capinfos'], { stdio: 'ignore' }).status === 0;

function collect(bytes: Uint8Array): CapturedFrame[] {
  const r = readCaptureBuffer(bytes);
  const out: CapturedFrame[] = [];
  for (let f = r.next(); f !== null; f = r.next()) out.push(cloneFrame(f));
  if (r.truncated) throw new Error('truncated');
  return out;
}

function fileFrames(path: string): CapturedFrame[] {
  return collect(new Uint8Array(fs.readFileSync(path)));
}

function tshark(path: string, fields: string[]): string[][] {
  const args = ['-r', path, '-T', 'fields', '-E', 'separator=|'];
  for (const f of fields) args.push('-e', f);
  const res = spawnSync('tshark', args, { encoding: 'utf8' });
  return res.stdout.trim().split('\n').filter((l) => l !== '').map((l) => l.split('|'));
}

function capinfos(path: string): string {
  return spawnSync('capinfos', [path], { encoding: 'utf8' }).stdout;
}

function frame(i: number, o: Partial<CapturedFrame> = {}): CapturedFrame {
  const data = payload(20 + ((i * 37) % 150), i);
  return { data, caplen: data.length, origlen: data.length + (i % 3 === 0 ? 100 : 0), tsNs: 1795335097_000000000n + BigInt(i) * 1_234_567_891n + BigInt(i % 7), linktype: 1, ifIndex: 0, ...o };
}

/** Frames of mixed link types / interface names / comments, ns timestamps. */
function mixed(): CapturedFrame[] {
  const lts = [LINKTYPE.ETHERNET, LINKTYPE.RAW, LINKTYPE.LINUX_SLL2, LINKTYPE.INFINIBAND];
  const names = [undefined, 'eth0', 'ib0'];
  const out: CapturedFrame[] = [];
  for (let i = 0; i < 40; i++) {
    const f = frame(i, { linktype: lts[i % 4]!, tsNs: 1795335097_000000000n + BigInt(i) * 987_654_321n + 1n });
    const name = names[(i >> 2) % 3];
    if (name !== undefined) f.ifName = name;
    if (i % 5 === 0) f.comment = i === 10 ? 'two\nlines ünïcode' : `comment ${i}`;
    out.push(f);
  }
  out.push(frame(99, { tsNs: 0n })); // epoch
  out.push(frame(98, { data: new Uint8Array(0), caplen: 0, origlen: 0 })); // empty frame
  return out;
}

/** The interface numbering the pcapng writer must produce: first use of (linktype, name). */
function expectedIfIndex(frames: CapturedFrame[]): number[] {
  const ids = new Map<string, number>();
  return frames.map((f) => {
    const k = `${f.linktype}/${f.ifName ?? ''}`;
    if (!ids.has(k)) ids.set(k, ids.size);
    return ids.get(k)!;
  });
}

test('pcapng round trip: reader(writer(frames)) == frames (mixed link types, names, comments, ns)', (t) => {
  const frames = mixed();
  for (const bigEndian of [false, true]) {
    const sink = new MemorySink();
    const w = new PcapngWriter(sink, { bigEndian, bufferSize: 4096 });
    for (const f of frames) w.write(f);
    w.close();
    t.is(w.framesWritten, frames.length);
    const bytes = sink.toBytes();
    t.is(w.bytesWritten, bytes.length);
    const back = collect(bytes);
    const ifIdx = expectedIfIndex(frames);
    t.deepEqual(back, frames.map((f, i) => ({ ...f, ifIndex: ifIdx[i]! })));
    const r = readCaptureBuffer(bytes);
    t.is(r.sections[0]!.userAppl, 'smcscope');
    t.is(r.sections[0]!.littleEndian, !bigEndian);
  }
});

test('pcap round trip: ns exact, µs truncated, both byte orders', (t) => {
  const frames = Array.from({ length: 50 }, (_, i) => frame(i));
  for (const bigEndian of [false, true]) {
    for (const nanosecond of [true, false]) {
      const sink = new MemorySink();
      const w = new PcapWriter(sink, { nanosecond, bigEndian });
      for (const f of frames) w.write(f);
      w.close();
      const r = readCaptureBuffer(sink.toBytes());
      t.is(r.nanosecond, nanosecond);
      t.is(r.littleEndian, !bigEndian);
      t.is(r.linktype, 1);
      const back: CapturedFrame[] = [];
      for (const f of r) back.push(cloneFrame(f));
      t.deepEqual(back, frames.map((f) => ({ ...f, tsNs: nanosecond ? f.tsNs : f.tsNs - (f.tsNs % 1000n) })));
    }
  }
});

test('writers produce files tshark/capinfos read: same count, timestamps to the ns (pcapng), names, comments', (t) => {
  if (!HAVE_TSHARK) { t.pass('tshark not installed'); return; }
  const frames = mixed();
  const p = join(TMP, 'mixed.pcapng');
  const w = new PcapngWriter(p, { comment: 'test file', os: 'Linux' });
  for (const f of frames) w.write(f);
  w.close();
  const info = capinfos(p);
  t.regex(info, /Number of packets:\s+42\b/);
  t.regex(info, /Capture application:\s+smcscope/);
  t.regex(info, new RegExp(`Number of interfaces in file: ${Math.max(...expectedIfIndex(frames)) + 1}\\b`));
  t.regex(info, /Number of interfaces in file: 12\b/); // 4 link types x (no name, eth0, ib0)
  t.regex(info, /File encapsulation:\s+Per packet/);
  const rows = tshark(p, ['frame.time_epoch', 'frame.cap_len', 'frame.len', 'frame.interface_id', 'frame.interface_name', 'frame.comment', 'frame.encap_type']);
  const ifIdx = expectedIfIndex(frames);
  t.deepEqual(rows.map((r) => r.slice(0, 5)), frames.map((f, i) => [
    epochStr(f.tsNs), String(f.caplen), String(f.origlen), String(ifIdx[i]), f.ifName ?? 'unknown',
  ]));
  t.is(rows[5]![5], 'comment 5');
  t.is(rows[10]![5], 'two\nlines ünïcode'.replace('\n', '\\n'));
  // encap types (Wireshark WTAP_ENCAP numbers): Ethernet 1, raw IP 7, SLL2 210; tshark 4.0.17
  // has no mapping for LINKTYPE_INFINIBAND (247): "Unknown (0)" — the link type is still kept.
  t.deepEqual([rows[0]![6], rows[1]![6], rows[2]![6], rows[3]![6]], ['1', '7', '210', '0']);
});

test('pcap files (µs, ns, big-endian) open in tshark with the same timestamps', (t) => {
  if (!HAVE_TSHARK) { t.pass('tshark not installed'); return; }
  const frames = Array.from({ length: 30 }, (_, i) => frame(i, { linktype: LINKTYPE.LINUX_SLL }));
  for (const [nanosecond, bigEndian] of [[false, false], [true, false], [true, true]] as const) {
    const p = join(TMP, `w-${nanosecond}-${bigEndian}.pcap`);
    const w = new PcapWriter(p, { nanosecond, bigEndian });
    for (const f of frames) w.write(f);
    w.close();
    t.regex(capinfos(p), new RegExp(`File type:\\s+Wireshark/tcpdump/... - ${nanosecond ? 'nanosecond ' : ''}pcap`));
    t.regex(capinfos(p), /Number of packets:\s+30\b/);
    t.deepEqual(tshark(p, ['frame.time_epoch', 'frame.cap_len', 'frame.len', 'sll.pkttype']).map((r) => r.slice(0, 3)),
      frames.map((f) => [epochStr(nanosecond ? f.tsNs : f.tsNs - (f.tsNs % 1000n)), String(f.caplen), String(f.origlen)]));
  }
});

test('real capture copied through both writers is unchanged (pcap µs: byte-identical)', (t) => {
  const src = join(ROOT, 'pcaps/b-second-contact.pcap');
  const orig = fileFrames(src);
  const p1 = join(TMP, 'copy.pcap');
  const p2 = join(TMP, 'copy.pcapng');
  const r = openCaptureSync(src, { chunkSize: 1024 });
  const w1 = new PcapWriter(p1, { bufferSize: 4096 });
  const w2 = createCaptureWriter(p2);
  t.is(w2.format, 'pcapng');
  for (const f of r) { w1.write(f); w2.write(f); }
  r.close(); w1.close(); w2.close();
  t.deepEqual(fs.readFileSync(p1), fs.readFileSync(src)); // same header (snaplen 262144) and records
  t.deepEqual(fileFrames(p2), orig);
  if (HAVE_TSHARK) {
    t.deepEqual(tshark(p2, ['frame.time_epoch', 'frame.len', 'eth.src']), tshark(src, ['frame.time_epoch', 'frame.len', 'eth.src']));
  }
});

test('pcap writer: one link type per file, snaplen cut, header on close, fd target, big frames', (t) => {
  const sink = new MemorySink();
  const w = new PcapWriter(sink);
  w.write(frame(1));
  const e = t.throws(() => w.write(frame(2, { linktype: LINKTYPE.RAW })), { instanceOf: CaptureFormatError });
  t.is(e?.message, 'pcap holds one link type: file ETHERNET, frame RAW (write pcapng instead)');
  w.close();
  w.close(); // idempotent
  t.throws(() => w.write(frame(3)), { instanceOf: CaptureFormatError, message: 'write after close' });
  t.is(collect(sink.toBytes()).length, 1);

  // snaplen
  const s2 = new MemorySink();
  const w2 = new PcapWriter(s2, { snaplen: 16, linktype: 1 });
  w2.write(frame(4));
  w2.close();
  const f4 = collect(s2.toBytes())[0]!;
  t.is(f4.caplen, 16);
  t.is(f4.origlen, frame(4).origlen);
  t.deepEqual(f4.data, frame(4).data.subarray(0, 16));

  // empty file: header only, link type from options, FCS bits
  const s3 = new MemorySink();
  new PcapWriter(s3, { linktype: LINKTYPE.IPV4, fcsLen: 4 }).close();
  const r3 = readCaptureBuffer(s3.toBytes());
  t.is(s3.length, 24);
  t.is(r3.linktype, 228);
  t.is(r3.interfaces[0]!.fcsLen, 4);
  t.is(r3.next(), null);

  // fd target (not closed by the writer) + a frame bigger than the buffer
  const p = join(TMP, 'fd.pcap');
  const fd = fs.openSync(p, 'w');
  const big = payload(200_000, 3);
  const w4 = new PcapWriter(fd, { bufferSize: 4096 });
  w4.write(frame(1));
  w4.write({ ...frame(2), data: big, caplen: big.length, origlen: big.length });
  w4.write(frame(3));
  w4.close();
  fs.writeSync(fd, new Uint8Array(0)); // still open
  fs.closeSync(fd);
  const back = fileFrames(p);
  t.is(back.length, 3);
  t.deepEqual(back[1]!.data, big);
  t.deepEqual(back[2]!.data, frame(3).data);
  if (HAVE_TSHARK) t.regex(capinfos(p), /Number of packets:\s+3\b/);
});

test('pcapng writer: interfaces on first use, explicit addInterface, big frames, empty file', (t) => {
  const sink = new MemorySink();
  const w = new PcapngWriter(sink, { bufferSize: 4096 });
  t.is(w.addInterface(LINKTYPE.INFINIBAND, 'mlx5_0'), 0);
  t.is(w.addInterface(LINKTYPE.INFINIBAND, 'mlx5_0'), 0);
  const big = payload(100_001, 5);
  w.write({ ...frame(1), data: big, caplen: big.length, origlen: 100_001, linktype: LINKTYPE.INFINIBAND, ifName: 'mlx5_0' });
  w.write(frame(2));
  w.write(frame(3, { ifName: '' })); // empty name != no name
  w.close();
  const r = readCaptureBuffer(sink.toBytes());
  const fr: CapturedFrame[] = [];
  for (const f of r) fr.push(cloneFrame(f));
  t.deepEqual(fr.map((f) => [f.ifIndex, f.linktype, f.ifName, f.caplen]), [[0, 247, 'mlx5_0', 100_001], [1, 1, undefined, frame(2).caplen], [2, 1, '', frame(3).caplen]]);
  t.deepEqual(fr[0]!.data, big);
  t.deepEqual(r.interfaces.map((i) => [i.tsBase, i.tsExp, i.snaplen]), [[10, 9, 0], [10, 9, 0], [10, 9, 0]]);

  const empty = new MemorySink();
  new PcapngWriter(empty).close();
  const re = readCaptureBuffer(empty.toBytes());
  t.is(re.format, 'pcapng');
  t.is(re.next(), null);
  t.false(re.truncated);
  t.is(createCaptureWriter(new MemorySink()).format, 'pcap');
  t.is(createCaptureWriter(join(TMP, 'x.PCAPNG')).format, 'pcapng');
  t.is(createCaptureWriter(new MemorySink(), { format: 'pcapng' }).format, 'pcapng');
  t.throws(() => new PcapWriter(join(TMP, 'no/such/dir/x.pcap')), { instanceOf: CaptureFormatError, message: /^cannot create / });
});

test('timestamps across the 2^32 ns boundary and far from 1970 survive pcapng', (t) => {
  const ts = [0n, 1n, 4294967295n, 4294967296n, 4294967297n, 1n << 40n, (1n << 40n) - 1n, 1795335097_999999999n, 1795335098_000000000n, 18446744073709551615n, 2n ** 63n];
  const sink = new MemorySink();
  const w = new PcapngWriter(sink);
  for (const x of ts) w.write(frame(1, { tsNs: x }));
  w.close();
  t.deepEqual(collect(sink.toBytes()).map((f) => f.tsNs), ts);
  // pcap: seconds wrap to 32 bits (the format's limit)
  const s2 = new MemorySink();
  const w2 = new PcapWriter(s2, { nanosecond: true });
  for (const x of [0n, 999_999_999n, 1_000_000_000n, 4294967295_999999999n]) w2.write(frame(1, { tsNs: x }));
  w2.close();
  t.deepEqual(collect(s2.toBytes()).map((f) => f.tsNs), [0n, 999_999_999n, 1_000_000_000n, 4294967295_999999999n]);
});

test('performance: writer frames/s (logged)', (t) => {
  const N = 200_000;
  const f = frame(1);
  const rates: string[] = [];
  for (const fmt of ['pcap', 'pcapng'] as const) {
    const p = join(TMP, `perf.${fmt}`);
    const t0 = performance.now();
    const w = createCaptureWriter(p, { format: fmt, nanosecond: true });
    for (let i = 0; i < N; i++) { f.tsNs = 1795335097_000000000n + BigInt(i * 1000); w.write(f); }
    w.close();
    const dt = performance.now() - t0;
    rates.push(`${fmt} ${(N / dt / 1e3).toFixed(2)} M/s`);
    const r = openCaptureSync(p);
    let n = 0;
    for (let g = r.next(); g !== null; g = r.next()) n++;
    r.close();
    t.is(n, N);
  }
  t.log(`writer: ${rates.join(', ')}`);
});

test.after.always(() => { fs.rmSync(TMP, { recursive: true, force: true }); });
