// Frames built with the encoders (SLL v1/v2, QinQ, IPv6 extension chains, every TCP option),
// decoded back, and cross-checked with tshark (skipped when tshark is not installed).
import test from 'ava';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readPcap, writePcap } from './pcap-walk.js';
import { LINKTYPE } from '../../capture/types.js';
import { decodeEthernet, encodeEthernet, ethernetHeader, summarizeEthernet, ETHERTYPE_IPV4, ETHERTYPE_IPV6, ETHERTYPE_QINQ, ETHERTYPE_VLAN, type EthernetHeader } from '../../dissectors/net/ethernet.js';
import { decodeSll, decodeSll2, encodeSll, sllHeader, summarizeSll, sllPacketTypeName, SLL_OUTGOING, SLL_HOST, type SllHeader } from '../../dissectors/net/sll.js';
import { decodeIpv4, encodeIpv4, ipv4Header, ipv4Option, summarizeIpv4, type Ipv4Header } from '../../dissectors/net/ipv4.js';
import { decodeIpv6, encodeIpv6, ipv6PseudoDestination, ipv6Header, ipv6OptionsBody, ipv6FragmentBody, ipv6RoutingBody, summarizeIpv6, type Ipv6Header } from '../../dissectors/net/ipv6.js';
import { decodeTcp, encodeTcp, tcpHeader, summarizeTcp, summarizeTcpOptions, tcpUdpChecksum, type TcpHeader } from '../../dissectors/net/tcp.js';
import { decodeUdp, encodeUdp, udpHeader, type UdpHeader } from '../../dissectors/net/udp.js';
import { smcTcpOpt, encodeTcpOpt } from '../../dissectors/wire/tcpopt.js';

let haveTshark = true;
try { execFileSync('tshark', ['-v'], { stdio: 'ignore' }); } catch { haveTshark = false; }

