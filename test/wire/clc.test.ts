// CLC codec tests: real SMC-Rv1 messages (hwipl/smc, with an independent decoder's field
// dump), every CLC message of the Linux 6.12 SMC-Rv2 captures in pcaps/ (values checked
// against the guest logs and tshark -V), synthesized round trips of every variant, and
// robustness (all truncations, random and mutated buffers).
import test from 'ava';
import { readFileSync } from 'node:fs';
import {
  CLC_EYECATCHER_SMCR, clcMessageLength, decodeClc, encodeClc, summarizeClc,
  type ClcAcceptConfirm, type ClcDecline, type ClcInput, type ClcMessage, type ClcProposal,
} from '../../dissectors/wire/clc.js';
import { declineReason, DECLINE_REASONS, formatReason } from '../../dissectors/wire/reasons.js';
import { fromHex, hex, put16, put32, Tree } from '../../dissectors/wire/common.js';
import { ROOT } from '../helpers.js';

const root = ROOT + '/';
const V1DIR = root + 'pcaps/external/smcr-v1-clc/';
const V1_NAMES = ['proposal-ipv4', 'proposal-ipv6', 'accept-ipv4', 'accept-ipv6', 'confirm-ipv4', 'confirm-ipv6', 'decline-ipv4', 'decline-ipv6'];

interface KernelMsg { capture: string; frame: number; src: string; dst: string; hex: string }
const kernel: KernelMsg[] = JSON.parse(readFileSync(root + 'test/fixtures/clc/kernel-clc.json', 'utf8'));
const v1 = V1_NAMES.map((name) => ({ name, bytes: fromHex(readFileSync(V1DIR + name + '.hex', 'utf8')) }));
const allReal: Uint8Array[] = [...v1.map((x) => x.bytes), ...kernel.map((k) => fromHex(k.hex))];

function msg(capture: string, frame: number): ClcMessage {
  const k = kernel.find((x) => x.capture === capture && x.frame === frame);
  if (!k) throw new Error(`no fixture ${capture} ${frame}`);
  const d = decodeClc(fromHex(k.hex));
  if (d.issues.length) throw new Error(`issues in ${capture} ${frame}: ${JSON.stringify(d.issues)}`);
  return d.value;
}
function ac(m: ClcMessage): ClcAcceptConfirm {
  if (m.type !== 'accept' && m.type !== 'confirm') throw new Error('not accept/confirm');
  return m;
}

// ---- SMC-Rv1 (external) ----

/** Parse the hwipl decoder's text: "Key: value, Key: value, ...". */
function parseFields(txt: string): Map<string, string> {
  const flat = txt.replace(/\s*\n\s*/g, ' ');
  const body = flat.slice(flat.indexOf('Eyecatcher:'));
  const out = new Map<string, string>();
  for (const part of body.split(/, (?=[A-Z][A-Za-z0-9 -]*: )/)) {
    const i = part.indexOf(': ');
    out.set(part.slice(0, i), part.slice(i + 2).trim());
  }
  return out;
}

const DIAG_TEXT: Record<string, number> = { 'no SMC device found (R or D)': 0x03030000 };
const TYPE_TEXT = ['', 'Proposal', 'Accept', 'Confirm', 'Decline'];

/** Our value rendered the way the hwipl decoder prints it. */
function render(m: ClcMessage): Map<string, string> {
  const r = new Map<string, string>();
  r.set('Eyecatcher', m.eyecatcher === 'SMCR' ? 'SMC-R' : m.eyecatcher === 'SMCD' ? 'SMC-D' : m.eyecatcher);
  r.set('Type', `${m.typeCode} (${TYPE_TEXT[m.typeCode]})`);
  r.set('Length', String(m.length));
  r.set('Version', String(m.version));
  r.set('Trailer', m.trailer === 'SMCR' ? 'SMC-R' : m.trailer);
  if (m.type === 'proposal') {
    r.set('Flag', String(m.typev2 >> 1));
    r.set('Path', m.typev1 === 0 ? 'SMC-R' : String(m.typev1));
    r.set('Peer ID', m.peerId);
    r.set('SMC-R GID', m.gid);
    r.set('RoCE MAC', m.mac);
    r.set('IP Area Offset', String(m.ipAreaOffset));
    if (m.prefix) {
      r.set('IPv4 Prefix', `${m.prefix.ipv4}/${m.prefix.ipv4Len}`);
      r.set('IPv6 Prefix Count', String(m.prefix.ipv6.length));
      const p = m.prefix.ipv6[0];
      if (p) r.set('IPv6 Prefix', `${p.prefix}/${p.len}`);
    }
  } else if (m.type === 'accept' || m.type === 'confirm') {
    r.set(m.type === 'accept' ? 'First Contact' : 'Flag', m.firstContact ? '1' : '0');
    r.set('Path', m.typev1 === 0 ? 'SMC-R' : String(m.typev1));
    const x = m.r!;
    r.set('Peer ID', x.peerId);
    r.set('SMC-R GID', x.gid);
    r.set('RoCE MAC', x.mac);
    r.set('QP Number', String(x.qpn));
    r.set('RMB RKey', String(x.rkey));
    r.set('RMBE Index', String(x.rmbeIdx));
    r.set('RMBE Alert Token', String(x.token));
    r.set('RMBE Size', `${x.rmbeSizeCode} (${2 ** (x.rmbeSizeCode + 14)})`);
    r.set('QP MTU', `${x.mtuCode} (${128 << x.mtuCode})`);
    r.set('RMB Virtual Address', '0x' + x.rmbVa.toString(16));
    r.set('Packet Sequence Number', String(x.psn));
  } else if (m.type === 'decline') {
    r.set('Out of Sync', m.outOfSync ? '1' : '0');
    r.set('Path', m.typev1 === 0 ? 'SMC-R' : String(m.typev1));
    r.set('Peer ID', m.peerId);
  }
  return r;
}

