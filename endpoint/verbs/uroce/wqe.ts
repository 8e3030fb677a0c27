// What the requester, responder and completer of a uroce QP share: 24-bit PSN arithmetic,
// the work queue entries as the QP keeps them, and the NAK codes (AETH syndrome 011xxxxx).

import type { Sge, VerbsAddr, WrId } from '../types.js';
import type { UroceMr } from './device.js';

export const PSN_MASK = 0xffffff;
/** Signed distance a - b in 24-bit PSN space. */
export function psnDiff(a: number, b: number): number { return ((a - b) << 8) >> 8; }

/** NAK codes (IBA 9.7.5.2.8): PSN sequence error, invalid request, remote access, remote operational. */
export const NAK_SEQ = 0, NAK_INV_REQ = 1, NAK_REM_ACCESS = 2, NAK_REM_OP = 3;

/** AETH credit count "no credit information" (rxe sends it on every ACK). */
export const AETH_NO_CREDITS = 31;

/**
 * A send work queue entry. Entries are reused from the QP's free list (SendWqePool): one is
 * released only when it has completed (acknowledged, or flushed/failed), i.e. when no packet
 * of it can be sent or resent any more. The gather list is kept as (buffer, offset, length)
 * triples in arrays the entry keeps across reuses: no view and no array per work request.
 */
export class SendWqe {
  wrId: WrId = 0;
  opcode = 0;
  signaled = false;
  solicited = false;
  immData: number | undefined = undefined;
  rkey = 0;
  remoteAddr: VerbsAddr = 0;
  /** Gather list: nSegs runs segBuf[i][segOff[i] … segOff[i] + segLen[i]). */
  readonly segBuf: Uint8Array[] = [];
  readonly segOff: number[] = [];
  readonly segLen: number[] = [];
  nSegs = 0;
  length = 0;
  firstPsn = 0;
  lastPsn = 0;
  npkts = 0;
  /** Local error found at post (completes with it when its turn comes). */
  localErr = 0;
  /** In the free list (SendWqePool). */
  pooled = false;

  /** Append one gather run. */
  addSeg(buf: Uint8Array, off: number, len: number): void {
    const i = this.nSegs++;
    this.segBuf[i] = buf;
    this.segOff[i] = off;
    this.segLen[i] = len;
  }
}

/** A QP's free send WQEs, at most `max` (its send queue depth) kept. */
export class SendWqePool {
  private readonly free: SendWqe[] = [];
  private n = 0;
  constructor(private readonly max: number) {}

  /** A WQE to fill (nSegs 0; every other field is set by the poster). */
  take(): SendWqe {
    if (this.n === 0) return new SendWqe();
    const w = this.free[--this.n]!;
    w.pooled = false;
    return w;
  }

  /** `w` completed: nothing refers to it any more but the queue slots already passed. */
  release(w: SendWqe): void {
    if (w.pooled || this.n >= this.max) return; // never twice: two posts would share one entry
    w.pooled = true;
    // drop the references to the application's buffers (inline copies, MR buffers)
    for (let i = 0; i < w.nSegs; i++) w.segBuf[i] = EMPTY;
    w.nSegs = 0;
    this.free[this.n++] = w;
  }
}

const EMPTY = new Uint8Array(0);

/**
 * A receive's scatter list as runs of its MRs' buffers, bufs[i][offs[i] … offs[i] + lens[i]):
 * the buffers themselves rather than a view per SGE, so the copies into them (views.ts
 * copyBytes) see a few long-lived arrays (round 13).
 */
export interface RecvSegs { readonly bufs: Uint8Array[]; readonly offs: number[]; readonly lens: number[] }

export interface RecvWqe {
  wrId: WrId;
  segs: RecvSegs;
  length: number;
  localErr: number;
  /** The scatter list this entry was filled from, and its resolution (QP's receive cache). */
  sgl: readonly Sge[] | undefined;
  resolved: ResolvedRecv | undefined;
}

/** A one-SGE receive list resolved into its MR: valid while the SGE still names these and the MR is live. */
export interface ResolvedRecv { addr: VerbsAddr; length: number; lkey: number; mr: UroceMr; segs: RecvSegs }
