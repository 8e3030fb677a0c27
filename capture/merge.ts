// Several capture files read as one, frames in timestamp order, like mergecap: each file is
// already in time order, so the next frame is the earliest of the files' next frames (ties go
// to the file named first). A linear scan over the files' heads, as mergecap does: the number
// of files is small next to the number of frames.

import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { openCaptureSync, type CaptureReader } from './reader.js';
import { CaptureFormatError, type CapturedFrame } from './types.js';

/**
 * The files `-r` names: each argument as given, or, when it does not exist and is a glob
 * (`'caps/*.pcapng'`, quoted so the shell left it alone), the files it matches, sorted.
 */
export function expandCaptureArgs(args: readonly string[]): string[] {
  const out: string[] = [];
  for (const a of args) {
    if (a === '-' || existsSync(a)) { out.push(a); continue; }
    const { globSync, isDynamicPattern } = globber();
    if (!isDynamicPattern(a)) { out.push(a); continue; }
    const hits = globSync(a, { onlyFiles: true, expandDirectories: false }).sort();
    if (hits.length === 0) throw new CaptureFormatError(`cannot open ${a}: no file matches`);
    out.push(...hits);
  }
  return out;
}

type Globber = Pick<typeof import('tinyglobby'), 'globSync' | 'isDynamicPattern'>;
let glob: Globber | undefined;

/** tinyglobby, loaded the first time an argument is not a file: importing it costs ~12 ms of
 *  start-up, which every replay would pay for the rare quoted glob. */
function globber(): Globber {
  return (glob ??= createRequire(import.meta.url)('tinyglobby') as Globber);
}

/** Fraction digits a frame's timestamp carries: 9 when its interface counts finer than µs. */
export function tsDigits(r: CaptureReader, f: CapturedFrame): 6 | 9 {
  const i = r.interfaces[f.ifIndex];
  if (!i) return 6;
  return (i.tsBase === 10 ? i.tsExp > 6 : i.tsExp > 20) ? 9 : 6;
}

export class MergedReader {
  private readonly heads: Array<CapturedFrame | null> = [];
  private last = -1;
  private started = false;
  /** The only reader when there is one file: its frames need no merging (no heads, no
   *  timestamp comparison), so next() hands them straight on. */
  private readonly only: CaptureReader | undefined;

  private constructor(readonly readers: CaptureReader[], readonly paths: string[]) {
    this.only = readers.length === 1 ? readers[0] : undefined;
  }

  /** Open every file before reading any (an unreadable one is reported before output starts). */
  static open(paths: readonly string[]): MergedReader {
    const readers: CaptureReader[] = [];
    try {
      for (const p of paths) readers.push(openCaptureSync(p));
    } catch (e) {
      for (const r of readers) r.close();
      throw e;
    }
    return new MergedReader(readers, [...paths]);
  }

  /** The reader of the frame next() returned last. */
  get current(): CaptureReader { return this.readers[Math.max(0, this.last)]!; }
  get linktype(): number { return this.readers[0]!.linktype; }
  get format(): 'pcap' | 'pcapng' { return this.readers[0]!.format; }
  get fileSize(): number { return this.readers.reduce((n, r) => n + r.fileSize, 0); }
  get bytesRead(): number { return this.readers.reduce((n, r) => n + r.bytesRead, 0); }
  get truncated(): boolean { return this.readers.some((r) => r.truncated); }

  /** Each file's warnings, named by file when there are several. */
  get warnings(): string[] {
    if (this.readers.length === 1) return this.readers[0]!.warnings;
    return this.readers.flatMap((r, i) => r.warnings.map((w) => `${this.paths[i]}: ${w}`));
  }

  /** The earliest next frame of all files (valid until the following next()), or null. */
  next(): CapturedFrame | null {
    if (this.only !== undefined) return this.only.next();
    if (!this.started) {
      this.started = true;
      for (const r of this.readers) this.heads.push(r.next());
    } else if (this.last >= 0) {
      // only now may the frame handed out last be overwritten by its reader
      this.heads[this.last] = this.readers[this.last]!.next();
    }
    let best = -1;
    for (let i = 0; i < this.heads.length; i++) {
      const h = this.heads[i];
      if (h && (best < 0 || h.tsNs < this.heads[best]!.tsNs)) best = i;
    }
    this.last = best;
    return best < 0 ? null : this.heads[best]!;
  }

  close(): void { for (const r of this.readers) r.close(); }
}
