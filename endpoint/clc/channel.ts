// CLC messages over the connection's TCP socket: read exactly one message (never a byte more —
// after a decline the same stream carries the application's data), with a deadline; write one.
// Every message goes through the analyzer's codec (dissectors/wire/clc.ts), both ways.

import type { Socket } from 'node:net';
import {
  decodeClc, encodeClc, isClcEyecatcherAt, clcLengthField, CLC_DECLINE, CLC_DECLINE_V1_LEN, CLC_DECLINE_V2_LEN,
  CLC_EYECATCHER_LEN, CLC_HEADER_LEN, CLC_MIN_LEN,
  type ClcInput, type ClcMessage, type ClcDecline,
} from '../../dissectors/wire/clc.js';
import { DECLINE_REASONS, formatReason } from '../../dissectors/wire/reasons.js';
import { endpointStr, type Trace, type TraceEvent } from '../trace.js';

/** Largest CLC message we accept (a v2 Proposal with 8 UEIDs and SMC-Dv2 GIDs is < 1 KiB). */
const CLC_MAX_LEN = 1024;

/** Why a CLC exchange failed; `code` is the decline reason to send (or that the peer sent). */
export class ClcError extends Error {
  constructor(
    readonly code: number, message: string, readonly peerDeclined = false, readonly outOfSync = false,
    /** The peer closed the TCP connection without sending a byte of the message. */
    readonly eofClean = false,
    /** The TCP connection ended under the handshake: the errno Linux gives then (awaiting a
     *  message, smc_clc_wait_msg: FIN before it or RST, ECONNRESET; FIN inside it, EPROTO;
     *  sending one: the send error). A negative reason in Linux: no Decline, no fallback, the
     *  connection fails. */
    readonly errno?: string,
  ) {
    super(message);
    this.name = 'ClcError';
  }
}

/** The Linux SMC_CLC_DECL_* codes the endpoint sends, by name. The codes themselves have one
 *  home, dissectors/wire/reasons.ts (the first entry of a name: the current kernels' code). */
export const DECL = declCodes(['MEM', 'TIMEOUT_CL', 'TIMEOUT_AL', 'CNFERR', 'PEERNOSMC', 'NOSMCDEV', 'NOSMCDDEV',
  'NOSMCRDEV', 'NOV2EXT', 'NOUEID', 'RELEASEERR', 'MAXCONNERR', 'MAXLINKERR', 'MODEUNSUPP', 'RMBE_EC', 'DIFFPREFIX',
  'NOACTLINK', 'NOSRVLINK', 'VERSMISMAT', 'SYNCERR', 'PEERDECL', 'INTERR', 'ERR_RTOK', 'ERR_RDYLNK', 'ERR_REGBUF'] as const);

function declCodes<N extends string>(names: readonly N[]): Readonly<Record<N, number>> {
  const out = {} as Record<N, number>;
  for (const n of names) {
    const r = DECLINE_REASONS.find((x) => x.name === n);
    if (!r) throw new Error(`no decline reason named ${n} in dissectors/wire/reasons.ts`);
    out[n] = r.code;
  }
  return Object.freeze(out);
}

/** CLC reader/writer bound to one TCP socket for the duration of the handshake. */
export class ClcChannel {
  private buf: Buffer = Buffer.alloc(0);
  private waiter: (() => void) | undefined;
  private ended: string | undefined;
  /** The TCP connection ended by a reset or error (else by the peer's FIN). */
  private reset = false;
  private watcher: (() => void) | undefined;
  private readonly onData = (d: Buffer): void => {
    this.buf = this.buf.length === 0 ? d : Buffer.concat([this.buf, d]);
    this.wake();
  };
  private readonly onEnd = (): void => { this.ended = 'peer closed the TCP connection'; this.wake(); };
  private readonly onError = (e: Error): void => { this.ended = `TCP error: ${e.message}`; this.reset = true; this.wake(); };
  private wake(): void {
    this.waiter?.();
    const w = this.watcher;
    this.watcher = undefined;
    w?.();
  }

  constructor(readonly socket: Socket, private readonly trace?: Trace) {
    socket.on('data', this.onData);
    socket.on('end', this.onEnd);
    socket.on('error', this.onError);
    // Flowing only now that the listener is attached (a server socket arrives paused).
    socket.resume();
  }

