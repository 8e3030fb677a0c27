// Verbs conformance, part 2: every error path ends in the completion status libibverbs
// reports for it (and in the QP states and async events that go with it). Provider-independent
// (errors.test.ts: uroce under ava; test/native/lab-conformance.ts: ibverbs over rxe).
import {
  Access, QpState, SendFlags, WrOpcode, WcStatus, AsyncEventType, wcStatusStr, wcStatusName,
  type Device, type AsyncEvent, type WorkCompletion,
} from '../../endpoint/verbs/types.js';
import { connectPair, collect, pattern, until, counterDelta, type Assert, type Case, type Devices, type Side, type SuiteProvider } from './common.js';

/** Collect a device's async events during fn(). */
async function withEvents<T>(dev: Device, fn: () => Promise<T>): Promise<{ r: T; evs: AsyncEvent[] }> {
  const evs: AsyncEvent[] = [];
  const on = (e: AsyncEvent): void => { evs.push(e); };
  dev.on('async', on);
  try {
    const r = await fn();
    await new Promise((res) => setTimeout(res, 10));
    return { r, evs };
  } finally { dev.off('async', on); }
}

function write(A: Side, wrId: number, src: Uint8Array, remoteAddr: bigint, rkey: number): void {
  const mr = A.pd.regMr(src, 0);
  A.qp.postSend({ wrId, opcode: WrOpcode.RDMA_WRITE, sgList: [mr.sge()], sendFlags: SendFlags.SIGNALED, rdma: { remoteAddr, rkey } });
}

