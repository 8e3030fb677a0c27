// The three servers the hostile tests attack, each a separate process on its own loopback
// address (127.0.93.x; no TCP option, so no root): smcping -l, smcperf -s and the example
// createServer echo server (example-server.ts).
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { ROOT } from '../helpers.js';
import { toolArgv } from '../cli-tools/run.js';
import { UEID } from './peer.js';

/** A server process, ready once it printed its listening line; its output is kept. */
export class ServerProc {
  out = '';
  err = '';
  private readonly exited: Promise<void>;
  private constructor(readonly proc: ChildProcess) {
    this.exited = new Promise((r) => proc.once('close', () => r()));
    proc.stdout!.on('data', (d: Buffer) => { this.out += d; });
    proc.stderr!.on('data', (d: Buffer) => { this.err += d; });
  }

  static async spawn(argv: string[], env: Record<string, string> = {}): Promise<ServerProc> {
    const s = new ServerProc(spawn(argv[0]!, argv.slice(1), { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, NO_COLOR: '1', ...env } }));
    await new Promise<void>((resolve, reject) => {
      const t = setTimeout(() => { s.proc.kill('SIGKILL'); reject(new Error(`${argv.join(' ')} did not start listening: ${s.err}`)); }, 30_000);
      const check = (): void => { if (/listening|server on/.test(s.out)) { clearTimeout(t); resolve(); } };
      s.proc.stdout!.on('data', check);
      s.proc.once('close', (code) => { clearTimeout(t); reject(new Error(`${argv.join(' ')} exited ${code}: ${s.err.trim()}`)); });
    });
    return s;
  }

  /** Resolves with the first output line (stdout or stderr) matching `re` after `from` characters, or undefined after `ms`. */
  async waitFor(re: RegExp, ms: number, from = 0): Promise<string | undefined> {
    const until = Date.now() + ms;
    for (;;) {
      const line = (this.out.slice(from) + '\n' + this.err).split('\n').find((l) => re.test(l));
      if (line || Date.now() > until) return line;
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  /** SIGTERM, then SIGKILL after 10 s. */
  async stop(): Promise<number | null> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return this.proc.exitCode;
    this.proc.kill('SIGTERM');
    const t = setTimeout(() => this.proc.kill('SIGKILL'), 10_000);
    await this.exited;
    clearTimeout(t);
    return this.proc.exitCode;
  }
}

export interface Target { name: 'smcping' | 'smcperf' | 'example'; addr: string; port: number; proc: ServerProc }

/** Start one server on `addr`, port chosen by the OS. */
export async function startTarget(name: Target['name'], addr: string, env: Record<string, string> = {}, extra: string[] = []): Promise<Target> {
  if (name === 'smcping') {
    const proc = await ServerProc.spawn([...toolArgv('smcping'), '-l', '-b', addr, '-p', '0', '--ueid', UEID, '--no-tcp-option', ...extra]);
    return { name, addr, port: Number(/listening on [\d.]+:(\d+)/.exec(proc.out)![1]), proc };
  }
  if (name === 'smcperf') {
    const proc = await ServerProc.spawn([...toolArgv('smcperf'), '-s', '-b', addr, '-p', '0', '--tcp-port', '0', '--ueid', UEID, '--no-tcp-option', ...extra]);
    return { name, addr, port: Number(/server on [\d.]+:(\d+)/.exec(proc.out)![1]), proc };
  }
  const script = join(ROOT, 'dist', 'test', 'hostile', 'example-server.js');
  const proc = await ServerProc.spawn([process.execPath, script, addr, '0'], env);
  return { name, addr, port: Number(/listening [\d.]+:(\d+)/.exec(proc.out)![1]), proc };
}

/** Alive = has not exited. */
export function alive(t: Target): boolean { return t.proc.proc.exitCode === null && t.proc.proc.signalCode === null; }

