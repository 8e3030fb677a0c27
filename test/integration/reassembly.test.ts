// Frames the bundled captures do not contain, built from their real bytes with our own encoders:
// CLC split across segments / several per segment / retransmitted / out of order / on an odd
// port; RoCE v1 (EtherType 0x8915); Linux cooked v2 and QinQ framing; multi-packet SENDs.
import test from 'ava';
import { FrameDecoder, type DecodedFrame } from '../../dissectors/frame.js';
import { LINKTYPE, type CapturedFrame } from '../../capture/types.js';
import { encodeEthernet, ethernetHeader } from '../../dissectors/net/ethernet.js';
import { encodeIpv4, ipv4Header } from '../../dissectors/net/ipv4.js';
import { encodeTcp, tcpHeader, tcpFlags } from '../../dissectors/net/tcp.js';
import { encodeUdp, udpHeader } from '../../dissectors/net/udp.js';
import { encodeGrh, encodeIbPacket, writeIcrc, type IbPacket } from '../../dissectors/wire/ib.js';
import { encodeSll, sllHeader } from '../../dissectors/net/sll.js';
import { decodeCapture } from '../helpers.js';

const A = '10.55.0.1', B = '10.55.0.2';

function frame(data: Uint8Array, linktype: number = LINKTYPE.ETHERNET): CapturedFrame {
  return { data, caplen: data.length, origlen: data.length, tsNs: 0n, linktype, ifIndex: 0 };
}

function tcpFrame(sport: number, dport: number, seq: number, flags: string, payload: Uint8Array = new Uint8Array(0)): CapturedFrame {
  const tcp = encodeTcp(tcpHeader({ srcPort: sport, dstPort: dport, seq, ack: 1, flags: tcpFlags(flags), window: 502 }), payload, { src: A, dst: B });
  const ip = encodeIpv4(ipv4Header({ src: A, dst: B, protocol: 6, payloadLength: tcp.length }), tcp);
  return frame(encodeEthernet(ethernetHeader({ src: '52:54:00:55:00:0a', dst: '52:54:00:55:00:0b', ethertype: 0x0800 }), ip));
}

/** TCP payloads of a-first-contact, by frame number. */
const payloads = new Map<number, Uint8Array>();

test.before(async () => {
  const frames = await decodeCapture('a-first-contact', { tree: true });
  for (const f of frames) if (f.bytes && f.tcp && f.payloadLength > 0) payloads.set(f.n, f.bytes.subarray(f.bytes.length - f.payloadLength));
});

/** The real CLC messages of a-first-contact (each one whole TCP segment there). */
async function realClc(): Promise<{ proposal: Uint8Array; accept: Uint8Array; confirm: Uint8Array }> {
  return { proposal: payloads.get(6)!, accept: payloads.get(8)!, confirm: payloads.get(10)! };
}

function clcTypes(ds: DecodedFrame[]): string[] {
  return ds.flatMap((d) => d.smc.filter((i) => i.proto === 'clc').map((i) => (i.value as { type: string }).type));
}

test('CLC split across three segments, on a non-SMC port, decodes once, in the last one', async (t) => {
  const { proposal } = await realClc();
  const dec = new FrameDecoder();
  const isn = 1000;
  const parts = [proposal.subarray(0, 5), proposal.subarray(5, 100), proposal.subarray(100)];
  const ds = [dec.decode(tcpFrame(40000, 6000, isn, 'S'))];
  let seq = isn + 1;
  for (const p of parts) { ds.push(dec.decode(tcpFrame(40000, 6000, seq, 'P.', p))); seq += p.length; }
  t.deepEqual(ds.map((d) => d.tcpRole), ['none', 'clc-part', 'clc-part', 'clc']);
  t.deepEqual(clcTypes(ds), ['proposal']);
  const item = ds[3]!.smc.find((i) => i.proto === 'clc') as { frames: number[] };
  t.deepEqual(item.frames, [2, 3, 4]);
  t.deepEqual(ds[3]!.issues, []);
});

