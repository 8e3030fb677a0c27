// smcscope's endpoint on the native libibverbs provider (`--device ibverbs:rxe0`) against Linux
// 6.12 kernel SMC-R, both roles, in ONE lab run (scenario test/lab/scenarios/q-ibverbs-kernel.*):
// guest A runs our endpoint (node + the addon + the eBPF TCP option helper, staged into the run
// folder by the scenario's host part), guest B runs smcpingpong on AF_SMC. Per role: conn 1
// first contact (short message), conn 2 subsequent contact (1 MiB client → server), conn 3
// subsequent contact (1 MiB server → client); every transfer hashed (FNV-1a) by the receiver and
// compared by the sender. The capture is checked with our decoder and `smcdump --state`: the
// endpoint's state after its traffic (just before it deletes its link group) agrees with the
// capture up to its DELETE LINK, and its state at exit has no link group left.
// Two devices per side (r, s, t): failover during a transfer, and the device coming back: the
// link re-added like Linux (r: the kernel server's symmetric ADD LINK; s: the kernel client's
// REQUEST ADD LINK answered by us; t: our own device goes, our REQUEST ADD LINK to the kernel).
// SMC-Rv2.1 with UEID only: rxe has RoCE v2 GIDs only, so SMC-Rv1 cannot run here.
import test, { type ExecutionContext } from 'ava';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ClcAcceptConfirm } from '../../dissectors/wire/clc.js';
import type { LlcMessage } from '../../dissectors/wire/llc.js';
import { opcodeInfo } from '../../dissectors/wire/ib.js';
import { anomalies, errorDiagnoses, fnv1a, foreignFrames, items, type Run } from './support.js';
import { get as getRun, llcList, ourDeleteLink as ourDeleteLinkOf, stateCheck as stateCheckOf, stateLinks as stateLinksOf, writesBySrc, type LlcItem } from './labruns.js';

const A = '10.55.0.1', B = '10.55.0.2', A2 = '10.55.0.11', B2 = '10.55.0.12';
const NAME = 'q-ibverbs-kernel';
const BULK = 1 << 20;
const pattern = (n: number): Buffer => Buffer.from(Array.from({ length: n }, (_, i) => '0123456789abcdef'.charCodeAt(i % 16)));
const bulkHash = fnv1a(pattern(BULK));
const KMSG = 'SMC-R interop: the kernel client to the ibverbs endpoint 0123456789';
const OMSG = 'SMC-R interop: the ibverbs endpoint to the kernel server 0123456789';

interface Conn { n: number; mode: string; handshakeMs: number; smcr?: { firstContact: boolean; version: number; release: number; linkGroup: string }; bytes: number; fnv1a: string; reply?: string; replyOk?: boolean; transferMs?: number; error?: string }
interface Side { role: string; conns: Conn[]; closeMs: number; errors: string[] }

const get = (t: ExecutionContext, name = NAME): Promise<Run> => getRun(t, name);
const side = (r: Run, role: 'client' | 'server'): Side => JSON.parse(readFileSync(join(r.result.runDir, `ibverbs-${role}.json`), 'utf8')) as Side;

/** The CLC messages of one role's phase: phase 1 = A proposes (our client), phase 2 = B proposes. */
function phaseOf(r: Run): { clc1: ReturnType<typeof items<'clc'>>; clc2: ReturnType<typeof items<'clc'>> } {
  const clc = items(r.frames, 'clc');
  const firstB = clc.findIndex((c) => c.value.type === 'proposal' && c.f.ip!.src === B);
  return { clc1: firstB < 0 ? clc : clc.slice(0, firstB), clc2: firstB < 0 ? [] : clc.slice(firstB) };
}

const stateCheck = (r: Run, role: string, tag: string, cut?: number): Promise<string> => stateCheckOf(r, 'ibverbs', role, tag, cut);
const ourDeleteLink = (r: Run, from: number): number => ourDeleteLinkOf(r, [A, A2], from);
const stateLinks = (r: Run, role: string, tag: string): Array<[number, string, string, string]> => stateLinksOf(r, 'ibverbs', role, tag);

