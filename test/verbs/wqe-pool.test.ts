// uroce reuses send WQEs from a per-QP free list (docs/uroce.md round 10). An entry may be
// reused only once it has completed: a WQE still in flight can be resent (go-back-N) at any
// time and must then carry its own bytes, never those of a later work request that took over
// a completed entry. The peer is a plain UDP socket on loopback playing the responder by hand,
// so which PSNs are acknowledged, and when the requester goes back, is exact.
import test from 'ava';
import { Access, Mtu, SendFlags, WrOpcode, WcStatus } from '../../endpoint/verbs/index.js';
import { openUroce, type UroceDevice } from '../../endpoint/verbs/uroce/index.js';
import type { UroceQp } from '../../endpoint/verbs/uroce/qp.js';
import { IB_OP } from '../../dissectors/wire/ib.js';
import { collect } from './common.js';
import { handPeer, rtsToPeer } from './hand-peer.js';

const A_IP = '127.0.0.33', PEER_IP = '127.0.0.34', PEER_QPN = 0x9a, SQ_PSN = 0x200;

test('uroce send WQE pool: entries are reused only after completion; a go-back-N resend after reuse carries each WR\'s own bytes', async (t) => {
  const dev = await openUroce({ address: A_IP, window: 8 }) as UroceDevice;
  // each SEND ONLY as (PSN relative to SQ_PSN, payload without pad)
  const peer = await handPeer(PEER_IP, A_IP, (m) => {
    if (m[0] !== IB_OP.SEND_ONLY) return undefined;
    const pad = (m[1]! >> 4) & 3;
    return { psn: m.readUIntBE(9, 3) - SQ_PSN, payload: m.subarray(12, m.length - 4 - pad).toString('latin1') };
  });
  const { got, waitFor } = peer;
  try {
    const pd = dev.allocPd();
    const cq = dev.createCq(64);
    const qp = pd.createQp({ sendCq: cq, recvCq: cq, cap: { maxSendWr: 4, maxRecvWr: 1, maxSendSge: 2, maxRecvSge: 1 } }) as UroceQp;
    rtsToPeer(dev, qp, PEER_IP, PEER_QPN, SQ_PSN, Mtu.MTU_256);
    const text = 'w0a:w0b:w1a:w1b:w2a:w2b:w3a:w3b:' + 'NEW4..NEW5..';
    const mem = new Uint8Array(Buffer.from(text, 'latin1'));
    const mr = pd.regMr(mem, Access.LOCAL_WRITE);
    const respond = (kind: 'ACK' | 'NAK', code: number, psn: number): Promise<void> => peer.respond(kind, code, SQ_PSN + psn, qp.qpNum);

    // WRs 0–3 fill the send queue: two SGEs of 4 bytes each (gathered in reverse order)
    for (let i = 0; i < 4; i++) {
      qp.postSend({ wrId: i, opcode: WrOpcode.SEND, sendFlags: SendFlags.SIGNALED, sgList: [mr.sge(8 * i + 4, 4), mr.sge(8 * i, 4)] });
    }
    const first = qp.sq.slice(qp.sqHead);
    t.true(await waitFor(4, 2000), `first window: got ${got.length}`);
    t.throws(() => qp.postSend({ wrId: 99, opcode: WrOpcode.SEND, sgList: [mr.sge(0, 1)] }), { message: /send queue full/ });

    // WRs 0 and 1 complete; 4 and 5 (one 6-byte SGE each) take their entries while 2 and 3
    // are still unacknowledged
    await respond('ACK', 31, 1);
    await collect(cq, 2, 3000);
    qp.postSend({ wrId: 4, opcode: WrOpcode.SEND, sendFlags: SendFlags.SIGNALED, sgList: [mr.sge(32, 6)] });
    qp.postSend({ wrId: 5, opcode: WrOpcode.SEND, sendFlags: SendFlags.SIGNALED, sgList: [mr.sge(38, 6)] });
    const live = qp.sq.slice(qp.sqHead);
    t.is(live.length, 4);
    t.true(live[2] === first[0] || live[2] === first[1], 'WR 4 reuses a completed entry');
    t.true(live[3] === first[0] || live[3] === first[1], 'WR 5 reuses a completed entry');
    t.is(new Set(live).size, 4, 'no entry in flight is shared');
    t.true(await waitFor(6, 2000), `WRs 4 and 5 sent: got ${got.length}`);

    // a PSN sequence NAK for WR 2: everything from it is resent
    await respond('NAK', 0, 2);
    t.true(await waitFor(10, 2000), `resent: got ${got.length}`);
    await respond('ACK', 31, 5);
    const wcs = await collect(cq, 4, 3000);
    t.deepEqual(wcs.map((w) => [w.wrId, w.status]), [[2, WcStatus.SUCCESS], [3, WcStatus.SUCCESS], [4, WcStatus.SUCCESS], [5, WcStatus.SUCCESS]]);
    const want = ['w0b:w0a:', 'w1b:w1a:', 'w2b:w2a:', 'w3b:w3a:', 'NEW4..', 'NEW5..'];
    t.deepEqual(got.map((p) => p.psn), [0, 1, 2, 3, 4, 5, 2, 3, 4, 5]);
    for (const p of got) t.is(p.payload, want[p.psn]!, `PSN ${p.psn}`);
    qp.destroy();
  } finally {
    peer.close();
    await dev.close();
  }
});
