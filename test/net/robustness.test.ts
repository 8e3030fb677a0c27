// Never-throw guarantees (every truncation, random bytes, with and without a tree) and the
// issues each malformation produces.
import test from 'ava';
import { readPcap } from './pcap-walk.js';
import { decodeEthernet, encodeEthernet, ethernetHeader } from '../../dissectors/net/ethernet.js';
import { decodeSll, decodeSll2, encodeSll, sllHeader } from '../../dissectors/net/sll.js';
import { decodeIpv4, encodeIpv4, ipv4Header, ipv4Option } from '../../dissectors/net/ipv4.js';
import { decodeIpv6, encodeIpv6, ipv6Header, ipv6OptionsBody, ipv6FragmentBody } from '../../dissectors/net/ipv6.js';
import { decodeTcp, encodeTcp, tcpHeader } from '../../dissectors/net/tcp.js';
import { decodeUdp, encodeUdp, udpHeader } from '../../dissectors/net/udp.js';
import { Tree, type Decoded, type Issue } from '../../dissectors/wire/common.js';
import { finish, sumWords } from '../../dissectors/net/checksum.js';

type Dec = (b: Uint8Array, t?: Tree) => Decoded<unknown>;

const realSyn = readPcap('a-first-contact.pcap')[2]!.data; // Ethernet/IPv4/TCP SYN with option 254
const v6 = encodeIpv6(ipv6Header({
  src: 'fd00::1', dst: 'fd00::2', protocol: 6, payloadLength: 48,
  extensions: [{ type: 0, body: ipv6OptionsBody([{ type: 5, data: Uint8Array.of(0, 0) }]) }, { type: 44, body: ipv6FragmentBody(0, true, 1) }, { type: 60, body: ipv6OptionsBody([{ type: 0x1e, data: new Uint8Array(9) }]) }],
}), realSyn.subarray(34));
const samples: [string, Dec, Uint8Array, number][] = [
  // name, decoder, a valid sample, minimum length that decodes without issues
  ['ethernet', decodeEthernet, encodeEthernet(ethernetHeader({ dst: '01:00:5e:00:00:01', src: '52:54:00:00:00:01', ethertype: 0x0800, vlans: [1, 2, 3] }), new Uint8Array(8)), 26],
  ['sll', decodeSll, encodeSll(sllHeader({ version: 1, packetType: 0, addr: '52:54:00:00:00:01', protocol: 0x0800 })), 16],
  ['sll2', decodeSll2, encodeSll(sllHeader({ version: 2, packetType: 4, addr: '52:54:00:00:00:01', protocol: 0x86dd, ifindex: 9 })), 20],
  ['ipv4', decodeIpv4, realSyn.subarray(14), 68],
  ['ipv4+options', decodeIpv4, encodeIpv4(ipv4Header({ src: '1.2.3.4', dst: '5.6.7.8', protocol: 17, payloadLength: 0, options: [ipv4Option(148, Uint8Array.of(0, 0)), ipv4Option(7, Uint8Array.of(4, 0, 0, 0, 0))] })), 32],
  ['ipv6+ext', decodeIpv6, v6, v6.length],
  ['tcp', decodeTcp, realSyn.subarray(34), 20],
  ['udp', decodeUdp, encodeUdp(udpHeader({ srcPort: 1, dstPort: 4791, payloadLength: 4 }), new Uint8Array(4)), 12],
];

function checkIssues(t: { true: (v: boolean, m?: string) => void }, issues: Issue[], len: number, what: string): void {
  for (const i of issues) {
    t.true(['error', 'warn', 'note'].includes(i.severity) && typeof i.code === 'string' && i.code.length > 0 && i.message.length > 0, what);
    t.true(Number.isInteger(i.offset) && i.offset >= 0 && i.length >= 0 && i.offset <= Math.max(len, 60), `${what}: issue ${i.code} at ${i.offset}+${i.length}`);
  }
}

test('the valid samples decode without issues', (t) => {
  for (const [name, dec, b] of samples) {
    const issues = dec(b).issues.filter((i) => i.code !== 'ipv6.fragment');
    t.deepEqual(issues, [], name);
  }
});

