// Verbs conformance, part 1: objects, state machine, and data transfer of every size class
// over every path MTU — through the verbs interface only, so any provider can run it
// (conformance.test.ts: uroce on loopback under ava; test/native/lab-conformance.ts: ibverbs
// over rxe in a lab guest).
import {
  Access, QpState, SendFlags, WrOpcode, WcStatus, WcOpcode, VerbsError, Mtu, PortState, AsyncEventType,
  gidToIpv4, mtuBytes, wcStatusStr, type Mtu as MtuT, type AsyncEvent, type SendWr,
} from '../../endpoint/verbs/types.js';
import { connectPair, srcGid, collect, pattern, sha256, type Case, type Devices, type SuiteProvider } from './common.js';
import { transfer, type Op } from './transfer.js';

export function conformanceCases(P: SuiteProvider, env: Devices): Case[] {
  const cases: Case[] = [];
  cases.push({ serial: true, title: `device, port and GID table`, run: (t) => {
    const { a } = env;
    const d = a.queryDevice();
    t.is(d.physPortCnt, 1);
    t.true(d.maxQpWr >= 1024 && d.maxSge >= 4 && d.maxCqe >= 4096);
    const port = a.queryPort(1);
    t.is(port.state, PortState.ACTIVE);
    t.is(port.linkLayer, 'Ethernet');
    t.true(port.activeMtu >= Mtu.MTU_1024 && port.activeMtu <= port.maxMtu);
    const gids = a.gidTable(1);
    t.true(gids.length >= 1);
    const v2 = gids.find((g) => g.type === 'RoCE v2' && gidToIpv4(g.gid) !== undefined)!;
    t.truthy(v2, 'an IPv4-mapped RoCE v2 GID');
    t.is(a.queryGid(1, v2.index), v2.gid);
    t.is(a.queryGidType(1, v2.index), 'RoCE v2');
    t.regex(v2.gid, P.gidPattern);
    t.throws(() => a.queryGid(1, Math.max(999, port.gidTblLen)), { instanceOf: VerbsError }, 'GID index beyond the table');
    t.throws(() => a.queryPort(2), { instanceOf: VerbsError });
  } });

  cases.push({ serial: true, title: `memory regions (keys, addresses, access rules)`, run: (t) => {
    const { a } = env;
    const pd = a.allocPd();
    const m1 = pd.regMr(new Uint8Array(5000), Access.LOCAL_WRITE | Access.REMOTE_WRITE);
    const m2 = pd.regMr(new Uint8Array(10), 0);
    t.not(m1.lkey, m2.lkey);
    t.not(m1.rkey, m2.rkey);
    t.is(m1.length, 5000);
    t.true(m2.addr >= m1.addr + 5000n || m1.addr >= m2.addr + 10n, 'MRs do not overlap in the address space');
    t.deepEqual(m1.sge(100, 50), { addr: m1.addr + 100n, length: 50, lkey: m1.lkey });
    t.throws(() => m1.sge(4990, 20), { instanceOf: RangeError });
    // IB: remote write access requires local write access
    t.throws(() => pd.regMr(new Uint8Array(8), Access.REMOTE_WRITE), { instanceOf: VerbsError, message: /LOCAL_WRITE/ });
    t.throws(() => pd.dealloc(), { instanceOf: VerbsError }, 'PD with MRs cannot be freed');
    m1.dereg(); m2.dereg();
    pd.dealloc();
  } });

  cases.push({ serial: true, title: `QP state machine RESET→INIT→RTR→RTS→ERR→RESET, attribute masks as libibverbs`, run: async (t) => {
    const { a, b } = env;
    const pd = a.allocPd();
    const cq = a.createCq(64);
    const qp = pd.createQp({ sendCq: cq, recvCq: cq, cap: { maxSendWr: 8, maxRecvWr: 8 } });
    t.is(qp.state, QpState.RESET);
    t.true(qp.qpNum > 0 && qp.qpNum < 1 << 24);
    const ah = { isGlobal: true, portNum: 1, grh: { dgid: srcGid(b).gid, sgidIndex: srcGid(a).index, hopLimit: 1, trafficClass: 0, flowLabel: 0 } };
    const rtr = { qpState: QpState.RTR, pathMtu: Mtu.MTU_1024, destQpNum: 0x123, rqPsn: 5, maxDestRdAtomic: 0, minRnrTimer: 12, ahAttr: ah };
    t.throws(() => qp.modify(rtr), { instanceOf: VerbsError, message: /RESET -> RTR/ }, 'RESET→RTR is illegal');
    t.throws(() => qp.postRecv({ wrId: 1, sgList: [] }), { instanceOf: VerbsError, code: 'EINVAL' }, 'post_recv in RESET');
    t.throws(() => qp.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: 1 }), { message: /missing IBV_QP_ACCESS_FLAGS/ });
    t.throws(() => qp.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: 1, qpAccessFlags: 0, timeout: 14 }), { message: /IBV_QP_TIMEOUT not allowed/ });
    qp.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: 1, qpAccessFlags: Access.REMOTE_WRITE });
    t.is(qp.state, QpState.INIT);
    qp.postRecv({ wrId: 77, sgList: [] }); // allowed from INIT on
    t.throws(() => qp.postSend({ wrId: 1, opcode: WrOpcode.SEND, sgList: [] }), { code: 'EINVAL', message: /INIT/ }, 'post_send before RTS');
    t.throws(() => qp.modify({ ...rtr, pathMtu: 7 as MtuT }), { instanceOf: VerbsError, message: /path_mtu/ });
    t.throws(() => qp.modify({ ...rtr, ahAttr: { isGlobal: false } }), { message: /global route/ }, 'RoCE needs a GRH');
    qp.modify(rtr);
    t.is(qp.state, QpState.RTR);
    t.throws(() => qp.modify({ qpState: QpState.RTS, sqPsn: 1, timeout: 14, retryCnt: 7, rnrRetry: 7 }), { message: /missing IBV_QP_MAX_QP_RD_ATOMIC/ });
    qp.modify({ qpState: QpState.RTS, sqPsn: 9, timeout: 14, retryCnt: 7, rnrRetry: 7, maxRdAtomic: 0 });
    const q = qp.query();
    t.is(q.qpState, QpState.RTS);
    t.is(q.destQpNum, 0x123);
    t.is(q.rqPsn, 5);
    t.is(q.sqPsn, 9);
    t.is(q.pathMtu, Mtu.MTU_1024);
    t.is(q.timeout, 14);
    t.is(q.minRnrTimer, 12);
    t.throws(() => qp.modify({ qpState: QpState.RTS, destQpNum: 5 }), { message: /IBV_QP_DEST_QPN not allowed/ }, 'RTS→RTS cannot change the peer');
    qp.modify({ qpState: QpState.RTS, minRnrTimer: 14 }); // allowed RTS→RTS attribute
    // to ERR: the posted receive is flushed, a later post completes as flushed too
    qp.modify({ qpState: QpState.ERR });
    t.is(qp.state, QpState.ERR);
    const flushed = await collect(cq, 1, 5000);
    t.is(flushed[0]!.wrId, 77);
    t.is(flushed[0]!.status, WcStatus.WR_FLUSH_ERR);
    t.is(wcStatusStr(flushed[0]!.status), 'Work Request Flushed Error');
    qp.postSend({ wrId: 78, opcode: WrOpcode.SEND, sgList: [] });
    const f2 = await collect(cq, 1, 5000);
    t.like(f2[0], { wrId: 78, status: WcStatus.WR_FLUSH_ERR });
    qp.modify({ qpState: QpState.RESET });
    qp.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: 1, qpAccessFlags: 0 });
    t.is(qp.state, QpState.INIT, 'a QP can be reused after RESET');
    t.throws(() => cq.destroy(), { code: 'EBUSY' });
    qp.destroy();
    cq.destroy();
  } });

  cases.push({ serial: true, title: `post_send / post_recv argument errors (EINVAL / ENOMEM, bad WR index)`, run: (t) => {
    const { a, b } = env;
    const { A } = connectPair(a, b, { maxSendWr: 4, maxRecvWr: 2, maxInlineData: 64 });
    const mr = A.pd.regMr(new Uint8Array(4096), Access.LOCAL_WRITE);
    const lim = A.qp.query().cap.maxInlineData;
    // the second WR is bad: an opcode the provider refuses, or (a provider that implements every
    // opcode) inline data beyond max_inline_data
    const badSecond: SendWr = P.refusedOpcode !== undefined
      ? { wrId: 2, opcode: P.refusedOpcode as WrOpcode, sgList: [mr.sge(0, 8)] }
      : { wrId: 2, opcode: WrOpcode.SEND, inlineData: new Uint8Array(lim + 1), sendFlags: SendFlags.INLINE };
    const e1 = t.throws<VerbsError>(() => A.qp.postSend([
      { wrId: 1, opcode: WrOpcode.SEND, sgList: [mr.sge(0, 8)] },
      badSecond,
    ]), { instanceOf: VerbsError, code: 'EINVAL' });
    t.is(e1?.badWr, 1, 'the first WR was posted, the second is the bad one');
    t.throws(() => A.qp.postSend({ wrId: 3, opcode: WrOpcode.SEND, inlineData: new Uint8Array(lim + 1), sendFlags: SendFlags.INLINE }), { code: 'EINVAL', message: /inline/ });
    t.throws(() => A.qp.postSend({ wrId: 3, opcode: WrOpcode.RDMA_WRITE, sgList: [mr.sge(0, 8)] }), { code: 'EINVAL', message: /rdma/ });
    t.throws(() => A.qp.postSend({ wrId: 3, opcode: WrOpcode.SEND, sgList: [mr.sge(0, 1), mr.sge(1, 1), mr.sge(2, 1), mr.sge(3, 1), mr.sge(4, 1)] }), { code: 'EINVAL', message: /SGE/ });
    // the receive queue holds what create_qp granted (2 asked; rxe rounds up to 2^n - 1)
    const rq = A.qp.query().cap.maxRecvWr;
    A.qp.postRecv(Array.from({ length: rq }, (_, i) => ({ wrId: 1 + i, sgList: [] })));
    const e2 = t.throws<VerbsError>(() => A.qp.postRecv({ wrId: rq + 1, sgList: [] }), { code: 'ENOMEM' });
    t.is(e2?.badWr, 0);
    A.qp.destroy();
  } });

  // ---- data transfer: every size class over every path MTU --------------------------

  const SIZES = [0, 1, 3, 255, 256, 257, 1000, 1023, 1024, 1025, 4095, 4096, 4097, 65536 + 3, (1 << 20) + 7];
  const OPS: Op[] = ['send', 'write', 'send_imm', 'write_imm'];
  for (const mtu of [Mtu.MTU_256, Mtu.MTU_512, Mtu.MTU_1024, Mtu.MTU_2048, Mtu.MTU_4096]) {
    cases.push({ serial: true, title: `SEND / RDMA WRITE (± immediate) of 0 B … 1 MiB at path MTU ${mtuBytes(mtu)}`, run: async (t) => {
    const { a, b } = env;
      const { A, B } = connectPair(a, b, { mtu });
      let seed = mtu * 1000;
      for (const size of SIZES) {
        for (const op of OPS) {
          if (op === 'write' && size === 0) continue; // covered below (no completion to wait on the responder)
          const r = await transfer(A, B, op, size, ++seed);
          t.is(r.sendWc.status, WcStatus.SUCCESS);
        }
      }
      // scatter/gather: 3 SGEs on both sides, sizes around the MTU boundaries
      for (const size of [mtuBytes(mtu) - 1, mtuBytes(mtu) * 2 + 1, 100_000]) {
        await transfer(A, B, 'send', size, ++seed, 3);
        await transfer(A, B, 'write', size, ++seed, 3);
      }
      t.pass();
      A.qp.destroy(); B.qp.destroy();
    } });
  }

  for (const [mtu, op] of [[Mtu.MTU_4096, 'write'], [Mtu.MTU_4096, 'send'], [Mtu.MTU_1024, 'write_imm'], [Mtu.MTU_256, 'write'], [Mtu.MTU_256, 'send']] as const) {
    cases.push({ serial: true, title: `16 MiB ${op} at path MTU ${mtuBytes(mtu)} (${(16 << 20) / mtuBytes(mtu)} packets), SHA-256 verified`, run: async (t) => {
    const { a, b } = env;
      const { A, B } = connectPair(a, b, { mtu });
      const r = await transfer(A, B, op, 16 << 20, 0x5eed + mtu);
      t.is(r.sendWc.status, WcStatus.SUCCESS);
      if (r.recvWc) t.is(r.recvWc.byteLen, 16 << 20);
      A.qp.destroy(); B.qp.destroy();
    } });
  }

  cases.push({ serial: true, title: `zero-length RDMA WRITE, inline SEND, unsignaled WRs, sq_sig_all`, run: async (t) => {
    const { a, b } = env;
    const { A, B } = connectPair(a, b, { maxInlineData: 128 });
    const dst = B.pd.regMr(new Uint8Array(64), Access.LOCAL_WRITE | Access.REMOTE_WRITE);
    const src = A.pd.regMr(pattern(64, 1), 0);
    // zero-length WRITE with a bogus rkey: IB does not validate the rkey of an empty WRITE
    A.qp.postSend({ wrId: 1, opcode: WrOpcode.RDMA_WRITE, sgList: [], rdma: { remoteAddr: 0n, rkey: 0xdead }, sendFlags: SendFlags.SIGNALED });
    t.like((await collect(A.cq, 1))[0], { wrId: 1, status: WcStatus.SUCCESS, opcode: WcOpcode.RDMA_WRITE });
    // inline: the buffer may change right after posting
    const inl = pattern(100, 9);
    B.qp.postRecv({ wrId: 5, sgList: [dst.sge(0, 64)] });
    const msg = inl.subarray(0, 50);
    A.qp.postSend({ wrId: 2, opcode: WrOpcode.SEND, inlineData: msg, sendFlags: SendFlags.SIGNALED | SendFlags.INLINE });
    const expect = sha256(msg.slice());
    msg.fill(0);
    t.like((await collect(A.cq, 1))[0], { wrId: 2, status: WcStatus.SUCCESS });
    t.like((await collect(B.cq, 1))[0], { wrId: 5, byteLen: 50 });
    t.is(sha256(dst.buffer.subarray(0, 50)), expect);
    // inline from an SGE (lkey not checked by INLINE semantics, data copied at post)
    B.qp.postRecv({ wrId: 6, sgList: [dst.sge(0, 64)] });
    A.qp.postSend({ wrId: 3, opcode: WrOpcode.SEND, sgList: [src.sge(0, 64)], sendFlags: SendFlags.SIGNALED | SendFlags.INLINE });
    await collect(A.cq, 1);
    t.like((await collect(B.cq, 1))[0], { wrId: 6, byteLen: 64 });
    // unsignaled: only the signaled one completes; everything before it is done by then
    for (let i = 0; i < 10; i++) B.qp.postRecv({ wrId: 100 + i, sgList: [dst.sge(0, 64)] });
    for (let i = 0; i < 10; i++) A.qp.postSend({ wrId: 10 + i, opcode: WrOpcode.SEND, sgList: [src.sge(0, 8)], sendFlags: i === 9 ? SendFlags.SIGNALED : 0 });
    const wcs = await collect(A.cq, 1);
    t.is(wcs[0]!.wrId, 19);
    t.is((await collect(B.cq, 10)).map((w) => w.wrId).join(','), Array.from({ length: 10 }, (_, i) => 100 + i).join(','));
    await new Promise((r) => setTimeout(r, 50));
    t.is(A.cq.pending, 0, 'no completion for unsignaled WRs');
    A.qp.destroy(); B.qp.destroy();
    // sq_sig_all: every WR completes
    const p2 = connectPair(a, b, { sqSigAll: true });
    for (let i = 0; i < 3; i++) p2.B.qp.postRecv({ wrId: i, sgList: [] });
    for (let i = 0; i < 3; i++) p2.A.qp.postSend({ wrId: i, opcode: WrOpcode.SEND, sgList: [] });
    t.deepEqual((await collect(p2.A.cq, 3)).map((w) => w.wrId), [0, 1, 2]);
    p2.A.qp.destroy(); p2.B.qp.destroy();
  } });

  cases.push({ serial: true, title: `completions are delivered asynchronously (events, promises, async iteration)`, run: async (t) => {
    const { a, b } = env;
    const { A, B } = connectPair(a, b);
    const buf = B.pd.regMr(new Uint8Array(16), Access.LOCAL_WRITE);
    // req_notify + 'completion' event, solicited-only: an unsolicited SEND does not fire it
    B.cq.reqNotify(true);
    let events = 0;
    B.cq.on('completion', () => { events++; });
    B.qp.postRecv([{ wrId: 1, sgList: [buf.sge()] }, { wrId: 2, sgList: [buf.sge()] }]);
    A.qp.postSend({ wrId: 1, opcode: WrOpcode.SEND, sgList: [] });
    await collect(B.cq, 1);
    if (P.exactSolicited) t.is(events, 0, 'unsolicited message does not trigger a solicited-only notification');
    else t.log(`${P.name}: a work completion does not say whether the message had SE, so the solicited-only notification fired for an unsolicited receive too (${events} event)`);
    A.qp.postSend({ wrId: 2, opcode: WrOpcode.SEND, sgList: [], sendFlags: SendFlags.SOLICITED });
    await collect(B.cq, 1);
    await new Promise((r) => setImmediate(r));
    t.is(events, 1, 'solicited message fires it once');
    // async iteration
    B.qp.postRecv([{ wrId: 3, sgList: [buf.sge()] }, { wrId: 4, sgList: [buf.sge()] }]);
    A.qp.postSend([{ wrId: 3, opcode: WrOpcode.SEND, sgList: [] }, { wrId: 4, opcode: WrOpcode.SEND, sgList: [] }]);
    const ids: unknown[] = [];
    for await (const wc of B.cq) { ids.push(wc.wrId); if (ids.length === 2) break; }
    t.deepEqual(ids, [3, 4]);
    // async events: COMM_EST was raised when B's QP got its first packet
    A.qp.destroy(); B.qp.destroy();
  } });

  cases.push({ serial: true, title: `PSNs wrap around 2^24`, run: async (t) => {
    const { a, b } = env;
    const { A, B } = connectPair(a, b, { psnA: 0xffffff - 3, psnB: 0xfffffe, mtu: Mtu.MTU_1024 });
    for (let i = 0; i < 3; i++) await transfer(A, B, i % 2 ? 'send' : 'write', 10 * 1024 + i, 77 + i);
    t.is(A.qp.query().sqPsn, (0xffffff - 3 + 10 + 11 + 11) & 0xffffff, '10, 11 and 11 packets'); // 10240, 10241, 10242 bytes
    t.is(B.qp.query().rqPsn, A.qp.query().sqPsn);
    A.qp.destroy(); B.qp.destroy();
  } });

  cases.push({ serial: true, title: `COMM_EST async event on the first packet`, run: async (t) => {
    const { a, b } = env;
    const evs: AsyncEvent[] = [];
    const on = (e: AsyncEvent): void => { evs.push(e); };
    b.on('async', on);
    const { A, B } = connectPair(a, b);
    await transfer(A, B, 'send', 10, 1);
    await new Promise((r) => setImmediate(r));
    b.off('async', on);
    t.true(evs.some((e) => e.type === AsyncEventType.COMM_EST && e.qp === B.qp));
    A.qp.destroy(); B.qp.destroy();
  } });
  return cases;
}
