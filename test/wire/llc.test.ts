// LLC codec tests. Real messages: test/fixtures/llc/*.json (every RC SEND payload of the kernel
// captures in pcaps/, extracted once with a python pcap parser: BTH stripped, ICRC stripped).
// Expected values come from the guest logs (pcaps/*.guest-*.log: GIDs, node GUIDs → MACs, link ids,
// link uid, max links/conns) and from tshark's (correct) decoding of the CLC Accept/Confirm in the
// same captures (QPNs, rkeys, RMB virtual addresses) — tshark itself cannot decode these LLC v2
// messages (little-endian length).
import test from 'ava';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  decodeLlc, encodeLlc, summarizeLlc, deleteLinkReason, addLinkRejectReason, llcTypeName, llcTypeByte,
  DELETE_LINK_REASONS, LlcCode,
  type LlcMessage, type LlcConfirmLink, type LlcAddLink, type LlcDeleteLink, type LlcDeleteRkey,
  type LlcTestLink, type LlcConfirmRkey, type LlcRequestAddLink, type LlcUnknown,
} from '../../dissectors/wire/llc.js';
import { Tree, fromHex, hex } from '../../dissectors/wire/common.js';

interface FixMsg { frame: number; src: string; dst: string; qp: number; psn: number; hex: string }
const FIX = join(process.cwd(), 'test', 'fixtures', 'llc');
function load(name: string): FixMsg[] {
  return (JSON.parse(readFileSync(join(FIX, `${name}.json`), 'utf8')) as { messages: FixMsg[] }).messages;
}
const CAPS = ['a-first-contact', 'b-second-contact', 'd-bulk-2MiB', 'e-testlink-teardown'];
const ALL = new Map(CAPS.map((c) => [c, load(c)]));
function frame(cap: string, n: number): Uint8Array {
  const m = ALL.get(cap)!.find((x) => x.frame === n);
  if (!m) throw new Error(`no frame ${n} in ${cap}`);
  return fromHex(m.hex);
}
function llc<T extends LlcMessage>(cap: string, n: number, kind: T['kind']): { v: T; codes: string[] } {
  const d = decodeLlc(frame(cap, n));
  if (d.value.kind !== kind) throw new Error(`frame ${n}: ${d.value.kind}, expected ${kind}`);
  return { v: d.value as T, codes: d.issues.map((i) => i.code) };
}

const GID_A = '::ffff:10.55.0.1'; // guest-a GID[1] (RoCE v2)
const GID_B = '::ffff:10.55.0.2'; // guest-b GID[1]
const MAC_A = '52:54:00:55:00:0a'; // guest-a node GUID 5054:00ff:fe55:000a
const MAC_B = '52:54:00:55:00:0b';

// ---------------------------------------------------------------- real messages

test('every real LLC message re-encodes to the same bytes, LE v2 length, no errors', (t) => {
  let n = 0;
  for (const [cap, msgs] of ALL) {
    for (const m of msgs) {
      const b = fromHex(m.hex);
      if (b[0] === 0xfe) continue;
      const d = decodeLlc(b);
      t.is(hex(encodeLlc(d.value)), m.hex, `${cap} frame ${m.frame}`);
      t.is(d.value.llcVersion, 2);
      t.is(d.value.lengthOrder, 'le');
      t.is(d.value.length, b.length);
      t.deepEqual(d.issues.filter((i) => i.severity !== 'note'), [], `${cap} frame ${m.frame}`);
      t.not(d.value.kind, 'unknown');
      n++;
    }
  }
  t.is(n, 8 + 32 + 8 + 29);
});

