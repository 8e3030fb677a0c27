// One SMC-R connection's data path (RFC 7609 4.5, 4.7, 4.8; Linux net/smc smc_tx.c, smc_rx.c,
// smc_cdc.c, smc_close.c): app bytes are copied into our send buffer, RDMA-written into the
// peer's RMBE ring at our producer cursor and announced with a CDC message; the peer's CDCs move
// its producer cursor through our RMBE (new data) and its consumer cursor through its RMBE (free
// window). The link group below (CdcTransport) carries the writes and messages; the socket above
// reads and writes through this class.
//
// Cursors are kept as 53-bit byte totals and converted to the wire's (wrap u16, count u32) form
// only when a CDC is built or checked, so wraps of the ring never need special cases here.
//
// Termination: the states are Linux's (enum smc_state in smc.h), with the same transitions
// (smc_close_active / smc_close_shutdown_write / smc_close_passive_work /
// smc_close_passive_abort_received). "done" = peer_done_writing, "closed" = peer_conn_closed,
// "abort" = peer_conn_abort, "any close" = closed or abort; flags we send are sticky.
//
//   local shutdownWrite()                      local close()
//   ACTIVE ──send done──▶ PEERCLOSEWAIT1       ACTIVE ──send closed¹──▶ PEERCLOSEWAIT1
//   APPCLOSEWAIT1 ──send done──▶ APPCLOSEWAIT2 APPCLOSEWAIT1/2 ──send closed¹──▶ CLOSED if peer sent
//                                                  any close, else PEERFINCLOSEWAIT
//                                              APPFINCLOSEWAIT ──send closed¹ if we only sent done──▶ CLOSED
//                                              PEERCLOSEWAIT1/2 ──send closed¹ if we only sent done──▶ (same)
//                                              PROCESSABORT ──send abort──▶ CLOSED
//                                              PEERABORTWAIT ──▶ CLOSED
//   peer done/closed received                  peer abort received
//   ACTIVE ──▶ APPCLOSEWAIT1                   ACTIVE, APPCLOSEWAIT1, APPFINCLOSEWAIT ──▶ PROCESSABORT
//   PEERCLOSEWAIT1 ──done──▶ PEERCLOSEWAIT2    PEERCLOSEWAIT1/2 ──▶ PROCESSABORT if we only sent
//   PEERCLOSEWAIT1/2 ──any close──▶ CLOSED if      done, else CLOSED
//       the app closed and we sent any close,  APPCLOSEWAIT2, PEERFINCLOSEWAIT, PEERABORTWAIT ──▶ CLOSED
//       else APPFINCLOSEWAIT
//   PEERFINCLOSEWAIT ──any close──▶ CLOSED
//   local abort (abort(), hostile CDC, link down): any state ──(send abort if the link works)──▶ CLOSED
//
//   ¹ "closed" becomes "abort" when received data is still unread (smc_close_final).
//
// A peer that breaks the protocol (cursor outside the ring or moving backwards, data after it
// said it was done, a token that is not ours …) gets an abort CDC and an 'abort' event with one
// reason line; receiveCdc() never throws and never touches memory outside the two buffers.
//
// Link failover (RFC 7609 4.6; Linux smc_switch_conns → smc_switch_cursor,
// smcr_cdc_msg_send_validation, smc_cdc_msg_validate): the link group calls switchLink() when the
// connection's link died and another link of the group took over (the transport already routes
// to it). Data written on the old link after the last acknowledged CDC may not have landed, so
//   1. the send cursor rewinds to `fin` (the producer cursor of the last acknowledged CDC), or to
//      the peer's consumer cursor if that is further (the peer read it: it landed);
//   2. a CDC with failover_validation and seq = the last acknowledged sequence number goes out
//      on the new link (cursors zero, as Linux sends it);
//   3. the bytes from there on are RDMA-written again — identical bytes to identical ring
//      positions — and announced with new CDCs (the sequence continues, so the peer drops any
//      late CDC of the old link as stale); if nothing is left to write but CDCs were not
//      acknowledged, one CDC re-announces cursors and close flags.
// Completions of the old link (acknowledged or failed) belong to an older link epoch and are
// ignored: they neither abort the connection nor move cursors. The receiver of a validation CDC
// checks that it has seen that sequence number (a newer one: CDCs were lost, the connection is
// out of sync → abort) and otherwise changes nothing; until the peer's replay caught up, a
// producer cursor behind ours is the replay of bytes we already have (ignored, like Linux's
// smc_cdc_cursor_to_host), not a violation.

import { EventEmitter } from 'node:events';
// module bindings, not globals: Node's globals are looked up per use (an inline-cache call in
// optimized code) on the data path
import { Buffer } from 'node:buffer';
import {
  CDC_MSG_SIZE, CDC_TYPE, CDC_PROD_WRITE_BLOCKED, CDC_PROD_URG_PENDING, CDC_PROD_URG_PRESENT,
  CDC_CONN_PEER_DONE_WRITING, CDC_CONN_PEER_CONN_CLOSED, CDC_CONN_PEER_CONN_ABORT,
  decodeCdc, encodeCdc, makeCdc, summarizeCdc, type CdcCursor,
} from '../../dissectors/wire/cdc.js';
import { readCdc, writeCdc, type CdcFields } from '../../dissectors/wire/views/cdc.js';
import {
  consumerUpdateLimit, cursorAt, cursorDistance, cursorOutOfRing, seqCheck, urgentByteAt, validationOutOfSync,
} from '../../dissectors/wire/cdcrules.js';
import { hex32 } from '../../dissectors/wire/common.js';
import type { CdcBuffers, CdcTransport } from './transport.js';
import { soon } from '../microtask.js';


export type CdcState =
  | 'ACTIVE'
  | 'PEERCLOSEWAIT1' | 'PEERCLOSEWAIT2' | 'PEERFINCLOSEWAIT'
  | 'APPCLOSEWAIT1' | 'APPCLOSEWAIT2' | 'APPFINCLOSEWAIT'
  | 'PEERABORTWAIT' | 'PROCESSABORT'
  | 'CLOSED';

export interface CdcConnectionOptions {
  /** Our RMBE alert token (the peer's CDCs carry it). */
  localToken: number;
  /** The peer's RMBE alert token (every CDC we send carries it). */
  peerToken: number;
  buffers: CdcBuffers;
  transport: CdcTransport;
  /** One line per notable event (violations, aborts, stale messages). */
  log?: (line: string) => void;
  /** How long close()/shutdownWrite() wait for unsent data to fit into the peer's window before aborting (ms, default 30 000). */
  lingerMs?: number;
  /** Autocork limit (Linux sysctl autocorking_size, default 64 KiB; capped at sndbuf/2). */
  autocorkSize?: number;
}

