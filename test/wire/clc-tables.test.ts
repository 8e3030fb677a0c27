// The CLC and TCP option field tables (dissectors/wire/views/) against an independent reading
// of the bytes: offsets written out here by hand from formats.md §2–§6 and read with DataView,
// on every real CLC message (Linux 6.12 v2 captures, hwipl v1 dumps). The -V tree's nodes must
// sit where the hand-written offsets say and show those values; the endpoint's framing helpers
// must agree with the codec on every message and every truncation of it.
import test from 'ava';
import { readFileSync } from 'node:fs';
import { decodeClc, clcMessageLength, clcLengthField, isClcEyecatcherAt, CLC_DECLINE_V1_LEN, CLC_DECLINE_V2_LEN, CLC_SMCR_V1_LEN, CLC_SMCR_V2_MIN_LEN, CLC_FCE_LEN } from '../../dissectors/wire/clc.js';
import { decodeTcpOpt, encodeTcpOpt, smcTcpOpt } from '../../dissectors/wire/tcpopt.js';
import { fromHex, Tree, type FieldNode } from '../../dissectors/wire/common.js';
import { addField, addSpan, defineView, entryAt, tableSize } from '../../dissectors/wire/views/field.js';
import { frameClc, hasClcTrailer } from '../../endpoint/clc/channel.js';
import { ROOT } from '../helpers.js';

interface KernelMsg { capture: string; frame: number; hex: string }
const kernel: KernelMsg[] = JSON.parse(readFileSync(ROOT + '/test/fixtures/clc/kernel-clc.json', 'utf8'));
const V1 = ['proposal-ipv4', 'proposal-ipv6', 'accept-ipv4', 'accept-ipv6', 'confirm-ipv4', 'confirm-ipv6', 'decline-ipv4', 'decline-ipv6']
  .map((n) => fromHex(readFileSync(`${ROOT}/pcaps/external/smcr-v1-clc/${n}.hex`, 'utf8')));
const all = [...V1, ...kernel.map((k) => fromHex(k.hex))];

function node(nodes: FieldNode[], name: string): FieldNode | undefined { return nodes.find((n) => n.name === name); }

test('CLC -V nodes sit at the offsets of formats.md and show the bytes there, on every real message', (t) => {
  let accepts = 0, declines = 0, proposals = 0;
  for (const b of all) {
    const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
    const tr = new Tree();
    const d = decodeClc(b, tr);
    const at = (name: string): number => node(tr.nodes, name)?.offset ?? -1;
    t.is(at('Length'), 5);
    t.is(node(tr.nodes, 'Length')!.value, String(dv.getUint16(5)));
    t.is(at('Trailer'), b.length - 4);
    const m = d.value;
    if (m.type === 'accept' || m.type === 'confirm') {
      accepts++;
      const r = m.r!;
      t.is(r.qpn, (dv.getUint16(38) << 8) | dv.getUint8(40));
      t.is(r.rkey, dv.getUint32(41));
      t.is(r.token, dv.getUint32(46));
      t.is(r.rmbVa, dv.getBigUint64(52));
      t.is(r.psn, (dv.getUint8(61) << 16) | dv.getUint16(62));
      t.is(r.mtuCode, dv.getUint8(50) & 15);
      for (const [name, off, len] of [['QP number', 38, 3], ['RMB rkey', 41, 4], ['RMBE alert token', 46, 4], ['RMB virtual address', 52, 8], ['Initial PSN', 61, 3]] as const) {
        const n = node(tr.nodes, name);
        t.is(n?.offset, off, name);
        t.is(n?.length, len, name);
      }
      t.is(b.length >= CLC_SMCR_V2_MIN_LEN || b.length === CLC_SMCR_V1_LEN, true);
      if (r.fce) {
        const f = node(tr.nodes, 'First-contact extension')!;
        t.is(f.offset, 104);
        t.is(f.length, CLC_FCE_LEN);
        t.is(node(f.children!, 'Hostname')?.offset, 108);
      }
    } else if (m.type === 'decline') {
      declines++;
      t.is(m.diagnosis, dv.getUint32(16));
      t.is(at('Peer diagnosis'), 16);
      t.true(b.length === CLC_DECLINE_V1_LEN || b.length === CLC_DECLINE_V2_LEN);
    } else if (m.type === 'proposal') {
      proposals++;
      t.is(m.ipAreaOffset, dv.getUint16(38));
      t.is(at('IP area offset'), 38);
      if (m.v2) {
        const V = 52 + m.smcd!.v2ExtOffset!;
        const x = node(tr.nodes, 'v2 extension')!;
        t.is(x.offset, V);
        t.is(m.v2.maxLinks, dv.getUint8(V + 25));
        t.is(node(x.children!, 'RoCEv2 GID')?.offset, V + 8);
      }
    }
  }
  t.true(accepts >= 8 && declines >= 2 && proposals >= 4, `${accepts} accept/confirm, ${declines} declines, ${proposals} proposals`);
});

