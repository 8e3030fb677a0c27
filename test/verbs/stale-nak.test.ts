// uroce requester vs a late duplicate NAK (duplication and reordering on the network): a PSN
// sequence NAK that arrives after the requester already got an ACK past it must be dropped as
// stale (IBA 9.7.5.1.x; rxe's completer drops every response whose PSN is below the oldest
// unacknowledged one). Acting on it moved the transmit position back to a PSN that no send queue
// entry holds any more, which skipped every work request not sent yet: the queue stalled with no
// timer armed. The peer here is a plain UDP socket on loopback that plays the responder by hand.
import test from 'ava';
import dgram from 'node:dgram';
import { once } from 'node:events';
import { Access, QpState, SendFlags, WrOpcode, WcStatus } from '../../endpoint/verbs/index.js';
import { openUroce, type UroceDevice } from '../../endpoint/verbs/uroce/index.js';
import { NetHeader } from '../../endpoint/verbs/uroce/icrc.js';
import { encodeIbPacket, makeAeth, setIcrc, IB_OP } from '../../dissectors/wire/ib.js';
import { collect, srcGid } from './common.js';

const A_IP = '127.0.0.31', PEER_IP = '127.0.0.32', PEER_QPN = 0x99, SQ_PSN = 0x100;

test('uroce requester: a stale duplicate NAK (PSN below the oldest unacknowledged) is dropped; the send queue keeps moving', async (t) => {
  const dev = await openUroce({ address: A_IP, window: 4 }) as UroceDevice;
  const peer = dgram.createSocket('udp4');
  peer.bind(4791, PEER_IP);
  await once(peer, 'listening');
  const got: number[] = []; // PSNs of the requests the peer received
  let wake: (() => void) | undefined;
  peer.on('message', (m: Buffer) => { if (m[0] === IB_OP.SEND_ONLY) { got.push(m.readUIntBE(9, 3)); wake?.(); } });
  const waitFor = (n: number, ms: number): Promise<boolean> => new Promise((resolve) => {
    if (got.length >= n) { resolve(true); return; }
    const tm = setTimeout(() => { wake = undefined; resolve(false); }, ms);
    wake = () => { if (got.length >= n) { clearTimeout(tm); wake = undefined; resolve(true); } };
  });
  try {
    const pd = dev.allocPd();
    const cq = dev.createCq(64);
    const qp = pd.createQp({ sendCq: cq, recvCq: cq, cap: { maxSendWr: 64, maxRecvWr: 1, maxSendSge: 1, maxRecvSge: 1 } });
    const g = srcGid(dev);
    qp.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: 1, qpAccessFlags: Access.LOCAL_WRITE });
    qp.modify({
      qpState: QpState.RTR, pathMtu: 3, destQpNum: PEER_QPN, rqPsn: 0, maxDestRdAtomic: 0, minRnrTimer: 1,
      ahAttr: { isGlobal: true, portNum: 1, grh: { dgid: `::ffff:${PEER_IP}`, sgidIndex: g.index, hopLimit: 64, trafficClass: 0, flowLabel: 0 } },
    });
    // timeout 18 ≈ 1 s: a retransmission timer would not hide the stall inside the test's waits
    qp.modify({ qpState: QpState.RTS, sqPsn: SQ_PSN, timeout: 18, retryCnt: 7, rnrRetry: 7, maxRdAtomic: 0 });
    const mem = new Uint8Array(64);
    const mr = pd.regMr(mem, Access.LOCAL_WRITE);
    const net = new NetHeader(PEER_IP, A_IP, 4791, 4791, 64, 0);
    const respond = (kind: 'ACK' | 'NAK', code: number, psn: number): Promise<void> => {
      const ib = encodeIbPacket({
        bth: { opcode: IB_OP.ACKNOWLEDGE, se: false, migReq: false, padCount: 0, tver: 0, pkey: 0xffff, fecn: false, becn: false, resv6: 0, destQp: qp.qpNum, ackReq: false, resv7: 0, psn },
        aeth: makeAeth(kind, code, 0), payload: new Uint8Array(0), padCount: 0, icrc: 0,
      });
      setIcrc(ib, net.icrc(ib, 0));
      return new Promise((r) => peer.send(ib, 4791, A_IP, () => r()));
    };

    // 10 one-packet SENDs; the window lets 4 out
    for (let i = 0; i < 10; i++) qp.postSend({ wrId: i, opcode: WrOpcode.SEND, sendFlags: SendFlags.SIGNALED, sgList: [mr.sge(0, 8)] });
    t.true(await waitFor(4, 2000), `first window: got ${got.length}`);
    t.deepEqual(got.slice(0, 4), [SQ_PSN, SQ_PSN + 1, SQ_PSN + 2, SQ_PSN + 3]);
    // ACK the first one, then a late copy of a NAK from before it (the responder once expected
    // SQ_PSN; that NAK was duplicated/reordered and arrives now), then ACK the rest of the window.
    await respond('ACK', 31, SQ_PSN);
    await new Promise((r) => setTimeout(r, 50));
    await respond('NAK', 0, SQ_PSN); // PSN = oldest unacknowledged − 1: stale
    await new Promise((r) => setTimeout(r, 50));
    await respond('ACK', 31, SQ_PSN + 3);
    // The queue must go on at once: the next requests come without waiting for any timer.
    t.true(await waitFor(8, 500), `after the ACK: ${got.length - 4} more requests (expected 4), PSNs ${got.map((p) => p - SQ_PSN).join(',')}`);
    await respond('ACK', 31, SQ_PSN + 7);
    t.true(await waitFor(10, 500), `then: ${got.length} requests in all`);
    await respond('ACK', 31, SQ_PSN + 9);
    const wcs = await collect(cq, 10, 3000);
    t.deepEqual(wcs.map((w) => w.status), Array(10).fill(WcStatus.SUCCESS));
    t.deepEqual(wcs.map((w) => w.wrId), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    // every request sent once: no go-back to acknowledged PSNs
    t.deepEqual(got.map((p) => p - SQ_PSN), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    qp.destroy();
  } finally {
    peer.close();
    await dev.close();
  }
});
