// The `ibverbs` provider on a real kernel (Linux 6.12, rdma_rxe) in a qemu lab guest:
//   node --import tsx test/native/lab-ibverbs.ts        (root; ~3 min under TCG)
// Uses the lab's cached guest image read-only (test/lab, docs/lab.md) with a runner of its own:
// its own network namespace (smcscope-t5ibv-PID: bridge + one tap, 10.55.0.254 on the bridge,
// no uplink), its own staging folder under /tmp. The guest gets this host's node binary, the
// provider bundled with esbuild and the built addon through the 9p run folder, and runs
// lab-ibverbs-guest.ts (ibverbs on rxe0, then against a uroce QP on the host side run by
// lab-ibverbs-host.ts). Every frame on the bridge is captured and decoded with FrameDecoder.
// Prints one line per check and "N passed, N failed".
//
//   node --import tsx test/native/lab-ibverbs.ts --conformance   (root; ~N min under TCG)
// runs the verbs conformance suite instead (test/verbs/cases-*.ts, the cases ava runs on uroce)
// on the ibverbs provider over rxe0 in the guest: lab-conformance-guest.ts, no host part.
// CONFORMANCE_ONLY=REGEX selects cases by title.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, openSync, closeSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { FrameDecoder } from '../../dissectors/frame.js';
import { readFrames } from '../helpers.js';
import { imageDir, preflight } from '../lab/harness.js';
import { verbsAddonPath } from '../../endpoint/verbs/ibverbs/index.js';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');
const conformance = process.argv.includes('--conformance');
const why = preflight({ needBuild: false });
const image = imageDir();
if (why || !image) { console.log(`lab-ibverbs: skipped: ${why ?? 'the lab image is not built (npm run lab -- image)'}`); process.exit(0); }
if (!existsSync(verbsAddonPath())) { console.log('lab-ibverbs: the addon is not built (node-gyp rebuild -C native/verbs)'); process.exit(1); }

const NS = `smcscope-t5ibv-${process.pid}`;
const BR = 'smct5br0';
const TAP = 'smct5tapa';
const tmp = mkdtempSync(join(tmpdir(), 'smcscope-t5-ibv-'));
const labDir = join(tmp, 'lab');
const runDir = join(tmp, 'out');
const procs: ChildProcess[] = [];
const sh = (cmd: string, args: string[]): { code: number | null; out: string; err: string } => {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  return { code: r.status, out: r.stdout ?? '', err: r.stderr ?? '' };
};
const must = (cmd: string, args: string[]): void => {
  const r = sh(cmd, args);
  if (r.code !== 0) throw new Error(`${cmd} ${args.join(' ')}: ${r.err.trim()}`);
};
function cleanup(): void {
  for (const p of procs) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
  sh('ip', ['netns', 'del', NS]);
}
process.on('exit', cleanup);
for (const s of ['SIGINT', 'SIGTERM'] as const) process.on(s, () => { cleanup(); process.exit(130); });

const t0 = Date.now();
const step = (s: string): void => console.log(`[t5-lab] ${((Date.now() - t0) / 1000).toFixed(1)}s ${s}`);

// -- staging: the guest's /lab (our scenario + the lab's guest helpers) and /out (run folder)
mkdirSync(join(labDir, 'guest'), { recursive: true });
mkdirSync(join(labDir, 'scenarios'), { recursive: true });
copyFileSync(join(root, 'test', 'lab', 'guest', 'common.sh'), join(labDir, 'guest', 'common.sh'));
writeFileSync(join(labDir, 'scenarios', 'ibverbs.sh'), [
  '# ibverbs provider on rxe0 (test/native/lab-ibverbs.ts): node + the bundled test from /out',
  'setup_rdma',
  ...(process.env.CONFORMANCE_ONLY ? [`export CONFORMANCE_ONLY='${process.env.CONFORMANCE_ONLY.replace(/'/g, '')}'`] : []),
  'must /out/node --expose-gc /out/pkg/guest.mjs',
  'finish', ''].join('\n'));