for (const { name, bytes } of v1) {
  test(`SMC-Rv1 ${name}: every field of the independent decode, no issues, exact re-encode`, (t) => {
    const d = decodeClc(bytes);
    t.deepEqual(d.issues, []);
    const fields = parseFields(readFileSync(V1DIR + name + '.fields.txt', 'utf8'));
    const ours = render(d.value);
    let checked = 0;
    for (const [k, v] of fields) {
      if (k === 'SMC-D GID') continue; // printed by the tool for proposals, not in the message (see README)
      if (k === 'Peer Diagnosis') {
        t.is((d.value as ClcDecline).diagnosis, DIAG_TEXT[v] ?? -1, k);
      } else {
        t.is(ours.get(k), v, `${name}: ${k}`);
      }
      checked++;
    }
    t.true(checked >= 9);
    t.is(hex(encodeClc(d.value)), hex(bytes));
    t.is(clcMessageLength(bytes), bytes.length);
  });
}

test('SMC-Rv1 concrete values (README table)', (t) => {
  const p4 = decodeClc(v1[0]!.bytes).value as ClcProposal;
  t.is(p4.ipAreaOffset, 0);
  t.is(p4.smcd, undefined);
  t.deepEqual(p4.prefix, { ipv4: '127.0.0.0', ipv4Len: 8, ipv6: [] });
  t.is(p4.peerId, '45472@98:03:9b:ab:cd:ef');
  const p6 = decodeClc(v1[1]!.bytes).value as ClcProposal;
  t.is(p6.length, 69);
  t.deepEqual(p6.prefix, { ipv4: '0.0.0.0', ipv4Len: 0, ipv6: [{ prefix: '::1', len: 128 }] });
  const a = ac(decodeClc(v1[2]!.bytes).value);
  t.true(a.firstContact);
  t.like(a.r, { qpn: 228, rkey: 5501, rmbeIdx: 1, token: 5, rmbeSizeCode: 2, mtuCode: 3, rmbVa: 0xf0a60000n, psn: 7534078 });
  t.is(a.r!.eid, undefined);
  const c = ac(decodeClc(v1[5]!.bytes).value);
  t.false(c.firstContact);
  t.like(c.r, { qpn: 227, rkey: 6497, token: 2, rmbVa: 0xf0b10000n, psn: 1597250, gid: 'fe80::9a03:9bff:feab:cdef' });
  const dcl = decodeClc(v1[6]!.bytes).value as ClcDecline;
  t.like(dcl, { type: 'decline', version: 1, outOfSync: false, peerId: '9509@25:25:25:25:25:00', diagnosis: 0x03030000, osType: 0 });
  t.is(dcl.diagExtra, undefined);
  t.is(summarizeClc(dcl), 'CLC Decline v1 0x03030000 NOSMCDEV (no SMC device found, R or D; was IPSEC in Linux 4.11: IPsec in use)');
  t.is(summarizeClc(p4), 'CLC Proposal v1 SMC-Rv1 gid fe80::9a03:9bff:feab:cdef pfx 127.0.0.0/8');
  t.is(summarizeClc(p6), 'CLC Proposal v1 SMC-Rv1 gid fe80::9a03:9bff:feab:cdef pfx ::1/128');
});

// ---- Linux 6.12 kernel captures ----

test('kernel captures: every CLC message decodes without issues and re-encodes exactly', (t) => {
  t.is(kernel.length, 23);
  for (const k of kernel) {
    const b = fromHex(k.hex);
    const d = decodeClc(b);
    t.deepEqual(d.issues, [], `${k.capture} ${k.frame}`);
    t.is(hex(encodeClc(d.value)), k.hex, `${k.capture} ${k.frame}`);
    t.is(clcMessageLength(b), b.length);
    t.deepEqual(decodeClc(encodeClc(d.value)).value, d.value);
  }
});

test('kernel Proposal (all captures identical): SMC-Rv2 only, UEID SMC-LAB-UEID, v2.1, IP area offset 0', (t) => {
  const proposals = kernel.filter((k) => k.hex.slice(8, 10) === '01');
  t.is(proposals.length, 8);
  t.true(proposals.every((p) => p.hex === proposals[0]!.hex));
  const p = msg('a-first-contact', 6) as ClcProposal;
  t.like(p, { type: 'proposal', length: 156, version: 2, typev2: 0, typev1: 2, ipAreaOffset: 0, peerId: '0@00:00:00:00:00:00', gid: '::', mac: '00:00:00:00:00:00' });
  t.deepEqual(p.smcd, { ismGid: 0n, ismChid: 0, v2ExtOffset: 28, vendorOui: 0, vendorExp: 0n });
  t.is(p.prefix, undefined);
  // guest A: ueid 'SMC-LAB-UEID', release = 1, gid[1] ::ffff:10.55.0.1, smcr_max_conns_per_lgr 255, smcr_max_links_per_lgr 2
  t.deepEqual(p.v2, {
    eids: ['SMC-LAB-UEID'], release: 1, seidFlag: false, smcdv2ExtOffset: 0, roceV2Gid: '::ffff:10.55.0.1',
    maxConns: 255, maxLinks: 2, featureMask: 1,
  });
  t.is(p.smcdv2, undefined);
  t.is(summarizeClc(p), 'CLC Proposal v2 SMC-Rv2 rel 2.1 ueid SMC-LAB-UEID gid ::ffff:10.55.0.1');
  // Linux's offsets are what encode computes when they are left out
  const loose: ClcInput = structuredClone(p);
  delete loose.length;
  const lp = loose as ClcProposal;
  delete lp.ipAreaOffset;
  delete lp.smcd!.v2ExtOffset;
  delete lp.v2!.smcdv2ExtOffset;
  t.is(hex(encodeClc(loose)), proposals[0]!.hex);
});

