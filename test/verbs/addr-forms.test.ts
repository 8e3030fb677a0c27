// Work-request addresses in both forms (endpoint/verbs/types.ts `VerbsAddr`, docs/uroce.md round
// 18): a bigint, or a number where that is exact (a non-negative safe integer). uroce takes both
// on a real pair of devices on loopback, bigints above 2^53 included (MRs registered at such an
// iova), and refuses a number that is no address; the ibverbs provider's boundary turns numbers
// into the bigints its addon reads (the conversion is JavaScript: it runs without RDMA).
import test from 'ava';
import { Access, SendFlags, WcStatus, WrOpcode, addrBig, addrPlus, exactAddr, type Device } from '../../endpoint/verbs/index.js';
import { openUroce } from '../../endpoint/verbs/uroce/index.js';
import { nativeRecvWr, nativeSendWr } from '../../endpoint/verbs/ibverbs/index.js';
import { collect, connectPair, pattern } from './common.js';

const MAX = Number.MAX_SAFE_INTEGER;
const BIG = 1n << 60n;

test('exactAddr, addrPlus, addrBig: a number only where exact, a bigint beyond', (t) => {
  t.is(exactAddr(0x1000n), 0x1000);
  t.is(exactAddr(BigInt(MAX)), MAX);
  t.is(exactAddr(BigInt(MAX) + 1n), -1);
  t.is(exactAddr(-1n), -1);
  t.is(exactAddr(4096), 4096);
  for (const bad of [-1, 1.5, MAX + 1, 2 ** 60, NaN, Infinity]) t.is(exactAddr(bad), -1, String(bad));
  // below 2^53: numbers, the same value as the bigint sum
  t.is(addrPlus(0x7f0000001000n, exactAddr(0x7f0000001000n), 64), 0x7f0000001040);
  // a sum that crosses 2^53 and a base beyond it: bigints, exact
  const near = BigInt(MAX) - 10n;
  t.is(addrPlus(near, exactAddr(near), 10), MAX);
  t.is(addrPlus(near, exactAddr(near), 11), BigInt(MAX) + 1n);
  t.is(addrPlus(near, exactAddr(near), 0xffffffff), near + 0xffffffffn);
  t.is(addrPlus(BIG + 3n, exactAddr(BIG + 3n), 5), BIG + 8n);
  t.is(addrBig(12), 12n);
  t.is(addrBig(BIG), BIG);
  t.is(addrBig(1.5), undefined);
  t.is(addrBig(MAX + 1), undefined);
});

async function pair(t: { teardown(fn: () => Promise<void>): void }, x: number): Promise<{ a: Device; b: Device }> {
  const a = await openUroce({ address: `127.0.0.${x}` });
  const b = await openUroce({ address: `127.0.0.${x + 1}` });
  t.teardown(async () => { await a.close(); await b.close(); });
  return { a, b };
}

test('uroce: SEND and RDMA WRITE with number addresses and with bigints above 2^53', async (t) => {
  const { a, b } = await pair(t, 181);
  const { A, B } = connectPair(a, b);
  for (const iova of [undefined, BIG, BIG + 0x1234000n]) {
    const src = A.pd.regMr(pattern(3000, 7), 0, iova === undefined ? {} : { iova });
    const dst = B.pd.regMr(new Uint8Array(4096), Access.LOCAL_WRITE | Access.REMOTE_WRITE, iova === undefined ? {} : { iova: iova + 0x100000n });
    const rcv = B.pd.regMr(new Uint8Array(512), Access.LOCAL_WRITE);
    const srcNum = exactAddr(src.addr), dstNum = exactAddr(dst.addr), rcvNum = exactAddr(rcv.addr);
    t.is(srcNum >= 0, iova === undefined, 'uroce MRs below 2^53 unless placed above');
    // the form a caller would use: a number where exact, else the bigint (addrPlus)
    const at = (base: bigint, num: number, off: number): bigint | number => addrPlus(base, num, off);
    B.qp.postRecv({ wrId: 10, sgList: [{ addr: at(rcv.addr, rcvNum, 100), length: 300, lkey: rcv.lkey }] });
    A.qp.postSend([
      { wrId: 1, opcode: WrOpcode.RDMA_WRITE, sgList: [{ addr: at(src.addr, srcNum, 5), length: 2000, lkey: src.lkey }], rdma: { remoteAddr: at(dst.addr, dstNum, 1001), rkey: dst.rkey } },
      { wrId: 2, opcode: WrOpcode.SEND, sgList: [{ addr: at(src.addr, srcNum, 2500), length: 200, lkey: src.lkey }], sendFlags: SendFlags.SIGNALED },
    ]);
    t.like((await collect(A.cq, 1, 10_000))[0], { wrId: 2, status: WcStatus.SUCCESS });
    t.like((await collect(B.cq, 1, 10_000))[0], { wrId: 10, status: WcStatus.SUCCESS, byteLen: 200 });
    t.deepEqual(dst.buffer.subarray(1001, 3001), src.buffer.subarray(5, 2005), `WRITE bytes (iova ${iova})`);
    t.true(dst.buffer.subarray(0, 1001).every((v) => v === 0) && dst.buffer.subarray(3001).every((v) => v === 0), 'nothing around them');
    t.deepEqual(rcv.buffer.subarray(100, 300), src.buffer.subarray(2500, 2700), `SEND bytes (iova ${iova})`);
  }
  A.qp.destroy(); B.qp.destroy();
});

