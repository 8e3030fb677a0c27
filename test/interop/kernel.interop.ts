// Kernel↔kernel interop scenarios beyond the smoke subset (npm run test:interop runs them all):
// each is a real run of two Linux 6.12 guests, and each asserts what the capture and the
// guests' own view (smc_diag, netlink, checksums) must show.
import test from 'ava';
import { readFileSync } from 'node:fs';
import type { ClcAcceptConfirm, ClcDecline } from '../../dissectors/wire/clc.js';
import { anomalies, carries, fnv1a, foreignFrames, items, run, trackerAnomalies } from './support.js';

const A = '10.55.0.1', B = '10.55.0.2', HOST = '10.55.0.254';

test('second contact: connections 2-4 reuse the link group (no new CONFIRM LINK, CONFIRM RKEY for the second RMB)', async (t) => {
  const { result, frames, guestLog } = await run(t, { name: 'b-second-contact' });
  t.deepEqual(anomalies(frames), []);
  t.deepEqual(trackerAnomalies(result), []);
  t.is(result.smcSummary!.linkGroups.length, 1);
  t.deepEqual(result.smcSummary!.connections.map((c) => c.mode), ['smc-r', 'smc-r', 'smc-r', 'smc-r']);
  t.true(frames.filter((f) => f.roce).every((f) => f.roce!.icrc === 'ok'));
  const clc = items(frames, 'clc');
  // conns 3 and 4 overlap, so their messages may interleave: count, in frame order.
  for (const type of ['proposal', 'accept', 'confirm']) t.is(clc.filter((c) => c.value.type === type).length, 4, type);
  const accepts = clc.filter((c) => c.value.type === 'accept').map((c) => c.value as ClcAcceptConfirm);
  t.deepEqual(accepts.map((a) => a.firstContact), [true, false, false, false]);
  const llc = items(frames, 'llc').map((l) => l.value.kind);
  t.is(llc.filter((k) => k === 'confirm_link').length, 2, 'one CONFIRM LINK exchange for the whole link group');
  t.true(llc.includes('confirm_rkey'), 'CONFIRM RKEY for the connections after the first');
  t.regex(guestLog('b'), /server: conn 4 received/);
  t.regex(guestLog('a'), /clnt_v2_succ\D+4\b/);
});

test('fallback, plain TCP server: option 254 only on the SYN, no CLC, the data in TCP (PEERNOSMC)', async (t) => {
  const { result, frames, raw, guestLog } = await run(t, { name: 'c1-fallback-tcp-server' });
  t.deepEqual(anomalies(frames), []);
  t.deepEqual(trackerAnomalies(result), []);
  t.deepEqual(items(frames, 'tcpopt').map((o) => [o.f.ip!.src, o.f.tcp!.flags.syn, o.f.tcp!.flags.ack]), [[A, true, false]]);
  t.deepEqual(items(frames, 'clc'), []);
  t.deepEqual(frames.filter((f) => f.roce), []);
  t.true(frames.some((f) => f.tcp && f.ip!.src === A && carries(raw[f.n - 1]!, 'fallback test: server is plain TCP')));
  t.regex(guestLog('a'), /mode=TCP\(fallback\)[\s\S]*reason=0x03010000 PEERNOSMC/);
});

test('fallback, server declines SMC-Rv2 (no UEID): CLC Decline v2 with NOSMCDEV', async (t) => {
  const { result, frames, guestLog } = await run(t, { name: 'c2-fallback-server-decline' });
  t.deepEqual(anomalies(frames), []);
  t.deepEqual(trackerAnomalies(result), []);
  const clc = items(frames, 'clc');
  t.deepEqual(clc.map((c) => [c.f.ip!.src, c.value.type, c.value.version]), [[A, 'proposal', 2], [B, 'decline', 2]]);
  t.is((clc[1]!.value as ClcDecline).diagnosis, 0x03030000);
  t.deepEqual(frames.filter((f) => f.roce), []);
  t.regex(guestLog('a'), /reason=0x05000000 PEERDECL[^\n]*peer_diagnosis=0x03030000/);
});

