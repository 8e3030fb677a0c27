// One SMC-R connection, as the model's SmcConn, in fewer objects: its two sides and two
// directions are fields, read back as the model's pairs (a new pair per read: the summary
// reads them a few times per connection; the tracker uses side() and dir()), and the time of
// its first data is two fields, not a Step object.

import type { Failover, LinkGroup, Link, SmcConn, SmcSide, Step, TcpConn } from './model.js';
import type { DirState } from './dir.js';
import { none } from './lists.js';

type Side = Partial<SmcSide> & { gid: string };

export class SmcState implements SmcConn {
  link: Link | undefined;
  failovers: Failover[] = none();
  abort: SmcConn['abort'] = undefined;
  /** First RDMA WRITE or CDC (frame -1: none yet). */
  private fdFrame = -1;
  private fdTs = 0n;

  constructor(readonly index: number, readonly tcp: TcpConn | undefined, public lg: LinkGroup, link: Link | undefined,
    private readonly s0: Side, private readonly s1: Side, private readonly d0: DirState, private readonly d1: DirState) {
    this.link = link;
  }

  get sides(): [Side, Side] { return [this.s0, this.s1]; }
  get dirs(): [DirState, DirState] { return [this.d0, this.d1]; }
  side(i: 0 | 1): Side { return i === 0 ? this.s0 : this.s1; }
  dir(i: 0 | 1): DirState { return i === 0 ? this.d0 : this.d1; }

  get firstData(): Step | undefined { return this.fdFrame < 0 ? undefined : { name: 'first data', frame: this.fdFrame, tsNs: this.fdTs }; }
  /** Data (a WRITE or a CDC) in `frame`: the first one is the handshake's last step. */
  noteData(frame: number, tsNs: bigint): void {
    if (this.fdFrame >= 0) return;
    this.fdFrame = frame;
    this.fdTs = tsNs;
  }
}
