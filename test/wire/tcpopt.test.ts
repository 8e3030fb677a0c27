// TCP option 254 (RFC 6994 ExID) codec, checked against every SYN / SYN-ACK option in the
// real kernel captures (pcaps/*.pcap; tshark lists the same frames with tcp.option_kind==254).
import test from 'ava';
import { KERNEL_CAPTURES } from '../helpers.js';
import { join } from 'node:path';
import { Tree, fromHex, hex } from '../../dissectors/wire/common.js';
import {
  decodeTcpOpt, encodeTcpOpt, summarizeTcpOpt, smcTcpOpt, isLinuxSmcOption, SMCR_EXID, SMCD_EXID,
} from '../../dissectors/wire/tcpopt.js';
import type { TcpOpt } from '../../dissectors/wire/tcpopt.js';
import { ROOT, frameBytes } from '../helpers.js';

const PCAPS = join(ROOT, 'pcaps') + '/';


interface Found { file: string; n: number; flags: number; opt: Uint8Array; before: Uint8Array }

/** Every kind-254 option in IPv4/TCP frames (with the two bytes before it, for the NOP padding). */
function exOptions(): Found[] {
  const out: Found[] = [];
  // The first bundled kernel captures (the list below names their frames).
  for (const f of KERNEL_CAPTURES.map((n) => `${n}.pcap`)) {
    frameBytes(join(PCAPS, f)).forEach((fr, i) => {
      if (fr[12] !== 0x08 || fr[13] !== 0x00 || fr[23] !== 6) return;
      const tcp = 14 + (fr[14]! & 15) * 4;
      const hl = (fr[tcp + 12]! >> 4) * 4;
      let o = tcp + 20;
      while (o < tcp + hl) {
        const k = fr[o]!;
        if (k === 0) break;
        if (k === 1) { o++; continue; }
        const l = fr[o + 1]!;
        if (l < 2) break;
        if (k === 254) out.push({ file: f.replace('.pcap', ''), n: i + 1, flags: fr[tcp + 13]!, opt: fr.subarray(o, o + l), before: fr.subarray(o - 2, o) });
        o += l;
      }
    });
  }
  return out;
}

test('every option 254 in the captures: FE 06 E2D4C3D9 after two NOPs, only in SYN / SYN-ACK', (t) => {
  const found = exOptions();
  const where = found.map((f) => `${f.file}#${f.n}`);
  t.deepEqual(where, [
    'a-first-contact#3', 'a-first-contact#4',
    'b-second-contact#3', 'b-second-contact#4', 'b-second-contact#45', 'b-second-contact#46',
    'b-second-contact#87', 'b-second-contact#88', 'b-second-contact#104', 'b-second-contact#105',
    'c1-fallback-tcp-server#3', // the plain TCP server does not echo it
    'c2-fallback-server-decline#3', 'c2-fallback-server-decline#4',
    'd-bulk-2MiB#3', 'd-bulk-2MiB#4', 'e-testlink-teardown#3', 'e-testlink-teardown#4',
  ]);
  for (const f of found) {
    t.true((f.flags & 0x02) !== 0, 'SYN flag set');
    t.is(hex(f.before), '0101');
    const d = decodeTcpOpt(f.opt);
    t.deepEqual(d.issues, []);
    t.deepEqual(d.value, { kind: 254, length: 6, exid: 0xe2d4c3d9, exidBits: 32, name: 'smc-r', data: new Uint8Array(0) });
    t.is(summarizeTcpOpt(d.value), 'smc-r ExID 0xe2d4c3d9');
    t.true(isLinuxSmcOption(d.value));
    t.deepEqual(encodeTcpOpt(d.value), Uint8Array.from(f.opt));
  }
});

test('builders, SMC-D ExID, round trips', (t) => {
  t.is(hex(encodeTcpOpt(smcTcpOpt())), 'fe06e2d4c3d9');
  t.is(hex(encodeTcpOpt(smcTcpOpt('smc-d'))), 'fe06e2d4c3c4');
  t.is(SMCR_EXID, 0xe2d4c3d9);
  t.is(SMCD_EXID, 0xe2d4c3c4);
  const d = decodeTcpOpt(fromHex('fe06e2d4c3c4'));
  t.deepEqual(d.issues, []);
  t.is(d.value.name, 'smc-d');
  t.is(summarizeTcpOpt(d.value), 'smc-d ExID 0xe2d4c3c4');
  t.false(isLinuxSmcOption(d.value)); // Linux only accepts the SMC-R ExID
  const values: TcpOpt[] = [
    smcTcpOpt(), smcTcpOpt('smc-d'),
    { kind: 254, length: 8, exid: 0xe2d4c3d9, exidBits: 32, name: 'smc-r', data: fromHex('0102') },
    { kind: 254, length: 10, exid: 0x12345678, exidBits: 32, data: fromHex('aabbccdd') },
    { kind: 253, length: 6, exid: 0xdeadbeef, exidBits: 32, data: new Uint8Array(0) },
    { kind: 254, length: 12, exid: 0xf989, exidBits: 16, name: 'tfo', data: fromHex('0011223344556677') },
    { kind: 254, length: 4, exid: 0x454e, exidBits: 16, name: 'tcp-eno', data: new Uint8Array(0) },
    { kind: 254, length: 5, exid: 0x1234, exidBits: 16, data: fromHex('ff') },
  ];
  for (const v of values) {
    const b = encodeTcpOpt(v);
    t.is(b.length, v.length);
    t.deepEqual(decodeTcpOpt(b).value, v);
    t.deepEqual(encodeTcpOpt(decodeTcpOpt(b).value), b);
  }
  t.is(summarizeTcpOpt(values[3]!), 'exp ExID 0x12345678 len 10 data aabbccdd');
  t.is(summarizeTcpOpt(values[4]!), 'exp253 ExID 0xdeadbeef len 6');
  t.is(summarizeTcpOpt(values[5]!), 'tfo ExID 0xf989 len 12 data 0011223344556677');
  t.is(summarizeTcpOpt(values[2]!), 'smc-r ExID 0xe2d4c3d9 len 8');
});