test('uroce: a number that is no address — EINVAL for a remote address, LOC_PROT_ERR for an SGE', async (t) => {
  const { a, b } = await pair(t, 183);
  const { A, B } = connectPair(a, b);
  const src = A.pd.regMr(pattern(64, 3), 0);
  for (const bad of [1.5, -4096, MAX + 1, 2 ** 60]) {
    const e = t.throws(() => A.qp.postSend({ wrId: 1, opcode: WrOpcode.RDMA_WRITE, sgList: [src.sge()], rdma: { remoteAddr: bad, rkey: 1 } }));
    t.regex(e!.message, /rdma\.remoteAddr .* is not an address/, String(bad));
  }
  A.qp.postSend({ wrId: 3, opcode: WrOpcode.SEND, sgList: [{ addr: exactAddr(src.addr) + 0.5, length: 8, lkey: src.lkey }], sendFlags: SendFlags.SIGNALED });
  t.like((await collect(A.cq, 1, 10_000))[0], { wrId: 3, status: WcStatus.LOC_PROT_ERR });
  A.qp.destroy(); B.qp.destroy();
});

test('ibverbs boundary: numbers become the bigints the addon reads; a number that is no address is refused', (t) => {
  const w = nativeSendWr({ wrId: 1, opcode: WrOpcode.RDMA_WRITE, sgList: [{ addr: 0x7f0000001040, length: 64, lkey: 5 }], rdma: { remoteAddr: MAX, rkey: 7 } });
  t.like(w, { sgList: [{ addr: 0x7f0000001040n, length: 64, lkey: 5 }], rdma: { remoteAddr: BigInt(MAX), rkey: 7 } });
  t.is(typeof (w.sgList as Array<{ addr: unknown }>)[0]!.addr, 'bigint');
  t.like(nativeSendWr({ wrId: 1, opcode: WrOpcode.RDMA_WRITE, sgList: [{ addr: BIG, length: 1, lkey: 5 }], rdma: { remoteAddr: BIG + 1n, rkey: 7 } }),
    { sgList: [{ addr: BIG }], rdma: { remoteAddr: BIG + 1n } }, 'bigints above 2^53 as they were');
  t.like(nativeRecvWr({ wrId: 2, sgList: [{ addr: 4096, length: 8, lkey: 1 }] }), { sgList: [{ addr: 4096n }] });
  for (const bad of [1.5, -1, MAX + 1]) {
    t.throws(() => nativeSendWr({ wrId: 1, opcode: WrOpcode.RDMA_WRITE, sgList: [], rdma: { remoteAddr: bad, rkey: 7 } }), { instanceOf: TypeError, message: /remoteAddr/ });
    t.throws(() => nativeSendWr({ wrId: 1, opcode: WrOpcode.SEND, sgList: [{ addr: bad, length: 1, lkey: 1 }] }), { instanceOf: TypeError, message: /addr must be/ });
  }
  t.throws(() => nativeSendWr({ wrId: 1, opcode: WrOpcode.SEND, sgList: [{ addr: -1n, length: 1, lkey: 1 }] }), { instanceOf: TypeError });
});
