// The links of recent RoCE v2 frames by destination (IP address, QPN), in front of the QP index.
// A link's frames come in long runs (an RDMA WRITE is dozens of packets, answered by ACKs the
// other way), so most frames ask for one of a few QPs just asked for. A hit costs a QPN and a
// string compared (the decoder hands out one string per address) instead of the GID of the
// address looked up, the index's map read and both ends of the link compared (about 100 ns per
// frame, measured). Two entries per set of QPNs; an entry holds while the QP index is unchanged (its
// generation): a link that joins, leaves or learns a QP may change any answer, and those are
// rare next to frames.

import type { LinkState } from './link.js';

const SETS = 32;
const MASK = SETS - 1;

/** Two entries per set: the two ends of a link often have the same QPN (Linux numbers QPs per
 *  device from the same start), so a WRITE one way and its ACK the other way land in one set;
 *  with one entry per set they would evict each other on every frame. */
export class LinkCache {
  private readonly qpn = new Int32Array(SETS * 2).fill(-1);
  private readonly gen = new Int32Array(SETS * 2).fill(-1);
  private readonly end = new Uint8Array(SETS * 2);
  /** Per set, which of its two entries set() replaces next (the one not used last). */
  private readonly next = new Uint8Array(SETS);
  private readonly ip: (string | undefined)[] = new Array<string | undefined>(SETS * 2).fill(undefined);
  private readonly link: (LinkState | undefined)[] = new Array<LinkState | undefined>(SETS * 2).fill(undefined);
  /** The end of the link the last hit of get() named (no object per frame). */
  hitEnd: 0 | 1 = 0;

  /** The link QP `qpn` at address `ip` named while the index was at generation `gen`, if cached. */
  get(ip: string, qpn: number, gen: number): LinkState | undefined {
    const set = setOf(qpn);
    let e = set * 2;
    if (this.qpn[e] !== qpn || this.gen[e] !== gen || this.ip[e] !== ip) {
      e++;
      if (this.qpn[e] !== qpn || this.gen[e] !== gen || this.ip[e] !== ip) return undefined;
    }
    this.next[set] = (e & 1) ^ 1;
    this.hitEnd = this.end[e] as 0 | 1;
    return this.link[e];
  }

  /** QP `qpn` at `ip` is end `end` of `link` (the QP index said so at generation `gen`). */
  set(ip: string, qpn: number, gen: number, link: LinkState, end: 0 | 1): void {
    const set = setOf(qpn);
    // the entry of the same QP if there is one (a stale generation), else the one not used last
    const e = this.qpn[set * 2] === qpn && this.ip[set * 2] === ip ? set * 2
      : this.qpn[set * 2 + 1] === qpn && this.ip[set * 2 + 1] === ip ? set * 2 + 1 : set * 2 + this.next[set]!;
    this.qpn[e] = qpn; this.gen[e] = gen; this.ip[e] = ip; this.link[e] = link; this.end[e] = end;
    this.next[set] = (e & 1) ^ 1;
  }
}

function setOf(qpn: number): number {
  return (qpn ^ (qpn >>> 5) ^ (qpn >>> 10)) & MASK;
}