test('malformed lengths are flagged (Linux accepts only even length >= 6)', (t) => {
  const codes = (h: string): string[] => decodeTcpOpt(fromHex(h)).issues.map((i) => `${i.severity}:${i.code}`);
  t.deepEqual(codes('fe07e2d4c3d900'), ['warn:tcpopt.length']);                // odd length: ignored by Linux
  t.false(isLinuxSmcOption(decodeTcpOpt(fromHex('fe07e2d4c3d900')).value));
  t.deepEqual(codes('fe08e2d4c3d90000'), ['note:tcpopt.length']);              // longer than Linux sends, accepted
  t.true(isLinuxSmcOption(decodeTcpOpt(fromHex('fe08e2d4c3d90000')).value));
  t.deepEqual(codes('fe04e2d4'), ['warn:tcpopt.length']);                      // ExID cut to 16 bits
  t.deepEqual(codes('fe03e2'), ['error:tcpopt.length']);                       // no room for an ExID
  t.deepEqual(codes('fe06e2d4c3'), ['error:tcpopt.truncated']);                // length > bytes present
  t.deepEqual(codes('fe06e2d4c3d90101'), ['note:tcpopt.trailing']);            // bytes after the option
  t.deepEqual(codes('fd06e2d4c3d9'), []);                                      // 253 is the other RFC 6994 kind
  t.deepEqual(codes('0206e2d4c3d9'), ['error:tcpopt.kind']);
  t.deepEqual(codes('fe'), ['error:tcpopt.truncated']);
  t.deepEqual(codes(''), ['error:tcpopt.truncated']);
  const tr = decodeTcpOpt(fromHex('fe06e2d4c3'));
  t.is(tr.value.exid, 0xe2d4);
  t.is(tr.value.exidBits, 16);
  t.deepEqual(encodeTcpOpt(tr.value), fromHex('fe06e2d4c3'));
});

test('tree nodes', (t) => {
  const tr = new Tree(54);
  decodeTcpOpt(fromHex('fe06e2d4c3d9'), tr);
  const root = tr.nodes[0]!;
  t.is(root.value, 'smc-r ExID 0xe2d4c3d9');
  t.deepEqual(root.children!.map((n) => `${n.name}@${n.offset}+${n.length}=${n.value}`), ['Kind@54+1=254', 'Length@55+1=6', 'ExID@56+4=0xe2d4c3d9 (smc-r)']);
});

test('robustness: every prefix of real/constructed options and random bytes', (t) => {
  for (const h of ['fe06e2d4c3d9', 'fe0ee2d4c3d90102030405060708', 'fe0cf9890011223344556677']) {
    const b = fromHex(h);
    for (let n = 0; n < b.length; n++) {
      const d = decodeTcpOpt(b.subarray(0, n), new Tree());
      t.true(d.issues.some((i) => i.severity === 'error'), `${h} prefix ${n}`);
      t.notThrows(() => summarizeTcpOpt(d.value));
      t.deepEqual(encodeTcpOpt(d.value), b.subarray(0, n).length >= 2 ? b.subarray(0, n) : encodeTcpOpt(d.value));
    }
  }
  let s = 12345;
  const rnd = (): number => { s = (Math.imul(s, 1103515245) + 12345) >>> 0; return s >>> 16; };
  for (let i = 0; i < 5000; i++) {
    const b = new Uint8Array(rnd() % 20);
    for (let j = 0; j < b.length; j++) b[j] = rnd() & 0xff;
    if (i & 1 && b.length) b[0] = 254;
    const d = decodeTcpOpt(b, i % 3 === 0 ? new Tree() : undefined);
    t.notThrows(() => summarizeTcpOpt(d.value));
    t.notThrows(() => encodeTcpOpt(d.value));
    if (b.length < 4) t.true(d.issues.length > 0);
  }
});
