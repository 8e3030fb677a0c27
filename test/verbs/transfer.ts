// Data-transfer helpers of the conformance suite (verbs interface only).
import {
  Access, SendFlags, WrOpcode, WcStatus, WcOpcode, WcFlags, wcStatusName,
  type WorkCompletion,
} from '../../endpoint/verbs/types.js';
import { collect, pattern, sha256, type Side } from './common.js';

export type Op = 'send' | 'send_imm' | 'write' | 'write_imm';

export interface TransferResult { sendWc: WorkCompletion; recvWc?: WorkCompletion }

const GUARD = 16;

/**
 * Move `size` bytes from A to B with one work request and check everything a consumer can see:
 * the completion(s), the bytes (SHA-256), and that nothing was written outside the target.
 * `sges` > 1 splits the source into that many SGEs (gather) and, for SENDs, the receive
 * buffer too (scatter).
 */
export async function transfer(A: Side, B: Side, op: Op, size: number, seed: number, sges = 1): Promise<TransferResult> {
  const src = pattern(size, seed);
  // a zero-length message still comes from an MR, but not from a zero-length one: the kernel's
  // verbs refuse to register 0 bytes (ib_umem_get: EINVAL), so it is a 0-byte SGE of a 1-byte MR
  const smr = A.pd.regMr(size === 0 ? new Uint8Array(1) : src, 0);
  const dst = new Uint8Array(size + 2 * GUARD).fill(0xee);
  const dmr = B.pd.regMr(dst, Access.LOCAL_WRITE | (op.startsWith('write') ? Access.REMOTE_WRITE : 0));
  const split = (n: number, k: number): [number, number][] => {
    const parts: [number, number][] = [];
    const step = Math.max(1, Math.ceil(n / k));
    for (let o = 0; o < n; o += step) parts.push([o, Math.min(step, n - o)]);
    return parts.length ? parts : [[0, 0]];
  };
  const imm = (seed * 0x9e3779b1) >>> 0;
  try {
    if (op === 'send' || op === 'send_imm' || op === 'write_imm') {
      const sgl = op === 'write_imm' ? [] : split(size + GUARD, sges).map(([o, n]) => dmr.sge(GUARD + o, n));
      B.qp.postRecv({ wrId: BigInt(seed), sgList: sgl });
    }
    const opcode = op === 'send' ? WrOpcode.SEND : op === 'send_imm' ? WrOpcode.SEND_WITH_IMM : op === 'write' ? WrOpcode.RDMA_WRITE : WrOpcode.RDMA_WRITE_WITH_IMM;
    A.qp.postSend({
      wrId: seed, opcode, sgList: split(size, sges).map(([o, n]) => smr.sge(o, n)), sendFlags: SendFlags.SIGNALED,
      ...(op.endsWith('imm') ? { immData: imm } : {}),
      ...(op.startsWith('write') ? { rdma: { remoteAddr: dmr.addr + BigInt(GUARD), rkey: dmr.rkey } } : {}),
    });
    const [sendWc] = await collect(A.cq, 1);
    if (sendWc!.status !== WcStatus.SUCCESS) throw new Error(`${op} ${size}: send completion ${wcStatusName(sendWc!.status)}`);
    if (sendWc!.opcode !== (op.startsWith('write') ? WcOpcode.RDMA_WRITE : WcOpcode.SEND)) throw new Error(`${op}: send WC opcode ${sendWc!.opcode}`);
    if (sendWc!.wrId !== seed) throw new Error(`${op}: wrId ${sendWc!.wrId} != ${seed}`);
    let recvWc: WorkCompletion | undefined;
    if (op !== 'write') {
      [recvWc] = await collect(B.cq, 1);
      const r = recvWc!;
      if (r.status !== WcStatus.SUCCESS) throw new Error(`${op} ${size}: receive completion ${wcStatusName(r.status)}`);
      if (r.wrId !== BigInt(seed)) throw new Error(`${op}: recv wrId ${r.wrId}`);
      if (r.byteLen !== size) throw new Error(`${op}: byteLen ${r.byteLen} != ${size}`);
      if (r.opcode !== (op === 'write_imm' ? WcOpcode.RECV_RDMA_WITH_IMM : WcOpcode.RECV)) throw new Error(`${op}: recv WC opcode ${r.opcode}`);
      if (op.endsWith('imm') && (!(r.wcFlags & WcFlags.WITH_IMM) || r.immData !== imm)) throw new Error(`${op}: immediate ${r.immData} != ${imm}`);
      if (!op.endsWith('imm') && (r.wcFlags & WcFlags.WITH_IMM)) throw new Error(`${op}: WITH_IMM flag on a plain SEND`);
      if (r.srcQp !== A.qp.qpNum) throw new Error(`${op}: srcQp ${r.srcQp} != ${A.qp.qpNum}`);
    } else {
      // RDMA WRITE completes at the requester once ACKed; the data is already placed then.
      if (B.cq.pending !== 0) throw new Error('RDMA WRITE produced a completion at the responder');
    }
    const got = dst.subarray(GUARD, GUARD + size);
    if (sha256(got) !== sha256(src)) throw new Error(`${op} ${size}: data differs (sha256)`);
    for (let i = 0; i < GUARD; i++) {
      if (dst[i] !== 0xee || dst[GUARD + size + i] !== 0xee) throw new Error(`${op} ${size}: bytes outside the target were written`);
    }
    return { sendWc: sendWc!, ...(recvWc ? { recvWc } : {}) };
  } finally {
    smr.dereg();
    dmr.dereg();
  }
}

