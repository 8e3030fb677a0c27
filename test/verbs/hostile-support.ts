// Small helpers for hostile.test.ts.
import type { Device } from '../../endpoint/verbs/index.js';
import { connectPair as cp } from './harness.js';

export function connectPair(a: Device, b: Device): ReturnType<typeof cp> {
  return cp(a, b, { timeout: 12, retryCnt: 7 });
}

export function prngBytes(rnd: () => number, n: number): Uint8Array {
  const b = new Uint8Array(n);
  for (let i = 0; i < n; i++) b[i] = Math.floor(rnd() * 256);
  return b;
}