export interface CdcCounters {
  bytesSent: number;
  bytesReceived: number;
  cdcSent: number;
  cdcReceived: number;
  rdmaWrites: number;
  /** Times a send had to stop because the peer's RMBE was full (write_blocked). */
  windowStalls: number;
  /** CDCs sent only to announce our consumer cursor. */
  cursorUpdates: number;
  /** CDCs ignored because their sequence number was not newer than the last one. */
  staleCdcs: number;
  /** CDCs ignored because the connection was already closed. */
  lateCdcs: number;
  urgentSent: number;
  urgentReceived: number;
  /** switchLink() calls that moved this connection to another link. */
  failovers: number;
  /** Bytes RDMA-written again after a failover (already written on the old link, not known to have landed). */
  replayedBytes: number;
  /** Failover-validation CDCs sent (one per failover). */
  validationsSent: number;
  /** Failover-validation CDCs received from the peer (and found in sync). */
  validationsReceived: number;
  /** CDCs of the peer's replay whose producer cursor was behind ours (bytes we already had). */
  replayCdcsReceived: number;
}

export interface CdcConnectionState {
  state: CdcState;
  localToken: string;
  peerToken: string;
  tx: {
    seq: number;
    prod: CdcCursor;
    cons: CdcCursor;
    flags: string;
    sndbufSize: number;
    /** Bytes copied in by the app but not yet RDMA-written. */
    unsent: number;
    /** Bytes written but whose CDC is not acknowledged yet. */
    inFlight: number;
    peerRmbeSize: number;
    /** Free bytes in the peer's RMBE as we know it. */
    peerSpace: number;
    writeBlocked: boolean;
    /** Sequence number of the last CDC the peer's RNIC acknowledged (sent in a failover validation). */
    finSeq: number;
    /** Bytes still to be written again after a failover (rewound but not re-written yet). */
    replayPending: number;
    /** Link epoch: failovers so far; completions of older epochs are ignored. */
    linkEpoch: number;
  };
  rx: {
    seq: number;
    prod: CdcCursor;
    cons: CdcCursor;
    /** Consumer cursor last announced to the peer. */
    confirmed: CdcCursor;
    flags: string;
    rmbeSize: number;
    /** Bytes in our RMBE not read by the app yet. */
    unread: number;
    /** The peer sent a failover validation and its replay has not caught up with our producer cursor. */
    peerReplaying: boolean;
  };
  counters: CdcCounters;
  abortReason?: string;
}

/**
 * Data CDCs of one connection in flight at most; further writes wait for an acknowledgement.
 * Keeps one busy connection from filling the link's send queue with RDMA WRITEs whose CDCs wait
 * for send slots (Linux bounds this by taking the CDC slot before posting the writes).
 */
const MAX_DATA_CDC_IN_FLIGHT = 4;

/** Smallest amount of data one CDC announces when more is waiting (a quarter ring otherwise). */
const MIN_DATA_CHUNK = 16 * 1024;

/** Data CDCs in flight that do not yet cork small writes (Linux: 0; see scheduleFlush). */
const CORK_IN_FLIGHT = 1;

/**
 * One SMC-R connection. Events:
 *   'readable'        new bytes can be read()
 *   'writable'        send-buffer space came free (write() accepts more)
 *   'end'             the peer is done writing (or closed) and every byte was read
 *   'urgent' (byte)   an urgent byte arrived (it is not part of the in-band stream)
 *   'state' (s)       state change
 *   'abort' (reason)  the connection was aborted (locally, by the peer, or link down)
 *   'closed' ({ aborted, reason }) the connection reached CLOSED: token and buffers may be freed
 */
/** A CDC posted through the transport's callback API, waiting for its acknowledgement: what
 *  onCdcAcked needs, and the callback handed to the transport (made once per record). */
interface CdcPost {
  /** Between the post and the transport's one call of `done`. */
  busy: boolean;
  sentAt: number;
  seq: number | undefined;
  epoch: number;
  done: (e: Error | undefined) => void;
}

export class CdcConnection extends EventEmitter {
  /**
   * The socket's handlers of 'readable' and 'writable', called directly (round 12: one emit
   * function serves every emitter of the process, so its lookups are megamorphic, and these
   * fire once per message). The events are still emitted once anyone listens for them.
   */
  onReadable: (() => void) | undefined = undefined;
  onWritable: (() => void) | undefined = undefined;
  /** Someone listens for 'readable' / 'writable' (set by 'newListener', never cleared). */
  private readableListened = false;
  private writableListened = false;
  readonly localToken: number;
  readonly peerToken: number;
  private readonly rmbe: Uint8Array;
  private readonly rmbeSize: number;
  private readonly sndbuf: Uint8Array;
  private readonly sndSize: number;
  private readonly peerSize: number;
  private readonly transport: CdcTransport;
  /** The CDC being handled (onCdc), read in one call and overwritten per message, and its two
   *  cursors as the cursor rules take them. */
  private readonly rx: CdcFields = {
    type: 0, length: 0, seq: 0, token: 0, prodReserved: 0, prodWrap: 0, prodCount: 0, consReserved: 0, consWrap: 0, consCount: 0,
    writeBlocked: false, urgentPending: false, urgentPresent: false, cursorUpdateRequested: false, failoverValidation: false,
    peerDoneWriting: false, peerConnClosed: false, peerConnAbort: false,
  };
  private readonly rxProdIn: CdcCursor = { wrap: 0, count: 0 };
  private readonly rxConsIn: CdcCursor = { wrap: 0, count: 0 };
  /** This connection's outgoing CDC, rewritten per message (see sendCdc). */
  private readonly cdcOut = new Uint8Array(CDC_MSG_SIZE);
  private readonly logFn: ((line: string) => void) | undefined;
  private readonly lingerMs: number;
  private readonly corkSize: number;
  private readonly updateLimit: number;