test('CONFIRM LINK v2 request (a-first-contact frame 12, server B -> client A)', (t) => {
  const { v, codes } = llc<LlcConfirmLink>('a-first-contact', 12, 'confirm_link');
  t.deepEqual(codes, []);
  t.deepEqual(v, {
    kind: 'confirm_link', llcVersion: 2, type: 0x21, length: 44, lengthOrder: 'le', response: false,
    noRmbeEyecatcher: true, mac: MAC_B, gid: GID_B,
    qpn: 0x11, // CLC Accept "Server QP Number: 0x000011"
    linkId: 1, // smc_diag lgrinfo link_id=1
    // netlink link uid = 16842752 = 0x01010000: the same 4 bytes 00 00 01 01 read as an x86 u32;
    // big-endian they are LG id 256 (lgr_smcr id = 256) + link id 1.
    linkUid: 0x00000101,
    maxLinks: 2, maxConns: 255, // lgr v2: max_links = 2, max_conns = 255
  });
  t.is(summarizeLlc(v), `LLC CONFIRM LINK v2 req link 1 qp 0x11 gid ${GID_B} mac ${MAC_B} uid 0x00000101 maxlinks 2 maxconns 255 [len le]`);
  // smc netlink view of the uid (host-order read of the same bytes on x86)
  const b = frame('a-first-contact', 12);
  t.is(new DataView(b.buffer, b.byteOffset).getUint32(30, true), 16842752);
});

test('CONFIRM LINK v2 response (a-first-contact frame 14, client A -> server B)', (t) => {
  const { v, codes } = llc<LlcConfirmLink>('a-first-contact', 14, 'confirm_link');
  t.deepEqual(codes, []);
  t.is(v.type, 0x21);
  t.true(v.response);
  t.true(v.noRmbeEyecatcher);
  t.is(v.mac, MAC_A);
  t.is(v.gid, GID_A);
  t.is(v.qpn, 0x11); // CLC Confirm "Client QP Number: 0x000011"
  t.is(v.linkId, 1);
  t.is(v.linkUid, 0x101);
  t.is(v.maxLinks, 2);
  t.is(v.maxConns, 255);
  t.is(v.flagsOther, undefined);
  t.is(summarizeLlc(v), `LLC CONFIRM LINK v2 rsp link 1 qp 0x11 gid ${GID_A} mac ${MAC_A} uid 0x00000101 maxlinks 2 maxconns 255 [len le]`);
});

test('ADD LINK v2 request with its extension (a-first-contact frame 16, 88 bytes)', (t) => {
  const { v, codes } = llc<LlcAddLink>('a-first-contact', 16, 'add_link');
  t.deepEqual(codes, []);
  t.deepEqual(v, {
    kind: 'add_link', llcVersion: 2, type: 0x22, length: 88, lengthOrder: 'le', response: false,
    rejected: false, rejectReason: 0, mac: MAC_B, gid: GID_B, qpn: 0x12, linkId: 2, mtu: 3, psn: 0xa2e82a,
    v2: {
      direct: true, targetGid: GID_B, numRkeys: 1, numRkeysOrder: 'le',
      // rkey/VA of B's RMB = CLC Accept "Server RMB Rkey 0x000003d3", "Server's RMB Virtual Address 0xff2b28d5447b0000"
      rkeys: [{ rkey: 0x3d3, rkeyNew: 0x548, vaddrNew: 0xff2b28d5447b0000n }],
    },
  });
  t.is(summarizeLlc(v), `LLC ADD LINK v2 req link 2 qp 0x12 gid ${GID_B} mac ${MAC_B} mtu 1024 psn 10676266 direct target ${GID_B} rkeys 1 0x3d3->0x548@0xff2b28d5447b0000 [len le]`);
  // the LE count bytes at 70
  const b = frame('a-first-contact', 16);
  t.deepEqual([b[70], b[71]], [1, 0]);
});

test('ADD LINK v2 reject (a-first-contact frame 18): echo of the request, 44 bytes, reason nibble lost', (t) => {
  const { v, codes } = llc<LlcAddLink>('a-first-contact', 18, 'add_link');
  t.deepEqual(codes, ['llc.reject-reason']);
  t.deepEqual(v, {
    kind: 'add_link', llcVersion: 2, type: 0x22, length: 44, lengthOrder: 'le', response: true,
    rejected: true, rejectReason: 0, mac: MAC_B, gid: GID_B, qpn: 0x12, linkId: 2, mtu: 3, psn: 0xa2e82a,
  });
  t.is(summarizeLlc(v), `LLC ADD LINK v2 rsp REJECT (unspecified) link 2 qp 0x12 gid ${GID_B} mac ${MAC_B} mtu 1024 psn 10676266 [len le]`);
  // observed bytes 1-2 = 2c 00 (formats.md §12.16 predicted 2c 01)
  const b = frame('a-first-contact', 18);
  t.deepEqual([b[1], b[2], b[3]], [0x2c, 0x00, 0xc0]);
});

