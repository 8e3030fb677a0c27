// CDC codec tests (the rules over its fields: cdcrules.test.ts). Real messages: test/fixtures/llc/*.json (all RC SEND payloads of
// the kernel captures, BTH/ICRC stripped); tshark's own CDC decoding of the same frames:
// test/fixtures/llc/cdc-tshark.json (tshark gets the 44-byte CDC right). Expected payload sizes,
// tokens and RMBE sizes come from the guest logs (pcaps/*.guest-*.log).
import test from 'ava';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { decodeCdc, encodeCdc, summarizeCdc, makeCdc, type CdcMessage } from '../../dissectors/wire/cdc.js';
import { cursorDiff, cursorDistance, seqNewer } from '../../dissectors/wire/cdcrules.js';
import { Tree, fromHex, hex } from '../../dissectors/wire/common.js';

interface FixMsg { frame: number; src: string; dst: string; qp: number; psn: number; hex: string }
const FIX = join(process.cwd(), 'test', 'fixtures', 'llc');
const CAPS = ['a-first-contact', 'b-second-contact', 'd-bulk-2MiB', 'e-testlink-teardown'];
const ALL = new Map(CAPS.map((c) => [c, (JSON.parse(readFileSync(join(FIX, `${c}.json`), 'utf8')) as { messages: FixMsg[] }).messages.filter((m) => m.hex.startsWith('fe'))]));
const TSHARK = (JSON.parse(readFileSync(join(FIX, 'cdc-tshark.json'), 'utf8')) as { captures: Record<string, number[][]> }).captures;

function cdc(cap: string, n: number): CdcMessage {
  const m = ALL.get(cap)!.find((x) => x.frame === n)!;
  const d = decodeCdc(fromHex(m.hex));
  if (d.issues.length) throw new Error(JSON.stringify(d.issues));
  return d.value;
}

const NOFLAGS = { writeBlocked: false, urgentPending: false, urgentPresent: false, cursorUpdateRequested: false, failoverValidation: false };
const NOCONN = { peerDoneWriting: false, peerConnClosed: false, peerConnAbort: false };

test('every real CDC: clean decode, exact re-encode, same fields as tshark', (t) => {
  let n = 0;
  for (const [cap, msgs] of ALL) {
    const ts = new Map(TSHARK[cap]!.map((r) => [r[0]!, r]));
    t.is(ts.size, msgs.length, cap);
    for (const m of msgs) {
      const b = fromHex(m.hex);
      const d = decodeCdc(b);
      t.deepEqual(d.issues, [], `${cap} ${m.frame}`);
      t.is(hex(encodeCdc(d.value)), m.hex);
      const v = d.value;
      const r = ts.get(m.frame)!;
      const pf = (v.prodFlags.writeBlocked ? 0x80 : 0) | (v.prodFlags.urgentPending ? 0x40 : 0) | (v.prodFlags.urgentPresent ? 0x20 : 0) | (v.prodFlags.cursorUpdateRequested ? 0x10 : 0) | (v.prodFlags.failoverValidation ? 0x08 : 0);
      const cf = (v.connFlags.peerDoneWriting ? 0x80 : 0) | (v.connFlags.peerConnClosed ? 0x40 : 0) | (v.connFlags.peerConnAbort ? 0x20 : 0);
      t.deepEqual([m.frame, v.seq, v.token, v.prod.wrap, v.cons.wrap, v.prod.count, v.cons.count, pf, cf], r, `${cap} ${m.frame}`);
      n++;
    }
  }
  t.is(n, 5 + 20 + 69 + 5);
});