  private st: CdcState = 'ACTIVE';
  // ---- send side (totals in bytes of the stream to the peer) ----
  /** Bytes copied into sndbuf by the app. */
  private prep = 0;
  /** Bytes RDMA-written to the peer (= our producer cursor in its RMBE). */
  private sent = 0;
  /** Bytes whose CDC the peer's RNIC acknowledged (sndbuf space freed up to here). */
  private fin = 0;
  /** Bytes the peer has consumed (its consumer cursor in its RMBE). */
  private peerCons = 0;
  private peerConsCurs: CdcCursor = { wrap: 0, count: 0 };
  private txSeq = 0;
  /** Sequence number of the last acknowledged CDC (Linux tx_cdc_seq_fin). */
  private finSeq = 0;
  /** Highest byte total ever RDMA-written (sent may rewind below it on failover). */
  private sentHigh = 0;
  /** Bumped by switchLink(): completions of sends posted in an older epoch are ignored. */
  private linkEpoch = 0;
  /** Stream position just after the last urgent byte written by the app. */
  private urgEnd = 0;
  private txWriteBlocked = false;
  private txUrgPending = false;
  private txUrgPresent = false;
  /** Urgent data was written; no more writes until the peer consumed everything (Linux urg_tx_pend). */
  private urgTxPend = false;
  private txDone = false;
  private txClosed = false;
  private txAbort = false;
  private cdcInFlight = 0;
  private flushQueued = false;
  // ---- receive side (totals in bytes of the stream from the peer) ----
  /** Bytes the peer wrote into our RMBE (its producer cursor). */
  private rxProd = 0;
  private rxProdCurs: CdcCursor = { wrap: 0, count: 0 };
  /** Bytes the app consumed (incl. a skipped urgent byte). */
  private cons = 0;
  /** Consumer cursor carried by the last CDC we sent. */
  private confirmed = 0;
  private rxSeq = 0;
  private rxSeen = false;
  private peerWriteBlocked = false;
  private peerCursReq = false;
  private rxUrgPending = false;
  /** The peer validated a failover; producer cursors behind ours are its replay until it catches up. */
  private peerReplay = false;
  private rxDone = false;
  private rxClosed = false;
  private rxAbort = false;
  /** Stream position of a received urgent byte not yet passed by the reader, or -1. */
  private urgPos = -1;
  // ---- close ----
  /** close()/shutdownWrite() asked, executed once the unsent data is written. */
  private pendingClose: 'shutdown' | 'close' | undefined;
  private appClosed = false;
  private lingerTimer: NodeJS.Timeout | undefined;
  private endEmitted = false;
  private abortReason: string | undefined;
  private closedEmitted = false;
  private readonly waiters: Array<() => void> = [];

  readonly counters: CdcCounters = {
    bytesSent: 0, bytesReceived: 0, cdcSent: 0, cdcReceived: 0, rdmaWrites: 0, windowStalls: 0,
    cursorUpdates: 0, staleCdcs: 0, lateCdcs: 0, urgentSent: 0, urgentReceived: 0,
    failovers: 0, replayedBytes: 0, validationsSent: 0, validationsReceived: 0, replayCdcsReceived: 0,
  };

  constructor(o: CdcConnectionOptions) {
    super();
    this.on('newListener', (ev: string | symbol) => {
      if (ev === 'readable') this.readableListened = true;
      else if (ev === 'writable') this.writableListened = true;
    });
    this.localToken = o.localToken >>> 0;
    this.peerToken = o.peerToken >>> 0;
    this.rmbe = o.buffers.rmbe;
    this.rmbeSize = o.buffers.rmbe.length;
    this.sndbuf = o.buffers.sndbuf.buffer;
    this.sndSize = o.buffers.sndbuf.length;
    this.peerSize = o.buffers.peerRmbeSize;
    if (!(this.rmbeSize > 0 && this.sndSize > 0 && this.peerSize > 0)) throw new RangeError('CDC connection needs non-empty RMBE, send buffer and peer RMBE');
    this.transport = o.transport;
    this.logFn = o.log;
    this.lingerMs = o.lingerMs ?? 30_000;
    this.corkSize = Math.min(this.sndSize >> 1, o.autocorkSize ?? 65536);
    this.updateLimit = consumerUpdateLimit(this.rmbeSize);
  }

  // =====================================================================================
  // Public API
  // =====================================================================================

  /** The state name (Linux smc_state). */
  get stateName(): CdcState { return this.st; }
  get aborted(): boolean { return this.abortReason !== undefined; }
  /** The app may still write (not shut down, not closed, no close received, not aborted). */
  get writable(): boolean {
    return !this.txDone && !this.txClosed && !this.txAbort && this.pendingClose === undefined
      && !this.rxClosed && !this.rxAbort && this.st !== 'CLOSED';
  }
  /** Bytes write() would accept now. */
  get writableSpace(): number {
    if (!this.writable || this.urgTxPend) return 0;
    return this.sndSize - (this.prep - this.fin);
  }
  /** Bytes read() can return now (an urgent byte is not counted). */
  get readableLength(): number {
    const avail = this.rxProd - this.cons;
    return avail - (this.urgPos >= this.cons && this.urgPos < this.rxProd ? 1 : 0);
  }
  /** The peer said it is done writing (or closed/aborted): no more data will come. */
  get peerDone(): boolean { return this.rxDone || this.rxClosed || this.rxAbort; }

  /**
   * Copy app bytes into the send buffer; returns how many were taken (0 when it is full — wait
   * for 'writable'). With `urgent`, the last byte of `data` is the urgent byte (TCP MSG_OOB
   * semantics); only whole urgent messages are accepted (returns 0 if it does not fit).
   * Throws (code EPIPE) when the connection can no longer send.
   */
  write(data: Uint8Array, urgent = false): number {
    if (!this.writable) {
      const e = new Error(this.abortReason ? `connection aborted: ${this.abortReason}` : 'write after end of the connection') as Error & { code: string };
      e.code = this.rxAbort || this.abortReason ? 'ECONNRESET' : 'EPIPE';
      throw e;
    }
    if (this.urgTxPend) return 0;
    const space = this.sndSize - (this.prep - this.fin);
    if (urgent) {
      if (data.length === 0) return 0;
      if (data.length > space || data.length > this.peerSize) {
        if (data.length > this.sndSize || data.length > this.peerSize) throw new RangeError(`urgent message of ${data.length} bytes exceeds the send buffer or the peer's RMBE`);
        return 0;
      }
    }
    const n = Math.min(space, data.length);
    if (n <= 0) return 0;
    const off = this.prep % this.sndSize;
    const first = Math.min(n, this.sndSize - off);
    this.sndbuf.set(first === data.length ? data : data.subarray(0, first), off);
    if (n > first) this.sndbuf.set(data.subarray(first, n), 0);
    this.prep += n;
    if (urgent) {
      this.txUrgPending = true;
      this.urgTxPend = true;
      this.urgEnd = this.prep;
      this.counters.urgentSent++;
      this.flush();
    } else {
      this.scheduleFlush();
    }
    return n;
  }

