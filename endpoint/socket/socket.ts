// SmcSocket: the application's view of one SMC connection, a Duplex shaped like node:net's
// Socket. It wraps the TCP socket the connection was negotiated on, plus either
//   mode 'smcr': a CdcConnection (data flows through RDMA; the TCP socket carries nothing more), or
//   mode 'tcp':  nothing — SMC fell back (reason code from CLC / the TCP option) and the data
//                flows over the TCP socket itself, exactly like kernel SMC's fallback.
//
// Backpressure, both ways (SMC-R):
//   - write(): a chunk is accepted (its callback runs) once it was copied into the send buffer;
//     when the send buffer is full, _write waits for the CDC acknowledgements that free it.
//   - reading: bytes leave the RMBE only when the stream can take them (push() true / _read);
//     the consumer cursor advances only then, so a slow reader closes the peer's window, like
//     TCP's receive window.
//
// Urgent data (SMC-R only; RFC 7609 4.7.5-4.7.6, TCP MSG_OOB semantics as Linux implements them):
//   - `sendUrgent(data)` queues `data` in order with earlier writes; its LAST byte is the urgent
//     byte. Like Linux, further writes wait until the peer consumed everything up to it.
//   - the receiver emits `'urgent' (byte: number)` when the urgent byte arrives; the byte is not
//     part of the in-band stream (Linux without SO_OOBINLINE), the bytes before it are.
//   - in 'tcp' mode sendUrgent() rejects with code ERR_SMC_NO_URGENT (Node's TCP has no MSG_OOB).
//
// Termination: end() = shutdown(SHUT_WR) (SMC peer_done_writing, then a TCP FIN, as Linux does);
// destroy() = abort (peer_conn_abort + TCP RST) unless both directions already ended, in which
// case it is the orderly close (peer_conn_closed). 'close' comes after both the SMC connection
// reached CLOSED and the TCP socket closed.
//
// A TCP reset while the SMC-R connection is active aborts it. (Linux does not watch the TCP
// socket of an active SMC-R connection at all; a TCP FIN alone is normal — Linux sends its FIN
// on shutdown, before the CDC that says done — and is ignored.)

import { Duplex } from 'node:stream';
import type { Socket } from 'node:net';
import type { CdcConnection } from '../cdc/connection.js';
import { declineReason } from '../../dissectors/wire/reasons.js';
import { StrayClcFilter } from '../clc/stray.js';

/** What an SMC-R connection runs on. */
export interface SmcrInfo {
  /** SMC version (1 or 2). */
  version: number;
  /** SMC-Rv2 release (0 for v1). */
  release: number;
  /** Link group id (local). */
  linkGroup: number | string;
  /** Link id the connection runs on. */
  link: number;
  firstContact: boolean;
}

export interface FallbackInfo {
  /** CLC decline / fallback reason code (Linux SMC_CLC_DECL_*). */
  code: number;
  /** Linux name without the SMC_CLC_DECL_ prefix, e.g. 'PEERNOSMC'. */
  name: string;
  meaning: string;
}

export type SmcSocketInit =
  | {
    tcp: Socket; mode: 'smcr'; conn: CdcConnection; info: SmcrInfo; closeTimeoutMs?: number;
    /** The peer's FIN came during the handshake; how long its SMC close may lag behind a FIN. */
    peerEnded?: boolean; finGraceMs?: number;
  }
  | {
    tcp: Socket; mode: 'tcp'; fallbackCode: number;
    /** Bytes the handshake read past its last CLC message, and whether the peer's FIN came too. */
    leftover?: Buffer; peerEnded?: boolean;
    /** Take stray CLC messages off the start of the stream (we decided the fallback); how long to look. */
    strayClc?: boolean; strayWaitMs?: number;
    log?: (line: string) => void;
  };

const READ_CHUNK = 65536;

/**
 * node:net's `onread` option: received bytes are copied into `buffer` and handed to `callback`
 * (valid only during the call) instead of being pushed as fresh chunks; returning false pauses
 * the socket (resume() continues). 'data' is not emitted; 'end' is.
 */
export interface OnRead {
  buffer: Uint8Array;
  callback: (nread: number, buf: Uint8Array) => boolean | void;
}

type Cb = (err?: Error | null) => void;

function err(code: string, message: string): Error {
  return Object.assign(new Error(message), { code });
}