test('kernel a-first-contact Accept/Confirm: first contact, QPs, rkeys, tokens, FCE', (t) => {
  const a = ac(msg('a-first-contact', 8));
  t.like(a, { type: 'accept', length: 160, version: 2, firstContact: true, typev1: 0, eyecatcher: 'SMCR', trailer: 'SMCR' });
  // tshark -V: peer ID 0x1daa52540055000b, GID ::ffff:10.55.0.2, QP 0x11, rkey 0x3d3, VA 0xff2b28d5447b0000, PSN 0x42cf5a
  // guest logs: token=0x1, rmbe=65536, active_mtu 1024, peer_host guestb, v2_os 2, v2_rel 1, direct 1, max_conns 255, max_links 2
  t.deepEqual(a.r, {
    peerId: '7594@52:54:00:55:00:0b', gid: '::ffff:10.55.0.2', mac: '52:54:00:55:00:0b', qpn: 0x11, rkey: 0x3d3,
    rmbeIdx: 1, token: 1, rmbeSizeCode: 2, mtuCode: 3, rmbVa: 0xff2b28d5447b0000n, psn: 0x42cf5a, eid: 'SMC-LAB-UEID',
    fce: { v2Direct: true, osType: 2, release: 1, hostname: 'guestb', maxConns: 255, maxLinks: 2, featureMask: 1, vendorExp: 0 },
  });
  t.is(summarizeClc(a), 'CLC Accept v2 SMC-R first-contact QP 0x11 rkey 0x3d3 token 0x1 buf 64KiB mtu 1024 psn 4378458 va 0xff2b28d5447b0000 host guestb Linux rel 2.1');
  const c = ac(msg('a-first-contact', 10));
  t.like(c, { type: 'confirm', length: 180, version: 2, firstContact: true });
  t.like(c.r, { peerId: '61804@52:54:00:55:00:0a', gid: '::ffff:10.55.0.1', mac: '52:54:00:55:00:0a', qpn: 0x11, rkey: 0x39b, token: 1, rmbeSizeCode: 2, mtuCode: 3, rmbVa: 0xff2b0494c3110000n, psn: 0xed4a54 });
  t.like(c.r!.fce, { hostname: 'guesta', osType: 2, release: 1, maxConns: 255, maxLinks: 2, featureMask: 1, v2Direct: true });
  t.deepEqual(c.r!.gidList, ['::ffff:10.55.0.1']);
  t.regex(summarizeClc(c), /^CLC Confirm v2 SMC-R first-contact QP 0x11 rkey 0x39b token 0x1 .* gids ::ffff:10\.55\.0\.1$/);
});

test('kernel b-second-contact: 4 connections, tokens 1..4, no FCE after the first, second RMB for conn 4', (t) => {
  const acc = [8, 54, 96, 113].map((f) => ac(msg('b-second-contact', f)));
  const con = [10, 60, 102, 119].map((f) => ac(msg('b-second-contact', f)));
  // guest A smc_diag: tokens 0x1, 0x2 (port 48888), 0x3 (48894), 0x4 (48902)
  t.deepEqual(acc.map((m) => m.r!.token), [1, 2, 3, 4]);
  t.deepEqual(con.map((m) => m.r!.token), [1, 2, 3, 4]);
  t.deepEqual(acc.map((m) => m.firstContact), [true, false, false, false]);
  t.deepEqual(con.map((m) => m.firstContact), [true, false, false, false]);
  t.deepEqual(acc.map((m) => m.length), [160, 108, 108, 108]);
  t.deepEqual(con.map((m) => m.length), [180, 108, 108, 108]);
  t.true(acc.slice(1).every((m) => m.r!.fce === undefined && m.r!.eid === 'SMC-LAB-UEID'));
  t.true(con.slice(1).every((m) => m.r!.gidList === undefined));
  // conns 1-3 reuse the server's first RMB; conn 4 runs in parallel with 3 and needs a second one
  t.deepEqual(acc.map((m) => m.r!.rkey), [0x3a1, 0x3a1, 0x3a1, 0x646]);
  t.deepEqual(acc.map((m) => m.r!.rmbVa), [0xff3eb55c820e0000n, 0xff3eb55c820e0000n, 0xff3eb55c820e0000n, 0xff3eb55c82100000n]);
  t.deepEqual(con.map((m) => m.r!.rkey), [0x3a7, 0x3a7, 0x3a7, 0x4a6]);
  // the link (QPs, PSNs, peer IDs) is the same for all four
  t.true([...acc, ...con].every((m) => m.r!.qpn === 0x11));
  t.true(acc.every((m) => m.r!.psn === 0xfce517 && m.r!.peerId === '43171@52:54:00:55:00:0b'));
  t.true(con.every((m) => m.r!.psn === 0x76d19b && m.r!.peerId === '14599@52:54:00:55:00:0a'));
  t.is(summarizeClc(acc[1]!), 'CLC Accept v2 SMC-R QP 0x11 rkey 0x3a1 token 0x2 buf 64KiB mtu 1024 psn 16573719 va 0xff3eb55c820e0000');
});

