// One SMC-R connection, as the model's SmcConn, in fewer objects: its two sides and two
// directions are fields, read back as the model's pairs (a new pair per read: the summary
// reads them a few times per connection; the tracker uses dir() and tokenOf()), and the time
// of its first data is two numbers, not a Step object. The sides' values are fields of the
// connection (an object per side cost 104 bytes and a BigInt its RMB address), read back as
// the model's side objects with the same keys in the same order.

import type { Failover, LinkGroup, Link, SmcConn, SmcSide, Step, TcpConn } from './model.js';
import type { DirState } from './dir.js';
import type { Epoch } from './tcpconn.js';
import { none } from './lists.js';

type Side = Partial<SmcSide> & { gid: string };

// The numbers a CLC side announced (QPN, rkey, RMBE size, MTU, first PSN), per connection in a
// slab of 32-bit integers: ten fields of 8 bytes each were 80 bytes of every connection's object
// in the JavaScript heap (which V8 lets grow to a multiple of what is live before collecting),
// now 40 bytes outside it (docs/smcdump.md, "Tracker, round 5").
const QPN = 0, RKEY = 1, RMBE = 2, MTU = 3, PSN = 4, PER_SIDE = 5, PER_CONN = 2 * PER_SIDE;
/** Connections per slab array. */
const PER_CHUNK = 4096;

/** Where a tracker's connections keep their sides' numbers. */
export class SideSlab {
  private chunk = new Int32Array(PER_CHUNK * PER_CONN);
  private used = 0;
  /** Room for one connection's two sides: the array and the offset of side 0 (side 1 follows). */
  take(): Int32Array {
    if (this.used === PER_CHUNK) { this.chunk = new Int32Array(PER_CHUNK * PER_CONN); this.used = 0; }
    this.at = this.used++ * PER_CONN;
    return this.chunk;
  }
  /** The offset take() gave last. */
  at = 0;
}

export class SmcState implements SmcConn {
  link: Link | undefined;
  failovers: Failover[] = none();
  abort: SmcConn['abort'] = undefined;
  /** First RDMA WRITE or CDC (frame -1: none yet), its time since the epoch (a BigInt when
   *  not exact as a double). */
  private fdFrame = -1;
  private fdT: number | bigint = 0;
  // client side (CLC Confirm), then server side (CLC Accept); a mid-stream side knows its GID
  // and, once a CDC named it, its token
  private readonly gid0: string;
  private readonly gid1: string;
  private readonly peer0: string | undefined;
  private readonly peer1: string | undefined;
  private readonly mac0: string | undefined;
  private readonly mac1: string | undefined;
  private tok0: number | undefined;
  private tok1: number | undefined;
  /** RMB addresses: undefined on a mid-stream side (which has none of the CLC's fields). */
  private readonly va0: bigint | undefined;
  private readonly va1: bigint | undefined;
  /** The sides' numbers: `nums[at + side * PER_SIDE + field]`. */
  private readonly nums: Int32Array;
  private readonly at: number;

  /** The link the CLC named (its rkeys are valid there; other links learn theirs from LLC). */
  readonly clcLink: Link | undefined;

  constructor(private readonly epoch: Epoch, readonly index: number, readonly tcp: TcpConn | undefined, public lg: LinkGroup, link: Link | undefined,
    s0: Side, s1: Side, private readonly d0: DirState, private readonly d1: DirState, sides: SideSlab) {
    this.link = link;
    this.clcLink = link;
    this.gid0 = s0.gid; this.gid1 = s1.gid;
    this.peer0 = s0.peerId; this.peer1 = s1.peerId;
    this.mac0 = s0.mac; this.mac1 = s1.mac;
    this.tok0 = s0.token; this.tok1 = s1.token;
    this.va0 = s0.rmbVa; this.va1 = s1.rmbVa;
    this.nums = sides.take();
    this.at = sides.at;
    this.putSide(0, s0);
    this.putSide(1, s1);
  }

  private putSide(i: 0 | 1, x: Side): void {
    const n = this.nums, o = this.at + i * PER_SIDE;
    n[o + QPN] = x.qpn ?? 0; n[o + RKEY] = x.rkey ?? 0; n[o + RMBE] = x.rmbeSize ?? 0; n[o + MTU] = x.mtu ?? 0; n[o + PSN] = x.psn ?? 0;
  }

  /** Number `f` of side `i`. */
  private num(i: 0 | 1, f: number): number { return this.nums[this.at + i * PER_SIDE + f]!; }

  get sides(): [Side, Side] { return [this.side(0), this.side(1)]; }
  get dirs(): [DirState, DirState] { return [this.d0, this.d1]; }
  dir(i: 0 | 1): DirState { return i === 0 ? this.d0 : this.d1; }

  /** Side `i` as the model's object (made on each read). */
  side(i: 0 | 1): Side {
    const gid = i === 0 ? this.gid0 : this.gid1, token = i === 0 ? this.tok0 : this.tok1;
    const va = i === 0 ? this.va0 : this.va1;
    if (va === undefined) return token === undefined ? { gid } : { gid, token };
    return { peerId: i === 0 ? this.peer0 : this.peer1, gid, mac: i === 0 ? this.mac0 : this.mac1, qpn: this.num(i, QPN), rkey: this.num(i, RKEY) >>> 0, token, rmbVa: va,
      rmbeSize: this.num(i, RMBE), mtu: this.num(i, MTU), psn: this.num(i, PSN) };
  }
  /** The alert token side `i` announced (CLC), or a CDC named (mid-stream). */
  tokenOf(i: 0 | 1): number | undefined { return i === 0 ? this.tok0 : this.tok1; }
  /** The rkey of side `i`'s RMB on the CLC's link, when the CLC was captured. */
  clcRkeyOf(i: 0 | 1): number | undefined { return (i === 0 ? this.va0 : this.va1) === undefined ? undefined : this.num(i, RKEY) >>> 0; }
  /** The address of side `i`'s RMB (CLC), when the CLC was captured. */
  rmbVaOf(i: 0 | 1): bigint | undefined { return i === 0 ? this.va0 : this.va1; }
  /** A mid-stream connection's side `i` is now known by `token`. */
  setToken(i: 0 | 1, token: number): void { if (i === 0) this.tok0 = token; else this.tok1 = token; }

  get firstData(): Step | undefined {
    if (this.fdFrame < 0) return undefined;
    const t = this.fdT;
    return { name: 'first data', frame: this.fdFrame, tsNs: typeof t === 'bigint' ? t : this.epoch.base + BigInt(t) };
  }
  /** Data (a WRITE or a CDC) in `frame`: the first one is the handshake's last step. */
  noteData(frame: number, tsNs: bigint): void {
    if (this.fdFrame >= 0) return;
    this.fdFrame = frame;
    const rel = Number(tsNs - this.epoch.base);
    this.fdT = Number.isSafeInteger(rel) ? rel : tsNs;
  }
}
