// Link-group limits against Linux 6.12 kernel SMC-R (scenario test/lab/scenarios/w-uroce-limits.*):
// the guest lowers net.smc.smcr_max_conns_per_lgr to 16; our endpoint over uroce (host side,
// max links 1) opens or accepts 17 connections at once in each role. The limit is negotiated in
// CLC v2.1 (the first-contact Accept's max connections) and carried in CONFIRM LINK; the 17th
// connection finds its group full and opens a second link group (first contact) on both sides;
// every connection's data is hashed (FNV-1a) by its receiver and compared by its sender.
import test from 'ava';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ClcAcceptConfirm } from '../../dissectors/wire/clc.js';
import type { LlcConfirmLink } from '../../dissectors/wire/llc.js';
import { anomalies, errorDiagnoses, fnv1a, foreignFrames, items, trackerAnomalies } from './support.js';
import { get, ourDeleteLink, stateFileCheck, type LlcItem } from './labruns.js';

const NAME = 'w-uroce-limits';
const A = '10.55.0.1', HOST = '10.55.0.254';
const N = 17, BULK = 65536;
const bulkHash = fnv1a(Buffer.from(Array.from({ length: BULK }, (_, i) => '0123456789abcdef'.charCodeAt(i % 16))));

interface Rec { n: number; mode: string; smcr?: { linkGroup: string; firstContact: boolean; version: number; release: number }; bytes?: number; fnv1a?: string; replyOk?: boolean; error?: string }
interface Limits { server: Rec[]; client: Rec[]; errors: string[]; closeMs: number }

/** Connections per link group, largest first. */
const split = (recs: Rec[]): number[] => {
  const m = new Map<string, number>();
  for (const r of recs) m.set(r.smcr?.linkGroup ?? '-', (m.get(r.smcr?.linkGroup ?? '-') ?? 0) + 1);
  return [...m.values()].sort((a, b) => b - a);
};

test.serial('kernel client → uroce server: max connections 16 (kernel sysctl), 17 at once: a second link group, every byte verified', async (t) => {
  const r = await get(t, NAME);
  const o = JSON.parse(readFileSync(join(r.result.runDir, 'limits.json'), 'utf8')) as Limits;
  t.deepEqual(o.errors, []);
  t.is(o.server.length, N);
  t.true(o.server.every((c) => c.mode === 'smcr' && !c.error && c.smcr?.version === 2 && c.smcr.release === 1), 'all SMC-Rv2.1');
  t.deepEqual(split(o.server), [16, 1], 'a full group of 16 and a second group');
  t.is(o.server.filter((c) => c.smcr?.firstContact).length, 2, 'two first contacts');
  t.deepEqual(o.server.map((c) => [c.bytes, c.fnv1a]), Array<[number, string]>(N).fill([BULK, bulkHash]), 'our server hashed every byte of every connection');
  const ga = r.guestLog('a');
  t.is([...ga.matchAll(new RegExp(`^\\[c1\\.\\d+\\] client: sent ${BULK} bytes fnv1a=${bulkHash} .*reply: ACK ${BULK} fnv1a=${bulkHash}`, 'gm'))].length, N, 'every kernel client got our matching ACK');
  // the kernel's view with all 17 open: two client link groups, 16 + 1, max_conns 16
  const view = ga.slice(ga.indexOf(`SMC state: A with ${N} connections to our server`), ga.indexOf(`end SMC state: A with ${N} connections to our server`));
  t.deepEqual([...view.matchAll(/conns = (\d+)\n\s+role = 0 \(CLIENT\)/g)].map((m) => Number(m[1])).sort((a, b) => b - a).slice(0, 2), [16, 1]);
  t.true([...view.matchAll(/max_conns = (\d+)/g)].every((m) => m[1] === '16'));
  // on the wire: our first-contact Accepts offer 16 (the kernel client proposed 16), CONFIRM LINK carries it
  const clc = items(r.frames, 'clc');
  const accepts = clc.filter((c) => c.value.type === 'accept' && c.f.ip!.src === HOST && (c.value as ClcAcceptConfirm).firstContact);
  t.deepEqual(accepts.map((c) => (c.value as ClcAcceptConfirm).r?.fce?.maxConns), [16, 16]);
  t.deepEqual(accepts.map((c) => (c.value as ClcAcceptConfirm).r?.fce?.maxLinks), [1, 1], 'max links 1 offered');
  const proposals = clc.filter((c) => c.value.type === 'proposal' && c.f.ip!.src === A);
  t.true(proposals.every((c) => (c.value as { v2?: { maxConns?: number } }).v2?.maxConns === 16), 'the kernel client proposes its sysctl value');
  const confirms = (items(r.frames, 'llc') as LlcItem[]).filter((l) => l.value.kind === 'confirm_link' && l.f.ip!.src === HOST && !l.value.response);
  t.deepEqual(confirms.slice(0, 2).map((l) => [(l.value as LlcConfirmLink).maxConns, (l.value as LlcConfirmLink).maxLinks]), [[16, 1], [16, 1]]);
  t.is(items(r.frames, 'llc').filter((l) => l.value.kind === 'add_link').length, 0, 'max links 1: no ADD LINK');
});

