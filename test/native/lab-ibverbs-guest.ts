// Runs INSIDE a lab guest (Linux 6.12, rdma_rxe on eth0), bundled with esbuild by lab-ibverbs.ts
// and started with the host's node binary from /out. Exercises the `ibverbs` provider for real:
//   part 1: two devices opened on rxe0 (rxe loops back to its own GID): device/port/GID queries,
//           RC QPs through RESET->INIT->RTR->RTS, SEND / SEND with immediate / inline SEND /
//           RDMA WRITE / RDMA WRITE with immediate of 1 B .. 1 MiB at path MTUs 256..1024 with
//           hashes, completion-channel delivery, MR kept alive across GC, and the error paths
//           (bad rkey -> REM_ACCESS_ERR + flushes, no receive posted -> RNR_RETRY_EXC_ERR, QP in
//           ERR, async events), clear exceptions for bad calls;
//   part 2: one QP against a uroce QP on the host side of the bridge (lab-ibverbs-host.ts),
//           exchanging QP data through files in /out/sync: SEND both ways, RDMA WRITE both ways.
// Prints one "ok - …" / "not ok - …" line per check and "N passed, N failed"; results also go
// to /out/ibverbs-guest.json.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { openIbverbs, ibverbsStatus } from '../../endpoint/verbs/ibverbs/index.js';
import {
  Access, AsyncEventType, QpState, SendFlags, WcOpcode, WcStatus, WrOpcode, wcStatusName, VerbsError,
  type AsyncEvent, type Cq, type Device, type Mtu, type Qp, type WorkCompletion,
} from '../../endpoint/verbs/types.js';
import { check, collect as collectWithin, pattern, results, sha, sleep } from './lab-ibverbs-util.js';

const collect = (cq: Cq, n: number, ms = 30_000): Promise<WorkCompletion[]> => collectWithin(cq, n, ms);


interface Side { dev: Device; qp: Qp; cq: Cq; sgid: number; gid: string }

function v4GidIndex(dev: Device): { index: number; gid: string } {
  const e = dev.gidTable(1).find((g) => g.gid.startsWith('::ffff:') && g.type === 'RoCE v2');
  if (!e) throw new Error(`no IPv4-mapped RoCE v2 GID on ${dev.name}`);
  return { index: e.index, gid: e.gid };
}

function side(dev: Device, o: { inline?: number; cqe?: number } = {}): Side {
  const pd = dev.allocPd();
  const cq = dev.createCq(o.cqe ?? 256);
  const qp = pd.createQp({ sendCq: cq, recvCq: cq, cap: { maxSendWr: 64, maxRecvWr: 64, maxSendSge: 2, maxRecvSge: 2, maxInlineData: o.inline ?? 0 } });
  const g = v4GidIndex(dev);
  return { dev, qp, cq, sgid: g.index, gid: g.gid };
}

function bringUp(s: Side, peerQpn: number, peerGid: string, myPsn: number, peerPsn: number, mtu: Mtu, o: { rnrRetry?: number; retryCnt?: number; access?: number } = {}): void {
  s.qp.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: 1, qpAccessFlags: o.access ?? (Access.LOCAL_WRITE | Access.REMOTE_WRITE) });
  s.qp.modify({
    qpState: QpState.RTR, pathMtu: mtu, destQpNum: peerQpn, rqPsn: peerPsn, maxDestRdAtomic: 0, minRnrTimer: 1,
    ahAttr: { isGlobal: true, portNum: 1, grh: { dgid: peerGid, sgidIndex: s.sgid, hopLimit: 64, trafficClass: 0, flowLabel: 0 } },
  });
  s.qp.modify({ qpState: QpState.RTS, sqPsn: myPsn, timeout: 14, retryCnt: o.retryCnt ?? 7, rnrRetry: o.rnrRetry ?? 7, maxRdAtomic: 0 });
}