test('several CLC messages in one segment, then retransmission and out-of-order delivery', async (t) => {
  const { proposal, confirm } = await realClc();
  const both = new Uint8Array(proposal.length + confirm.length);
  both.set(proposal, 0);
  both.set(confirm, proposal.length);
  let dec = new FrameDecoder();
  dec.decode(tcpFrame(40001, 12345, 0, 'S'));
  const d = dec.decode(tcpFrame(40001, 12345, 1, 'P.', both));
  t.deepEqual(clcTypes([d]), ['proposal', 'confirm']);
  // The same segment again is a retransmission: no second decode.
  const r = dec.decode(tcpFrame(40001, 12345, 1, 'P.', both));
  t.is(r.tcpRole, 'retransmission');
  t.deepEqual(clcTypes([r]), []);

  // Out of order: the second half arrives first and is held until the gap is filled.
  dec = new FrameDecoder();
  dec.decode(tcpFrame(40002, 12345, 0, 'S'));
  const late = dec.decode(tcpFrame(40002, 12345, 1 + 60, 'P.', both.subarray(60)));
  t.is(late.tcpRole, 'out-of-order');
  const early = dec.decode(tcpFrame(40002, 12345, 1, 'P.', both.subarray(0, 60)));
  t.deepEqual(clcTypes([early]), ['proposal', 'confirm']);
});

test('application data after the handshake is not mistaken for CLC and is not buffered', async (t) => {
  const dec = new FrameDecoder();
  dec.decode(tcpFrame(40003, 80, 0, 'S'));
  const d = dec.decode(tcpFrame(40003, 80, 1, 'P.', new TextEncoder().encode('GET / HTTP/1.1\r\n\r\n')));
  t.is(d.tcpRole, 'data');
  // A CLC eyecatcher later in the stream is data, not a message.
  const { proposal } = await realClc();
  const d2 = dec.decode(tcpFrame(40003, 80, 19, 'P.', proposal));
  t.is(d2.tcpRole, 'data');
  t.deepEqual(clcTypes([d2]), []);
});

/** Real SEND ONLY (LLC ADD LINK v2, 88 bytes) of a-first-contact, frame 16. */
async function realAddLink(): Promise<DecodedFrame> {
  const frames = await decodeCapture('a-first-contact', { tree: true });
  return frames[15]!;
}

function roceV2(ib: IbPacket, sport = 49441): CapturedFrame {
  const ibBytes = encodeIbPacket(ib, 0);
  const udp = encodeUdp(udpHeader({ srcPort: sport, dstPort: 4791, payloadLength: ibBytes.length, checksum: 0 }), ibBytes);
  const ip = encodeIpv4(ipv4Header({ src: B, dst: A, protocol: 17, payloadLength: udp.length, ttl: 1 }), udp);
  const data = encodeEthernet(ethernetHeader({ src: '52:54:00:55:00:0b', dst: '52:54:00:55:00:0a', ethertype: 0x0800 }), ip);
  writeIcrc(data, 14, 'v2');
  return frame(data);
}

test('a multi-packet SEND (FIRST + LAST) reassembles into one LLC message', async (t) => {
  const real = (await realAddLink()).roce!.ib;
  t.is(real.payload.length, 88);
  const first: IbPacket = { ...real, bth: { ...real.bth, opcode: 0x00 }, payload: real.payload.slice(0, 48) };
  const last: IbPacket = { ...real, bth: { ...real.bth, opcode: 0x02, psn: real.bth.psn + 1 }, payload: real.payload.slice(48) };
  const dec = new FrameDecoder();
  const d1 = dec.decode(roceV2(first));
  const d2 = dec.decode(roceV2(last));
  t.is(d1.roce?.icrc, 'ok');
  t.is(d2.roce?.icrc, 'ok');
  t.deepEqual(d1.smc, []);
  const llc = d2.smc.find((i) => i.proto === 'llc');
  t.is((llc?.value as { kind: string }).kind, 'add_link');
  t.deepEqual((llc as { frames?: number[] }).frames, [1, 2]);
  t.deepEqual(d2.issues, []);
  // A LAST without its FIRST is reported, not guessed.
  const lone = new FrameDecoder().decode(roceV2(last));
  t.true(lone.issues.some((i) => i.code === 'roce.send-reassembly'));
});

