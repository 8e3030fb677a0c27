// The ICRC's arithmetic in the socket helper (round 14, docs/uroce.md): the helper puts the ICRC
// on sent packets and gives each received packet a verdict; TypeScript keeps the rule and checks
// every packet the helper did not find exact. Each receive test runs twice, with the helper's
// ICRC and with it turned off (UROCE_ICRC=js, the TypeScript fallback), on real UDP on loopback:
//   * crafted packets from a socket that sends IP ID 0 (the helper's openUdp4, as uroce's own):
//     valid ones pass, one bit flipped in the payload, in the BTH or in the ICRC is dropped and
//     counted, a flipped masked BTH bit (FECN) still passes (the mask is the wire layer's);
//   * a source that has sent ID 0 is held to the exact check afterwards (icrc.ts' policy: its
//     state is kept the same when the helper found its packets exact);
//   * a Linux-rxe-style sender (ICRCs for random IP IDs) is recovered and counted;
//   * engine to engine, with GSO and GRO: every packet's ICRC comes from the helper and every
//     received packet is exact there, segments with their index as the ID.
import test, { type ExecutionContext } from 'ava';
import dgram from 'node:dgram';
import { Mtu } from '../../endpoint/verbs/index.js';
import { openUroce, type UroceDevice } from '../../endpoint/verbs/uroce/index.js';
import { loadSockHelper } from '../../endpoint/verbs/uroce/sockets.js';
import { NetHeader } from '../../endpoint/verbs/uroce/icrc.js';
import { encodeIbPacket, setIcrc, checkIcrc, IB_OP } from '../../dissectors/wire/ib.js';
import { BTH_FIELDS } from '../../dissectors/wire/views/ib.js';
import { connectPair } from './common.js';
import { transfer, stream } from './transfer.js';
import { prng } from '../helpers.js';

const helper = loadSockHelper();
const batched = helper !== undefined && process.env.UROCE_NO_BATCH !== '1';
/** The helper of this build does the ICRC (a helper built before round 14 has no icrcInit). */
const helperIcrc = batched && typeof helper.icrcInit === 'function' && process.env.UROCE_ICRC !== 'js' && process.env.SMCSCOPE_CRC !== 'js';

/** Open a device with the helper's ICRC on or off (the engine reads UROCE_ICRC when it opens). */
async function openMode(address: string, mode: 'helper' | 'js', o: { gso?: boolean } = {}): Promise<UroceDevice> {
  const before = process.env.UROCE_ICRC;
  if (mode === 'js') process.env.UROCE_ICRC = 'js';
  try {
    return await openUroce({ address, window: 256, ...o }) as UroceDevice;
  } finally {
    if (before === undefined) delete process.env.UROCE_ICRC; else process.env.UROCE_ICRC = before;
  }
}

/** A SEND ONLY for a QP that does not exist at the receiver: past the ICRC check it is counted
 *  as unknownQp, so the counters tell the ICRC's verdict on it. */
function sendOnly(psn: number, payload: Uint8Array): Uint8Array {
  return encodeIbPacket({
    bth: { opcode: IB_OP.SEND_ONLY, se: false, migReq: false, padCount: 0, tver: 0, pkey: 0xffff, fecn: false, becn: false, resv6: 0, destQp: 0x7777, ackReq: false, resv7: 0, psn },
    payload, padCount: 0, icrc: 0,
  });
}

interface Sender { send(ib: Uint8Array): Promise<void>; net: NetHeader; close(): void }

/** A raw sender at `from` (IP ID 0 on every datagram, like uroce) towards `to`:4791. */
function sender(from: string, to: string): Sender {
  const fd = helper!.openUdp4(from, 0, 0, 64, 0, 0);
  const sock = dgram.createSocket('udp4');
  sock.bind({ fd });
  const net = new NetHeader(from, to, helper!.boundPort(fd), 4791, 64, 0);
  return {
    net,
    send: (ib) => new Promise<void>((r) => sock.send(ib, 4791, to, () => r())),
    close: () => sock.close(),
  };
}

/** Until the engine has handled `n` packets more than `from` (real UDP: they arrive later). */
async function received(dev: UroceDevice, n: number): Promise<void> {
  for (let i = 0; i < 400 && dev.engine.stats.rxPackets < n; i++) await new Promise((r) => setTimeout(r, 5));
}