test.serial('ibverbs client → kernel server: first + subsequent contact, 1 MiB each way, hashes checked', async (t) => {
  const r = await get(t);
  const ours = side(r, 'client');
  t.log(`handshake per connection: ${ours.conns.map((c) => `${c.n}: ${c.handshakeMs} ms`).join(', ')}; transfer ${ours.conns.map((c) => `${c.transferMs} ms`).join(', ')}; close ${ours.closeMs} ms`);
  t.deepEqual(ours.errors, []);
  t.deepEqual(ours.conns.map((c) => [c.mode, c.smcr?.firstContact, c.smcr?.version, c.smcr?.release, c.replyOk, c.error ?? null]),
    [['smcr', true, 2, 1, true, null], ['smcr', false, 2, 1, true, null], ['smcr', false, 2, 1, true, null]]);
  t.true(ours.conns.every((c) => c.smcr!.linkGroup === ours.conns[0]!.smcr!.linkGroup), 'one link group for the three connections');
  // client → server: the kernel server's reply is the hash of what it received
  t.deepEqual(ours.conns.slice(0, 2).map((c) => c.reply), [`ACK ${OMSG.length} fnv1a=${fnv1a(OMSG)}`, `ACK ${BULK} fnv1a=${bulkHash}`]);
  // server → client: we hashed the kernel's 1 MiB; the kernel server printed our ACK
  t.deepEqual([ours.conns[2]!.bytes, ours.conns[2]!.fnv1a], [BULK, bulkHash]);
  const log = r.guestLog('b');
  t.regex(log, new RegExp(`server: conn 1 received ${OMSG.length} bytes .*fnv1a=${fnv1a(OMSG)}`));
  t.regex(log, new RegExp(`server: conn 2 received ${BULK} bytes .*fnv1a=${bulkHash}`));
  t.regex(log, new RegExp(`server: conn 1 \\[up [\\d.]+\\] sent ${BULK} bytes fnv1a=${bulkHash}`), 'the kernel server sent the pattern');
  t.regex(log, new RegExp(`server: conn 1 \\[up [\\d.]+\\] reply: ACK ${BULK} fnv1a=${bulkHash}`), 'the kernel server got our ACK of its 1 MiB');
  const diag = [...log.matchAll(/state=\S+ +mode=(\S+) +10\.55\.0\.2:(1234[56]) <-> 10\.55\.0\.1:\d+/g)].map((m) => [m[2], m[1]]);
  t.deepEqual(diag, [['12345', 'SMCR'], ['12345', 'SMCR'], ['12346', 'SMCR']], 'smc_diag on the kernel server: SMC-R');
  t.regex(log, /lgrinfo: role=SERVER [^\n]*peer_gid=0000:0000:0000:0000:0000:ffff:0a37:0001/, 'the kernel sees our IPv4-mapped RoCE v2 GID');

  const { clc1 } = phaseOf(r);
  t.deepEqual(clc1.map((c) => [c.f.ip!.src, c.value.type, c.value.type === 'proposal' ? null : (c.value as ClcAcceptConfirm).firstContact]), [
    [A, 'proposal', null], [B, 'accept', true], [A, 'confirm', true],
    [A, 'proposal', null], [B, 'accept', false], [A, 'confirm', false],
    [A, 'proposal', null], [B, 'accept', false], [A, 'confirm', false]]);
  const end1 = ourDeleteLink(r, clc1[0]!.n);
  const llc = (items(r.frames, 'llc') as Array<{ value: LlcMessage; n: number; f: (typeof r.frames)[number] }>).filter((l) => l.n <= end1);
  t.deepEqual(llc.filter((l) => l.value.kind === 'confirm_link').map((l) => [l.f.ip!.src, l.value.response]), [[B, false], [A, true]]);
  // the kernel server offers a second link on its only device; we have one device: reject
  t.deepEqual(llc.filter((l) => l.value.kind === 'add_link').map((l) => [l.f.ip!.src, l.value.response]), [[B, false], [A, true]]);

  // smcdump --state: our state after the traffic agrees with the capture up to our DELETE LINK
  t.regex(await stateCheck(r, 'client', 'before-close', end1), /^Endpoint state vs wire \(LG1, pid \d+\): no disagreements$/);
  const exit = JSON.parse(readFileSync(join(r.result.runDir, 'ibverbs-client-state-exit.json'), 'utf8')) as { linkGroups: unknown[]; provider: string; device: string };
  t.deepEqual([exit.provider, exit.device, exit.linkGroups.length], ['ibverbs', 'rxe0', 0], 'at exit: no link group left (DELETE LINK ALL sent)');
  t.regex(await stateCheck(r, 'client', 'exit'), /no disagreements/);
});

