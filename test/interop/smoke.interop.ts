// Interop smoke subset (CI runs this file after the unit tests): the most important scenario of
// each layer that exists. So far: kernel↔kernel SMC-R first contact, captured on the lab bridge
// and decoded by our pipeline with no anomalies; and the harness's own promise that an
// interrupted run leaves nothing behind.
import test from 'ava';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ClcAcceptConfirm, ClcProposal } from '../../dissectors/wire/clc.js';
import type { LlcMessage } from '../../dissectors/wire/llc.js';
import { LAB_DIR, ROOT, SCENARIO_DIR, leftovers, preflight } from '../lab/harness.js';
import { anomalies, carries, fnv1a, foreignFrames, items, run } from './support.js';

/** The scenario's own payload (one source of truth: the scenario file). */
function scenarioMessage(name: string): string {
  const m = /^MSG='([^']*)'/m.exec(readFileSync(join(SCENARIO_DIR, `${name}.sh`), 'utf8'));
  if (!m) throw new Error(`no MSG= in ${name}.sh`);
  return m[1]!;
}

test('kernel↔kernel SMC-Rv2 first contact: captured on the bridge, decoded with no anomalies', async (t) => {
  const msg = scenarioMessage('a-first-contact');
  const { result, raw, frames, guestLog } = await run(t, { name: 'a-first-contact' });
  const A = '10.55.0.1', B = '10.55.0.2';

  t.deepEqual(anomalies(frames), [], 'no issue beyond the documented note');
  t.deepEqual(foreignFrames(frames), [], 'only lab addresses on the bridge');
  const roce = frames.filter((f) => f.roce);
  t.true(roce.length >= 20, `${roce.length} RoCE frames`);
  t.deepEqual(roce.filter((f) => f.roce!.icrc !== 'ok').map((f) => f.n), [], 'every ICRC verifies');
  t.true(roce.every((f) => f.roce!.version === 2 && f.udp?.dstPort === 4791));

  // TCP option 254 (ExID 0xE2D4C3D9) on the SYN and the SYN-ACK, nowhere else.
  const opts = items(frames, 'tcpopt');
  t.deepEqual(opts.map((o) => [o.f.ip!.src, o.f.tcp!.flags.syn, o.f.tcp!.flags.ack, o.value.exid]),
    [[A, true, false, 0xe2d4c3d9], [B, true, true, 0xe2d4c3d9]]);

  // CLC: Proposal (A) → Accept (B) → Confirm (A), SMC-Rv2 first contact.
  const clc = items(frames, 'clc');
  t.deepEqual(clc.map((c) => [c.f.ip!.src, c.value.type, c.value.version]), [[A, 'proposal', 2], [B, 'accept', 2], [A, 'confirm', 2]]);
  const prop = clc[0]!.value as ClcProposal;
  t.deepEqual(prop.v2?.eids, ['SMC-LAB-UEID']);
  t.is(prop.v2?.roceV2Gid, `::ffff:${A}`);
  const acc = clc[1]!.value as ClcAcceptConfirm;
  const conf = clc[2]!.value as ClcAcceptConfirm;
  t.true(acc.firstContact && conf.firstContact);
  // Fresh guests: the link's QP is the first QP rxe hands out (0x11); first token 1; 64 KiB
  // RMBs (code 2); IB MTU 1024 (code 3, 1500-byte Ethernet); host names from the guests.
  t.deepEqual([acc.r?.qpn, acc.r?.token, acc.r?.rmbeSizeCode, acc.r?.mtuCode, acc.r?.fce?.hostname, acc.r?.fce?.v2Direct],
    [0x11, 1, 2, 3, 'guestb', true]);
  t.deepEqual([conf.r?.qpn, conf.r?.token, conf.r?.rmbeSizeCode, conf.r?.mtuCode, conf.r?.fce?.hostname, conf.r?.eid],
    [0x11, 1, 2, 3, 'guesta', 'SMC-LAB-UEID']);
  t.is(acc.r?.gid, `::ffff:${B}`);
  t.is(conf.r?.gid, `::ffff:${A}`);

  // LLC CONFIRM LINK: request from the server (B), response from the client (A), link 1.
  const llc = items(frames, 'llc');
  const cl = llc.filter((l) => l.value.kind === 'confirm_link') as Array<{ value: Extract<LlcMessage, { kind: 'confirm_link' }>; f: (typeof llc)[number]['f'] }>;
  t.deepEqual(cl.map((l) => [l.f.ip!.src, l.value.response, l.value.linkId, l.value.gid, l.value.qpn]),
    [[B, false, 1, `::ffff:${B}`, 0x11], [A, true, 1, `::ffff:${A}`, 0x11]]);
  // The first LLC message is the server's first SEND: its PSN is the Accept's initial PSN.
  t.is(cl[0]!.f.roce!.ib.bth.psn, acc.r!.psn);

  // The payload: one RDMA WRITE into B's RMB (Accept's rkey and VA) carrying the message bytes,
  // announced by a CDC (producer cursor 0:54, B's token); the reply (22 bytes) comes back the
  // same way. The message never travels in TCP (SMC-R, not a fallback).
  const writes = frames.filter((f) => f.roce?.ib.bth.opcode === 0x0a);
  t.deepEqual(writes.map((w) => [w.ip!.src, w.roce!.ib.reth?.dmaLen]), [[A, msg.length], [B, `ACK ${msg.length} fnv1a=${fnv1a(msg)}\n`.length]]);
  t.is(writes[0]!.roce!.ib.reth?.rkey, acc.r?.rkey);
  t.is(writes[0]!.roce!.ib.reth?.va, acc.r?.rmbVa);
  t.is(writes[1]!.roce!.ib.reth?.rkey, conf.r?.rkey);
  t.is(writes[1]!.roce!.ib.reth?.va, conf.r?.rmbVa);
  t.true(carries(raw[writes[0]!.n - 1]!, msg), 'the RDMA WRITE carries the message');
  t.deepEqual(frames.filter((f) => f.tcp && carries(raw[f.n - 1]!, msg)).map((f) => f.n), [], 'no TCP segment carries it');
  const cdc = items(frames, 'cdc');
  const firstA = cdc.find((c) => c.f.ip!.src === A)!;
  t.deepEqual([firstA.value.seq, firstA.value.token, firstA.value.prod.wrap, firstA.value.prod.count], [1, 1, 0, msg.length]);
  t.true(firstA.n > writes[0]!.n, 'CDC after the data');
  t.true(cdc.some((c) => c.f.ip!.src === B && c.value.prod.count === writes[1]!.roce!.ib.reth?.dmaLen && c.value.cons.count === msg.length));
  t.true(cdc.some((c) => c.value.connFlags.peerConnClosed), 'close flags');

  // smcdump (the CLI a user runs) agrees: SMC items counted, no errors.
  t.regex(result.smcdumpSummary, /^\d+ frames; SMC: 2 tcpopt, 3 clc, \d+ llc, \d+ cdc, 2 rdma; \d+ issues \(0 errors\)$/);
  t.regex(result.smcdumpText, /CLC Proposal v2 SMC-Rv2 rel 2\.1 ueid SMC-LAB-UEID gid ::ffff:10\.55\.0\.1/);
  t.regex(result.smcdumpText, /LLC CONFIRM LINK v2 req link 1 qp 0x11 gid ::ffff:10\.55\.0\.2/);
  // smcdump's correlation (--summary --json): no anomalies; one v2.1 link group with one clean
  // link and one SMC-R connection that carried exactly the message and the reply.
  const sum = result.smcSummary!;
  t.deepEqual(sum.anomalies, []);
  t.is(sum.linkGroups.length, 1);
  const lg = sum.linkGroups[0]!;
  t.deepEqual([lg.version, lg.release, lg.ueid, lg.maxLinks, lg.maxConns, lg.clientHost, lg.serverHost], [2, 1, 'SMC-LAB-UEID', 2, 255, 'guesta', 'guestb']);
  t.is(lg.links.length, 1);
  const link = lg.links[0]!;
  t.deepEqual([link.mtu, link.retransmits, link.psnGaps, link.naks, link.rnrNaks], [1024, 0, 0, 0, 0]);
  t.is(sum.connections.length, 1);
  const conn = sum.connections[0]! as { mode: string; synSmc: boolean; synAckSmc: boolean; smc: { dirs: Array<{ bytes: number; writeBytes: number; closed: boolean }> } };
  t.deepEqual([conn.mode, conn.synSmc, conn.synAckSmc], ['smc-r', true, true]);
  t.deepEqual(conn.smc.dirs.map((d) => [d.bytes, d.writeBytes, d.closed]),
    [[msg.length, msg.length, true], [writes[1]!.roce!.ib.reth!.dmaLen, writes[1]!.roce!.ib.reth!.dmaLen, true]]);

  // The guests saw the same: smc_diag says SMCR (not fallback) and the reply's checksum matches.
  t.regex(guestLog('a'), /state=ACTIVE +mode=SMCR +10\.55\.0\.1:\d+ <-> 10\.55\.0\.2:12345/);
  t.regex(guestLog('a'), new RegExp(`client: sent ${msg.length} bytes fnv1a=${fnv1a(msg)} .*reply: ACK ${msg.length} fnv1a=${fnv1a(msg)}`));
  t.regex(guestLog('b'), new RegExp(`server: conn 1 received ${msg.length} bytes .*fnv1a=${fnv1a(msg)}`));
  t.regex(guestLog('b'), /srv_v2_succ\D+1\b/);
});

