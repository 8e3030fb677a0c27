// InfiniBand transport codec + ICRC + CRC-32, checked against the real Linux kernel captures
// in pcaps/ (rdma_rxe, RoCE v2 over IPv4) and tshark 4.0.17's decode of the same frames
// (test/fixtures/ib/tshark-fields.json, extracted once with tshark -T fields).
import test from 'ava';
import { KERNEL_CAPTURES } from '../helpers.js';
import { readFileSync, readdirSync, writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { execFileSync } from 'node:child_process';
import zlib from 'node:zlib';
import { Tree, fromHex, hex } from '../../dissectors/wire/common.js';
import type { FieldNode } from '../../dissectors/wire/common.js';
import { crc32, crc32Update, crc32UpdateJs, crc32UpdateByte, crc32UpdateFill, crc32UpdateMasked, crc32UpdateMaskedThen, crc32Engine, registerTrailerMask, trailerCheck } from '../../dissectors/wire/crc32.js';
import {
  opcodeInfo, decodeBth, encodeBth, summarizeBth, decodeReth, encodeReth, decodeAeth, encodeAeth, summarizeAeth,
  decodeImmDt, encodeImmDt, decodeIeth, encodeIeth, decodeDeth, encodeDeth, decodeRdeth, encodeRdeth, decodeXrceth,
  encodeXrceth, decodeFeth, encodeFeth, decodeAtomicEth, encodeAtomicEth, decodeAtomicAckEth, encodeAtomicAckEth,
  decodeGrh, encodeGrh, summarizeGrh, decodeIbPacket, encodeIbPacket, summarizeIb, makeAeth, aethKind, nakName, rnrTimerMs,
  aethCredits, icrcRoceV2, icrcRoceV2Ipv4, icrcRoceV2Ipv6, icrcRoceV1, icrcFromParts, checkIcrc, checkIcrcV1, checkIcrcV2,
  writeIcrc, setIcrc, readIcrc, ibPadFor, ibPacketLength, IB_EXT_SIZE, icrcOk,
} from '../../dissectors/wire/ib.js';
import type { Bth, IbPacket, Grh, IbExtHeader } from '../../dissectors/wire/ib.js';
import { ROOT, frameBytes, prng as rng } from '../helpers.js';

// ---------------------------------------------------------------------------------------
// Minimal pcap reader (little-endian µs, LINKTYPE_ETHERNET) for the test.
// ---------------------------------------------------------------------------------------

const PCAPS = join(ROOT, 'pcaps') + '/';


interface RoceFrame { file: string; n: number; frame: Uint8Array; ipOff: number; ibOff: number; ibEnd: number; src: string }

function roceFrames(files: string[]): RoceFrame[] {
  const out: RoceFrame[] = [];
  for (const f of files) {
    const frames = frameBytes(join(PCAPS, f));
    frames.forEach((fr, i) => {
      if (fr.length < 42 || fr[12] !== 0x08 || fr[13] !== 0x00 || fr[23] !== 17) return;
      const ihl = (fr[14]! & 15) * 4;
      const udp = 14 + ihl;
      if (((fr[udp + 2]! << 8) | fr[udp + 3]!) !== 4791) return;
      const end = 14 + ((fr[16]! << 8) | fr[17]!);
      out.push({ file: f.replace('.pcap', ''), n: i + 1, frame: fr, ipOff: 14, ibOff: udp + 8, ibEnd: end, src: `${fr[26]}.${fr[27]}.${fr[28]}.${fr[29]}` });
    });
  }
  return out;
}

// The first bundled captures (the expectations below describe their frames); the ICRC test also
// covers every other capture in pcaps/ (the lab's failure fixtures, other RoCE applications).
const ROCE = roceFrames(KERNEL_CAPTURES.map((n) => `${n}.pcap`));
const ROCE_ALL = roceFrames(readdirSync(PCAPS).filter((x) => x.endsWith('.pcap')).sort());
const ib = (r: RoceFrame): Uint8Array => r.frame.subarray(r.ibOff, r.ibEnd);
const byKey = new Map(ROCE.map((r) => [`${r.file}#${r.n}`, r]));

/** Reference ICRC the slow, obvious way: copy, mask, zlib.crc32. */
function refIcrc(frame: Uint8Array, ipOff: number, kind: 'v4' | 'v6' | 'grh', end: number): number {
  const c = Uint8Array.from(frame.subarray(ipOff, end - 4));
  let bth: number;
  if (kind === 'v4') {
    const ihl = (c[0]! & 15) * 4;
    c[1] = 0xff; c[8] = 0xff; c[10] = 0xff; c[11] = 0xff; c[ihl + 6] = 0xff; c[ihl + 7] = 0xff;
    bth = ihl + 8;
  } else {
    c[0] = c[0]! | 0x0f; c[1] = 0xff; c[2] = 0xff; c[3] = 0xff; c[7] = 0xff;
    if (kind === 'v6') { c[46] = 0xff; c[47] = 0xff; bth = 48; } else bth = 40;
  }
  c[bth + 4] = 0xff;
  const all = new Uint8Array(8 + c.length);
  all.fill(0xff, 0, 8);
  all.set(c, 8);
  return zlib.crc32(all) >>> 0;
}

// ---------------------------------------------------------------------------------------
// CRC-32
// ---------------------------------------------------------------------------------------

function randBytes(r: () => number, n: number): Uint8Array { const b = new Uint8Array(n); for (let i = 0; i < n; i++) b[i] = (r() * 256) | 0; return b; }

test('crc32: known vectors and zlib agreement (all lengths 0..300, random splits)', (t) => {
  t.is(crc32(new TextEncoder().encode('123456789')), 0xcbf43926);
  t.is(crc32UpdateJs(0, new TextEncoder().encode('123456789')), 0xcbf43926);
  // Pure JS path on a large buffer against the bit-by-bit definition (independent of zlib).
  const big = randBytes(rng(3), 5000);
  let ref = 0xffffffff;
  for (const x of big) { ref ^= x; for (let k = 0; k < 8; k++) ref = ref & 1 ? (ref >>> 1) ^ 0xedb88320 : ref >>> 1; }
  t.is(crc32UpdateJs(0, big), (~ref) >>> 0);
  t.is(crc32(big), (~ref) >>> 0);
  t.is(crc32(new Uint8Array(0)), 0);
  t.is(crc32(new Uint8Array(32)), 0x190a55ad);
  const r = rng(7);
  for (let n = 0; n <= 300; n++) {
    const b = randBytes(r, n);
    const want = zlib.crc32(b) >>> 0;
    t.is(crc32(b), want, `len ${n}`);
    t.is(crc32UpdateJs(0, b), want, `JS path, len ${n}`);
    t.is(crc32UpdateJs(crc32UpdateJs(0, b, 0, n >> 1), b, n >> 1), want);
    const k = (r() * (n + 1)) | 0;
    t.is(crc32Update(crc32(b, 0, k), b, k, n), want);
    let c = 0;
    for (let i = 0; i < n; i++) c = crc32UpdateByte(c, b[i]!);
    t.is(c, want);
  }
  t.is(crc32UpdateFill(0, 0xff, 8), zlib.crc32(new Uint8Array(8).fill(0xff)) >>> 0);
  t.is(crc32UpdateFill(0x1234, 0xab, 0), 0x1234);
  // Clamped ranges never throw.
  t.is(crc32(new Uint8Array([1, 2, 3]), 2, 100), zlib.crc32(new Uint8Array([3])) >>> 0);
  t.is(crc32(new Uint8Array([1, 2, 3]), 5, 1), 0);
});

test('crc32 engines agree (addon when built, zlib, JS): every length 0..1100 at offsets 0..3, masked stacks, clamped ends', (t) => {
  t.log(`engine for long ranges: ${crc32Engine()}`);
  const r = rng(11);
  const buf = randBytes(r, 1104);
  for (let n = 0; n <= 1100; n++) {
    const s = n & 3;
    const seed = (r() * 2 ** 32) >>> 0;
    const want = zlib.crc32(buf.subarray(s, s + n), seed) >>> 0;
    t.is(crc32Update(seed, buf, s, s + n), want, `len ${n}`);
    t.is(crc32UpdateJs(seed, buf, s, s + n), want, `JS, len ${n}`);
  }
  // Masked stack then the rest, against a copy with the mask applied (independent of the code under test).
  for (const mlen of [0, 12, 40, 60]) {
    const mask = randBytes(r, mlen);
    for (const end of [0, 30, 64, 65, 200, 1104, 5000]) {
      const start = 5;
      const copy = buf.slice(0, Math.min(end, buf.length));
      for (let i = 0; i < mlen && start + i < copy.length; i++) copy[start + i]! |= mask[i]!;
      const masked = crc32UpdateMasked(7, buf, start, mask);
      const masks = Math.min(start + mlen, buf.length);
      const want = zlib.crc32(buf.slice(start, masks).map((x, i) => x | mask[i]!), 7) >>> 0;
      t.is(masked, want, `masked ${mlen}`);
      const whole = end > masks ? zlib.crc32(copy.subarray(masks), want) >>> 0 : want;
      t.is(crc32UpdateMaskedThen(7, buf, start, mask, end), whole, `mask ${mlen} end ${end}`);
    }
  }
});

// ---------------------------------------------------------------------------------------
// ICRC on every real RoCE frame
// ---------------------------------------------------------------------------------------

test('ICRC matches on every RoCEv2 frame of every capture', (t) => {
  const perFile = new Map<string, number>();
  for (const r of ROCE_ALL) {
    const c = checkIcrc(r.frame, r.ipOff, 'v2');
    if (!c.ok) t.fail(`${r.file} #${r.n}: expected ${c.expected.toString(16)} actual ${c.actual.toString(16)}`);
    t.is(c.expected, refIcrc(r.frame, r.ipOff, 'v4', r.ibEnd));
    t.is(icrcRoceV2Ipv4(r.frame, r.ipOff), c.actual);
    t.is(icrcRoceV2(r.frame.subarray(r.ipOff), 0), c.actual);
    t.true(checkIcrcV2(r.frame.subarray(r.ipOff, r.ibEnd), 4).ok);
    t.is(decodeIbPacket(ib(r)).value.icrc, c.actual);
    t.is(icrcFromParts('ipv4', r.frame.subarray(r.ipOff, r.ibOff), ib(r)), c.actual);
    perFile.set(r.file, (perFile.get(r.file) ?? 0) + 1);
  }
  // Counts as tshark sees them (RoCE frames per capture).
  t.deepEqual(Object.fromEntries(perFile), {
    'a-first-contact': 30, 'b-second-contact': 120, 'd-bulk-2MiB': 2238, 'e-testlink-teardown': 57,
    'g-host-roce-ud': 20, 'l-failover': 3758, 'l2-failover-client': 3791, 'm-device-removal': 143, 'n-link-never-up': 51, 'o-urgent-stall': 88, 'p-window-stall': 1103,
  });
});

test('ICRC: masked fields do not matter, everything else does', (t) => {
  const r = byKey.get('a-first-contact#20')!; // RDMA WRITE ONLY, pad 2
  const f = Uint8Array.from(r.frame);
  const ip = r.ipOff, ibo = r.ibOff;
  const want = readIcrc(f, r.ibEnd);
  const masked = [ip + 1, ip + 8, ip + 10, ip + 11, ibo - 2, ibo - 1, ibo + 4];
  for (const o of masked) {
    const g = Uint8Array.from(f);
    g[o] = g[o]! ^ 0x5a;
    t.true(checkIcrc(g, ip, 'v2').ok, `masked byte ${o - ip}`);
  }
  for (let o = ip; o < r.ibEnd - 4; o++) {
    if (masked.includes(o) || o === ip + 2 || o === ip + 3) continue; // (IP length moves the end)
    const g = Uint8Array.from(f);
    g[o] = g[o]! ^ 0x01;
    const c = checkIcrc(g, ip, 'v2');
    if (c.ok) t.fail(`byte ${o - ip} is not covered`);
  }
  // FECN/BECN marking by a switch keeps the ICRC valid.
  const g = Uint8Array.from(f);
  g[ibo + 4] = 0xc0;
  t.true(checkIcrc(g, ip, 'v2').ok);
  t.is(decodeIbPacket(g.subarray(ibo, r.ibEnd)).value.bth.fecn, true);
  t.is(hex(f, r.ibEnd - 4, 4), 'f59ae584'); // tshark: infiniband.invariant.crc 0xf59ae584
  // Corrupt ICRC is reported with both values.
  const h = Uint8Array.from(f);
  h[r.ibEnd - 1] = h[r.ibEnd - 1]! ^ 0xff;
  const c = checkIcrc(h, ip, 'v2');
  t.false(c.ok);
  t.is(c.expected, want);
  t.not(c.actual, want);
});

test('icrcOk (one addon call with offsets when built) agrees with checkIcrc: every real frame back to back in one buffer as the reader holds them, each byte flipped, other buffers', (t) => {
  t.log(`engine: ${crc32Engine()}`);
  const total = ROCE_ALL.reduce((n, r) => n + r.frame.length, 0);
  const block = new Uint8Array(total + 7);
  let o = 3; // not aligned, as records in a capture file are not
  const views = ROCE_ALL.map((r) => { block.set(r.frame, o); const v = block.subarray(o, o + r.frame.length); o += r.frame.length; return v; });
  for (let i = 0; i < views.length; i++) if (!icrcOk(views[i]!, 14, 'v2')) t.fail(`${ROCE_ALL[i]!.file} #${ROCE_ALL[i]!.n}`);
  // every byte of one frame flipped in turn, in place in the shared block: the verdict is checkIcrc's
  const r = byKey.get('a-first-contact#20')!;
  const v = views[ROCE_ALL.findIndex((x) => x.file === r.file && x.n === r.n)]!;
  for (let k = 14; k < r.ibEnd; k++) {
    if (k === 16 || k === 17) continue; // the IP length moves the end
    v[k] = v[k]! ^ 0x21;
    t.is(icrcOk(v, 14, 'v2'), checkIcrc(Uint8Array.from(v), 14, 'v2').ok, `byte ${k}`);
    v[k] = v[k]! ^ 0x21;
  }
  t.true(icrcOk(v, 14, 'v2'));
  // frames of their own buffers, one after the other (the bound buffer changes each call), and a
  // SharedArrayBuffer (not readable by the addon: answered in JavaScript)
  for (const x of ROCE.slice(0, 50)) t.true(icrcOk(Uint8Array.from(x.frame), 14, 'v2'));
  const shared = new Uint8Array(new SharedArrayBuffer(r.frame.length));
  shared.set(r.frame);
  t.true(icrcOk(shared, 14, 'v2'));
  shared[r.ibEnd - 5] = shared[r.ibEnd - 5]! ^ 1;
  t.false(icrcOk(shared, 14, 'v2'));
  // a frame whose IP length says more than was captured: no read past the view
  const cut = block.subarray(3, 3 + 60);
  t.false(icrcOk(cut, 14, 'v2'));
});

test('trailerCheck against zlib over a masked copy: random masks and lengths, short ranges left to the caller', (t) => {
  const r = rng(5);
  const mask = randBytes(r, 40);
  const init = (r() * 2 ** 32) >>> 0;
  const id = registerTrailerMask(mask, init);
  if (id < 0) { t.is(trailerCheck(new Uint8Array(100), 0, id, 100), -1); t.log('no addon: not answered'); return; }
  const buf = randBytes(r, 3000);
  for (let n = 0; n < 300; n++) {
    const start = (r() * 100) | 0;
    const end = Math.min(buf.length, start + ((r() * 2000) | 0));
    if (end - start < 44) { t.is(trailerCheck(buf, start, id, end), -1, 'range shorter than mask and trailer'); continue; }
    const copy = buf.slice(start, end - 4);
    for (let i = 0; i < 40; i++) copy[i]! |= mask[i]!;
    const crc = zlib.crc32(copy, init) >>> 0;
    const w = new DataView(buf.buffer);
    w.setUint32(end - 4, n % 3 === 0 ? crc ^ 0x100 : crc, true);
    t.is(trailerCheck(buf, start, id, end), n % 3 === 0 ? 0 : 1, `start ${start} end ${end}`);
  }
  t.is(trailerCheck(buf, 0, id, buf.length + 1), -1, 'end past the view');
});

// The addon folds a masked stack inside its first 64-byte loads, on 512-bit registers where the
// CPU has VPCLMULQDQ and on 128-bit ones otherwise (SMCSCOPE_CRC_NO512=1 picks those): each
// engine, in a process of its own (the choice is made when the addon loads), against zlib over a
// masked copy for every range length from the mask and trailer up to 1100 bytes, at four
// alignments, for the three stack lengths the replay registers (IPv4 40, GRH 52, IPv6 60) and a
// full 64-byte mask. A wrong tail, lane order or mask padding shows as a mismatch.
test('trailerCheck, both clmul engines: every length at four alignments against zlib over a masked copy', (t) => {
  const crcUrl = new URL('../../dissectors/wire/crc32.js', import.meta.url).href;
  const script = `
    import zlib from 'node:zlib';
    const { registerTrailerMask, trailerCheck } = await import(${JSON.stringify(crcUrl)});
    let seed = 7; const r = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32);
    const buf = new Uint8Array(1300); for (let i = 0; i < buf.length; i++) buf[i] = (r() * 256) | 0;
    let answered = 0, wrong = 0;
    for (const ml of [40, 52, 60, 64]) {
      const mask = new Uint8Array(ml); for (let i = 0; i < ml; i++) mask[i] = r() < 0.3 ? 0xff : r() < 0.5 ? (r() * 256) | 0 : 0;
      const init = (r() * 2 ** 32) >>> 0;
      const id = registerTrailerMask(mask, init);
      if (id < 0) continue;
      for (let al = 0; al < 4; al++) for (let len = ml + 4; len <= 1100; len++) {
        const start = 100 + al, end = start + len;
        const copy = buf.slice(start, end - 4);
        for (let i = 0; i < ml; i++) copy[i] |= mask[i];
        const crc = zlib.crc32(copy, init) >>> 0;
        const w = new DataView(buf.buffer);
        const bad = (len & 7) === 3;
        w.setUint32(end - 4, bad ? crc ^ 0x8000 : crc, true);
        const got = trailerCheck(buf, start, id, end);
        if (got < 0) continue;
        answered++;
        if (got !== (bad ? 0 : 1)) wrong++;
      }
    }
    console.log(JSON.stringify({ answered, wrong }));`;
  for (const no512 of ['', '1']) {
    const env: NodeJS.ProcessEnv = { ...process.env };
    if (no512 === '') delete env.SMCSCOPE_CRC_NO512;
    else env.SMCSCOPE_CRC_NO512 = no512;
    const out = JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', script], { env, encoding: 'utf8' })) as { answered: number; wrong: number };
    if (out.answered === 0) { t.log(`no addon check (${no512 ? '128-bit' : 'default'} engine): not answered`); continue; }
    t.is(out.wrong, 0, `${no512 ? '128-bit' : 'default'} engine: ${out.wrong} of ${out.answered} ranges wrong`);
    t.true(out.answered >= 4 * (1100 - 63) * 4 - 4 * 4 * 64, 'every range from 64 bytes on answered by the addon');
  }
});

test('ICRC over IPv6 and RoCE v1 (GRH) agrees with the copy+mask reference and with icrcFromParts', (t) => {
  const r = byKey.get('a-first-contact#12')!; // SEND ONLY (CONFIRM LINK)
  const udpIb = r.frame.subarray(r.ibOff - 8, r.ibEnd);
  // IPv6 frame around the same UDP + IB bytes.
  const v6 = new Uint8Array(40 + udpIb.length);
  v6.set(fromHex('6b812345'), 0); // TC 0xb8, flow label 0x12345
  v6[4] = udpIb.length >> 8; v6[5] = udpIb.length & 0xff; v6[6] = 17; v6[7] = 1;
  v6.set(fromHex('00000000000000000000ffff0a370001'), 8);
  v6.set(fromHex('00000000000000000000ffff0a370002'), 24);
  v6.set(udpIb, 40);
  const c6 = writeIcrc(v6, 0, 'v2');
  t.is(c6, refIcrc(v6, 0, 'v6', v6.length));
  t.is(icrcRoceV2Ipv6(v6), c6);
  t.is(icrcFromParts('ipv6', v6.subarray(0, 48), v6.subarray(48)), c6);
  t.true(checkIcrc(v6, 0, 'v2').ok);
  const v6b = Uint8Array.from(v6); v6b[1] = 0; v6b[2] = 0; v6b[3] = 0; v6b[0] = 0x60; v6b[7] = 64; v6b[46] = 0x12;
  t.true(checkIcrc(v6b, 0, 'v2').ok, 'TC/flow label/hop limit/UDP checksum masked');
  // RoCE v1: GRH + IB.
  const ibp = udpIb.subarray(8);
  const grh: Grh = { ipVer: 6, tclass: 0x10, flowLabel: 0xabcde, payLen: ibp.length, nextHdr: 0x1b, hopLimit: 1, sgid: 'fe80::5054:ff:fe55:a', dgid: 'fe80::5054:ff:fe55:b' };
  const v1 = new Uint8Array(40 + ibp.length);
  v1.set(encodeGrh(grh), 0);
  v1.set(ibp, 40);
  const c1 = writeIcrc(v1, 0, 'v1');
  t.is(c1, refIcrc(v1, 0, 'grh', v1.length));
  t.is(icrcRoceV1(v1), c1);
  t.is(icrcFromParts('grh', v1.subarray(0, 40), v1.subarray(40)), c1);
  t.true(checkIcrcV1(v1).ok);
  t.not(c1, readIcrc(r.frame, r.ibEnd), 'v1 and v2 ICRC differ for the same IB packet');
  // Too-short inputs never throw.
  t.false(checkIcrc(new Uint8Array(10), 0, 'v2').ok);
  t.false(checkIcrc(new Uint8Array(0), 0, 'v1').ok);
  t.false(checkIcrc(v1, 0, 'v1', v1.length + 10).ok);
});

test('RoCE v1 frame built here is parsed by tshark as GRH + BTH with our fields and ICRC', (t) => {
  let tshark = true;
  try { execFileSync('tshark', ['-v'], { stdio: 'ignore' }); } catch { tshark = false; }
  const ibv: IbPacket = {
    bth: bth({ opcode: 0x04, se: true, ackReq: true, destQp: 0x000123, psn: 0x0abcde, pkey: 0xffff }),
    payload: Uint8Array.from({ length: 44 }, (_, i) => i), payloadOffset: 12, padCount: 0, icrc: 0,
  };
  const ibBytes = encodeIbPacket(ibv);
  const grh: Grh = { ipVer: 6, tclass: 0, flowLabel: 0, payLen: ibBytes.length, nextHdr: 0x1b, hopLimit: 1, sgid: 'fe80::5054:ff:fe55:a', dgid: 'fe80::5054:ff:fe55:b' };
  const frame = new Uint8Array(14 + 40 + ibBytes.length);
  frame.set(fromHex('52540055000b52540055000a8915'), 0);
  frame.set(encodeGrh(grh), 14);
  frame.set(ibBytes, 54);
  const c = writeIcrc(frame, 14, 'v1');
  t.true(checkIcrc(frame, 14, 'v1').ok);
  const d = decodeIbPacket(frame.subarray(54));
  t.deepEqual(d.issues, []);
  t.is(d.value.icrc, c);
  t.is(summarizeIb(d.value), 'SEND ONLY QP 0x123 psn 703710 [SE] len 44');
  if (!tshark) { t.log('tshark not installed: layout cross-check skipped'); return; }
  const dir = mkdtempSync(join(tmpdir(), 'ibv1-'));
  try {
    const hdr = new Uint8Array(24 + 16);
    const dv = new DataView(hdr.buffer);
    dv.setUint32(0, 0xa1b2c3d4, true); dv.setUint16(4, 2, true); dv.setUint16(6, 4, true); dv.setUint32(16, 65535, true); dv.setUint32(20, 1, true);
    dv.setUint32(32, frame.length, true); dv.setUint32(36, frame.length, true);
    const file = join(dir, 'v1.pcap');
    writeFileSync(file, Buffer.concat([hdr, frame]));
    const out = execFileSync('tshark', ['-r', file, '-T', 'fields', '-e', 'infiniband.grh.sgid', '-e', 'infiniband.grh.dgid', '-e', 'infiniband.grh.paylen',
      '-e', 'infiniband.grh.nxthdr', '-e', 'infiniband.bth.opcode', '-e', 'infiniband.bth.destqp', '-e', 'infiniband.bth.psn', '-e', 'infiniband.bth.se',
      '-e', 'infiniband.invariant.crc'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim().split('\t');
    const icrcBytes = frame.subarray(frame.length - 4);
    t.deepEqual(out, ['fe80::5054:ff:fe55:a', 'fe80::5054:ff:fe55:b', String(ibBytes.length), '27', '4', '0x000123', String(0x0abcde), '1', '0x' + hex(icrcBytes)]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

// ---------------------------------------------------------------------------------------
// Field values against tshark
// ---------------------------------------------------------------------------------------

interface TsRow { frame: string; opcode: string; se: string; m: string; padcnt: string; tver: string; pkey: string; destqp: string; a: string; psn: string; va?: string; rkey?: string; dmalen?: string; syndrome?: string; msn?: string; icrc?: string }
const FIX = JSON.parse(readFileSync(join(ROOT, 'test/fixtures/ib/tshark-fields.json'), 'utf8')) as { frames: Record<string, TsRow[]> };

test('BTH/RETH/AETH/ICRC field values equal tshark\'s decode of the same frames', (t) => {
  let n = 0, reth = 0, aeth = 0, icrc = 0;
  for (const [file, rows] of Object.entries(FIX.frames)) {
    for (const row of rows) {
      const r = byKey.get(`${file}#${row.frame}`);
      if (!r) { t.fail(`${file} #${row.frame} missing`); continue; }
      const { value: p, issues } = decodeIbPacket(ib(r));
      t.deepEqual(issues, [], `${file} #${row.frame}`);
      const b = p.bth;
      t.is(b.opcode, Number(row.opcode));
      t.is(b.se, row.se === '1');
      t.is(b.migReq, row.m === '1');
      t.is(b.padCount, Number(row.padcnt));
      t.is(b.tver, Number(row.tver));
      t.is(b.pkey, Number(row.pkey));
      t.is(b.destQp, Number(row.destqp));
      t.is(b.ackReq, row.a === '1');
      t.is(b.psn, Number(row.psn));
      if (row.va !== undefined) {
        reth++;
        t.is(p.reth?.va, BigInt(row.va));
        t.is(p.reth?.rkey, Number(row.rkey));
        t.is(p.reth?.dmaLen, Number(row.dmalen));
      } else t.is(p.reth, undefined);
      if (row.syndrome !== undefined) {
        aeth++;
        t.is(p.aeth?.syndrome, Number(row.syndrome));
        t.is(p.aeth?.msn, Number(row.msn));
      } else t.is(p.aeth, undefined);
      if (row.icrc !== undefined) {
        icrc++;
        // tshark shows the 4 wire bytes as a big-endian number; we keep the CRC value (LSB first on the wire).
        t.is('0x' + hex(ib(r), ib(r).length - 4), row.icrc);
      }
      n++;
    }
  }
  t.is(n, 520);
  t.true(reth > 40 && aeth > 200 && icrc > 400, `${reth} ${aeth} ${icrc}`);
});

test('summaries of real frames', (t) => {
  const s = (k: string): string => summarizeIb(decodeIbPacket(ib(byKey.get(k)!)).value);
  t.is(s('a-first-contact#12'), 'SEND ONLY QP 0x11 psn 4378458 [SE] len 44');
  t.is(s('a-first-contact#13'), 'ACK QP 0x11 psn 4378458 msn 1 credits 31');
  t.is(s('a-first-contact#20'), 'RDMA WRITE ONLY QP 0x11 psn 15551062 va 0xff2b28d5447b0000 rkey 0x3d3 len 54');
  t.is(s('a-first-contact#27'), 'RDMA WRITE ONLY QP 0x11 psn 4378460 va 0xff2b0494c3110000 rkey 0x39b len 22');
  t.is(s('d-bulk-2MiB#20'), 'RDMA WRITE FIRST QP 0x11 psn ' + decodeIbPacket(ib(byKey.get('d-bulk-2MiB#20')!)).value.bth.psn + ' va 0xff17a095c1eb0000 rkey 0x36e dmalen 65536 len 1024');
  t.regex(s('d-bulk-2MiB#21'), /^RDMA WRITE MIDDLE QP 0x11 psn \d+ len 1024$/);
});

test('real packets: payload/pad/ICRC split, encode(decode(bytes)) == bytes, and the 2 MiB bulk stream checksum', (t) => {
  let writes = 0, addLinks = 0;
  const chunks: Uint8Array[] = [];
  const seen = new Set<number>();
  for (const r of ROCE) {
    const bytes = ib(r);
    const d = decodeIbPacket(bytes);
    t.deepEqual(d.issues, [], `${r.file} #${r.n}`);
    const p = d.value;
    const info = opcodeInfo(p.bth.opcode);
    t.is(p.payloadOffset, 12 + info.headerLength);
    t.is(p.payload.length + p.padCount + 4 + 12 + info.headerLength, bytes.length);
    t.is(p.padCount, ibPadFor(p.payload.length));
    t.is(ibPacketLength(p), bytes.length);
    t.deepEqual(encodeIbPacket(p), Uint8Array.from(bytes), `${r.file} #${r.n}`);
    // SMC-R SENDs: 44-byte LLC/CDC messages, plus the 88-byte LLC v2 ADD LINK (0x22, length 0x58 little-endian).
    if (info.isSend && p.payload.length !== 44) {
      t.is(p.payload.length, 88);
      t.is(hex(p.payload, 0, 3), '225800');
      addLinks++;
    }
    if (r.file === 'd-bulk-2MiB' && info.isWrite && r.src === '10.55.0.1') {
      writes++;
      if (seen.has(p.bth.psn)) t.fail(`retransmitted PSN ${p.bth.psn}`);
      seen.add(p.bth.psn);
      chunks.push(p.payload);
    }
  }
  // Guest logs: client sent 2097275 bytes, fnv1a=a1a83141; the data crossed as RDMA WRITEs.
  let total = 0, h = 0x811c9dc5;
  for (const c of chunks) { total += c.length; for (let i = 0; i < c.length; i++) h = Math.imul(h ^ c[i]!, 0x01000193) >>> 0; }
  t.is(total, 2097275);
  t.is(h.toString(16), 'a1a83141');
  t.is(new TextDecoder().decode(chunks[0]!.subarray(0, 16)), '0123456789abcdef');
  t.true(writes > 2000);
  t.is(addLinks, 4); // one per first-contact capture (a, b, d, e)
});

// ---------------------------------------------------------------------------------------
// Opcode table
// ---------------------------------------------------------------------------------------

test('opcode table: names, transports, headers, payload, positions', (t) => {
  const o = (op: number): [string, string, readonly string[], boolean] => { const i = opcodeInfo(op); return [i.name, i.transport, i.headers, i.payload]; };
  t.deepEqual(o(0x04), ['SEND ONLY', 'RC', [], true]);
  t.deepEqual(o(0x03), ['SEND LAST WITH IMMEDIATE', 'RC', ['ImmDt'], true]);
  t.deepEqual(o(0x06), ['RDMA WRITE FIRST', 'RC', ['RETH'], true]);
  t.deepEqual(o(0x0b), ['RDMA WRITE ONLY WITH IMMEDIATE', 'RC', ['RETH', 'ImmDt'], true]);
  t.deepEqual(o(0x0c), ['RDMA READ REQUEST', 'RC', ['RETH'], false]);
  t.deepEqual(o(0x0d), ['RDMA READ RESPONSE FIRST', 'RC', ['AETH'], true]);
  t.deepEqual(o(0x0e), ['RDMA READ RESPONSE MIDDLE', 'RC', [], true]);
  t.deepEqual(o(0x10), ['RDMA READ RESPONSE ONLY', 'RC', ['AETH'], true]);
  t.deepEqual(o(0x11), ['ACKNOWLEDGE', 'RC', ['AETH'], false]);
  t.deepEqual(o(0x12), ['ATOMIC ACKNOWLEDGE', 'RC', ['AETH', 'AtomicAckETH'], false]);
  t.deepEqual(o(0x13), ['COMPARE SWAP', 'RC', ['AtomicETH'], false]);
  t.deepEqual(o(0x14), ['FETCH ADD', 'RC', ['AtomicETH'], false]);
  t.deepEqual(o(0x15), ['reserved 0x15', 'RC', [], true]);
  t.deepEqual(o(0x17), ['SEND ONLY WITH INVALIDATE', 'RC', ['IETH'], true]);
  t.deepEqual(o(0x1c), ['FLUSH', 'RC', ['FETH', 'RETH'], false]);
  t.deepEqual(o(0x1d), ['ATOMIC WRITE', 'RC', ['RETH'], true]);
  t.deepEqual(o(0x24), ['SEND ONLY', 'UC', [], true]);
  t.deepEqual(o(0x2a), ['RDMA WRITE ONLY', 'UC', ['RETH'], true]);
  t.false(opcodeInfo(0x2c).known); // UC has no READ
  t.false(opcodeInfo(0x31).known); // UC has no ACK
  t.deepEqual(o(0x44), ['SEND ONLY', 'RD', ['RDETH', 'DETH'], true]);
  t.deepEqual(o(0x4a), ['RDMA WRITE ONLY', 'RD', ['RDETH', 'DETH', 'RETH'], true]);
  t.deepEqual(o(0x4d), ['RDMA READ RESPONSE FIRST', 'RD', ['RDETH', 'AETH'], true]);
  t.deepEqual(o(0x51), ['ACKNOWLEDGE', 'RD', ['RDETH', 'AETH'], false]);
  t.deepEqual(o(0x53), ['COMPARE SWAP', 'RD', ['RDETH', 'DETH', 'AtomicETH'], false]);
  t.deepEqual(o(0x55), ['RESYNC', 'RD', ['RDETH', 'DETH'], false]);
  t.deepEqual(o(0x64), ['SEND ONLY', 'UD', ['DETH'], true]);
  t.deepEqual(o(0x65), ['SEND ONLY WITH IMMEDIATE', 'UD', ['DETH', 'ImmDt'], true]);
  t.false(opcodeInfo(0x60).known);
  t.deepEqual(o(0x81), ['CNP', 'CNP', [], true]);
  t.false(opcodeInfo(0x80).known);
  t.deepEqual(o(0xa4), ['SEND ONLY', 'XRC', ['XRCETH'], true]);
  t.deepEqual(o(0xab), ['RDMA WRITE ONLY WITH IMMEDIATE', 'XRC', ['XRCETH', 'RETH', 'ImmDt'], true]);
  t.deepEqual(o(0xb1), ['ACKNOWLEDGE', 'XRC', ['AETH'], false]);
  t.deepEqual(o(0xb3), ['COMPARE SWAP', 'XRC', ['XRCETH', 'AtomicETH'], false]);
  t.deepEqual(o(0xb7), ['SEND ONLY WITH INVALIDATE', 'XRC', ['XRCETH', 'IETH'], true]);
  t.deepEqual(o(0xc4), ['reserved 0xc4', 'reserved', [], true]);
  const i = opcodeInfo(0x06);
  t.true(i.isWrite && i.isFirst && !i.isSend && !i.isOnly && i.headerLength === 16);
  t.true(opcodeInfo(0x07).isMiddle && opcodeInfo(0x08).isLast && opcodeInfo(0x0a).isOnly);
  t.true(opcodeInfo(0x00).isSend && opcodeInfo(0x00).isFirst && opcodeInfo(0x02).isLast && opcodeInfo(0x04).isOnly);
  t.true(opcodeInfo(0x05).withImmediate && opcodeInfo(0x16).withInvalidate && opcodeInfo(0x11).isAck && opcodeInfo(0x13).isAtomic);
  t.true(opcodeInfo(0x0c).isReadRequest && opcodeInfo(0x0f).isReadResponse);
  t.is(opcodeInfo(0x1ff).opcode, 0xff); // masked
  let known = 0;
  for (let op = 0; op < 256; op++) if (opcodeInfo(op).known) known++;
  t.is(known, 25 /* RC */ + 12 /* UC */ + 22 /* RD */ + 2 /* UD */ + 1 /* CNP */ + 23 /* XRC */);
});

// ---------------------------------------------------------------------------------------
// Round trips for every opcode with its extension headers
// ---------------------------------------------------------------------------------------

function bth(p: Partial<Bth>): Bth {
  return { opcode: 0, se: false, migReq: false, padCount: 0, tver: 0, pkey: 0xffff, fecn: false, becn: false, resv6: 0, destQp: 0x11, ackReq: false, resv7: 0, psn: 0, ...p };
}

function sample(op: number, r: () => number, payloadLen: number): IbPacket {
  const info = opcodeInfo(op);
  const u32r = (): number => (r() * 2 ** 32) >>> 0;
  const u24r = (): number => u32r() & 0xffffff;
  const big = (): bigint => (BigInt(u32r()) << 32n) | BigInt(u32r());
  const n = info.payload ? payloadLen : 0;
  const p: IbPacket = {
    bth: bth({ opcode: op, se: r() < 0.5, migReq: r() < 0.5, padCount: ibPadFor(n), pkey: u32r() & 0xffff, fecn: r() < 0.3, becn: r() < 0.3, destQp: u24r(), ackReq: r() < 0.5, psn: u24r() }),
    payload: randBytes(r, n), payloadOffset: 12 + info.headerLength, padCount: ibPadFor(n), icrc: u32r(),
  };
  for (const h of info.headers) {
    switch (h) {
      case 'RETH': p.reth = { va: big(), rkey: u32r(), dmaLen: info.isOnly && info.payload ? n : u32r() }; break;
      case 'AETH': p.aeth = makeAeth((['ACK', 'RNR NAK', 'NAK'] as const)[(r() * 3) | 0]!, (r() * 5) | 0, u24r()); break;
      case 'ImmDt': p.immDt = u32r(); break;
      case 'IETH': p.ieth = u32r(); break;
      case 'DETH': p.deth = { qkey: u32r(), resv8: 0, srcQp: u24r() }; break;
      case 'RDETH': p.rdeth = { resv8: 0, eeContext: u24r() }; break;
      case 'XRCETH': p.xrceth = { resv8: 0, xrcSrq: u24r() }; break;
      case 'FETH': p.feth = { resv: 0, selectivity: (r() * 4) | 0, placement: (r() * 16) | 0 }; break;
      case 'AtomicETH': p.atomicEth = { va: big(), rkey: u32r(), swapAdd: big(), compare: big() }; break;
      case 'AtomicAckETH': p.atomicAckEth = { origData: big() }; break;
    }
  }
  return p;
}

test('round trip: every known opcode with its extension headers, payload lengths 0..9 and 1024', (t) => {
  const r = rng(42);
  let count = 0;
  for (let op = 0; op < 256; op++) {
    const info = opcodeInfo(op);
    if (!info.known) continue;
    for (const len of op === 0x81 ? [16] : [0, 1, 2, 3, 4, 5, 9, 1024]) {
      const p = sample(op, r, len);
      const bytes = encodeIbPacket(p);
      t.is(bytes.length, 12 + info.headerLength + (info.payload ? len + ibPadFor(len) : 0) + 4);
      const d = decodeIbPacket(bytes);
      t.deepEqual(d.issues, [], `op 0x${op.toString(16)} len ${len}`);
      t.deepEqual(d.value, p, `op 0x${op.toString(16)} len ${len}`);
      t.deepEqual(encodeIbPacket(d.value), bytes);
      t.notThrows(() => summarizeIb(d.value));
      count++;
    }
  }
  t.true(count > 600);
});

test('encodeIbPacket: explicit ICRC argument, missing header values encode as zeros, setIcrc/readIcrc', (t) => {
  const p: IbPacket = { bth: bth({ opcode: 0x0a, psn: 5 }), payload: new Uint8Array([1, 2, 3]), payloadOffset: 28, padCount: 1, icrc: 7 };
  p.bth.padCount = 1;
  const b = encodeIbPacket(p, 0x11223344);
  t.is(hex(b.subarray(b.length - 4)), '44332211');
  t.is(hex(b.subarray(12, 28)), '00'.repeat(16));
  t.is(readIcrc(b), 0x11223344);
  setIcrc(b, 0xdeadbeef);
  t.is(hex(b.subarray(b.length - 4)), 'efbeadde');
  const d = decodeIbPacket(b);
  t.deepEqual(d.value.reth, { va: 0n, rkey: 0, dmaLen: 0 });
  t.deepEqual(d.issues.map((i) => i.code), ['ib.reth-len']);
  t.is(readIcrc(new Uint8Array(2)), 0);
});

test('individual header codecs: decode/encode/summary', (t) => {
  const bb = bth({ opcode: 0x04, se: true, ackReq: true, destQp: 0x11, psn: 4378458, padCount: 0 });
  const be = encodeBth(bb);
  t.is(hex(be), '0480ffff000000118042cf5a');
  t.deepEqual(decodeBth(be).value, bb);
  t.is(summarizeBth(bb), 'SEND ONLY QP 0x11 psn 4378458 [SE]');
  t.deepEqual(decodeBth(be.subarray(0, 5)).issues.map((i) => i.code), ['ib.truncated']);
  const reth = { va: 0xff2b28d5447b0000n, rkey: 0x3d3, dmaLen: 54 };
  t.is(hex(encodeReth(reth)), 'ff2b28d5447b0000000003d300000036');
  t.deepEqual(decodeReth(encodeReth(reth)).value, reth);
  const a = decodeAeth(fromHex('1f000001'));
  t.deepEqual(a.value, { syndrome: 31, msn: 1, kind: 'ACK', code: 31 });
  t.deepEqual(a.issues, []);
  t.is(summarizeAeth(a.value), 'ACK msn 1 credits 31');
  t.deepEqual(encodeAeth(a.value), fromHex('1f000001'));
  t.is(decodeImmDt(encodeImmDt(0xcafebabe)).value, 0xcafebabe);
  t.is(decodeIeth(encodeIeth(0x1234)).value, 0x1234);
  const deth = { qkey: 0x80010000, resv8: 0, srcQp: 0x1 };
  t.deepEqual(decodeDeth(encodeDeth(deth)).value, deth);
  t.deepEqual(decodeDeth(fromHex('0000000001000001')).issues.map((i) => i.code), ['ib.reserved']);
  t.deepEqual(decodeRdeth(encodeRdeth({ resv8: 0, eeContext: 0xabcdef })).value, { resv8: 0, eeContext: 0xabcdef });
  t.deepEqual(decodeXrceth(encodeXrceth({ resv8: 0, xrcSrq: 0x42 })).value, { resv8: 0, xrcSrq: 0x42 });
  t.deepEqual(decodeFeth(encodeFeth({ resv: 0, selectivity: 2, placement: 1 })).value, { resv: 0, selectivity: 2, placement: 1 });
  t.is(hex(encodeFeth({ resv: 0, selectivity: 2, placement: 1 })), '00000021');
  const at = { va: 0x1000n, rkey: 5, swapAdd: 0xffffffffffffffffn, compare: 1n };
  t.deepEqual(decodeAtomicEth(encodeAtomicEth(at)).value, at);
  t.deepEqual(decodeAtomicAckEth(encodeAtomicAckEth({ origData: 99n })).value, { origData: 99n });
  for (const [f, n] of [[decodeReth, 16], [decodeAeth, 4], [decodeDeth, 8], [decodeAtomicEth, 28], [decodeAtomicAckEth, 8], [decodeImmDt, 4]] as const) {
    const d = (f as (b: Uint8Array) => { issues: { code: string }[] })(new Uint8Array(n - 1));
    t.deepEqual(d.issues.map((i) => i.code), ['ib.truncated']);
  }
  t.is(IB_EXT_SIZE.AtomicETH, 28);
});

test('AETH syndromes: ACK credits, RNR NAK timer, NAK codes; summaries', (t) => {
  t.is(aethKind(0x1f), 'ACK');
  t.is(aethKind(0x21), 'RNR NAK');
  t.is(aethKind(0x60), 'NAK');
  t.is(aethKind(0x40), 'reserved');
  t.is(aethCredits(31), undefined);
  t.is(aethCredits(5), 6);
  t.is(rnrTimerMs(0), 655.36);
  t.is(rnrTimerMs(1), 0.01);
  t.is(rnrTimerMs(14), 1.28);
  t.is(rnrTimerMs(31), 491.52);
  t.is(nakName(0), 'PSN sequence error');
  t.is(nakName(4), 'invalid RD request');
  t.deepEqual(makeAeth('NAK', 2, 9), { syndrome: 0x62, msn: 9, kind: 'NAK', code: 2 });
  const ack = (a: ReturnType<typeof makeAeth>): string =>
    summarizeIb({ bth: bth({ opcode: 0x11, psn: 5 }), aeth: a, payload: new Uint8Array(0), payloadOffset: 16, padCount: 0, icrc: 0 });
  t.is(ack(makeAeth('ACK', 31, 3)), 'ACK QP 0x11 psn 5 msn 3 credits 31');
  t.is(ack(makeAeth('NAK', 0, 3)), 'NAK PSN-sequence-error QP 0x11 psn 5 msn 3');
  t.is(ack(makeAeth('NAK', 1, 3)), 'NAK invalid-request QP 0x11 psn 5 msn 3');
  t.is(ack(makeAeth('NAK', 2, 3)), 'NAK remote-access-error QP 0x11 psn 5 msn 3');
  t.is(ack(makeAeth('NAK', 3, 3)), 'NAK remote-operational-error QP 0x11 psn 5 msn 3');
  t.is(ack(makeAeth('RNR NAK', 1, 3)), 'RNR NAK timer 0.01ms QP 0x11 psn 5 msn 3');
  t.is(ack(makeAeth('RNR NAK', 5, 3)), 'RNR NAK timer 0.06ms QP 0x11 psn 5 msn 3');
  // Reserved syndrome and NAK codes are flagged.
  t.deepEqual(decodeAeth(fromHex('40000001')).issues.map((i) => i.code), ['ib.aeth']);
  t.deepEqual(decodeAeth(fromHex('65000001')).issues.map((i) => i.code), ['ib.aeth']);
  t.deepEqual(decodeAeth(fromHex('9f000001')).issues.map((i) => i.code), ['ib.reserved']);
});

test('summaries of other opcodes', (t) => {
  const pk = (p: Partial<IbPacket> & { bth: Bth }): string => summarizeIb({ payload: new Uint8Array(0), payloadOffset: 12, padCount: 0, icrc: 0, ...p });
  t.is(pk({ bth: bth({ opcode: 0x64, destQp: 1, psn: 7, se: true }), deth: { qkey: 0x80010000, resv8: 0, srcQp: 0x44 }, payload: new Uint8Array(44) }),
    'UD SEND ONLY QP 0x1 psn 7 [SE] qkey 0x80010000 srcqp 0x44 len 44');
  t.is(pk({ bth: bth({ opcode: 0x81, destQp: 0x11, becn: true }), payload: new Uint8Array(16) }), 'CNP QP 0x11 psn 0 [BECN]');
  t.is(pk({ bth: bth({ opcode: 0x0b, psn: 1 }), reth: { va: 0x10n, rkey: 2, dmaLen: 4 }, immDt: 0xabc, payload: new Uint8Array(4) }),
    'RDMA WRITE ONLY WITH IMMEDIATE QP 0x11 psn 1 va 0x10 rkey 0x2 imm 0xabc len 4');
  t.is(pk({ bth: bth({ opcode: 0x0c, psn: 1 }), reth: { va: 0x10n, rkey: 2, dmaLen: 4096 } }), 'RDMA READ REQUEST QP 0x11 psn 1 va 0x10 rkey 0x2 dmalen 4096');
  t.is(pk({ bth: bth({ opcode: 0x0d, psn: 1 }), aeth: makeAeth('ACK', 31, 2), payload: new Uint8Array(1024) }), 'RDMA READ RESPONSE FIRST QP 0x11 psn 1 msn 2 len 1024');
  t.is(pk({ bth: bth({ opcode: 0x13, psn: 1 }), atomicEth: { va: 0x10n, rkey: 2, swapAdd: 3n, compare: 4n } }), 'COMPARE SWAP QP 0x11 psn 1 va 0x10 rkey 0x2 swap 0x3 cmp 0x4');
  t.is(pk({ bth: bth({ opcode: 0x14, psn: 1 }), atomicEth: { va: 0x10n, rkey: 2, swapAdd: 3n, compare: 0n } }), 'FETCH ADD QP 0x11 psn 1 va 0x10 rkey 0x2 add 0x3');
  t.is(pk({ bth: bth({ opcode: 0x12, psn: 1 }), aeth: makeAeth('ACK', 31, 2), atomicAckEth: { origData: 5n } }), 'ATOMIC ACKNOWLEDGE QP 0x11 psn 1 msn 2 orig 0x5');
  t.is(pk({ bth: bth({ opcode: 0x17, psn: 1 }), ieth: 0x99, payload: new Uint8Array(8) }), 'SEND ONLY WITH INVALIDATE QP 0x11 psn 1 inv-rkey 0x99 len 8');
  t.is(pk({ bth: bth({ opcode: 0xa4, psn: 1 }), xrceth: { resv8: 0, xrcSrq: 3 }, payload: new Uint8Array(8) }), 'XRC SEND ONLY QP 0x11 psn 1 srq 0x3 len 8');
  t.is(pk({ bth: bth({ opcode: 0x31, psn: 1 }), payload: new Uint8Array(4) }), 'reserved 0x31 QP 0x11 psn 1 len 4');
});

// ---------------------------------------------------------------------------------------
// Malformed input
// ---------------------------------------------------------------------------------------

test('issues: pad count > payload, payload on ACK, unknown opcode, reserved bits, TVer, CNP size, misalignment', (t) => {
  const codes = (b: Uint8Array): string[] => decodeIbPacket(b).issues.map((i) => i.code);
  // SEND ONLY with PadCnt 3 and 2 payload bytes.
  t.deepEqual(codes(fromHex('04b0ffff00000011000000010102' + 'aabbccdd')), ['ib.padcnt', 'ib.align']);
  // ACKNOWLEDGE with 4 extra bytes.
  t.deepEqual(codes(fromHex('1100ffff0000001100000001' + '1f000001' + '01020304' + 'aabbccdd')), ['ib.payload']);
  // ACKNOWLEDGE with PadCnt.
  t.deepEqual(codes(fromHex('1110ffff0000001100000001' + '1f000001' + 'aabbccdd')), ['ib.padcnt']);
  // Unknown opcode: everything is payload.
  const u = decodeIbPacket(fromHex('1500ffff0000001100000001' + '01020304' + 'aabbccdd'));
  t.deepEqual(u.issues.map((i) => i.code), ['ib.opcode']);
  t.is(hex(u.value.payload), '01020304');
  t.is(u.value.icrc, 0xddccbbaa);
  // Reserved bits in bytes 4 and 8, TVer 1.
  t.deepEqual(codes(fromHex('0481ffff0100001101000001' + '00000000' + 'aabbccdd')), ['ib.tver', 'ib.reserved', 'ib.reserved']);
  // CNP with 8 instead of 16 reserved bytes.
  t.deepEqual(codes(fromHex('8100ffff0000001100000000' + '0000000000000000' + 'aabbccdd')), ['ib.cnp']);
  // Non-zero pad bytes.
  t.deepEqual(codes(fromHex('0420ffff0000001100000001' + '0102ffff' + 'aabbccdd')), ['ib.pad']);
  // RDMA WRITE ONLY whose RETH length disagrees with the payload.
  t.deepEqual(codes(fromHex('0a00ffff0000001100000001' + '0000000000001000' + '00000001' + '00000008' + '01020304' + 'aabbccdd')), ['ib.reth-len']);
  // Header truncated before the ICRC.
  const tr = decodeIbPacket(fromHex('0a00ffff0000001100000001' + '00000000' + 'aabbccdd'));
  t.deepEqual(tr.issues.map((i) => i.code), ['ib.truncated']);
  t.is(tr.value.reth, undefined);
  // GRH checks.
  const g = encodeGrh({ ipVer: 4, tclass: 0, flowLabel: 0, payLen: 100, nextHdr: 0x11, hopLimit: 1, sgid: '::1', dgid: '::2' });
  const gd = decodeGrh(Uint8Array.from([...g, 1, 2, 3]));
  t.deepEqual(gd.issues.map((i) => i.code), ['ib.grh', 'ib.grh', 'ib.truncated']);
  t.is(summarizeGrh(gd.value), 'GRH ::1 > ::2 hop 1');
  t.deepEqual(decodeGrh(g.subarray(0, 39)).issues.map((i) => i.code).includes('ib.truncated'), true);
});

test('robustness: every truncation of real packets of each opcode; random bytes', (t) => {
  const pick = ['a-first-contact#12', 'a-first-contact#13', 'a-first-contact#20', 'd-bulk-2MiB#20', 'd-bulk-2MiB#21'];
  const last = ROCE.find((r) => r.file === 'd-bulk-2MiB' && decodeIbPacket(ib(r)).value.bth.opcode === 0x08)!;
  for (const r of [...pick.map((k) => byKey.get(k)!), last]) {
    const full = ib(r);
    const net = r.frame.subarray(r.ipOff, r.ibOff);
    const info = opcodeInfo(full[0]!);
    for (let n = 0; n < full.length; n++) {
      const part = full.subarray(0, n);
      const d = decodeIbPacket(part);
      t.notThrows(() => summarizeIb(d.value));
      t.notThrows(() => encodeIbPacket(d.value));
      if (n < 16 + info.headerLength) t.true(d.issues.some((i) => i.code === 'ib.truncated'), `${r.file}#${r.n} prefix ${n}`);
      // Longer prefixes look structurally fine only when 4-aligned; the ICRC catches them.
      else if (d.issues.length === 0) t.not(icrcFromParts('ipv4', net, part), readIcrc(part), `${r.file}#${r.n} prefix ${n}`);
    }
    // Tree on every prefix too.
    for (let n = 0; n < full.length; n += 7) t.notThrows(() => decodeIbPacket(full.subarray(0, n), new Tree()));
  }
  const rnd = rng(1);
  for (let i = 0; i < 3000; i++) {
    const b = randBytes(rnd, (rnd() * 120) | 0);
    if (i % 4 === 0 && b.length) b[0] = [0x04, 0x0a, 0x11, 0x06, 0x64, 0x81, 0x12, 0x13][i % 8]!;
    const d = decodeIbPacket(b, i % 10 === 0 ? new Tree() : undefined);
    if (b.length < 16) t.true(d.issues.length > 0);
    t.notThrows(() => summarizeIb(d.value));
    t.notThrows(() => encodeIbPacket(d.value));
    t.notThrows(() => decodeGrh(b));
    t.notThrows(() => checkIcrc(b, 0, 'v2'));
    t.notThrows(() => checkIcrc(b, 0, 'v1'));
    t.notThrows(() => icrcRoceV2(b, (rnd() * 30) | 0));
  }
});

// ---------------------------------------------------------------------------------------
// Field tree
// ---------------------------------------------------------------------------------------

test('-V tree: nodes with absolute offsets for a real RDMA WRITE ONLY', (t) => {
  const r = byKey.get('a-first-contact#20')!;
  const tr = new Tree(r.ibOff);
  decodeIbPacket(ib(r), tr);
  const names = tr.nodes.map((n) => `${n.name}@${n.offset}+${n.length}`);
  t.deepEqual(names, [`BTH@${r.ibOff}+12`, `RETH@${r.ibOff + 12}+16`, `Payload@${r.ibOff + 28}+54`, `Pad@${r.ibOff + 82}+2`, `ICRC@${r.ibOff + 84}+4`]);
  const bthNode = tr.nodes[0]!;
  const find = (ns: FieldNode[] | undefined, name: string): FieldNode | undefined => ns?.find((n) => n.name === name);
  t.is(find(bthNode.children, 'OpCode')?.value, '0x0a RC RDMA WRITE ONLY');
  t.is(find(bthNode.children, 'PSN')?.value, '15551062');
  t.is(find(bthNode.children, 'PadCnt')?.value, '2');
  t.is(find(tr.nodes[1]!.children, 'R_Key')?.value, '0x3d3');
  t.is(find(tr.nodes[1]!.children, 'R_Key')?.offset, r.ibOff + 20);
  const ackTree = new Tree();
  decodeIbPacket(ib(byKey.get('a-first-contact#13')!), ackTree);
  t.is(ackTree.nodes[1]!.name, 'AETH');
  t.is(find(ackTree.nodes[1]!.children, 'Credit count')?.value, '31 (no credit information)');
  const g = new Tree();
  decodeGrh(encodeGrh({ ipVer: 6, tclass: 0, flowLabel: 0, payLen: 0, nextHdr: 0x1b, hopLimit: 1, sgid: '::ffff:10.55.0.1', dgid: '::ffff:10.55.0.2' }), g);
  t.is(find(g.nodes[0]!.children, 'SGID')?.value, '::ffff:10.55.0.1');
});

test('GRH round trip', (t) => {
  const g: Grh = { ipVer: 6, tclass: 0xb8, flowLabel: 0xfedcb, payLen: 60, nextHdr: 0x1b, hopLimit: 64, sgid: 'fe80::1', dgid: '::ffff:10.55.0.2' };
  const b = encodeGrh(g);
  t.is(hex(b, 0, 8), '6b8fedcb003c1b40');
  t.deepEqual(decodeGrh(b).value, g);
  t.deepEqual(decodeGrh(b).issues, []);
});

// ---------------------------------------------------------------------------------------
// Speed (informational; the bound is loose so it only catches pathological regressions)
// ---------------------------------------------------------------------------------------

test('ICRC throughput on the bulk capture', (t) => {
  const bulk = ROCE.filter((r) => r.file === 'd-bulk-2MiB');
  let bytes = 0;
  const t0 = process.hrtime.bigint();
  for (let k = 0; k < 5; k++) for (const r of bulk) { if (!checkIcrc(r.frame, r.ipOff, 'v2').ok) t.fail(); bytes += r.ibEnd - r.ipOff; }
  const s = Number(process.hrtime.bigint() - t0) / 1e9;
  const mbs = bytes / s / 2 ** 20;
  t.log(`ICRC: ${mbs.toFixed(0)} MiB/s, ${(bulk.length * 5 / s / 1e6).toFixed(2)} M frames/s`);
  t.true(mbs > 10);
});

// Keep the type import used.
const _h: IbExtHeader = 'RETH';
void _h;