export class SmcSocket extends Duplex {
  readonly mode: 'smcr' | 'tcp';
  readonly smcr: SmcrInfo | undefined;
  readonly fallback: FallbackInfo | undefined;
  /** The TCP socket the connection was negotiated on. */
  readonly tcp: Socket;
  /** The TCP 4-tuple at construction (see the getters below). */
  private readonly ends: { remoteAddress?: string; remotePort?: number; remoteFamily?: string; localAddress?: string; localPort?: number };
  readonly conn: CdcConnection | undefined;
  private readonly urgentChunks = new WeakSet<object>();
  private reading = false;
  private pushedEof = false;
  private pulling = false;
  private pullAgain = false;
  private writeWaiter: (() => void) | undefined;
  private onread: OnRead | undefined;
  private onreadPaused = false;
  private readonly closeTimeoutMs: number;
  /** TCP bytes received in SMC-R mode (the peer should send none). */
  tcpBytesIgnored = 0;

  constructor(init: SmcSocketInit) {
    super({ allowHalfOpen: true, emitClose: true, autoDestroy: true });
    this.tcp = init.tcp;
    this.ends = { remoteAddress: init.tcp.remoteAddress, remotePort: init.tcp.remotePort, remoteFamily: init.tcp.remoteFamily, localAddress: init.tcp.localAddress, localPort: init.tcp.localPort };
    this.mode = init.mode;
    if (init.mode === 'smcr') {
      this.smcr = init.info;
      this.fallback = undefined;
      this.conn = init.conn;
      this.closeTimeoutMs = init.closeTimeoutMs ?? 30_000;
      this.setupSmcr(init.conn, init.finGraceMs ?? 1500, init.peerEnded === true);
    } else {
      const r = declineReason(init.fallbackCode);
      this.fallback = { code: init.fallbackCode >>> 0, name: r.name, meaning: r.meaning };
      this.smcr = undefined;
      this.conn = undefined;
      this.closeTimeoutMs = 0;
      this.setupTcp(init);
    }
  }

  // ---- node:net look-alikes ----
  // The addresses as they were when the connection was made: Node forgets them once the TCP
  // socket is gone, but a peer that closed at once must still be named in logs.
  get remoteAddress(): string | undefined { return this.tcp.remoteAddress ?? this.ends.remoteAddress; }
  get remotePort(): number | undefined { return this.tcp.remotePort ?? this.ends.remotePort; }
  get remoteFamily(): string | undefined { return this.tcp.remoteFamily ?? this.ends.remoteFamily; }
  get localAddress(): string | undefined { return this.tcp.localAddress ?? this.ends.localAddress; }
  get localPort(): number | undefined { return this.tcp.localPort ?? this.ends.localPort; }
  /** No Nagle to switch off in SMC-R (every flush is written at once); passed to TCP in fallback mode. */
  setNoDelay(noDelay = true): this { if (this.mode === 'tcp') this.tcp.setNoDelay(noDelay); return this; }
  setKeepAlive(enable = false, initialDelay = 0): this { this.tcp.setKeepAlive(enable, initialDelay); return this; }

  /**
   * Send `data` with its last byte as urgent data (see the file comment). Resolves when it was
   * accepted into the send buffer, in order with earlier writes.
   */
  sendUrgent(data: Uint8Array | string): Promise<void> {
    if (this.mode !== 'smcr') return Promise.reject(err('ERR_SMC_NO_URGENT', 'urgent data needs an SMC-R connection (TCP fallback has no MSG_OOB in Node)'));
    const b = typeof data === 'string' ? Buffer.from(data) : Buffer.from(data.buffer, data.byteOffset, data.byteLength);
    if (b.length === 0) return Promise.reject(new RangeError('urgent data must not be empty'));
    const copy = Buffer.from(b); // a distinct object to tag
    this.urgentChunks.add(copy);
    return new Promise<void>((resolve, reject) => {
      this.write(copy, (e) => (e ? reject(e) : resolve()));
    });
  }

  /**
   * Read through `o.buffer` from now on (node:net's `onread` option, which Node offers only when
   * a socket is made): no fresh Buffer per chunk. Over SMC-R the bytes are copied from the RMBE
   * straight into `o.buffer` (one copy, no allocation — a chunk per read costs an allocation and,
   * at stream rates, most of the receiver's CPU in garbage collection: docs/uroce.md round 6);
   * in fallback mode each TCP chunk is copied into it. Call before the first byte is read.
   */
  setOnread(o: OnRead): this {
    if (!(o.buffer instanceof Uint8Array) || o.buffer.length === 0) throw new TypeError('onread needs a non-empty buffer');
    // bytes already taken into the Readable (e.g. unshifted by a header parser) come first, all
    // of them: once onread is set nothing reads that queue any more
    while (this.readableLength > 0) {
      const b = this.read() as Buffer | null;
      if (b === null) break;
      this.copyThrough(o, b);
    }
    const first = this.onread === undefined;
    this.onread = o;
    if (first) {
      this.on('pause', () => { this.onreadPaused = true; });
      this.on('resume', () => {
        this.onreadPaused = false;
        if (this.mode === 'tcp') this.tcp.resume(); else this.pull();
      });
    }
    this.onreadPaused = this.isPaused();
    if (this.mode === 'tcp') { if (!this.onreadPaused) this.tcp.resume(); } else this.pull();
    return this;
  }