test('every truncation of every sample: no throw, issues below the minimum length, tree too', (t) => {
  for (const [name, dec, b, min] of samples) {
    for (let n = 0; n < b.length; n++) {
      const p = b.slice(0, n);
      const r1 = dec(p);
      const r2 = dec(p, new Tree(0));
      t.deepEqual(r1.issues, r2.issues, `${name} ${n}`);
      checkIssues(t, r1.issues, n, `${name} ${n}`);
      if (n < min) t.true(r1.issues.length > 0, `${name} cut to ${n} bytes reports something`);
    }
  }
  // the wire-length aware decoders call a capture cut a note, not an error
  for (const [name, dec] of [['ipv4', decodeIpv4], ['ipv6', decodeIpv6], ['tcp', decodeTcp], ['udp', decodeUdp]] as const) {
    const b = samples.find((s) => s[0] === (name === 'ipv6' ? 'ipv6+ext' : name))![2];
    for (let n = 1; n < b.length; n++) {
      const r = dec(b.slice(0, n), undefined, b.length);
      t.false(r.issues.some((i) => i.severity === 'error'), `${name} snaplen ${n}: ${r.issues.map((i) => i.code)}`);
    }
  }
});

test('random bytes (and random mutations of valid samples): no throw, sane issues', (t) => {
  let seed = 12345;
  const rnd = () => { seed = (seed * 1103515245 + 12345) >>> 0; return seed >>> 8; };
  const decs: Dec[] = [decodeEthernet, decodeSll, decodeSll2, decodeIpv4, decodeIpv6, decodeTcp, decodeUdp];
  let withIssues = 0, total = 0;
  for (let k = 0; k < 3000; k++) {
    const len = rnd() % 120;
    const b = new Uint8Array(len);
    for (let i = 0; i < len; i++) b[i] = rnd() & 0xff;
    // bias toward plausible headers so the deeper code runs
    if (len > 0 && k % 3 === 0) b[0] = k % 2 ? 0x45 + (rnd() % 11) : 0x60;
    if (len > 13 && k % 5 === 0) { b[12] = 0x81; b[13] = 0x00; }
    for (const d of decs) {
      const r = k % 2 ? d(b, new Tree(0)) : d(b);
      checkIssues(t, r.issues, len, `random ${k}`);
      total++;
      if (r.issues.length) withIssues++;
    }
  }
  for (const [name, dec, sample] of samples) {
    for (let k = 0; k < 500; k++) {
      const b = sample.slice();
      for (let m = 0; m < 3; m++) b[rnd() % b.length] = rnd() & 0xff;
      t.notThrows(() => dec(b, new Tree(0)), name);
    }
  }
  t.true(withIssues > total / 2, `${withIssues}/${total}`);
});

const codes = (r: Decoded<unknown>) => r.issues.map((i) => `${i.severity}:${i.code}`);

test('Ethernet and SLL issues', (t) => {
  const base = encodeEthernet(ethernetHeader({ dst: '52:54:00:00:00:02', src: '52:54:00:00:00:01', ethertype: 0x0800 }));
  const llc = base.slice(); llc[12] = 0x00; llc[13] = 0x26;
  t.deepEqual(codes(decodeEthernet(llc)), ['note:eth.8023']);
  const mc = base.slice(); mc[6] = 0x01;
  t.deepEqual(codes(decodeEthernet(mc)), ['warn:eth.src-multicast']);
  const tag = encodeEthernet(ethernetHeader({ dst: '52:54:00:00:00:02', src: '52:54:00:00:00:01', ethertype: 0x0800, vlans: [{ tpid: 0x8100, pcp: 0, dei: 0, vid: 4095 }] }));
  t.deepEqual(codes(decodeEthernet(tag)), ['warn:eth.vlan-vid']);
  t.deepEqual(codes(decodeEthernet(tag.subarray(0, 17))), ['error:eth.vlan-truncated']);
  const inner = encodeEthernet(ethernetHeader({ dst: '52:54:00:00:00:02', src: '52:54:00:00:00:01', ethertype: 0x0800, vlans: [{ tpid: 0x8100, pcp: 0, dei: 0, vid: 1 }, { tpid: 0x88a8, pcp: 0, dei: 0, vid: 2 }] }));
  t.deepEqual(codes(decodeEthernet(inner)), ['note:eth.vlan-order']);
  const s2 = encodeSll(sllHeader({ version: 2, packetType: 9, addr: '52:54:00:00:00:01', protocol: 0x0800 }));
  s2[3] = 1;
  t.deepEqual(codes(decodeSll2(s2)), ['warn:sll.pkttype', 'warn:sll.reserved']);
  const s1 = encodeSll(sllHeader({ version: 1, packetType: 0, addr: '52:54:00:00:00:01', protocol: 0x0800 }));
  s1[5] = 20;
  t.deepEqual(codes(decodeSll(s1)), ['note:sll.addrlen']);
  t.deepEqual(codes(decodeSll(s1.subarray(0, 10))), ['error:sll.truncated', 'note:sll.addrlen']);
});