test('fallback, v1 only (no UEID anywhere, rxe has no RoCE v1 GID): the client declines', async (t) => {
  const { result, frames, guestLog } = await run(t, { name: 'c3-fallback-v1-only-client-decline' });
  t.deepEqual(anomalies(frames), []);
  t.deepEqual(trackerAnomalies(result), []);
  t.is(items(frames, 'tcpopt').length, 2, 'both SYNs carry option 254');
  const clc = items(frames, 'clc');
  t.deepEqual(clc.map((c) => [c.f.ip!.src, c.value.type]), [[A, 'decline']]);
  t.is((clc[0]!.value as ClcDecline).diagnosis, 0x03030000);
  t.regex(guestLog('a'), /mode=TCP\(fallback\)/);
});

test('bulk 2 MiB + 123 bytes through a 64 KiB RMB: every byte in RDMA WRITEs, cursors wrap, checksums match', async (t) => {
  const bytes = 2 * 1024 * 1024 + 123;
  const { result, frames, guestLog } = await run(t, { name: 'd-bulk-2MiB' });
  t.deepEqual(anomalies(frames), []);
  t.deepEqual(trackerAnomalies(result), []);
  t.deepEqual(foreignFrames(frames), []);
  const roce = frames.filter((f) => f.roce);
  t.deepEqual(roce.filter((f) => f.roce!.icrc !== 'ok').map((f) => f.n), []);
  // RDMA WRITE First/Middle/Last/Only from A: payload bytes add up to the transfer.
  const writeOps = new Set([0x06, 0x07, 0x08, 0x0a]);
  const written = roce.filter((f) => f.ip!.src === A && writeOps.has(f.roce!.ib.bth.opcode)).reduce((s, f) => s + f.roce!.ib.payload.length, 0);
  t.is(written, bytes);
  const cdc = items(frames, 'cdc').filter((c) => c.f.ip!.src === A);
  t.true(Math.max(...cdc.map((c) => c.value.prod.wrap)) >= 31, 'the producer cursor wrapped ~32 times');
  const fnv = /client: sent \d+ bytes fnv1a=([0-9a-f]{8})/.exec(guestLog('a'))?.[1];
  t.truthy(fnv);
  t.regex(guestLog('b'), new RegExp(`server: conn 1 received ${bytes} bytes .*fnv1a=${fnv}`));
});

test('TEST LINK on an idle link, DELETE LINK when A unloads smc', async (t) => {
  const { result, frames } = await run(t, { name: 'e-testlink-teardown' });
  t.deepEqual(anomalies(frames), []);
  // B keeps retransmitting its DELETE LINK into the void after A's QP is gone (and, when the
  // capture runs 2 s past it, it gets no response): the only anomalies allowed.
  t.deepEqual(trackerAnomalies(result).filter((c) => c !== 'roce.retransmission' && c !== 'llc.no-response'), []);
  t.true(trackerAnomalies(result).includes('roce.retransmission'));
  const llc = items(frames, 'llc');
  const tl = llc.filter((l) => l.value.kind === 'test_link');
  t.true(tl.filter((l) => !l.value.response).length >= 2, 'TEST LINK requests every 5 s');
  t.true(tl.some((l) => l.value.response));
  t.true(llc.some((l) => l.value.kind === 'delete_link' && l.f.ip!.src === A), 'A sends DELETE LINK');
});

test('an unmodified iperf3 under smc_run: control and data connection both SMC-R', async (t) => {
  const { result, frames, guestLog } = await run(t, { name: 'f-smc-run-iperf3' });
  t.deepEqual(anomalies(frames), []);
  // iperf3 sometimes ends its data connection abortively (CDC abort flag): the only anomaly allowed.
  t.deepEqual(trackerAnomalies(result).filter((c) => c !== 'cdc.abort'), []);
  const clc = items(frames, 'clc').map((c) => c.value.type);
  t.is(clc.filter((x) => x === 'accept').length, 2);
  t.is(clc.filter((x) => x === 'decline').length, 0);
  t.regex(guestLog('a'), /clnt_v2_succ\D+2\b/);
});

