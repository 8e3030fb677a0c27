// One TCP connection of the capture, as the model's TcpConn, in fewer objects: the tracker
// keeps one per connection for the whole capture. Its two endpoints are kept as fields and its
// handshake steps as one flat list (name, frame, time per step) instead of an object per step;
// both are read back as the model's objects (made on each read: the summary and the diagnosis
// read them once or twice per connection, the tracker only at a CONFIRM LINK). A step is two
// doubles (8 bytes each, no object and no BigInt per step): its frame and name code in one
// (frame * NAME_CODES + code, exact below 2^47 frames), its time as nanoseconds since the
// capture's first frame, exact below 2^53 ns (104 days); a step further away keeps its BigInt.

import type { ClcAcceptConfirm } from '../wire/clc.js';
import type { Endpoint, SmcConn, Step, TcpConn, TcpMode, TcpStream } from './model.js';
import { none, ZERO_PAIR } from './lists.js';

/** Up to this many steps the list is copied to its exact size on each step. */
const EXACT_STEPS = 8;

/** Step names by code (the tracker's steps are a handful of literals, far fewer than NAME_CODES). */
const NAMES: string[] = ['SYN', 'SYN-ACK', 'Proposal', 'Accept', 'Confirm', 'Decline', 'CONFIRM LINK'];
const NAME_CODES = 64;
function nameCode(name: string): number {
  let i = NAMES.indexOf(name);
  if (i < 0 && NAMES.length < NAME_CODES) i = NAMES.push(name) - 1;
  return i < 0 ? NAME_CODES - 1 : i;
}

/** The time steps are kept relative to (the capture's first frame), shared by all connections. */
export interface Epoch { base: bigint }

interface Rare {
  decline: TcpConn['decline'];
  fallbackCode: number | undefined;
  rst: TcpConn['rst'];
  tcpStream: [TcpStream, TcpStream] | undefined;
}

export class TcpState implements TcpConn {
  synSmc: boolean | undefined = undefined;
  synAckSmc: boolean | undefined = undefined;
  proposed: { ueids: string[] } | undefined = undefined;
  /** The Accept until the Confirm (every SMC connection has one for a while: not rare). */
  accept: ClcAcceptConfirm | undefined = undefined;
  mode: TcpMode = 'pending';
  why: string | undefined = undefined;
  /** Shared [0, 0] until the first TCP payload byte (then its own pair). */
  tcpBytes: [number, number] = ZERO_PAIR;
  smc: SmcConn | undefined = undefined;
  closed = false;
  /** What few connections have (a Decline, a RST, a --follow stream). */
  private rare: Rare | undefined = undefined;
  /** Steps flat: frame * NAME_CODES + name code, time since the epoch (a BigInt when not exact as a double). */
  private st: (number | bigint)[] = none();

  constructor(private readonly epoch: Epoch, readonly index: number, readonly clientIp: string, readonly clientPort: number, readonly serverIp: string, readonly serverPort: number) {}

  private more(): Rare {
    return (this.rare ??= { decline: undefined, fallbackCode: undefined, rst: undefined, tcpStream: undefined });
  }
  get decline(): TcpConn['decline'] { return this.rare?.decline; }
  set decline(v: TcpConn['decline']) { if (v || this.rare) this.more().decline = v; }
  get fallbackCode(): number | undefined { return this.rare?.fallbackCode; }
  set fallbackCode(v: number | undefined) { if (v !== undefined || this.rare) this.more().fallbackCode = v; }
  get rst(): TcpConn['rst'] { return this.rare?.rst; }
  set rst(v: TcpConn['rst']) { if (v || this.rare) this.more().rst = v; }
  get tcpStream(): [TcpStream, TcpStream] | undefined { return this.rare?.tcpStream; }
  set tcpStream(v: [TcpStream, TcpStream] | undefined) { if (v || this.rare) this.more().tcpStream = v; }

  get client(): Endpoint { return { ip: this.clientIp, port: this.clientPort }; }
  get server(): Endpoint { return { ip: this.serverIp, port: this.serverPort }; }

  /** Handshake steps in order with their times (SYN, Proposal, Accept, Confirm, CONFIRM LINK). */
  get steps(): Step[] {
    const s = this.st, out = new Array<Step>(s.length / 2);
    for (let i = 0; i < s.length; i += 2) {
      const k = s[i] as number, t = s[i + 1]!;
      out[i / 2] = { name: NAMES[k % NAME_CODES]!, frame: Math.floor(k / NAME_CODES), tsNs: typeof t === 'bigint' ? t : this.epoch.base + BigInt(t) };
    }
    return out;
  }

  addStep(name: string, frame: number, tsNs: bigint): void {
    const rel = Number(tsNs - this.epoch.base);
    const t = Number.isSafeInteger(rel) ? rel : tsNs;
    const s = this.st;
    const k = frame * NAME_CODES + nameCode(name);
    if (s.length >= EXACT_STEPS * 2) { s.push(k, t); return; }
    // exact size (concat makes no spare room); numbers only make it an array of unboxed doubles.
    // No copying loop here: its turns would count towards optimising a function called a few
    // times per connection (docs/smcdump.md, "Tracker, round 6")
    this.st = s.concat([k, t]);
  }

  hasStep(name: string): boolean {
    const code = nameCode(name);
    for (let i = 0; i < this.st.length; i += 2) if ((this.st[i] as number) % NAME_CODES === code) return true;
    return false;
  }
}