test('DELETE RKEY v2 (a-first-contact frames 35/36/39/41)', (t) => {
  const b35 = llc<LlcDeleteRkey>('a-first-contact', 35, 'delete_rkey');
  t.deepEqual(b35.codes, []);
  t.deepEqual(b35.v, {
    kind: 'delete_rkey', llcVersion: 2, type: 0x29, length: 44, lengthOrder: 'le', response: false,
    negative: false, numRkeys: 1, errorMask: 0, variable: false, rkeys: [0x3d3], // B's RMB (CLC Accept rkey)
  });
  t.is(summarizeLlc(b35.v), 'LLC DELETE RKEY v2 req n 1 0x3d3 [len le]');
  const a36 = llc<LlcDeleteRkey>('a-first-contact', 36, 'delete_rkey');
  t.deepEqual(a36.v.rkeys, [0x39b]); // A's RMB: CLC Confirm "Client RMB Rkey: 0x0000039b"
  for (const n of [39, 41]) {
    const r = llc<LlcDeleteRkey>('a-first-contact', n, 'delete_rkey');
    t.true(r.v.response);
    t.false(r.v.negative);
    t.is(r.v.numRkeys, 1);
    t.is(r.v.errorMask, 0);
    t.deepEqual(r.v.rkeys, [0]); // Linux answers with the count and zeroed rkeys
  }
  // d-bulk: B 0x36e, A 0x3e9
  t.deepEqual(llc<LlcDeleteRkey>('d-bulk-2MiB', 2243, 'delete_rkey').v.rkeys, [0x36e]);
  t.deepEqual(llc<LlcDeleteRkey>('d-bulk-2MiB', 2245, 'delete_rkey').v.rkeys, [0x3e9]);
});

test('CONFIRM RKEY v2 (b-second-contact): rkeys of the new connections, matching their CLC Accept/Confirm', (t) => {
  const expect: Array<[number, boolean, number, bigint]> = [
    [50, false, 0x3a1, 0xff3eb55c820e0000n], // B's RMB, conn 2 Accept (frame 54): rkey 0x3a1, VA 0xff3eb55c820e0000
    [52, true, 0x3a1, 0xff3eb55c820e0000n],
    [56, false, 0x3a7, 0xff290e4bc3550000n], // A's RMB, conn 2 Confirm (frame 60)
    [58, true, 0x3a7, 0xff290e4bc3550000n],
    [109, false, 0x646, 0xff3eb55c82100000n], // conn 4 Accept (frame 113)
    [115, false, 0x4a6, 0xff290e4bc22f0000n], // conn 4 Confirm (frame 119)
  ];
  for (const [n, rsp, rkey, va] of expect) {
    const { v, codes } = llc<LlcConfirmRkey>('b-second-contact', n, 'confirm_rkey');
    t.deepEqual(codes, []);
    t.deepEqual(v, {
      kind: 'confirm_rkey', llcVersion: 2, type: 0x26, length: 44, lengthOrder: 'le', response: rsp,
      negative: false, retry: false, numRtokens: 0, rkey, vaddr: va,
      others: [{ linkId: 0, rkey: 0, vaddr: 0n }, { linkId: 0, rkey: 0, vaddr: 0n }],
    });
  }
  t.is(summarizeLlc(llc<LlcConfirmRkey>('b-second-contact', 50, 'confirm_rkey').v), 'LLC CONFIRM RKEY v2 req rkey 0x3a1 va 0xff3eb55c820e0000 +0 [len le]');
});

test('TEST LINK v2 (e-testlink-teardown frames 46-52): Linux 6.12 sends zero user data', (t) => {
  for (const [n, rsp] of [[46, false], [48, true], [50, false], [52, true]] as const) {
    const { v, codes } = llc<LlcTestLink>('e-testlink-teardown', n, 'test_link');
    t.deepEqual(codes, []);
    t.deepEqual(v, { kind: 'test_link', llcVersion: 2, type: 0x27, length: 44, lengthOrder: 'le', response: rsp, userData: new Uint8Array(16) });
  }
  t.is(summarizeLlc(llc<LlcTestLink>('e-testlink-teardown', 46, 'test_link').v), 'LLC TEST LINK v2 req data 00000000000000000000000000000000 [len le]');
});