function withIcrc(net: NetHeader, ib: Uint8Array, id = 0): Uint8Array {
  setIcrc(ib, net.icrc(ib, id));
  return ib;
}

async function corruptedAreDropped(t: ExecutionContext, mode: 'helper' | 'js', base: number): Promise<void> {
  const dev = await openMode(`127.0.${base}.1`, mode);
  const s = sender(`127.0.${base}.2`, `127.0.${base}.1`);
  try {
    t.is(dev.engine.icrcInHelper, mode === 'helper');
    const st = dev.engine.stats;
    const rnd = prng(base);
    const payload = new Uint8Array(64).map(() => Math.floor(rnd() * 256));
    const good = (psn: number): Uint8Array => withIcrc(s.net, sendOnly(psn, payload));
    // three valid packets of one length: the first asks the helper's table for its prefix (so
    // do the others of its receive batch: the verdicts are made when the batch is read)
    for (let i = 0; i < 3; i++) { await s.send(good(i)); await received(dev, i + 1); }
    t.is(st.icrcErrors, 0);
    t.is(st.unknownQp, 3, 'valid packets pass the ICRC check');
    if (mode === 'helper') t.is(st.icrcHelperRx, 2, 'the helper found the second and third exact');
    else t.is(st.icrcHelperRx, 0);
    // one bit flipped, after the ICRC was computed: in the payload, in the BTH (P_Key, PSN), in the ICRC
    const flips = [12 + 5, 12 + 63, BTH_FIELDS.pkey.at, BTH_FIELDS.psn.at + 2, 12 + 64, 12 + 64 + 3];
    let n = 3;
    for (const [k, at] of flips.entries()) {
      const p = good(100 + k);
      p[at] = p[at]! ^ (1 << (k % 8));
      await s.send(p);
      n++;
    }
    await received(dev, n);
    t.is(st.icrcErrors, flips.length, 'every corrupted packet dropped');
    t.is(st.unknownQp, 3);
    t.is(st.icrcIdRecovered, 0);
    if (mode === 'helper') t.is(st.icrcHelperRx, 2, 'no corrupted packet is exact in the helper');
    // FECN is masked (forced to one) by the ICRC: flipping it keeps the packet valid
    const fecn = good(200);
    fecn[BTH_FIELDS.fecn.at] = fecn[BTH_FIELDS.fecn.at]! ^ 0x80;
    await s.send(fecn);
    n++;
    await received(dev, n);
    t.is(st.unknownQp, 4, 'a masked BTH bit does not change the ICRC');
    t.is(st.icrcErrors, flips.length);
    // this source has sent ID 0 (more than strictAfter exact packets): held to the exact check,
    // a packet whose ICRC matches another IP ID is dropped, not recovered
    for (let i = 0; i < 8; i++) { await s.send(good(300 + i)); n++; }
    await s.send(withIcrc(s.net, sendOnly(400, payload), 0x1234));
    n++;
    await received(dev, n);
    t.is(st.rxPackets, n);
    t.is(st.unknownQp, 12);
    t.is(st.icrcErrors, flips.length + 1, 'a source held to the exact check gets no ID recovery');
    t.is(st.icrcIdRecovered, 0);
  } finally {
    s.close();
    await dev.close();
  }
}

async function rxeStyleRecovered(t: ExecutionContext, mode: 'helper' | 'js', base: number): Promise<void> {
  const dev = await openMode(`127.0.${base}.1`, mode);
  const s = sender(`127.0.${base}.3`, `127.0.${base}.1`);
  try {
    const st = dev.engine.stats;
    const rnd = prng(base + 1);
    const payload = new Uint8Array(200).map(() => Math.floor(rnd() * 256));
    // like Linux rxe: a kernel-chosen IP ID per packet (here: the ICRC computed for a random ID
    // above the GSO segment range; the socket itself sends ID 0, which the engine cannot see)
    const n = 20;
    for (let i = 0; i < n; i++) await s.send(withIcrc(s.net, sendOnly(i, payload), 64 + Math.floor(rnd() * (0x10000 - 64))));
    // and one of them corrupted: a random ID still has to explain it, 16 check bits
    const bad = withIcrc(s.net, sendOnly(n, payload), 0x4321);
    bad[40] = bad[40]! ^ 0x10;
    await s.send(bad);
    await received(dev, n + 1);
    t.is(st.rxPackets, n + 1);
    t.is(st.icrcIdRecovered, n, 'every random ID recovered and counted');
    t.is(st.unknownQp, n);
    t.is(st.icrcErrors, 1);
    t.is(st.icrcHelperRx, 0, 'none of them is exact for ID 0');
  } finally {
    s.close();
    await dev.close();
  }
}