test('RoCE v1 (EtherType 0x8915, GRH) carries the same LLC; ICRC verified', async (t) => {
  const real = (await realAddLink()).roce!.ib;
  const ibBytes = encodeIbPacket(real, 0);
  const grh = encodeGrh({ ipVer: 6, tclass: 0, flowLabel: 0, payLen: ibBytes.length, nextHdr: 0x1b, hopLimit: 1, sgid: 'fe80::5054:ff:fe55:b', dgid: 'fe80::5054:ff:fe55:a' });
  const body = new Uint8Array(grh.length + ibBytes.length);
  body.set(grh, 0);
  body.set(ibBytes, grh.length);
  const data = encodeEthernet(ethernetHeader({ src: '52:54:00:55:00:0b', dst: '52:54:00:55:00:0a', ethertype: 0x8915 }), body);
  writeIcrc(data, 14, 'v1');
  const d = new FrameDecoder().decode(frame(data));
  t.is(d.roce?.version, 1);
  t.is(d.roce?.icrc, 'ok');
  t.is(d.roce?.grh?.sgid, 'fe80::5054:ff:fe55:b');
  t.is((d.smc[0]?.value as { kind: string }).kind, 'add_link');
  // Corrupt one payload byte: the ICRC must catch it.
  data[data.length - 10]! ^= 0xff;
  const bad = new FrameDecoder().decode(frame(data));
  t.is(bad.roce?.icrc, 'bad');
  t.true(bad.issues.some((i) => i.code === 'ib.icrc'));
});

test('Linux cooked v2 (-i any) and QinQ framing decode the same SMC content', async (t) => {
  const f = await realAddLink();
  const ipPart = f.bytes!.subarray(14);
  const sll2 = encodeSll(sllHeader({ version: 2, packetType: 0, addr: '52:54:00:55:00:0b', protocol: 0x0800, ifindex: 2 }), ipPart);
  const d1 = new FrameDecoder().decode(frame(sll2, LINKTYPE.LINUX_SLL2));
  t.is(d1.roce?.icrc, 'ok');
  t.is((d1.smc[0]?.value as { kind: string }).kind, 'add_link');

  const qinq = encodeEthernet(ethernetHeader({ src: '52:54:00:55:00:0b', dst: '52:54:00:55:00:0a', ethertype: 0x0800, vlans: [100, 7] }), ipPart);
  const d2 = new FrameDecoder().decode(frame(qinq));
  t.deepEqual(d2.eth?.vlans.map((v) => v.vid), [100, 7]);
  t.is(d2.roce?.icrc, 'ok');
  t.is((d2.smc[0]?.value as { kind: string }).kind, 'add_link');
});

test('RoCEv2 on an extra UDP port only with --roce-port', async (t) => {
  const real = (await realAddLink()).roce!.ib;
  const ibBytes = encodeIbPacket(real, 0);
  const udp = encodeUdp(udpHeader({ srcPort: 49441, dstPort: 4792, payloadLength: ibBytes.length, checksum: 0 }), ibBytes);
  const ip = encodeIpv4(ipv4Header({ src: B, dst: A, protocol: 17, payloadLength: udp.length, ttl: 1 }), udp);
  const data = encodeEthernet(ethernetHeader({ src: '52:54:00:55:00:0b', dst: '52:54:00:55:00:0a', ethertype: 0x0800 }), ip);
  writeIcrc(data, 14, 'v2');
  t.is(new FrameDecoder().decode(frame(data)).roce, undefined);
  const d = new FrameDecoder({ rocePorts: [4792] }).decode(frame(data));
  t.is(d.roce?.icrc, 'ok');
});

test('UD SENDs are RoCE, not SMC: no LLC/CDC decode of their payload', async (t) => {
  const real = (await realAddLink()).roce!.ib;
  const ud: IbPacket = { ...real, bth: { ...real.bth, opcode: 0x64 }, deth: { qkey: 0x11111111, resv8: 0, srcQp: 0x12 } };
  const d = new FrameDecoder().decode(roceV2(ud));
  t.is(d.roce?.icrc, 'ok');
  t.deepEqual(d.smc, []);
  t.deepEqual(d.issues, []);
});
