// Host-side peer for lab-ibverbs.ts: a uroce RC QP on 10.55.0.254 (the lab bridge, inside the
// runner's network namespace) against the guest's `ibverbs` QP on rxe0. QP data is exchanged
// through files in $LAB_RUN/sync (the guest sees them as /out/sync). Checks: the guest's SEND
// and RDMA WRITE arrive intact; then we RDMA WRITE 100000 bytes into the guest's MR and SEND
// their SHA-256 (the guest verifies). Results: $LAB_RUN/ibverbs-host.json.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { openUroce } from '../../endpoint/verbs/uroce/index.js';
import { Access, QpState, SendFlags, WrOpcode, wcStatusName, type Cq, type WorkCompletion } from '../../endpoint/verbs/types.js';
import { check, collect as collectWithin, pattern, results, sha, sleep } from './lab-ibverbs-util.js';

const collect = (cq: Cq, n: number, ms = 120_000): Promise<WorkCompletion[]> => collectWithin(cq, n, ms);

const run = process.env.LAB_RUN;
if (!run) { console.error('LAB_RUN not set'); process.exit(2); }
const sync = join(run, 'sync');
const save = (): void => writeFileSync(join(run, 'ibverbs-host.json'), JSON.stringify(results, null, 1));

try {
  const dev = await openUroce({ address: '10.55.0.254' });
  const pd = dev.allocPd();
  const cq = dev.createCq(64);
  const qp = pd.createQp({ sendCq: cq, recvCq: cq, cap: { maxSendWr: 16, maxRecvWr: 16 } });
  const mem = new Uint8Array(128 * 1024);
  const mr = pd.regMr(mem, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
  const rx = new Uint8Array(4 * 8192);
  const rxMr = pd.regMr(rx, Access.LOCAL_WRITE);
  console.log(`host: uroce QP ${qp.qpNum} on 10.55.0.254, waiting for the guest's QP`);
  let g: { qpn: number; psn: number; gid: string; rkey: number; addr: string } | undefined;
  for (let i = 0; i < 3000 && !g; i++) {
    if (existsSync(join(sync, 'guest.qp'))) g = JSON.parse(readFileSync(join(sync, 'guest.qp'), 'utf8')) as typeof g;
    else await sleep(100);
  }
  if (!g) throw new Error('the guest never published its QP');
  const psn = 0x777;
  qp.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: 1, qpAccessFlags: Access.LOCAL_WRITE | Access.REMOTE_WRITE });
  qp.modify({ qpState: QpState.RTR, pathMtu: 3, destQpNum: g.qpn, rqPsn: g.psn, maxDestRdAtomic: 0, minRnrTimer: 1,
    ahAttr: { isGlobal: true, portNum: 1, grh: { dgid: g.gid, sgidIndex: 0, hopLimit: 64, trafficClass: 0, flowLabel: 0 } } });
  qp.modify({ qpState: QpState.RTS, sqPsn: psn, timeout: 14, retryCnt: 7, rnrRetry: 7, maxRdAtomic: 0 });
  for (let i = 0; i < 4; i++) qp.postRecv({ wrId: i, sgList: [rxMr.sge(i * 8192, 8192)] });
  writeFileSync(join(sync, 'host.qp'), JSON.stringify({ qpn: qp.qpNum, psn, gid: dev.queryGid(1, 0), rkey: mr.rkey, addr: mr.addr.toString() }));
  console.log(`host: connected to guest QP ${g.qpn} (${g.gid})`);

  const r = await collect(cq, 2);
  const expect = pattern(64 * 1024, 1234);
  check(r[0]!.status === 0 && r[0]!.byteLen === 8000 && sha(rx.subarray(0, 8000)) === sha(expect.subarray(0, 8000)), `ibverbs (guest) -> uroce: SEND of 8000 bytes intact (${wcStatusName(r[0]!.status)})`);
  check(r[1]!.status === 0 && r[1]!.immData === 0x600d && new TextDecoder().decode(rx.subarray(8192, 8192 + r[1]!.byteLen)) === 'written', `ibverbs -> uroce: inline SEND with immediate 0x${r[1]!.immData?.toString(16)}`);
  check(sha(mem.subarray(0, 64 * 1024)) === sha(expect), 'ibverbs -> uroce: RDMA WRITE of 64 KiB landed byte for byte');

  const data = pattern(100000, 4321);
  const dmr = pd.regMr(data, 0);
  const note = new TextEncoder().encode(`100000 ${sha(data)}`);
  const nmr = pd.regMr(note, 0);
  qp.postSend([
    { wrId: 1, opcode: WrOpcode.RDMA_WRITE, sendFlags: SendFlags.SIGNALED, rdma: { remoteAddr: BigInt(g.addr), rkey: g.rkey }, sgList: [dmr.sge()] },
    { wrId: 2, opcode: WrOpcode.SEND, sendFlags: SendFlags.SIGNALED, sgList: [nmr.sge()] },
  ]);
  const s = await collect(cq, 2);
  check(s.every((w) => w.status === 0), `uroce -> ibverbs: RDMA WRITE 100000 B + SEND acknowledged by rxe (${s.map((w) => wcStatusName(w.status)).join(', ')})`);
  for (let i = 0; i < 600 && !existsSync(join(sync, 'guest.done')); i++) await sleep(100);
  console.log(`host: qp stats ${JSON.stringify(qp.stats)}`);
  qp.destroy();
  await dev.close();
} catch (e) {
  check(false, `host part threw: ${(e as Error).stack ?? String(e)}`);
}
save();
process.exit(results.every((x) => x.ok) ? 0 : 1);
