// A hostile or broken peer never crashes the engine: thousands of crafted packets with a
// valid ICRC (so they get past the ICRC check and reach the QP logic) — random opcodes,
// truncated headers, wild PSNs, RDMA WRITEs with random rkeys and lengths, ACKs and NAKs for
// nothing — are dropped or answered the way IB says; the process lives, memory outside
// registered regions is never touched, and new connections keep working.
import test from 'ava';
import dgram from 'node:dgram';
import { Access, QpState } from '../../endpoint/verbs/index.js';
import { openUroce, type UroceDevice } from '../../endpoint/verbs/uroce/index.js';
import { loadSockHelper } from '../../endpoint/verbs/uroce/sockets.js';
import { NetHeader } from '../../endpoint/verbs/uroce/icrc.js';
import { encodeIbPacket, setIcrc, opcodeInfo, type IbPacket } from '../../dissectors/wire/ib.js';
import { connectPair, prngBytes } from './hostile-support.js';
import { transfer } from './transfer.js';
import { prng } from '../helpers.js';

const helper = loadSockHelper();

(helper ? test : test.skip)('uroce: crafted packets with valid ICRCs from the peer address: no crash, QPs fail or drop cleanly', async (t) => {
  const a = await openUroce({ address: '127.0.0.11' }) as UroceDevice;
  const b = await openUroce({ address: '127.0.0.12' }) as UroceDevice;
  const fd = helper!.openUdp4('127.0.0.11', 0, 0, 64, 0, 0);
  const sock = dgram.createSocket('udp4');
  sock.bind({ fd });
  try {
    const { A, B } = connectPair(a, b);
    const guard = new Uint8Array(4096).fill(0x33);
    const gmr = B.pd.regMr(guard, Access.LOCAL_WRITE); // no remote access: must stay untouched
    const victim = new Uint8Array(4096);
    const vmr = B.pd.regMr(victim, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
    for (let i = 0; i < 8; i++) B.qp.postRecv({ wrId: i, sgList: [vmr.sge(0, 64)] });
    const net = new NetHeader('127.0.0.11', '127.0.0.12', helper!.boundPort(fd), 4791, 64, 0);
    const rnd = prng(42);
    let revived = 0;
    const revive = (): void => { // ERR -> RESET -> RTS again, as an application would reconnect
      const q = B.qp.query();
      B.qp.modify({ qpState: QpState.RESET });
      B.qp.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: 1, qpAccessFlags: Access.LOCAL_WRITE | Access.REMOTE_WRITE });
      B.qp.modify({ qpState: QpState.RTR, pathMtu: q.pathMtu, destQpNum: A.qp.qpNum, rqPsn: q.rqPsn, maxDestRdAtomic: 0, minRnrTimer: 1, ahAttr: q.ahAttr! });
      B.qp.modify({ qpState: QpState.RTS, sqPsn: q.sqPsn, timeout: 12, retryCnt: 7, rnrRetry: 7, maxRdAtomic: 0 });
      for (let i = 0; i < 8; i++) B.qp.postRecv({ wrId: i, sgList: [vmr.sge(0, 64)] });
    };
    const sent: number[] = [];
    const send = async (ib: Uint8Array): Promise<void> => {
      if (ib.length >= 16) setIcrc(ib, net.icrc(ib, 0));
      await new Promise<void>((r) => sock.send(ib, 4791, '127.0.0.12', () => r()));
    };
    for (let i = 0; i < 3000; i++) {
      const kind = i % 4;
      let ib: Uint8Array;
      if (kind === 0) {
        ib = prngBytes(rnd, 16 + Math.floor(rnd() * 300)); // anything at all
        ib[5] = 0; ib[6] = 0; ib[7] = B.qp.qpNum; // …for the victim QP
      } else {
        const op = kind === 1 ? Math.floor(rnd() * 0x20) : kind === 2 ? 0x0a : 0x11;
        const info = opcodeInfo(op);
        const p: IbPacket = {
          // half of them carry the PSN the responder expects, so they are executed, not dropped
          bth: { opcode: op, se: rnd() < 0.5, migReq: false, padCount: 0, tver: 0, pkey: 0xffff, fecn: false, becn: false, resv6: 0, destQp: B.qp.qpNum, ackReq: rnd() < 0.5, resv7: 0, psn: rnd() < 0.5 ? B.qp.query().rqPsn : Math.floor(rnd() * 0x1000000) },
          payload: info.payload ? prngBytes(rnd, Math.floor(rnd() * 5000)) : new Uint8Array(0), padCount: 0, icrc: 0,
          reth: { va: vmr.addr + BigInt(Math.floor(rnd() * 8192) - 4096), rkey: rnd() < 0.5 ? vmr.rkey : gmr.rkey, dmaLen: Math.floor(rnd() * 2 ** 32) },
          aeth: { syndrome: Math.floor(rnd() * 256), msn: 0, kind: 'ACK', code: 0 }, immDt: 1,
        };
        ib = encodeIbPacket(p);
        if (rnd() < 0.2) ib = ib.subarray(0, Math.max(16, Math.floor(rnd() * ib.length))).slice();
      }
      sent.push(ib.length);
      await send(ib);
      await new Promise((r) => setImmediate(r)); // let the engine handle it
      if (B.qp.state === QpState.ERR) { revived++; revive(); }
    }
    t.log(`victim QP brought back from ERR ${revived} times`);
    t.true(revived > 10, 'the crafted packets did reach the error paths');
    await new Promise((r) => setTimeout(r, 200));
    t.true(guard.every((x) => x === 0x33), 'an MR without remote write access was never written');
    const st = b.stats();
    t.log(`B engine after 3000 crafted packets: ${JSON.stringify(st.engine)}; victim QP state ${B.qp.state}, stats ${JSON.stringify(st.qps[B.qp.qpNum])}`);
    t.true(st.engine.rxPackets >= 3000);
    t.true([QpState.RTS, QpState.ERR].includes(B.qp.state as 3 | 6));
    // the engine still works: a new connection between the same devices transfers data
    const p2 = connectPair(a, b);
    const r = await transfer(p2.A, p2.B, 'write', 200_000, 5);
    t.is(r.sendWc.status, 0);
    await transfer(p2.A, p2.B, 'send', 5000, 6);
    A.qp.destroy(); B.qp.destroy(); p2.A.qp.destroy(); p2.B.qp.destroy();
  } finally {
    sock.close();
    await a.close();
    await b.close();
  }
});