test('the endpoint frames CLC with the codec helpers: same length and trailer verdict on every message and truncation', (t) => {
  for (const b of all) {
    const buf = Buffer.from(b);
    t.is(clcLengthField(b), b.length);
    t.true(isClcEyecatcherAt(b, 0));
    t.true(isClcEyecatcherAt(b, b.length - 4));
    t.false(isClcEyecatcherAt(b, b.length - 3), 'past the end reads 0: no eyecatcher');
    t.deepEqual(frameClc(buf), { kind: 'message', length: b.length });
    t.true(hasClcTrailer(buf, b.length));
    for (let n = 0; n < b.length; n++) {
      const f = frameClc(buf.subarray(0, n));
      t.is(f.kind, 'partial', `${n} bytes`);
      t.is(clcMessageLength(b.subarray(0, n)), n >= 8 ? b.length : undefined);
    }
    const bad = Buffer.from(b);
    bad[b.length - 1]! ^= 0xff;
    t.false(hasClcTrailer(bad, b.length));
    bad[0]! ^= 0xff;
    t.is(frameClc(bad).kind, 'bad');
  }
});

test('TCP option table: ExID at byte 2, 32 or 16 bits; tree nodes at the table offsets; encode round trip', (t) => {
  const b = encodeTcpOpt(smcTcpOpt());
  t.deepEqual([...b], [0xfe, 0x06, 0xe2, 0xd4, 0xc3, 0xd9]);
  const tr = new Tree();
  const d = decodeTcpOpt(b, tr);
  const kids = tr.nodes[0]!.children!;
  t.deepEqual(kids.map((n) => [n.name, n.offset, n.length]), [['Kind', 0, 1], ['Length', 1, 1], ['ExID', 2, 4]]);
  t.deepEqual(encodeTcpOpt(d.value), b);
  const tfo = Uint8Array.from([0xfe, 0x08, 0xf9, 0x89, 1, 2, 3, 4]);
  const tr2 = new Tree();
  const d2 = decodeTcpOpt(tfo, tr2);
  t.is(d2.value.exidBits, 16);
  t.deepEqual(tr2.nodes[0]!.children!.map((n) => [n.name, n.offset, n.length]), [['Kind', 0, 1], ['Length', 1, 1], ['ExID', 2, 2], ['Data', 4, 4]]);
  t.deepEqual(encodeTcpOpt(d2.value), tfo);
});

test('field tables: byte runs get no accessor but count in the size; tree helpers take name, offset and length from the table', (t) => {
  const T = { n: { at: 0, size: 2, label: 'Num' }, addr: { at: 2, len: 4, label: 'Address' }, plen: { at: 6, size: 1 }, list: { at: 8, len: 3, label: 'Entry' } } as const;
  const V = defineView('RunsView', T);
  t.is(tableSize(T), 11);
  const v = new V().reset(Uint8Array.from([1, 2, 9, 9, 9, 9, 24]));
  t.is(v.n, 0x102);
  t.false('addr' in v, 'no accessor for a byte run');
  const tr = new Tree(100);
  addField(tr, T.n, v.n);
  addSpan(tr, T.addr, T.plen, '9.9.9.9/24');
  addField(tr, T.list, 'x', entryAt(T.list, 2) - T.list.at, 'Entry 2');
  t.deepEqual(tr.nodes.map((x) => [x.name, x.offset, x.length, x.value]), [['Num', 100, 2, '258'], ['Address', 102, 5, '9.9.9.9/24'], ['Entry 2', 114, 3, 'x']]);
});