const modes = helperIcrc ? (['helper', 'js'] as const) : (['js'] as const);
for (const [i, mode] of modes.entries()) {
  (batched ? test.serial : test.serial.skip)(`ICRC (${mode}): a bit flipped in payload, BTH or ICRC is dropped; the masked FECN bit is not; an ID 0 source stays held to the exact check`, (t) => corruptedAreDropped(t, mode, 210 + i));
  (batched ? test.serial : test.serial.skip)(`ICRC (${mode}): a Linux-rxe-style sender's random IP IDs are recovered and counted`, (t) => rxeStyleRecovered(t, mode, 212 + i));
}

(helperIcrc ? test.serial : test.serial.skip)('ICRC (helper): engine to engine with GSO and GRO, every packet computed and checked in the helper, bytes intact', async (t) => {
  const a = await openMode('127.0.214.1', 'helper', { gso: true });
  const b = await openMode('127.0.214.2', 'helper', { gso: true });
  try {
    const { A, B } = connectPair(a, b, { mtu: Mtu.MTU_1024, timeout: 12 });
    for (const [op, size] of [['write', 200_000], ['send', 70_000], ['write_imm', 64], ['send', 0]] as const) await transfer(A, B, op, size, size + 3);
    await stream(A, B, { writeBytes: 1 << 20, sends: [1, 1024, 5000, 64], seed: 9 });
    A.qp.destroy();
    B.qp.destroy();
    for (const [name, s] of [['a', a.engine.stats], ['b', b.engine.stats]] as const) {
      t.log(`${name}: tx ${s.txPackets} (helper ICRC ${s.icrcHelperTx}), rx ${s.rxPackets} in ${s.rxDatagrams} datagrams (helper exact ${s.icrcHelperRx})`);
      t.is(s.icrcErrors, 0);
      t.is(s.icrcIdRecovered, 0);
      t.is(s.icrcHelperTx, s.txPackets, 'no tap, no fault: every ICRC from the helper');
      // checked in TypeScript only while a (port, length, ID) has no prefix in the helper's table
      // (the packets of the batch where it first came)
      t.true(s.icrcHelperRx > 0.5 * s.rxPackets, `most received packets exact in the helper (${s.icrcHelperRx} of ${s.rxPackets})`);
    }
    t.true(b.engine.stats.rxDatagrams * 2 < b.engine.stats.rxPackets, 'GRO datagrams: segments checked with their index as the ID');
  } finally {
    await a.close();
    await b.close();
  }
});

(helperIcrc ? test.serial : test.serial.skip)('ICRC (helper): a tap added while packets wait in the stage sees them with their final ICRC', async (t) => {
  const a = await openMode('127.0.215.1', 'helper');
  const b = await openMode('127.0.215.2', 'helper');
  try {
    const { A, B } = connectPair(a, b, { mtu: Mtu.MTU_1024, timeout: 16 });
    await transfer(A, B, 'send', 100, 1); // the QPs' first packets out of the way
    const sa = a.engine.stats;
    const helperTx = sa.icrcHelperTx, tx = sa.txPackets;
    const frames: Uint8Array[] = [];
    // transfer() posts at once: the WRITE's five packets are staged (ICRC jobs for the helper)
    // when the tap comes, and the flush runs after this job
    const done = transfer(A, B, 'write', 5000, 2);
    t.is(sa.txPackets - tx, 5, 'staged before the tap');
    const off = a.engine.tap((f) => { if (f.data[12]! === 127 && f.data[15]! === 1 && f.data[19]! === 2) frames.push(f.data.slice()); });
    await done;
    off();
    // (a retransmission under load adds copies: they pass the tap with their ICRC too)
    t.true(frames.length >= 5, `the tap saw the staged packets (${frames.length})`);
    for (const f of frames) t.true(checkIcrc(f, 0, 'v2').ok, 'with the ICRC they left with');
    t.is(sa.icrcHelperTx, helperTx, 'computed in TypeScript for the tap, not counted as the helper\'s');
    t.is(b.engine.stats.icrcErrors, 0);
  } finally {
    await a.close();
    await b.close();
  }
});