test('kernel c2 Decline v2: NOSMCDEV from the server, Linux OS type', (t) => {
  const d = msg('c2-fallback-server-decline', 8) as ClcDecline;
  // guest A smc_diag: fallback reason=0x05000000 PEERDECL peer_diagnosis=0x03030000 NOSMCDEV
  t.deepEqual(d, {
    type: 'decline', eyecatcher: 'SMCR', typeCode: 4, length: 44, version: 2, outOfSync: false, typev1: 0,
    peerId: '64789@52:54:00:55:00:0b', diagnosis: 0x03030000, osType: 2, diagExtra: [0, 0, 0, 0], trailer: 'SMCR',
  });
  t.is(summarizeClc(d), 'CLC Decline v2 0x03030000 NOSMCDEV (no SMC device found, R or D; was IPSEC in Linux 4.11: IPsec in use)');
  const fallback = kernel.filter((k) => k.capture === 'c2-fallback-server-decline');
  t.is(fallback.length, 2); // Proposal + Decline; the fallback data after it is not CLC
  t.is(clcMessageLength(new TextEncoder().encode('fallback test: server declines')), undefined);
});

test('kernel d-bulk and e-testlink: first-contact handshakes', (t) => {
  const da = ac(msg('d-bulk-2MiB', 8));
  const dc = ac(msg('d-bulk-2MiB', 10));
  t.like(da.r, { qpn: 0x11, rkey: 0x36e, token: 1, rmbVa: 0xff17a095c1eb0000n, psn: 0xf7665e });
  t.like(dc.r, { qpn: 0x11, rkey: 0x3e9, token: 1, rmbVa: 0xff25511bc4260000n, psn: 0x962559 });
  const ea = ac(msg('e-testlink-teardown', 8));
  const ec = ac(msg('e-testlink-teardown', 10));
  t.like(ea.r, { rkey: 0x3b3, psn: 0x1b5b0a, rmbVa: 0xff44aa897e2d0000n });
  t.like(ec.r, { rkey: 0x3c9, psn: 0xfc0232, rmbVa: 0xff24e4b383b60000n });
  for (const m of [da, dc, ea, ec]) {
    t.true(m.firstContact);
    t.is(m.r!.fce!.release, 1);
    t.is(bufBytes(m.r!.rmbeSizeCode), 65536); // smc_diag rmbe=65536 peer_rmbe=65536
  }
});
function bufBytes(code: number): number { return 2 ** (code + 14); }

test('field tree (-V) of a Confirm', (t) => {
  const tr = new Tree(66);
  decodeClc(fromHex(kernel.find((k) => k.capture === 'a-first-contact' && k.frame === 10)!.hex), tr);
  const qp = tr.nodes.find((n) => n.name === 'QP number');
  t.deepEqual(qp, { name: 'QP number', offset: 66 + 38, length: 3, value: '0x11' });
  const fce = tr.nodes.find((n) => n.name === 'First-contact extension')!;
  t.is(fce.offset, 66 + 104);
  t.deepEqual(fce.children!.find((n) => n.name === 'Hostname'), { name: 'Hostname', offset: 66 + 108, length: 32, value: 'guesta' });
  t.truthy(tr.nodes.find((n) => n.name === 'GID list'));
  t.deepEqual(tr.nodes.at(-1), { name: 'Trailer', offset: 66 + 176, length: 4, value: 'SMCR' });
});

// ---- synthesized round trips ----

