// Small helpers shared by every smcscope command: colour policy, one-line errors, buffered stdout.

import { Chalk, type ChalkInstance } from 'chalk';
import { writeSync } from 'node:fs';

/** Colour only on a TTY, never with NO_COLOR (any value) or --no-color. */
export function makeChalk(wantColor: boolean, stream: NodeJS.WriteStream = process.stdout): ChalkInstance {
  const tty = stream.isTTY === true;
  const noColor = process.env.NO_COLOR !== undefined && process.env.NO_COLOR !== '';
  return new Chalk({ level: wantColor && tty && !noColor ? 1 : 0 });
}

/** A user-facing error: printed as one line, exits non-zero, never a stack trace. */
export class CliError extends Error {
  constructor(message: string, readonly exitCode = 1) { super(message); }
}

export function die(prog: string, err: unknown): never {
  const msg = err instanceof Error ? err.message : String(err);
  process.stderr.write(`${prog}: ${msg.split('\n')[0]}\n`);
  // A bug (not a user error) can be traced with SMCSCOPE_DEBUG=1.
  if (process.env.SMCSCOPE_DEBUG && err instanceof Error && err.stack) process.stderr.write(err.stack + '\n');
  process.exit(err instanceof CliError ? err.exitCode : 1);
}

/**
 * Buffered writer to fd 1: one write syscall per ~64 KiB instead of one per line, which is
 * what makes one-line-per-frame output fast. EPIPE (e.g. `| head`) ends the process quietly.
 */
export class Out {
  private buf: string[] = [];
  private size = 0;
  constructor(private readonly fd = 1, private readonly limit = 1 << 16) {}

  line(s: string): void {
    this.buf.push(s);
    this.size += s.length + 1;
    if (this.size >= this.limit) this.flush();
  }

  flush(): void {
    if (this.buf.length === 0) return;
    const text = this.buf.join('\n') + '\n';
    this.buf = [];
    this.size = 0;
    try {
      writeAll(this.fd, Buffer.from(text));
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'EPIPE') process.exit(0);
      throw e;
    }
  }
}

function writeAll(fd: number, b: Buffer): void {
  let o = 0;
  while (o < b.length) {
    try {
      o += writeSync(fd, b, o, b.length - o);
    } catch (e) {
      // stdout may be a non-blocking pipe: retry on EAGAIN.
      if ((e as NodeJS.ErrnoException).code !== 'EAGAIN') throw e;
    }
  }
}
