// What a CDC connection needs from its link group: a way to put bytes into the peer's RMBE and
// to send the CDC message that announces them. The link group implements it over the
// connection's current link (endpoint/llc/wr.ts WrLink) and switches links underneath on
// failover; the connection never sees QPs, rkeys or which link carries it.

import type { Mr } from '../verbs/index.js';

export interface CdcTransport {
  /**
   * RDMA WRITE sndbuf[srcOff, srcOff + len) to the peer's RMBE at byte `dstOff` (0 ≤ dstOff,
   * dstOff + len ≤ peer RMBE size; the caller splits a write that wraps the ring). Throws
   * LinkDownError when no link is usable.
   */
  write(srcOff: number, len: number, dstOff: number): void;
  /**
   * Send one 44-byte CDC message on the same link, after every write() issued before it (RC
   * ordering). `msg` is only valid during the call (the connection reuses it): copy to keep. Resolves when the peer's RNIC acknowledged it; rejects with LinkDownError.
   * May wait for a free send slot (backpressure).
   */
  sendCdc(msg: Uint8Array): Promise<void>;
  /**
   * The same with a callback, when the transport has one (the link group's): no promise per
   * CDC on the data path. `done(undefined)` once acknowledged, `done(error)` once it never will
   * be; it may run synchronously, from inside the post or the completion handling.
   */
  sendCdcCb?(msg: Uint8Array, done: (err: Error | undefined) => void): void;
}

/** Buffers of one connection, allocated and registered by the link group. */
export interface CdcBuffers {
  /** Our RMBE: the ring the peer RDMA-writes into (registered REMOTE_WRITE). */
  rmbe: Uint8Array;
  /** Our send buffer: app data is copied here and RDMA-written from here (LOCAL only). */
  sndbuf: Mr;
  /** Size of the peer's RMBE (bytes), from its Accept/Confirm size code. */
  peerRmbeSize: number;
}