test('DELETE LINK v2 both ways (e-testlink-teardown: rmmod smc on A)', (t) => {
  const a = llc<LlcDeleteLink>('e-testlink-teardown', 54, 'delete_link');
  t.deepEqual(a.codes, []);
  t.deepEqual(a.v, { kind: 'delete_link', llcVersion: 2, type: 0x24, length: 44, lengthOrder: 'le', response: false, all: true, orderly: false, linkId: 0, reason: 0x00020000 });
  t.is(summarizeLlc(a.v), 'LLC DELETE LINK v2 req ALL reason 0x00020000 operator-initiated termination [len le]');
  const b = llc<LlcDeleteLink>('e-testlink-teardown', 56, 'delete_link');
  t.deepEqual(b.v, { kind: 'delete_link', llcVersion: 2, type: 0x24, length: 44, lengthOrder: 'le', response: false, all: true, orderly: true, linkId: 0, reason: 0x00020000 });
  t.is(summarizeLlc(b.v), 'LLC DELETE LINK v2 req ALL ORDERLY reason 0x00020000 operator-initiated termination [len le]');
  // B then terminates its LG: program-initiated, re-sent by RC (same PSN) since A's QP is gone
  const retries = ALL.get('e-testlink-teardown')!.filter((m) => m.frame >= 58 && m.frame <= 72);
  t.is(retries.length, 15);
  t.is(new Set(retries.map((m) => m.psn)).size, 1);
  for (const m of retries) {
    const d = decodeLlc(fromHex(m.hex));
    t.is(d.value.kind, 'delete_link');
    const v = d.value as LlcDeleteLink;
    t.true(v.all);
    t.false(v.orderly);
    t.is(v.reason, 0x00030000);
    t.is(deleteLinkReason(v.reason), 'program-initiated termination');
  }
  t.is(ALL.get('e-testlink-teardown')!.find((m) => m.frame === 54)!.src, '10.55.0.1');
  t.is(ALL.get('e-testlink-teardown')!.find((m) => m.frame === 56)!.src, '10.55.0.2');
});

test('the 44-byte prefix of the 88-byte ADD LINK decodes with a partial note', (t) => {
  const b = frame('a-first-contact', 16).subarray(0, 44);
  const d = decodeLlc(b);
  const v = d.value as LlcAddLink;
  t.is(v.kind, 'add_link');
  t.is(v.length, 88);
  t.is(v.lengthOrder, 'le');
  t.is(v.v2, undefined);
  t.is(v.qpn, 0x12);
  t.deepEqual(d.issues.map((i) => [i.severity, i.code]), [['note', 'llc.partial']]);
  t.is(hex(encodeLlc(v)), hex(b));
});

test('field tree (-V) covers the fields', (t) => {
  const tree = new Tree(100);
  decodeLlc(frame('a-first-contact', 16), tree);
  const names = tree.nodes.map((n) => n.name);
  for (const n of ['type', 'length (host order)', 'flags', 'sender MAC', 'sender GID', 'sender QPN', 'link id', 'QP MTU', 'initial PSN', 'v2 direct', 'client target GID', 'number of rkeys (host order)', 'rkey entry 0']) t.true(names.includes(n), n);
  const q = tree.nodes.find((n) => n.name === 'sender QPN')!;
  t.is(q.offset, 128);
  t.is(q.length, 3);
  t.is(q.value, '0x12');
  t.is(tree.nodes.find((n) => n.name === 'length (host order)')!.value, '88 [le]');
});

// ---------------------------------------------------------------- names