  /**
   * Take up to `max` received bytes out of the RMBE (a copy) and advance the consumer cursor;
   * null when nothing is readable. Stops before an urgent byte and skips it.
   */
  read(max = Infinity): Uint8Array | null {
    const n = this.readable(max);
    if (n <= 0) { this.checkEnd(); return null; }
    // A Buffer, filled at once: the socket pushes it into a Readable, which would otherwise wrap
    // a plain Uint8Array in a Buffer per chunk; small reads come from Node's buffer pool.
    const out = Buffer.allocUnsafe(n);
    this.take(out, 0, n);
    return out;
  }

  /**
   * read() into the caller's memory: copies up to `max` received bytes (default: what fits)
   * into `dst` at `off` and advances the consumer cursor; returns the count (0 when nothing is
   * readable). No allocation: a reader that reuses one buffer (node:net's `onread`) costs one
   * copy out of the RMBE per byte and no garbage.
   */
  readInto(dst: Uint8Array, off = 0, max = dst.length - off): number {
    const n = this.readable(Math.min(max, dst.length - off));
    if (n <= 0) { this.checkEnd(); return 0; }
    this.take(dst, off, n);
    return n;
  }

  /** Bytes a read of at most `max` returns now (stops before an urgent byte, skips one at the mark). */
  private readable(max: number): number {
    if (this.st === 'CLOSED' && this.abortReason !== undefined) return 0;
    this.skipUrgentAtMark();
    let avail = this.rxProd - this.cons;
    if (this.urgPos >= this.cons) avail = this.urgPos - this.cons;
    return Math.min(avail, Math.max(0, Math.floor(max)));
  }

  /** Copy n readable bytes out of the ring into dst[off…] and consume them. */
  private take(dst: Uint8Array, off: number, n: number): void {
    const at = this.cons % this.rmbeSize;
    const first = Math.min(n, this.rmbeSize - at);
    dst.set(this.rmbe.subarray(at, at + first), off);
    if (n > first) dst.set(this.rmbe.subarray(0, n - first), off + first);
    this.cons += n;
    const skipped = this.skipUrgentAtMark();
    this.consumerUpdate(skipped);
    this.checkEnd();
  }

  /** shutdown(SHUT_WR): send peer_done_writing once every written byte is in the peer's RMBE. */
  shutdownWrite(): Promise<void> {
    if (this.st === 'ACTIVE' || this.st === 'APPCLOSEWAIT1') {
      if (this.pendingClose === undefined) this.pendingClose = 'shutdown';
      this.armLinger();
      this.tryPendingClose();
    }
    return this.waitFor(() => this.pendingClose === undefined || this.st === 'CLOSED');
  }

  /**
   * close(): the app is done with the connection. Unsent data is written first (up to lingerMs),
   * then peer_conn_closed is sent (peer_conn_abort if received data was left unread). Resolves
   * when the connection reached CLOSED (both sides closed) or was aborted.
   */
  close(): Promise<void> {
    if (this.st !== 'CLOSED') {
      this.pendingClose = 'close';
      this.armLinger();
      this.tryPendingClose();
    }
    return this.waitFor(() => this.st === 'CLOSED');
  }

  /** Abort: send peer_conn_abort (if the link works) and go to CLOSED at once. */
  abort(reason = 'aborted by the application'): void {
    this.localAbort(reason, true);
  }

  /**
   * One CDC message for this connection (the link group dispatches by token). Never throws;
   * a protocol violation aborts this connection.
   */
  receiveCdc(bytes: Uint8Array): void {
    try {
      this.onCdc(bytes);
    } catch (e) {
      // A bug here must not take the process down; the connection cannot be trusted after it.
      this.localAbort(`internal error handling a CDC: ${(e as Error).message}`, true);
    }
  }

  /** The link group lost every link of this connection (no failover possible). */
  linkDown(reason: string): void {
    this.localAbort(`link down: ${reason}`, false);
  }

  /**
   * Failover (RFC 7609 4.6, Linux smc_switch_cursor): the connection's link died and another
   * link of the group took over; the transport already routes write()/sendCdc() to it. Call
   * synchronously from the link-down handling, before the old link's pending sends reject (they
   * are ignored from now on). The old link must not deliver anything any more (its QP in ERR or
   * destroyed — for an orderly DELETE LINK move it to ERR first): a late RDMA WRITE of the old
   * link could otherwise land on ring bytes the replay has already handed over to newer data.
   * Rewinds the send cursor to the last acknowledged CDC, sends the failover-validation CDC and
   * re-writes the unacknowledged bytes. No-op once CLOSED.
   */
  switchLink(): void {
    if (this.st === 'CLOSED') return;
    this.linkEpoch++;
    this.counters.failovers++;
    this.cdcInFlight = 0; // the old link's CDCs: their completions are ignored (older epoch)
    const unacked = this.txSeq !== this.finSeq;
    const before = this.sent;
    // the peer may have read bytes whose CDC we never saw acknowledged: they landed
    const freed = this.peerCons > this.fin;
    if (freed) this.fin = this.peerCons;
    this.sent = this.fin;
    const rewound = before - this.sent;
    // an urgent byte not known to have landed is announced again with its data
    if (this.urgTxPend && this.urgEnd > this.sent) this.txUrgPending = true;
    this.log(`failover ${this.linkEpoch}: send cursor rewound by ${rewound} bytes to ${this.sent}, validation seq ${this.finSeq} (last sent ${this.txSeq})`);
    this.sendValidation();
    const cdcs = this.counters.cdcSent;
    this.flush(); // the replay, then new data
    if (this.counters.cdcSent === cdcs && unacked && this.stateName !== 'CLOSED' && !this.txAbort && !this.rxAbort) {
      // nothing to write, but a CDC may have been lost: re-announce cursors and close flags
      this.sendCdc('update');
    }
    if (freed) this.signalWritable();
    this.wake();
  }

