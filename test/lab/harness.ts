// The kernel interop harness: real Linux SMC-R peers (qemu guests, Soft-RoCE) on a bridge in a
// network namespace this process creates and removes, a host-side attachment point on that
// bridge, a capture of everything on it, and the guests' logs. Used by `npm run lab` (lab.ts)
// and the interop tests (test/interop/). See docs/lab.md.
//
// Cleanup is the contract: every run removes its namespace and every process in it on success,
// failure, exception, SIGINT/SIGTERM and process exit; a run killed with SIGKILL is swept by
// the next run (its namespace name carries its pid). Image building mounts only in private
// mount namespaces (build-*.sh), so nothing can stay mounted.

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';

export const LAB_DIR = dirname(fileURLToPath(import.meta.url));
export const ROOT = resolve(LAB_DIR, '..', '..');
export const SCENARIO_DIR = join(LAB_DIR, 'scenarios');
export const HOST_IP = '10.55.0.254';
export const GUESTS = { a: { ip: '10.55.0.1', mac: '52:54:00:55:00:0a', tap: 'smctapa' }, b: { ip: '10.55.0.2', mac: '52:54:00:55:00:0b', tap: 'smctapb' } } as const;
/** The second NIC of a two-NIC scenario ("# lab-nics: 2"): eth1 in the guest, a second tap on
 *  the same bridge, an address in the same subnet (SMC-Rv2 only takes an alternate RoCE device
 *  whose netdev has an address in the subnet of the link group's source address). */
export const GUESTS_NIC2 = { a: { ip: '10.55.0.11', mac: '52:54:00:55:01:0a', tap: 'smctapa1' }, b: { ip: '10.55.0.12', mac: '52:54:00:55:01:0b', tap: 'smctapb1' } } as const;
export type GuestName = keyof typeof GUESTS;
export const BRIDGE = 'smcbr0';
const NS_PREFIX = 'smcscope-lab-';

export interface HostPart {
  /** Command run inside the namespace (cwd: project root), e.g. ['bash', 'x.sh'] or [node, 'x.ts']. */
  command: string[];
  env?: Record<string, string>;
}

export interface ScenarioOptions {
  /** A file test/lab/scenarios/NAME.sh (run by every guest). */
  name: string;
  /** Guests to boot (default: the scenario's "# lab-guests: a" line, else a and b). */
  guests?: GuestName[];
  /** Scenario watchdog inside each guest, seconds (default: "# lab-timeout: N", else 240). */
  timeoutS?: number;
  /** Seconds a guest may take to boot before it counts as failed (default 300: TCG is slow). */
  bootTimeoutS?: number;
  /** Boot attempts per guest beyond the first (default 1). */
  bootRetries?: number;
  /** qemu -cpu under TCG (default: "# lab-tcg-cpu: X", else max,-erms; see docs/lab.md). */
  tcgCpu?: string;
  /** NICs per guest, 1 or 2 (default: "# lab-nics: N", else 1); see GUESTS_NIC2. */
  nics?: 1 | 2;
  memMiB?: number;
  /** Host-side part (default: scenarios/NAME.host.ts or NAME.host.sh when present). */
  host?: HostPart;
  /** Harness self-test only: make one guest's first boot fail. */
  fault?: { guest: GuestName; kind: 'poweroff-once' };
  /** Folder for this run (default test/lab/out/NAME-STAMP). */
  runDir?: string;
  /** Print progress lines (default: to stdout with a "[lab]" prefix). */
  log?: (line: string) => void;
  /** Abort the run (treated like Ctrl-C: everything is cleaned up, the result says why). */
  signal?: AbortSignal;
}

/** The parts of `smcdump --summary --json` the harness and tests read (see docs/smcdump.md). */
export interface SmcSummary {
  frames: number;
  linkGroups: Array<Record<string, unknown> & { links: Array<Record<string, unknown>> }>;
  connections: Array<Record<string, unknown> & { mode: string }>;
  anomalies: Array<{ frame: number; severity: string; code: string; message: string }>;
  diagnosis?: Array<{ code: string; severity: string; message: string }>;
}

export interface GuestResult { rc: number | null; bootAttempts: number; bootS: number | null; log: string; console: string }
export interface StepTime { step: string; seconds: number; detail: string }
export interface ScenarioResult {
  name: string;
  ok: boolean;
  failure?: string;
  runDir: string;
  pcap: string;
  /** smcdump's one-line output for every frame (run folder, smcdump.txt) and its closing
   *  "N frames; SMC: …" summary line. */
  smcdumpText: string;
  smcdumpSummary: string;
  /** `smcdump --summary --json` (correlation: link groups, links, connections, anomalies), also
   *  saved as summary.json in the run folder; undefined if smcdump could not produce it. */
  smcSummary?: SmcSummary;
  guests: Partial<Record<GuestName, GuestResult>>;
  host?: { rc: number | null; log: string };
  steps: StepTime[];
  netns: string;
  /** What was still there after cleanup (must be empty). */
  leftovers: string[];
  seconds: number;
}