const UEIDS = ['SMC-LAB-UEID', 'IBM-ZSYS-0001', 'A.B-C'];
const synth: Record<string, ClcMessage> = {
  'Proposal v1, IP area offset 0, IPv6 prefixes': {
    type: 'proposal', eyecatcher: 'SMCR', typeCode: 1, length: 86, version: 1, typev2: 0, typev1: 0,
    peerId: '4660@02:00:00:00:00:01', gid: 'fe80::1', mac: '02:00:00:00:00:01', ipAreaOffset: 0,
    prefix: { ipv4: '0.0.0.0', ipv4Len: 0, ipv6: [{ prefix: '2001:db8:1::', len: 64 }, { prefix: 'fd00::', len: 8 }] },
    trailer: 'SMCR',
  },
  'Proposal v1 R+D with SMC-D area (offset 40)': {
    type: 'proposal', eyecatcher: 'SMCR', typeCode: 1, length: 109, version: 1, typev2: 0, typev1: 3,
    peerId: '1@02:00:00:00:00:02', gid: 'fe80::2', mac: '02:00:00:00:00:02', ipAreaOffset: 40,
    smcd: { ismGid: 0x1122334455667788n, ismChid: 0x0102, v2ExtOffset: 0, vendorOui: 0, vendorExp: 0n },
    prefix: { ipv4: '10.1.0.0', ipv4Len: 16, ipv6: [{ prefix: '2001:db8::', len: 48 }] },
    trailer: 'SMCR',
  },
  'Proposal v2.0 R+D both versions, 3 UEIDs, SEID, SMC-Dv2 with emulated ISM pair': {
    type: 'proposal', eyecatcher: 'SMCR', typeCode: 1, length: 323, version: 2, typev2: 3, typev1: 3,
    peerId: '65535@02:00:00:00:00:03', gid: 'fe80::3', mac: '02:00:00:00:00:03', ipAreaOffset: 40,
    smcd: { ismGid: 0xaabbn, ismChid: 0x0007, v2ExtOffset: 53, vendorOui: 0x123456, vendorExp: 0x0102030405n },
    prefix: { ipv4: '192.168.7.0', ipv4Len: 24, ipv6: [{ prefix: '2001:db8:7::', len: 64 }] },
    v2: {
      eids: UEIDS, release: 0, seidFlag: true, smcdv2ExtOffset: 128, roceV2Gid: '::ffff:192.168.7.3',
      maxConns: 0, maxLinks: 0, featureMask: 0,
    },
    smcdv2: {
      seid: 'IBM-SYSZ-ISMSEID00000000ABCD',
      gids: [
        { chid: 0x0108, gid: 0x0000000100000002n },
        { chid: 0xffff, gid: 0x1111222233334444n, gidExt: 0x5555666677778888n },
      ],
    },
    trailer: 'SMCR',
  },
  'Proposal v2.1 SMC-Rv2 only (like Linux 6.12)': {
    type: 'proposal', eyecatcher: 'SMCR', typeCode: 1, length: 188, version: 2, typev2: 0, typev1: 2,
    peerId: '0@00:00:00:00:00:00', gid: '::', mac: '00:00:00:00:00:00', ipAreaOffset: 0,
    smcd: { ismGid: 0n, ismChid: 0, v2ExtOffset: 28, vendorOui: 0, vendorExp: 0n },
    v2: { eids: UEIDS.slice(0, 2), release: 1, seidFlag: false, smcdv2ExtOffset: 0, roceV2Gid: '::ffff:10.0.0.1', maxConns: 255, maxLinks: 2, featureMask: 1 },
    trailer: 'SMCR',
  },
  'Proposal v2.1 SMC-Dv2 only, loopback-ism': {
    type: 'proposal', eyecatcher: 'SMCR', typeCode: 1, length: 224, version: 2, typev2: 1, typev1: 2,
    peerId: '0@00:00:00:00:00:00', gid: '::', mac: '00:00:00:00:00:00', ipAreaOffset: 0,
    smcd: { ismGid: 0n, ismChid: 0, v2ExtOffset: 28, vendorOui: 0, vendorExp: 0n },
    v2: { eids: ['SMC-LAB-UEID'], release: 1, seidFlag: false, smcdv2ExtOffset: 64, roceV2Gid: '::', maxConns: 0, maxLinks: 0, featureMask: 1 },
    smcdv2: { seid: '', gids: [{ chid: 0xffff, gid: 0xdeadbeefn, gidExt: 0xcafen }] },
    trailer: 'SMCR',
  },
  'Accept SMC-R v1 first contact': {
    type: 'accept', eyecatcher: 'SMCR', typeCode: 2, length: 68, version: 1, firstContact: true, typev1: 0,
    r: { peerId: '7@02:00:00:00:00:09', gid: 'fe80::9', mac: '02:00:00:00:00:09', qpn: 0xabcdef, rkey: 0xfedcba98, rmbeIdx: 1, token: 0x10000, rmbeSizeCode: 5, mtuCode: 5, rmbVa: 0xffff888012340000n, psn: 0xffffff },
    trailer: 'SMCR',
  },
  'Confirm SMC-R v1': {
    type: 'confirm', eyecatcher: 'SMCR', typeCode: 3, length: 68, version: 1, firstContact: false, typev1: 0,
    r: { peerId: '8@02:00:00:00:00:0a', gid: 'fe80::a', mac: '02:00:00:00:00:0a', qpn: 1, rkey: 2, rmbeIdx: 1, token: 3, rmbeSizeCode: 0, mtuCode: 1, rmbVa: 0n, psn: 0 },
    trailer: 'SMCR',
  },
  'Accept SMC-R v2 first contact (indirect, v2.0 FCE)': {
    type: 'accept', eyecatcher: 'SMCR', typeCode: 2, length: 160, version: 2, firstContact: true, typev1: 0,
    r: {
      peerId: '9@02:00:00:00:00:0b', gid: '::ffff:10.9.0.2', mac: '02:00:00:00:00:0b', qpn: 0x22, rkey: 0x1234, rmbeIdx: 1, token: 9, rmbeSizeCode: 3, mtuCode: 4, rmbVa: 0x1000n, psn: 0x123456,
      eid: 'SMC-LAB-UEID', fce: { v2Direct: false, osType: 1, release: 0, hostname: 'ZOSHOST1', maxConns: 0, maxLinks: 0, featureMask: 0, vendorExp: 0 },
    },
    trailer: 'SMCR',
  },
  'Confirm SMC-R v2 first contact with 2 GIDs': {
    type: 'confirm', eyecatcher: 'SMCR', typeCode: 3, length: 196, version: 2, firstContact: true, typev1: 0,
    r: {
      peerId: '10@02:00:00:00:00:0c', gid: '::ffff:10.9.0.1', mac: '02:00:00:00:00:0c', qpn: 0x23, rkey: 0x4321, rmbeIdx: 1, token: 10, rmbeSizeCode: 1, mtuCode: 3, rmbVa: 0x2000n, psn: 0x654321,
      eid: 'SMC-LAB-UEID', fce: { v2Direct: true, osType: 2, release: 1, hostname: 'a-very-long-host-name-of-32-char', maxConns: 16, maxLinks: 1, featureMask: 1, vendorExp: 0 },
      gidList: ['::ffff:10.9.1.1', '::ffff:10.9.2.1'],
    },
    trailer: 'SMCR',
  },
  'Confirm SMC-R v2 first contact with empty GID list': {
    type: 'confirm', eyecatcher: 'SMCR', typeCode: 3, length: 164, version: 2, firstContact: true, typev1: 0,
    r: {
      peerId: '10@02:00:00:00:00:0c', gid: '::ffff:10.9.0.1', mac: '02:00:00:00:00:0c', qpn: 0x23, rkey: 0x4321, rmbeIdx: 1, token: 10, rmbeSizeCode: 1, mtuCode: 3, rmbVa: 0x2000n, psn: 0x654321,
      eid: 'SMC-LAB-UEID', fce: { v2Direct: true, osType: 2, release: 1, hostname: 'h', maxConns: 255, maxLinks: 2, featureMask: 1, vendorExp: 0 },
      gidList: [],
    },
    trailer: 'SMCR',
  },
  'Accept SMC-R v2 not first contact': {
    type: 'accept', eyecatcher: 'SMCR', typeCode: 2, length: 108, version: 2, firstContact: false, typev1: 0,
    r: { peerId: '9@02:00:00:00:00:0b', gid: '::ffff:10.9.0.2', mac: '02:00:00:00:00:0b', qpn: 0x22, rkey: 0x99, rmbeIdx: 1, token: 11, rmbeSizeCode: 2, mtuCode: 3, rmbVa: 0x3000n, psn: 0x123456, eid: 'SMC-LAB-UEID' },
    trailer: 'SMCR',
  },
  'Accept SMC-D v1 first contact': {
    type: 'accept', eyecatcher: 'SMCD', typeCode: 2, length: 48, version: 1, firstContact: true, typev1: 1,
    d: { gid: 0x0102030405060708n, dmbToken: 0x8877665544332211n, dmbeIdx: 0, dmbeSizeCode: 6, linkId: 0x01020304 },
    trailer: 'SMCD',
  },
  'Confirm SMC-D v1': {
    type: 'confirm', eyecatcher: 'SMCD', typeCode: 3, length: 48, version: 1, firstContact: false, typev1: 1,
    d: { gid: 1n, dmbToken: 2n, dmbeIdx: 0, dmbeSizeCode: 0, linkId: 5 },
    trailer: 'SMCD',
  },
  'Accept SMC-D v2 first contact, release 1 (FCE 52)': {
    type: 'accept', eyecatcher: 'SMCD', typeCode: 2, length: 130, version: 2, firstContact: true, typev1: 1,
    d: {
      gid: 0xdeadbeefn, dmbToken: 0x1234n, dmbeIdx: 0, dmbeSizeCode: 2, linkId: 7, chid: 0xffff, eid: 'SMC-LAB-UEID', gidExt: 0xcafen,
      fce: { v2Direct: false, osType: 2, release: 1, hostname: 'guestb', maxConns: 0, maxLinks: 0, featureMask: 1, vendorExp: 0 },
    },
    trailer: 'SMCD',
  },
  'Confirm SMC-D v2 first contact, release 0 (FCE 36)': {
    type: 'confirm', eyecatcher: 'SMCD', typeCode: 3, length: 114, version: 2, firstContact: true, typev1: 1,
    d: {
      gid: 0xbeefn, dmbToken: 0x4321n, dmbeIdx: 0, dmbeSizeCode: 1, linkId: 7, chid: 0x0123, eid: 'IBM-SYSZ-ISMSEID0000000012345678', gidExt: 0n,
      fce: { v2Direct: false, osType: 3, release: 0, hostname: 'aixhost' },
    },
    trailer: 'SMCD',
  },
  'Accept SMC-D v2 not first contact': {
    type: 'accept', eyecatcher: 'SMCD', typeCode: 2, length: 78, version: 2, firstContact: false, typev1: 1,
    d: { gid: 0x77n, dmbToken: 0x88n, dmbeIdx: 0, dmbeSizeCode: 4, linkId: 9, chid: 0x0200, eid: 'SMC-LAB-UEID', gidExt: 0n },
    trailer: 'SMCD',
  },
  'Decline v1': {
    type: 'decline', eyecatcher: 'SMCR', typeCode: 4, length: 28, version: 1, outOfSync: false, typev1: 0,
    peerId: '9509@25:25:25:25:25:00', diagnosis: 0x03070000, osType: 0, trailer: 'SMCR',
  },
  'Decline v2 out of sync': {
    type: 'decline', eyecatcher: 'SMCR', typeCode: 4, length: 44, version: 2, outOfSync: true, typev1: 0,
    peerId: '1@02:00:00:00:00:01', diagnosis: 0x04000000, osType: 2, diagExtra: [1, 2, 3, 0xffffffff], trailer: 'SMCR',
  },
};

