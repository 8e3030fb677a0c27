// commander set up the same way for smcping and smcperf, and small process helpers.

import type { Command } from 'commander';
import { readFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { packageRoot } from '../../native/paths.js';
import { CliError } from '../output.js';

/** The package's version (package.json), '?' when it cannot be read. */
export function packageVersion(): string {
  try { return String((JSON.parse(readFileSync(join(packageRoot(), 'package.json'), 'utf8')) as { version?: string }).version ?? '?'); } catch { return '?'; }
}

/** commander wired for one-line errors (exit 2), --help on stdout, --version. */
export function cliProgram(p: Command): Command {
  p.version(`${p.name()} ${packageVersion()} (smcscope)`, '-V, --version');
  p.exitOverride((e) => { throw new CliError(e.message.replace(/^error: /, ''), e.exitCode === 0 ? 0 : 2); });
  p.configureOutput({ writeErr: () => undefined, writeOut: (str) => { try { writeSync(1, str); } catch { /* reader gone */ } } });
  return p;
}

/** Write a line to stdout synchronously (ordering with process.exit). */
export function say(line: string): void {
  try { writeSync(1, line + '\n'); } catch { /* reader gone */ }
}

/** Sleep that an AbortSignal ends early. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted || ms <= 0) { resolve(); return; }
    const t = setTimeout(done, ms);
    function done(): void { clearTimeout(t); signal?.removeEventListener('abort', done); resolve(); }
    signal?.addEventListener('abort', done, { once: true });
  });
}