  /**
   * The next CLC message, decoded. Rejects with ClcError: DECL.TIMEOUT_* on the deadline,
   * DECL.SYNCERR/PEERDECL-style codes on garbage or a closed connection. A Decline from the
   * peer is returned (the caller decides).
   */
  async read(timeoutMs: number, what: string): Promise<ClcMessage> {
    const deadline = Date.now() + timeoutMs;
    let lastLook = false;
    for (;;) {
      const r = frameClc(this.buf);
      if (r.kind === 'bad') { this.traceProblem('not-clc', r.why); throw new ClcError(DECL.SYNCERR, `expected a CLC ${what}, ${r.why}`); }
      if (r.kind === 'message') {
        const bytes = new Uint8Array(this.buf.subarray(0, r.length));
        this.buf = this.buf.subarray(r.length);
        const d = decodeClc(bytes);
        const bad = d.issues.find((i) => i.severity === 'error');
        if (bad) { this.traceProblem('malformed', bad.message); throw new ClcError(DECL.SYNCERR, `malformed CLC ${what}: ${bad.message}`); }
        if (this.trace) this.trace({ layer: 'clc', dir: 'in', msg: d.value, ...this.ends() });
        return d.value;
      }
      if (this.ended) {
        // EOF inside a message: a partial header or body is a truncated CLC message (SYNCERR).
        this.traceProblem(this.buf.length > 0 ? 'truncated' : 'closed', this.ended);
        if (this.buf.length > 0) {
          const of = this.buf.length >= CLC_HEADER_LEN ? `${clcLengthField(this.buf)}-byte` : `${CLC_HEADER_LEN}-byte header of a`;
          throw new ClcError(DECL.SYNCERR, `truncated CLC ${what}: ${this.buf.length} bytes of the ${of} message, then ${this.ended}`, false, false, false, this.reset ? 'ECONNRESET' : 'EPROTO');
        }
        throw new ClcError(DECL.SYNCERR, `${this.ended} while waiting for CLC ${what}`, false, false, true, 'ECONNRESET');
      }
      const left = deadline - Date.now();
      if (left <= 0 && !lastLook) {
        // Timers run before the event loop polls sockets: under load a message that is already
        // in the socket buffer would lose to its own deadline. One poll round decides.
        lastLook = true;
        await new Promise<void>((resolve) => setImmediate(resolve));
        continue;
      }
      if (left <= 0) this.traceProblem('timeout', `${timeoutMs} ms`);
      if (left <= 0) throw new ClcError(what === 'Confirm' ? DECL.TIMEOUT_CL : DECL.TIMEOUT_AL, `timeout (${timeoutMs} ms) waiting for CLC ${what}`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(() => { this.waiter = undefined; resolve(); }, left);
        this.waiter = () => { clearTimeout(t); this.waiter = undefined; resolve(); };
      });
    }
  }

  private ends(): { local: string; remote: string } {
    return { local: endpointStr(this.socket.localAddress, this.socket.localPort), remote: endpointStr(this.socket.remoteAddress, this.socket.remotePort) };
  }

  private traceProblem(problem: Extract<TraceEvent, { problem: string }>['problem'], detail: string): void {
    if (this.trace) this.trace({ layer: 'clc', dir: 'in', problem, detail, head: new Uint8Array(this.buf.subarray(0, 64)), ...this.ends() });
  }

  /**
   * Calls `f` once, as soon as the peer sends a byte or closes (at once if unread bytes or the
   * close are already here); returns the cancel function. While we prepare our next message the
   * peer is waiting, so anything it sends (its Decline) means it stopped waiting. One watcher.
   */
  onPeerActivity(f: () => void): () => void {
    if (this.buf.length > 0 || this.ended) { queueMicrotask(f); return () => undefined; }
    this.watcher = f;
    return () => { if (this.watcher === f) this.watcher = undefined; };
  }

  /** Bytes received so far and not consumed by a CLC read. */
  get buffered(): number { return this.buf.length; }

  /** Write one message (encoded by the shared codec). */
  send(m: ClcInput): Promise<void> {
    const bytes = encodeClc(m);
    return this.sendEncoded(bytes, m);
  }

  /** Write one message already encoded by the shared codec (`m`: its value, for the trace). */
  sendEncoded(bytes: Uint8Array, m?: ClcInput): Promise<void> {
    if (this.trace) this.trace({ layer: 'clc', dir: 'out', msg: m ? { ...m, length: bytes.length } as ClcMessage : decodeClc(bytes).value, ...this.ends() });
    return new Promise((resolve, reject) => {
      if (this.socket.destroyed || !this.socket.writable) { reject(new ClcError(DECL.INTERR, 'TCP connection closed before a CLC message could be sent', false, false, false, 'ECONNRESET')); return; }
      this.socket.write(bytes, (e) => (e ? reject(new ClcError(DECL.INTERR, `sending CLC: ${e.message}`, false, false, false, (e as NodeJS.ErrnoException).code ?? 'ECONNRESET')) : resolve()));
    });
  }

  /** Send a Decline (v1 or v2 layout) with the reason; never throws (the connection may be gone). */
  async decline(code: number, version: number, peerId: string, outOfSync = false): Promise<void> {
    const v2 = version >= 2;
    const m: ClcDecline = {
      type: 'decline', eyecatcher: 'SMCR', trailer: 'SMCR', typeCode: CLC_DECLINE, version: v2 ? 2 : 1,
      length: v2 ? CLC_DECLINE_V2_LEN : CLC_DECLINE_V1_LEN, outOfSync, typev1: 0, peerId, diagnosis: code >>> 0, osType: v2 ? 2 : 0,
      ...(v2 ? { diagExtra: [0, 0, 0, 0] } : {}),
    };
    try { await this.send(m); } catch { /* the peer is gone: nothing to tell it */ }
  }

  /**
   * Stop reading CLC: the socket is paused and the bytes read past the last message (application
   * data right after a decline) are handed back with whether the peer already sent its FIN, so
   * whoever reads next loses nothing. (Not socket.unshift(): after 'end' Node throws
   * "stream.unshift() after end event", which a peer could trigger with 3 bytes and a FIN.)
   */
  detach(): { leftover: Buffer; ended: boolean } {
    this.socket.pause();
    this.socket.off('data', this.onData);
    this.socket.off('end', this.onEnd);
    this.socket.off('error', this.onError);
    // Errors after the handshake belong to whoever takes the socket; until then none may go unheard.
    if (this.socket.listenerCount('error') === 0) this.socket.on('error', () => undefined);
    const leftover = this.buf;
    this.buf = Buffer.alloc(0);
    return { leftover, ended: this.ended !== undefined };
  }
}

