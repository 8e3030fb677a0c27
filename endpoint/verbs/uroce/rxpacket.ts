// A received IB packet as the QP reads it: the fields of its BTH, RETH and AETH (read from the
// wire layer's field tables, each header in one call: views/ib.ts readBthRx, readReth,
// readAeth), the opcode's facts, and where the payload is. One instance per engine is
// re-pointed per packet: nothing is allocated per packet.
//
// parse() rejects what the IB codec (decodeIbPacket) reports as an error — extension headers
// cut short, PadCnt beyond the payload, a payload on an opcode that has none — so the QP
// treats exactly the packets the codec calls malformed as malformed.

import { opcodeInfo, BTH_LEN, ICRC_LEN, IB_EXT_SIZE, type IbOpcodeInfo } from '../../../dissectors/wire/ib.js';
import { RethView, IMMDT_FIELDS, readBthRx, readReth, readAeth } from '../../../dissectors/wire/views/ib.js';
import { u32 } from '../../../dissectors/wire/common.js';

const EMPTY = new Uint8Array(0);
/** For a RETH VA at or above 2^53 (readReth gives -1): the view's bigint getter. */
const rethView = new RethView();

export class RxPacket {
  // BTH (parse)
  opcode = 0;
  se = false;
  padCount = 0;
  ackReq = false;
  psn = 0;
  // RETH (readReth(), when the opcode carries one: RC puts it right after the BTH)
  /** The VA as a number; -1 when it is not exact (at or above 2^53: read rethVa). */
  va = 0;
  rkey = 0;
  dmaLen = 0;
  // AETH (readAeth(), on an ACKNOWLEDGE: right after the BTH)
  kindBits = 0;
  code = 0;
  msn = 0;

  buf: Uint8Array = EMPTY;
  info: IbOpcodeInfo = opcodeInfo(0);
  /** Payload bytes buf[payOff, payEnd) (pad and ICRC excluded). */
  payOff = 0;
  payEnd = 0;
  /** End of the headers and payload (the ICRC excluded). */
  bodyEnd = 0;

  /** Point at one packet (BTH … ICRC) of an RC QP; false if it is malformed. */
  parse(buf: Uint8Array): boolean {
    const len = buf.length;
    if (len < BTH_LEN + ICRC_LEN) return false;
    this.buf = buf;
    readBthRx(buf, 0, len, this);
    const info = (this.info = opcodeInfo(this.opcode));
    const bodyEnd = (this.bodyEnd = len - ICRC_LEN);
    const o = BTH_LEN + info.headerLength;
    if (o > bodyEnd) return false;
    const avail = bodyEnd - o;
    let pad = this.padCount;
    if (pad > avail) {
      if (info.payload) return false;
      pad = avail;
    }
    if (!info.payload && avail > 0) return false;
    this.payOff = o;
    this.payEnd = bodyEnd - pad;
    return true;
  }

  /** Read the RETH (RC: the first extension header) into va, rkey, dmaLen. */
  readReth(): void { readReth(this.buf, BTH_LEN, this.bodyEnd, this); }
  /** Read the AETH (the first extension header of an ACKNOWLEDGE) into kindBits, code, msn. */
  readAeth(): void { readAeth(this.buf, BTH_LEN, this.bodyEnd, this); }
  /** The RETH's VA as a bigint (any value; for what `va` cannot hold exactly, and messages). */
  get rethVa(): bigint { return rethView.reset(this.buf, BTH_LEN, this.bodyEnd).va; }

  get payloadLength(): number { return this.payEnd - this.payOff; }
  /** ImmDt: the last extension header of every RC opcode that has one. */
  get immDt(): number { return u32(this.buf, this.payOff - IB_EXT_SIZE.ImmDt + IMMDT_FIELDS.immDt.at); }
}