  /** Snapshot for endpoint-state views: tokens, cursors, sequence numbers, flags, state name, counters. */
  state(): CdcConnectionState {
    const f = (a: Array<[boolean, string]>): string => a.filter(([b]) => b).map(([, s]) => s).join(',');
    const s: CdcConnectionState = {
      state: this.st,
      localToken: hex32(this.localToken),
      peerToken: hex32(this.peerToken),
      tx: {
        seq: this.txSeq,
        prod: cursorAt(this.sent, this.peerSize),
        cons: cursorAt(this.cons, this.rmbeSize),
        flags: f([[this.txWriteBlocked, 'wb'], [this.txUrgPending, 'urgpend'], [this.txUrgPresent, 'urg'], [this.txDone, 'done'], [this.txClosed, 'closed'], [this.txAbort, 'abort']]),
        sndbufSize: this.sndSize,
        unsent: this.prep - this.sent,
        inFlight: this.sent - this.fin,
        peerRmbeSize: this.peerSize,
        peerSpace: this.peerSpace(),
        writeBlocked: this.txWriteBlocked,
        finSeq: this.finSeq,
        replayPending: Math.max(0, this.sentHigh - this.sent),
        linkEpoch: this.linkEpoch,
      },
      rx: {
        seq: this.rxSeq,
        prod: cursorAt(this.rxProd, this.rmbeSize),
        cons: cursorAt(this.cons, this.rmbeSize),
        confirmed: cursorAt(this.confirmed, this.rmbeSize),
        flags: f([[this.peerWriteBlocked, 'wb'], [this.rxUrgPending, 'urgpend'], [this.peerCursReq, 'curreq'], [this.rxDone, 'done'], [this.rxClosed, 'closed'], [this.rxAbort, 'abort']]),
        rmbeSize: this.rmbeSize,
        unread: this.rxProd - this.cons,
        peerReplaying: this.peerReplay,
      },
      counters: { ...this.counters },
    };
    if (this.abortReason !== undefined) s.abortReason = this.abortReason;
    return s;
  }

  // =====================================================================================
  // Send path
  // =====================================================================================

  private signalReadable(): void {
    const f = this.onReadable;
    if (f !== undefined) f();
    if (f === undefined || this.readableListened) this.emit('readable');
  }

  private signalWritable(): void {
    const f = this.onWritable;
    if (f !== undefined) f();
    if (f === undefined || this.writableListened) this.emit('writable');
  }

  private peerSpace(): number { return this.peerSize - (this.sent - this.peerCons); }

  /** Coalesce the writes of one tick into one RDMA batch + CDC. */
  private scheduleFlush(): void {
    if (this.flushQueued) return;
    this.flushQueued = true;
    // a microtask, or the end of the receive batch this write was made in (its reaction then
    // leaves with the batch: endpoint/microtask.ts)
    soon(this.flushTick);
  }

  /** The coalesced flush of a tick's writes (one function, not a closure per write). */
  private readonly flushTick = (): void => {
    this.flushQueued = false;
    // Autocork (Linux smc_should_autocork): while CDCs are in flight and not much is
    // waiting, a completion triggers the next batch; saves CDCs without a timer. Unlike
    // Linux, one CDC in flight does not cork: a completion here is the peer's ACK, which
    // over uroce needs the peer process scheduled, and request/response traffic always has
    // its previous answer's CDC in flight — corking on it held every answer for that ACK
    // (Nagle against a delayed ACK). Small writes in a stream still coalesce from the
    // second CDC in flight on (and MAX_DATA_CDC_IN_FLIGHT bounds them anyway).
    if (this.cdcInFlight > CORK_IN_FLIGHT && this.prep - this.sent <= this.corkSize) return;
    this.flush();
  };

  /** smc_tx_sndbuf_nonempty: write what the peer's RMBE has room for, then one CDC. */
  private flush(): void {
    if (this.st === 'CLOSED' || this.txAbort || this.rxAbort) return;
    // Several CDCs of at most a quarter of the peer's ring each (up to MAX_DATA_CDC_IN_FLIGHT):
    // the peer consumes the first part while the next is on the wire, and its consumer-cursor
    // update (sent once it read a tenth of the ring and we are at half) arrives before we stall.
    // One CDC per full ring would make the transfer stop-and-wait: fill, wait, drain, repeat.
    const chunk = Math.max(MIN_DATA_CHUNK, this.peerSize >> 2);
    while (this.prep - this.sent > 0 && this.cdcInFlight < MAX_DATA_CDC_IN_FLIGHT) {
      const toSend = this.prep - this.sent;
      const space = this.peerSpace();
      // a full window: the CDC that filled it carried write_blocked; the peer's next consumer
      // cursor update (dCons in onCdc) resumes us
      if (space <= 0) break;
      this.txWriteBlocked = toSend >= space && space <= chunk;
      if (this.txWriteBlocked) this.counters.windowStalls++;
      const len = Math.min(toSend, space, chunk);
      let done = 0;
      try {
        while (done < len) {
          const src = (this.sent + done) % this.sndSize;
          const dst = (this.sent + done) % this.peerSize;
          const n = Math.min(len - done, this.sndSize - src, this.peerSize - dst);
          this.transport.write(src, n, dst);
          this.counters.rdmaWrites++;
          done += n;
        }
      } catch (e) {
        this.localAbort(`RDMA WRITE failed: ${(e as Error).message}`, false);
        return;
      }
      // after a failover the bytes below sentHigh are a replay, not new stream bytes
      const fresh = Math.max(0, this.sent + len - Math.max(this.sent, this.sentHigh));
      this.sent += len;
      if (this.sent > this.sentHigh) this.sentHigh = this.sent;
      this.counters.bytesSent += fresh;
      this.counters.replayedBytes += len - fresh;
      if (this.urgTxPend && this.sent === this.prep && this.txUrgPending) this.txUrgPresent = true;
      this.sendCdc('data');
      if (this.txUrgPresent) { this.txUrgPresent = false; this.txUrgPending = false; }
      if (this.txWriteBlocked) break;
    }
    this.tryPendingClose();
  }

  /** Build and post one CDC with the current cursors and flags. */
  private sendCdc(kind: 'data' | 'update' | 'close'): void {
    this.txSeq = (this.txSeq + 1) & 0xffff;
    // Written in one call (the views' CDC writer) into one buffer per connection (the transport
    // copies it into a send slot before it returns): no message object, cursor objects or array
    // per CDC, and each byte once.
    writeCdc(this.cdcOut, 0, CDC_TYPE, CDC_MSG_SIZE, this.txSeq, this.peerToken,
      0, Math.floor(this.sent / this.peerSize) & 0xffff, this.sent % this.peerSize,
      0, Math.floor(this.cons / this.rmbeSize) & 0xffff, this.cons % this.rmbeSize,
      (this.txWriteBlocked ? CDC_PROD_WRITE_BLOCKED : 0) | (this.txUrgPending ? CDC_PROD_URG_PENDING : 0) | (this.txUrgPresent ? CDC_PROD_URG_PRESENT : 0),
      (this.txDone ? CDC_CONN_PEER_DONE_WRITING : 0) | (this.txClosed ? CDC_CONN_PEER_CONN_CLOSED : 0) | (this.txAbort ? CDC_CONN_PEER_CONN_ABORT : 0));
    this.confirmed = this.cons;
    this.peerCursReq = false;
    this.counters.cdcSent++;
    if (kind === 'update') this.counters.cursorUpdates++;
    this.postCdc(this.cdcOut, this.txSeq);
  }