test('reason and type names', (t) => {
  t.is(deleteLinkReason(0x00010000), 'lost path');
  t.is(deleteLinkReason(0x00020000), 'operator-initiated termination');
  t.is(deleteLinkReason(0x00040000), 'LLC protocol violation');
  t.is(deleteLinkReason(0x00050000), 'asymmetric link no longer needed');
  t.is(deleteLinkReason(0x00100000), 'unknown link id');
  t.is(deleteLinkReason(0x00200000), 'link group not found');
  t.is(deleteLinkReason(0x12345678), 'unknown reason');
  t.is(Object.keys(DELETE_LINK_REASONS).length, 7);
  t.is(addLinkRejectReason(1), 'no alternate path');
  t.is(llcTypeName(0x21), 'CONFIRM LINK');
  t.is(llcTypeName(0x09), 'DELETE RKEY');
  t.is(llcTypeName(0x80), 'OPT Message Control');
  t.is(llcTypeName(0x8a), 'NWM Data');
  t.is(llcTypeName(0x95), 'optional 0x95');
  t.is(llcTypeName(0x4c), 'unknown 0x4c');
  t.is(llcTypeByte(LlcCode.DELETE_RKEY, 2), 0x29);
  t.is(llcTypeByte(LlcCode.ADD_LINK_CONT, 1), 0x03);
});

// ---------------------------------------------------------------- synthetic round trips

const rk = (i: number) => ({ rkey: 0x100 + i, rkeyNew: 0x200 + i, vaddrNew: 0xff00000000000000n + BigInt(i) * 0x10000n });
const rt = (l: number, k: number) => ({ linkId: l, rkey: k, vaddr: 0xfedcba9876543210n + BigInt(k) });

function v1(m: Record<string, unknown>): LlcMessage { return { llcVersion: 1, length: 44, response: false, ...m } as unknown as LlcMessage; }
function v2le(m: Record<string, unknown>): LlcMessage { return { llcVersion: 2, length: 44, lengthOrder: 'le', response: false, ...m } as unknown as LlcMessage; }

