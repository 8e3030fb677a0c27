// Shared by the lab's host-side parts (scenarios/*.host.ts, test/native/lab-*-host.ts) and the
// interop tests that check them: smcpingpong's FNV-1a hash ("ACK <bytes> fnv1a=<hash>"), kept
// incremental so a stream can be hashed as it arrives, and waiting for a guest's sync file.
import { existsSync } from 'node:fs';

export const FNV1A_INIT = 2166136261;

/** FNV-1a (32 bit) of `b`, continuing from `h`. */
export function fnv1aUpdate(h: number, b: Uint8Array): number {
  for (const x of b) h = Math.imul(h ^ x, 16777619) >>> 0;
  return h;
}

/** 8 hex digits, as smcpingpong prints it. */
export function fnv1aHex(h: number): string { return h.toString(16).padStart(8, '0'); }

/** FNV-1a of a whole message, as hex. */
export function fnv1a(s: string | Uint8Array): string {
  return fnv1aHex(fnv1aUpdate(FNV1A_INIT, typeof s === 'string' ? Buffer.from(s) : s));
}

/** Resolves when `path` exists (the run folder's sync directory is a plain directory here). */
export async function waitForFile(path: string, pollMs = 200): Promise<void> {
  while (!existsSync(path)) await new Promise((r) => setTimeout(r, pollMs));
}
