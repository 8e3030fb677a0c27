// A received IB packet as the QP reads it: views over the datagram's bytes (BTH, RETH, AETH
// from the wire layer's field tables), the opcode's facts, and where the payload is. One
// instance per engine is re-pointed per packet: nothing is allocated per packet.
//
// parse() rejects what the IB codec (decodeIbPacket) reports as an error — extension headers
// cut short, PadCnt beyond the payload, a payload on an opcode that has none — so the QP
// treats exactly the packets the codec calls malformed as malformed.

import { opcodeInfo, BTH_LEN, ICRC_LEN, IB_EXT_SIZE, type IbOpcodeInfo } from '../../../dissectors/wire/ib.js';
import { BthView, RethView, AethView, IMMDT_FIELDS } from '../../../dissectors/wire/views/ib.js';
import { u32 } from '../../../dissectors/wire/common.js';

const EMPTY = new Uint8Array(0);

export class RxPacket {
  readonly bth = new BthView();
  /** Valid when the opcode carries a RETH (RC: right after the BTH). */
  readonly reth = new RethView();
  /** Valid when the opcode carries an AETH (RC: right after the BTH). */
  readonly aeth = new AethView();
  buf: Uint8Array = EMPTY;
  info: IbOpcodeInfo = opcodeInfo(0);
  /** Payload bytes buf[payOff, payEnd) (pad and ICRC excluded). */
  payOff = 0;
  payEnd = 0;

  /** Point at one packet (BTH … ICRC) of an RC QP; false if it is malformed. */
  parse(buf: Uint8Array): boolean {
    const len = buf.length;
    if (len < BTH_LEN + ICRC_LEN) return false;
    this.buf = buf;
    const bth = this.bth;
    bth.reset(buf, 0, len);
    const info = (this.info = opcodeInfo(bth.opcode));
    const bodyEnd = len - ICRC_LEN;
    const o = BTH_LEN + info.headerLength;
    if (o > bodyEnd) return false;
    // RC extension headers: a RETH or an AETH is always the first one (IBA 9.3, table 38)
    this.reth.reset(buf, BTH_LEN, bodyEnd);
    this.aeth.reset(buf, BTH_LEN, bodyEnd);
    const avail = bodyEnd - o;
    let pad = bth.padCount;
    if (pad > avail) {
      if (info.payload) return false;
      pad = avail;
    }
    if (!info.payload && avail > 0) return false;
    this.payOff = o;
    this.payEnd = bodyEnd - pad;
    return true;
  }

  get payloadLength(): number { return this.payEnd - this.payOff; }
  /** ImmDt: the last extension header of every RC opcode that has one. */
  get immDt(): number { return u32(this.buf, this.payOff - IB_EXT_SIZE.ImmDt + IMMDT_FIELDS.immDt.at); }
}