const SAMPLES: Array<[string, LlcMessage]> = [
  ['confirm link v1', v1({ kind: 'confirm_link', type: 0x01, response: true, noRmbeEyecatcher: true, mac: MAC_A, gid: 'fe80::5054:ff:fe55:a', qpn: 0xabcdef, linkId: 3, linkUid: 0x00000303, maxLinks: 3, maxConns: 0 })],
  ['confirm link v2 be', { kind: 'confirm_link', llcVersion: 2, type: 0x21, length: 44, lengthOrder: 'be', response: false, noRmbeEyecatcher: true, mac: MAC_B, gid: GID_B, qpn: 0x11, linkId: 1, linkUid: 0x101, maxLinks: 2, maxConns: 16 }],
  ['add link v1 req', v1({ kind: 'add_link', type: 0x02, rejected: false, rejectReason: 0, mac: MAC_A, gid: GID_A, qpn: 0x22, linkId: 2, mtu: 5, psn: 0x123456 })],
  ['add link v1 reject', v1({ kind: 'add_link', type: 0x02, response: true, rejected: true, rejectReason: 1, mac: MAC_A, gid: GID_A, qpn: 0x22, linkId: 2, mtu: 3, psn: 1 })],
  ['add link v2 reject, §12.16 LE length with reason nibble', { kind: 'add_link', llcVersion: 2, type: 0x22, length: 0x012c, lengthOrder: 'le', response: true, rejected: true, rejectReason: 1, mac: MAC_B, gid: GID_B, qpn: 0x12, linkId: 2, mtu: 3, psn: 7 }],
  ['add link v2 many rkeys LE', { kind: 'add_link', llcVersion: 2, type: 0x22, length: 72 + 16 * 40, lengthOrder: 'le', response: false, rejected: false, rejectReason: 0, mac: MAC_B, gid: GID_B, qpn: 0x12, linkId: 2, mtu: 3, psn: 7, v2: { direct: false, targetGid: GID_A, numRkeys: 40, numRkeysOrder: 'le', rkeys: Array.from({ length: 40 }, (_, i) => rk(i)) } }],
  ['add link v2 many rkeys BE (s390)', { kind: 'add_link', llcVersion: 2, type: 0x22, length: 72 + 16 * 17, lengthOrder: 'be', response: true, rejected: false, rejectReason: 0, mac: MAC_A, gid: GID_A, qpn: 0x13, linkId: 3, mtu: 4, psn: 0xffffff, v2: { direct: true, targetGid: GID_B, numRkeys: 17, numRkeysOrder: 'be', rkeys: Array.from({ length: 17 }, (_, i) => rk(i)) } }],
  ['add link cont v1', v1({ kind: 'add_link_cont', type: 0x03, linkId: 2, numRkeys: 3, rkeys: [rk(1), rk(2)] })],
  ['delete link v1', v1({ kind: 'delete_link', type: 0x04, all: false, orderly: true, linkId: 2, reason: 0x00050000 })],
  ['delete link v2 be rsp', { kind: 'delete_link', llcVersion: 2, type: 0x24, length: 44, lengthOrder: 'be', response: true, all: true, orderly: false, linkId: 0, reason: 0x00100000 }],
  ['request add link v2 2 gids', { kind: 'request_add_link', llcVersion: 2, type: 0x25, length: 60, lengthOrder: 'le', response: false, rejected: false, rejectReason: 0, gidCount: 2, gids: [GID_A, 'fe80::5054:ff:fe55:a'] }],
  ['request add link v2 be 1 gid', { kind: 'request_add_link', llcVersion: 2, type: 0x25, length: 44, lengthOrder: 'be', response: true, rejected: false, rejectReason: 0, gidCount: 1, gids: [GID_B] }],
  ['confirm rkey v1 with 2 others', v1({ kind: 'confirm_rkey', type: 0x06, negative: false, retry: false, numRtokens: 2, rkey: 0x3a1, vaddr: 0xff3eb55c820e0000n, others: [rt(2, 0x501), rt(3, 0x502)] })],
  ['confirm rkey v2 negative retry', v2le({ kind: 'confirm_rkey', type: 0x26, response: true, negative: true, retry: true, numRtokens: 1, rkey: 1, vaddr: 2n, others: [rt(2, 3), rt(0, 0)] })],
  ['confirm rkey cont v1', v1({ kind: 'confirm_rkey_cont', type: 0x08, numRemaining: 4, rtokens: [rt(1, 1), rt(2, 2), rt(3, 3)] })],
  ['test link v1 random', v1({ kind: 'test_link', type: 0x07, userData: Uint8Array.from({ length: 16 }, (_, i) => (i * 37 + 11) & 0xff) })],
  ['test link v2 be', { kind: 'test_link', llcVersion: 2, type: 0x27, length: 44, lengthOrder: 'be', response: true, userData: Uint8Array.from({ length: 16 }, (_, i) => 255 - i) }],
  ['delete rkey v1 negative', v1({ kind: 'delete_rkey', type: 0x09, response: true, negative: true, numRkeys: 3, errorMask: 0x40, variable: false, rkeys: [1, 2, 3] })],
  ['delete rkey v1 full', v1({ kind: 'delete_rkey', type: 0x09, negative: false, numRkeys: 8, errorMask: 0, variable: false, rkeys: [1, 2, 3, 4, 5, 6, 7, 8] })],
  ['delete rkey v2 variable 30 rkeys', { kind: 'delete_rkey', llcVersion: 2, type: 0x29, length: 8 + 4 * 30, lengthOrder: 'le', response: false, negative: false, numRkeys: 30, errorMask: 0, variable: true, rkeys: Array.from({ length: 30 }, (_, i) => 0x1000 + i) }],
  ['delete rkey v2 variable be rsp', { kind: 'delete_rkey', llcVersion: 2, type: 0x29, length: 8 + 4 * 12, lengthOrder: 'be', response: true, negative: true, numRkeys: 12, errorMask: 2, variable: true, rkeys: Array.from({ length: 12 }, (_, i) => 0x2000 + i) }],
  ['unknown optional 0x8a', { kind: 'unknown', llcVersion: 1, type: 0x8a, length: 44, response: false, body: Uint8Array.from({ length: 40 }, (_, i) => i) }],
  ['unknown v2 0x2c', { kind: 'unknown', llcVersion: 2, type: 0x2c, length: 48, lengthOrder: 'le', response: true, flagsOther: 0x11, body: Uint8Array.from({ length: 44 }, (_, i) => i + 1) }],
];

for (const [name, x] of SAMPLES) {
  test(`round trip: ${name}`, (t) => {
    const b = encodeLlc(x);
    const d = decodeLlc(b);
    t.deepEqual(d.value, x);
    t.is(hex(encodeLlc(d.value)), hex(b));
    if (x.llcVersion === 2) t.is(x.length === b.length || x.kind === 'add_link', true);
    t.deepEqual(d.issues.filter((i) => i.severity === 'error'), []);
    t.notThrows(() => summarizeLlc(d.value));
  });
}

