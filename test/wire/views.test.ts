// The field-table views (dissectors/wire/views/) against the codecs and against an independent
// reading of the bytes (DataView at the offsets of the specs, written out here by hand), on
// every frame of every bundled capture; setters rebuild the same bytes.
import test from 'ava';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { openCaptureSync } from '../../capture/reader.js';
import { FrameDecoder } from '../../dissectors/frame.js';
import { decodeCdc, encodeCdc } from '../../dissectors/wire/cdc.js';
import { decodeBth, decodeReth, decodeAeth, decodeDeth, encodeBth, encodeReth, encodeAeth, encodeDeth } from '../../dissectors/wire/ib.js';
import { decodeUdp } from '../../dissectors/net/udp.js';
import { BthView, RethView, AethView, DethView, BTH_FIELDS } from '../../dissectors/wire/views/ib.js';
import { CdcView } from '../../dissectors/wire/views/cdc.js';
import { UdpView, Ipv4View, EthernetView } from '../../dissectors/wire/views/net.js';
import { defineView, tableSize } from '../../dissectors/wire/views/field.js';
import { ROOT } from '../helpers.js';

const PCAPS = join(ROOT, 'pcaps');
/** Every bundled capture (read when a test runs). */
function bundled(): string[] { return readdirSync(PCAPS).filter((f) => f.endsWith('.pcap') || f.endsWith('.pcapng')).map((f) => join(PCAPS, f)); }

interface Found { udp: number; bth: number; reth: number; aeth: number; deth: number; cdc: number }

/** Walk every RoCEv2-over-IPv4/Ethernet frame of `path`, calling `visit` with the offsets. */
function walk(path: string, visit: (b: Uint8Array, udp: number, bth: number) => void): number {
  const r = openCaptureSync(path);
  let n = 0;
  try {
    for (let f = r.next(); f; f = r.next()) {
      const b = f.data;
      if (f.linktype !== 1 || b.length < 14 + 20 + 8 + 12) continue;
      const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
      let et = dv.getUint16(12), l3 = 14;
      if (et === 0x8100) { et = dv.getUint16(16); l3 = 18; }
      if (et !== 0x0800 || dv.getUint8(l3 + 9) !== 17) continue;
      const udp = l3 + (dv.getUint8(l3) & 15) * 4;
      if (udp + 8 + 12 > b.length || dv.getUint16(udp + 2) !== 4791) continue;
      visit(b, udp, udp + 8);
      n++;
    }
  } finally { r.close(); }
  return n;
}

