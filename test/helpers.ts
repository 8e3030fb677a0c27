// Shared test helpers: paths to the bundled captures and whole-capture decoding.
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { openCapture, readCaptureBuffer } from '../capture/reader.js';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { Out } from '../cli/output.js';
import { cloneFrame, type CapturedFrame } from '../capture/types.js';
import { FrameDecoder, type DecodedFrame, type FrameDecoderOptions } from '../dissectors/frame.js';

/** ava runs tests from the project root (both from dist/ and with tsx). */
export const ROOT = process.cwd();
export const PCAPS = join(ROOT, 'pcaps');
export const KERNEL_CAPTURES = ['a-first-contact', 'b-second-contact', 'c1-fallback-tcp-server', 'c2-fallback-server-decline', 'd-bulk-2MiB', 'e-testlink-teardown'];

export function pcapPath(name: string): string { return join(PCAPS, name.endsWith('.pcap') ? name : `${name}.pcap`); }

export async function readFrames(path: string): Promise<CapturedFrame[]> {
  const r = await openCapture(path);
  const out: CapturedFrame[] = [];
  for (let f = r.next(); f; f = r.next()) out.push(cloneFrame(f));
  r.close();
  return out;
}

/** Frame bytes of a capture file, read with the project's own reader (frames stay valid). */
export function frameBytes(path: string): Uint8Array[] {
  const r = readCaptureBuffer(new Uint8Array(readFileSync(path)), { reuseFrame: false });
  const out: Uint8Array[] = [];
  for (let f = r.next(); f; f = r.next()) out.push(f.data);
  return out;
}

export async function decodeCapture(name: string, opts: FrameDecoderOptions = {}): Promise<DecodedFrame[]> {
  const frames = await readFrames(pcapPath(name));
  const d = new FrameDecoder(opts);
  return frames.map((f) => d.decode(f));
}

export function haveCommand(cmd: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0;
}

/** Small deterministic PRNG (mulberry32) so fuzz failures reproduce. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Everything `fill` writes to an Out (buffer of `size` bytes: small, so flushes happen in the
 *  middle of lines and columns), read back as text through a real file descriptor. */
export function writtenByOut(fill: (o: Out) => void, size = 4096): string {
  const dir = mkdtempSync(join(tmpdir(), 'out-'));
  const file = join(dir, 'out.txt');
  const fd = openSync(file, 'w');
  try {
    const o = new Out(fd, size);
    fill(o);
    o.flush();
  } finally { closeSync(fd); }
  const s = readFileSync(file, 'utf8');
  rmSync(dir, { recursive: true });
  return s;
}
