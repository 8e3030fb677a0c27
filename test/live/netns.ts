// Helpers for the live-capture tests: a network namespace per test (created and deleted
// here, so test traffic never leaves it), smcdump / tcpdump / test scripts run inside it,
// and the command lines that work both from dist/ (npm test) and under tsx.

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, haveCommand } from '../helpers.js';

const fromDist = import.meta.url.includes('/dist/') && existsSync(join(ROOT, 'dist', 'cli', 'bin', 'smcdump.js'));

/** node arguments that run smcdump (compiled under dist/, else the source through tsx). */
export const SMCDUMP: string[] = fromDist ? [join(ROOT, 'dist', 'cli', 'bin', 'smcdump.js')] : ['--import', 'tsx', join(ROOT, 'cli', 'bin', 'smcdump.ts')];

/** node arguments that run a script of this folder (replay, ...). */
export function script(name: string): string[] {
  return fromDist ? [join(ROOT, 'dist', 'test', 'live', `${name}.js`)] : ['--import', 'tsx', join(ROOT, 'test', 'live', `${name}.ts`)];
}

/** Why the root-only live tests cannot run here, or undefined when they can. */
export function liveSkipReason(): string | undefined {
  if (process.platform !== 'linux') return 'live capture tests need Linux';
  if (process.getuid?.() !== 0) return 'needs root (creates a network namespace and captures in it); CI runs these as root';
  if (!haveCommand('ip')) return 'needs iproute2 (`ip netns`)';
  if (!existsSync(join(ROOT, 'native', 'build', 'Release', 'pcap_live.node'))) return 'the libpcap addon is not built (npm run build:native)';
  return undefined;
}

export class Netns {
  private deleted = false;
  private readonly procs: Proc[] = [];
  private constructor(readonly name: string) {}

  /** A fresh namespace with lo up (and the given IPv4 addresses on lo). */
  static create(tag: string, addrs: string[] = []): Netns {
    const name = `smcscope-${tag}-${process.pid}-${Math.floor(Math.random() * 1e6)}`;
    run('ip', ['netns', 'add', name]);
    const ns = new Netns(name);
    try {
      ns.run('ip', ['link', 'set', 'lo', 'up']);
      for (const a of addrs) ns.run('ip', ['addr', 'add', `${a}/32`, 'dev', 'lo']);
    } catch (e) {
      ns.delete();
      throw e;
    }
    return ns;
  }

  /** Run a command inside the namespace to completion (throws on failure). */
  run(cmd: string, args: string[], opts: { timeout?: number } = {}): string {
    return run('ip', ['netns', 'exec', this.name, cmd, ...args], opts);
  }

  /** Start a command inside the namespace. `ip netns exec` execs the command, so the pid
   *  (and signals) are the command's own. */
  spawn(cmd: string, args: string[]): Proc {
    const p = new Proc(spawn('ip', ['netns', 'exec', this.name, cmd, ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] }));
    this.procs.push(p);
    return p;
  }

  /** Kill what is still running in it (a failed test), then delete the namespace. */
  delete(): void {
    if (this.deleted) return;
    this.deleted = true;
    for (const p of this.procs) p.kill();
    spawnSync('ip', ['netns', 'delete', this.name], { stdio: 'ignore' });
  }
}

function run(cmd: string, args: string[], opts: { timeout?: number } = {}): string {
  const r = spawnSync(cmd, args, { encoding: 'utf8', cwd: ROOT, timeout: opts.timeout ?? 60_000, maxBuffer: 256 << 20 });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (${r.status ?? r.signal}): ${r.stderr || r.error?.message || ''}`.trim());
  return r.stdout;
}

/** A running process with its output collected. */
export class Proc {
  out = '';
  err = '';
  private readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;

  constructor(readonly child: ChildProcess) {
    child.stdout!.setEncoding('utf8').on('data', (d: string) => { this.out += d; });
    child.stderr!.setEncoding('utf8').on('data', (d: string) => { this.err += d; });
    this.exited = new Promise((resolve) => child.on('close', (code, signal) => resolve({ code, signal })));
  }

  get pid(): number { return this.child.pid!; }

  /** SIGKILL if still running. */
  kill(): void {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGKILL');
  }

  /** Resolve once stderr matches `re` (e.g. the "listening on" line); reject on exit or timeout. */
  async waitFor(re: RegExp, timeoutMs = 30_000): Promise<void> {
    const t0 = Date.now();
    let done = false;
    void this.exited.then(() => { done = true; });
    while (!re.test(this.err)) {
      if (done) throw new Error(`process exited before ${re}: ${this.err.trim()}`);
      if (Date.now() - t0 > timeoutMs) throw new Error(`timed out waiting for ${re}: ${this.err.trim()}`);
      await sleep(20);
    }
  }

  /** Send `signal` (default SIGINT) and wait for the exit. */
  async stop(signal: NodeJS.Signals = 'SIGINT', timeoutMs = 30_000): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill(signal);
    return this.wait(timeoutMs);
  }

  async wait(timeoutMs = 60_000): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => { this.child.kill('SIGKILL'); reject(new Error(`process did not exit within ${timeoutMs} ms: ${this.err.trim()}`)); }, timeoutMs);
    });
    try {
      return await Promise.race([this.exited, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** CPU time (user + system) used so far, in ms (Linux /proc). */
  cpuMs(): number {
    const f = readFileSync(`/proc/${this.pid}/stat`, 'utf8');
    const rest = f.slice(f.lastIndexOf(')') + 2).split(' ');
    // fields after "comm": state(3) ... utime(14) stime(15) => indexes 11, 12 here
    const ticks = Number(rest[11]) + Number(rest[12]);
    return (ticks * 1000) / 100; // USER_HZ is 100 on Linux
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Parse the live closing summary ("N frames captured", ...). */
export function liveSummary(stderr: string): { captured: number; received: number; dropped: number } {
  const num = (what: string): number => {
    const m = new RegExp(`^(\\d+) frames ${what}$`, 'm').exec(stderr);
    if (!m) throw new Error(`no "frames ${what}" in: ${stderr.trim()}`);
    return Number(m[1]);
  };
  return { captured: num('captured'), received: num('received by filter'), dropped: num('dropped by kernel') };
}