test.serial('kernel client → ibverbs server: first + subsequent contact, 1 MiB each way, hashes checked', async (t) => {
  const r = await get(t);
  const ours = side(r, 'server');
  t.log(`handshake (TCP accepted → SMC-R up) per connection: ${ours.conns.map((c) => `${c.n}: ${c.handshakeMs} ms`).join(', ')}; transfer ${ours.conns.map((c) => `${c.transferMs} ms`).join(', ')}; close ${ours.closeMs} ms`);
  t.deepEqual(ours.errors, []);
  t.deepEqual(ours.conns.map((c) => [c.mode, c.smcr?.firstContact, c.smcr?.version, c.smcr?.release, c.error ?? null]),
    [['smcr', true, 2, 1, null], ['smcr', false, 2, 1, null], ['smcr', false, 2, 1, null]]);
  t.true(ours.conns.every((c) => c.smcr!.linkGroup === ours.conns[0]!.smcr!.linkGroup), 'one link group for the three connections');
  // client → server: we hashed what arrived; the kernel client compared our ACK
  t.deepEqual(ours.conns.slice(0, 2).map((c) => [c.bytes, c.fnv1a]), [[KMSG.length, fnv1a(KMSG)], [BULK, bulkHash]]);
  const log = r.guestLog('b');
  t.regex(log, new RegExp(`client: sent ${KMSG.length} bytes fnv1a=${fnv1a(KMSG)} .*reply: ACK ${KMSG.length} fnv1a=${fnv1a(KMSG)}`));
  t.regex(log, new RegExp(`client: sent ${BULK} bytes fnv1a=${bulkHash} .*reply: ACK ${BULK} fnv1a=${bulkHash}`));
  // server → client: the kernel client (-r) hashed our 1 MiB and we compared its ACK
  t.deepEqual([ours.conns[2]!.reply, ours.conns[2]!.replyOk], [`ACK ${BULK} fnv1a=${bulkHash}`, true]);
  t.regex(log, new RegExp(`client: \\[up [\\d.]+\\] received ${BULK} bytes fnv1a=${bulkHash}`));
  const diag = [...log.matchAll(/state=\S+ +mode=(\S+) +10\.55\.0\.2:\d+ <-> 10\.55\.0\.1:(1234[56])/g)].map((m) => [m[2], m[1]]);
  t.deepEqual(diag, [['12345', 'SMCR'], ['12345', 'SMCR'], ['12346', 'SMCR']], 'smc_diag on the kernel client: SMC-R');
  t.regex(log, /lgrinfo: role=CLIENT [^\n]*peer_gid=0000:0000:0000:0000:0000:ffff:0a37:0001/);

  const { clc2 } = phaseOf(r);
  t.deepEqual(clc2.map((c) => [c.f.ip!.src, c.value.type, c.value.type === 'proposal' ? null : (c.value as ClcAcceptConfirm).firstContact]), [
    [B, 'proposal', null], [A, 'accept', true], [B, 'confirm', true],
    [B, 'proposal', null], [A, 'accept', false], [B, 'confirm', false],
    [B, 'proposal', null], [A, 'accept', false], [B, 'confirm', false]]);
  const end2 = ourDeleteLink(r, clc2[0]!.n);
  const llc = (items(r.frames, 'llc') as Array<{ value: LlcMessage; n: number; f: (typeof r.frames)[number] }>).filter((l) => l.n > clc2[0]!.n && l.n <= end2);
  t.deepEqual(llc.filter((l) => l.value.kind === 'confirm_link').map((l) => [l.f.ip!.src, l.value.response]), [[A, false], [B, true]]);
  // we offer a second link on our only device; the kernel client (one device) rejects it
  t.deepEqual(llc.filter((l) => l.value.kind === 'add_link').map((l) => [l.f.ip!.src, l.value.response]), [[A, false], [B, true]]);

  t.regex(await stateCheck(r, 'server', 'before-close', end2), /^Endpoint state vs wire \(LG1, pid \d+\): no disagreements$/);
  const exit = JSON.parse(readFileSync(join(r.result.runDir, 'ibverbs-server-state-exit.json'), 'utf8')) as { linkGroups: unknown[]; provider: string; device: string };
  t.deepEqual([exit.provider, exit.device, exit.linkGroups.length], ['ibverbs', 'rxe0', 0], 'at exit: no link group left (DELETE LINK ALL sent)');
  t.regex(await stateCheck(r, 'server', 'exit'), /no disagreements/);
});

