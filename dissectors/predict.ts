// Header prediction (Van Jacobson's, applied to a capture): most frames of an SMC-R capture are
// RoCE v2 packets of a flow seen a moment before — same MACs, addresses, ports, P_Key and
// destination QP; only the IP length, ID and checksum, the UDP length and checksum and the BTH's
// opcode, pad count, AckReq and PSN differ. For such a frame this compares the header bytes
// that must be equal with the flow's template (a few 32-bit words at fixed offsets), checks what
// differs by the general path's own rules (the IPv4 checksum, the lengths, the IB body, the
// ICRC) and hands the tracker a narrow call with numbers instead of a DecodedFrame. Anything
// else — another link layer, VLAN tags, IP options or fragments, IPv6, a header field off the
// template, a SEND, a WRITE FIRST/ONLY, a NAK, an issue of any kind, a frame the tracker must
// see whole — takes the general path unchanged, and a clean general-path frame of a predicted
// kind becomes its flow's template. It is an optimisation, not a second interpretation: the
// tracker's results are the same with it off (SMCSCOPE_PREDICT=0, test/integration/predict.test.ts).
// docs/smcdump.md, "Round 8: header prediction".

import { LINKTYPE, type CapturedFrame } from '../capture/types.js';
import type { DecodedFrame, FrameDecoder } from './frame.js';
import { IPPROTO_UDP, ipv4ChecksumOk, type Ipv4Header } from './net/ipv4.js';
import type { Tracker } from './tracker/tracker.js';
import { BTH_LEN, icrcOkIpv4, ICRC_LEN, PREDICTED, PREDICTED_KIND, predictedBodyLength } from './wire/ib.js';
import { fieldBits, type FieldSpec } from './wire/views/field.js';
import { BTH_FIELDS } from './wire/views/ib.js';
import { ETHERNET_LEN, IPV4_FIELDS, IPV4_MIN_LEN, UDP_FIELDS, UDP_LEN } from './wire/views/net.js';

/** Offsets in the frame of the one stack predicted: Ethernet II · IPv4 without options · UDP · BTH. */
const IP_AT = ETHERNET_LEN;
const UDP_AT = IP_AT + IPV4_MIN_LEN;
const BTH_AT = UDP_AT + UDP_LEN;
const STACK_LEN = BTH_AT + BTH_LEN;
/** The shortest frame predicted: the stack and an ICRC. */
const MIN_LEN = STACK_LEN + ICRC_LEN;


/** The fields that may differ between two packets of one flow, at their offsets in the frame. */
const VARYING: readonly [number, FieldSpec][] = [
  [IP_AT, IPV4_FIELDS.totalLength], [IP_AT, IPV4_FIELDS.id], [IP_AT, IPV4_FIELDS.checksum],
  [UDP_AT, UDP_FIELDS.length], [UDP_AT, UDP_FIELDS.checksum],
  [BTH_AT, BTH_FIELDS.opcode], [BTH_AT, BTH_FIELDS.padCount], [BTH_AT, BTH_FIELDS.ackReq], [BTH_AT, BTH_FIELDS.psn],
];

/** The stack as 32-bit words: each word's offset and the mask of its bits that must equal the
 *  template's (every bit of the stack but the VARYING fields'); words with nothing to compare
 *  are left out. */
const { WORD_AT, WORD_MASK } = (() => {
  const keep = new Uint8Array(Math.ceil(STACK_LEN / 4) * 4);
  keep.fill(0xff, 0, STACK_LEN);
  for (const [base, f] of VARYING) {
    // the field's bits in its big-endian value of `size` bytes, cleared byte by byte
    const bits = fieldBits(f);
    for (let i = 0; i < f.size; i++) keep[base + f.at + i]! &= ~(bits >>> (8 * (f.size - 1 - i))) & 0xff;
  }
  const at: number[] = [], mask: number[] = [];
  for (let o = 0; o < keep.length; o += 4) {
    const m = (keep[o]! << 24) | (keep[o + 1]! << 16) | (keep[o + 2]! << 8) | keep[o + 3]!;
    if (m !== 0) { at.push(o); mask.push(m); }
  }
  return { WORD_AT: Int32Array.from(at), WORD_MASK: Int32Array.from(mask) };
})();
const WORDS = WORD_AT.length;

/** Where the slot's key is read: the IPv4 destination and the BTH word that ends with the QPN. */
const AT_DST = IP_AT + IPV4_FIELDS.dst.at;
const AT_QP = BTH_AT + BTH_FIELDS.destQp.at + BTH_FIELDS.destQp.size - 4;
const AT_OPCODE = BTH_AT + BTH_FIELDS.opcode.at;
/** The IPv4 protocol byte: every template holds UDP's there, so any other frame (TCP: most of a
 *  many-connections capture's frames) is turned away before the slot is computed. */
const AT_PROTO = IP_AT + IPV4_FIELDS.protocol.at;
const AT_IP_LEN = IP_AT + IPV4_FIELDS.totalLength.at;
const AT_UDP_LEN = UDP_AT + UDP_FIELDS.length.at;
const AT_PSN = BTH_AT + BTH_FIELDS.psn.at + BTH_FIELDS.psn.size - 4;
const QP_MASK = 2 ** (8 * BTH_FIELDS.destQp.size) - 1;
const PSN_MASK = 2 ** (8 * BTH_FIELDS.psn.size) - 1;

