// Two of our endpoints over uroce on a loopback pair of this folder's own (127.6x.<n>.1/.2, the
// first free one), and SMC-R connections between them with data both ways.
import { SmcStack } from '../../endpoint/stack.js';
import type { CdcConnection } from '../../endpoint/cdc/connection.js';
import { openStacks, tcpPair } from '../endpoint/stacks.js';

/** Two endpoints on the first free pair 127.<octet>.<n>.1/.2 (uroce GSO as given). */
export function openPair(octet = 60, gso?: boolean): Promise<[SmcStack, SmcStack]> {
  const opts = { ueids: ['SMCSCOPE-STATE'] };
  return openStacks(opts, opts, octet, gso !== undefined ? { gso } : {});
}

export function addr(s: SmcStack): string { return (s.opts.device as { address: string }).address; }

/** Read exactly n bytes from a connection. */
export function readN(conn: CdcConnection, n: number): Promise<number> {
  return new Promise((resolve, reject) => {
    let got = 0;
    const pull = (): void => {
      for (;;) { const b = conn.read(); if (!b) break; got += b.length; }
      if (got >= n) { conn.off('readable', pull); resolve(got); }
    };
    conn.on('readable', pull);
    conn.once('abort', (r: string) => reject(new Error(r)));
    pull();
  });
}

/** Write all of `n` bytes (waits for window/buffer space). */
export function writeN(conn: CdcConnection, n: number, fill: number): Promise<void> {
  const msg = new Uint8Array(n).fill(fill);
  let off = 0;
  return new Promise((resolve) => {
    const pump = (): void => {
      while (off < msg.length) { const k = conn.write(msg.subarray(off)); if (k === 0) return; off += k; }
      conn.off('writable', pump);
      resolve();
    };
    conn.on('writable', pump);
    pump();
  });
}

/** One SMC-R connection a (client) → b (server): `up` bytes up, `down` bytes back. */
export async function exchange(a: SmcStack, b: SmcStack, up: number, down: number): Promise<{ ca: CdcConnection; cb: CdcConnection; done: () => void }> {
  const [c, s, srv] = await tcpPair(addr(a), addr(b));
  const [ra, rb] = await Promise.all([a.handshake('client', c), b.handshake('server', s)]);
  if (ra.mode !== 'smcr' || rb.mode !== 'smcr') throw new Error(`fell back: ${ra.mode === 'tcp' ? ra.reason : ''} ${rb.mode === 'tcp' ? rb.reason : ''}`);
  const ca = a.attach(ra), cb = b.attach(rb);
  await Promise.all([writeN(ca, up, 1), readN(cb, up)]);
  await Promise.all([writeN(cb, down, 2), readN(ca, down)]);
  return { ca, cb, done: () => { c.destroy(); s.destroy(); srv.close(); } };
}