export function errorCases(P: SuiteProvider, env: Devices): Case[] {
  const cases: Case[] = [];
  /** A provider without per-QP packet counters: deltas of its device counters from now on (rxe's
   *  hw_counters; both QPs of a pair are on one device and the cases run one at a time there). */
  const deviceCounters = (dev: Device): (() => Record<string, number>) | undefined => {
    if (P.qpPacketStats || !P.counters) return undefined;
    const before = P.counters(dev);
    return () => counterDelta(P.counters!(dev), before);
  };
  /** RNR NAKs sent by B's QP so far. */
  const rnrNaksSent = (dev: Device, B: Side): (() => number) => {
    const hw = deviceCounters(dev);
    return hw ? () => hw().send_rnr_err ?? 0 : () => B.qp.stats.rnrNaksSent;
  };

  /** RDMA WRITE that the responder must refuse: REM_ACCESS_ERR, both QPs end in ERR. */
  async function accessError(t: Assert, o: { rkey?: (r: number) => number; va?: (a: bigint) => bigint; len?: number; mrAccess?: number; qpAccess?: number }): Promise<void> {
    const { a, b } = env;
    const { A, B } = connectPair(a, b, { ...(o.qpAccess !== undefined ? { access: o.qpAccess } : {}) });
    const dst = B.pd.regMr(new Uint8Array(4096), o.mrAccess ?? (Access.LOCAL_WRITE | Access.REMOTE_WRITE));
    B.qp.postRecv({ wrId: 500, sgList: [dst.sge(0, 16)] });
    const { evs } = await withEvents(b, async () => {
      write(A, 1, pattern(o.len ?? 100, 1), (o.va ?? ((x) => x))(dst.addr), (o.rkey ?? ((x) => x))(dst.rkey));
      A.qp.postSend({ wrId: 2, opcode: WrOpcode.SEND, sgList: [], sendFlags: SendFlags.SIGNALED });
      const wcs = await collect(A.cq, 2, 10_000);
      t.like(wcs[0], { wrId: 1, status: WcStatus.REM_ACCESS_ERR });
      t.is(wcStatusStr(wcs[0]!.status), 'remote access error');
      t.like(wcs[1], { wrId: 2, status: WcStatus.WR_FLUSH_ERR }, 'the WR behind it is flushed');
      t.is(A.qp.state, QpState.ERR, 'requester QP in ERR');
      const r = await collect(B.cq, 1, 10_000);
      t.like(r[0], { wrId: 500, status: WcStatus.WR_FLUSH_ERR }, "responder's posted receive is flushed");
      t.is(B.qp.state, QpState.ERR, 'responder QP in ERR');
    });
    const ev = evs.find((e) => e.type === AsyncEventType.QP_ACCESS_ERR && e.qp === B.qp);
    t.truthy(ev, 'IBV_EVENT_QP_ACCESS_ERR on the responder');
    // a provider that says why (uroce) names the VA it read from the RETH: the VA sent, byte for byte
    if (o.va && ev?.reason?.startsWith('va ')) t.true(ev.reason.startsWith(`va 0x${o.va(dst.addr).toString(16)}+`), ev.reason);
    t.is(dst.buffer.every((x) => x === 0), true, 'nothing was written');
    A.qp.destroy(); B.qp.destroy();
  }

  cases.push({ serial: false, title: `RDMA WRITE with a bad rkey → IBV_WC_REM_ACCESS_ERR`, run: (t) => accessError(t, { rkey: (r) => (r ^ 0x5a5a00) >>> 0 }) });
  cases.push({ serial: false, title: `RDMA WRITE past the end of the MR → IBV_WC_REM_ACCESS_ERR`, run: (t) => accessError(t, { va: (x) => x + 4000n, len: 200 }) });
  cases.push({ serial: false, title: `RDMA WRITE before the start of the MR → IBV_WC_REM_ACCESS_ERR`, run: (t) => accessError(t, { va: (x) => x - 1n }) });
  // a VA no number holds exactly (uroce writes and reads RETH VAs as numbers below 2^53, bigints above)
  cases.push({ serial: false, title: `RDMA WRITE to a VA above 2^53 → IBV_WC_REM_ACCESS_ERR`, run: (t) => accessError(t, { va: (x) => x + (1n << 60n) + 0x123n }) });
  cases.push({ serial: false, title: `RDMA WRITE to an MR without remote write access → IBV_WC_REM_ACCESS_ERR`, run: (t) => accessError(t, { mrAccess: Access.LOCAL_WRITE }) });
  cases.push({ serial: false, title: `RDMA WRITE to a QP without remote write access → IBV_WC_REM_ACCESS_ERR`, run: (t) => accessError(t, { qpAccess: Access.LOCAL_WRITE }) });

  cases.push({ serial: false, title: `SEND without a posted receive, rnr_retry 2 → IBV_WC_RNR_RETRY_EXC_ERR after 3 RNR NAKs`, run: async (t) => {
    const { a, b } = env;
    // local ACK timeout 268 ms: no retransmission timer gets between the RNR NAKs (1 ms apart)
    const { A, B } = connectPair(a, b, { rnrRetry: 2, minRnrTimer: 1, timeout: 16 });
    const hw = deviceCounters(a);
    A.qp.postSend({ wrId: 9, opcode: WrOpcode.SEND, sgList: [], sendFlags: SendFlags.SIGNALED });
    const [wc] = await collect(A.cq, 1, 10_000);
    t.like(wc, { wrId: 9, status: WcStatus.RNR_RETRY_EXC_ERR });
    t.is(wcStatusStr(wc!.status), 'RNR retry counter exceeded');
    if (P.qpPacketStats) {
      t.is(B.qp.stats.rnrNaksSent, 3, 'the first try plus rnr_retry retries, each RNR NAKed');
      t.is(A.qp.stats.rnrNaksReceived, 3);
    } else if (hw) {
      const d = hw();
      t.is(d.send_rnr_err, 3, 'the first try plus rnr_retry retries, each RNR NAKed (device counter send_rnr_err)');
      t.is(d.rcvd_rnr_err, 3, 'device counter rcvd_rnr_err');
      t.is(d.retry_rnr_exceeded_err, 1, 'device counter retry_rnr_exceeded_err');
    }
    t.is(A.qp.state, QpState.ERR);
    t.is(B.qp.state, QpState.RTS, 'RNR is not an error for the responder');
    A.qp.destroy(); B.qp.destroy();
  } });

  cases.push({ serial: false, title: `RNR NAK then recovery when the receive is posted (rnr_retry 7 = forever)`, run: async (t) => {
    const { a, b } = env;
    const { A, B } = connectPair(a, b, { rnrRetry: 7, minRnrTimer: 1 });
    const rnrSent = rnrNaksSent(a, B);
    const buf = B.pd.regMr(new Uint8Array(3000), Access.LOCAL_WRITE);
    const src = A.pd.regMr(pattern(3000, 5), 0);
    A.qp.postSend({ wrId: 1, opcode: WrOpcode.SEND, sgList: [src.sge()], sendFlags: SendFlags.SIGNALED });
    t.true(await until(() => rnrSent() >= 2), 'RNR NAKed (and retried) while no receive was posted');
    B.qp.postRecv({ wrId: 2, sgList: [buf.sge()] });
    t.like((await collect(A.cq, 1, 10_000))[0], { wrId: 1, status: WcStatus.SUCCESS });
    t.like((await collect(B.cq, 1, 10_000))[0], { wrId: 2, status: WcStatus.SUCCESS, byteLen: 3000 });
    t.deepEqual(buf.buffer, src.buffer);
    A.qp.destroy(); B.qp.destroy();
  } });

  cases.push({ serial: false, title: `RDMA WRITE with immediate without a posted receive → RNR, then success`, run: async (t) => {
    const { a, b } = env;
    const { A, B } = connectPair(a, b, { rnrRetry: 7, minRnrTimer: 1 });
    const rnrSent = rnrNaksSent(a, B);
    const dst = B.pd.regMr(new Uint8Array(10_000), Access.LOCAL_WRITE | Access.REMOTE_WRITE);
    const src = A.pd.regMr(pattern(10_000, 6), 0);
    A.qp.postSend({ wrId: 1, opcode: WrOpcode.RDMA_WRITE_WITH_IMM, immData: 42, sgList: [src.sge()], sendFlags: SendFlags.SIGNALED, rdma: { remoteAddr: dst.addr, rkey: dst.rkey } });
    t.true(await until(() => rnrSent() >= 2), 'RNR NAKed at the last packet');
    B.qp.postRecv({ wrId: 2, sgList: [] });
    t.like((await collect(A.cq, 1, 10_000))[0], { status: WcStatus.SUCCESS });
    t.like((await collect(B.cq, 1, 10_000))[0], { wrId: 2, immData: 42, byteLen: 10_000 });
    t.deepEqual(dst.buffer, src.buffer);
    A.qp.destroy(); B.qp.destroy();
  } });

  cases.push({ serial: false, title: `peer QP gone, retry_cnt 2 → IBV_WC_RETRY_EXC_ERR after 3 timeouts`, run: async (t) => {
    const { a, b } = env;
    const { A, B } = connectPair(a, b, { retryCnt: 2, timeout: 8 }); // 1 ms local ACK timeout
    B.qp.destroy(); // packets for its QPN are dropped by the peer from now on
    const hw = deviceCounters(a);
    A.qp.postSend([{ wrId: 1, opcode: WrOpcode.SEND, sgList: [], sendFlags: SendFlags.SIGNALED }, { wrId: 2, opcode: WrOpcode.SEND, sgList: [] }]);
    // (two one-packet WRs: each retry resends both, go-back-N)
    const wcs = await collect(A.cq, 2, 10_000);
    t.like(wcs[0], { wrId: 1, status: WcStatus.RETRY_EXC_ERR });
    t.is(wcStatusStr(wcs[0]!.status), 'transport retry counter exceeded');
    t.like(wcs[1], { wrId: 2, status: WcStatus.WR_FLUSH_ERR }, 'unsignaled WRs complete too when flushed');
    if (P.qpPacketStats) {
      t.is(A.qp.stats.timeouts, 3, 'first try + retry_cnt retries');
      t.is(A.qp.stats.retransmits, 2 * 2);
    } else if (hw) {
      const d = hw();
      t.is((d.completer_retry_err ?? 0) + (d.retry_exceeded_err ?? 0), 3, 'first try + retry_cnt retries (device counters completer_retry_err + retry_exceeded_err)');
      t.is(d.sent_pkts, 2 + 2 * 2, 'two packets, sent again on each of the 2 retries (device counter sent_pkts)');
    }
    t.is(A.qp.state, QpState.ERR);
    A.qp.destroy();
  } });

  cases.push({ serial: false, title: `SEND larger than the receive buffer → IBV_WC_REM_INV_REQ_ERR / IBV_WC_LOC_LEN_ERR`, run: async (t) => {
    const { a, b } = env;
    const { A, B } = connectPair(a, b);
    const buf = B.pd.regMr(new Uint8Array(100), Access.LOCAL_WRITE);
    B.qp.postRecv([{ wrId: 1, sgList: [buf.sge()] }, { wrId: 2, sgList: [buf.sge()] }]);
    const src = A.pd.regMr(pattern(5000, 1), 0);
    A.qp.postSend({ wrId: 7, opcode: WrOpcode.SEND, sgList: [src.sge()], sendFlags: SendFlags.SIGNALED });
    t.like((await collect(A.cq, 1, 10_000))[0], { wrId: 7, status: WcStatus.REM_INV_REQ_ERR });
    const r = await collect(B.cq, 2, 10_000);
    t.like(r[0], { wrId: 1, status: WcStatus.LOC_LEN_ERR });
    t.is(wcStatusStr(r[0]!.status), 'local length error');
    t.like(r[1], { wrId: 2, status: WcStatus.WR_FLUSH_ERR });
    A.qp.destroy(); B.qp.destroy();
  } });

  cases.push({ serial: false, title: `bad lkey in a send SGE → IBV_WC_LOC_PROT_ERR, QP to ERR`, run: async (t) => {
    const { a, b } = env;
    const { A, B } = connectPair(a, b);
    B.qp.postRecv({ wrId: 1, sgList: [] });
    const src = A.pd.regMr(pattern(64, 1), 0);
    A.qp.postSend([
      { wrId: 1, opcode: WrOpcode.SEND, sgList: [], sendFlags: SendFlags.SIGNALED },
      { wrId: 2, opcode: WrOpcode.SEND, sgList: [{ addr: src.addr, length: 64, lkey: (src.lkey ^ 0x100) >>> 0 }], sendFlags: SendFlags.SIGNALED },
      { wrId: 3, opcode: WrOpcode.SEND, sgList: [], sendFlags: SendFlags.SIGNALED },
    ]);
    const wcs = await collect(A.cq, 3, 10_000);
    t.deepEqual(wcs.map((w) => [w.wrId, wcStatusName(w.status)]), [[1, 'IBV_WC_SUCCESS'], [2, 'IBV_WC_LOC_PROT_ERR'], [3, 'IBV_WC_WR_FLUSH_ERR']]);
    t.is(A.qp.state, QpState.ERR);
    A.qp.destroy(); B.qp.destroy();
  } });

  cases.push({ serial: false, title: `receive WR with a bad lkey → IBV_WC_LOC_PROT_ERR there, IBV_WC_REM_OP_ERR at the sender`, run: async (t) => {
    const { a, b } = env;
    const { A, B } = connectPair(a, b);
    const m = B.pd.regMr(new Uint8Array(64), Access.LOCAL_WRITE);
    B.qp.postRecv({ wrId: 1, sgList: [{ addr: m.addr, length: 64, lkey: (m.lkey + 0x100) >>> 0 }] });
    A.qp.postSend({ wrId: 5, opcode: WrOpcode.SEND, sgList: [], sendFlags: SendFlags.SIGNALED });
    t.like((await collect(A.cq, 1, 10_000))[0], { wrId: 5, status: WcStatus.REM_OP_ERR });
    t.like((await collect(B.cq, 1, 10_000))[0], { wrId: 1, status: WcStatus.LOC_PROT_ERR });
    A.qp.destroy(); B.qp.destroy();
  } });

  cases.push({ serial: false, title: `a CQ overrun moves its QPs to ERR and raises IBV_EVENT_CQ_ERR`, run: async (t) => {
    const { a, b } = env;
    const { A, B } = connectPair(a, b, { cqe: 4, cqeB: 64 });
    const { evs } = await withEvents(a, async () => {
      for (let i = 0; i < 6; i++) B.qp.postRecv({ wrId: i, sgList: [] });
      for (let i = 0; i < 6; i++) A.qp.postSend({ wrId: i, opcode: WrOpcode.SEND, sgList: [], sendFlags: SendFlags.SIGNALED });
      await until(() => A.qp.state === QpState.ERR);
    });
    t.true(evs.some((e) => e.type === AsyncEventType.CQ_ERR), 'IBV_EVENT_CQ_ERR');
    t.is(A.qp.state, QpState.ERR);
    t.is(A.cq.pending, 4);
    A.qp.destroy(); B.qp.destroy();
  } });

  cases.push({ serial: false, title: `every status has libibverbs' text`, run: (t) => {
    const expect: Record<number, string> = {
      0: 'success', 1: 'local length error', 4: 'local protection error', 5: 'Work Request Flushed Error',
      9: 'remote invalid request error', 10: 'remote access error', 11: 'remote operation error',
      12: 'transport retry counter exceeded', 13: 'RNR retry counter exceeded',
    };
    for (const [k, v] of Object.entries(expect)) t.is(wcStatusStr(Number(k)), v);
    const wc: Partial<WorkCompletion> = { status: WcStatus.REM_ACCESS_ERR };
    t.is(wcStatusName(wc.status!), 'IBV_WC_REM_ACCESS_ERR');
  } });
  return cases;
}