  /**
   * smcr_cdc_msg_send_validation: type, length, token, failover_validation and the sequence
   * number of the last acknowledged CDC; everything else zero, as Linux sends it.
   */
  private sendValidation(): void {
    const zero = { wrap: 0, count: 0 };
    const msg = makeCdc(this.finSeq, this.peerToken, zero, zero, { failoverValidation: true });
    this.counters.cdcSent++;
    this.counters.validationsSent++;
    this.postCdc(encodeCdc(msg), undefined);
  }

  /** Send a CDC on the current link; `seq` (undefined for a validation) becomes finSeq when acknowledged. */
  private postCdc(bytes: Uint8Array, seq: number | undefined): void {
    const sentAt = this.sent;
    const epoch = this.linkEpoch;
    this.cdcInFlight++;
    const cb = this.transport.sendCdcCb;
    if (cb) {
      // The acknowledgement is handled as it comes (smc_cdc_tx_handler runs in the completion
      // handler too); a failure is handled after the current job, as a rejected promise was:
      // it must not abort the connection from inside the flush that is posting. What the
      // acknowledgement needs travels in a pooled record with its callback made once (two
      // closures per CDC before).
      const rec = this.cdcPostFree.pop() ?? this.newCdcPost();
      rec.busy = true;
      rec.sentAt = sentAt; rec.seq = seq; rec.epoch = epoch;
      try {
        cb.call(this.transport, bytes, rec.done);
      } catch (e) {
        if (rec.busy) this.releaseCdcPost(rec);
        queueMicrotask(() => this.cdcFailed(epoch, e as Error));
      }
      return;
    }
    let p: Promise<void>;
    try {
      p = this.transport.sendCdc(bytes);
    } catch (e) {
      p = Promise.reject(e);
    }
    p.then(() => this.onCdcAcked(sentAt, seq, epoch), (e: Error) => this.cdcFailed(epoch, e));
  }

  /** Posted CDCs' records for reuse (at most as many as were ever in flight at once). */
  private readonly cdcPostFree: CdcPost[] = [];

  private newCdcPost(): CdcPost {
    const rec: CdcPost = { busy: false, sentAt: 0, seq: undefined, epoch: 0, done: () => undefined };
    rec.done = (e) => this.cdcPostDone(rec, e);
    return rec;
  }

  /** The transport called a record's callback: free the record first (the handlers below may
   *  post the next CDC into it), then act on the copies. A second call is ignored: the record
   *  may already carry another CDC. */
  private cdcPostDone(rec: CdcPost, e: Error | undefined): void {
    if (!rec.busy) return;
    const sentAt = rec.sentAt, seq = rec.seq, epoch = rec.epoch;
    this.releaseCdcPost(rec);
    if (e === undefined) this.onCdcAcked(sentAt, seq, epoch);
    else queueMicrotask(() => this.cdcFailed(epoch, e));
  }

  private releaseCdcPost(rec: CdcPost): void {
    rec.busy = false;
    this.cdcPostFree.push(rec);
  }

  /** A CDC will never be acknowledged. */
  private cdcFailed(epoch: number, e: Error): void {
    // posted on a link we have failed over from: the replay covers it
    if (epoch !== this.linkEpoch) return;
    this.cdcInFlight--;
    this.localAbort(`CDC send failed: ${e.message}`, false);
  }

  /** smc_cdc_tx_handler: the CDC (and the writes before it) reached the peer. */
  private onCdcAcked(sentAt: number, seq: number | undefined, epoch: number): void {
    if (epoch !== this.linkEpoch) return; // old link: switchLink() already rewound past it
    this.cdcInFlight--;
    if (seq !== undefined) this.finSeq = seq;
    if (sentAt > this.fin) {
      this.fin = sentAt;
      this.signalWritable();
    }
    if (this.prep > this.sent && (this.cdcInFlight <= CORK_IN_FLIGHT || this.prep - this.sent > this.corkSize)) this.flush();
    this.wake();
  }

  /** smc_tx_consumer_update: announce our consumer cursor when the window rules say so. */
  private consumerUpdate(force: boolean): void {
    if (this.st === 'CLOSED' || this.txAbort || this.rxAbort || this.txClosed) return;
    const toConfirm = this.cons - this.confirmed;
    const senderFree = this.rmbeSize - (this.rxProd - this.confirmed);
    if (this.peerCursReq || (force && toConfirm > 0)
      || (toConfirm > this.updateLimit && (senderFree <= this.rmbeSize / 2 || this.peerWriteBlocked))) {
      this.sendCdc('update');
    }
    if (this.peerWriteBlocked && this.rxProd === this.cons) this.peerWriteBlocked = false;
  }

  // =====================================================================================
  // Receive path
  // =====================================================================================

  /** Abort for a hostile CDC; `bytes`: the message, decoded by the codec for the reason's summary. */
  private violation(what: string, bytes?: Uint8Array): void {
    this.localAbort(`hostile CDC: ${what}${bytes ? ` (${summarizeCdc(decodeCdc(bytes).value)})` : ''}`, true);
  }

