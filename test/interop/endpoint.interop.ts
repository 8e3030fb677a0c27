// smcscope's userspace SMC-R endpoint against Linux 6.12 kernel SMC-R (qemu lab, rdma_rxe): the
// endpoint runs on the host side of the lab bridge (10.55.0.254) over uroce with the eBPF TCP
// option, a guest runs the kernel side with smcpingpong. Both roles, first and subsequent
// contact, data both ways verified by smcpingpong's "ACK <bytes> fnv1a=<hash>" protocol, the
// kernel's own smc_diag view, its dmesg, and the capture decoded by our pipeline.
// Scenarios: test/lab/scenarios/i-endpoint-server.* and j-endpoint-client.*; docs/endpoint.md.
import test, { type ExecutionContext } from 'ava';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ClcAcceptConfirm, ClcDecline } from '../../dissectors/wire/clc.js';
import type { LlcMessage } from '../../dissectors/wire/llc.js';
import { SCENARIO_DIR } from '../lab/harness.js';
import { anomalies, fnv1a, foreignFrames, items, run, trackerAnomalies, type Run } from './support.js';

const A = '10.55.0.1', HOST = '10.55.0.254';
const BULK = 1 << 20;
/** smcpingpong's bulk pattern: byte i is "0123456789abcdef"[i % 16]. */
const pattern = (n: number): Buffer => Buffer.from(Array.from({ length: n }, (_, i) => '0123456789abcdef'.charCodeAt(i % 16)));

function shVar(name: string, v: string): string {
  const m = new RegExp(`^${v}='([^']*)'`, 'm').exec(readFileSync(join(SCENARIO_DIR, `${name}.sh`), 'utf8'));
  if (!m) throw new Error(`no ${v}= in ${name}.sh`);
  return m[1]!;
}

/** Checks shared by both directions: a clean capture, every ICRC good, the kernel quiet. */
function cleanRun(t: ExecutionContext, r: Run): void {
  t.deepEqual(anomalies(r.frames), [], 'no decoder issues');
  t.deepEqual(trackerAnomalies(r.result), [], 'no correlation anomalies (retransmissions, unanswered LLC, ...)');
  t.deepEqual(foreignFrames(r.frames), [], 'only lab addresses on the bridge');
  const roce = r.frames.filter((f) => f.roce);
  t.deepEqual(roce.filter((f) => f.roce!.icrc !== 'ok').map((f) => f.n), [], 'every ICRC verifies (ours and rxe\'s)');
  t.deepEqual(r.frames.filter((f) => f.ip?.version === 4 && (f.ip.header as { protocol: number }).protocol === 1).map((f) => f.n), [], 'no ICMP (nothing sent to a closed port)');
  const dmesg = readFileSync(join(r.result.runDir, 'dmesg-full-a.txt'), 'utf8');
  t.deepEqual(dmesg.split('\n').filter((l) => /WARNING:|BUG:|Call Trace:|Oops|general protection/.test(l)), [], 'no kernel warnings');
  t.regex(r.guestLog('a'), /dmesg: no WARNING\/BUG\/call trace/);
}

interface ServerConn { n: number; port: number; mode: string; handshakeMs: number; smcr?: { firstContact: boolean; version: number; release: number; linkGroup: string }; fallback?: { code: number; name: string }; bytes?: number; fnv1a?: string }
interface ClientConn { n: number; mode: string; handshakeMs: number; smcr?: { firstContact: boolean; version: number; release: number; linkGroup: string }; sent: number; fnv1a: string; reply?: string; replyOk?: boolean; transferMs?: number }