test.serial('uroce client → kernel server: max connections 16 (kernel sysctl), 17 at once: a second link group, every byte verified', async (t) => {
  const r = await get(t, NAME);
  const o = JSON.parse(readFileSync(join(r.result.runDir, 'limits.json'), 'utf8')) as Limits;
  t.is(o.client.length, N);
  t.true(o.client.every((c) => c.mode === 'smcr' && !c.error), JSON.stringify(o.client.filter((c) => c.mode !== 'smcr' || c.error)));
  t.deepEqual(split(o.client), [16, 1]);
  t.is(o.client.filter((c) => c.smcr?.firstContact).length, 2);
  t.true(o.client.every((c) => c.replyOk), 'the kernel server hashed every byte of every connection (its ACK matches)');
  const ga = r.guestLog('a');
  const view = ga.slice(ga.indexOf(`SMC state: A with ${N} connections from our client`), ga.indexOf(`end SMC state: A with ${N} connections from our client`));
  t.deepEqual([...view.matchAll(/conns = (\d+)\n\s+role = 1 \(SERVER\)/g)].map((m) => Number(m[1])).sort((a, b) => b - a), [16, 1], 'the kernel server: 16 + 1');
  // the kernel server's first-contact Accepts: max connections min(255 ours, 16 its own)
  const clc = items(r.frames, 'clc');
  const accepts = clc.filter((c) => c.value.type === 'accept' && c.f.ip!.src === A && (c.value as ClcAcceptConfirm).firstContact);
  t.deepEqual(accepts.map((c) => (c.value as ClcAcceptConfirm).r?.fce?.maxConns), [16, 16]);
  const confirms = (items(r.frames, 'llc') as LlcItem[]).filter((l) => l.value.kind === 'confirm_link' && l.f.ip!.src === A && !l.value.response);
  t.true(confirms.length >= 2 && confirms.every((l) => (l.value as LlcConfirmLink).maxConns === 16), 'the kernel\'s CONFIRM LINK carries 16');
  // our state (all four groups) agrees with the capture up to our first DELETE LINK; none at exit
  t.regex(await stateFileCheck(r, 'limits-state-before-close.json', ourDeleteLink(r, [HOST], 0)), /no disagreements/);
  const exit = JSON.parse(readFileSync(join(r.result.runDir, 'limits-state-exit.json'), 'utf8')) as { linkGroups: unknown[] };
  t.is(exit.linkGroups.length, 0);
  t.deepEqual(anomalies(r.frames), [], 'no decoder issues');
  t.deepEqual(trackerAnomalies(r.result), [], 'no correlation anomalies');
  t.deepEqual(errorDiagnoses(r.result), []);
  t.deepEqual(foreignFrames(r.frames), []);
  t.deepEqual(r.frames.filter((f) => f.roce && f.roce.icrc !== 'ok').map((f) => f.n), [], 'every ICRC verifies');
});
