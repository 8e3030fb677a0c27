// TCP option 254 against real kernel SMC peers (qemu lab, Linux 6.12; see docs/lab.md):
//   node --import tsx test/native/lab-tcpopt.ts         (root; ~2 min; prints "N passed, N failed")
// 1. The lab's scenario h-host-tcp-fallback (guest A's AF_SMC client connects to the host side
//    of the lab bridge) with our own host part (lab-tcpopt-host.ts): a listener with the option.
//    The kernel must see our echo and send a CLC Proposal instead of falling back at once.
// 2. The lab's scenario a-first-contact (guest B is a kernel SMC server) with a host part of ours
//    (lab-tcpopt-client.ts) that connects to B with the option: B's SYN-ACK must carry it.
// Every frame is decoded with our FrameDecoder.
import { readFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { FrameDecoder } from '../../dissectors/frame.js';
import { readFrames } from '../helpers.js';
import { preflight, runScenario } from '../lab/harness.js';
import { SMCR_OPTION, isSyn, isSynAck, smcOption } from './netns.js';

const why = preflight();
if (why) { console.log(`lab-tcpopt: skipped: ${why}`); process.exit(0); }

const here = dirname(fileURLToPath(import.meta.url));
const runDir = mkdtempSync(join(tmpdir(), 'smcscope-t5-lab-'));
const result = await runScenario({
  name: 'h-host-tcp-fallback',
  runDir,
  host: { command: [process.execPath, '--import', 'tsx', join(here, 'lab-tcpopt-host.ts')] },
});

let pass = 0;
let fail = 0;
const check = (ok: boolean, what: string): void => {
  if (ok) pass++; else fail++;
  console.log(`${ok ? 'ok' : 'not ok'} - ${what}`);
};

check(result.leftovers.length === 0, 'the lab left nothing behind');
check(result.ok, `scenario passed (the kernel client completed after our Decline)${result.failure ? `: ${result.failure}` : ''}`);
const frames = (await readFrames(result.pcap)).map(((d) => (f: Parameters<FrameDecoder['decode']>[0]) => d.decode(f))(new FrameDecoder()));
const syn = frames.find((f) => isSyn(f) && f.tcp!.dstPort === 12345);
const synAck = frames.find((f) => isSynAck(f) && f.tcp!.srcPort === 12345);
check(!!syn && JSON.stringify(smcOption(syn)) === JSON.stringify(SMCR_OPTION), 'the kernel client\'s SYN carries FE 06 E2 D4 C3 D9');
check(!!synAck && JSON.stringify(smcOption(synAck)) === JSON.stringify(SMCR_OPTION), 'our SYN-ACK (10.55.0.254) echoes it');
const clc = frames.flatMap((f) => f.smc.filter((i) => i.proto === 'clc').map((i) => ({ f, i })));
const proposal = clc.find(({ i }) => i.proto === 'clc' && i.value.type === 'proposal');
check(!!proposal && proposal.f.ip?.src === '10.55.0.1', `the kernel sent a CLC Proposal (decoded by our dissector: ${proposal?.i.summary ?? 'none'})`);
const decline = clc.find(({ i }) => i.proto === 'clc' && i.value.type === 'decline');
check(!!decline && decline.f.ip?.src === '10.55.0.254', `our CLC Decline is on the wire (${decline?.i.summary ?? 'none'})`);

// ---- 2. our client -> kernel SMC server ----
const runDir2 = mkdtempSync(join(tmpdir(), 'smcscope-t5-lab-'));
const result2 = await runScenario({
  name: 'a-first-contact',
  runDir: runDir2,
  host: { command: [process.execPath, '--import', 'tsx', join(here, 'lab-tcpopt-client.ts')] },
});
check(result2.leftovers.length === 0, 'the lab left nothing behind (run 2)');
check(result2.ok, `a-first-contact still passes with our extra client${result2.failure ? `: ${result2.failure}` : ''}`);
const d2 = new FrameDecoder();
const frames2 = (await readFrames(result2.pcap)).map((f) => d2.decode(f));
const ourSyn = frames2.find((f) => isSyn(f) && f.ip?.src === '10.55.0.254' && f.tcp!.dstPort === 12345);
const kernSynAck = ourSyn && frames2.find((f) => isSynAck(f) && f.ip?.src === '10.55.0.2' && f.tcp!.dstPort === ourSyn.tcp!.srcPort);
check(!!ourSyn && JSON.stringify(smcOption(ourSyn)) === JSON.stringify(SMCR_OPTION), 'our SYN to guest B carries FE 06 E2 D4 C3 D9');
check(!!kernSynAck && smcOption(kernSynAck) !== undefined && kernSynAck.smc.some((i) => i.proto === 'tcpopt' && i.value.name === 'smc-r'),
  `the kernel SMC server's SYN-ACK answers with the option (${kernSynAck ? kernSynAck.tcp!.options.map((o) => o.kind).join(',') : 'no SYN-ACK'})`);
let client: { result?: { role: string; weSent: boolean; peerHad: boolean; synSmc: boolean } } = {};
try { client = JSON.parse(readFileSync(join(runDir2, 'tcpopt-client.json'), 'utf8')) as typeof client; } catch { /* checked below */ }
check(client.result?.role === 'active' && client.result.synSmc === true, `our client read syn_smc from the program (${JSON.stringify(client.result)})`);
const aProposals = frames2.filter((f) => f.smc.some((i) => i.proto === 'clc' && i.value.type === 'proposal'));
check(aProposals.length === 1 && aProposals[0]!.ip?.src === '10.55.0.1', 'only guest A sent a CLC Proposal; the scenario\'s own SMC-R connection was untouched');

let host: { result?: { role: string; weSent: boolean; peerHad: boolean; synSmc: boolean }; proposal?: { type: string } } = {};
try { host = JSON.parse(readFileSync(join(runDir, 'tcpopt-host.json'), 'utf8')) as typeof host; } catch { /* checked below */ }
check(host.result?.role === 'passive' && host.result.synSmc === true, `our listener read syn_smc from the program (${JSON.stringify(host.result)})`);
check(host.proposal?.type === 'proposal', 'the host part decoded the Proposal it received');
const guestLog = result.guests.a ? readFileSync(result.guests.a.log, 'utf8') : '';
console.log(`guest A: ${guestLog.split('\n').filter((l) => /fallback|ACK|DECL|smc/i.test(l)).slice(0, 6).join(' | ')}`);
console.log(`run folders: ${runDir} ${runDir2}`);
console.log(`${pass} passed, ${fail} failed`);
process.exit(fail ? 1 : 0);