/**
 * Many transfers at once (pipelined): `n` messages of mixed size, all verified. Used by the
 * fault-injection tests so that loss, reordering and duplication hit a busy QP.
 */
export async function stream(A: Side, B: Side, opts: { writeBytes: number; sends: number[]; seed: number }): Promise<void> {
  const { writeBytes, sends, seed } = opts;
  const wsrc = pattern(writeBytes, seed);
  const wdst = new Uint8Array(writeBytes);
  const wsmr = A.pd.regMr(wsrc, 0);
  const wdmr = B.pd.regMr(wdst, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
  const total = sends.reduce((a, b) => a + b, 0);
  const ssrc = pattern(total, seed + 1);
  const sdst = new Uint8Array(total);
  const ssmr = A.pd.regMr(ssrc, 0);
  const sdmr = B.pd.regMr(sdst, Access.LOCAL_WRITE);
  try {
    // receives for every SEND, in order, each exactly its message's slot
    let off = 0;
    sends.forEach((n, i) => { B.qp.postRecv({ wrId: i, sgList: [sdmr.sge(off, n)] }); off += n; });
    // the RDMA WRITE in 256 KiB pieces interleaved with the SENDs
    const piece = 256 * 1024;
    let wo = 0, si = 0, so = 0, wr = 0;
    while (wo < writeBytes || si < sends.length) {
      if (wo < writeBytes) {
        const n = Math.min(piece, writeBytes - wo);
        A.qp.postSend({ wrId: 1e6 + wr++, opcode: WrOpcode.RDMA_WRITE, sgList: [wsmr.sge(wo, n)], rdma: { remoteAddr: wdmr.addr + BigInt(wo), rkey: wdmr.rkey } });
        wo += n;
      }
      if (si < sends.length) {
        const n = sends[si]!;
        A.qp.postSend({ wrId: si, opcode: WrOpcode.SEND, sgList: [ssmr.sge(so, n)] });
        so += n;
        si++;
      }
    }
    // the only signaled WR, at the end: a zero-length SEND (completes after everything before it)
    B.qp.postRecv({ wrId: -1, sgList: [] });
    A.qp.postSend({ wrId: -1, opcode: WrOpcode.SEND, sgList: [], sendFlags: SendFlags.SIGNALED });
    const wcs = await collect(A.cq, 1, 120_000);
    if (wcs[0]!.wrId !== -1) throw new Error(`stream: unexpected send completion for wrId ${wcs[0]!.wrId}`);
    for (const wc of wcs) if (wc.status !== WcStatus.SUCCESS) throw new Error(`stream: send completion ${wcStatusName(wc.status)}`);
    const rwcs = await collect(B.cq, sends.length + 1, 120_000);
    rwcs.forEach((wc, i) => {
      if (wc.status !== WcStatus.SUCCESS) throw new Error(`stream: receive ${i} ${wcStatusName(wc.status)}`);
      if (i < sends.length && (wc.wrId !== i || wc.byteLen !== sends[i])) throw new Error(`stream: receive ${i} out of order or wrong length (wrId ${wc.wrId}, ${wc.byteLen} bytes)`);
    });
    if (sha256(wdst) !== sha256(wsrc)) throw new Error('stream: RDMA WRITE data differs');
    if (sha256(sdst) !== sha256(ssrc)) throw new Error('stream: SEND data differs');
  } finally {
    for (const m of [wsmr, wdmr, ssmr, sdmr]) m.dereg();
  }
}
