// The links of recent RoCE v2 frames by destination (IP address, QPN), in front of the QP index.
// A link's frames come in long runs (an RDMA WRITE is dozens of packets, answered by ACKs the
// other way), so most frames ask for one of a few QPs just asked for. A hit costs a QPN and a
// string compared (the decoder hands out one string per address) instead of the GID of the
// address looked up, the index's map read and both ends of the link compared (about 100 ns per
// frame, measured). Direct-mapped by QPN; an entry holds while the QP index is unchanged (its
// generation): a link that joins, leaves or learns a QP may change any answer, and those are
// rare next to frames.

import type { LinkState } from './link.js';

const SLOTS = 64;
const MASK = SLOTS - 1;

export class LinkCache {
  private readonly qpn = new Int32Array(SLOTS).fill(-1);
  private readonly gen = new Int32Array(SLOTS).fill(-1);
  private readonly end = new Uint8Array(SLOTS);
  private readonly ip: (string | undefined)[] = new Array<string | undefined>(SLOTS).fill(undefined);
  private readonly link: (LinkState | undefined)[] = new Array<LinkState | undefined>(SLOTS).fill(undefined);
  /** The end of the link the last hit of get() named (no object per frame). */
  hitEnd: 0 | 1 = 0;

  /** The link QP `qpn` at address `ip` named while the index was at generation `gen`, if cached. */
  get(ip: string, qpn: number, gen: number): LinkState | undefined {
    const s = slotOf(qpn);
    if (this.qpn[s] !== qpn || this.gen[s] !== gen || this.ip[s] !== ip) return undefined;
    this.hitEnd = this.end[s] as 0 | 1;
    return this.link[s];
  }

  /** QP `qpn` at `ip` is end `end` of `link` (the QP index said so at generation `gen`). */
  set(ip: string, qpn: number, gen: number, link: LinkState, end: 0 | 1): void {
    const s = slotOf(qpn);
    this.qpn[s] = qpn; this.gen[s] = gen; this.ip[s] = ip; this.link[s] = link; this.end[s] = end;
  }
}

function slotOf(qpn: number): number {
  return (qpn ^ (qpn >>> 6) ^ (qpn >>> 12)) & MASK;
}
