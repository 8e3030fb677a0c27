// uroce ⇄ Linux rxe interop lab (issue 4): uroce on the host side of a lab bridge, rdma-core's
// ibv_rc_pingpong and perftest's ib_send_bw / ib_write_bw / ib_send_lat in qemu guests
// (Linux 6.12, rdma_rxe), as client and as server, next to guest⇄guest rxe baselines from the
// same run. Every frame on the bridge is captured and decoded with smcscope's FrameDecoder.
//
// It reuses the shared lab (../shared/lab, read-only: guest image recipe, lab-init, common.sh)
// but runs on its own: own work dir (UROCE_LAB_WORK, default /var/tmp/uroce-lab, holding a copy
// of the lab and its image build), own network namespace (uroce-lab-<pid>) with its own bridge
// and taps, so it never touches another lab run.
//
//   node --import tsx test/interop-uroce/lab.ts image        build the guest image (once, ~5 min)
//   node --import tsx test/interop-uroce/lab.ts run [STEPS]  boot the guests, run the steps
//   STEPS: comma list of baseline, pingpong, send_bw, write_bw, send_lat (default: all)
//
// Root only (netns, taps, qemu). Results: $UROCE_LAB_WORK/runs/<stamp>/ (guest logs, host log,
// bridge.pcap, report.txt).

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync, chmodSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(HERE, '..', '..');
const WORK = process.env.UROCE_LAB_WORK ?? '/var/tmp/uroce-lab';
const SRC_LAB = process.env.UROCE_LAB_SRC ?? resolve(ROOT, '..', 'shared', 'lab');
const LAB = join(WORK, 'lab');
const BUILD = join(LAB, 'build');
const NS = `uroce-lab-${process.pid}`;
const BR = 'ubr0';
export const HOST_IP = '10.55.0.254';
const GUESTS = { a: { ip: '10.55.0.1', peer: '10.55.0.2', tap: 'utapa', mac: '52:54:00:55:00:0a' }, b: { ip: '10.55.0.2', peer: '10.55.0.1', tap: 'utapb', mac: '52:54:00:55:00:0b' } };

function sh(cmd: string, args: string[], timeoutMs = 60_000): { code: number | null; out: string; err: string } {
  const r = spawnSync(cmd, args, { encoding: 'utf8', timeout: timeoutMs });
  return { code: r.error ? -1 : r.status, out: r.stdout ?? '', err: (r.stderr ?? '') + (r.error?.message ?? '') };
}
function must(cmd: string, args: string[]): string {
  const r = sh(cmd, args);
  if (r.code !== 0) throw new Error(`${cmd} ${args.join(' ')}: ${r.err.trim() || `exit ${r.code}`}`);
  return r.out;
}
const log = (s: string): void => { process.stdout.write(`[uroce-lab] ${s}\n`); };
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function preflight(): string | null {
  if (process.getuid?.() !== 0) return 'needs root (network namespace, taps, qemu)';
  for (const c of ['qemu-system-x86_64', 'ip', 'tcpdump']) if (sh('sh', ['-c', `command -v ${c}`]).code !== 0) return `${c} is not installed`;
  if (!existsSync(join(BUILD, 'rootfs.img'))) return `no guest image in ${BUILD} (run: node --import tsx test/interop-uroce/lab.ts image)`;
  return null;
}

// ------------------------------------------------------------------------------ image --

function image(): void {
  if (!existsSync(SRC_LAB)) throw new Error(`no lab sources at ${SRC_LAB} (set UROCE_LAB_SRC)`);
  mkdirSync(WORK, { recursive: true });
  if (!existsSync(join(LAB, 'scripts', 'build-image.sh'))) {
    cpSync(SRC_LAB, LAB, { recursive: true });
    sh('chmod', ['-R', 'u+w', LAB]);
  }
  log(`building the guest image in ${BUILD} (lab copy of ${SRC_LAB}; the shared lab is not modified)`);
  const r = spawnSync('bash', [join(LAB, 'scripts', 'build-image.sh')], { stdio: 'inherit' });
  if (r.status !== 0) throw new Error(`build-image.sh exited ${r.status}`);
}

// ---------------------------------------------------------------------------- network --