test.serial('ibverbs ↔ kernel: clean capture (decoder, ICRC, only lab addresses), kernel quiet', async (t) => {
  const r = await get(t);
  t.deepEqual(anomalies(r.frames), [], 'no decoder issues');
  // rxe under TCG retransmits now and then (a note); anything else smcdump correlates is an anomaly
  t.deepEqual(r.result.smcSummary!.anomalies.filter((a) => a.code !== 'roce.retransmission').map((a) => `${a.code}: ${a.message}`), []);
  t.deepEqual(foreignFrames(r.frames), []);
  const roce = r.frames.filter((f) => f.roce);
  t.true(roce.length > 1000, `RoCEv2 on the wire (${roce.length} frames)`);
  t.deepEqual(roce.filter((f) => f.roce!.icrc !== 'ok').map((f) => f.n), [], 'every ICRC verifies (rxe both sides)');
  for (const g of ['a', 'b'] as const) {
    const dmesg = readFileSync(join(r.result.runDir, `dmesg-full-${g}.txt`), 'utf8');
    t.deepEqual(dmesg.split('\n').filter((l) => /WARNING:|BUG:|Call Trace:|Oops|general protection/.test(l)), [], `no kernel warnings in guest ${g}`);
  }
  t.deepEqual(r.result.smcSummary!.connections.map((c) => c.mode), ['smc-r', 'smc-r', 'smc-r', 'smc-r', 'smc-r', 'smc-r']);
  t.is(r.result.smcSummary!.linkGroups.length, 2, 'one link group per role');
});

test.serial('ibverbs client → kernel server: two links (rxe0 + rxe1), failover during a 1.5 MiB transfer, every byte verified', async (t) => {
  const r = await get(t, 'r-ibverbs-failover');
  const ours = JSON.parse(readFileSync(join(r.result.runDir, 'ibverbs-failover-client.json'), 'utf8')) as Side;
  const FBYTES = 1572864;
  t.log(`handshake per connection: ${ours.conns.map((c) => `${c.n}: ${c.handshakeMs} ms`).join(', ')}; paced transfer across the failover ${ours.conns[1]?.transferMs} ms; close ${ours.closeMs} ms`);
  t.deepEqual(ours.errors, []);
  t.deepEqual(ours.conns.map((c) => [c.mode, c.smcr?.firstContact, c.replyOk, c.error ?? null]), [['smcr', true, true, null], ['smcr', false, true, null], ['smcr', false, true, null]]);
  // every byte of the kernel's paced 1.5 MiB arrived across the failover, and our ACK went back
  t.deepEqual([ours.conns[1]!.bytes, ours.conns[1]!.fnv1a], [FBYTES, fnv1a(pattern(FBYTES))]);
  const log = r.guestLog('b');
  t.regex(log, new RegExp(`server: conn 1 \\[up [\\d.]+\\] sent ${FBYTES} bytes fnv1a=${fnv1a(pattern(FBYTES))}`));
  t.regex(log, new RegExp(`server: conn 1 \\[up [\\d.]+\\] reply: ACK ${FBYTES} fnv1a=${fnv1a(pattern(FBYTES))}`), 'the kernel got our ACK on the surviving link');
  const two = JSON.parse(readFileSync(join(r.result.runDir, 'ibverbs-failover-client-state-two-links.json'), 'utf8')) as { linkGroups: Array<{ links: Array<{ id: number; state: string; gid: string; peer: { gid: string } }> }> };
  t.deepEqual(two.linkGroups[0]!.links.map((l) => [l.id, l.state, l.gid, l.peer.gid]),
    [[1, 'ACTIVE', `::ffff:${A}`, `::ffff:${B}`], [2, 'ACTIVE', `::ffff:${A2}`, `::ffff:${B2}`]], 'two links, one per device, before the transfer');
  const down = /MARK FAILURE: ip link set (eth\d) down on B/.exec(log);
  t.truthy(down, 'B took a NIC down mid-transfer');

  const llc = items(r.frames, 'llc') as Array<{ value: LlcMessage; n: number; f: (typeof r.frames)[number] }>;
  const linkMsgs = (kind: string): Array<[string, boolean, boolean, number]> => llc.filter((l) => l.value.kind === kind)
    .map((l) => { const v = l.value as LlcMessage & { rejected?: boolean; linkId?: number }; return [l.f.ip!.src, v.response, v.rejected ?? false, v.linkId ?? 0]; });
  // link 2: the kernel server's ADD LINK (on link 1), accepted by us on rxe1 (CONFIRM LINK on the
  // new link 10.55.0.12 ↔ 10.55.0.11); link 3 after the failover: the kernel re-adds over its
  // surviving device, we accept it on our other device (asymmetric on the kernel side).
  const adds = linkMsgs('add_link');
  t.deepEqual(adds.slice(0, 4), [[B, false, false, 2], [A, true, false, 2], [B2, false, false, 3], [A2, true, false, 3]], 'ADD LINK: link 2, then link 3 after the failover, both accepted');
  t.deepEqual(linkMsgs('confirm_link').slice(0, 6).map(([src, resp, , id]) => [src, resp, id]),
    [[B, false, 1], [A, true, 1], [B2, false, 2], [A2, true, 2], [B2, false, 3], [A, true, 3]], 'CONFIRM LINK on each new link');
  const dl = llc.filter((l) => l.value.kind === 'delete_link' && !(l.value as LlcMessage & { all?: boolean }).all);
  t.true(dl.some((l) => !l.value.response && (l.f.ip!.src === B || l.f.ip!.src === B2)), 'the kernel deletes the lost link (DELETE LINK)');
  t.true(dl.some((l) => l.value.response && (l.f.ip!.src === A || l.f.ip!.src === A2)), 'we answer it');
  // mid-transfer: the kernel's RDMA WRITEs of the transfer are on the wire before and after it
  const delN = dl.find((l) => !l.value.response && (l.f.ip!.src === B || l.f.ip!.src === B2))!.n;
  const writes = r.frames.filter((f) => f.roce && opcodeInfo(f.roce.ib.bth.opcode).isWrite && (f.ip!.src === B || f.ip!.src === B2)).map((f) => f.n);
  t.true(writes.filter((n) => n < delN).length > 50 && writes.filter((n) => n > delN).length > 50, `the failover (frame ${delN}) fell mid-transfer: ${writes.filter((n) => n < delN).length} WRITEs before, ${writes.filter((n) => n > delN).length} after`);

  const end = ourDeleteLink(r, 0);
  t.regex(await stateCheck(r, 'failover-client', 'before-close', end), /^Endpoint state vs wire \(LG1, pid \d+\): no disagreements$/);
  t.log(`smcdump diagnoses: ${r.result.smcSummary!.anomalies.map((a) => `${a.code}`).join(', ')}`);
  const exit = JSON.parse(readFileSync(join(r.result.runDir, 'ibverbs-failover-client-state-exit.json'), 'utf8')) as { linkGroups: unknown[] };
  t.is(exit.linkGroups.length, 0, 'at exit: no link group left (DELETE LINK ALL sent)');
  t.deepEqual(anomalies(r.frames), [], 'no decoder issues');
  t.deepEqual(errorDiagnoses(r.result), [], 'smcdump raises no error diagnosis on this clean run');
  t.deepEqual(r.frames.filter((f) => f.roce && f.roce.icrc !== 'ok').map((f) => f.n), [], 'every ICRC verifies');
  for (const g of ['a', 'b'] as const) {
    const dmesg = readFileSync(join(r.result.runDir, `dmesg-full-${g}.txt`), 'utf8');
    t.deepEqual(dmesg.split('\n').filter((l) => /WARNING:|BUG:|Call Trace:|Oops|general protection/.test(l)), [], `no kernel warnings in guest ${g}`);
  }
});

