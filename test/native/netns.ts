// Test support for the native tests: a network namespace of our own, processes inside it
// (nsenter --net only, so the cgroup2 mount stays visible), a tcpdump capture decoded with the
// project's own FrameDecoder, and the JSON-line agent (tcpopt-agent.ts).
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { FrameDecoder, type DecodedFrame } from '../../dissectors/frame.js';
import { readFrames } from '../helpers.js';

/** A system tool by absolute path: under npx/ava, node_modules/.bin comes first in PATH and
 *  has its own `nft` (@vercel/nft), so names are never resolved through PATH here. */
export function sysTool(name: string): string | undefined {
  for (const d of ['/usr/sbin', '/sbin', '/usr/bin', '/bin', '/usr/local/sbin', '/usr/local/bin']) {
    if (existsSync(`${d}/${name}`)) return `${d}/${name}`;
  }
  return undefined;
}

export const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;

export function run(cmd: string, args: string[], input?: string): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(sysTool(cmd) ?? cmd, args, { input, encoding: 'utf8', timeout: 20000 });
  return { status: r.status, stdout: r.stdout ?? '', stderr: r.stderr ?? (r.error ? String(r.error) : '') };
}

export class Netns {
  readonly path: string;
  private constructor(readonly name: string) { this.path = `/run/netns/${name}`; }

  /** ip netns add NAME; lo up. */
  static create(tag: string): Netns {
    const ns = new Netns(`smcscope-${tag}-${process.pid}`);
    run('ip', ['netns', 'del', ns.name]);
    const r = run('ip', ['netns', 'add', ns.name]);
    if (r.status !== 0) throw new Error(`ip netns add ${ns.name}: ${r.stderr.trim()}`);
    const l = run('ip', ['-n', ns.name, 'link', 'set', 'lo', 'up']);
    if (l.status !== 0) throw new Error(`ip -n ${ns.name} link set lo up: ${l.stderr.trim()}`);
    return ns;
  }

  /** argv prefix that runs a command inside the namespace. */
  prefix(): string[] { return ['nsenter', `--net=${this.path}`, '--']; }

  exec(cmd: string, args: string[], input?: string): { status: number | null; stdout: string; stderr: string } {
    return run('nsenter', [`--net=${this.path}`, '--', sysTool(cmd) ?? cmd, ...args], input);
  }

  destroy(): void { run('ip', ['netns', 'del', this.name]); }
}

/** tcpdump on lo inside the namespace, written to a pcap file, decoded by our own dissector. */
export class Capture {
  private readonly dir = mkdtempSync(join(tmpdir(), 'smcscope-cap-'));
  readonly file = join(this.dir, 'cap.pcap');
  private proc!: ChildProcess;

  static async start(ns: Netns, filter: string): Promise<Capture> {
    const c = new Capture();
    c.proc = spawn('nsenter', [`--net=${ns.path}`, '--', sysTool('tcpdump') ?? 'tcpdump', '--immediate-mode', '-Z', 'root', '-i', 'lo', '-U', '-s', '0', '-B', '32768', '-w', c.file, filter], { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    await new Promise<void>((res, rej) => {
      const t = setTimeout(() => rej(new Error(`tcpdump did not start: ${err}`)), 10000);
      c.proc.stderr!.on('data', (d: Buffer) => {
        err += d.toString();
        if (err.includes('listening on')) { clearTimeout(t); res(); }
      });
      c.proc.once('exit', (code) => { clearTimeout(t); rej(new Error(`tcpdump exited ${code}: ${err.trim()}`)); });
    });
    return c;
  }

  /** Stop tcpdump and decode every frame with FrameDecoder. */
  async stop(): Promise<DecodedFrame[]> {
    await new Promise((r) => setTimeout(r, 150)); // let the last packets reach the file
    const exited = new Promise((r) => this.proc.once('exit', r));
    this.proc.kill('SIGINT');
    await exited;
    const frames = await readFrames(this.file);
    const d = new FrameDecoder();
    const out = frames.map((f) => d.decode(f));
    rmSync(this.dir, { recursive: true, force: true });
    return out;
  }
}

export const SMCR_OPTION = [0xfe, 0x06, 0xe2, 0xd4, 0xc3, 0xd9];

/** The SMC-R option bytes of a decoded TCP segment (as our TCP codec found them), or undefined. */
export function smcOption(f: DecodedFrame): number[] | undefined {
  const o = f.tcp?.options.find((x) => x.kind === 254 && x.exp?.name === 'smc-r');
  return o?.bytes ? [...o.bytes] : undefined;
}

export function isSyn(f: DecodedFrame): boolean { return !!f.tcp && f.tcp.flags.syn && !f.tcp.flags.ack; }
export function isSynAck(f: DecodedFrame): boolean { return !!f.tcp && f.tcp.flags.syn && f.tcp.flags.ack; }

/** The tcpopt-agent.ts process inside a namespace: JSON requests, JSON replies. */
export class Agent {
  private next = 1;
  private readonly waiting = new Map<number, (v: Record<string, unknown>) => void>();
  pid = 0;
  private exited: Promise<void>;
  private stderr = '';

  private constructor(readonly proc: ChildProcess) {
    this.exited = new Promise((r) => proc.once('exit', () => r()));
    proc.stderr!.on('data', (d: Buffer) => { this.stderr += d.toString(); });
  }

  static async spawn(ns: Netns): Promise<Agent> {
    const here = fileURLToPath(import.meta.url);
    const ts = here.endsWith('.ts');
    const script = join(dirname(here), ts ? 'tcpopt-agent.ts' : 'tcpopt-agent.js');
    const node = [process.execPath, ...(ts ? ['--import', 'tsx'] : []), script];
    const proc = spawn('nsenter', [`--net=${ns.path}`, '--', ...node], { stdio: ['pipe', 'pipe', 'pipe'] });
    const a = new Agent(proc);
    const rl = createInterface({ input: proc.stdout! });
    await new Promise<void>((res, rej) => {
      const t = setTimeout(() => rej(new Error(`agent did not start: ${a.stderr}`)), 30000);
      rl.on('line', (line) => {
        const m = JSON.parse(line) as Record<string, unknown>;
        if (m.ready) { a.pid = m.pid as number; clearTimeout(t); res(); return; }
        const w = a.waiting.get(m.id as number);
        if (w) { a.waiting.delete(m.id as number); w(m); }
      });
      proc.once('exit', (c) => { clearTimeout(t); rej(new Error(`agent exited ${c}: ${a.stderr}`)); });
    });
    return a;
  }

  req(op: string, args: Record<string, unknown> = {}): Promise<Record<string, unknown>> {
    const id = this.next++;
    return new Promise((res, rej) => {
      const t = setTimeout(() => rej(new Error(`agent ${op} timed out; stderr: ${this.stderr}`)), 20000);
      this.waiting.set(id, (v) => { clearTimeout(t); res(v); });
      this.proc.stdin!.write(JSON.stringify({ id, op, ...args }) + '\n');
    });
  }

  async exit(): Promise<void> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    this.proc.stdin!.end(JSON.stringify({ id: 0, op: 'exit' }) + '\n');
    const t = setTimeout(() => this.proc.kill('SIGKILL'), 5000);
    await this.exited;
    clearTimeout(t);
  }

  async kill(): Promise<void> {
    this.proc.kill('SIGKILL');
    await this.exited;
  }
}