test('IPv4 issues: checksum (bad vs zero/offload), lengths vs wire vs snaplen, version, IHL, flags, options', (t) => {
  const good = realSyn.subarray(14).slice(); // 68 bytes, checksum 0xd4f2
  const bad = good.slice(); bad[11] = bad[11]! ^ 0xff;
  const rb = decodeIpv4(bad);
  t.is(rb.value.checksumStatus, 'bad');
  t.deepEqual(codes(rb), ['error:ipv4.checksum']);
  t.regex(rb.issues[0]!.message, /expected 0xd4f2/);
  const zero = good.slice(); zero[10] = 0; zero[11] = 0;
  const rz = decodeIpv4(zero);
  t.is(rz.value.checksumStatus, 'zero');
  t.deepEqual(codes(rz), ['note:ipv4.checksum-zero']);
  // total length larger than the packet: a wrong field if the wire had no more, a snaplen cut otherwise
  t.deepEqual(codes(decodeIpv4(good.subarray(0, 50))), ['error:ipv4.length']);
  t.deepEqual(codes(decodeIpv4(good.subarray(0, 50), undefined, 68)), ['note:ipv4.snaplen']);
  t.deepEqual(codes(decodeIpv4(good.subarray(0, 50), undefined, 60)), ['error:ipv4.length']);
  // padding after a short packet is normal; a trailer after a long one is noted
  const padded = new Uint8Array(68 + 6); padded.set(good);
  t.deepEqual(codes(decodeIpv4(padded)), ['note:ipv4.trailer']);
  const shortPkt = encodeIpv4(ipv4Header({ src: '1.1.1.1', dst: '2.2.2.2', protocol: 17, payloadLength: 8 }), new Uint8Array(8 + 18));
  t.deepEqual(codes(decodeIpv4(shortPkt)), []);
  const v6 = good.slice(); v6[0] = 0x65;
  t.true(codes(decodeIpv4(v6)).includes('error:ipv4.version'));
  const ihl = good.slice(); ihl[0] = 0x44;
  t.true(codes(decodeIpv4(ihl)).includes('error:ipv4.ihl'));
  const tl = good.slice(); tl[2] = 0; tl[3] = 10;
  t.true(codes(decodeIpv4(tl)).includes('error:ipv4.length'));
  const flags = encodeIpv4({ ...ipv4Header({ src: '1.1.1.1', dst: '2.2.2.2', protocol: 17, payloadLength: 0, df: false }), reservedFlag: true, moreFragments: true, fragmentOffset: 100, ttl: 0 }, undefined, { checksum: true });
  const rf = decodeIpv4(flags);
  t.deepEqual(codes(rf), ['warn:ipv4.reserved-flag', 'note:ipv4.fragment', 'warn:ipv4.ttl']);
  t.deepEqual([rf.value.fragmentOffset, rf.value.moreFragments, rf.value.reservedFlag], [100, true, true]);
  const df = decodeIpv4(encodeIpv4({ ...ipv4Header({ src: '1.1.1.1', dst: '2.2.2.2', protocol: 17, payloadLength: 0 }), moreFragments: true }, undefined, { checksum: true }));
  t.deepEqual(codes(df), ['warn:ipv4.frag-df']);
  // malformed options
  const opt = (bytes: number[]) => {
    const b = new Uint8Array(20 + bytes.length);
    b.set(encodeIpv4(ipv4Header({ src: '1.1.1.1', dst: '2.2.2.2', protocol: 17, payloadLength: 0 })));
    b.set(bytes, 20);
    b[0] = 0x40 | (b.length >>> 2); b[3] = b.length; b[10] = 0; b[11] = 0;
    const ck = finish(sumWords(b, 0, b.length));
    b[10] = ck >>> 8; b[11] = ck & 0xff;
    return decodeIpv4(b);
  };
  t.deepEqual(codes(opt([7, 1, 0, 0])), ['error:ipv4.opt-length']);
  t.deepEqual(codes(opt([1, 1, 148, 9])), ['error:ipv4.opt-truncated', 'warn:ipv4.opt-length']);
  t.deepEqual(codes(opt([0, 1, 0, 0])), ['note:ipv4.opt-pad']);
  t.deepEqual(codes(opt([200, 4, 0, 0])), ['note:ipv4.opt-unknown']);
  t.deepEqual(codes(opt([7, 7, 5, 0, 0, 0, 0, 0])), ['warn:ipv4.opt-pointer']);
});