  private onCdc(bytes: Uint8Array): void {
    if (this.st === 'CLOSED') { this.counters.lateCdcs++; return; }
    if (bytes.length < CDC_MSG_SIZE) return this.violation(`truncated message of ${bytes.length} bytes`);
    // read in one call (the views' CDC reader) into this connection's scratch fields (no
    // objects per CDC); the cursors into the two cursor objects the rules take
    const m = this.rx;
    readCdc(bytes, 0, CDC_MSG_SIZE, m);
    const prod = this.rxProdIn, cons = this.rxConsIn;
    prod.wrap = m.prodWrap; prod.count = m.prodCount;
    cons.wrap = m.consWrap; cons.count = m.consCount;
    if (m.type !== CDC_TYPE) return this.violation(`type 0x${m.type.toString(16)}`, bytes);
    if (m.length !== CDC_MSG_SIZE) return this.violation(`length ${m.length}, not 44`, bytes);
    if (m.token !== this.localToken) return this.violation(`token ${hex32(m.token)} is not ours (${hex32(this.localToken)})`, bytes);
    this.counters.cdcReceived++;
    if (m.failoverValidation) {
      // Linux smc_cdc_msg_validate: a validation message naming a sequence number we never
      // saw means CDCs were lost with the old link: the connection cannot continue.
      if (validationOutOfSync(this.rxSeq, m.seq)) return this.violation(`failover validation names seq ${m.seq}, last received ${this.rxSeq}: CDCs were lost (out of sync)`, bytes);
      // in sync: nothing changes; the peer now re-writes what it is not sure landed
      this.counters.validationsReceived++;
      this.peerReplay = true;
      this.log(`failover validation seq ${m.seq} (last received ${this.rxSeq}): the peer switched links`);
      return;
    }
    if (this.rxSeen && seqCheck(this.rxSeq, m.seq) === 'stale') {
      // Linux drops old sequence numbers silently (replays after failover); count and log.
      this.counters.staleCdcs++;
      this.log(`stale CDC ignored: seq ${m.seq}, last ${this.rxSeq}`);
      return;
    }
    // ---- cursors ----
    if (m.prodReserved || m.consReserved) return this.violation('cursor reserved bytes not zero', bytes);
    if (cursorOutOfRing(prod, this.rmbeSize)) return this.violation(`producer cursor count ${prod.count} beyond our ${this.rmbeSize}-byte RMBE`, bytes);
    let dProd = cursorDistance(this.rxProdCurs, prod, this.rmbeSize);
    const replayed = dProd < 0 && this.peerReplay && -dProd <= this.rmbeSize;
    if (dProd < 0 && !replayed) return this.violation(`producer cursor moved backwards by ${-dProd} bytes`, bytes);
    // the peer's replay after a failover: bytes we already have (our cursor stays)
    if (replayed) { dProd = 0; this.counters.replayCdcsReceived++; } else this.peerReplay = false;
    if (this.rxProd + dProd - this.confirmed > this.rmbeSize) {
      return this.violation(`producer cursor ${dProd} bytes ahead overruns unconsumed data (only ${this.rmbeSize - (this.rxProd - this.confirmed)} bytes were free)`, bytes);
    }
    if (dProd > 0 && (this.rxDone || this.rxClosed)) return this.violation(`${dProd} bytes of data after the peer said it was done writing`, bytes);
    if (cursorOutOfRing(cons, this.peerSize)) return this.violation(`consumer cursor count ${cons.count} beyond the peer's ${this.peerSize}-byte RMBE`, bytes);
    const dCons = cursorDistance(this.peerConsCurs, cons, this.peerSize);
    if (dCons < 0) return this.violation(`consumer cursor moved backwards by ${-dCons} bytes`, bytes);
    if (this.peerCons + dCons > this.sentHigh) return this.violation(`consumer cursor ${this.peerCons + dCons - this.sentHigh} bytes beyond what we wrote`, bytes);
    // ---- accepted ----
    this.rxSeq = m.seq;
    this.rxSeen = true;
    // m is scratch, reused for the next CDC: copy the values
    if (!replayed) { this.rxProdCurs.wrap = prod.wrap; this.rxProdCurs.count = prod.count; }
    this.peerConsCurs.wrap = cons.wrap; this.peerConsCurs.count = cons.count;
    this.peerCons += dCons;
    if (this.peerCons > this.sent) {
      // only after a failover rewind: the peer read bytes whose CDC was lost with the old link,
      // so they landed and need no replay
      this.sent = this.peerCons;
    }
    const freed = this.peerCons > this.fin;
    if (freed) this.fin = this.peerCons;
    this.rxProd += dProd;
    this.counters.bytesReceived += dProd;
    this.peerWriteBlocked = m.writeBlocked;
    if (m.cursorUpdateRequested) this.peerCursReq = true;
    this.rxUrgPending = m.urgentPending;
    if (dProd > 0 && m.urgentPresent) {
      // smc_cdc_handle_urg_data_arrival: the urgent byte is the last byte written.
      this.urgPos = urgentByteAt(this.rxProd);
      this.counters.urgentReceived++;
      this.emit('urgent', this.rmbe[this.urgPos % this.rmbeSize]!);
    }
    if (m.peerDoneWriting) this.rxDone = true;
    if (m.peerConnClosed) this.rxClosed = true;
    if (m.peerConnAbort) this.rxAbort = true;

    if (this.rxAbort) { this.passiveAbort(); return; }

    if (dProd > 0) this.signalReadable();
    const skipped = this.skipUrgentAtMark();
    if (skipped || this.peerCursReq || this.peerWriteBlocked) this.consumerUpdate(skipped);
    if (dCons > 0) {
      if (this.urgTxPend && this.peerSpace() === this.peerSize) {
        this.urgTxPend = false; // the peer consumed the urgent data: ready for more
        this.signalWritable();
      } else if (freed) {
        this.signalWritable();
      }
      if (this.prep > this.sent) this.flush();
    }
    // smc_close_passive_work runs for every CDC carrying a close flag (it is idempotent)
    if (this.peerDone) this.passiveClose();
    this.tryPendingClose();
    this.checkEnd();
    this.wake();
  }

  /** Skip a received urgent byte when the reader reached it (Linux non-URGINLINE). */
  private skipUrgentAtMark(): boolean {
    if (this.urgPos >= 0 && this.cons === this.urgPos && this.rxProd > this.urgPos) {
      this.cons += 1;
      this.urgPos = -1;
      return true;
    }
    return false;
  }

  private checkEnd(): void {
    if (this.endEmitted || !(this.rxDone || this.rxClosed) || this.rxAbort) return;
    if (this.rxProd - this.cons > 0) return;
    this.endEmitted = true;
    this.emit('end');
  }

  // =====================================================================================
  // Termination (smc_close.c)
  // =====================================================================================

  private setState(s: CdcState): void {
    if (s === this.st) return;
    this.st = s;
    this.emit('state', s);
    if (s === 'CLOSED') this.finishClosed();
  }

  private finishClosed(): void {
    if (this.lingerTimer) { clearTimeout(this.lingerTimer); this.lingerTimer = undefined; }
    this.pendingClose = undefined;
    this.wake();
    if (!this.closedEmitted) {
      this.closedEmitted = true;
      const info: { aborted: boolean; reason?: string } = { aborted: this.abortReason !== undefined };
      if (this.abortReason !== undefined) info.reason = this.abortReason;
      this.emit('closed', info);
    }
  }

  private get sentAnyClose(): boolean { return this.txClosed || this.txAbort; }
  private get rxAnyClose(): boolean { return this.rxClosed || this.rxAbort; }