test('views read what the spec offsets say, on every RoCEv2 frame of every bundled capture', (t) => {
  const found: Found = { udp: 0, bth: 0, reth: 0, aeth: 0, deth: 0, cdc: 0 };
  const udpV = new UdpView(), bthV = new BthView(), rethV = new RethView(), aethV = new AethView(), dethV = new DethView(), cdcV = new CdcView();
  const ipV = new Ipv4View(), ethV = new EthernetView();
  for (const path of bundled()) {
    walk(path, (b, udp, bth) => {
      const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
      // Ethernet / IPv4 (no VLAN in the bundled captures' RoCE frames: checked by ethertype)
      ethV.reset(b, 0);
      if (ethV.ethertype === 0x0800) {
        ipV.reset(b, 14);
        t.is(ipV.version, dv.getUint8(14) >> 4);
        t.is(ipV.ihl * 4, udp - 14);
        t.is(ipV.totalLength, dv.getUint16(16));
        t.is(ipV.protocol, 17);
        t.is(ipV.src, dv.getUint32(26));
        t.is(ipV.dst, dv.getUint32(30));
        t.is(ipV.dontFragment, (dv.getUint8(20) & 0x40) !== 0);
      }
      udpV.reset(b, udp);
      t.is(udpV.srcPort, dv.getUint16(udp)); t.is(udpV.dstPort, 4791); t.is(udpV.length, dv.getUint16(udp + 4)); t.is(udpV.checksum, dv.getUint16(udp + 6));
      t.deepEqual(decodeUdp(b.subarray(udp)).value, { srcPort: udpV.srcPort, dstPort: udpV.dstPort, length: udpV.length, checksum: udpV.checksum });
      found.udp++;
      bthV.reset(b, bth);
      const op = dv.getUint8(bth);
      t.is(bthV.opcode, op);
      t.is(bthV.se, (dv.getUint8(bth + 1) & 0x80) !== 0);
      t.is(bthV.padCount, (dv.getUint8(bth + 1) >> 4) & 3);
      t.is(bthV.tver, dv.getUint8(bth + 1) & 15);
      t.is(bthV.pkey, dv.getUint16(bth + 2));
      t.is(bthV.destQp, dv.getUint32(bth + 4) & 0xffffff);
      t.is(bthV.ackReq, (dv.getUint8(bth + 8) & 0x80) !== 0);
      t.is(bthV.psn, dv.getUint32(bth + 8) & 0xffffff);
      const d = decodeBth(b.subarray(bth)).value;
      for (const k of Object.keys(BTH_FIELDS) as (keyof typeof BTH_FIELDS)[]) t.is(bthV[k], d[k], `BTH ${k}`);
      t.deepEqual(encodeBth(d), b.subarray(bth, bth + 12), 'BTH setters rebuild the bytes');
      found.bth++;
      const ext = bth + 12;
      if (op === 0x06 || op === 0x0a) {
        rethV.reset(b, ext);
        t.is(rethV.va, dv.getBigUint64(ext)); t.is(rethV.rkey, dv.getUint32(ext + 8)); t.is(rethV.dmaLen, dv.getUint32(ext + 12));
        t.deepEqual(decodeReth(b.subarray(ext)).value, { va: rethV.va, rkey: rethV.rkey, dmaLen: rethV.dmaLen });
        t.deepEqual(encodeReth(decodeReth(b.subarray(ext)).value), b.subarray(ext, ext + 16));
        found.reth++;
      }
      if (op === 0x11) {
        aethV.reset(b, ext);
        const s = dv.getUint8(ext);
        t.is(aethV.syndrome, s); t.is(aethV.kindBits, (s >> 5) & 3); t.is(aethV.code, s & 31); t.is(aethV.msn, dv.getUint32(ext) & 0xffffff);
        const a = decodeAeth(b.subarray(ext)).value;
        t.is(a.syndrome, aethV.syndrome); t.is(a.msn, aethV.msn); t.is(a.code, aethV.code);
        t.deepEqual(encodeAeth(a), b.subarray(ext, ext + 4));
        found.aeth++;
      }
      if (op === 0x64 || op === 0x65) { // UD SEND ONLY (with immediate): DETH
        dethV.reset(b, ext);
        t.is(dethV.qkey, dv.getUint32(ext)); t.is(dethV.srcQp, dv.getUint32(ext + 4) & 0xffffff);
        t.deepEqual(decodeDeth(b.subarray(ext)).value, { qkey: dethV.qkey, resv8: dethV.resv8, srcQp: dethV.srcQp });
        t.deepEqual(encodeDeth(decodeDeth(b.subarray(ext)).value), b.subarray(ext, ext + 8));
        found.deth++;
      }
      if (op === 0x04 && dv.getUint8(ext) === 0xfe && ext + 44 + 4 <= b.length) {
        const cdc = b.subarray(ext, ext + 44);
        cdcV.reset(cdc);
        t.is(cdcV.seq, dv.getUint16(ext + 2)); t.is(cdcV.token, dv.getUint32(ext + 4));
        t.is(cdcV.prodWrap, dv.getUint16(ext + 10)); t.is(cdcV.prodCount, dv.getUint32(ext + 12));
        t.is(cdcV.consWrap, dv.getUint16(ext + 18)); t.is(cdcV.consCount, dv.getUint32(ext + 20));
        t.is(cdcV.writeBlocked, (dv.getUint8(ext + 24) & 0x80) !== 0);
        t.is(cdcV.peerConnClosed, (dv.getUint8(ext + 25) & 0x40) !== 0);
        const m = decodeCdc(cdc).value;
        t.is(m.seq, cdcV.seq); t.is(m.token, cdcV.token);
        t.deepEqual(m.prod, { wrap: cdcV.prodWrap, count: cdcV.prodCount });
        t.deepEqual(m.cons, { wrap: cdcV.consWrap, count: cdcV.consCount });
        t.is(m.prodFlags.writeBlocked, cdcV.writeBlocked); t.is(m.connFlags.peerDoneWriting, cdcV.peerDoneWriting);
        t.deepEqual(encodeCdc(m), cdc, 'CDC setters rebuild the bytes');
        found.cdc++;
      }
    });
  }
  // the bundled captures hold every kind: a walk that found none of one would test nothing
  t.true(found.bth > 1000, `${found.bth} BTHs`);
  t.true(found.reth > 0 && found.aeth > 0 && found.cdc > 0 && found.deth > 0, JSON.stringify(found));
});