const children = new Set<ChildProcess>();
function cleanup(): void {
  for (const c of children) if (c.exitCode === null && c.pid) { try { process.kill(c.pid, 'SIGKILL'); } catch { /* gone */ } }
  children.clear();
  for (let i = 0; i < 30; i++) {
    const pids = sh('ip', ['netns', 'pids', NS]).out.split(/\s+/).filter(Boolean).map(Number);
    if (!pids.length) break;
    for (const p of pids) { try { process.kill(p, i < 10 ? 'SIGTERM' : 'SIGKILL'); } catch { /* gone */ } }
    spawnSync('sleep', ['0.2']);
  }
  sh('ip', ['netns', 'del', NS]);
}

function netUp(): void {
  must('ip', ['netns', 'add', NS]);
  const x = (...a: string[]): string => must('ip', ['netns', 'exec', NS, ...a]);
  x('sysctl', '-qw', 'net.ipv6.conf.all.disable_ipv6=1', 'net.ipv6.conf.default.disable_ipv6=1');
  x('ip', 'link', 'set', 'lo', 'up');
  x('ip', 'link', 'add', BR, 'type', 'bridge', 'stp_state', '0', 'forward_delay', '0');
  for (const g of Object.values(GUESTS)) {
    x('ip', 'tuntap', 'add', 'dev', g.tap, 'mode', 'tap');
    x('ip', 'link', 'set', g.tap, 'master', BR, 'up');
  }
  x('ip', 'link', 'set', BR, 'up');
  x('ip', 'addr', 'add', `${HOST_IP}/24`, 'dev', BR);
  // bigger socket buffers inside the namespace are not needed; nothing is routed out of it
}

