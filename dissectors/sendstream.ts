// Reassembly of multi-packet RC SENDs (FIRST / MIDDLE* / LAST) per destination QP, so LLC v2
// messages larger than the path MTU (ADD LINK v2 with many rkeys, DELETE RKEY v2) decode whole.
// Keyed by destination (address, QPN); PSN continuity decides what belongs together:
// duplicates (retransmissions) are ignored, a gap abandons the message with a reason.

export type SendPart = 'first' | 'middle' | 'last' | 'only';

export interface SendResult {
  /** The complete message when this packet finished one (a fresh buffer for multi-packet SENDs). */
  message?: Uint8Array;
  /** Frames that carried the message, when it spanned several. */
  frames?: number[];
  /** Set when this packet could not be placed (gap, missing FIRST, duplicate). */
  problem?: 'missing-first' | 'psn-gap' | 'duplicate';
}

interface Partial { psnNext: number; chunks: Uint8Array[]; size: number; frames: number[] }

function sendKey(dst: string, qp: number): string { return `${dst}/${qp}`; }

/** Upper bound of a reassembled SEND (Linux v2 LLC max is 8 KiB; be generous, but bounded). */
const MAX_MESSAGE = 1 << 20;

export class SendStreams {
  private readonly partial = new Map<string, Partial>();

  /**
   * One SEND packet to QP `qp` at `dst` (an address or GID). A SEND ONLY (every LLC and CDC
   * message that fits one packet) looks for an abandoned message of its QP only when one is in
   * progress anywhere: no key string per packet otherwise.
   */
  packet(dst: string, qp: number, part: SendPart, psn: number, payload: Uint8Array, frame: number): SendResult {
    if (part === 'only') {
      if (this.partial.size !== 0 && this.partial.delete(sendKey(dst, qp))) return { message: payload, problem: 'psn-gap' };
      return { message: payload };
    }
    const key = sendKey(dst, qp);
    if (part === 'first') {
      // Always restart: after a NAK, go-back-N resends the message from its FIRST packet.
      this.partial.set(key, { psnNext: (psn + 1) & 0xffffff, chunks: [payload.slice()], size: payload.length, frames: [frame] });
      return {};
    }
    const p = this.partial.get(key);
    if (!p) return { problem: 'missing-first' };
    if (psn !== p.psnNext) {
      // Older PSN: a retransmitted packet of this message; newer: packets were lost.
      const behind = (p.psnNext - psn) & 0xffffff;
      if (behind > 0 && behind < 0x800000) return { problem: 'duplicate' };
      this.partial.delete(key);
      return { problem: 'psn-gap' };
    }
    p.chunks.push(payload.slice());
    p.size += payload.length;
    p.frames.push(frame);
    p.psnNext = (psn + 1) & 0xffffff;
    if (p.size > MAX_MESSAGE) { this.partial.delete(key); return { problem: 'psn-gap' }; }
    if (part === 'middle') return {};
    this.partial.delete(key);
    const out = new Uint8Array(p.size);
    let o = 0;
    for (const c of p.chunks) { out.set(c, o); o += c.length; }
    return { message: out, frames: p.frames };
  }
}
