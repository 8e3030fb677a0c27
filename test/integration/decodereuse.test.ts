// A decoder told to reuse its per-layer records (smcdump's one-line, -q and --summary path)
// decodes every frame of every bundled capture to the same values as a fresh-object decoder,
// as long as each frame is read before the next decode; and it does refill one record. Without
// the items' summaries (-q, --summary) the frames differ in those texts only.
import test from 'ava';
import { readdirSync } from 'node:fs';
import { FrameDecoder, type DecodedFrame } from '../../dissectors/frame.js';
import { jsonReplacer } from '../../dissectors/wire/common.js';
import { Tracker } from '../../dissectors/tracker/tracker.js';
import { summaryJson } from '../../dissectors/render/summary.js';
import { renderJson } from '../../dissectors/render/json.js';
import { LINKTYPE, type CapturedFrame } from '../../capture/types.js';
import { encodeEthernet, ethernetHeader } from '../../dissectors/net/ethernet.js';
import { encodeIpv6, ipv6Header } from '../../dissectors/net/ipv6.js';
import { encodeUdp, udpHeader } from '../../dissectors/net/udp.js';
import { encodeGrh, encodeIbPacket, makeAeth, writeIcrc, type IbPacket } from '../../dissectors/wire/ib.js';
import { encodeSll, sllHeader } from '../../dissectors/net/sll.js';
import { PCAPS, pcapPath, readFrames } from '../helpers.js';

/** Everything a frame says, as text: its JSON (a reused IB packet serializes as the fresh one
 *  would), the payload bytes read through the frame (a lazily made view included) and the
 *  `--json` line. Any field of a reused record left over from an earlier frame shows here. */
function said(d: DecodedFrame): string {
  const pay = d.roce ? Buffer.from(d.roce.ib.payload).toString('hex') : '-';
  return `${JSON.stringify(d, jsonReplacer)}\n${pay}\n${renderJson(d)}`;
}

/** The records a reusing decoder refills, as seen through one frame. */
function records(d: DecodedFrame): [string, object | undefined][] {
  return [['eth', d.eth], ['ip', d.ip?.version === 4 ? d.ip : undefined], ['ipv4', d.ip?.version === 4 ? d.ip.header : undefined], ['udp', d.udp], ['tcp', d.tcp],
    ['ib', d.roce?.version === 2 ? d.roce.ib : undefined], ['bth', d.roce?.version === 2 ? d.roce.ib.bth : undefined], ['roce', d.roce?.version === 2 ? d.roce : undefined],
    ['aeth', d.roce?.version === 2 ? d.roce.ib.aeth : undefined]];
}

/** Fresh and reusing decoders over `frames`: every frame says the same; each record is one object. */
function compare(t: import('ava').ExecutionContext, what: string, frames: CapturedFrame[]): number {
  const fresh = new FrameDecoder(), reused = new FrameDecoder({ reuse: true });
  const seen = new Map<string, Set<object>>();
  let roce = 0;
  for (const f of frames) {
    const a = fresh.decode(f), b = reused.decode(f);
    const sa = said(a), sb = said(b);
    if (sa !== sb) { t.is(sb, sa, `${what} frame ${a.n}`); return roce; }
    if (b.roce) { roce++; t.not(a.roce!.ib, b.roce.ib); }
    for (const [k, o] of records(b)) if (o) { let s = seen.get(k); if (!s) seen.set(k, s = new Set()); s.add(o); }
  }
  for (const [k, s] of seen) if (s.size > 1) t.fail(`${what}: ${s.size} ${k} records`);
  return roce;
}

test('reuse: same decoded values as fresh objects on every bundled capture, one record per layer refilled', async (t) => {
  const names = readdirSync(PCAPS).filter((n) => n.endsWith('.pcap'));
  t.true(names.length >= 10);
  let roce = 0;
  for (const name of names) roce += compare(t, name, await readFrames(pcapPath(name)));
  t.true(roce > 10_000, `${roce} RoCE frames compared`);
  // -V keeps its own records per frame even when reuse is asked for (the tree mode keeps frames)
  const frames = await readFrames(pcapPath('a-first-contact'));
  const v = new FrameDecoder({ reuse: true, tree: true });
  const bths = new Set<object>();
  for (const f of frames) { const d = v.decode(f); if (d.roce) bths.add(d.roce.ib.bth); }
  t.true(bths.size > 1);
});