for (const [name, x] of Object.entries(synth)) {
  test(`round trip: ${name}`, (t) => {
    const bytes = encodeClc(x);
    t.is(bytes.length, x.length);
    const d = decodeClc(bytes);
    t.deepEqual(d.issues, []);
    t.deepEqual(d.value, x);
    // Length and offsets may be left out: encode computes the same values
    const { length: _omit, ...loose } = x;
    t.is(hex(encodeClc(loose as ClcInput)), hex(bytes));
    t.is(clcMessageLength(bytes), x.length);
    t.true(summarizeClc(d.value).startsWith('CLC '));
  });
}

test('synthesized byte layout spot checks', (t) => {
  const p = encodeClc(synth['Proposal v2.0 R+D both versions, 3 UEIDs, SEID, SMC-Dv2 with emulated ISM pair']!);
  t.is(p[7], 0x2f); // formats.md: v2 Proposal offering v2 R+D and v1 R+D
  t.is(p[105], 3); // EID count at V = 52 + 53
  t.is(p[106], 3); // ISM GID count: 1 native + 2 entries for the emulated device
  t.is(p[108], 0x01); // release 0, SEID
  const D = 105 + 8 + 128;
  t.is(hex(p, D + 48, 30), '00000001000000020108' + '1111222233334444ffff' + '5555666677778888ffff');
  const a = encodeClc(synth['Accept SMC-D v2 first contact, release 1 (FCE 52)']!);
  t.is(a[7], 0x29); // formats.md: v2 SMC-D Accept first contact
  t.is(hex(a, 0, 4), 'e2d4c3c4');
  const a1 = encodeClc(synth['Accept SMC-R v1 first contact']!);
  t.is(a1[7], 0x18);
  t.is(hex(a1, 38, 3), 'abcdef');
  t.is(a1[50], 0x55);
  const pSum = summarizeClc(synth['Proposal v2.0 R+D both versions, 3 UEIDs, SEID, SMC-Dv2 with emulated ISM pair']!);
  t.is(pSum, 'CLC Proposal v2 SMC-Rv2+SMC-Dv2 SMC-Rv1+SMC-Dv1 rel 2.0 ueid SMC-LAB-UEID,IBM-ZSYS-0001,A.B-C seid gid ::ffff:192.168.7.3 v1gid fe80::3 ism 0x000000000000aabb ismv2 2 pfx 192.168.7.0/24,2001:db8:7::/64');
  t.is(summarizeClc(synth['Decline v2 out of sync']!), 'CLC Decline v2 out-of-sync 0x04000000 SYNCERR (synchronization error, sent with out-of-sync bit)');
  t.is(summarizeClc(synth['Accept SMC-D v2 first contact, release 1 (FCE 52)']!),
    'CLC Accept v2 SMC-D first-contact gid 0x00000000deadbeef token 0x1234 buf 64KiB link 0x7 chid 0xffff host guestb Linux rel 2.1');
});