// ---------------------------------------------------------------- small process helpers --

function sh(cmd: string, args: string[], opts: { input?: string; timeoutMs?: number } = {}): { code: number | null; out: string; err: string } {
  const r = spawnSync(cmd, args, { encoding: 'utf8', input: opts.input, timeout: opts.timeoutMs ?? 60_000 });
  return { code: r.error ? -1 : r.status, out: r.stdout ?? '', err: (r.stderr ?? '') + (r.error ? String(r.error.message) : '') };
}
function must(cmd: string, args: string[]): string {
  const r = sh(cmd, args);
  if (r.code !== 0) throw new Error(`${cmd} ${args.join(' ')}: ${r.err.trim() || `exit ${r.code}`}`);
  return r.out;
}
function haveCommand(cmd: string): boolean { return sh('sh', ['-c', `command -v ${cmd}`]).code === 0; }
function pidAlive(pid: number): boolean {
  try { process.kill(pid, 0); return true; } catch (e) { return (e as NodeJS.ErrnoException).code === 'EPERM'; }
}
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const fmtS = (ms: number) => `${(ms / 1000).toFixed(1)}s`;

/** Why the lab cannot run on this machine, or null when it can (checked without side effects
 *  except a throw-away network namespace). `needImage`: also check what building needs. */
export function preflight(opts: { needBuild?: boolean } = {}): string | null {
  if (process.platform !== 'linux') return 'the lab needs Linux (qemu, network namespaces, tap devices)';
  if (process.getuid?.() !== 0) return 'the lab needs root (network namespaces, tap devices, debootstrap); run it as root';
  for (const c of ['qemu-system-x86_64', 'ip', 'tcpdump', 'mkfs.ext4', 'unshare', 'flock']) {
    if (!haveCommand(c)) return `${c} is not installed (bash install.sh installs what the lab needs)`;
  }
  if (!existsSync('/dev/net/tun')) return '/dev/net/tun is missing (no tap devices for the guests)';
  const probe = `${NS_PREFIX}probe-${process.pid}`;
  const add = sh('ip', ['netns', 'add', probe]);
  sh('ip', ['netns', 'del', probe]);
  if (add.code !== 0) return `cannot create a network namespace: ${add.err.trim()}`;
  const q = sh('qemu-system-x86_64', ['-accel', 'help']);
  if (!/tcg/.test(q.out)) return 'qemu-system-x86_64 has no TCG accelerator';
  const needBuild = opts.needBuild ?? imageDir() === null;
  if (needBuild) {
    if (!haveCommand('debootstrap')) return 'the guest image is not built and debootstrap is not installed';
    const m = sh('bash', [join(LAB_DIR, 'scripts', 'build-rootfs.sh'), '--mirror']);
    if (m.code !== 0) return `the guest image is not built and ${m.err.trim() || 'no Debian apt source was found'}`;
  }
  return null;
}

/** The cached image folder for the current inputs, or null when it must be built. */
export function imageDir(): string | null {
  const r = sh('bash', [join(LAB_DIR, 'scripts', 'build-image.sh'), '--check']);
  return r.code === 0 ? r.out.trim() : null;
}

/** Build the image if needed (streams the build's output); returns its folder. */
export async function ensureImage(log: (l: string) => void = defaultLog): Promise<{ dir: string; built: boolean }> {
  const cached = imageDir();
  if (cached) return { dir: cached, built: false };
  const child = spawn('bash', [join(LAB_DIR, 'scripts', 'build-image.sh')], { stdio: ['ignore', 'pipe', 'pipe'] });
  track(child);
  let last = '';
  createInterface({ input: child.stdout! }).on('line', (l) => { if (l.trim()) { last = l.trim(); log(`  ${l}`); } });
  createInterface({ input: child.stderr! }).on('line', (l) => log(`  ${l}`));
  const code = await new Promise<number | null>((res) => child.on('close', (c) => res(c)));
  untrack(child);
  if (code !== 0 || !existsSync(join(last, 'done'))) throw new Error(`building the guest image failed (exit ${code}): ${last}`);
  return { dir: last, built: true };
}

// ------------------------------------------------------------------- cleanup machinery --