test('IPv6 issues: lengths, truncated/out-of-order extension headers, jumbo, no-next-header', (t) => {
  const p = ipv6Header({ src: '::1', dst: '::2', protocol: 17, payloadLength: 8 });
  const b = encodeIpv6(p, new Uint8Array(8));
  t.deepEqual(codes(decodeIpv6(b)), []);
  t.deepEqual(codes(decodeIpv6(b.subarray(0, 44))), ['error:ipv6.length']);
  t.deepEqual(codes(decodeIpv6(b.subarray(0, 44), undefined, 48)), ['note:ipv6.snaplen']);
  const ext = encodeIpv6(ipv6Header({ src: '::1', dst: '::2', protocol: 17, payloadLength: 8, extensions: [{ type: 60, body: ipv6OptionsBody([]) }, { type: 0, body: ipv6OptionsBody([]) }] }), new Uint8Array(8));
  t.deepEqual(codes(decodeIpv6(ext)), ['warn:ipv6.hbh-position']);
  const cutExt = ext.slice(0, 52);
  const rc = decodeIpv6(cutExt);
  t.deepEqual(codes(rc), ['warn:ipv6.hbh-position', 'error:ipv6.ext-truncated', 'error:ipv6.length']);
  t.deepEqual([rc.value.upperProtocol, rc.value.upperOffset], [0, 48]);
  const rt0 = encodeIpv6(ipv6Header({ src: '::1', dst: '::2', protocol: 59, payloadLength: 4, extensions: [{ type: 43, body: Uint8Array.of(0, 0, 0, 0, 0, 0) }] }), new Uint8Array(4));
  t.deepEqual(codes(decodeIpv6(rt0)), ['warn:ipv6.rh0', 'note:ipv6.nonext-data']);
  const jumbo = encodeIpv6({ ...ipv6Header({ src: '::1', dst: '::2', protocol: 17, payloadLength: 0, extensions: [{ type: 0, body: ipv6OptionsBody([{ type: 0xc2, data: Uint8Array.of(0, 1, 0, 0) }]) }] }), payloadLength: 0 });
  t.deepEqual(codes(decodeIpv6(jumbo)), ['error:ipv6.length']); // jumbo length 65536 but 48 bytes on the wire
  const ver = b.slice(); ver[0] = 0x45;
  t.true(codes(decodeIpv6(ver)).includes('error:ipv6.version'));
});