// Frames of different kinds one after the other, so that each reused record is refilled from a
// frame that had what the next one lacks: every bundled capture's frames dealt round-robin
// (WRITE FIRST with its RETH, ACKs with their AETH, SENDs, TCP with options and CLC, cut
// frames), with built ones between them: QinQ-tagged, Linux cooked v2, RoCE v1 with its GRH,
// IPv6 RoCE v2, an ACK and a NAK. A field left over from the frame before shows as a difference.
test('reuse: no record carries anything from one frame to the next, over mixed frame kinds', async (t) => {
  const names = readdirSync(PCAPS).filter((n) => n.endsWith('.pcap'));
  const lists = await Promise.all(names.map((n) => readFrames(pcapPath(n))));
  const frame = (data: Uint8Array, linktype: number = LINKTYPE.ETHERNET): CapturedFrame => ({ data, caplen: data.length, origlen: data.length, tsNs: 1n, linktype, ifIndex: 0 });
  const eth = (type: number, body: Uint8Array, vlans: number[] = []): Uint8Array =>
    encodeEthernet(ethernetHeader({ src: '52:54:00:55:00:0b', dst: '52:54:00:55:00:0a', ethertype: type, vlans }), body);
  // a real RoCE v2 frame of d-bulk (its IP packet) re-framed, and built IB packets
  const realV2 = lists[names.indexOf('d-bulk-2MiB.pcap')]!.find((f) => f.data.length > 200 && f.data[23] === 17)!;
  const ipPart = realV2.data.subarray(14);
  const ack: IbPacket = { bth: { opcode: 0x11, se: false, migReq: false, padCount: 0, tver: 0, pkey: 0xffff, fecn: false, becn: false, resv6: 0, destQp: 0x11, ackReq: false, resv7: 0, psn: 7 }, aeth: makeAeth('ACK', 31, 5), payload: new Uint8Array(0), padCount: 0, icrc: 0 };
  const nak: IbPacket = { ...ack, aeth: makeAeth('NAK', 0, 6) };
  const send: IbPacket = { bth: { ...ack.bth, opcode: 0x04, psn: 8 }, payload: new Uint8Array(44).fill(7), padCount: 0, icrc: 0 };
  const v2over6 = (p: IbPacket): Uint8Array => {
    const ib = encodeIbPacket(p, 0);
    const udp = encodeUdp(udpHeader({ srcPort: 49441, dstPort: 4791, payloadLength: ib.length }), ib);
    const data = eth(0x86dd, encodeIpv6(ipv6Header({ src: 'fe80::1', dst: 'fe80::2', protocol: 17, payloadLength: udp.length, hopLimit: 1 }), udp));
    writeIcrc(data, 14, 'v2');
    return data;
  };
  const v1 = (p: IbPacket): Uint8Array => {
    const ib = encodeIbPacket(p, 0);
    const grh = encodeGrh({ ipVer: 6, tclass: 0, flowLabel: 0, payLen: ib.length, nextHdr: 0x1b, hopLimit: 1, sgid: 'fe80::5054:ff:fe55:b', dgid: 'fe80::5054:ff:fe55:a' });
    const body = new Uint8Array(grh.length + ib.length);
    body.set(grh, 0); body.set(ib, grh.length);
    const data = eth(0x8915, body);
    writeIcrc(data, 14, 'v1');
    return data;
  };
  const built: CapturedFrame[] = [
    frame(eth(0x0800, ipPart, [100, 7])),
    frame(encodeSll(sllHeader({ version: 2, packetType: 0, addr: '52:54:00:55:00:0b', protocol: 0x0800, ifindex: 2 }), ipPart), LINKTYPE.LINUX_SLL2),
    frame(v1(send)), frame(v1(ack)), frame(v2over6(ack)), frame(v2over6(nak)), frame(v2over6(send)),
    { ...frame(realV2.data.subarray(0, 60)), origlen: realV2.data.length },
  ];
  const mixed: CapturedFrame[] = [];
  for (let i = 0; mixed.length < 40_000; i++) {
    let any = false;
    for (const l of lists) if (i < l.length) { mixed.push(l[i]!); any = true; }
    mixed.push(built[i % built.length]!);
    if (!any) break;
  }
  const roce = compare(t, 'mixed', mixed);
  t.true(roce > 5_000, `${roce} RoCE frames compared`);
});

// smcdump's -q and --summary decode without the items' one-line summaries (summaries: false):
// the frames are the same apart from those texts, and what the tracker rebuilds from them (notes,
// the summary JSON, anomaly totals) is the same. If the tracker or the tables ever read an item's
// summary, this fails and smcdump must keep them on in those modes.
test('summaries off: same frames except the item texts, same tracker notes and summary on every bundled capture', async (t) => {
  const names = readdirSync(PCAPS).filter((n) => n.endsWith('.pcap'));
  let items = 0;
  for (const name of names) {
    const frames = await readFrames(pcapPath(name));
    const on = new FrameDecoder({ reuse: true }), off = new FrameDecoder({ reuse: true, summaries: false });
    const ta = new Tracker({ compact: true }), tb = new Tracker({ compact: true });
    for (const f of frames) {
      const a = on.decode(f), b = off.decode(f);
      for (let i = 0; i < b.smc.length; i++) {
        items++;
        if (b.smc[i]!.summary !== '') { t.fail(`${name} frame ${b.n}: summary "${b.smc[i]!.summary}" made with summaries off`); return; }
        t.not(a.smc[i]!.summary, '', `${name} frame ${a.n}: an item without its summary`);
      }
      const sa = JSON.stringify({ ...a, smc: a.smc.map((x) => ({ ...x, summary: '' })) }, jsonReplacer), sb = JSON.stringify(b, jsonReplacer);
      if (sa !== sb) { t.is(sb, sa, `${name} frame ${a.n}`); return; }
      const na = JSON.stringify(ta.feed(a), jsonReplacer), nb = JSON.stringify(tb.feed(b), jsonReplacer);
      if (na !== nb) { t.is(nb, na, `${name} frame ${a.n}: tracker note`); return; }
    }
    ta.finish(); tb.finish();
    t.is(JSON.stringify(summaryJson(tb), jsonReplacer), JSON.stringify(summaryJson(ta), jsonReplacer), `${name}: summary`);
    t.is(tb.anomalyCount, ta.anomalyCount, `${name}: anomalies`);
  }
  t.true(items > 500, `${items} SMC items compared`);
});