/** Flows remembered, direct-mapped by destination address and QP (a power of two). */
const SLOTS = 512;
/** The hash's top bits that index SLOTS. */
const SLOT_SHIFT = 32 - Math.log2(SLOTS);

function slotOf(dst: number, qp: number): number {
  return Math.imul(dst ^ Math.imul(qp & QP_MASK, 0x9e3779b1), 0x85ebca6b) >>> SLOT_SHIFT;
}

export class HeaderPrediction {
  /** The last predicted frame's numbers (predict()). */
  qpn = 0;
  psn = 0;
  payLen = 0;
  dst = '';
  /** Frames handled by take() (for tests and measurements). */
  taken = 0;
  /** The last frame take() handled was a WRITE (else an ACK). */
  wrote = false;
  /** Each slot's template words (masked), WORDS per slot. */
  private readonly tmpl = new Int32Array(SLOTS * WORDS);
  /** Each slot's destination address as the decoder wrote it (undefined: slot empty). */
  private readonly dsts: (string | undefined)[] = new Array<string | undefined>(SLOTS).fill(undefined);
  /** A DataView over the buffer of the frames (the reader's block: one per block, not per frame). */
  private ab: ArrayBufferLike | undefined = undefined;
  private dv: DataView<ArrayBufferLike> = new DataView(new ArrayBuffer(0));

  /** `icrc`: check the ICRC as the decoder would (FrameDecoderOptions.icrc). */
  constructor(private readonly icrc: boolean) {}

  /**
   * A frame of a predicted flow handled whole: numbered by the decoder and given to the
   * tracker's narrow entry. False: nothing was done, decode and feed it (then learn() it).
   */
  take(f: CapturedFrame, decoder: FrameDecoder, tracker: Tracker): boolean {
    const kind = this.predict(f);
    if (kind === 0 || !tracker.roceFast(this.dst, this.qpn, kind, this.psn, this.payLen, decoder.frames + 1, f.tsNs)) return false;
    decoder.skip();
    this.taken++;
    this.wrote = kind !== PREDICTED.ACK;
    return true;
  }

  /** The PREDICTED kind of a frame that matches its flow's template and whose varying fields
   *  would raise no issue (qpn, psn, payLen and dst then say the rest), else 0. */
  predict(f: CapturedFrame): number {
    const b = f.data;
    if (f.linktype !== LINKTYPE.ETHERNET || f.caplen !== f.origlen || b.length < MIN_LEN || b[AT_PROTO] !== IPPROTO_UDP) return 0;
    const dv = this.view(b), o = b.byteOffset;
    const slot = slotOf(dv.getInt32(o + AT_DST), dv.getInt32(o + AT_QP));
    const dst = this.dsts[slot];
    if (dst === undefined) return 0;
    const t = this.tmpl;
    for (let i = 0, k = slot * WORDS; i < WORDS; i++, k++) if ((dv.getInt32(o + WORD_AT[i]!) & WORD_MASK[i]!) !== t[k]) return 0;
    const kind = PREDICTED_KIND[b[AT_OPCODE]!]!;
    if (kind === 0) return 0;
    // the IP packet is the whole frame after Ethernet and the datagram the whole IP payload (no
    // trailer, no padding: the general path would note them), its header checksum is right
    const tl = dv.getUint16(o + AT_IP_LEN);
    if (tl !== b.length - IP_AT || dv.getUint16(o + AT_UDP_LEN) !== tl - IPV4_MIN_LEN || !ipv4ChecksumOk(b, IP_AT, IPV4_MIN_LEN)) return 0;
    const payLen = predictedBodyLength(b, BTH_AT, b.length, kind);
    if (payLen < 0 || (this.icrc && !icrcOkIpv4(b, IP_AT))) return 0;
    this.qpn = dv.getInt32(o + AT_QP) & QP_MASK;
    this.psn = dv.getInt32(o + AT_PSN) & PSN_MASK;
    this.payLen = payLen;
    this.dst = dst;
    return kind;
  }

  /** A frame the general path decoded: a clean RoCE v2 packet of a predicted kind on the plain
   *  stack becomes its flow's template. */
  learn(f: CapturedFrame, d: DecodedFrame): void {
    const r = d.roce;
    if (r === undefined || r.version !== 2 || PREDICTED_KIND[r.ib.bth.opcode] === 0 || d.issues.length !== 0) return;
    const b = f.data;
    if (f.linktype !== LINKTYPE.ETHERNET || f.caplen !== f.origlen || b.length < MIN_LEN) return;
    if (d.eth === undefined || d.eth.headerLength !== ETHERNET_LEN || d.ip === undefined || d.ip.version !== 4 || (d.ip.header as Ipv4Header).headerLength !== IPV4_MIN_LEN) return;
    const dv = this.view(b), o = b.byteOffset;
    const slot = slotOf(dv.getInt32(o + AT_DST), dv.getInt32(o + AT_QP));
    const t = this.tmpl;
    for (let i = 0, k = slot * WORDS; i < WORDS; i++, k++) t[k] = dv.getInt32(o + WORD_AT[i]!) & WORD_MASK[i]!;
    this.dsts[slot] = d.ip.dst;
  }

  private view(b: Uint8Array): DataView<ArrayBufferLike> {
    if (b.buffer !== this.ab) { this.ab = b.buffer; this.dv = new DataView(b.buffer); }
    return this.dv;
  }
}
