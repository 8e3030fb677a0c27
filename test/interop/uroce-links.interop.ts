// Our endpoint over uroce (host side of the lab bridge) with TWO local addresses against Linux
// 6.12 kernel SMC-R with two rxe devices (guest A), both roles, in one lab run
// (test/lab/scenarios/u-uroce-failover.*): the second link comes up with the kernel (ADD LINK v2
// with the rkey list), then the host part deletes our address under conn 2's link while we send
// 1.5 MiB paced: uroce reports PORT_ERR, we fail the link over (DELETE LINK LOST_PATH, failover
// validation CDC, replay) and the transfer ends on the surviving link; the kernel hashes every
// byte (FNV-1a) and we compare its answer. Each phase's endpoint state is checked against the
// capture with `smcdump --state`, and the capture with the project's decoder.
import test, { type ExecutionContext } from 'ava';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { CdcMessage } from '../../dissectors/wire/cdc.js';
import type { ClcAcceptConfirm } from '../../dissectors/wire/clc.js';
import { opcodeInfo } from '../../dissectors/wire/ib.js';
import { anomalies, errorDiagnoses, fnv1a, foreignFrames, items, type Run } from './support.js';
import { get, llcList, ourDeleteLink, stateFileCheck, stateLinks, type LlcItem } from './labruns.js';

const NAME = 'u-uroce-failover';
const A = '10.55.0.1', A2 = '10.55.0.11', HOST = '10.55.0.254';
/** Our two uroce addresses in each phase (u-uroce-failover.host.ts). */
const OURS = { 1: ['10.55.0.252', '10.55.0.253'], 2: ['10.55.0.250', '10.55.0.251'] } as const;
const BYTES = 1572864;
const pattern = (n: number): Buffer => Buffer.from(Array.from({ length: n }, (_, i) => '0123456789abcdef'.charCodeAt(i % 16)));
const hash = fnv1a(pattern(BYTES));

interface Conn { n: number; mode: string; smcr?: { firstContact: boolean; version: number; release: number; link: number }; bytes: number; fnv1a: string; reply?: string; replyOk?: boolean; transferMs?: number; error?: string }
interface Side { conns: Conn[]; closeMs: number; errors: string[] }

/** Frames of one phase, from the SYN of its first connection: phase 1 (our client to the kernel's
 *  12345; the host part's warm-up went to 12349 before it), phase 2 (the kernel client to our
 *  12347). */
function phaseRange(r: Run, phase: 1 | 2): [number, number] {
  const syn = (port: number): number => r.frames.find((f) => f.tcp && f.tcp.dstPort === port && f.tcp.flags.syn && !f.tcp.flags.ack)?.n ?? Infinity;
  return phase === 1 ? [syn(12345) - 1, syn(12347)] : [syn(12347) - 1, Infinity];
}