test('a-first-contact: the 54-byte payload, the 22-byte reply and the close flags', (t) => {
  // guest-a: "sent 54 bytes ... reply: ACK 54 fnv1a=b5ca2d80" (22 bytes); conninfo token=0x1
  t.deepEqual(cdc('a-first-contact', 21), {
    type: 0xfe, length: 44, seq: 1, token: 1, prod: { wrap: 0, count: 54 }, cons: { wrap: 0, count: 0 },
    prodFlags: NOFLAGS, connFlags: NOCONN,
  });
  t.is(summarizeCdc(cdc('a-first-contact', 21)), 'CDC seq 1 token 0x00000001 prod 0:54 cons 0:0');
  const done = cdc('a-first-contact', 25); // A shutdown(WR)
  t.deepEqual(done.connFlags, { ...NOCONN, peerDoneWriting: true });
  t.is(done.seq, 2);
  const reply = cdc('a-first-contact', 28); // B -> A: 22 bytes, consumed A's 54
  t.deepEqual([reply.seq, reply.prod.count, reply.cons.count], [1, 22, 54]);
  const closed = cdc('a-first-contact', 31);
  t.deepEqual(closed.connFlags, { ...NOCONN, peerConnClosed: true });
  t.is(summarizeCdc(closed), 'CDC seq 2 token 0x00000001 prod 0:22 cons 0:54 [closed]');
  const last = cdc('a-first-contact', 33);
  t.deepEqual(last.connFlags, { ...NOCONN, peerDoneWriting: true, peerConnClosed: true });
  t.is(summarizeCdc(last), 'CDC seq 3 token 0x00000001 prod 0:54 cons 0:22 [done,closed]');
  t.is(cursorDiff({ wrap: 0, count: 0 }, reply.cons, 65536), 54);
});

test('d-bulk-2MiB: 32 wraps of the 64 KiB RMBE, writer blocked, total = 2097275 bytes', (t) => {
  const msgs = ALL.get('d-bulk-2MiB')!.map((m) => ({ m, v: decodeCdc(fromHex(m.hex)).value }));
  const aToB = msgs.filter((x) => x.m.src === '10.55.0.1').map((x) => x.v);
  const bToA = msgs.filter((x) => x.m.src === '10.55.0.2').map((x) => x.v);
  const first = aToB[0]!;
  t.deepEqual(first, {
    type: 0xfe, length: 44, seq: 1, token: 1, prod: { wrap: 1, count: 0 }, cons: { wrap: 0, count: 0 },
    prodFlags: { ...NOFLAGS, writeBlocked: true }, connFlags: NOCONN,
  });
  t.is(summarizeCdc(first), 'CDC seq 1 token 0x00000001 prod 1:0 cons 0:0 [wb]');
  t.is(aToB.filter((v) => v.prodFlags.writeBlocked).length, 32);
  // producer progress summed with cursorDiff on the 64 KiB ring (log: rmbe=65536 peer_rmbe=65536)
  let prev = { wrap: 0, count: 0 };
  let total = 0;
  for (const v of aToB) { total += cursorDiff(prev, v.prod, 65536); prev = v.prod; }
  t.is(total, 2097275); // guest-a: "sent 2097275 bytes"
  t.deepEqual(aToB[aToB.length - 1]!.prod, { wrap: 32, count: 123 });
  t.is(cursorDistance({ wrap: 0, count: 0 }, { wrap: 32, count: 123 }, 65536), 2097275);
  // B's consumer cursor follows one wrap per update
  const cons = bToA.map((v) => v.cons);
  t.deepEqual(cons.slice(0, 3), [{ wrap: 1, count: 0 }, { wrap: 2, count: 0 }, { wrap: 3, count: 0 }]);
  t.deepEqual(cons[cons.length - 1], { wrap: 32, count: 123 });
  for (let i = 1; i < aToB.length; i++) t.true(seqNewer(aToB[i]!.seq, aToB[i - 1]!.seq));
  t.is(bToA[bToA.length - 1]!.prod.count, 27); // B's reply "ACK 2097275 fnv1a=a1a83141" = 27 bytes
});