test('unknown CLC type: header only, with an issue, still re-encodable', (t) => {
  const x: ClcMessage = { type: 'unknown', eyecatcher: 'SMCR', typeCode: 9, length: 20, version: 2, flags: 5, body: fromHex('0102030405060708'), trailer: 'SMCR' };
  const b = encodeClc(x);
  t.is(hex(b), 'e2d4c3d909001425' + '0102030405060708' + 'e2d4c3d9');
  const d = decodeClc(b);
  t.deepEqual(d.value, x);
  t.true(d.issues.some((i) => i.code === 'clc.type'));
  t.is(clcMessageLength(b), undefined);
  t.is(summarizeClc(d.value), 'CLC type 9 len 20');
});

// ---- malformed input ----

test('length mismatches are reported and what is there is decoded', (t) => {
  const acc = fromHex(kernel.find((k) => k.capture === 'a-first-contact' && k.frame === 8)!.hex);
  const longer = new Uint8Array(acc.length + 10);
  longer.set(acc);
  const dl = decodeClc(longer);
  t.deepEqual(dl.value, decodeClc(acc).value);
  t.deepEqual(dl.issues.map((i) => [i.severity, i.code, i.offset, i.length]), [['note', 'clc.length', 160, 10]]);
  const shorter = acc.subarray(0, 120);
  const ds = decodeClc(shorter);
  t.true(ds.issues.some((i) => i.code === 'clc.truncated' && i.severity === 'error'));
  t.is(ds.value.trailer, '');
  t.is(ac(ds.value).r!.qpn, 0x11);
  t.is(ac(ds.value).r!.eid, 'SMC-LAB-UEID');
  // a Length field smaller than the layout: the trailer is taken at Length-4 and the overrun flagged
  const bad = new Uint8Array(acc.subarray(0, 64));
  put16(bad, 5, 64);
  put32(bad, 60, CLC_EYECATCHER_SMCR);
  const db = decodeClc(bad);
  t.true(db.issues.some((i) => i.code === 'clc.overrun'));
  t.is(db.value.trailer, 'SMCR');
});

test('bad eyecatcher, trailer, reserved bits, counts, emulated ISM without partner', (t) => {
  const dec = fromHex(kernel.find((k) => k.capture === 'c2-fallback-server-decline' && k.frame === 8)!.hex);
  const b = new Uint8Array(dec);
  b[0] = 0; b[43] = 0; b[7] = b[7]! | 0x06; b[22] = 1;
  const codes = decodeClc(b).issues.map((i) => i.code);
  t.true(codes.includes('clc.eyecatcher'));
  t.true(codes.includes('clc.trailer'));
  t.is(codes.filter((c) => c === 'clc.reserved').length, 3); // byte-7 bit 2, typev1 N, bytes 21-23
  const p = synth['Proposal v2.1 SMC-Dv2 only, loopback-ism'] as ClcProposal;
  const lone = encodeClc({ ...p, length: undefined, smcdv2: { seid: '', gids: [{ chid: 0xff01, gid: 5n }] } } as unknown as ClcInput);
  const dl = decodeClc(lone);
  t.true(dl.issues.some((i) => i.code === 'clc.ism'));
  t.deepEqual((dl.value as ClcProposal).smcdv2!.gids, [{ chid: 0xff01, gid: 5n }]);
  const many = new Uint8Array(encodeClc(synth['Proposal v1, IP area offset 0, IPv6 prefixes']!));
  many[47] = 9; // IPv6 prefix count 9 (> 8, and more than the message holds)
  const dm = decodeClc(many);
  t.true(dm.issues.some((i) => i.code === 'clc.count'));
  t.true(dm.issues.some((i) => i.code === 'clc.overrun'));
});