test('views agree with the frame decoder on every frame of every bundled capture', (t) => {
  const bthV = new BthView();
  let n = 0;
  for (const path of bundled()) {
    const r = openCaptureSync(path);
    const dec = new FrameDecoder();
    let udpOff = -1;
    for (let f = r.next(); f; f = r.next()) {
      const d = dec.decode(f);
      if (!d.roce || d.roce.version !== 2 || !d.udp) continue;
      // the BTH follows the UDP header: find it the way the decoder did (IP header length)
      const ipHl = d.ip!.version === 4 ? (d.ip!.header as { headerLength: number }).headerLength : (d.ip!.header as { upperOffset: number }).upperOffset;
      udpOff = (d.eth ? d.eth.headerLength : 0) + ipHl;
      bthV.reset(f.data, udpOff + 8);
      const b = d.roce.ib.bth;
      if (bthV.opcode !== b.opcode || bthV.psn !== b.psn || bthV.destQp !== b.destQp || bthV.padCount !== b.padCount || bthV.ackReq !== b.ackReq) {
        t.fail(`${path} frame ${d.n}: view ${bthV.opcode}/${bthV.psn}/${bthV.destQp} vs decoder ${b.opcode}/${b.psn}/${b.destQp}`);
      }
      n++;
    }
    r.close();
  }
  t.true(n > 1000, `${n} RoCEv2 frames compared`);
});

test('views: truncated input reads 0 past the end, writes past the end are dropped', (t) => {
  const b = Uint8Array.of(0x04, 0x40, 0xff, 0xff, 0, 0, 0, 1);
  const v = new BthView().reset(b, 0);
  t.is(v.opcode, 4);
  t.is(v.destQp, 1);
  t.is(v.psn, 0); // bytes 9..11 are missing
  t.is(v.available, 8);
  v.psn = 0x123456; // dropped, no throw, no write beyond the buffer
  t.deepEqual([...b], [0x04, 0x40, 0xff, 0xff, 0, 0, 0, 1]);
  // a view over a window of a larger buffer: `end` bounds it, not the buffer
  const big = new Uint8Array(32).fill(0xab);
  t.is(new BthView().reset(big, 0, 10).psn, 0xab0000);
});

test('defineView: bit fields, little-endian and 64-bit fields round-trip through setters', (t) => {
  const T = {
    a: { at: 0, size: 1, shift: 4, mask: 15 },
    b: { at: 0, size: 1, shift: 0, mask: 15 },
    f: { at: 1, size: 1, shift: 7, mask: 1, bool: true },
    le32: { at: 2, size: 4, le: true },
    be64: { at: 6, size: 8 },
    le64: { at: 14, size: 8, le: true },
    u24: { at: 22, size: 3 },
  } as const;
  const V = defineView('TestView', T);
  t.is(tableSize(T), 25);
  const buf = new Uint8Array(25);
  const v = new V().reset(buf);
  v.a = 0xa; v.b = 0x5; v.f = true; v.le32 = 0x11223344; v.be64 = 0x0102030405060708n; v.le64 = 0xf1f2f3f4f5f6f7f8n; v.u24 = 0xabcdef;
  t.deepEqual([...buf.subarray(0, 6)], [0xa5, 0x80, 0x44, 0x33, 0x22, 0x11]);
  const dv = new DataView(buf.buffer);
  t.is(dv.getBigUint64(6), 0x0102030405060708n);
  t.is(dv.getBigUint64(14, true), 0xf1f2f3f4f5f6f7f8n);
  t.is(v.a, 0xa); t.is(v.b, 5); t.true(v.f); t.is(v.le32, 0x11223344); t.is(v.be64, 0x0102030405060708n); t.is(v.le64, 0xf1f2f3f4f5f6f7f8n); t.is(v.u24, 0xabcdef);
  v.f = false;
  t.is(buf[1], 0);
  t.is(v.a, 0xa, 'clearing one bit field leaves its neighbours');
});