  /** A chunk copied through the caller's buffer, one callback per buffer-full; a callback that
   *  returns false pauses the socket. */
  private copyThrough(o: OnRead, b: Uint8Array): void {
    for (let at = 0; at < b.length;) {
      const n = Math.min(o.buffer.length, b.length - at);
      o.buffer.set(b.subarray(at, at + n), 0);
      at += n;
      if (o.callback(n, o.buffer) === false) this.pause();
    }
  }

  /** Fallback mode with onread: a TCP chunk copied through the caller's buffer. */
  private deliverOnread(b: Buffer): void {
    this.copyThrough(this.onread!, b);
    if (this.onreadPaused) this.tcp.pause();
  }

  // =====================================================================================
  // Fallback: TCP carries the data
  // =====================================================================================

  private setupTcp(init: Extract<SmcSocketInit, { mode: 'tcp' }>): void {
    const tcp = this.tcp;
    tcp.allowHalfOpen = true;
    const filter = init.strayClc ? new StrayClcFilter() : undefined;
    let timer: NodeJS.Timeout | undefined;
    const deliver = (b: Buffer): void => {
      if (b.length === 0) return;
      if (this.onread) { this.deliverOnread(b); return; }
      if (!this.push(b)) tcp.pause();
    };
    const checked = (): void => {
      clearTimeout(timer);
      if (filter && filter.dropped > 0) init.log?.(`fallback: took ${filter.dropped} stray CLC message(s) off the TCP stream (sent by the peer before it saw the fallback)`);
    };
    const onData = (b: Buffer): void => {
      if (!filter?.checking) { deliver(b); return; }
      deliver(filter.feed(b));
      if (!filter.checking) { checked(); return; }
      // Bytes that could begin a CLC message are held at most strayWaitMs, then they are data.
      // The clock starts when bytes are held, not at the fallback: a stray message the peer
      // sent late (its Accept after our Accept timeout, under load seconds later) is still at
      // the very start of the stream and must still be taken off — no data can come before it.
      if (filter.holding === 0) { clearTimeout(timer); timer = undefined; return; }
      timer ??= setTimeout(() => { if (filter.checking) { deliver(filter.flush()); checked(); } }, init.strayWaitMs ?? 2000).unref();
    };
    let ended = false;
    const onEnd = (): void => {
      if (ended) return;
      ended = true;
      if (filter?.checking) { deliver(filter.flush()); checked(); }
      this.push(null);
    };
    tcp.on('data', onData);
    tcp.on('end', onEnd);
    tcp.on('error', (e) => this.destroy(e));
    tcp.on('close', () => { clearTimeout(timer); if (!this.destroyed) this.destroy(); });
    tcp.pause();
    if (init.leftover && init.leftover.length > 0) onData(init.leftover);
    if (init.peerEnded) onEnd();
  }

  // =====================================================================================
  // SMC-R: the CdcConnection carries the data
  // =====================================================================================

  private setupSmcr(conn: CdcConnection, finGraceMs: number, peerEnded: boolean): void {
    const tcp = this.tcp;
    tcp.allowHalfOpen = true;
    const live = (): boolean => conn.stateName !== 'CLOSED' && !conn.aborted;
    // The TCP socket is read (and its bytes dropped) so that a reset or FIN is seen at all.
    tcp.on('data', (b: Buffer) => {
      this.tcpBytesIgnored += b.length;
      // Linux sends nothing on the TCP socket of an SMC-R connection. Bytes there mean the peer
      // is not in SMC-R mode (it fell back, e.g. its Decline after a late timeout): our data
      // would go to a connection it does not have. Abort rather than lose data silently.
      if (live()) conn.abort(`peer sent ${b.length} bytes over TCP on an SMC-R connection (it is not in SMC-R mode: out of sync)`);
    });
    let finTimer: NodeJS.Timeout | undefined;
    const onFin = (): void => {
      // A Linux peer sends its FIN on shutdown, just before the CDC that says done: not a close
      // by itself. If that CDC does not follow within finGraceMs, the peer is gone (its process
      // died and its kernel closed the socket): abort instead of waiting for TEST LINK.
      if (!live() || conn.peerDone) return;
      finTimer = setTimeout(() => {
        if (live() && !conn.peerDone) conn.abort(`peer closed its TCP connection and sent no SMC-R close within ${finGraceMs} ms (peer gone)`);
      }, finGraceMs);
      finTimer.unref();
    };
    tcp.on('end', onFin);
    tcp.on('error', (e) => {
      if (live()) conn.abort(`TCP connection failed: ${(e as Error).message}`);
      if (!this.destroyed) this.destroy(e);
    });
    // No abort on 'close' itself: both FINs may have crossed while the peer's done CDC is still on
    // its way over RDMA; the FIN timer above decides.
    conn.once('closed', () => clearTimeout(finTimer));
    tcp.resume();
    if (peerEnded) onFin();
    conn.onReadable = () => this.pull();
    conn.on('end', () => this.pull());
    conn.onWritable = () => this.resumeWrite();
    conn.on('urgent', (byte: number) => this.emit('urgent', byte));
    conn.on('abort', (reason: string) => {
      this.resumeWrite();
      if (!this.destroyed) this.destroy(err('ECONNRESET', `SMC-R connection aborted: ${reason}`));
    });
  }

