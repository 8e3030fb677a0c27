// A TCP segment's one-line text after its addresses (`Flags [S.], seq …, length 0`) written as
// bytes: the same text as net/tcp.ts writeTcpSummary (the reference; test/integration/linecache
// holds the two together on every frame), for the segments whose options are all of the kinds
// Linux sends (mss, wscale, sackOK, TS, nop, eol, the SMC option). Constant pieces are bytes made
// once, the flags' `Flags [S.]` one of 512 texts by bit, numbers digits: no string per segment.

import { summarizeTcpFlags, type TcpFlags, type TcpHeader, type TcpOption } from '../net/tcp.js';

/** Where the line is written: smcdump's output buffer (cli/output.ts Out), or a test's sink. */
export interface ByteLineSink {
  int(n: number): void;
  bytes(b: Uint8Array): void;
}

const ascii = new TextEncoder();
const SEQ = ascii.encode(', seq ');
const COLON = ascii.encode(':');
const ACK = ascii.encode(', ack ');
const WIN = ascii.encode(', win ');
const URG = ascii.encode(', urg ');
const OPTIONS = ascii.encode(', options [');
const COMMA = ascii.encode(',');
const CLOSE = ascii.encode(']');
const LENGTH = ascii.encode(', length ');
const NOP = ascii.encode('nop');
const EOL = ascii.encode('eol');
const MSS = ascii.encode('mss ');
const WSCALE = ascii.encode('wscale ');
const SACK_OK = ascii.encode('sackOK');
const TS_VAL = ascii.encode('TS val ');
const ECR = ascii.encode(' ecr ');
const SMC_R = ascii.encode('smc-r');
const SMC_D = ascii.encode('smc-d');

/** The flags as bits in FLAG_ORDER's order (an index into FLAG_TEXT). */
function flagBits(f: TcpFlags): number {
  return (f.fin ? 1 : 0) | (f.syn ? 2 : 0) | (f.rst ? 4 : 0) | (f.psh ? 8 : 0) | (f.ack ? 16 : 0)
    | (f.urg ? 32 : 0) | (f.ece ? 64 : 0) | (f.cwr ? 128 : 0) | (f.ae ? 256 : 0);
}

/** `Flags [S.]` for each of the 512 combinations, by the reference's own summarizeTcpFlags (made on first use). */
const FLAG_TEXT: (Uint8Array | undefined)[] = new Array<Uint8Array | undefined>(512).fill(undefined);
function flagText(f: TcpFlags, bits: number): Uint8Array {
  return (FLAG_TEXT[bits] ??= ascii.encode(`Flags [${summarizeTcpFlags(f)}]`));
}

/** Whether writeTcpLine() writes this option as the reference does (else the general path). */
function plainOption(o: TcpOption): boolean {
  switch (o.kind) {
    case 0: case 1: return true;
    case 2: return o.mss !== undefined;
    case 3: return o.wscale !== undefined;
    case 4: return !o.bytes;
    case 8: return o.tsVal !== undefined && o.tsEcr !== undefined;
    case 253: case 254: return o.exp !== undefined && o.exp.length === 6 && (o.exp.name === 'smc-r' || o.exp.name === 'smc-d');
    default: return false;
  }
}

/** Whether every option of the segment is one writeTcpLine() writes. */
export function tcpLinePlain(h: TcpHeader): boolean {
  const opts = h.options;
  for (let i = 0; i < opts.length; i++) if (!plainOption(opts[i]!)) return false;
  return true;
}

function writeOption(out: ByteLineSink, o: TcpOption): void {
  switch (o.kind) {
    case 0: out.bytes(EOL); return;
    case 1: out.bytes(NOP); return;
    case 2: out.bytes(MSS); out.int(o.mss!); return;
    case 3: out.bytes(WSCALE); out.int(o.wscale!); return;
    case 4: out.bytes(SACK_OK); return;
    case 8: out.bytes(TS_VAL); out.int(o.tsVal!); out.bytes(ECR); out.int(o.tsEcr!); return;
    default: out.bytes(o.exp!.name === 'smc-r' ? SMC_R : SMC_D);
  }
}

/**
 * writeTcpSummary(out, h, payloadLength, seq) for a segment tcpLinePlain() accepts, the
 * addresses left out: `Flags [.], seq 1:157, ack 1, win 502, options [nop,nop,TS val 1 ecr 2], length 156`.
 */
export function writeTcpLine(out: ByteLineSink, h: TcpHeader, payloadLength: number, seq: { seqBase: number; ackBase: number } | undefined): void {
  const f = h.flags;
  out.bytes(flagText(f, flagBits(f)));
  if (payloadLength > 0 || f.syn || f.fin || f.rst) {
    const s = seq !== undefined ? (h.seq - seq.seqBase) >>> 0 : h.seq;
    out.bytes(SEQ);
    out.int(s);
    if (payloadLength > 0) { out.bytes(COLON); out.int((s + payloadLength) >>> 0); }
  }
  if (f.ack) { out.bytes(ACK); out.int(seq !== undefined ? (h.ack - seq.ackBase) >>> 0 : h.ack); }
  out.bytes(WIN);
  out.int(h.window);
  if (f.urg) { out.bytes(URG); out.int(h.urgentPointer); }
  const opts = h.options;
  if (opts.length !== 0) {
    out.bytes(OPTIONS);
    for (let i = 0; i < opts.length; i++) {
      if (i !== 0) out.bytes(COMMA);
      writeOption(out, opts[i]!);
    }
    out.bytes(CLOSE);
  }
  out.bytes(LENGTH);
  out.int(payloadLength);
}