test('host-side attachment point: a Node process on the bridge answers guest A (TCP fallback, PEERNOSMC)', async (t) => {
  const { result, frames, raw, guestLog } = await run(t, { name: 'h-host-tcp-fallback' });
  const msg = 'SMC-R lab: guest A to the host side of the bridge';
  t.deepEqual(anomalies(frames), []);
  t.deepEqual(trackerAnomalies(result), []);
  t.deepEqual(foreignFrames(frames), []);
  t.deepEqual(items(frames, 'tcpopt').map((o) => [o.f.ip!.src, o.f.ip!.dst, o.f.tcp!.flags.syn]), [[A, HOST, true]]);
  t.true(frames.some((f) => f.tcp && f.ip!.src === HOST && f.tcp.flags.syn && f.tcp.flags.ack), 'the host kernel answered the SYN');
  t.deepEqual(items(frames, 'clc'), []);
  t.true(frames.some((f) => f.tcp && f.ip!.src === A && carries(raw[f.n - 1]!, msg)));
  const hostLog = readFileSync(result.host!.log, 'utf8');
  t.regex(hostLog, new RegExp(`host: received ${msg.length} bytes fnv1a=${fnv1a(msg)}`));
  t.regex(guestLog('a'), new RegExp(`reply: ACK ${msg.length} fnv1a=${fnv1a(msg)}`));
  t.regex(guestLog('a'), /reason=0x03010000 PEERNOSMC/);
});

test('host-side attachment point at the RoCE level: a Node RoCEv2 UD peer on the bridge answers rdma-core\'s ibv_ud_pingpong', async (t) => {
  const { result, frames, guestLog } = await run(t, { name: 'g-host-roce-ud' });
  t.deepEqual(foreignFrames(frames), []);
  const ud = frames.filter((f) => f.roce?.ib.bth.opcode === 0x64);
  t.deepEqual(frames.filter((f) => f.roce && f.roce.ib.bth.opcode !== 0x64).map((f) => f.n), [], 'only UD SENDs');
  const fromHost = ud.filter((f) => f.ip!.src === HOST);
  t.is(ud.filter((f) => f.ip!.src === A && f.ip!.dst === HOST).length, 10);
  t.is(fromHost.length, 10);
  // ICRCs built on the host side (the project's codecs) verify, and so do rxe's.
  t.deepEqual(ud.filter((f) => f.roce!.icrc !== 'ok').map((f) => f.n), []);
  t.true(fromHost.every((f) => f.roce!.ib.deth?.srcQp === 0xabc && f.roce!.ib.deth?.qkey === 0x11111111 && f.roce!.ib.payload.length === 512));
  // UD payloads are not SMC; the only issues are smcdump reading them as LLC (llc.*).
  t.deepEqual(anomalies(frames).filter((a) => !/ llc\./.test(a) || !ud.some((f) => a.startsWith(`#${f.n} `))), []);
  t.regex(guestLog('a'), /10 iters in/);
  t.regex(guestLog('a'), /counters after: +sent_pkts:10 rcvd_pkts:10 /);
  t.regex(readFileSync(result.host!.log, 'utf8'), /host: 10 UD SENDs received, 10 sent/);
});

test('a guest whose first boot fails is booted again once, and the run still passes', async (t) => {
  const { result } = await run(t, { name: 'boot-check', fault: { guest: 'a', kind: 'poweroff-once' } });
  t.is(result.guests.a!.bootAttempts, 2);
  t.is(result.guests.b!.bootAttempts, 1);
  t.regex(readFileSync(`${result.runDir}/console-a.attempt1.log`, 'utf8'), /self-test fault: powering off before reporting booted/);
});