test('kernel client → our server: first + subsequent contact, 1 MiB, UEID decline, max-links-1 group', async (t) => {
  const name = 'i-endpoint-server';
  const msg = shVar(name, 'MSG');
  const r = await run(t, { name });
  cleanRun(t, r);
  const { frames, result, guestLog } = r;
  const host = JSON.parse(readFileSync(join(result.runDir, 'endpoint-server.json'), 'utf8')) as { conns: ServerConn[]; closeMs: number };
  t.log(`handshake (TCP accepted → SMC-R up) per connection: ${host.conns.map((c) => `${c.n}:${c.mode} ${c.handshakeMs} ms`).join(', ')}; close ${host.closeMs} ms`);

  // Our side: four connections, as the scenario intends.
  t.deepEqual(host.conns.map((c) => [c.port, c.mode, c.smcr?.firstContact ?? null, c.fallback?.name ?? null]),
    [[12345, 'smcr', true, null], [12345, 'smcr', false, null], [12346, 'tcp', null, 'NOUEID'], [12347, 'smcr', true, null]]);
  t.is(host.conns[0]!.smcr!.linkGroup, host.conns[1]!.smcr!.linkGroup, 'conn 2 reuses conn 1\'s link group');
  t.not(host.conns[3]!.smcr!.linkGroup, host.conns[0]!.smcr!.linkGroup);
  t.true(host.conns.filter((c) => c.smcr).every((c) => c.smcr!.version === 2 && c.smcr!.release === 1), 'SMC-Rv2.1');
  // Data kernel → us, checked by hash on both sides; our reply checked by the kernel client.
  const bulkHash = fnv1a(pattern(BULK));
  t.deepEqual(host.conns.map((c) => [c.bytes, c.fnv1a]), [[msg.length, fnv1a(msg)], [BULK, bulkHash], [39, fnv1a('fallback: the endpoint has another UEID')], [29, fnv1a('max links 1: no ADD LINK wait')]]);
  const log = guestLog('a');
  t.regex(log, new RegExp(`client: sent ${msg.length} bytes fnv1a=${fnv1a(msg)} .*reply: ACK ${msg.length} fnv1a=${fnv1a(msg)}`));
  t.regex(log, new RegExp(`client: sent ${BULK} bytes fnv1a=${bulkHash} .*reply: ACK ${BULK} fnv1a=${bulkHash}`));

  // The kernel's view (smc_diag while each connection was open).
  const diag = [...log.matchAll(/state=\S+ +mode=(\S+) +10\.55\.0\.1:\d+ <-> 10\.55\.0\.254:(\d+)/g)].map((m) => [m[2], m[1]]);
  t.deepEqual(diag, [['12345', 'SMCR'], ['12345', 'SMCR'], ['12346', 'TCP(fallback)'], ['12347', 'SMCR']]);
  t.regex(log, /reason=0x05000000 PEERDECL[^\n]*peer_diagnosis=0x03030008 NOUEID/, 'the kernel client records the reason we sent');
  t.regex(log, /lgrinfo: role=CLIENT [^\n]*peer_gid=0000:0000:0000:0000:0000:ffff:0a37:00fe/);
  t.regex(log, /clnt_v2_succ = 3\b/);

  // The capture: CLC per connection, CONFIRM LINK per link group, CONFIRM RKEY for the reused
  // group's RMB, our Decline, and our DELETE LINK at the end.
  const clc = items(frames, 'clc');
  const fc = (c: (typeof clc)[number]): boolean | null => (c.value.type === 'accept' || c.value.type === 'confirm' ? (c.value as ClcAcceptConfirm).firstContact : null);
  t.deepEqual(clc.map((c) => [c.f.ip!.src, c.value.type, fc(c)]), [
    [A, 'proposal', null], [HOST, 'accept', true], [A, 'confirm', true],
    [A, 'proposal', null], [HOST, 'accept', false], [A, 'confirm', false],
    [A, 'proposal', null], [HOST, 'decline', null],
    [A, 'proposal', null], [HOST, 'accept', true], [A, 'confirm', true],
  ]);
  const decline = clc.find((c) => c.value.type === 'decline')!.value as ClcDecline;
  t.is(decline.diagnosis, 0x03030008);
  t.is((clc[9]!.value as ClcAcceptConfirm).r?.fce?.maxLinks, 1, 'conn 4\'s Accept offers one link');
  const llc = items(frames, 'llc') as Array<{ value: LlcMessage; f: (typeof frames)[number] }>;
  const kinds = (k: string) => llc.filter((l) => l.value.kind === k).map((l) => [l.f.ip!.src, l.value.response]);
  t.deepEqual(kinds('confirm_link'), [[HOST, false], [A, true], [HOST, false], [A, true]]);
  t.true(llc.some((l) => l.value.kind === 'confirm_rkey' && l.f.ip!.src === A && !l.value.response), 'the kernel confirms its RMB in the reused group');
  t.true(llc.some((l) => l.value.kind === 'delete_link' && l.f.ip!.src === HOST), 'our DELETE LINK at the end');
  t.is(result.smcSummary!.linkGroups.length, 2);
  t.deepEqual(result.smcSummary!.connections.map((c) => c.mode), ['smc-r', 'smc-r', 'fallback', 'smc-r']);
});

