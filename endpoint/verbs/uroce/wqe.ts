// What the requester, responder and completer of a uroce QP share: 24-bit PSN arithmetic,
// the work queue entries as the QP keeps them, and the NAK codes (AETH syndrome 011xxxxx).

import type { WrId } from '../types.js';

export const PSN_MASK = 0xffffff;
/** Signed distance a - b in 24-bit PSN space. */
export function psnDiff(a: number, b: number): number { return ((a - b) << 8) >> 8; }

/** NAK codes (IBA 9.7.5.2.8): PSN sequence error, invalid request, remote access, remote operational. */
export const NAK_SEQ = 0, NAK_INV_REQ = 1, NAK_REM_ACCESS = 2, NAK_REM_OP = 3;

/** AETH credit count "no credit information" (rxe sends it on every ACK). */
export const AETH_NO_CREDITS = 31;

export interface SendWqe {
  wrId: WrId;
  opcode: number;
  signaled: boolean;
  solicited: boolean;
  immData: number | undefined;
  rkey: number;
  remoteAddr: bigint;
  segs: Uint8Array[];
  length: number;
  firstPsn: number;
  lastPsn: number;
  npkts: number;
  /** Local error found at post (completes with it when its turn comes). */
  localErr: number;
}

export interface RecvWqe {
  wrId: WrId;
  segs: Uint8Array[];
  length: number;
  localErr: number;
}