/** Every child we started and every namespace we made, for the signal and exit handlers. */
const children = new Set<ChildProcess>();
const namespaces = new Set<string>();
function track(c: ChildProcess): void { children.add(c); installHandlers(); }
function untrack(c: ChildProcess): void { children.delete(c); }
let handlersInstalled = false;
function installHandlers(): void {
  if (handlersInstalled) return;
  handlersInstalled = true;
  const onSignal = (sig: NodeJS.Signals) => {
    process.stderr.write(`[lab] ${sig}: stopping the guests and removing the lab network\n`);
    cleanupAllSync();
    process.exit(sig === 'SIGINT' ? 130 : 143);
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  process.once('SIGHUP', onSignal);
  process.once('exit', () => cleanupAllSync());
}
function cleanupAllSync(): void {
  for (const c of children) if (c.exitCode === null && c.pid) { try { process.kill(c.pid, 'SIGKILL'); } catch { /* gone */ } }
  children.clear();
  for (const ns of namespaces) removeNamespaceSync(ns);
}

function nsPids(ns: string): number[] {
  return sh('ip', ['netns', 'pids', ns]).out.split(/\s+/).filter(Boolean).map(Number);
}
/** Kill everything inside the namespace, then delete it. Synchronous (usable in exit handlers). */
export function removeNamespaceSync(ns: string): void {
  for (let i = 0; i < 50; i++) {
    const pids = nsPids(ns);
    if (pids.length === 0) break;
    for (const p of pids) { try { process.kill(p, i < 10 ? 'SIGTERM' : 'SIGKILL'); } catch { /* gone */ } }
    spawnSync('sleep', ['0.1']);
  }
  sh('ip', ['netns', 'del', ns]);
  namespaces.delete(ns);
}

/** Remove namespaces of lab runs whose process is gone (a run killed with SIGKILL). */
export function sweepStale(log: (l: string) => void = defaultLog): string[] {
  const removed: string[] = [];
  for (const line of sh('ip', ['netns', 'list']).out.split('\n')) {
    const name = line.split(/\s+/)[0] ?? '';
    const m = new RegExp(`^${NS_PREFIX}(?:probe-)?(\\d+)(?:-|$)`).exec(name);
    if (!m || pidAlive(Number(m[1]))) continue;
    removeNamespaceSync(name);
    removed.push(name);
    log(`removed the network namespace ${name} of a run that was killed (pid ${m[1]} is gone)`);
  }
  return removed;
}

/** What a run left behind: its namespace, processes in it or naming its folder, mounts. */
export function leftovers(ns: string, runDir: string): string[] {
  const out: string[] = [];
  if (sh('ip', ['netns', 'list']).out.split('\n').some((l) => l.split(/\s+/)[0] === ns)) out.push(`network namespace ${ns}`);
  for (const p of readdirSync('/proc')) {
    if (!/^\d+$/.test(p) || Number(p) === process.pid) continue;
    let cmd = '';
    try { cmd = readFileSync(`/proc/${p}/cmdline`, 'utf8').replaceAll('\0', ' '); } catch { continue; }
    if (cmd.includes(runDir) || cmd.includes(` ${ns} `)) out.push(`process ${p}: ${cmd.slice(0, 120)}`);
  }
  for (const l of readFileSync('/proc/mounts', 'utf8').split('\n')) if (l.includes(ns) || l.includes(runDir) || l.includes('smcscope-lab/.tmp-')) out.push(`mount ${l}`);
  return out;
}

// --------------------------------------------------------------------- the lab network --

let nsCounter = 0;
/** Create the lab network: namespace, bridge (no STP, no uplink, IPv6 off), one tap per guest,
 *  optionally the host address on the bridge. Returns the namespace name. */
export function createNetwork(guests: GuestName[], hostAddress: boolean, nics: 1 | 2 = 1): string {
  const ns = `${NS_PREFIX}${process.pid}-${++nsCounter}`;
  installHandlers();
  must('ip', ['netns', 'add', ns]);
  namespaces.add(ns);
  try {
    setUpNetwork(ns, guests, hostAddress, nics);
  } catch (e) {
    removeNamespaceSync(ns);
    throw e;
  }
  return ns;
}

function setUpNetwork(ns: string, guests: GuestName[], hostAddress: boolean, nics: 1 | 2): void {
  const ip = (...a: string[]) => must('ip', ['-n', ns, ...a]);
  must('ip', ['netns', 'exec', ns, 'sysctl', '-qw', 'net.ipv6.conf.all.disable_ipv6=1', 'net.ipv6.conf.default.disable_ipv6=1']);
  ip('link', 'set', 'lo', 'up');
  // mcast_snooping 0: the bridge would join 224.0.0.106 and send IGMP reports into the captures
  ip('link', 'add', BRIDGE, 'type', 'bridge', 'stp_state', '0', 'forward_delay', '0', 'mcast_snooping', '0');
  for (const g of guests) {
    for (const tap of nics === 2 ? [GUESTS[g].tap, GUESTS_NIC2[g].tap] : [GUESTS[g].tap]) {
      ip('tuntap', 'add', 'dev', tap, 'mode', 'tap');
      ip('link', 'set', tap, 'master', BRIDGE, 'up');
    }
  }
  ip('link', 'set', BRIDGE, 'up');
  if (hostAddress) ip('addr', 'add', `${HOST_IP}/24`, 'dev', BRIDGE);
}

/** Check the namespace can reach nothing but the lab: only lo, the bridge and our taps, and no
 *  route but the lab subnet. Returns a description; throws if anything else is there. */
export function checkIsolation(ns: string): string {
  const links = (JSON.parse(must('ip', ['-n', ns, '-j', 'link', 'show'])) as Array<{ ifname: string }>).map((l) => l.ifname);
  const allowed = new Set<string>(['lo', BRIDGE, ...[...Object.values(GUESTS), ...Object.values(GUESTS_NIC2)].map((g) => g.tap)]);
  const bad = links.filter((l) => !allowed.has(l));
  const routes = (JSON.parse(must('ip', ['-n', ns, '-j', 'route', 'show', 'table', 'all'])) as Array<{ dst: string; dev?: string; table?: string }>)
    .filter((r) => r.table !== 'local');
  const badRoutes = routes.filter((r) => r.dst !== '10.55.0.0/24' || r.dev !== BRIDGE);
  if (bad.length || badRoutes.length) throw new Error(`lab namespace ${ns} is not isolated: links ${bad.join(',')} routes ${JSON.stringify(badRoutes)}`);
  return `links ${links.join(',')}; routes ${routes.map((r) => `${r.dst} dev ${r.dev}`).join(', ') || 'none'}; no uplink`;
}

// ------------------------------------------------------------------------- scenarios --

function defaultLog(line: string): void { process.stdout.write(`[lab] ${line}\n`); }

export function listScenarios(): Array<{ name: string; title: string; guests: string; host: boolean }> {
  return readdirSync(SCENARIO_DIR).filter((f) => f.endsWith('.sh') && !f.includes('.host.')).sort().map((f) => {
    const name = f.slice(0, -3);
    const text = readFileSync(join(SCENARIO_DIR, f), 'utf8');
    const title = (/^# *\([^)]*\) *(.*)$/m.exec(text)?.[1] ?? /^# *(.*)$/m.exec(text)?.[1] ?? '').trim();
    return { name, title, guests: header(text, 'guests') ?? 'a,b', host: hostPartFile(name) !== null };
  });
}
function header(text: string, key: string): string | undefined {
  return new RegExp(`^# *lab-${key}: *(\\S+)`, 'm').exec(text)?.[1];
}
function hostPartFile(name: string): string | null {
  for (const ext of ['host.ts', 'host.sh']) { const p = join(SCENARIO_DIR, `${name}.${ext}`); if (existsSync(p)) return p; }
  return null;
}

function stamp(): string {
  const d = new Date();
  const p = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}${p(d.getMonth() + 1)}${p(d.getDate())}-${p(d.getHours())}${p(d.getMinutes())}${p(d.getSeconds())}`;
}

/** Keep the newest `keep` run folders of a scenario under test/lab/out. */
function pruneRuns(name: string, keep = 10): void {
  const out = join(LAB_DIR, 'out');
  if (!existsSync(out)) return;
  const runs = readdirSync(out).filter((d) => d.startsWith(`${name}-`) && /-\d{8}-\d{6}(-\d+)?$/.test(d))
    .map((d) => ({ d, t: statSync(join(out, d)).mtimeMs })).sort((x, y) => y.t - x.t);
  for (const r of runs.slice(keep)) rmSync(join(out, r.d), { recursive: true, force: true });
}

class Aborted extends Error {}

/** Run one scenario end to end. Never throws for a scenario failure: the result says what
 *  failed (and the console logs were printed); throws only for misuse (unknown scenario). */
export async function runScenario(opts: ScenarioOptions): Promise<ScenarioResult> {
  const log = opts.log ?? defaultLog;
  const scenFile = join(SCENARIO_DIR, `${opts.name}.sh`);
  if (!/^[\w.-]+$/.test(opts.name) || !existsSync(scenFile)) throw new Error(`no scenario ${opts.name} (test/lab/scenarios/${opts.name}.sh)`);
  const text = readFileSync(scenFile, 'utf8');
  const guests = opts.guests ?? ((header(text, 'guests') ?? 'a,b').split(',') as GuestName[]);
  const timeoutS = opts.timeoutS ?? Number(header(text, 'timeout') ?? 240);
  const bootTimeoutS = opts.bootTimeoutS ?? 300;
  const bootRetries = opts.bootRetries ?? 1;
  const tcgCpu = opts.tcgCpu ?? header(text, 'tcg-cpu') ?? 'max,-erms';
  const nics: 1 | 2 = opts.nics ?? (header(text, 'nics') === '2' ? 2 : 1);
  const mem = opts.memMiB ?? 1024;
  const hostFile = hostPartFile(opts.name);
  const host: HostPart | undefined = opts.host ?? (hostFile === null ? undefined
    : hostFile.endsWith('.ts') ? { command: [process.execPath, '--import', 'tsx', hostFile] } : { command: ['bash', hostFile] });
  const runDir = opts.runDir ?? join(LAB_DIR, 'out', `${opts.name}-${stamp()}-${process.pid}`);
  const t0 = Date.now();
  const steps: StepTime[] = [];
  const result: ScenarioResult = {
    name: opts.name, ok: false, runDir, pcap: join(runDir, 'capture.pcap'), smcdumpText: '', smcdumpSummary: '',
    guests: {}, steps, netns: '', leftovers: [], seconds: 0,
  };
  const procs: ChildProcess[] = [];
  let aborted = false;
  const onAbort = () => { aborted = true; };
  opts.signal?.addEventListener('abort', onAbort);
  const checkAbort = () => { if (aborted) throw new Aborted('aborted'); };

  const step = async <T>(name: string, fn: () => Promise<T> | T, detail: (v: T) => string = () => ''): Promise<T> => {
    checkAbort();
    const s = Date.now();
    log(`… ${name}`);
    try {
      const v = await fn();
      const d = detail(v);
      steps.push({ step: name, seconds: (Date.now() - s) / 1000, detail: d });
      log(`✓ ${name.padEnd(24)} ${fmtS(Date.now() - s).padStart(7)}${d ? `  ${d}` : ''}`);
      return v;
    } catch (e) {
      steps.push({ step: name, seconds: (Date.now() - s) / 1000, detail: `FAILED: ${(e as Error).message}` });
      log(`✗ ${name.padEnd(24)} ${fmtS(Date.now() - s).padStart(7)}  ${(e as Error).message}`);
      throw e;
    }
  };

  mkdirSync(join(runDir, 'sync'), { recursive: true });
  log(`${opts.name}: run folder ${relative(process.cwd(), runDir) || runDir}`);
  try {
    await step('preflight', () => { sweepStale(log); const why = preflight(); if (why) throw new Error(why); });
    const image = await step('guest image', () => ensureImage(log), (r) => `${r.built ? 'built' : 'cached'} ${r.dir}`);
    await step('lab network', () => {
      result.netns = createNetwork(guests, host !== undefined, nics);
      return checkIsolation(result.netns);
    }, (d) => `${result.netns}: ${d}`);

    // -- capture: tcpdump on the bridge sees every frame between the guests and the host side
    const tcpdump = await step('capture', async () => {
      const errFd = openSync(join(runDir, 'tcpdump.log'), 'w');
      const c = spawn('ip', ['netns', 'exec', result.netns, 'tcpdump', '-i', BRIDGE, '-s', '0', '-U', '-Z', 'root', '-w', result.pcap], { stdio: ['ignore', 'ignore', errFd] });
      closeSync(errFd);
      track(c); procs.push(c);
      for (let i = 0; i < 100; i++) {
        if (/listening on/.test(readFileSync(join(runDir, 'tcpdump.log'), 'utf8'))) return c;
        if (c.exitCode !== null) break;
        await sleep(100);
      }
      throw new Error(`tcpdump did not start: ${readFileSync(join(runDir, 'tcpdump.log'), 'utf8').trim()}`);
    }, () => `${BRIDGE} -> ${relative(process.cwd(), result.pcap)}`);

    // -- host-side part (runs in the namespace, with the bridge address)
    let hostProc: ChildProcess | undefined;
    if (host) {
      await step('host part', () => {
        const fd = openSync(join(runDir, 'host.log'), 'w');
        hostProc = spawn('ip', ['netns', 'exec', result.netns, ...host.command], {
          cwd: ROOT, stdio: ['ignore', fd, fd],
          env: { ...process.env, ...host.env, LAB_NS: result.netns, LAB_RUN: runDir, LAB_SYNC: join(runDir, 'sync'), LAB_DIR, LAB_HOST_IP: HOST_IP,
            LAB_GUEST_A: GUESTS.a.ip, LAB_GUEST_B: GUESTS.b.ip, LAB_MAC_A: GUESTS.a.mac, LAB_MAC_B: GUESTS.b.mac, LAB_BRIDGE: BRIDGE,
            LAB_NODE: process.execPath, LAB_ROOT: ROOT },
        });
        closeSync(fd);
        track(hostProc); procs.push(hostProc);
      }, () => `${host.command.map((a) => relative(ROOT, a).startsWith('..') ? a : relative(ROOT, a)).join(' ')} (log host.log)`);
    }

    // -- boot: each guest reports "booted" through /out; a guest that fails to boot is retried
    const qemu: Partial<Record<GuestName, ChildProcess>> = {};
    const startGuest = (g: GuestName, attempt: number): ChildProcess => {
      const con = join(runDir, `console-${g}.log`);
      if (attempt > 1 && existsSync(con)) writeFileSync(join(runDir, `console-${g}.attempt${attempt - 1}.log`), readFileSync(con));
      const peer = guests.find((x) => x !== g) ?? g;
      const append = ['root=/dev/vda', 'ro', 'console=ttyS0', 'loglevel=4', 'panic=-1', 'net.ifnames=0', 'init=/usr/local/sbin/lab-init',
        `lab.name=${g}`, `lab.ip=${GUESTS[g].ip}/24`, `lab.peer=${GUESTS[peer].ip}`, `lab.guests=${guests.join(',')}`,
        `lab.scenario=${opts.name}`, `lab.timeout=${timeoutS}`, `lab.gotimeout=${bootTimeoutS * (bootRetries + 1) + 120}`,
        ...(nics === 2 ? [`lab.ip2=${GUESTS_NIC2[g].ip}/24`, `lab.peer2=${GUESTS_NIC2[peer].ip}`] : []),
        ...(opts.fault?.guest === g ? [`lab.fault=${opts.fault.kind}`] : [])];
      const nic2 = nics === 2 ? ['-netdev', `tap,id=n1,ifname=${GUESTS_NIC2[g].tap},script=no,downscript=no`, '-device', `virtio-net-pci,netdev=n1,mac=${GUESTS_NIC2[g].mac}`] : [];
      const accel = process.env.LAB_ACCEL === 'kvm' ? ['-accel', 'kvm', '-cpu', 'host'] : ['-accel', 'tcg,thread=multi', '-cpu', tcgCpu];
      const fd = openSync(join(runDir, `qemu-${g}.log`), attempt > 1 ? 'a' : 'w');
      const c = spawn('ip', ['netns', 'exec', result.netns, 'qemu-system-x86_64', '-name', `guest${g}`, '-machine', 'q35', ...accel,
        '-smp', '1', '-m', String(mem), '-nodefaults', '-display', 'none', '-no-reboot',
        '-kernel', join(image.dir, 'vmlinuz'), '-initrd', join(image.dir, 'initrd.img'), '-append', append.join(' '),
        '-drive', `file=${join(image.dir, 'rootfs.img')},if=virtio,format=raw,snapshot=on`,
        '-netdev', `tap,id=n0,ifname=${GUESTS[g].tap},script=no,downscript=no`, '-device', `virtio-net-pci,netdev=n0,mac=${GUESTS[g].mac}`, ...nic2,
        '-virtfs', `local,path=${LAB_DIR},mount_tag=lab,security_model=none,readonly=on`,
        '-virtfs', `local,path=${runDir},mount_tag=out,security_model=none`,
        '-serial', `file:${con}`], { stdio: ['ignore', fd, fd] });
      closeSync(fd);
      track(c); procs.push(c);
      return c;
    };
    const bootOne = async (g: GuestName): Promise<string> => {
      const res: GuestResult = { rc: null, bootAttempts: 0, bootS: null, log: join(runDir, `guest-${g}.log`), console: join(runDir, `console-${g}.log`) };
      result.guests[g] = res;
      const marker = join(runDir, 'sync', `${g}.booted`);
      for (let attempt = 1; attempt <= bootRetries + 1; attempt++) {
        res.bootAttempts = attempt;
        const s = Date.now();
        const c = qemu[g] = startGuest(g, attempt);
        let why = '';
        while (!existsSync(marker)) {
          checkAbort();
          if (c.exitCode !== null || c.signalCode !== null) { why = `qemu exited (${c.exitCode ?? c.signalCode}) before the guest booted`; break; }
          if (Date.now() - s > bootTimeoutS * 1000) { why = `no boot within ${bootTimeoutS}s`; break; }
          await sleep(250);
        }
        if (!why) { res.bootS = (Date.now() - s) / 1000; return `${g} ${fmtS(Date.now() - s)}${attempt > 1 ? ` (attempt ${attempt})` : ''}`; }
        c.kill('SIGKILL');
        await new Promise<void>((r) => (c.exitCode !== null || c.signalCode !== null) ? r() : c.once('close', () => r()));
        untrack(c);
        log(`  guest ${g}: attempt ${attempt} failed: ${why}${attempt <= bootRetries ? '; booting it again' : ''}`);
        printTail(log, join(runDir, `console-${g}.log`), 15);
        if (attempt > bootRetries) throw new Error(`guest ${g} did not boot (${attempt} attempts): ${why}`);
      }
      throw new Error('unreachable');
    };
    await step('boot guests', async () => (await Promise.all(guests.map(bootOne))).join(', '), (d) => d);
    writeFileSync(join(runDir, 'sync', 'host.go'), '');

    // -- scenario: stop the capture when every guest reached capture-end, wait for power-off
    await step('scenario', async () => {
      const deadline = Date.now() + (timeoutS + 90) * 1000;
      let captureStopped = false;
      const running = () => guests.filter((g) => { const c = qemu[g]!; return c.exitCode === null && c.signalCode === null; });
      while (running().length) {
        checkAbort();
        if (!captureStopped && guests.every((g) => existsSync(join(runDir, 'sync', `${g}.capture-end`)))) {
          await sleep(1000);
          tcpdump.kill('SIGINT');
          captureStopped = true;
        }
        if (Date.now() > deadline) {
          for (const g of running()) { log(`  guest ${g} still running after ${timeoutS + 90}s: killing it`); qemu[g]!.kill('SIGKILL'); }
          await sleep(500);
          break;
        }
        await sleep(250);
      }
      for (const g of guests) {
        const rcFile = join(runDir, `guest-${g}.rc`);
        result.guests[g]!.rc = existsSync(rcFile) ? Number(readFileSync(rcFile, 'utf8').trim()) : null;
      }
      if (hostProc) {
        const hp = hostProc;
        const s = Date.now();
        while (hp.exitCode === null && hp.signalCode === null && Date.now() - s < 30_000) await sleep(250);
        if (hp.exitCode === null && hp.signalCode === null) { log('  host part still running 30s after the guests: killing it'); hp.kill('SIGKILL'); await sleep(300); }
        result.host = { rc: hp.exitCode, log: join(runDir, 'host.log') };
      }
    }, () => `rc ${guests.map((g) => `${g}=${result.guests[g]!.rc ?? '?'}`).join(' ')}${result.host ? ` host=${result.host.rc ?? '?'}` : ''}`);

    await step('stop capture', async () => {
      if (tcpdump.exitCode === null) tcpdump.kill('SIGINT');
      const s = Date.now();
      while (tcpdump.exitCode === null && tcpdump.signalCode === null && Date.now() - s < 10_000) await sleep(100);
      return readFileSync(join(runDir, 'tcpdump.log'), 'utf8').split('\n').find((l) => /packets captured/.test(l)) ?? '';
    }, (d) => d);

    await step('decode (smcdump)', () => {
      const r = spawnSync(process.execPath, ['--import', 'tsx', join(ROOT, 'cli', 'bin', 'smcdump.ts'), '-r', result.pcap, '--no-color'], { cwd: ROOT, encoding: 'utf8', maxBuffer: 256 << 20, env: { ...process.env, NO_COLOR: '1' } });
      writeFileSync(join(runDir, 'smcdump.txt'), r.stdout + r.stderr);
      if (r.status !== 0) throw new Error(`smcdump exit ${r.status}: ${r.stderr.trim()}`);
      result.smcdumpText = r.stdout;
      // The closing summary on stderr ("N frames; SMC: …; N issues (N errors)"); lines after it
      // (e.g. an anomaly count) stay in smcdump.txt.
      const lines = r.stderr.trim().split('\n');
      result.smcdumpSummary = lines.find((l) => /^\d+ frames\b/.test(l)) ?? lines.pop() ?? '';
      const j = spawnSync(process.execPath, ['--import', 'tsx', join(ROOT, 'cli', 'bin', 'smcdump.ts'), '-r', result.pcap, '--summary', '--json'], { cwd: ROOT, encoding: 'utf8', maxBuffer: 64 << 20 });
      if (j.status !== 0) throw new Error(`smcdump --summary --json exit ${j.status}: ${j.stderr.trim()}`);
      writeFileSync(join(runDir, 'summary.json'), j.stdout);
      result.smcSummary = JSON.parse(j.stdout) as SmcSummary;
      return `${result.smcdumpSummary}; ${result.smcSummary.anomalies.length} anomalies`;
    }, (d) => d);

    const bad = guests.filter((g) => result.guests[g]!.rc !== 0);
    const rcText = (rc: number | null) => rc === null ? 'no result: the guest died or was killed'
      : rc === 124 ? 'rc 124: the scenario watchdog fired' : rc === 127 ? 'rc 127: no such scenario in the guest' : `rc ${rc}`;
    if (bad.length) throw new Error(`scenario failed in guest ${bad.map((g) => `${g} (${rcText(result.guests[g]!.rc)})`).join(', ')}`);
    if (result.host && result.host.rc !== 0) throw new Error(`host part failed (rc ${result.host.rc ?? 'killed'})`);
    result.ok = true;
  } catch (e) {
    result.failure = e instanceof Aborted ? 'interrupted' : (e as Error).message;
  } finally {
    aborted = true; // stops any loop still running (e.g. the other guest's boot after one failed)
    opts.signal?.removeEventListener('abort', onAbort);
    const s = Date.now();
    for (const c of procs) if (c.exitCode === null && c.signalCode === null) c.kill('SIGTERM');
    if (result.netns) removeNamespaceSync(result.netns);
    for (const c of procs) untrack(c);
    result.leftovers = result.netns ? leftovers(result.netns, runDir) : [];
    const line = result.leftovers.length ? `LEFT BEHIND: ${result.leftovers.join('; ')}` : 'nothing left running or mounted';
    steps.push({ step: 'cleanup', seconds: (Date.now() - s) / 1000, detail: line });
    log(`${result.leftovers.length ? '✗' : '✓'} ${'cleanup'.padEnd(24)} ${fmtS(Date.now() - s).padStart(7)}  ${line}`);
    if (result.leftovers.length && result.ok) { result.ok = false; result.failure = line; }
  }
  result.seconds = (Date.now() - t0) / 1000;
  writeFileSync(join(runDir, 'result.json'), JSON.stringify(result, null, 2));
  if (!result.ok && result.failure !== 'interrupted') {
    for (const g of guests) {
      printTail(log, join(runDir, `console-${g}.log`), 25);
      printTail(log, join(runDir, `guest-${g}.log`), 25);
    }
    if (result.host) printTail(log, result.host.log, 25);
  }
  log(`${opts.name}: ${result.ok ? 'PASS' : `FAIL (${result.failure})`} in ${fmtS(result.seconds * 1000)}; logs and capture in ${relative(process.cwd(), runDir) || runDir}`);
  pruneRuns(opts.name);
  return result;
}

function printTail(log: (l: string) => void, file: string, n: number): void {
  if (!existsSync(file)) return;
  const lines = readFileSync(file, 'utf8').replace(/\r/g, '').trimEnd().split('\n');
  log(`---- last ${Math.min(n, lines.length)} lines of ${relative(process.cwd(), file)}`);
  for (const l of lines.slice(-n)) log(`  | ${l}`);
}

/** Interactive guest on a fresh lab network: root shell on this terminal; exit powers off. */
export async function shell(g: GuestName): Promise<number> {
  const why = preflight();
  if (why) throw new Error(why);
  const image = await ensureImage();
  const runDir = join(LAB_DIR, 'out', `shell-${g}-${stamp()}-${process.pid}`);
  mkdirSync(join(runDir, 'sync'), { recursive: true });
  const ns = createNetwork(['a', 'b'], true);
  defaultLog(`guest ${g} (${GUESTS[g].ip}) in ${ns}; host side ${HOST_IP}; in the guest: . /lab/guest/common.sh; setup_rdma`);
  const append = `root=/dev/vda ro console=ttyS0 loglevel=4 panic=-1 net.ifnames=0 init=/usr/local/sbin/lab-init lab.name=${g} lab.ip=${GUESTS[g].ip}/24 lab.peer=${GUESTS[g === 'a' ? 'b' : 'a'].ip} lab.scenario=shell`;
  const c = spawn('ip', ['netns', 'exec', ns, 'qemu-system-x86_64', '-name', `guest${g}`, '-machine', 'q35', '-accel', 'tcg,thread=multi', '-cpu', 'max,-erms',
    '-smp', '1', '-m', '1024', '-nodefaults', '-display', 'none', '-no-reboot', '-kernel', join(image.dir, 'vmlinuz'), '-initrd', join(image.dir, 'initrd.img'),
    '-append', append, '-drive', `file=${join(image.dir, 'rootfs.img')},if=virtio,format=raw,snapshot=on`,
    '-netdev', `tap,id=n0,ifname=${GUESTS[g].tap},script=no,downscript=no`, '-device', `virtio-net-pci,netdev=n0,mac=${GUESTS[g].mac}`,
    '-virtfs', `local,path=${LAB_DIR},mount_tag=lab,security_model=none,readonly=on`, '-virtfs', `local,path=${runDir},mount_tag=out,security_model=none`,
    '-serial', 'stdio'], { stdio: 'inherit' });
  track(c);
  const code = await new Promise<number>((r) => c.on('close', (x) => r(x ?? 1)));
  untrack(c);
  removeNamespaceSync(ns);
  return code;
}
