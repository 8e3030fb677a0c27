// uroce's batched UDP paths on loopback (the socket helper): UDP GSO on send (a run of
// equal-size packets is one send; their ICRCs are computed for IP IDs 0, 1, 2 …) and
// recvmmsg + UDP_GRO on receive (a GSO send that stayed whole is cut back into its packets,
// each checked with its own ID). Three receivers of the same GSO traffic:
//   * with GRO: the sends arrive whole; every packet passes the exact 32-bit ICRC check;
//   * without GRO: the kernel cuts the sends in software and numbers the segments' IP IDs —
//     the engine's assumption about those numbers is checked by the ICRCs of real packets;
//   * the tap of the sender: every packet, with the ID its ICRC was computed for, decodes in
//     FrameDecoder with a valid ICRC.
// uroce-specific (engine counters and options), so not part of the provider-neutral cases.
import test from 'ava';
import { Mtu } from '../../endpoint/verbs/index.js';
import { openUroce, loadSockHelper, type UroceDevice } from '../../endpoint/verbs/uroce/index.js';
import { PcapWriter, MemorySink } from '../../capture/writer.js';
import { readCaptureBuffer } from '../../capture/reader.js';
import { FrameDecoder } from '../../dissectors/frame.js';
import { connectPair } from './common.js';
import { transfer, stream } from './transfer.js';

/** Two engines on a free 127.0.n.1/.2 pair with per-side options. */
async function pair(oa: { gso?: boolean; gro?: boolean }, ob: { gso?: boolean; gro?: boolean }): Promise<[UroceDevice, UroceDevice]> {
  for (let n = 160; n < 200; n++) {
    let a: UroceDevice | undefined;
    try {
      a = await openUroce({ address: `127.0.${n}.1`, window: 256, ...oa });
      const b = await openUroce({ address: `127.0.${n}.2`, window: 256, ...ob });
      return [a, b];
    } catch (e) {
      await a?.close();
      if ((e as { code?: string }).code !== 'EADDRINUSE') throw e;
    }
  }
  throw new Error('no free loopback pair');
}

// the batched paths need the socket helper (built by npm ci); without it uroce uses dgram
const batched = loadSockHelper() !== undefined && process.env.UROCE_NO_BATCH !== '1' && process.env.UROCE_NO_GSO !== '1';

async function traffic(a: UroceDevice, b: UroceDevice, mtu: Mtu): Promise<void> {
  const { A, B } = connectPair(a, b, { mtu, timeout: 12 });
  for (const [op, n] of [['write', 1 << 20], ['send', 100_000], ['write_imm', 70_000], ['send_imm', 4096 * 3 + 1], ['write', 10], ['send', 0]] as const) await transfer(A, B, op, n, n + 7);
  await stream(A, B, { writeBytes: 2 << 20, sends: [1, 4096, 5000, 64, 9000, 0, 4097], seed: 11 });
  A.qp.destroy();
  B.qp.destroy();
}

(batched ? test.serial : test.serial.skip)('GSO sender -> GRO receiver: runs leave as one datagram and arrive whole, every packet exact', async (t) => {
  const [a, b] = await pair({ gso: true }, { gso: true });
  try {
    t.is(b.engine.rxMode, 'batched+gro');
    await traffic(a, b, Mtu.MTU_4096);
    const sa = a.engine.stats, sb = b.engine.stats;
    t.log(`sender: ${sa.txPackets} packets in ${sa.txDatagrams} datagrams; receiver: ${sb.rxPackets} packets in ${sb.rxDatagrams} datagrams, ${sb.rxBatches} batches`);
    t.true(sa.txDatagrams * 4 < sa.txPackets, 'GSO: several packets per send');
    t.true(sb.rxDatagrams * 4 < sb.rxPackets, 'GRO: several packets per datagram received');
    t.is(sb.icrcErrors, 0);
    t.is(sb.icrcIdRecovered, 0, 'no ID guessed: each packet checked against its index in the datagram');
    t.is(sb.icrcSegmentIds, 0);
    t.is(sa.icrcErrors, 0, 'ACKs (GSO runs of their own when coalesced behind requests) check too');
  } finally {
    await a.close();
    await b.close();
  }
});

(batched ? test.serial : test.serial.skip)('GSO sender -> receiver without GRO: the kernel cuts the sends, numbering IP IDs 0, 1, 2 … as the ICRCs assume', async (t) => {
  const [a, b] = await pair({ gso: true }, { gso: false, gro: false });
  try {
    t.is(b.engine.rxMode, 'batched');
    const ids = new Map<number, number>();
    const off = b.engine.tap((f) => { const id = (f.data[4]! << 8) | f.data[5]!; ids.set(id, (ids.get(id) ?? 0) + 1); });
    await traffic(a, b, Mtu.MTU_1024);
    off();
    const sa = a.engine.stats, sb = b.engine.stats;
    t.log(`sender: ${sa.txPackets} packets in ${sa.txDatagrams} datagrams; receiver: ${sb.rxPackets} packets in ${sb.rxDatagrams} datagrams; IP IDs seen (tap of received packets): ${[...ids.keys()].sort((x, y) => x - y).join(' ')}`);
    t.true(sa.txDatagrams * 4 < sa.txPackets, 'the sender used GSO');
    t.is(sb.rxDatagrams, sb.rxPackets, 'the receiver got every packet as a datagram of its own');
    t.is(sb.icrcErrors, 0, 'every segment the kernel cut has the ICRC of its ID');
    t.true(sb.icrcSegmentIds > 0, "IDs 1… found (segments of a GSO send)");
    t.is(sb.icrcIdRecovered, 0, "none taken for a foreign sender's ID");
    // RDMA WRITE of 1 MiB at MTU 1024: runs of up to 63 equal packets behind a RETH packet
    t.deepEqual([...ids.keys()].sort((x, y) => x - y), Array.from({ length: Math.max(...ids.keys()) + 1 }, (_, i) => i), 'IDs are 0 … n-1 with no gap');
    t.true(Math.max(...ids.keys()) < 64);
  } finally {
    await a.close();
    await b.close();
  }
});

(batched ? test.serial : test.serial.skip)('the tap of a GSO sender: every packet decodes with a valid ICRC for the IP ID it carries', async (t) => {
  const [a, b] = await pair({ gso: true }, { gso: true });
  const sink = new MemorySink();
  const w = new PcapWriter(sink, { nanosecond: true });
  const detach = a.engine.captureTo(w);
  try {
    await traffic(a, b, Mtu.MTU_2048);
  } finally {
    detach();
    w.close();
    await a.close();
    await b.close();
  }
  const r = readCaptureBuffer(sink.toBytes(), { reuseFrame: false });
  const d = new FrameDecoder();
  let n = 0, bad = 0, nonZeroIds = 0;
  for (let f = r.next(); f; f = r.next()) {
    const x = d.decode(f);
    n++;
    if (x.roce?.icrc !== 'ok') bad++;
    if (((f.data[4]! << 8) | f.data[5]!) !== 0) nonZeroIds++;
  }
  t.log(`${n} frames, ${nonZeroIds} with a non-zero IP ID (GSO segments), ${bad} with a bad ICRC`);
  t.true(n > 1000);
  t.true(nonZeroIds > n / 2);
  t.is(bad, 0);
});