  /** smc_close_final: closed, or abort when received data is left unread. */
  private closeFinal(): void {
    if (this.rxProd - this.cons > 0) {
      this.txAbort = true;
      this.log(`closing with ${this.rxProd - this.cons} unread bytes: sending abort`);
    } else {
      this.txClosed = true;
    }
    this.sendCdc('close');
  }

  /** Run a requested shutdown/close once all app data is written (smc_close_stream_wait). */
  private tryPendingClose(): void {
    const what = this.pendingClose;
    if (what === undefined || this.st === 'CLOSED') return;
    if (this.prep > this.sent && !this.rxAnyClose) return; // still data to write
    this.pendingClose = undefined;
    if (this.lingerTimer) { clearTimeout(this.lingerTimer); this.lingerTimer = undefined; }
    if (what === 'shutdown') this.doShutdownWrite();
    else this.doClose();
    this.wake();
  }

  private doShutdownWrite(): void {
    switch (this.st) {
      case 'ACTIVE':
        this.txDone = true;
        this.sendCdc('close');
        this.setState('PEERCLOSEWAIT1');
        break;
      case 'APPCLOSEWAIT1':
        this.txDone = true;
        this.sendCdc('close');
        this.setState('APPCLOSEWAIT2');
        break;
      default:
        break;
    }
  }

  private doClose(): void {
    this.appClosed = true;
    switch (this.st) {
      case 'ACTIVE':
        this.closeFinal();
        this.setState('PEERCLOSEWAIT1');
        break;
      case 'APPFINCLOSEWAIT':
        if (this.txDone && !this.sentAnyClose) this.closeFinal();
        this.setState('CLOSED');
        break;
      case 'APPCLOSEWAIT1':
      case 'APPCLOSEWAIT2':
        this.closeFinal();
        this.setState(this.rxAnyClose ? 'CLOSED' : 'PEERFINCLOSEWAIT');
        break;
      case 'PEERCLOSEWAIT1':
      case 'PEERCLOSEWAIT2':
        if (this.txDone && !this.sentAnyClose) this.closeFinal();
        break; // the peer's close moves us on
      case 'PROCESSABORT':
        this.txAbort = true;
        this.sendCdc('close');
        this.setState('CLOSED');
        break;
      case 'PEERABORTWAIT':
        this.setState('CLOSED');
        break;
      default:
        break;
    }
  }

  /** smc_close_passive_work for done/closed. */
  private passiveClose(): void {
    switch (this.st) {
      case 'ACTIVE':
        this.setState('APPCLOSEWAIT1');
        break;
      case 'PEERCLOSEWAIT1':
      case 'PEERCLOSEWAIT2':
        if (this.st === 'PEERCLOSEWAIT1' && this.rxDone) this.setState('PEERCLOSEWAIT2');
        if (!this.rxAnyClose) break;
        this.setState(this.appClosed && this.sentAnyClose ? 'CLOSED' : 'APPFINCLOSEWAIT');
        break;
      case 'PEERFINCLOSEWAIT':
        if (this.rxAnyClose) this.setState('CLOSED');
        break;
      default:
        break;
    }
  }

  /** smc_close_passive_abort_received. */
  private passiveAbort(): void {
    const reason = 'the peer aborted the connection';
    const first = this.abortReason === undefined;
    if (first) {
      this.abortReason = reason;
      this.log(`peer abort received in state ${this.st}`);
    }
    switch (this.st) {
      case 'ACTIVE':
      case 'APPCLOSEWAIT1':
      case 'APPFINCLOSEWAIT':
        this.setState('PROCESSABORT');
        break;
      case 'PEERCLOSEWAIT1':
      case 'PEERCLOSEWAIT2':
        this.setState(this.txDone && !this.sentAnyClose ? 'PROCESSABORT' : 'CLOSED');
        break;
      case 'APPCLOSEWAIT2':
      case 'PEERFINCLOSEWAIT':
      case 'PEERABORTWAIT':
        this.setState('CLOSED');
        break;
      default:
        break;
    }
    if (first) this.emit('abort', reason);
    // An app that already asked to close does not need to be told twice.
    if (this.st === 'PROCESSABORT' && (this.appClosed || this.pendingClose === 'close')) { this.pendingClose = undefined; this.doClose(); }
    this.wake();
  }

  /** Local abort (app, hostile peer, link down): abort CDC when the link allows it, then CLOSED. */
  private localAbort(reason: string, sendCdc: boolean): void {
    if (this.st === 'CLOSED') return;
    const first = this.abortReason === undefined;
    if (first) this.abortReason = reason;
    this.log(`abort: ${reason}`);
    if (sendCdc && !this.txAbort) {
      this.txAbort = true;
      this.txWriteBlocked = false;
      try { this.sendCdcQuiet(); } catch { /* link gone: nothing to tell */ }
    }
    this.txAbort = true;
    this.setState('CLOSED');
    if (first) this.emit('abort', reason);
  }

  /** The abort CDC: its failure must not re-enter localAbort. */
  private sendCdcQuiet(): void {
    this.txSeq = (this.txSeq + 1) & 0xffff;
    const msg = makeCdc(this.txSeq, this.peerToken, cursorAt(this.sent, this.peerSize), cursorAt(this.cons, this.rmbeSize), {},
      { peerDoneWriting: this.txDone, peerConnClosed: this.txClosed, peerConnAbort: true });
    this.counters.cdcSent++;
    this.transport.sendCdc(encodeCdc(msg)).catch(() => { /* link down: the peer learns from its link */ });
  }

  private armLinger(): void {
    if (this.lingerTimer || this.lingerMs <= 0) return;
    this.lingerTimer = setTimeout(() => {
      this.lingerTimer = undefined;
      if (this.pendingClose !== undefined && this.st !== 'CLOSED') {
        this.localAbort(`${this.prep - this.sent} bytes could not be written within ${this.lingerMs} ms of close`, true);
      }
    }, this.lingerMs);
    this.lingerTimer.unref?.();
  }

  // ---- helpers ----

  private waitFor(cond: () => boolean): Promise<void> {
    if (cond()) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const check = (): void => { if (cond()) resolve(); else this.waiters.push(check); };
      this.waiters.push(check);
    });
  }

  private wake(): void {
    if (this.waiters.length === 0) return; // the common case: no array per CDC
    const w = this.waiters.splice(0);
    for (const f of w) f();
  }

  private log(line: string): void {
    this.logFn?.(`conn ${hex32(this.localToken)}: ${line}`);
  }
}