function startGuest(name: 'a' | 'b', run: string, share: string, scenario: string, timeoutS: number): ChildProcess {
  const g = GUESTS[name];
  const args = [
    'netns', 'exec', NS, 'qemu-system-x86_64', '-name', `uroce-guest${name}`, '-machine', 'q35', '-accel', 'tcg,thread=multi', '-cpu', 'max,-erms',
    '-smp', '1', '-m', '1024', '-nodefaults', '-display', 'none', '-no-reboot',
    '-kernel', join(BUILD, 'vmlinuz'), '-initrd', join(BUILD, 'initrd.img'),
    '-append', `root=/dev/vda ro console=ttyS0 loglevel=4 panic=-1 net.ifnames=0 init=/usr/local/sbin/lab-init lab.name=${name} lab.ip=${g.ip}/24 lab.peer=${g.peer} lab.scenario=${scenario} lab.scendir=uroce lab.timeout=${timeoutS}`,
    '-drive', `file=${join(BUILD, 'rootfs.img')},if=virtio,format=raw,snapshot=on`,
    '-netdev', `tap,id=n0,ifname=${g.tap},script=no,downscript=no`, '-device', `virtio-net-pci,netdev=n0,mac=${g.mac}`,
    '-virtfs', `local,path=${share},mount_tag=lab,security_model=none,readonly=on`,
    '-virtfs', `local,path=${run},mount_tag=out,security_model=none`,
    '-serial', `file:${join(run, `console-${name}.log`)}`,
  ];
  const c = spawn('ip', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  children.add(c);
  return c;
}

// -------------------------------------------------------------------------------- run --

async function run(steps: string[]): Promise<number> {
  const why = preflight();
  if (why) { console.error(`uroce-lab: cannot run: ${why}`); return 3; }
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const runDir = join(WORK, 'runs', stamp);
  const share = join(runDir, 'share');
  mkdirSync(join(runDir, 'sync'), { recursive: true });
  // the guests' /lab: the shared lab's guest helpers + this folder's guest scenario
  cpSync(join(SRC_LAB, 'guest'), join(share, 'guest'), { recursive: true });
  mkdirSync(join(share, 'uroce'), { recursive: true });
  for (const f of readdirSync(join(HERE, 'guest'))) cpSync(join(HERE, 'guest', f), join(share, 'uroce', f));
  writeFileSync(join(runDir, 'steps'), steps.join('\n') + '\n');
  // iterations: TCG guests are slow; the same numbers for the guests' tools and for uroce
  writeFileSync(join(runDir, 'params'), `PP_N=${process.env.PP_N ?? 500}\nBW_N=${process.env.BW_N ?? 300}\nLAT_N=${process.env.LAT_N ?? 500}\n`);
  chmodSync(runDir, 0o755);
  process.on('SIGINT', () => { cleanup(); process.exit(130); });
  process.on('SIGTERM', () => { cleanup(); process.exit(143); });
  process.on('exit', cleanup);
  const t0 = Date.now();
  netUp();
  log(`namespace ${NS}: bridge ${BR} ${HOST_IP}/24, guests A ${GUESTS.a.ip} and B ${GUESTS.b.ip}; run folder ${runDir}`);
  const pcap = join(runDir, 'bridge.pcap');
  const td = spawn('ip', ['netns', 'exec', NS, 'tcpdump', '-i', BR, '-U', '-s', '8192', '-B', '16384', '-w', pcap], { stdio: ['ignore', 'ignore', 'pipe'] });
  children.add(td);
  let tdErr = '';
  td.stderr!.on('data', (d: Buffer) => { tdErr += d.toString(); });
  await sleep(1000);
  const timeoutS = Number(process.env.UROCE_LAB_TIMEOUT ?? 1500);
  const ga = startGuest('a', runDir, share, 'uroce-interop', timeoutS);
  const gb = startGuest('b', runDir, share, 'uroce-interop', timeoutS);
  // host side: the uroce peer, inside the namespace
  const host = spawn('ip', ['netns', 'exec', NS, process.execPath, '--import', 'tsx', join(HERE, 'host.ts'), runDir], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(host);
  let hostLog = '';
  host.stdout!.on('data', (d: Buffer) => { hostLog += d.toString(); process.stdout.write(d.toString().split('\n').filter(Boolean).map((l) => `[host] ${l}\n`).join('')); });
  host.stderr!.on('data', (d: Buffer) => { hostLog += d.toString(); process.stderr.write(d.toString()); });
  const exited = (c: ChildProcess): Promise<number | null> => new Promise((r) => { if (c.exitCode !== null) r(c.exitCode); else c.once('exit', (code) => r(code)); });
  const deadline = Date.now() + (timeoutS + 240) * 1000;
  const watchdog = setInterval(() => { if (Date.now() > deadline) { log('timeout: stopping the guests'); cleanup(); } }, 5000);
  const [ra, rb] = await Promise.all([exited(ga), exited(gb)]);
  clearInterval(watchdog);
  const hostRc = await Promise.race([exited(host), sleep(20_000).then(() => null)]);
  await sleep(1000);
  td.kill('SIGINT');
  await Promise.race([exited(td), sleep(5000)]);
  writeFileSync(join(runDir, 'host.log'), hostLog);
  log(`guests done after ${((Date.now() - t0) / 1000).toFixed(0)} s (qemu a=${ra} b=${rb}, guest scenario a=${readRc(runDir, 'a')} b=${readRc(runDir, 'b')}, host=${hostRc}); ${tdErr.trim().split('\n').slice(-2).join(' ')}`);
  cleanup();
  // decode the capture with smcscope (outside the namespace)
  const dec = sh(process.execPath, ['--import', 'tsx', join(HERE, 'decode.ts'), pcap], 600_000);
  writeFileSync(join(runDir, 'decode.txt'), dec.out + dec.err);
  const report = [
    `uroce interop lab run ${stamp}`,
    readIf(join(runDir, 'results.txt')),
    '--- capture (bridge.pcap) decoded with smcscope FrameDecoder',
    dec.out.trim(),
  ].join('\n');
  writeFileSync(join(runDir, 'report.txt'), report + '\n');
  console.log('\n' + report);
  return readRc(runDir, 'a') === '0' && readRc(runDir, 'b') === '0' && hostRc === 0 ? 0 : 1;
}

function readIf(p: string): string { try { return readFileSync(p, 'utf8').trimEnd(); } catch { return '(missing)'; } }
function readRc(run: string, g: string): string { return readIf(join(run, `guest-${g}.rc`)); }

const [cmd, arg] = process.argv.slice(2);
if (cmd === 'image') image();
else if (cmd === 'run') process.exitCode = await run((arg ?? 'baseline,pingpong,send_bw,write_bw,send_lat').split(','));
else if (cmd === 'preflight') { const w = preflight(); console.log(w ?? 'ok'); process.exitCode = w ? 3 : 0; }
else { console.error('usage: lab.ts image | run [steps] | preflight'); process.exitCode = 2; }