  private resumeWrite(): void {
    const w = this.writeWaiter;
    this.writeWaiter = undefined;
    w?.();
  }

  /** Copy `buf` into the send buffer, waiting for room as needed. */
  private putChunk(buf: Uint8Array, urgent: boolean, cb: Cb): void {
    const conn = this.conn!;
    let off = 0;
    const step = (): void => {
      try {
        if (urgent) {
          if (conn.write(buf, true) === buf.length) off = buf.length;
        } else {
          off += conn.write(buf.subarray(off));
        }
      } catch (e) {
        cb(e as Error);
        return;
      }
      if (off >= buf.length) cb();
      else this.writeWaiter = step;
    };
    step();
  }

  /**
   * A small write that finds nothing queued goes straight into the send buffer, past the
   * Writable's machinery (its state, its queue, the afterWrite tick): the same copy and the same
   * CDC flush (a microtask, coalescing the tick's writes) as _write, in the caller's turn.
   * Anything else — a queue, cork, end, destroy, urgent data, a string, a full send buffer, a
   * closed connection — takes the Writable path, which keeps order and backpressure: once
   * something is queued every later write queues behind it (writableLength > 0), and the part of
   * a chunk that did not fit is queued like a whole one. Small: below the high-water mark, where
   * the Writable returns true for a chunk it took at once too. A larger chunk keeps the Writable
   * path and its false: a writer that waits for 'drain' after each one yields, so the CDC flush
   * of each chunk runs before the next (a loop of large direct writes would fill the whole send
   * buffer before the first CDC, a different pipelining than the Writable's, not measured
   * apart from noise). The callback runs on the next tick,
   * as the Writable runs a synchronously finished write's.
   */
  override write(chunk: unknown, encoding?: BufferEncoding | Cb, cb?: Cb): boolean {
    const conn = this.conn;
    if (conn !== undefined && chunk instanceof Uint8Array && chunk.length > 0
      && chunk.length < this.writableHighWaterMark && this.writableLength === 0
      && this.writableCorked === 0 && !this.writableEnded && !this.destroyed && this.writeWaiter === undefined
      && !this.urgentChunks.has(chunk)) {
      let n: number;
      try {
        n = conn.write(chunk);
      } catch {
        return super.write(chunk, encoding as BufferEncoding, cb); // the Writable reports it
      }
      if (n === chunk.length) {
        const done = typeof encoding === 'function' ? encoding : cb;
        if (done) process.nextTick(done, null);
        return true;
      }
      return super.write(n === 0 ? chunk : chunk.subarray(n), encoding as BufferEncoding, cb);
    }
    return super.write(chunk, encoding as BufferEncoding, cb);
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: Cb): void {
    if (this.mode === 'tcp') { this.tcp.write(chunk, cb); return; }
    this.putChunk(chunk, this.urgentChunks.has(chunk), cb);
  }

  override _writev(chunks: Array<{ chunk: Buffer; encoding: BufferEncoding }>, cb: Cb): void {
    if (this.mode === 'tcp') {
      this.tcp.cork();
      for (let i = 0; i < chunks.length; i++) this.tcp.write(chunks[i]!.chunk, i === chunks.length - 1 ? cb : undefined);
      this.tcp.uncork();
      return;
    }
    let i = 0;
    const next = (e?: Error | null): void => {
      if (e) { cb(e); return; }
      if (i >= chunks.length) { cb(); return; }
      const c = chunks[i++]!.chunk;
      this.putChunk(c, this.urgentChunks.has(c), next);
    };
    next();
  }

