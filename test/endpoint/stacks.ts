// Two SMC-R endpoints on a pair of loopback addresses over uroce (the first free pair of
// 127.0.0.1/.2, 127.0.<n>.1/.2 — other test files or developers may hold UDP 4791 on one).

import { createServer, connect, type Server, type Socket } from 'node:net';
import { once } from 'node:events';
import { SmcStack } from '../../endpoint/stack.js';
import type { SmcOptions } from '../../endpoint/config.js';

export type StackOptions = Omit<SmcOptions, 'device'>;

export async function openStacks(a: StackOptions = {}, b: StackOptions = a, start = 0): Promise<[SmcStack, SmcStack]> {
  let last: unknown;
  for (let n = start; n < start + 40; n++) {
    const [x, y] = n === 0 ? ['127.0.0.1', '127.0.0.2'] : [`127.0.${n + 150}.1`, `127.0.${n + 150}.2`];
    let s1: SmcStack | undefined;
    try {
      s1 = await SmcStack.open({ tcpOption: 'ignore', ...a, device: { provider: 'uroce', address: x } });
      const s2 = await SmcStack.open({ tcpOption: 'ignore', ...b, device: { provider: 'uroce', address: y } });
      return [s1, s2];
    } catch (e) {
      last = e;
      await s1?.close();
      if ((e as { code?: string }).code !== 'EADDRINUSE') throw e;
    }
  }
  throw last;
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
