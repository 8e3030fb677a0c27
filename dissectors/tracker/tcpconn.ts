// One TCP connection of the capture, as the model's TcpConn, in fewer objects: the tracker
// keeps one per connection for the whole capture. Its two endpoints are kept as fields and its
// handshake steps as one flat list (name, frame, time per step) instead of an object per step;
// both are read back as the model's objects (made on each read: the summary and the diagnosis
// read them once or twice per connection, the tracker only at a CONFIRM LINK).

import type { ClcAcceptConfirm } from '../wire/clc.js';
import type { Endpoint, SmcConn, Step, TcpConn, TcpMode, TcpStream } from './model.js';
import { none, ZERO_PAIR } from './lists.js';

/** Up to this many steps the list is copied to its exact size on each step. */
const EXACT_STEPS = 8;

export class TcpState implements TcpConn {
  synSmc: boolean | undefined = undefined;
  synAckSmc: boolean | undefined = undefined;
  proposed: { ueids: string[] } | undefined = undefined;
  accept: ClcAcceptConfirm | undefined = undefined;
  decline: TcpConn['decline'] = undefined;
  mode: TcpMode = 'pending';
  why: string | undefined = undefined;
  fallbackCode: number | undefined = undefined;
  /** Shared [0, 0] until the first TCP payload byte (then its own pair). */
  tcpBytes: [number, number] = ZERO_PAIR;
  smc: SmcConn | undefined = undefined;
  closed = false;
  rst: TcpConn['rst'] = undefined;
  tcpStream: [TcpStream, TcpStream] | undefined = undefined;
  /** Steps flat: name, frame, tsNs, name, frame, tsNs, … */
  private st: (string | number | bigint)[] = none();

  constructor(readonly index: number, readonly clientIp: string, readonly clientPort: number, readonly serverIp: string, readonly serverPort: number) {}

  get client(): Endpoint { return { ip: this.clientIp, port: this.clientPort }; }
  get server(): Endpoint { return { ip: this.serverIp, port: this.serverPort }; }

  /** Handshake steps in order with their times (SYN, Proposal, Accept, Confirm, CONFIRM LINK). */
  get steps(): Step[] {
    const s = this.st, out = new Array<Step>(s.length / 3);
    for (let i = 0; i < s.length; i += 3) out[i / 3] = { name: s[i] as string, frame: s[i + 1] as number, tsNs: s[i + 2] as bigint };
    return out;
  }

  addStep(name: string, frame: number, tsNs: bigint): void {
    const s = this.st;
    if (s.length >= EXACT_STEPS * 3) { s.push(name, frame, tsNs); return; }
    const out = new Array<string | number | bigint>(s.length + 3);
    for (let i = 0; i < s.length; i++) out[i] = s[i]!;
    out[s.length] = name; out[s.length + 1] = frame; out[s.length + 2] = tsNs;
    this.st = out;
  }

  hasStep(name: string): boolean {
    for (let i = 0; i < this.st.length; i += 3) if (this.st[i] === name) return true;
    return false;
  }
}