mkdirSync(join(runDir, 'sync'), { recursive: true });
mkdirSync(join(runDir, 'pkg', 'native', 'verbs', 'build', 'Release'), { recursive: true });
copyFileSync(process.execPath, join(runDir, 'node'));
copyFileSync(verbsAddonPath(), join(runDir, 'pkg', 'native', 'verbs', 'build', 'Release', 'verbs.node'));
writeFileSync(join(runDir, 'pkg', 'package.json'), JSON.stringify({ name: 'smcscope', private: true, type: 'module' }));
const esb = sh(join(root, 'node_modules', '.bin', 'esbuild'), [join(here, conformance ? 'lab-conformance-guest.ts' : 'lab-ibverbs-guest.ts'), '--bundle', '--platform=node', '--format=esm',
  '--target=node20', `--outfile=${join(runDir, 'pkg', 'guest.mjs')}`, '--log-level=warning']);
if (esb.code !== 0) throw new Error(`esbuild: ${esb.err}`);
step(`staged ${tmp} (node, addon, bundle)`);

// -- network: our own namespace, one tap, the bridge with the host address; nothing routed out
must('ip', ['netns', 'add', NS]);
must('ip', ['netns', 'exec', NS, 'sysctl', '-qw', 'net.ipv6.conf.all.disable_ipv6=1', 'net.ipv6.conf.default.disable_ipv6=1']);
must('ip', ['-n', NS, 'link', 'set', 'lo', 'up']);
must('ip', ['-n', NS, 'link', 'add', BR, 'type', 'bridge', 'stp_state', '0', 'forward_delay', '0', 'mcast_snooping', '0']);
must('ip', ['-n', NS, 'tuntap', 'add', 'dev', TAP, 'mode', 'tap']);
must('ip', ['-n', NS, 'link', 'set', TAP, 'master', BR, 'up']);
must('ip', ['-n', NS, 'link', 'set', BR, 'up']);
must('ip', ['-n', NS, 'addr', 'add', '10.55.0.254/24', 'dev', BR]);
step(`network ${NS}: ${sh('ip', ['-n', NS, '-br', 'link']).out.trim().split('\n').map((l) => l.split(/\s+/)[0]).join(',')}; routes: ${sh('ip', ['-n', NS, 'route']).out.trim()}`);

const pcap = join(runDir, 'capture.pcap');
const td = spawn('ip', ['netns', 'exec', NS, 'tcpdump', '--immediate-mode', '-Z', 'root', '-i', BR, '-s', '0', '-U', '-w', pcap], { stdio: ['ignore', 'ignore', 'pipe'] });
procs.push(td);
let tdErr = '';
await new Promise<void>((res, rej) => {
  const t = setTimeout(() => rej(new Error(`tcpdump did not start within 30 s: ${tdErr}`)), 30_000);
  td.stderr!.on('data', (d: Buffer) => { tdErr += d.toString(); if (tdErr.includes('listening on')) { clearTimeout(t); res(); } });
});

const hostLog = openSync(join(runDir, 'host.log'), 'w');
// the conformance run has no host part (both QPs are in the guest): a host process that just exits
const host = conformance
  ? spawn(process.execPath, ['-e', '0'], { stdio: ['ignore', hostLog, hostLog] })
  : spawn('ip', ['netns', 'exec', NS, process.execPath, '--import', 'tsx', join(here, 'lab-ibverbs-host.ts')],
    { cwd: root, stdio: ['ignore', hostLog, hostLog], env: { ...process.env, LAB_RUN: runDir } });
closeSync(hostLog);
procs.push(host);
const hostDone = new Promise<number | null>((r) => host.once('exit', (c) => r(c)));

const append = ['root=/dev/vda', 'ro', 'console=ttyS0', 'loglevel=4', 'panic=-1', 'net.ifnames=0', 'init=/usr/local/sbin/lab-init',
  'lab.name=a', 'lab.ip=10.55.0.1/24', 'lab.peer=10.55.0.254', 'lab.guests=a', 'lab.scenario=ibverbs', `lab.timeout=${conformance ? 1800 : 420}`, 'lab.gotimeout=600'];
const qlog = openSync(join(runDir, 'qemu-a.log'), 'w');
const qemu = spawn('ip', ['netns', 'exec', NS, 'qemu-system-x86_64', '-name', 'guesta', '-machine', 'q35', '-accel', 'tcg,thread=multi', '-cpu', 'max,-erms',
  '-smp', '1', '-m', '1536', '-nodefaults', '-display', 'none', '-no-reboot',
  '-kernel', join(image, 'vmlinuz'), '-initrd', join(image, 'initrd.img'), '-append', append.join(' '),
  '-drive', `file=${join(image, 'rootfs.img')},if=virtio,format=raw,snapshot=on`,
  '-netdev', `tap,id=n0,ifname=${TAP},script=no,downscript=no`, '-device', 'virtio-net-pci,netdev=n0,mac=52:54:00:55:00:0a',
  '-virtfs', `local,path=${labDir},mount_tag=lab,security_model=none,readonly=on`,
  '-virtfs', `local,path=${runDir},mount_tag=out,security_model=none`,
  '-serial', `file:${join(runDir, 'console-a.log')}`], { stdio: ['ignore', qlog, qlog] });