async function failoverPhase(t: ExecutionContext, role: 'failover-client' | 'failover-server', phase: 1 | 2): Promise<void> {
  const r = await get(t, NAME);
  const [from, to] = phaseRange(r, phase);
  const addrs: readonly string[] = OURS[phase];
  const inPhase = (n: number): boolean => n > from && n < to;
  const ours = JSON.parse(readFileSync(join(r.result.runDir, `uroce-${role}.json`), 'utf8')) as Side;
  t.log(`transfer across the failover ${ours.conns[1]?.transferMs} ms; close ${ours.closeMs} ms`);
  t.deepEqual(ours.errors, []);
  t.deepEqual(ours.conns.map((c) => [c.mode, c.smcr?.firstContact, c.smcr?.version, c.smcr?.release, c.error ?? null]),
    [['smcr', true, 2, 1, null], ['smcr', false, 2, 1, null]], 'two SMC-Rv2.1 connections: first, then subsequent contact');
  // every byte of our paced 1.5 MiB arrived across the failover: the kernel's hash is ours
  const c2 = ours.conns[1]!;
  t.deepEqual([c2.bytes, c2.fnv1a, c2.reply, c2.replyOk], [BYTES, hash, `ACK ${BYTES} fnv1a=${hash}`, true]);
  const ga = r.guestLog('a');
  t.regex(ga, phase === 1 ? new RegExp(`server: conn 1 received ${BYTES} bytes .*fnv1a=${hash}`) : new RegExp(`client: \\[up [\\d.]+\\] received ${BYTES} bytes fnv1a=${hash}`),
    'the kernel received and hashed all of it');

  // two links before the transfer, one per address on our side and per device on the kernel's
  const two = stateLinks(r, 'uroce', role, 'two-links');
  t.is(two.length, 2, JSON.stringify(two));
  t.deepEqual(two.map(([, st]) => st), ['ACTIVE', 'ACTIVE']);
  t.deepEqual(two.map(([, , g]) => g).sort(), addrs.map((a) => `::ffff:${a}`));
  t.deepEqual(two.map(([, , , p]) => p).sort(), [`::ffff:${A}`, `::ffff:${A2}`]);
  const llc = (items(r.frames, 'llc') as LlcItem[]).filter((l) => inPhase(l.n));
  const adds = llc.filter((l) => l.value.kind === 'add_link').slice(0, 2)
    .map((l) => [addrs.includes(l.f.ip!.src) ? 'us' : 'kernel', l.value.response, l.value.rejected ?? false, (l.value as { v2?: { numRkeys: number } }).v2?.numRkeys ?? 0]);
  t.deepEqual(adds.map(([who, rsp, rej]) => [who, rsp, rej]), phase === 1 ? [['kernel', false, false], ['us', true, false]] : [['us', false, false], ['kernel', true, false]],
    'the second link: the server\'s ADD LINK v2, accepted');
  t.true(adds.every(([, , , n]) => (n as number) >= 1), `both ADD LINKs carry the rkey list: ${JSON.stringify(adds)}`);

  // the failure: our address under conn 2's link was deleted; uroce reported the port down
  const host = readFileSync(join(r.result.runDir, 'host.log'), 'utf8').split('\n');
  const gone = host.filter((l) => /MARK FAILURE: ip addr del/.test(l))[phase - 1];
  t.truthy(gone, 'the host part deleted an address mid-transfer');
  const addr = /ip addr del (\S+)\/24/.exec(gone ?? '')?.[1];
  t.true(addrs.includes(addr ?? ''), `one of our uroce addresses went: ${addr}`);
  t.true(host.some((l) => l.includes(`uroce-${role}]`) && l.includes(`(::ffff:${addr}) port down`)), 'uroce reported PORT_ERR for it');
  // our DELETE LINK LOST_PATH on the surviving link, then the validation CDC(s) on it
  const lost = llc.find((l) => l.value.kind === 'delete_link' && !l.value.response && !l.value.all && l.value.reason === 0x00010000 && addrs.includes(l.f.ip!.src));
  t.truthy(lost, 'our DELETE LINK LOST_PATH');
  t.not(lost?.f.ip!.src, addr, 'sent over the surviving address');
  const cdc = items(r.frames, 'cdc').filter((c) => inPhase(c.n) && c.n > (lost?.n ?? 0));
  t.true(cdc.some((c) => (c.value as CdcMessage).prodFlags.failoverValidation && addrs.includes(c.f.ip!.src)), 'our failover validation CDC');
  const writes = r.frames.filter((f) => inPhase(f.n) && f.roce && opcodeInfo(f.roce.ib.bth.opcode).isWrite && addrs.includes(f.ip!.src));
  const before = writes.filter((f) => f.n < lost!.n).length, after = writes.filter((f) => f.n > lost!.n);
  t.true(before > 50 && after.length > 50, `the failover (frame ${lost?.n}) fell mid-transfer: ${before} WRITE packets before, ${after.length} after`);
  t.false(after.some((f) => f.ip!.src === addr), 'nothing sent from the gone address after the failover');
  t.log(llcList({ ...r, frames: r.frames.filter((f) => inPhase(f.n)) }, ['add_link', 'confirm_link', 'delete_link', 'request_add_link']).join('; '));

  // our state before the close agrees with the capture up to our DELETE LINK (all); none at exit
  const end = ourDeleteLink(r, addrs, lost!.n);
  t.regex(await stateFileCheck(r, `uroce-${role}-state-before-close.json`, end, from + 1), /no disagreements/);
  const exit = JSON.parse(readFileSync(join(r.result.runDir, `uroce-${role}-state-exit.json`), 'utf8')) as { linkGroups: unknown[] };
  t.is(exit.linkGroups.length, 0, 'at exit: no link group left (DELETE LINK ALL sent)');
  // the CLC of the phase ran from the bridge's lab address, the RoCE traffic from the uroce ones
  const clc = items(r.frames, 'clc').filter((c) => inPhase(c.n));
  t.true(clc.every((c) => c.f.ip!.src === HOST || c.f.ip!.src === A), 'CLC between the lab address and the guest');
  t.true(clc.filter((c) => c.value.type !== 'proposal' && c.value.type !== 'decline').every((c) => (c.value as ClcAcceptConfirm).r !== undefined));
}

/** The run as a whole: a clean capture, the kernel quiet. */
function cleanRun(t: ExecutionContext, r: Run): void {
  t.deepEqual(anomalies(r.frames), [], 'no decoder issues');
  t.deepEqual(errorDiagnoses(r.result), [], 'smcdump raises no error diagnosis');
  t.log(`smcdump diagnoses: ${[...new Set(r.result.smcSummary!.anomalies.map((a) => a.code))].join(', ')}`);
  t.deepEqual(foreignFrames(r.frames), [], 'only lab addresses on the bridge');
  t.deepEqual(r.frames.filter((f) => f.roce && f.roce.icrc !== 'ok').map((f) => f.n), [], 'every ICRC verifies');
  const dmesg = readFileSync(join(r.result.runDir, 'dmesg-full-a.txt'), 'utf8');
  t.deepEqual(dmesg.split('\n').filter((l) => /WARNING:|BUG:|Call Trace:|Oops|general protection/.test(l)), [], 'no kernel warnings');
}

test.serial('uroce client → kernel server: two links, failover during a 1.5 MiB transfer, every byte verified', async (t) => {
  await failoverPhase(t, 'failover-client', 1);
});

test.serial('kernel client → uroce server: two links, failover during a 1.5 MiB transfer, every byte verified', async (t) => {
  await failoverPhase(t, 'failover-server', 2);
});

test.serial('uroce ↔ kernel: two-link failover run: clean capture (decoder, ICRC, only lab addresses), kernel quiet', async (t) => {
  cleanRun(t, await get(t, NAME));
});