test('byte layout: big-endian v2 length and rkey count as s390 sends them', (t) => {
  const x = SAMPLES.find(([n]) => n.startsWith('add link v2 many rkeys BE'))![1] as LlcAddLink;
  const b = encodeLlc(x);
  t.is(b.length, 72 + 16 * 17);
  t.deepEqual([b[0], b[1], b[2], b[3]], [0x22, 0x01, 0x58, 0x80]);
  t.deepEqual([b[70], b[71]], [0, 17]);
  t.is(summarizeLlc(x).endsWith('[len be]'), true);
  const le = SAMPLES.find(([n]) => n.startsWith('add link v2 many rkeys LE'))![1];
  const bl = encodeLlc(le);
  t.deepEqual([bl[1], bl[2], bl[70], bl[71]], [(712) & 0xff, 712 >> 8, 40, 0]);
  t.is(decodeLlc(bl).issues.length, 0);
});

test('ADD LINK v2 reject with the reason nibble in byte 2 (formats.md §12.16) is flagged', (t) => {
  const x = SAMPLES.find(([n]) => n.includes('§12.16'))![1];
  const b = encodeLlc(x);
  t.is(b.length, 44);
  t.deepEqual([b[1], b[2], b[3]], [0x2c, 0x01, 0xc0]);
  const d = decodeLlc(b);
  t.true(d.issues.some((i) => i.code === 'llc.reject-length' && i.severity === 'warn'));
  t.is((d.value as LlcAddLink).rejectReason, 1);
  t.is(summarizeLlc(d.value).startsWith('LLC ADD LINK v2 rsp REJECT (no alternate path) link 2'), true);
});

test('DELETE LINK summary with a link id, v1', (t) => {
  const x = SAMPLES.find(([n]) => n === 'delete link v1')![1];
  t.is(summarizeLlc(x), 'LLC DELETE LINK v1 req ORDERLY link 2 reason 0x00050000 asymmetric link no longer needed');
  const b = encodeLlc(x);
  t.deepEqual([...b.subarray(0, 9)], [0x04, 44, 0, 0x20, 2, 0, 5, 0, 0]);
});

test('REQUEST ADD LINK and DELETE RKEY v2 variable summaries', (t) => {
  t.is(summarizeLlc(SAMPLES.find(([n]) => n === 'request add link v2 2 gids')![1]), `LLC REQUEST ADD LINK v2 req gids 2 ${GID_A},fe80::5054:ff:fe55:a [len le]`);
  const dr = SAMPLES.find(([n]) => n === 'delete rkey v2 variable be rsp')![1] as LlcDeleteRkey;
  t.is(encodeLlc(dr).length, 56);
  t.true(summarizeLlc(dr).startsWith('LLC DELETE RKEY v2 rsp NEGATIVE mask 0x02 n 12 0x2000,'));
  t.true(summarizeLlc(dr).endsWith('(variable) [len be]'));
  const u = SAMPLES.find(([n]) => n === 'unknown optional 0x8a')![1] as LlcUnknown;
  t.is(summarizeLlc(u), 'LLC NWM Data v1 req body 40B');
  t.true(decodeLlc(encodeLlc(u)).issues.some((i) => i.code === 'llc.optional' && i.severity === 'note'));
});

// ---------------------------------------------------------------- anomalies

test('non-zero reserved bytes, odd flags and trailing bytes are kept and flagged', (t) => {
  const b = new Uint8Array(48);
  b.set(frame('a-first-contact', 12));
  b[1] = 48; // length 48 LE to match the buffer
  b[3] = 0x03 | 0x10; // no-RMBE-eyecatcher bits + an undefined flag
  b[40] = 0x77; // reserved
  b[46] = 0x99; // trailing
  const d = decodeLlc(b);
  const codes = d.issues.map((i) => i.code).sort();
  t.deepEqual(codes, ['llc.flags', 'llc.length', 'llc.reserved', 'llc.trailing']);
  const v = d.value as LlcConfirmLink;
  t.is(v.flagsOther, 0x10);
  t.deepEqual(v.reserved, [{ offset: 36, bytes: Uint8Array.of(0, 0, 0, 0, 0x77, 0, 0, 0) }]);
  t.is(v.trailing!.length, 4);
  t.is(hex(encodeLlc(v)), hex(b));
});

