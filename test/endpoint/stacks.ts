// Two SMC-R endpoints on a pair of loopback addresses over uroce: the first free pair
// 127.<octet>.<n>.1/.2 (other test files or developers may hold UDP 4791 on one).

import { createServer, connect, type Server, type Socket } from 'node:net';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { SmcStack } from '../../endpoint/stack.js';
import type { CdcConnection } from '../../endpoint/cdc/connection.js';
import type { SmcOptions } from '../../endpoint/config.js';
import type { UroceOptions } from '../../endpoint/verbs/uroce/index.js';

export type StackOptions = Omit<SmcOptions, 'device'>;
/** uroce options of a test device besides its address (fault injection, GSO). */
export type DeviceExtras = Omit<UroceOptions, 'address'>;

/**
 * Open endpoints `a` (client side, address .1) and `b` (.2) with the TCP option ignored, on a
 * free loopback pair; retried when another process takes the pair between probe and bind.
 */
export async function openStacks(a: StackOptions = {}, b: StackOptions = a, octet = 150, devA: DeviceExtras = {}, devB: DeviceExtras = devA): Promise<[SmcStack, SmcStack]> {
  for (let attempt = 0; ; attempt++) {
    const [x, y] = await freePair(octet);
    let s1: SmcStack | undefined;
    try {
      s1 = await SmcStack.open({ tcpOption: 'ignore', ...a, device: { provider: 'uroce', address: x, ...devA } });
      const s2 = await SmcStack.open({ tcpOption: 'ignore', ...b, device: { provider: 'uroce', address: y, ...devB } });
      return [s1, s2];
    } catch (e) {
      await s1?.close();
      if ((e as { code?: string }).code !== 'EADDRINUSE' || attempt >= 5) throw e;
    }
  }
}

/** A plain TCP connection between the two stacks' addresses: [client side, server side, server]. */
export async function tcpPair(clientAddr: string, serverAddr: string): Promise<[Socket, Socket, Server]> {
  const srv = createServer();
  srv.listen(0, serverAddr);
  await once(srv, 'listening');
  const port = (srv.address() as { port: number }).port;
  const accepted = once(srv, 'connection') as Promise<[Socket]>;
  const c = connect({ host: serverAddr, port, localAddress: clientAddr });
  await once(c, 'connect');
  const [s] = await accepted;
  return [c, s, srv];
}

export function addrOf(s: SmcStack): string {
  return (s.opts.device as { address: string }).address;
}

/**
 * A pair of loopback addresses where nobody holds UDP 4791 right now (other test files and
 * developers run uroce engines in parallel): 127.<b>.<n>.1/.2 for the first free n.
 */
export async function freePair(b: number): Promise<[string, string]> {
  const { createSocket } = await import('node:dgram');
  const free = (addr: string): Promise<boolean> => new Promise((resolve) => {
    const s = createSocket('udp4');
    s.once('error', () => { s.close(); resolve(false); });
    s.bind(4791, addr, () => { s.close(() => resolve(true)); });
  });
  for (let n = 1; n < 250; n++) {
    const x = `127.${b}.${n}.1`, y = `127.${b}.${n}.2`;
    if (await free(x) && await free(y)) return [x, y];
  }
  throw new Error(`no free loopback pair in 127.${b}.x`);
}

/** Poll `cond` every 10 ms until it holds (true) or `ms` pass (false). */
export async function until(cond: () => boolean, ms = 5000): Promise<boolean> {
  const end = Date.now() + ms;
  while (!cond()) { if (Date.now() > end) return false; await new Promise((r) => setTimeout(r, 10)); }
  return true;
}

/** Send `data` from x to y; resolves with the SHA-256 of what y read (exactly data.length bytes,
 *  so the same connections can carry the next transfer). */
export async function send(x: CdcConnection, y: CdcConnection, data: Buffer): Promise<string> {
  const got: Buffer[] = [];
  let len = 0;
  let pull = (): void => undefined;
  const done = new Promise<void>((resolve, reject) => {
    // stops at the transfer's length, so the same connection can carry the next transfer
    pull = (): void => { for (let b = len < data.length ? y.read() : null; b; b = len < data.length ? y.read() : null) { got.push(Buffer.from(b)); len += b.length; } if (len >= data.length) resolve(); };
    y.on('readable', pull);
    y.once('abort', (r: string) => reject(new Error(r)));
    pull();
  });
  let off = 0;
  const pump = (): void => { while (off < data.length) { const k = x.write(data.subarray(off)); if (!k) return; off += k; } };
  x.on('writable', pump);
  pump();
  await done;
  y.off('readable', pull);
  x.off('writable', pump);
  return createHash('sha256').update(Buffer.concat(got)).digest('hex');
}
