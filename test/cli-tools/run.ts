// Test support: smcping/smcperf as real processes (compiled under dist/, else the sources with
// tsx), optionally inside a network namespace (nsenter --net), servers that are ready once they
// print their listening line, and clients with a time limit.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from '../helpers.js';

export type Tool = 'smcping' | 'smcperf';

export function toolArgv(tool: Tool): string[] {
  const compiled = join(ROOT, 'dist', 'cli', 'bin', `${tool}.js`);
  const fromDist = import.meta.url.includes('/dist/') && existsSync(compiled);
  return [process.execPath, ...(fromDist ? [compiled] : ['--import', 'tsx', join(ROOT, 'cli', 'bin', `${tool}.ts`)])];
}

export interface Result { code: number | null; signal: NodeJS.Signals | null; out: string; err: string }

/** Run a tool to completion (killed after `timeoutMs`). `prefix` e.g. ['nsenter', '--net=…', '--']. */
export function runTool(tool: Tool, args: string[], opts: { timeoutMs?: number; prefix?: string[] } = {}): Promise<Result> {
  const argv = [...(opts.prefix ?? []), ...toolArgv(tool), ...args];
  const p = spawn(argv[0]!, argv.slice(1), { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, NO_COLOR: '1' } });
  let out = '', err = '';
  p.stdout.on('data', (d: Buffer) => { out += d; });
  p.stderr.on('data', (d: Buffer) => { err += d; });
  return new Promise((resolve) => {
    const t = setTimeout(() => p.kill('SIGKILL'), opts.timeoutMs ?? 60_000);
    p.once('close', (code, signal) => { clearTimeout(t); resolve({ code, signal, out, err }); });
  });
}

/** A server process (smcping -l, smcperf -s) that printed its listening line. */
export class ServerProc {
  out = '';
  err = '';
  private exited: Promise<void>;
  private constructor(readonly proc: ChildProcess) {
    this.exited = new Promise((r) => proc.once('close', () => r()));
    proc.stdout!.on('data', (d: Buffer) => { this.out += d; });
    proc.stderr!.on('data', (d: Buffer) => { this.err += d; });
  }

  static async start(tool: Tool, args: string[], prefix: string[] = []): Promise<ServerProc> {
    const argv = [...prefix, ...toolArgv(tool), ...args];
    const s = new ServerProc(spawn(argv[0]!, argv.slice(1), { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, NO_COLOR: '1' } }));
    await new Promise<void>((resolve, reject) => {
      const t = setTimeout(() => { s.proc.kill('SIGKILL'); reject(new Error(`${tool} did not start listening: ${s.err}`)); }, 30_000);
      const check = (): void => { if (/listening|server on/.test(s.out)) { clearTimeout(t); resolve(); } };
      s.proc.stdout!.on('data', check);
      s.proc.once('close', (code) => { clearTimeout(t); reject(new Error(`${tool} exited ${code}: ${s.err.trim()}`)); });
    });
    return s;
  }

  /** SIGTERM (the server closes its link groups and exits 0); SIGKILL after 10 s. */
  async stop(): Promise<number | null> {
    if (this.proc.exitCode !== null) return this.proc.exitCode;
    this.proc.kill('SIGTERM');
    const t = setTimeout(() => this.proc.kill('SIGKILL'), 10_000);
    await this.exited;
    clearTimeout(t);
    return this.proc.exitCode;
  }
}

/** The last line of `out` parsed as JSON. */
export function lastJson(out: string): any {
  const line = out.trim().split('\n').pop() ?? '';
  return JSON.parse(line);
}