test('v1 length other than 44 is flagged; v2 length order ambiguity is flagged', (t) => {
  const b = frame('a-first-contact', 12).slice();
  b[0] = 0x01;
  b[1] = 40;
  t.true(decodeLlc(b).issues.some((i) => i.code === 'llc.length'));
  const c = frame('a-first-contact', 12).slice();
  c[1] = 0x01; c[2] = 0x02; // LE 513, BE 258: both plausible, neither = 44
  const d = decodeLlc(c);
  t.true(d.issues.some((i) => i.code === 'llc.length-order'));
  t.is(d.value.lengthOrder, 'le');
  t.is(d.value.length, 513);
  // big-endian 44 is recognised by the buffer length
  const e = frame('a-first-contact', 12).slice();
  e[1] = 0x00; e[2] = 0x2c;
  const de = decodeLlc(e);
  t.is(de.value.lengthOrder, 'be');
  t.is(de.value.length, 44);
  t.deepEqual(de.issues, []);
});

test('ADD LINK v2 rkey count in the other byte order than the length is detected', (t) => {
  const x = SAMPLES.find(([n]) => n.startsWith('add link v2 many rkeys LE'))![1];
  const b = encodeLlc(x);
  b[70] = 0; b[71] = 40; // BE count in an LE message
  const d = decodeLlc(b);
  const v = d.value as LlcAddLink;
  t.is(v.v2!.numRkeys, 40);
  t.is(v.v2!.numRkeysOrder, 'be');
  t.is(v.v2!.rkeys.length, 40);
  t.true(d.issues.some((i) => i.code === 'llc.rkeys-order'));
  t.is(hex(encodeLlc(v)), hex(b));
});

test('request add link with a v1 code and unknown types decode with issues', (t) => {
  const x = SAMPLES.find(([n]) => n === 'request add link v2 be 1 gid')![1] as LlcRequestAddLink;
  const b = encodeLlc(x);
  b[0] = 0x05; b[1] = 44; b[2] = 0;
  const d = decodeLlc(b);
  t.is(d.value.kind, 'request_add_link');
  t.true(d.issues.some((i) => i.code === 'llc.type' && i.severity === 'note'));
  const u = decodeLlc(Uint8Array.of(0x4c, 44, 0, 0x80, 1, 2, 3));
  t.is(u.value.kind, 'unknown');
  t.true(u.issues.some((i) => i.code === 'llc.type'));
  t.deepEqual((u.value as LlcUnknown).body, Uint8Array.of(1, 2, 3));
});

// ---------------------------------------------------------------- robustness

test('every truncation of every real and synthetic message: no throw, issues present', (t) => {
  const inputs: Uint8Array[] = [];
  for (const msgs of ALL.values()) for (const m of msgs) if (!m.hex.startsWith('fe')) inputs.push(fromHex(m.hex));
  for (const [, x] of SAMPLES) inputs.push(encodeLlc(x));
  let checked = 0;
  for (const b of inputs) {
    for (let n = 0; n < b.length; n++) {
      const p = b.subarray(0, n);
      const d = decodeLlc(p, new Tree());
      t.true(d.issues.length > 0, `prefix ${n} of ${hex(b, 0, 4)}`);
      t.notThrows(() => summarizeLlc(d.value));
      t.notThrows(() => encodeLlc(d.value));
      checked++;
    }
  }
  t.true(checked > 5000);
});

test('random bytes: no throw', (t) => {
  let s = 0x1234567;
  const rnd = (): number => { s = (Math.imul(s, 1103515245) + 12345) >>> 0; return s >>> 8; };
  for (let i = 0; i < 20000; i++) {
    const len = rnd() % 200;
    const b = new Uint8Array(len);
    for (let j = 0; j < len; j++) b[j] = rnd() & 0xff;
    if (len > 0 && i % 3 === 0) b[0] = [0x01, 0x02, 0x22, 0x25, 0x29, 0x09, 0x26, 0x80][i % 8]!;
    const d = decodeLlc(b, i % 10 === 0 ? new Tree() : undefined);
    t.truthy(d.value);
    summarizeLlc(d.value);
    encodeLlc(d.value);
    if (len < 4) t.true(d.issues.length > 0);
  }
  t.pass();
});
