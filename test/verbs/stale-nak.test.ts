// uroce requester vs a late duplicate NAK (duplication and reordering on the network): a PSN
// sequence NAK that arrives after the requester already got an ACK past it must be dropped as
// stale (IBA 9.7.5.1.x; rxe's completer drops every response whose PSN is below the oldest
// unacknowledged one). Acting on it moved the transmit position back to a PSN that no send queue
// entry holds any more, which skipped every work request not sent yet: the queue stalled with no
// timer armed. The peer here is a plain UDP socket on loopback that plays the responder by hand.
import test from 'ava';
import { Access, Mtu, SendFlags, WrOpcode, WcStatus } from '../../endpoint/verbs/index.js';
import { openUroce, type UroceDevice } from '../../endpoint/verbs/uroce/index.js';
import { IB_OP } from '../../dissectors/wire/ib.js';
import { collect } from './common.js';
import { handPeer, rtsToPeer } from './hand-peer.js';

const A_IP = '127.0.0.31', PEER_IP = '127.0.0.32', PEER_QPN = 0x99, SQ_PSN = 0x100;

test('uroce requester: a stale duplicate NAK (PSN below the oldest unacknowledged) is dropped; the send queue keeps moving', async (t) => {
  const dev = await openUroce({ address: A_IP, window: 4 }) as UroceDevice;
  // PSNs of the requests the peer received
  const peer = await handPeer(PEER_IP, A_IP, (m) => (m[0] === IB_OP.SEND_ONLY ? m.readUIntBE(9, 3) : undefined));
  const { got, waitFor } = peer;
  try {
    const pd = dev.allocPd();
    const cq = dev.createCq(64);
    const qp = pd.createQp({ sendCq: cq, recvCq: cq, cap: { maxSendWr: 64, maxRecvWr: 1, maxSendSge: 1, maxRecvSge: 1 } });
    // timeout 18 ≈ 1 s: a retransmission timer would not hide the stall inside the test's waits
    rtsToPeer(dev, qp, PEER_IP, PEER_QPN, SQ_PSN, Mtu.MTU_1024);
    const mem = new Uint8Array(64);
    const mr = pd.regMr(mem, Access.LOCAL_WRITE);
    const respond = (kind: 'ACK' | 'NAK', code: number, psn: number): Promise<void> => peer.respond(kind, code, psn, qp.qpNum);

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