test('TCP issues: data offset, reserved bits, flag combinations, option lengths, SYN-only options', (t) => {
  const syn = realSyn.subarray(34).slice();
  const d4 = syn.slice(); d4[12] = 0x40;
  const r4 = decodeTcp(d4);
  t.deepEqual(codes(r4), ['error:tcp.doff']);
  t.is(r4.value.headerLength, 20);
  t.is(r4.value.options.length, 0);
  const big = syn.slice(); big[12] = 0xf0;
  t.deepEqual(codes(decodeTcp(big)), ['error:tcp.truncated']);
  t.deepEqual(codes(decodeTcp(big, undefined, 60)), ['note:tcp.snaplen']);
  const res = syn.slice(); res[12] = res[12]! | 0x0e;
  t.deepEqual(codes(decodeTcp(res)), ['warn:tcp.reserved']);
  const sf = syn.slice(); sf[13] = 0x03;
  t.deepEqual(codes(decodeTcp(sf)), ['warn:tcp.flags']);
  const none = syn.slice(); none[13] = 0;
  t.deepEqual(codes(decodeTcp(none)), ['warn:tcp.flags', 'note:tcp.opt-syn-only', 'note:tcp.opt-syn-only', 'note:tcp.opt-syn-only']);
  const ae = syn.slice(); ae[12] = ae[12]! | 1;
  const rae = decodeTcp(ae);
  t.true(rae.value.flags.ae && rae.value.flags.syn);
  const withOpts = (bytes: number[], flags = 'S') => {
    const h = tcpHeader({ srcPort: 1, dstPort: 2, flags });
    const b = new Uint8Array(20 + bytes.length);
    b.set(encodeTcp(h)); b.set(bytes, 20);
    b[12] = (b.length / 4) << 4;
    return decodeTcp(b);
  };
  t.deepEqual(codes(withOpts([2, 4, 5, 0xb4])), []);
  t.deepEqual(codes(withOpts([2, 4, 5, 0xb4], '.')), ['note:tcp.opt-syn-only']);
  t.deepEqual(codes(withOpts([2, 5, 5, 0xb4, 0, 1, 1, 1])), ['warn:tcp.opt-length']);
  t.deepEqual(codes(withOpts([2, 0, 5, 0xb4])), ['error:tcp.opt-length']);
  t.deepEqual(codes(withOpts([8, 10, 0, 0])), ['error:tcp.opt-truncated']);
  t.deepEqual(codes(withOpts([1, 1, 1, 8])), ['error:tcp.opt-truncated']);
  t.deepEqual(codes(withOpts([3, 3, 15, 0])), ['warn:tcp.wscale']);
  t.deepEqual(codes(withOpts([5, 11, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1], '.')), ['warn:tcp.opt-length']);
  t.deepEqual(codes(withOpts([0, 0, 1, 0])), ['note:tcp.opt-pad']);
  t.deepEqual(codes(withOpts([254, 4, 0xe2, 0xd4])), ['warn:tcpopt.length']); // from wire/tcpopt.ts, offset shifted
  t.is(withOpts([254, 4, 0xe2, 0xd4]).issues[0]!.offset, 21);
  // malformed options still re-encode to the same bytes
  const m = withOpts([2, 5, 5, 0xb4, 0, 1, 1, 1]);
  t.deepEqual(decodeTcp(encodeTcp(m.value)).value, m.value);
  const urg = syn.slice(); urg[19] = 5;
  t.deepEqual(codes(decodeTcp(urg)), ['note:tcp.urg']);
  const ackn = syn.slice(); ackn[11] = 1;
  t.deepEqual(codes(decodeTcp(ackn)), ['note:tcp.ack-nonzero']);
});

test('UDP issues: length vs header, wire and snaplen', (t) => {
  const u = encodeUdp(udpHeader({ srcPort: 1, dstPort: 4791, payloadLength: 10 }), new Uint8Array(10));
  t.deepEqual(codes(decodeUdp(u)), []);
  t.deepEqual(codes(decodeUdp(u.subarray(0, 12))), ['error:udp.length']);
  t.deepEqual(codes(decodeUdp(u.subarray(0, 12), undefined, 18)), ['note:udp.snaplen']);
  const longer = new Uint8Array(24); longer.set(u);
  t.deepEqual(codes(decodeUdp(longer)), ['warn:udp.length']);
  const small = u.slice(); small[5] = 4;
  t.deepEqual(codes(decodeUdp(small)), ['error:udp.length']);
  const z = u.slice(); z[2] = 0; z[3] = 0;
  t.deepEqual(codes(decodeUdp(z)), ['warn:udp.port0']);
  t.deepEqual(codes(decodeUdp(u.subarray(0, 5))), ['error:udp.truncated']);
});