export type ClcFrame = { kind: 'message'; length: number } | { kind: 'partial' } | { kind: 'bad'; why: string };

/**
 * Where the first CLC message in `b` ends, without decoding it: a complete message (its length),
 * partial (wait for more), or bad (not CLC: no eyecatcher, length out of range). Total: any bytes.
 */
export function frameClc(b: Buffer): ClcFrame {
  // Judged from 4 bytes on: fewer that end in EOF are a truncated message, not "not CLC".
  if (b.length < CLC_EYECATCHER_LEN) return { kind: 'partial' };
  if (!isClcEyecatcherAt(b, 0)) {
    return { kind: 'bad', why: `got ${b.length} bytes that are not CLC (no SMC eyecatcher)` };
  }
  if (b.length < CLC_HEADER_LEN) return { kind: 'partial' };
  const len = clcLengthField(b);
  if (len < CLC_MIN_LEN || len > CLC_MAX_LEN) return { kind: 'bad', why: `CLC message length ${len} out of range (12…${CLC_MAX_LEN})` };
  return b.length >= len ? { kind: 'message', length: len } : { kind: 'partial' };
}

/** Is `b` (a complete frame per frameClc) a CLC message with its trailer, i.e. surely not app data? */
export function hasClcTrailer(b: Buffer, len: number): boolean {
  return b.length >= len && len >= CLC_MIN_LEN && isClcEyecatcherAt(b, len - CLC_EYECATCHER_LEN);
}

/** One line for a Decline received: "peer declined: 0x03030008 NOUEID (no common UEID)". */
export function describeDecline(d: ClcDecline): string {
  return `peer declined${d.outOfSync ? ' (out of sync)' : ''}: ${formatReason(d.diagnosis)}`;
}