test.serial('kernel client → ibverbs server: two links (rxe0 + rxe1), failover during a 1.5 MiB transfer, every byte verified', async (t) => {
  const r = await get(t, 's-ibverbs-failover-server');
  const ours = JSON.parse(readFileSync(join(r.result.runDir, 'ibverbs-failover-server.json'), 'utf8')) as Side;
  const FBYTES = 1572864;
  const h = fnv1a(pattern(FBYTES));
  t.log(`paced transfer across the failover ${ours.conns[1]?.transferMs} ms; close ${ours.closeMs} ms`);
  t.deepEqual(ours.errors, []);
  t.deepEqual(ours.conns.map((c) => [c.mode, c.smcr?.firstContact, c.error ?? null]), [['smcr', true, null], ['smcr', false, null], ['smcr', false, null]]);
  // every byte of the kernel client's paced 1.5 MiB arrived across the failover; it compared our ACK
  t.deepEqual([ours.conns[1]!.bytes, ours.conns[1]!.fnv1a], [FBYTES, h]);
  const log = r.guestLog('b');
  t.regex(log, new RegExp(`client: sent ${FBYTES} bytes fnv1a=${h} .*reply: ACK ${FBYTES} fnv1a=${h}`), 'the kernel client got our ACK on the surviving link');
  const two = JSON.parse(readFileSync(join(r.result.runDir, 'ibverbs-failover-server-state-two-links.json'), 'utf8')) as { linkGroups: Array<{ links: Array<{ id: number; state: string; gid: string; peer: { gid: string } }> }> };
  t.deepEqual(two.linkGroups[0]!.links.map((l) => [l.id, l.state, l.gid, l.peer.gid]),
    [[1, 'ACTIVE', `::ffff:${A}`, `::ffff:${B}`], [2, 'ACTIVE', `::ffff:${A2}`, `::ffff:${B2}`]], 'two links, one per device, before the transfer');
  t.truthy(/MARK FAILURE: ip link set (eth\d) down on B/.exec(log), 'B took a NIC down mid-transfer');
  const llc = items(r.frames, 'llc') as Array<{ value: LlcMessage; n: number; f: (typeof r.frames)[number] }>;
  const msgs = llc.filter((l) => ['add_link', 'delete_link', 'request_add_link'].includes(l.value.kind))
    .map((l) => { const v = l.value as LlcMessage & { rejected?: boolean; linkId?: number; all?: boolean }; return `${l.n} ${l.f.ip!.src} ${v.kind}${v.response ? ' rsp' : ''}${v.rejected ? ' REJECT' : ''}${v.all ? ' ALL' : ''} link ${v.linkId ?? '-'}`; });
  t.log(msgs.join('; '));
  const adds = llc.filter((l) => l.value.kind === 'add_link').slice(0, 2).map((l) => [l.f.ip!.src, l.value.response, (l.value as LlcMessage & { rejected?: boolean }).rejected ?? false]);
  t.deepEqual(adds, [[A, false, false], [B, true, false]], 'our ADD LINK (link 2 on rxe1), accepted by the kernel client');
  const dl = llc.filter((l) => l.value.kind === 'delete_link' && !(l.value as LlcMessage & { all?: boolean }).all);
  t.true(dl.length > 0, 'the lost link is deleted (DELETE LINK)');
  const delN = dl[0]!.n;
  const writes = r.frames.filter((f) => f.roce && opcodeInfo(f.roce.ib.bth.opcode).isWrite && (f.ip!.src === B || f.ip!.src === B2)).map((f) => f.n);
  t.true(writes.filter((n) => n < delN).length > 50 && writes.filter((n) => n > delN).length > 50, `the failover (frame ${delN}) fell mid-transfer: ${writes.filter((n) => n < delN).length} WRITEs before, ${writes.filter((n) => n > delN).length} after`);

  const end = ourDeleteLink(r, dl[dl.length - 1]!.n);
  t.regex(await stateCheck(r, 'failover-server', 'before-close', end), /^Endpoint state vs wire \(LG1, pid \d+\): no disagreements$/);
  const exit = JSON.parse(readFileSync(join(r.result.runDir, 'ibverbs-failover-server-state-exit.json'), 'utf8')) as { linkGroups: unknown[] };
  t.is(exit.linkGroups.length, 0, 'at exit: no link group left (DELETE LINK ALL sent)');
  t.deepEqual(anomalies(r.frames), [], 'no decoder issues');
  t.deepEqual(errorDiagnoses(r.result), [], 'smcdump raises no error diagnosis on this clean run');
  t.deepEqual(r.frames.filter((f) => f.roce && f.roce.icrc !== 'ok').map((f) => f.n), [], 'every ICRC verifies');
  for (const g of ['a', 'b'] as const) {
    const dmesg = readFileSync(join(r.result.runDir, `dmesg-full-${g}.txt`), 'utf8');
    t.deepEqual(dmesg.split('\n').filter((l) => /WARNING:|BUG:|Call Trace:|Oops|general protection/.test(l)), [], `no kernel warnings in guest ${g}`);
  }
});