test('round trips of synthetic CDCs (every flag, reserved, credits byte, trailing)', (t) => {
  const all = makeCdc(0xffff, 0xdeadbeef, { wrap: 0xffff, count: 0xffffffff }, { wrap: 7, count: 524287 },
    { writeBlocked: true, urgentPending: true, urgentPresent: true, cursorUpdateRequested: true, failoverValidation: true },
    { peerDoneWriting: true, peerConnClosed: true, peerConnAbort: true });
  const samples: CdcMessage[] = [
    makeCdc(3, 1, { wrap: 1, count: 1004 }, { wrap: 0, count: 0 }, { writeBlocked: true }, { peerDoneWriting: true }),
    all,
    { ...makeCdc(9, 2, { wrap: 0, count: 1, reserved: 0x1234 }, { wrap: 0, count: 2, reserved: 1 }), prodFlags: { ...NOFLAGS, other: 5 }, connFlags: { ...NOCONN, other: 0x11 } },
    { ...makeCdc(1, 1, { wrap: 0, count: 0 }, { wrap: 0, count: 0 }), reserved: Uint8Array.of(8, ...new Array<number>(17).fill(0)) },
    { ...makeCdc(1, 1, { wrap: 0, count: 0 }, { wrap: 0, count: 0 }), reserved: Uint8Array.from({ length: 18 }, (_, i) => i), trailing: Uint8Array.of(1, 2, 3, 4) },
  ];
  for (const x of samples) {
    const b = encodeCdc(x);
    const d = decodeCdc(b);
    t.deepEqual(d.value, x);
    t.is(hex(encodeCdc(d.value)), hex(b));
  }
  t.is(summarizeCdc(samples[0]!), 'CDC seq 3 token 0x00000001 prod 1:1004 cons 0:0 [wb,done]');
  t.is(summarizeCdc(all), 'CDC seq 65535 token 0xdeadbeef prod 65535:4294967295 cons 7:524287 [wb,urgpend,urg,curreq,failover,done,closed,abort]');
  const b = encodeCdc(all);
  t.is(hex(b), 'fe2cffffdeadbeef0000ffffffffffff000000070007ffff f8e0 000000000000000000000000000000000000'.replace(/ /g, ''));
  t.deepEqual(decodeCdc(b).issues, []);
  t.deepEqual(decodeCdc(encodeCdc(samples[2]!)).issues.map((i) => i.code).sort(), ['cdc.flags', 'cdc.flags', 'cdc.reserved', 'cdc.reserved']);
  t.deepEqual(decodeCdc(encodeCdc(samples[3]!)).issues.map((i) => [i.severity, i.code, i.offset]), [['note', 'cdc.credits', 26]]);
  t.deepEqual(decodeCdc(encodeCdc(samples[4]!)).issues.map((i) => i.code), ['cdc.reserved', 'cdc.trailing']);
});

test('wrong type/length are flagged; field tree', (t) => {
  const b = encodeCdc(makeCdc(1, 1, { wrap: 0, count: 54 }, { wrap: 0, count: 0 }));
  b[0] = 0xfd; b[1] = 48;
  const d = decodeCdc(b);
  t.deepEqual(d.issues.map((i) => i.code), ['cdc.type', 'cdc.length']);
  t.is(summarizeCdc(d.value), 'CDC seq 1 token 0x00000001 prod 0:54 cons 0:0 (type 0xfd len 48)');
  const tree = new Tree(50);
  decodeCdc(fromHex(ALL.get('d-bulk-2MiB')![0]!.hex), tree);
  t.deepEqual(tree.nodes.map((n) => [n.name, n.offset, n.length]), [
    ['type', 50, 1], ['length', 51, 1], ['sequence number', 52, 2], ['alert token', 54, 4],
    ['producer cursor', 58, 8], ['consumer cursor', 66, 8], ['producer flags', 74, 1], ['connection state flags', 75, 1],
  ]);
  t.is(tree.nodes[4]!.value, 'wrap 1 count 0');
  t.is(tree.nodes[6]!.value, '0x80 wb');
});

test('every truncation and random bytes: no throw, issues present', (t) => {
  const inputs = [...ALL.values()].flat().slice(0, 30).map((m) => fromHex(m.hex));
  for (const b of inputs) {
    for (let n = 0; n < b.length; n++) {
      const d = decodeCdc(b.subarray(0, n), new Tree());
      t.true(d.issues.some((i) => i.code === 'cdc.truncated'));
      t.notThrows(() => summarizeCdc(d.value));
      t.notThrows(() => encodeCdc(d.value));
    }
  }
  let s = 99;
  const rnd = (): number => { s = (Math.imul(s, 1103515245) + 12345) >>> 0; return s >>> 8; };
  for (let i = 0; i < 10000; i++) {
    const len = rnd() % 80;
    const b = new Uint8Array(len);
    for (let j = 0; j < len; j++) b[j] = rnd() & 0xff;
    const d = decodeCdc(b, i % 10 === 0 ? new Tree() : undefined);
    summarizeCdc(d.value);
    encodeCdc(d.value);
    if (len !== 44) t.true(d.issues.length > 0);
  }
});