closeSync(qlog);
procs.push(qemu);
const qemuDone = new Promise<void>((r) => qemu.once('exit', () => r()));

for (let i = 0; i < 3000 && !existsSync(join(runDir, 'sync', 'a.booted')) && qemu.exitCode === null; i++) await new Promise((r) => setTimeout(r, 100));
if (!existsSync(join(runDir, 'sync', 'a.booted'))) { console.log(readFileSync(join(runDir, 'console-a.log'), 'utf8').slice(-2000)); throw new Error('the guest did not boot'); }
step('guest booted; go');
writeFileSync(join(runDir, 'sync', 'host.go'), '');
const guestLimit = conformance ? 1900 : 600;
const killer = setTimeout(() => { console.log(`[t5-lab] guest still running after ${guestLimit} s: killing it`); qemu.kill('SIGKILL'); }, guestLimit * 1000);
await qemuDone;
clearTimeout(killer);
step('guest powered off');
const hostTimer = setTimeout(() => host.kill('SIGKILL'), 30_000);
const hostRc = await hostDone;
clearTimeout(hostTimer);
await new Promise((r) => setTimeout(r, 300));
td.kill('SIGINT');
await new Promise((r) => td.once('exit', r));
writeFileSync(join(runDir, 'tcpdump.log'), tdErr);
cleanup();

// -- results
let pass = 0;
let fail = 0;
const guestLog = existsSync(join(runDir, 'guest-a.log')) ? readFileSync(join(runDir, 'guest-a.log'), 'utf8') : '';
for (const l of guestLog.split('\n')) {
  if (l.startsWith('ok - ')) pass++;
  else if (l.startsWith('not ok - ')) fail++;
  if (/^(ok|not ok|skip|differs) - |^guest:|^conformance |^    |threw|Error/.test(l)) console.log(`guest  ${l}`);
}
const hostText = readFileSync(join(runDir, 'host.log'), 'utf8');
for (const l of hostText.split('\n')) {
  if (l.startsWith('ok - ')) pass++;
  else if (l.startsWith('not ok - ')) fail++;
  if (l.trim()) console.log(`host   ${l}`);
}
if (!/^\d+ passed, 0 failed$/m.test(guestLog)) { fail++; console.log('not ok - the guest part did not finish cleanly (see guest-a.log / console-a.log)'); }
if (hostRc !== 0) { fail++; console.log(`not ok - the host part exited ${hostRc}`); }
const d = new FrameDecoder();
const frames = (await readFrames(pcap)).map((f) => d.decode(f));
if (conformance) {
  // rxe loops QPs of one device back inside the kernel: nothing of the suite is on the wire
  const roceOnWire = frames.filter((f) => f.roce).length;
  console.log(`${roceOnWire === 0 ? 'ok' : 'not ok'} - the bridge capture: ${frames.length} frames, ${roceOnWire} RoCEv2 (rxe loopback stays inside the guest)`);
  if (roceOnWire === 0) pass++; else fail++;
  rmSync(join(runDir, 'node'), { force: true });
  console.log(`run folder: ${runDir}`);
  console.log(`${pass} passed, ${fail} failed`);
  process.exit(fail ? 1 : 0);
}
const roce = frames.filter((f) => f.roce);
const bad = roce.filter((f) => f.roce!.icrc !== 'ok');
const both = new Set(roce.map((f) => f.ip?.src));
const ok = roce.length > 0 && bad.length === 0 && both.has('10.55.0.1') && both.has('10.55.0.254');
console.log(`${ok ? 'ok' : 'not ok'} - the bridge capture: ${frames.length} frames, ${roce.length} RoCEv2 between rxe (10.55.0.1) and uroce (10.55.0.254), ${bad.length} with a bad ICRC (our FrameDecoder)`);
if (ok) pass++; else fail++;
rmSync(join(runDir, 'node'), { force: true }); // the 99 MB copy of node; logs and capture stay
console.log(`run folder: ${runDir}`);
console.log(`${pass} passed, ${fail} failed`);
process.exit(fail ? 1 : 0);
