// TCP connections by their addresses and ports, either way round. The key is the lower of the
// two addresses, the interned string the connection keeps anyway: no key string per connection
// (an "a:p-b:q" key was about 60 bytes of each connection's share of the heap, with its map
// slot). An address with one connection maps to it, one with a few to a short list, a busy one
// (a server with thousands of clients) to a map by the two ports. A tuple seen again after its
// connection ended (a new SYN) names the newest connection.

import type { TcpState } from './tcpconn.js';

/** Up to this many connections of one address are scanned. */
const SCAN_MAX = 16;

type Slot = TcpState | TcpState[];

export class TcpIndex {
  private readonly m = new Map<string, Slot | Map<number, Slot>>();

  /** The newest connection between (`aIp`, `aPort`) and (`bIp`, `bPort`). */
  get(aIp: string, aPort: number, bIp: string, bPort: number): TcpState | undefined {
    const q = this.m.get(aIp < bIp ? aIp : bIp);
    if (q === undefined) return undefined;
    return find(q instanceof Map ? q.get(portKey(aPort, bPort)) : q, aIp, aPort, bIp, bPort);
  }

  /** `c` is the newest connection of its addresses and ports. */
  set(c: TcpState): void {
    const lo = c.clientIp < c.serverIp ? c.clientIp : c.serverIp;
    const q = this.m.get(lo);
    if (q === undefined) { this.m.set(lo, c); return; }
    if (q instanceof Map) { const k = portKey(c.clientPort, c.serverPort); q.set(k, put(q.get(k), c)); return; }
    const s = put(q, c);
    if (!Array.isArray(s) || s.length <= SCAN_MAX) { this.m.set(lo, s); return; }
    const big = new Map<number, Slot>();
    for (const x of s) { const k = portKey(x.clientPort, x.serverPort); big.set(k, put(big.get(k), x)); }
    this.m.set(lo, big);
  }
}

/** The two ports as one number, the same either way round. */
function portKey(a: number, b: number): number {
  return a < b ? a * 65536 + b : b * 65536 + a;
}

/** `c` is the connection between (`aIp`, `aPort`) and (`bIp`, `bPort`), either way round. */
export function sameTuple(c: TcpState, aIp: string, aPort: number, bIp: string, bPort: number): boolean {
  return (c.clientPort === aPort && c.serverPort === bPort && c.clientIp === aIp && c.serverIp === bIp)
    || (c.clientPort === bPort && c.serverPort === aPort && c.clientIp === bIp && c.serverIp === aIp);
}

function find(s: Slot | undefined, aIp: string, aPort: number, bIp: string, bPort: number): TcpState | undefined {
  if (s === undefined) return undefined;
  if (!Array.isArray(s)) return sameTuple(s, aIp, aPort, bIp, bPort) ? s : undefined;
  for (let i = s.length - 1; i >= 0; i--) if (sameTuple(s[i]!, aIp, aPort, bIp, bPort)) return s[i];
  return undefined;
}

/** `s` with `c` in it, in place of a connection of the same tuple. */
function put(s: Slot | undefined, c: TcpState): Slot {
  if (s === undefined) return c;
  const t = (x: TcpState): boolean => sameTuple(x, c.clientIp, c.clientPort, c.serverIp, c.serverPort);
  if (!Array.isArray(s)) return t(s) ? c : [s, c];
  const i = s.findIndex(t);
  if (i >= 0) s[i] = c; else s.push(c);
  return s;
}