test.serial('ibverbs client → kernel server: device returns, link re-added (symmetric third link accepted, asymmetric one deleted), 1.5 MiB after it, every byte verified', async (t) => {
  const r = await get(t, 'r-ibverbs-failover');
  const ours = JSON.parse(readFileSync(join(r.result.runDir, 'ibverbs-failover-client.json'), 'utf8')) as Side;
  const FBYTES = 1572864;
  const h = fnv1a(pattern(FBYTES));
  const msgs = llcList(r, ['add_link', 'confirm_link', 'delete_link', 'request_add_link']);
  t.log(msgs.join('; '));
  // link 3 (asymmetric on the kernel's side) after the failover, then when B's NIC returns: the
  // kernel's ADD LINK for link 4 (from its returned device) accepted on our rxe0, CONFIRM LINK on
  // link 4, and the kernel deletes the asymmetric link 3 ("no longer needed"), which we answer
  const after = msgs.slice(msgs.lastIndexOf(`${A} confirm_link rsp link 3`) + 1); // rxe may retransmit it under TCG
  t.deepEqual(after.filter((m) => !/ALL/.test(m)), [
    `${B2} add_link link 4`, `${A2} add_link rsp link 4`, `${B} confirm_link link 4`, `${A} confirm_link rsp link 4`,
    `${B} delete_link link 3 0x50000`, `${A} delete_link rsp link 3 0x50000`]);
  t.false(msgs.some((m) => /REJECT/.test(m)), 'no ADD LINK rejected');
  // our view once the device was back: two links over different devices on both sides
  t.deepEqual(stateLinks(r, 'failover-client', 'relinked').map(([id, st, g, p]) => [id, st, g, p]),
    [[2, 'ACTIVE', `::ffff:${A2}`, `::ffff:${B2}`], [4, 'ACTIVE', `::ffff:${A}`, `::ffff:${B}`]]);
  // conn 3 after the re-add: the kernel sends 1.5 MiB again; every byte hashed, our ACK arrives
  const c3 = ours.conns[2]!;
  t.deepEqual([c3.mode, c3.bytes, c3.fnv1a, c3.replyOk], ['smcr', FBYTES, h, true]);
  const log = r.guestLog('b');
  t.is([...log.matchAll(new RegExp(`server: conn 1 \\[up [\\d.]+\\] reply: ACK ${FBYTES} fnv1a=${h}`, 'g'))].length, 2, 'the kernel got both ACKs (across the failover and after the re-add)');
  const del3 = (items(r.frames, 'llc') as LlcItem[]).find((l) => l.value.kind === 'delete_link' && l.value.linkId === 3 && !l.value.response)!.n;
  const w = writesBySrc(r, del3);
  t.log(`RDMA WRITEs after the asymmetric link went (per source address): ${JSON.stringify(w)}; conn 3 on link ${(c3.smcr as { link?: number } | undefined)?.link}`);
  t.true((w[B] ?? 0) + (w[B2] ?? 0) > 50, 'the kernel wrote conn 3 over the re-added group');
});