test('our client → kernel server: first + subsequent contact, 1 MiB, replies checked by hash', async (t) => {
  const name = 'j-endpoint-client';
  const r = await run(t, { name });
  cleanRun(t, r);
  const { frames, result, guestLog } = r;
  const host = JSON.parse(readFileSync(join(result.runDir, 'endpoint-client.json'), 'utf8')) as { conns: ClientConn[]; closeMs: number };
  t.log(`connect (TCP + CLC [+ CONFIRM LINK]) per connection: ${host.conns.map((c) => `${c.n}: ${c.handshakeMs} ms`).join(', ')}; transfer+reply ${host.conns.map((c) => `${c.transferMs} ms`).join(', ')}; close ${host.closeMs} ms`);
  t.deepEqual(host.conns.map((c) => [c.mode, c.smcr?.firstContact, c.replyOk]), [['smcr', true, true], ['smcr', false, true]]);
  t.is(host.conns[0]!.smcr!.linkGroup, host.conns[1]!.smcr!.linkGroup);
  const bulkHash = fnv1a(pattern(BULK));
  t.deepEqual(host.conns.map((c) => c.reply), [`ACK ${host.conns[0]!.sent} fnv1a=${host.conns[0]!.fnv1a}`, `ACK ${BULK} fnv1a=${bulkHash}`]);
  const log = guestLog('a');
  t.regex(log, new RegExp(`server: conn 1 received ${host.conns[0]!.sent} bytes .*fnv1a=${host.conns[0]!.fnv1a}`));
  t.regex(log, new RegExp(`server: conn 2 received ${BULK} bytes .*fnv1a=${bulkHash}`));
  const diag = [...log.matchAll(/state=\S+ +mode=(\S+) +10\.55\.0\.1:12345 <-> 10\.55\.0\.254:\d+/g)].map((m) => m[1]);
  t.deepEqual(diag, ['SMCR', 'SMCR'], 'smc_diag: both connections SMC-R on the kernel side');
  t.regex(log, /lgrinfo: role=SERVER [^\n]*peer_gid=0000:0000:0000:0000:0000:ffff:0a37:00fe/);
  t.regex(log, /srv_v2_succ = 2\b/);

  const clc = items(frames, 'clc');
  t.deepEqual(clc.map((c) => [c.f.ip!.src, c.value.type]), [[HOST, 'proposal'], [A, 'accept'], [HOST, 'confirm'], [HOST, 'proposal'], [A, 'accept'], [HOST, 'confirm']]);
  t.deepEqual(clc.filter((c) => c.value.type !== 'proposal').map((c) => (c.value as ClcAcceptConfirm).firstContact), [true, true, false, false]);
  const llc = items(frames, 'llc') as Array<{ value: LlcMessage; f: (typeof frames)[number] }>;
  t.deepEqual(llc.filter((l) => l.value.kind === 'confirm_link').map((l) => [l.f.ip!.src, l.value.response]), [[A, false], [HOST, true]]);
  // The kernel server offers a second link (same device); we have one device: reject.
  t.deepEqual(llc.filter((l) => l.value.kind === 'add_link').map((l) => [l.f.ip!.src, l.value.response]), [[A, false], [HOST, true]]);
  t.true(llc.some((l) => l.value.kind === 'confirm_rkey' && l.f.ip!.src === A && !l.value.response), 'CONFIRM RKEY in the reused group');
  t.true(llc.some((l) => l.value.kind === 'delete_link' && l.f.ip!.src === HOST), 'our DELETE LINK at the end');
});