/** Runs tshark -T fields on frames; one string[] per frame (multi-occurrence joined by ','). */
function tshark(frames: Uint8Array[], linktype: number, fields: string[], extra: string[] = []): string[][] {
  const dir = mkdtempSync(join(tmpdir(), 'net-codec-'));
  try {
    const f = join(dir, 'x.pcap');
    writeFileSync(f, writePcap(frames, linktype));
    const out = execFileSync('tshark', ['-r', f, '-T', 'fields', '-E', 'separator=\t', '-E', 'occurrence=a', '-E', 'aggregator=,', ...extra, ...fields.flatMap((x) => ['-e', x])], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
    return out.split('\n').filter((l) => l !== '').map((l) => l.split('\t'));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const A = '10.55.0.1', B = '10.55.0.2';
const MAC_A = '52:54:00:55:00:0a', MAC_B = '52:54:00:55:00:0b';

function smcSyn(): TcpHeader {
  return tcpHeader({
    srcPort: 34608, dstPort: 12345, seq: 1893707775, flags: 'S', window: 64240,
    options: [{ kind: 2, mss: 1460 }, { kind: 4 }, { kind: 8, tsVal: 1861848936, tsEcr: 0 }, { kind: 1 }, { kind: 3, wscale: 7 },
      { kind: 1 }, { kind: 1 }, { kind: 254, exp: smcTcpOpt('smc-r') }],
  });
}

function ipv4Tcp(tcp: TcpHeader, payload = new Uint8Array(0)): Uint8Array {
  const seg = encodeTcp(tcp, payload, { src: A, dst: B });
  return encodeIpv4(ipv4Header({ src: A, dst: B, protocol: 6, payloadLength: seg.length, id: 0x5151 }), seg);
}

test('QinQ (802.1ad S-tag + 802.1Q C-tag) frame: decode, round trip, tshark', (t) => {
  const eth = ethernetHeader({ dst: MAC_B, src: MAC_A, ethertype: ETHERTYPE_IPV4, vlans: [{ tpid: ETHERTYPE_QINQ, pcp: 3, dei: 1, vid: 100 }, { tpid: ETHERTYPE_VLAN, pcp: 5, dei: 0, vid: 7 }] });
  const payload = new Uint8Array(44).fill(0xab);
  const udp = encodeUdp(udpHeader({ srcPort: 49441, dstPort: 4791, payloadLength: payload.length }), payload);
  const ip = encodeIpv4(ipv4Header({ src: A, dst: B, protocol: 17, payloadLength: udp.length, ttl: 1, ecn: 2 }), udp);
  const frame = encodeEthernet(eth, ip);
  const d = decodeEthernet(frame);
  t.deepEqual(d.issues, []);
  t.is(d.value.headerLength, 22);
  t.deepEqual(d.value, eth);
  t.deepEqual(d.value.vlans, [{ tpid: 0x88a8, pcp: 3, dei: 1, vid: 100 }, { tpid: 0x8100, pcp: 5, dei: 0, vid: 7 }]);
  t.is(summarizeEthernet(d.value), `${MAC_A} > ${MAC_B}, 802.1ad vlan 100, p 3, DEI, vlan 7, p 5, ethertype IPv4 (0x0800)`);
  const ipd = decodeIpv4(frame.subarray(22));
  t.deepEqual(ipd.issues, []);
  t.is(ipd.value.ecn, 2);
  t.is(ipd.value.checksumStatus, 'ok');
  t.is(summarizeIpv4(ipd.value), '10.55.0.1 > 10.55.0.2: tos 0x2 (ECT(0)), ttl 1, id 0, offset 0, flags [DF], proto UDP (17), length 72');
  // three tags, shorthand constructor (outer tag 802.1ad by default)
  const e3 = ethernetHeader({ dst: MAC_B, src: MAC_A, ethertype: ETHERTYPE_IPV6, vlans: [10, 20, 30] });
  const d3 = decodeEthernet(encodeEthernet(e3, new Uint8Array(40)));
  t.deepEqual(d3.value.vlans.map((v) => [v.tpid, v.vid]), [[0x88a8, 10], [0x8100, 20], [0x8100, 30]]);
  t.is(d3.value.headerLength, 26);
  t.is(d3.value.ethertype, ETHERTYPE_IPV6);
  if (!haveTshark) return t.log('tshark not installed: cross-check skipped');
  const [row] = tshark([frame], 1, ['ieee8021ad.id', 'ieee8021ad.priority', 'ieee8021ad.dei', 'vlan.id', 'vlan.priority', 'vlan.dei', 'vlan.etype', 'ip.src', 'ip.ttl', 'ip.checksum.status', 'udp.dstport', 'udp.length'], ['-o', 'ip.check_checksum:TRUE']);
  t.deepEqual(row, ['100', '3', '1', '7', '5', '0', '0x0800', A, '1', '1', '4791', '52']);
});

test('SLL v1 and SLL2 (`-i any`) frames: decode, round trip, tshark', (t) => {
  const ip = ipv4Tcp(smcSyn());
  const v1 = sllHeader({ version: 1, packetType: SLL_OUTGOING, addr: MAC_A, protocol: 0x0800 });
  const v2 = sllHeader({ version: 2, packetType: SLL_HOST, addr: MAC_B, protocol: 0x0800, ifindex: 3 });
  const f1 = encodeSll(v1, ip), f2 = encodeSll(v2, ip);
  t.is(f1.length, 16 + ip.length);
  t.is(f2.length, 20 + ip.length);
  const d1 = decodeSll(f1), d2 = decodeSll2(f2);
  t.deepEqual(d1.issues, []);
  t.deepEqual(d2.issues, []);
  t.deepEqual(d1.value, v1);
  t.deepEqual(d2.value, v2);
  t.is(d1.value.headerLength, 16);
  t.is(d2.value.ifindex, 3);
  t.is(sllPacketTypeName(d1.value.packetType), 'outgoing');
  t.is(summarizeSll(d1.value), 'Out 52:54:00:55:00:0a ethertype IPv4 (0x0800)');
  t.is(summarizeSll(d2.value), 'ifindex 3 In 52:54:00:55:00:0b ethertype IPv4 (0x0800)');
  // the layers above continue at headerLength
  const tcp = decodeTcp(f2.subarray(20 + 20));
  t.is(tcp.value.options.at(-1)?.exp?.name, 'smc-r');
  // exact bytes of the v1 header (libpcap layout)
  t.deepEqual([...f1.subarray(0, 16)], [0, 4, 0, 1, 0, 6, 0x52, 0x54, 0, 0x55, 0, 0x0a, 0, 0, 8, 0]);
  t.deepEqual([...f2.subarray(0, 20)], [8, 0, 0, 0, 0, 0, 0, 3, 0, 1, 0, 6, 0x52, 0x54, 0, 0x55, 0, 0x0b, 0, 0]);
  // junk after the address is kept for re-encoding, and noted
  const junk = f1.slice(); junk[14 - 1] = 0x99;
  const dj = decodeSll(junk);
  t.is(dj.value.addrPad, '0099');
  t.deepEqual(dj.issues.map((i) => i.code), ['sll.addrpad']);
  t.deepEqual(encodeSll(dj.value), junk.subarray(0, 16));
  if (!haveTshark) return t.log('tshark not installed: cross-check skipped');
  const fields = ['sll.pkttype', 'sll.hatype', 'sll.halen', 'sll.etype', 'ip.src', 'tcp.srcport', 'tcp.option_kind'];
  t.deepEqual(tshark([f1], LINKTYPE.LINUX_SLL, fields)[0], ['4', '1', '6', '0x0800', A, '34608', '2,4,8,1,3,1,1,254']);
  t.deepEqual(tshark([f2], LINKTYPE.LINUX_SLL2, [...fields, 'sll.ifindex'])[0], ['0', '1', '6', '0x0800', A, '34608', '2,4,8,1,3,1,1,254', '3']);
});

test('IPv6 with HBH, Destination Options, Routing (SRH) and an atomic Fragment before TCP: decode, round trip, tshark', (t) => {
  const tcp = smcSyn();
  // SRH: the packet goes to the next segment (fd00:55::9); the final destination is Segment List[0]
  // and is what the TCP pseudo-header uses (RFC 8200 §8.1)
  const src = 'fd00:55::1', dst = 'fd00:55::9', final = 'fd00:55::2';
  const seg = encodeTcp(tcp, undefined, { src, dst: final });
  const v = ipv6Header({
    src, dst, protocol: 6, payloadLength: seg.length, hopLimit: 64, trafficClass: 0xb8, flowLabel: 0x12345,
    extensions: [
      { type: 0, body: ipv6OptionsBody([{ type: 5, data: Uint8Array.of(0, 0) }]) },                 // Router Alert (MLD)
      { type: 60, body: ipv6OptionsBody([{ type: 0x1e, data: Uint8Array.of(1, 2, 3) }]) },         // experimental option
      { type: 43, body: ipv6RoutingBody(4, 1, [final, dst], 0x01000000) },                        // SRH, last entry 1
      { type: 44, body: ipv6FragmentBody(0, false, 0xdeadbeef) },                                     // atomic fragment
    ],
  });
  const pkt = encodeIpv6(v, seg);
  const d = decodeIpv6(pkt);
  t.deepEqual(d.issues.map((i) => i.code), []);
  t.deepEqual(d.value, v);
  t.is(d.value.upperProtocol, 6);
  t.is(d.value.upperOffset, 40 + 8 + 8 + 40 + 8);
  t.is(d.value.fragment, null); // atomic fragment = whole packet
  t.deepEqual(d.value.extensions.map((e) => [e.type, e.nextHeader, e.length]), [[0, 60, 8], [60, 43, 8], [43, 44, 40], [44, 6, 8]]);
  t.deepEqual(d.value.extensions[0]!.options!.map((o) => o.name), ['Router Alert', 'PadN']);
  t.deepEqual(d.value.extensions[2]!.addresses, ['fd00:55::2', 'fd00:55::9']);
  t.is(ipv6PseudoDestination(d.value), final);
  t.is(d.value.extensions[3]!.id, 0xdeadbeef);
  t.is(summarizeIpv6(d.value), 'fd00:55::1 > fd00:55::9: class 0xb8, flowlabel 0x12345, hlim 64, [HBH Router Alert, DSTOPT Experimental, RT type 4 segleft 1, frag (0xdeadbeef:0)], next-header TCP (6), payload length 112');
  const td = decodeTcp(pkt.subarray(d.value.upperOffset));
  t.is(td.value.srcPort, 34608);
  t.is(tcpUdpChecksum(src, ipv6PseudoDestination(d.value), 6, pkt.subarray(d.value.upperOffset)).status, 'ok');
  t.is(tcpUdpChecksum(src, dst, 6, pkt.subarray(d.value.upperOffset)).status, 'bad');
  // a non-first fragment: walk stops, upper-layer header not here
  const frag = ipv6Header({ src, dst, protocol: 17, payloadLength: 24, extensions: [{ type: 44, body: ipv6FragmentBody(185, true, 7) }] });
  const fd = decodeIpv6(encodeIpv6(frag, new Uint8Array(24)));
  t.deepEqual(fd.value.fragment, { offset: 185, more: true, id: 7 });
  t.is(fd.value.upperProtocol, 17);
  t.deepEqual(fd.issues.map((i) => i.code), ['ipv6.fragment']);
  // ESP stops the walk
  const esp = decodeIpv6(encodeIpv6(ipv6Header({ src, dst, protocol: 50, payloadLength: 16, extensions: [{ type: 60, body: ipv6OptionsBody([]) }] }), new Uint8Array(16)));
  t.is(esp.value.upperProtocol, 50);
  t.is(esp.value.upperOffset, 48);
  // AH (length in 4-byte units)
  const ahBody = new Uint8Array(22); ahBody[5] = 0x42; ahBody[9] = 9; // SPI 0x42, seq 9, 12-byte ICV
  const ah = decodeIpv6(encodeIpv6(ipv6Header({ src, dst, protocol: 59, payloadLength: 0, extensions: [{ type: 51, body: ahBody }] })));
  t.deepEqual([ah.value.extensions[0]!.length, ah.value.extensions[0]!.spi, ah.value.extensions[0]!.seq], [24, 0x42, 9]);
  t.is(ah.value.upperProtocol, 59);
  t.deepEqual(ah.issues, []);
  if (!haveTshark) return t.log('tshark not installed: cross-check skipped');
  const eth = encodeEthernet(ethernetHeader({ dst: MAC_B, src: MAC_A, ethertype: ETHERTYPE_IPV6 }), pkt);
  const [row] = tshark([eth], 1, ['ipv6.tclass', 'ipv6.flow', 'ipv6.plen', 'ipv6.nxt', 'ipv6.hopopts.nxt', 'ipv6.opt.router_alert', 'ipv6.dstopts.nxt', 'ipv6.routing.type', 'ipv6.routing.segleft', 'ipv6.routing.srh.addr', 'ipv6.fraghdr.ident', 'tcp.srcport', 'tcp.option_kind', 'tcp.checksum.status'], ['-o', 'tcp.check_checksum:TRUE']);
  t.deepEqual(row, ['0x000000b8', '0x012345', '112', '0', '60', '0', '43', '4', '1', 'fd00:55::2,fd00:55::9', '0xdeadbeef', '34608', '2,4,8,1,3,1,1,254', '1']);
});

test('TCP: every option kind decoded; summaries; round trips; tshark agrees', (t) => {
  const mk = (options: Parameters<typeof tcpHeader>[0]['options'], flags = 'S') => tcpHeader({ srcPort: 1000, dstPort: 2000, seq: 5, ack: 0, flags, window: 100, options });
  const ao = Uint8Array.of(29, 16, 7, 9, ...new Uint8Array(12).fill(0xcc));
  const md5 = Uint8Array.of(19, 18, ...new Uint8Array(16).fill(0x5a));
  const mptcp = Uint8Array.of(30, 12, 0x01, 0x81, 1, 2, 3, 4, 5, 6, 7, 8); // MP_CAPABLE v1, key
  const tfo = Uint8Array.of(34, 10, 1, 2, 3, 4, 5, 6, 7, 8);
  const unknown = Uint8Array.of(99, 4, 0xaa, 0xbb);
  const exp16 = Uint8Array.of(253, 6, 0x12, 0x34, 0x56, 0x78);
  const segs = [
    mk([{ kind: 2, mss: 1460 }, { kind: 1 }, { kind: 3, wscale: 14 }, { kind: 4 }, { kind: 8, tsVal: 0xfffffff0, tsEcr: 7 }, { kind: 254, exp: smcTcpOpt() }]),
    mk([{ kind: 1 }, { kind: 1 }, { kind: 5, sack: [{ left: 100, right: 200 }, { left: 300, right: 400 }, { left: 0xfffffff0, right: 16 }] }], 'P.'),
    mk([{ kind: 19, bytes: md5 }, { kind: 29, bytes: ao }], '.'),
    mk([{ kind: 30, bytes: mptcp }, { kind: 34, bytes: tfo }, { kind: 99, bytes: unknown }, { kind: 253, bytes: exp16 }]),
  ];
  const texts = segs.map((s) => summarizeTcpOptions(s.options));
  t.deepEqual(texts, [
    'mss 1460,nop,wscale 14,sackOK,TS val 4294967280 ecr 7,smc-r,eol',
    'nop,nop,sack 3 {100:200}{300:400}{4294967280:16}',
    `md5 ${'5a'.repeat(16)},tcp-ao keyid 7 rnextkeyid 9,eol`,
    'mptcp capable,tfo cookie 0102030405060708,unknown-99 0xaabb,exp-12345678',
  ]);
  t.is(segs[0]!.options.at(-1)!.length, 2); // 26 option bytes → EOL + 1 padding byte
  t.is(segs[0]!.dataOffset, 12);
  t.deepEqual(segs[1]!.options[2]!.sack, [{ left: 100, right: 200 }, { left: 300, right: 400 }, { left: 0xfffffff0, right: 16 }]);
  t.deepEqual([segs[2]!.options[1]!.keyId, segs[2]!.options[1]!.rnextKeyId], [7, 9]);
  t.is(segs[3]!.options[0]!.subtype, 0);
  t.is(segs[3]!.options[3]!.exp?.exid, 0x12345678);
  t.is(summarizeTcp(segs[1]!, 10), 'Flags [P.], seq 5:15, ack 0, win 100, options [nop,nop,sack 3 {100:200}{300:400}{4294967280:16}], length 10');
  for (const s of segs) {
    const bytes = encodeTcp(s);
    const d = decodeTcp(bytes);
    t.deepEqual(d.value, s);
    t.deepEqual(encodeTcp(d.value), bytes);
    t.deepEqual(d.issues.filter((i) => i.severity !== 'note').map((i) => i.code), []);
  }
  t.deepEqual(decodeTcp(encodeTcp(segs[3]!)).issues.map((i) => i.code), ['tcp.opt-unknown']);
  // option 254 bytes are tcpopt's encoding
  t.deepEqual(segs[0]!.options[5]!.bytes, encodeTcpOpt(smcTcpOpt()));
  if (!haveTshark) return t.log('tshark not installed: cross-check skipped');
  const frames = segs.map((s) => encodeEthernet(ethernetHeader({ dst: MAC_B, src: MAC_A, ethertype: ETHERTYPE_IPV4 }), ipv4Tcp(s)));
  const rows = tshark(frames, 1, ['tcp.option_kind', 'tcp.options.mss_val', 'tcp.options.wscale.shift', 'tcp.options.timestamp.tsval', 'tcp.options.sack_le', 'tcp.options.sack_re', 'tcp.options.ao.keyid', 'tcp.options.mptcp.subtype', 'tcp.options.tfo.cookie', 'tcp.options.experimental.exid', 'tcp.checksum.status'], ['-o', 'tcp.relative_sequence_numbers:FALSE', '-o', 'tcp.check_checksum:TRUE']);
  t.deepEqual(rows[0], ['2,1,3,4,8,254,0,0', '1460', '14', '4294967280', '', '', '', '', '', '0xe2d4', '1']); // tshark lists each padding byte as EOL
  t.deepEqual(rows[1], ['1,1,5', '', '', '', '100,300,4294967280', '200,400,16', '', '', '', '', '1']);
  t.deepEqual(rows[2]!.slice(0, 7), ['19,29,0,0', '', '', '', '', '', '7']);
  for (const r of rows) t.is(r[10], '1'); // checksum good
  t.deepEqual(rows[3]!.slice(0, 1), ['30,34,99,253']);
  t.is(rows[3]![7], '0');
  t.is(rows[3]![8], '0102030405060708');
});

test('IPv4 options: RR, TS, Router Alert, NOP/EOL decoded by name; checksum computed; round trip; tshark', (t) => {
  const rr = ipv4Option(7, Uint8Array.of(8, 10, 0, 0, 1, 0, 0, 0, 0)); // pointer 8, one hop recorded
  const ra = ipv4Option(148, Uint8Array.of(0, 0));
  const ts = ipv4Option(68, Uint8Array.of(9, 0x11, 10, 0, 0, 1, 0, 0, 0, 42)); // flag 1: addr+ts, overflow 1
  const v = ipv4Header({ src: A, dst: B, protocol: 17, payloadLength: 8, options: [rr, ipv4Option(1), ra, ts] });
  t.is(v.ihl, 5 + 7);
  t.deepEqual([rr.name, rr.pointer, rr.route], ['RR', 8, ['10.0.0.1', '0.0.0.0']]);
  t.deepEqual([ra.name, ra.routerAlert], ['RA', 0]);
  t.deepEqual([ts.name, ts.overflow, ts.flag, ts.timestamps], ['TS', 1, 1, [{ addr: '10.0.0.1', ts: 42 }]]);
  const pkt = encodeIpv4(v, encodeUdp(udpHeader({ srcPort: 1, dstPort: 2, payloadLength: 0 })));
  const d = decodeIpv4(pkt);
  t.deepEqual(d.issues, []);
  t.is(d.value.checksumStatus, 'ok');
  t.deepEqual(d.value.options.map((o) => o.name), ['RR', 'NOP', 'RA', 'TS']);
  t.deepEqual(d.value, v);
  t.deepEqual(encodeIpv4(d.value), pkt.subarray(0, 48));
  t.is(summarizeIpv4(d.value), '10.55.0.1 > 10.55.0.2: tos 0x0, ttl 64, id 0, offset 0, flags [DF], proto UDP (17), length 56, options (RR 10.0.0.1 0.0.0.0,NOP,RA value 0,TS{10.0.0.1@42})');
  if (!haveTshark) return t.log('tshark not installed: cross-check skipped');
  const eth = encodeEthernet(ethernetHeader({ dst: MAC_B, src: MAC_A, ethertype: ETHERTYPE_IPV4 }), pkt);
  const [row] = tshark([eth], 1, ['ip.hdr_len', 'ip.opt.type', 'ip.opt.ra', 'ip.rec_rt', 'ip.checksum.status'], ['-o', 'ip.check_checksum:TRUE']);
  t.deepEqual(row, ['48', '7,1,148,68', '0', '10.0.0.1', '1']); // tshark lists only the recorded hop
});

test('decode(encode(x)) deep-equals x for hand-built values of every codec', (t) => {
  const eths: EthernetHeader[] = [
    ethernetHeader({ dst: 'ff:ff:ff:ff:ff:ff', src: MAC_A, ethertype: 0x0806 }),
    ethernetHeader({ dst: MAC_B, src: MAC_A, ethertype: 0x8915, vlans: [{ tpid: 0x8100, pcp: 7, dei: 1, vid: 4094 }] }),
    ethernetHeader({ dst: '01:80:c2:00:00:0e', src: MAC_A, ethertype: 0x88cc }),
  ];
  for (const e of eths) t.deepEqual(decodeEthernet(encodeEthernet(e, new Uint8Array(46))).value, e);
  const slls: SllHeader[] = [
    sllHeader({ version: 1, packetType: 2, addr: MAC_A, protocol: 0x86dd }),
    sllHeader({ version: 2, packetType: 4, addr: '', protocol: 0x0800, ifindex: 1, arphrd: 772 }),
    { ...sllHeader({ version: 2, packetType: 1, addr: 'aa:bb:cc:dd', protocol: 0x0806, ifindex: 0xffffffff, arphrd: 778 }), addrPad: '00000001' },
  ];
  for (const s of slls) t.deepEqual((s.version === 1 ? decodeSll : decodeSll2)(encodeSll(s)).value, s);
  const ip4s: Ipv4Header[] = [
    ipv4Header({ src: '0.0.0.0', dst: '255.255.255.255', protocol: 17, payloadLength: 300, ttl: 128, dscp: 46, ecn: 3, df: false, id: 65535 }),
    { ...ipv4Header({ src: A, dst: B, protocol: 6, payloadLength: 20 }), checksum: 0, checksumStatus: 'zero' },
    { ...ipv4Header({ src: A, dst: B, protocol: 1, payloadLength: 20 }), checksum: 0x1234, checksumStatus: 'bad' },
  ];
  for (const v of ip4s) t.deepEqual(decodeIpv4(encodeIpv4(v, new Uint8Array(v.totalLength - 20))).value, v);
  const ip6s: Ipv6Header[] = [
    ipv6Header({ src: '::1', dst: 'fe80::1:2', protocol: 58, payloadLength: 8 }),
    ipv6Header({ src: '::ffff:10.55.0.1', dst: '::ffff:10.55.0.2', protocol: 17, payloadLength: 8, extensions: [{ type: 60, body: ipv6OptionsBody([{ type: 4, data: Uint8Array.of(4) }]) }] }),
  ];
  for (const v of ip6s) t.deepEqual(decodeIpv6(encodeIpv6(v, new Uint8Array(8))).value, v);
  const udps: UdpHeader[] = [udpHeader({ srcPort: 65535, dstPort: 4791, payloadLength: 0 }), { srcPort: 1, dstPort: 53, length: 20, checksum: 0xffff }];
  for (const u of udps) t.deepEqual(decodeUdp(encodeUdp(u, new Uint8Array(u.length - 8))).value, u);
  // computed UDP checksum over IPv6 verifies
  const u6 = encodeUdp(udpHeader({ srcPort: 5, dstPort: 6, payloadLength: 3 }), Uint8Array.of(1, 2, 3), { src: 'fd00::1', dst: 'fd00::2' });
  t.is(tcpUdpChecksum('fd00::1', 'fd00::2', 17, u6).status, 'ok');
  t.not(decodeUdp(u6).value.checksum, 0);
  // a v6 UDP datagram with checksum 0 is 'zero' (not allowed), over v4 it is 'none'
  const u0 = encodeUdp(udpHeader({ srcPort: 5, dstPort: 6, payloadLength: 0 }));
  t.is(tcpUdpChecksum('fd00::1', 'fd00::2', 17, u0).status, 'zero');
  t.is(tcpUdpChecksum(A, B, 17, u0).status, 'none');
  // a TCP header hand-built from a decoded capture header (bytes of a-first-contact #3)
  const syn = readPcap('a-first-contact.pcap')[2]!.data.subarray(34);
  const ds = decodeTcp(syn);
  t.deepEqual(ds.value, { ...smcSyn(), checksum: 0x14a7 });
  t.deepEqual(encodeTcp(ds.value), syn);
});