test('clcMessageLength peeks only at CLC headers', (t) => {
  t.is(clcMessageLength(new Uint8Array(0)), undefined);
  t.is(clcMessageLength(fromHex('e2d4c3d901009c')), undefined); // 7 bytes
  t.is(clcMessageLength(fromHex('e2d4c3d901009c22')), 156);
  t.is(clcMessageLength(fromHex('e2d4c3c402003020')), 48);
  t.is(clcMessageLength(fromHex('e2d4c3d905009c22')), undefined); // type 5
  t.is(clcMessageLength(fromHex('e2d4c3d900009c22')), undefined); // type 0
  t.is(clcMessageLength(fromHex('e2d4c3d904000b10')), undefined); // Length 11
  t.is(clcMessageLength(fromHex('e2d4c3da04001c10')), undefined); // eyecatcher
  t.is(clcMessageLength(fromHex('474554202f20485454502f312e310d0a')), undefined); // "GET / HTTP/1.1"
});

// ---- robustness ----

test('every truncation of every real message: no throw, issues present', (t) => {
  let n = 0;
  for (const b of allReal) {
    for (let len = 0; len < b.length; len++) {
      const cut = b.subarray(0, len);
      const d = decodeClc(cut);
      const tr = new Tree();
      decodeClc(cut, tr);
      if (d.issues.length === 0) t.fail(`no issue for ${hex(b, 0, 8)} cut at ${len}`);
      encodeClc(d.value); // values of truncated messages stay encodable
      summarizeClc(d.value);
      n++;
    }
  }
  t.true(n > 2500);
});

/** Deterministic PRNG (xorshift32). */
function rng(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => { s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0; return s; };
}

function fuzzOne(t: import('ava').ExecutionContext, b: Uint8Array, stats: { clean: number; total: number }): void {
  let d;
  try {
    d = decodeClc(b);
    decodeClc(b, new Tree());
    summarizeClc(d.value);
  } catch (e) {
    t.fail(`threw on ${hex(b)}: ${String(e)}`);
    return;
  }
  stats.total++;
  // Clean decode ⇒ the value describes the message completely: exact re-encode.
  if (d.issues.length === 0) {
    stats.clean++;
    const len = Math.min(b.length, d.value.length);
    if (hex(encodeClc(d.value)) !== hex(b, 0, len)) t.fail(`issue-free decode does not re-encode: ${hex(b)}`);
  } else {
    encodeClc(d.value);
  }
}

test('5000 random buffers with a valid header prefix: no throw, malformed ones have issues', (t) => {
  const r = rng(0x5eed);
  const stats = { clean: 0, total: 0 };
  for (let i = 0; i < 5000; i++) {
    const len = 8 + (r() % 300);
    const b = new Uint8Array(len);
    for (let j = 0; j < len; j++) b[j] = r() & 0xff;
    put32(b, 0, r() & 1 ? 0xe2d4c3d9 : 0xe2d4c3c4);
    b[4] = 1 + (r() % 5);
    put16(b, 5, r() % 4 ? len : r() % 400);
    b[7] = (((r() % 3) + 1) << 4) | (r() & 0x0f);
    if (r() & 1) put32(b, len - 4, 0xe2d4c3d9);
    fuzzOne(t, b, stats);
  }
  t.is(stats.total, 5000);
  t.log(`issue-free: ${stats.clean}`);
  t.true(stats.clean < 50, `${stats.clean} random buffers decoded without issues`);
});

test('5000 mutated real messages: no throw; issue-free decodes re-encode exactly', (t) => {
  const r = rng(0xc1c);
  const stats = { clean: 0, total: 0 };
  for (let i = 0; i < 5000; i++) {
    const src = allReal[r() % allReal.length]!;
    const b = new Uint8Array(src);
    const flips = 1 + (r() % 4);
    for (let j = 0; j < flips; j++) b[8 + (r() % (b.length - 8))] = r() & 0xff;
    fuzzOne(t, b, stats);
  }
  t.is(stats.total, 5000);
  t.log(`issue-free: ${stats.clean}`);
  t.true(stats.clean > 100); // many single-field mutations are still valid messages
});

// ---- reason codes ----

test('reason codes: names, meanings, historical values, unknown classes', (t) => {
  t.is(formatReason(0x03030008), '0x03030008 NOUEID (no common UEID)');
  t.like(declineReason(0x03030000), { name: 'NOSMCDEV', historical: 'was IPSEC in Linux 4.11: IPsec in use' });
  t.is(declineReason(0x05000000).name, 'PEERDECL');
  t.is(declineReason(0x0303000b).name, 'MAXLINKERR');
  t.is(declineReason(0x030f0000).name, 'NOINDIRECT');
  t.is(declineReason(0x09990003).name, 'ERR_REGBUF');
  for (const c of [0x02000000, 0x02040000, 0x06000000, 0x07000000, 0x99990000]) {
    const r = declineReason(c);
    t.not(r.name, 'UNKNOWN');
    t.truthy(r.historical);
    t.true(formatReason(c).endsWith('; Linux 4.11 only)'));
  }
  t.is(declineReason(0x02040000).name, 'TCL');
  t.deepEqual(declineReason(0x0303000c), { code: 0x0303000c, name: 'UNKNOWN', meaning: 'unknown reason, class 0x03 configuration/negotiation, sub-code of NOSMCDEV' });
  t.is(declineReason(0x42000000).meaning, 'unknown reason, class 0x42 unknown');
  t.is(formatReason(0xffffffff), '0xffffffff UNKNOWN (unknown reason, class 0xff unknown)');
  t.is(new Set(DECLINE_REASONS.map((r) => r.code)).size, DECLINE_REASONS.length);
  t.true(DECLINE_REASONS.length >= 41);
});