test('an interrupted run (Ctrl-C while the scenario runs) stops everything and removes its network', async (t) => {
  const why = preflight();
  if (why) t.fail(`the lab cannot run on this machine: ${why}`);
  const child = spawn(process.execPath, ['--import', 'tsx', join(LAB_DIR, 'lab.ts'), 'boot-check'], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d: Buffer) => { out += d.toString(); });
  child.stderr.on('data', (d: Buffer) => { out += d.toString(); });
  const exited = new Promise<number | null>((r) => child.on('close', (c) => r(c)));
  // Wait until both guests booted and run the scenario, then interrupt like a terminal's Ctrl-C.
  const deadline = Date.now() + 300_000;
  let runDir = '', ns = '';
  let qemus: string[] = [];
  while (Date.now() < deadline) {
    runDir = /run folder (\S+)/.exec(out)?.[1] ?? '';
    ns = /(smcscope-lab-\d+-\d+):/.exec(out)?.[1] ?? '';
    if (runDir && ns) {
      runDir = join(ROOT, runDir);
      qemus = leftovers(ns, runDir).filter((l) => l.includes('qemu-system-x86_64'));
      if (qemus.length >= 2 && existsSync(join(runDir, 'sync', 'host.go'))) break;
    }
    if (child.exitCode !== null) break;
    await new Promise((r) => setTimeout(r, 500));
  }
  t.true(qemus.length >= 2, `guests were running before the interrupt:\n${out}`);
  t.true(leftovers(ns, runDir).some((l) => l.startsWith('network namespace')), 'the lab network existed');
  child.kill('SIGINT');
  const code = await exited;
  t.is(code, 130, out);
  t.regex(out, /SIGINT: stopping the guests and removing the lab network/);
  t.deepEqual(leftovers(ns, runDir), [], 'no namespace, process or mount left');
});