test.serial('kernel client → ibverbs server: device returns, REQUEST ADD LINK answered, link re-added (asymmetric one deleted), 1.5 MiB after it, every byte verified', async (t) => {
  const r = await get(t, 's-ibverbs-failover-server');
  const ours = JSON.parse(readFileSync(join(r.result.runDir, 'ibverbs-failover-server.json'), 'utf8')) as Side;
  const FBYTES = 1572864;
  const h = fnv1a(pattern(FBYTES));
  const msgs = llcList(r, ['add_link', 'confirm_link', 'delete_link', 'request_add_link']);
  t.log(msgs.join('; '));
  // after the kernel client deleted the lost link 1 we add link 3 at once (Linux's asymmetric
  // replacement: the kernel client has one device left); when its NIC returns it sends REQUEST
  // ADD LINK, we add link 4 (symmetric) and delete link 3 ("no longer needed")
  const lost = msgs.findIndex((m) => / delete_link link 1 0x10000$/.test(m));
  t.true(lost >= 0, 'link 1 lost (DELETE LINK LOST_PATH from the kernel client)');
  const after = msgs.slice(lost).filter((m) => !/ALL|delete_link (rsp )?link 1 /.test(m));
  t.deepEqual(after.slice(0, 4).map((m) => m.replace(/^\S+ /, '')), ['add_link link 3', 'add_link rsp link 3', 'confirm_link link 3', 'confirm_link rsp link 3'], 'our replacement link 3');
  const req = after.findIndex((m) => m.endsWith('request_add_link'));
  t.true(req > 0, 'the kernel client sent REQUEST ADD LINK when its device returned');
  t.deepEqual(after.slice(req + 1).map((m) => m.replace(/^\S+ /, '')), ['add_link link 4', 'add_link rsp link 4', 'confirm_link link 4', 'confirm_link rsp link 4', 'delete_link link 3 0x50000', 'delete_link rsp link 3 0x0']);
  t.false(msgs.some((m) => /REJECT/.test(m)), 'no ADD LINK rejected');
  const links = stateLinks(r, 'failover-server', 'relinked');
  t.is(links.length, 2);
  t.true(links.every(([, st]) => st === 'ACTIVE') && links[0]![2] !== links[1]![2] && links[0]![3] !== links[1]![3], `two links over different devices on both sides: ${JSON.stringify(links)}`);
  const c3 = ours.conns[2]!;
  t.deepEqual([c3.mode, c3.bytes, c3.fnv1a, c3.error ?? null], ['smcr', FBYTES, h, null]);
  const log = r.guestLog('b');
  t.is([...log.matchAll(new RegExp(`client: sent ${FBYTES} bytes fnv1a=${h} .*reply: ACK ${FBYTES} fnv1a=${h}`, 'g'))].length, 2, 'the kernel client got both ACKs');
  const del3 = (items(r.frames, 'llc') as LlcItem[]).find((l) => l.value.kind === 'delete_link' && l.value.linkId === 3 && !l.value.response)!.n;
  t.log(`RDMA WRITEs after the asymmetric link went (per source address): ${JSON.stringify(writesBySrc(r, del3))}`);
});