async function part1(): Promise<void> {
  const st = ibverbsStatus();
  check(st.available && st.devices.some((d) => d.name === 'rxe0'), `ibverbsStatus lists rxe0 (${JSON.stringify(st.devices.map((d) => d.name))})`);
  const devA = await openIbverbs({ device: 'rxe0' });
  const devB = await openIbverbs({ device: 'rxe0' });
  const attr = devA.queryDevice();
  check(attr.physPortCnt === 1 && attr.maxQp > 0 && attr.maxInlineData > 0, `queryDevice: ports ${attr.physPortCnt}, maxQp ${attr.maxQp}, maxInline ${attr.maxInlineData}, fw ${attr.fwVer}`);
  const port = devA.queryPort(1);
  check(port.state === 4 && port.linkLayer === 'Ethernet' && port.netdev === 'eth0', `queryPort: state ${port.state}, active MTU ${port.activeMtu}, ${port.linkLayer}, netdev ${port.netdev}, gidTblLen ${port.gidTblLen}`);
  const gids = devA.gidTable(1);
  const v4 = gids.find((g) => g.gid === '::ffff:10.55.0.1');
  check(!!v4 && v4.type === 'RoCE v2' && v4.ndev === 'eth0', `GID table: ${gids.map((g) => `${g.index} ${g.gid} ${g.type} ${g.ndev ?? '-'}`).join('; ')}`);
  check(devA.queryGidType(1, v4!.index) === 'RoCE v2' && devA.queryGid(1, v4!.index) === '::ffff:10.55.0.1', 'queryGid / queryGidType agree with the table');

  const asyncEvents: AsyncEvent[] = [];
  devA.on('async', (e) => asyncEvents.push(e));
  devB.on('async', (e) => asyncEvents.push(e));

  for (const mtu of [1, 2, 3] as Mtu[]) {
    const A = side(devA, { inline: 64 });
    const B = side(devB);
    // A's send PSNs start just below 2^24: the 256 KiB SENDs wrap them around to 0
    const psnA = 0xffff00 + mtu;
    bringUp(A, B.qp.qpNum, B.gid, psnA, 0x1000, mtu);
    bringUp(B, A.qp.qpNum, A.gid, 0x1000, psnA, mtu);
    const q = A.qp.query();
    const bytes = 128 << mtu;
    check(q.qpState === QpState.RTS && q.destQpNum === B.qp.qpNum && q.pathMtu === mtu && q.sqPsn === psnA && q.ahAttr?.grh?.dgid === B.gid,
      `MTU ${bytes}: QPs ${A.qp.qpNum}<->${B.qp.qpNum} in RTS; query() gives dest QPN, path MTU, SQ PSN 0x${q.sqPsn.toString(16)}, dgid ${q.ahAttr?.grh?.dgid}`);

    // SEND of several sizes (one and many packets), data verified by hash
    const sizes = [1, bytes - 1, bytes, bytes + 1, 3 * bytes + 7, 256 * 1024 + 3];
    const rbuf = new Uint8Array(300 * 1024);
    const rmr = B.qp.pd.regMr(rbuf, Access.LOCAL_WRITE);
    const sbuf = new Uint8Array(300 * 1024);
    const smr = A.qp.pd.regMr(sbuf, 0);
    let allOk = true;
    for (const [i, n] of sizes.entries()) {
      sbuf.set(pattern(n, n + mtu));
      B.qp.postRecv({ wrId: 1000 + i, sgList: [rmr.sge(0, rbuf.length)] });
      A.qp.postSend({ wrId: BigInt(i), opcode: WrOpcode.SEND, sendFlags: SendFlags.SIGNALED, sgList: [smr.sge(0, n)] });
      const [sw] = await collect(A.cq, 1);
      const [rw] = await collect(B.cq, 1);
      const ok = sw!.status === WcStatus.SUCCESS && sw!.wrId === BigInt(i) && sw!.opcode === WcOpcode.SEND &&
        rw!.status === WcStatus.SUCCESS && rw!.wrId === 1000 + i && rw!.opcode === WcOpcode.RECV && rw!.byteLen === n &&
        rw!.qpNum === B.qp.qpNum && sha(rbuf.subarray(0, n)) === sha(sbuf.subarray(0, n));
      if (!ok) { allOk = false; console.log(`  SEND ${n}: send ${JSON.stringify(sw, (_k, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v))} recv ${JSON.stringify(rw)}`); }
    }
    check(allOk, `MTU ${bytes}: SEND of ${sizes.join(', ')} bytes: completions (wrId types kept), byte counts and SHA-256 match`);

    // SEND with immediate + inline SEND
    B.qp.postRecv([{ wrId: 1, sgList: [rmr.sge(0, 4096)] }, { wrId: 2, sgList: [rmr.sge(4096, 4096)] }]);
    const inl = pattern(60, 77);
    A.qp.postSend([
      { wrId: 11, opcode: WrOpcode.SEND_WITH_IMM, immData: 0xdeadbeef, sendFlags: SendFlags.SIGNALED, sgList: [smr.sge(0, 100)] },
      { wrId: 12, opcode: WrOpcode.SEND, sendFlags: SendFlags.SIGNALED | SendFlags.INLINE, inlineData: inl },
    ]);
    const s2 = await collect(A.cq, 2);
    const r2 = await collect(B.cq, 2);
    check(s2.every((w) => w.status === 0) && r2[0]!.immData === 0xdeadbeef && (r2[0]!.wcFlags & 2) !== 0 && r2[1]!.byteLen === 60 && sha(rbuf.subarray(4096, 4156)) === sha(inl),
      `MTU ${bytes}: SEND with immediate (imm 0x${r2[0]!.immData?.toString(16)}) and an inline SEND of 60 bytes`);

    // RDMA WRITE 1 MiB into a remote-writable MR, then RDMA WRITE with immediate
    const wbuf = new Uint8Array(1 << 20);
    const wmr = B.qp.pd.regMr(wbuf, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
    const src = new Uint8Array(1 << 20);
    src.set(pattern(src.length, 99 + mtu));
    const srcMr = A.qp.pd.regMr(src, 0);
    A.qp.postSend({ wrId: 21, opcode: WrOpcode.RDMA_WRITE, sendFlags: SendFlags.SIGNALED, rdma: { remoteAddr: wmr.addr, rkey: wmr.rkey }, sgList: [srcMr.sge()] });
    const [w1] = await collect(A.cq, 1);
    check(w1!.status === 0 && w1!.opcode === WcOpcode.RDMA_WRITE && sha(wbuf) === sha(src), `MTU ${bytes}: RDMA WRITE of 1 MiB lands byte for byte`);
    B.qp.postRecv({ wrId: 3, sgList: [] });
    A.qp.postSend({ wrId: 22, opcode: WrOpcode.RDMA_WRITE_WITH_IMM, immData: 42, sendFlags: SendFlags.SIGNALED, rdma: { remoteAddr: wmr.addr + 100n, rkey: wmr.rkey }, sgList: [srcMr.sge(0, 1000)] });
    const [w2] = await collect(A.cq, 1);
    const [r3] = await collect(B.cq, 1);
    check(w2!.status === 0 && r3!.opcode === WcOpcode.RECV_RDMA_WITH_IMM && r3!.immData === 42 && r3!.byteLen === 1000,
      `MTU ${bytes}: RDMA WRITE with immediate: receive completion ${r3!.opcode} imm ${r3!.immData} len ${r3!.byteLen}`);
    for (const s of [A, B]) s.qp.destroy();
    for (const m of [rmr, smr, wmr, srcMr]) m.dereg();
  }

  // MR memory kept alive while registered: register, drop every JS reference, collect garbage,
  // then write into it remotely and read it back through the MR object.
  {
    const A = side(devA);
    const B = side(devB);
    bringUp(A, B.qp.qpNum, B.gid, 1, 2, 3);
    bringUp(B, A.qp.qpNum, A.gid, 2, 1, 3);
    const mr = B.qp.pd.regMr(new Uint8Array(64 * 1024), Access.LOCAL_WRITE | Access.REMOTE_WRITE);
    const g = (globalThis as { gc?: () => void }).gc;
    if (g) { for (let i = 0; i < 5; i++) { g(); await sleep(10); } }
    const data = pattern(64 * 1024, 5);
    const smr = A.qp.pd.regMr(data, 0);
    A.qp.postSend({ wrId: 1, opcode: WrOpcode.RDMA_WRITE, sendFlags: SendFlags.SIGNALED, rdma: { remoteAddr: mr.addr, rkey: mr.rkey }, sgList: [smr.sge()] });
    const [w] = await collect(A.cq, 1);
    check(!!g && w!.status === 0 && sha(mr.buffer) === sha(data), 'an MR whose buffer has no other JS reference survives GC and receives an RDMA WRITE');

    // Bad rkey: REM_ACCESS_ERR, the QP goes to ERR, the next WR is flushed
    A.qp.postSend([
      { wrId: 2, opcode: WrOpcode.RDMA_WRITE, sendFlags: SendFlags.SIGNALED, rdma: { remoteAddr: mr.addr, rkey: (mr.rkey ^ 0x5a5a00) >>> 0 }, sgList: [smr.sge(0, 64)] },
      { wrId: 3, opcode: WrOpcode.SEND, sendFlags: SendFlags.SIGNALED, sgList: [smr.sge(0, 8)] },
    ]);
    const errs = await collect(A.cq, 2);
    check(errs[0]!.status === WcStatus.REM_ACCESS_ERR && errs[1]!.status === WcStatus.WR_FLUSH_ERR && A.qp.state === QpState.ERR,
      `bad rkey: ${wcStatusName(errs[0]!.status)}, then ${wcStatusName(errs[1]!.status)}; QP state ${A.qp.state}`);
    // Out of bounds of a valid MR: same error
    for (const s of [A, B]) s.qp.destroy();
    mr.dereg(); smr.dereg();
  }

  // No receive posted, RNR retry 0: RNR_RETRY_EXC_ERR
  {
    const A = side(devA);
    const B = side(devB);
    bringUp(A, B.qp.qpNum, B.gid, 7, 9, 3, { rnrRetry: 0 });
    bringUp(B, A.qp.qpNum, A.gid, 9, 7, 3);
    const smr = A.qp.pd.regMr(new Uint8Array(16), 0);
    A.qp.postSend({ wrId: 1, opcode: WrOpcode.SEND, sendFlags: SendFlags.SIGNALED, sgList: [smr.sge()] });
    const [w] = await collect(A.cq, 1);
    check(w!.status === WcStatus.RNR_RETRY_EXC_ERR, `SEND without a posted receive, rnrRetry 0: ${wcStatusName(w!.status)}`);
    for (const s of [A, B]) s.qp.destroy();
    smr.dereg();
  }

  // Clear exceptions, nothing aborts
  {
    const A = side(devA);
    const e1 = (() => { try { A.qp.modify({ qpState: QpState.RTS }); return undefined; } catch (e) { return e as Error; } })();
    check(e1 instanceof VerbsError && /RESET -> RTS/.test(e1.message), `illegal transition: ${e1?.message}`);
    const e2 = (() => { try { A.qp.postSend({ wrId: 1, opcode: WrOpcode.SEND, sendFlags: SendFlags.INLINE, inlineData: new Uint8Array(4096) }); return undefined; } catch (e) { return e as Error; } })();
    check(e2 instanceof VerbsError && /^ibv_post_send .*inline bytes > max_inline_data/.test(e2.message) && (e2 as VerbsError).badWr === 0, `inline data beyond max_inline_data: ${e2?.message}`);
    const e3 = (() => { try { A.cq.destroy(); return undefined; } catch (e) { return e as Error; } })();
    check(e3 instanceof VerbsError && e3.code === 'EBUSY', `destroying a CQ still in use: ${e3?.message}`);
    A.qp.destroy();
  }
  await sleep(200);
  check(true, `async events seen: ${asyncEvents.map((e) => e.reason).join(', ') || 'none'}`);
  await devA.close();
  await devB.close();
}

async function part2(): Promise<void> {
  const dev = await openIbverbs({ device: 'rxe0' });
  const s = side(dev);
  const buf = new Uint8Array(256 * 1024);
  const mr = s.qp.pd.regMr(buf, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
  const out = new Uint8Array(64 * 1024);
  out.set(pattern(out.length, 1234));
  const omr = s.qp.pd.regMr(out, 0);
  const mine = { qpn: s.qp.qpNum, psn: 0x4242, gid: s.gid, rkey: mr.rkey, addr: mr.addr.toString() };
  writeFileSync('/out/sync/guest.qp', JSON.stringify(mine));
  console.log(`guest: QP ${mine.qpn} gid ${mine.gid}; waiting for the host's uroce QP`);
  let host: { qpn: number; psn: number; gid: string; rkey: number; addr: string } | undefined;
  for (let i = 0; i < 600 && !host; i++) {
    if (existsSync('/out/sync/host.qp')) host = JSON.parse(readFileSync('/out/sync/host.qp', 'utf8')) as typeof host;
    else await sleep(200);
  }
  if (!check(!!host, 'the host side published its uroce QP')) return;
  bringUp(s, host!.qpn, host!.gid, mine.psn, host!.psn, 3);
  // receives can be posted from INIT on (not in RESET): posted before anything is sent to us
  for (let i = 0; i < 4; i++) s.qp.postRecv({ wrId: 100 + i, sgList: [mr.sge(128 * 1024 + i * 8192, 8192)] });
  writeFileSync('/out/sync/guest.rts', '');
  // 1. guest -> host: SEND 8000 bytes, RDMA WRITE 64 KiB into the host's MR
  s.qp.postSend([
    { wrId: 1, opcode: WrOpcode.SEND, sendFlags: SendFlags.SIGNALED, sgList: [omr.sge(0, 8000)] },
    { wrId: 2, opcode: WrOpcode.RDMA_WRITE, sendFlags: SendFlags.SIGNALED, rdma: { remoteAddr: BigInt(host!.addr), rkey: host!.rkey }, sgList: [omr.sge()] },
    { wrId: 3, opcode: WrOpcode.SEND_WITH_IMM, immData: 0x600d, sendFlags: SendFlags.SIGNALED | SendFlags.INLINE, inlineData: new TextEncoder().encode('written') },
  ]);
  const sent = await collect(s.cq, 3, 60_000);
  check(sent.every((w) => w.status === 0), `guest -> uroce: SEND 8000 B, RDMA WRITE 64 KiB, inline SEND with immediate: ${sent.map((w) => wcStatusName(w.status)).join(', ')}`);
  // 2. host -> guest: it RDMA WRITEs 100000 bytes at offset 0 of our MR, then SENDs the hash
  const recvd = await collect(s.cq, 1, 60_000);
  const r = recvd[0]!;
  const msg = new TextDecoder().decode(buf.subarray(128 * 1024 + (Number(r.wrId) - 100) * 8192, 128 * 1024 + (Number(r.wrId) - 100) * 8192 + r.byteLen));
  const [n, hash] = msg.split(' ');
  check(r.status === 0 && sha(buf.subarray(0, Number(n))) === hash, `uroce -> guest: RDMA WRITE of ${n} bytes + SEND of its SHA-256: match (receive ${wcStatusName(r.status)}, wrId ${String(r.wrId)}, ${r.byteLen} bytes)`);
  writeFileSync('/out/sync/guest.done', '');
  await sleep(500);
  s.qp.destroy();
  await dev.close();
}

try {
  await part1();
} catch (e) {
  check(false, `part 1 threw: ${(e as Error).stack ?? String(e)}`);
}
try {
  if (process.env.LAB_WITH_HOST !== '0') await part2();
} catch (e) {
  check(false, `part 2 threw: ${(e as Error).stack ?? String(e)}`);
}
// part 3: async events from the device: the port goes down and up again (eth0 under rxe0)
try {
  const dev = await openIbverbs({ device: 'rxe0' });
  const seen: AsyncEvent[] = [];
  const waitEvent = async (type: number, ms: number): Promise<AsyncEvent | undefined> => {
    for (let t = 0; t < ms; t += 50) {
      const e = seen.find((x) => x.type === type);
      if (e) return e;
      await sleep(50);
    }
    return undefined;
  };
  dev.on('async', (e) => seen.push(e));
  const { spawnSync } = await import('node:child_process');
  spawnSync('ip', ['link', 'set', 'eth0', 'down']);
  const down = await waitEvent(AsyncEventType.PORT_ERR, 10_000);
  const st = dev.queryPort(1).state;
  spawnSync('ip', ['link', 'set', 'eth0', 'up']);
  const up = await waitEvent(AsyncEventType.PORT_ACTIVE, 15_000);
  check(!!down && down.portNum === 1 && st !== 4, `eth0 down: async event ${down?.reason} on port ${down?.portNum}; port state ${st}`);
  check(!!up && up.portNum === 1, `eth0 up: async event ${up?.reason} on port ${up?.portNum}`);
  await dev.close();
} catch (e) {
  check(false, `part 3 threw: ${(e as Error).stack ?? String(e)}`);
}
const pass = results.filter((r) => r.ok).length;
const fail = results.length - pass;
writeFileSync('/out/ibverbs-guest.json', JSON.stringify(results, null, 1));
console.log(`${pass} passed, ${fail} failed`);
process.exit(fail ? 1 : 0);