  override _read(): void {
    if (this.mode === 'tcp') { this.tcp.resume(); return; }
    this.reading = true;
    this.pull();
  }

  /**
   * Move RMBE bytes into the stream while it wants them. Not re-entrant: conn.read() may emit
   * 'end' (or 'readable') synchronously when it drains the last bytes, and a nested pull would
   * push EOF before the outer one pushes those bytes; the nested call only asks for another round.
   */
  private pull(): void {
    if (this.pulling) { this.pullAgain = true; return; }
    this.pulling = true;
    try {
      do {
        this.pullAgain = false;
        this.pullOnce();
      } while (this.pullAgain);
    } finally {
      this.pulling = false;
    }
  }

  private pullOnce(): void {
    const conn = this.conn!;
    const onread = this.onread;
    if (onread) {
      while (!this.onreadPaused && !this.pushedEof) {
        const n = conn.readInto(onread.buffer);
        if (n > 0) {
          if (onread.callback(n, onread.buffer) === false) this.pause();
          continue;
        }
        this.pushEofIfDone(conn);
        break;
      }
      return;
    }
    while (this.reading && !this.pushedEof) {
      const b = conn.read(READ_CHUNK);
      if (b) {
        // A flowing reader with nothing buffered gets the chunk as 'data' at once, as push()
        // would give it — without push()'s checks and the read-more tick it queues after
        // every chunk (a _read that finds the ring empty: pull() runs on the CDC's 'readable').
        // A reader that pauses in its handler stops flowing: the next chunks are pushed and
        // buffered as before. The first chunk goes through push() (it marks the stream read),
        // and so does every chunk of a reader with setEncoding (push() decodes, keeping a
        // character split across chunks whole).
        if (this.readableFlowing === true && this.readableLength === 0 && this.readableDidRead && this.readableEncoding === null) this.emit('data', b);
        else if (!this.push(b)) this.reading = false;
        continue;
      }
      this.pushEofIfDone(conn);
      break;
    }
  }

  private pushEofIfDone(conn: CdcConnection): void {
    if (conn.peerDone && conn.readableLength === 0 && !conn.aborted) {
      this.pushedEof = true;
      this.push(null);
    }
  }

  override _final(cb: Cb): void {
    if (this.mode === 'tcp') { this.tcp.end(cb); return; }
    const conn = this.conn!;
    conn.shutdownWrite().then(() => {
      if (conn.aborted) { cb(err('ECONNRESET', 'SMC-R connection aborted before shutdown completed')); return; }
      this.tcp.end(); // TCP half-close mirrors the SMC one (Linux smc_shutdown)
      cb();
    }, (e: Error) => cb(e));
  }

  override _destroy(error: Error | null, cb: Cb): void {
    const tcp = this.tcp;
    const tcpClosed = (): Promise<void> => new Promise((resolve) => {
      if (tcp.destroyed && (tcp as unknown as { closed?: boolean }).closed !== false) { resolve(); return; }
      tcp.once('close', () => resolve());
      setTimeout(() => { tcp.destroy(); resolve(); }, 5000).unref();
    });
    if (this.mode === 'tcp') {
      tcp.destroy(error ?? undefined);
      void tcpClosed().then(() => cb(error));
      return;
    }
    const conn = this.conn!;
    this.resumeWrite();
    const orderly = !error && this.writableFinished;
    let done: Promise<void>;
    if (conn.stateName === 'CLOSED') {
      done = Promise.resolve();
    } else if (orderly) {
      done = conn.close();
      if (this.closeTimeoutMs > 0) {
        const t = setTimeout(() => conn.abort(`peer did not close within ${this.closeTimeoutMs} ms`), this.closeTimeoutMs);
        t.unref();
        done = done.finally(() => clearTimeout(t));
      }
    } else {
      conn.abort(error ? `socket destroyed: ${error.message}` : 'socket destroyed');
      done = Promise.resolve();
    }
    void done.then(() => {
      if (conn.aborted) resetTcp(tcp);
      else tcp.end();
      return tcpClosed();
    }).then(() => cb(error));
  }
}

/**
 * Abort the TCP socket: RST if our side has not shut down yet, else a plain close. Once end()
 * was called, libuv refuses the reset (uv_tcp_close_reset: EINVAL while/after a shutdown) and
 * Node then never closes the handle: the socket stays open and keeps the process alive (an
 * SMC-R connection ended with end() and aborted afterwards, e.g. by closeAll(), did that).
 */
function resetTcp(tcp: Socket): void {
  if (tcp.writableEnded) tcp.destroy();
  else tcp.resetAndDestroy();
}