test.serial('ibverbs client → kernel server: our device goes mid-transfer and returns, REQUEST ADD LINK sent, link re-added, every byte verified', async (t) => {
  const r = await get(t, 't-ibverbs-client-relink');
  const ours = JSON.parse(readFileSync(join(r.result.runDir, 'ibverbs-failover-client.json'), 'utf8')) as Side;
  const FBYTES = 1572864;
  const h = fnv1a(pattern(FBYTES));
  t.deepEqual(ours.errors, []);
  // conn 2: we sent 1.5 MiB paced across the failure of our own device; the kernel hashed it
  // (our check of its ACK); conn 3 after the device returned: the kernel sent 1.5 MiB, we hashed it
  t.deepEqual(ours.conns.map((c) => [c.mode, c.replyOk, c.error ?? null]), [['smcr', true, null], ['smcr', true, null], ['smcr', true, null]]);
  t.deepEqual([ours.conns[2]!.bytes, ours.conns[2]!.fnv1a], [FBYTES, h]);
  const ga = r.guestLog('a');
  t.regex(ga, /MARK FAILURE: ip link set eth\d down on A/);
  t.regex(ga, /smc: rxe\d \(::ffff:10\.55\.0\.\d+\) port down/, 'rxe reported PORT_ERR to the endpoint');
  t.regex(ga, /smc: rxe\d \(::ffff:10\.55\.0\.\d+\) port active again/, 'rxe reported PORT_ACTIVE');
  const msgs = llcList(r, ['add_link', 'confirm_link', 'delete_link', 'request_add_link']);
  t.log(msgs.join('; '));
  const lost = msgs.findIndex((m) => (m.startsWith(`${A} `) || m.startsWith(`${A2} `)) && / delete_link link \d 0x10000$/.test(m));
  t.true(lost >= 0, 'we deleted the link over our lost device (DELETE LINK LOST_PATH)');
  const req = msgs.findIndex((m) => (m.startsWith(`${A} `) || m.startsWith(`${A2} `)) && m.endsWith('request_add_link'));
  t.true(req > lost, 'REQUEST ADD LINK from us after the device returned');
  const after = msgs.slice(req + 1).filter((m) => !/ALL/.test(m)).map((m) => m.replace(/^\S+ /, '').replace(/link \d+/, 'link N'));
  t.deepEqual(after.slice(0, 4), ['add_link link N', 'add_link rsp link N', 'confirm_link link N', 'confirm_link rsp link N'], 'the kernel server answered with ADD LINK, accepted');
  t.true(after.includes('delete_link link N 0x50000'), 'the kernel deleted the asymmetric link');
  t.false(msgs.some((m) => /REJECT/.test(m)), 'no ADD LINK rejected');
  const links = stateLinks(r, 'failover-client', 'relinked');
  t.true(links.length === 2 && links.every(([, st]) => st === 'ACTIVE') && links[0]![2] !== links[1]![2] && links[0]![3] !== links[1]![3], `two links over different devices on both sides: ${JSON.stringify(links)}`);
  // our state after conn 3 agrees with the capture up to our DELETE LINK (all) at the end
  const reqN = (items(r.frames, 'llc') as LlcItem[]).find((l) => l.value.kind === 'request_add_link')!.n;
  t.regex(await stateCheck(r, 'failover-client', 'before-close', ourDeleteLink(r, reqN)), /no disagreements/);
  t.deepEqual(anomalies(r.frames), [], 'no decoder issues');
  t.deepEqual(errorDiagnoses(r.result), [], 'smcdump raises no error diagnosis on this clean run');
  t.log(`smcdump diagnoses: ${[...new Set(r.result.smcSummary!.anomalies.map((a) => a.code))].join(', ')}`);
  for (const g of ['a', 'b'] as const) {
    const dmesg = readFileSync(join(r.result.runDir, `dmesg-full-${g}.txt`), 'utf8');
    t.deepEqual(dmesg.split('\n').filter((l) => /WARNING:|BUG:|Call Trace:|Oops|general protection/.test(l)), [], `no kernel warnings in guest ${g}`);
  }
});
