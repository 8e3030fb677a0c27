// Frame decoding: link layer → IP → TCP/UDP → (TCP option 254, CLC by eyecatcher) or RoCE
// (v2 on UDP 4791 and configured ports, v1 on EtherType 0x8915) → BTH … → LLC / CDC / RDMA WRITE.
//
// One FrameDecoder per capture: it owns the cross-frame reassembly state (CLC per TCP direction,
// multi-packet SENDs per QP) and nothing else; correlation lives in the tracker. The decoded
// frame is a plain record that renderers print and the tracker annotates.

import type { CapturedFrame } from '../capture/types.js';
import { LINKTYPE } from '../capture/types.js';
import { type Issue, Tree, type FieldNode } from './wire/common.js';
import { blankEthernetHeader, decodeEthernetAt, ETHERTYPE_IPV4, ETHERTYPE_IPV6, type EthernetHeader } from './net/ethernet.js';
import { decodeSll, decodeSll2 } from './net/sll.js';
import { blankIpv4Header, decodeIpv4At, IPPROTO_TCP, IPPROTO_UDP, type Ipv4Header } from './net/ipv4.js';
import { decodeIpv6, type Ipv6Header } from './net/ipv6.js';
import { blankTcpHeader, decodeTcpAt, reusableTsOptions, type TcpHeader } from './net/tcp.js';
import { decodeUdpAt, type UdpHeader } from './net/udp.js';
import { summarizeTcpOpt, type TcpOpt } from './wire/tcpopt.js';
import { decodeClc, summarizeClc, type ClcMessage } from './wire/clc.js';
import { decodeLlc, summarizeLlc, type LlcMessage } from './wire/llc.js';
import { decodeCdc, summarizeCdc, type CdcMessage } from './wire/cdc.js';
import { IbPacketRecord, decodeIbPacketAt, decodeGrh, checkIcrc, icrcOk, opcodeInfo, ROCE_V2_PORT, ROCE_V1_ETHERTYPE, type IbPacket, type Grh } from './wire/ib.js';
import { ClcStreams, type SegmentRole } from './clcstream.js';
import { SendStreams, type SendPart } from './sendstream.js';
import { ETHERNET_LEN, IPV4_MIN_LEN, IPV6_LEN, SLL_LEN, SLL2_LEN, TCP_MIN_LEN, UDP_LEN, ipVersionAt } from './wire/views/net.js';

export type SmcProto = 'tcpopt' | 'clc' | 'llc' | 'cdc' | 'rdma' | 'roce';

/** One SMC-level item found in a frame (a frame may carry several: e.g. two CLC messages). */
export type SmcItem =
  | { proto: 'tcpopt'; value: TcpOpt; summary: string }
  | { proto: 'clc'; value: ClcMessage; summary: string; frames: number[] }
  | { proto: 'llc'; value: LlcMessage; summary: string; frames?: number[] }
  | { proto: 'cdc'; value: CdcMessage; summary: string };

export interface IpInfo { version: 4 | 6; src: string; dst: string; header: Ipv4Header | Ipv6Header }

export interface RoceInfo {
  version: 1 | 2;
  grh?: Grh;
  ib: IbPacket;
  /** ICRC verdict: 'ok', 'bad', or 'unchecked' (truncated frame). */
  icrc: 'ok' | 'bad' | 'unchecked';
}

export interface DecodedFrame {
  n: number;
  tsNs: bigint;
  caplen: number;
  origlen: number;
  linktype: number;
  ifIndex: number;
  eth?: EthernetHeader;
  /** Cooked-capture packet type etc. (SLL/SLL2), kept raw for the tree and JSON. */
  link?: { kind: 'sll' | 'sll2' | 'raw'; protocol: number };
  ip?: IpInfo;
  tcp?: TcpHeader;
  udp?: UdpHeader;
  /** Role of this TCP segment in CLC reassembly. */
  tcpRole?: SegmentRole;
  payloadLength: number;
  /** TCP application payload (not CLC) of this segment: a view of the frame, for --follow of fallbacks. */
  tcpData?: Uint8Array;
  roce?: RoceInfo;
  smc: SmcItem[];
  issues: Issue[];
  /** Field tree, only when the decoder was asked for it (-V). */
  tree?: FieldNode[];
  /** The frame bytes, only kept when a tree was asked for (for the hex dump). */
  bytes?: Uint8Array;
}

export interface FrameDecoderOptions {
  /** Extra UDP destination ports to decode as RoCEv2 (4791 is always on). */
  rocePorts?: Iterable<number>;
  /** Build the -V field tree and keep the frame bytes. */
  tree?: boolean;
  /** Verify ICRC (default true). */
  icrc?: boolean;
  /**
   * The caller keeps nothing of a decoded frame's layer records past the next decode(): the
   * Ethernet header, the IPv4 header and IP info, the TCP and UDP headers, the IB packet (its
   * BTH and AETH) and the RoCE v2 info are then one record each, refilled per frame, and the IB
   * payload is a view made only when read (IbPacketRecord). The frame itself, its issue and
   * item lists, SMC items and their messages, issues, TCP option lists (but the common NOP, NOP,
   * timestamps list, refilled), IPv6 records and other payload views are still made per frame
   * and may be kept. smcdump turns it on where only the
   * one-line/-q/--summary path sees frames (not -V, --json, the ladder, the report or the
   * endpoint comparison, which keep frames or their parts).
   */
  reuse?: boolean;
  /**
   * Write each SMC item's one-line `summary` (default true). With false every item's summary is
   * '' and the summarize functions never run: smcdump turns it off where nothing shows them (-q
   * and --summary without --json, the ladder or the report: the tracker and the tables never
   * read an item's summary), which saves their text per CLC/LLC/CDC and, as they are then never
   * hot, their optimizing compile at start-up.
   */
  summaries?: boolean;
}

/** The records a reusing decoder refills frame after frame (FrameDecoderOptions.reuse): numbers,
 *  long-lived strings and each other (an old object pointing at a new one costs V8's write
 *  barrier, which is why the frame record stays per frame). */
class Reused {
  readonly eth = blankEthernetHeader();
  readonly ipv4 = blankIpv4Header();
  readonly ip: IpInfo = { version: 4, src: '', dst: '', header: this.ipv4 };
  readonly udp: UdpHeader = { srcPort: 0, dstPort: 0, length: 0, checksum: 0 };
  /** Its options list is refilled for NOP, NOP, timestamps (most segments), else per segment. */
  readonly tcp = blankTcpHeader();
  readonly tcpTs = reusableTsOptions();
  readonly ib = new IbPacketRecord();
  /** RoCE v2 only (a v1 frame's GRH is per frame); grh declared for one shape. */
  readonly roce: RoceInfo = { version: 2, ib: this.ib, icrc: 'unchecked', grh: undefined };
}

export class FrameDecoder {
  private readonly rocePorts: Set<number>;
  private readonly wantTree: boolean;
  private readonly checkIcrc: boolean;
  /** Set when the caller asked for reuse (and no tree: a -V frame keeps its own records). */
  private readonly reused: Reused | undefined;
  /** FrameDecoderOptions.summaries. */
  private readonly summaries: boolean;
  private readonly clc = new ClcStreams();
  private readonly sends = new SendStreams();
  private n = 0;
  /** Bytes of the current frame missing from the capture (snaplen): lets the header codecs
   *  tell "cut by the capture" (a note) from "length field wrong" (an error). */
  private cut = 0;

  constructor(opts: FrameDecoderOptions = {}) {
    this.rocePorts = new Set([ROCE_V2_PORT, ...(opts.rocePorts ?? [])]);
    this.wantTree = opts.tree === true;
    this.checkIcrc = opts.icrc !== false;
    this.reused = opts.reuse === true && !this.wantTree ? new Reused() : undefined;
    this.summaries = opts.summaries !== false;
  }

  /** Frames numbered so far (decoded or skipped). */
  get frames(): number { return this.n; }

  /** Numbers a frame handled without decoding (header prediction, dissectors/predict.ts): it
   *  holds no TCP segment or SEND, so no reassembly state changes. Returns its number. */
  skip(): number { return ++this.n; }

  decode(f: CapturedFrame): DecodedFrame {
    const n = ++this.n;
    const b = f.data;
    this.cut = Math.max(0, f.origlen - f.caplen);
    // Every field present from the start: one object shape for all frames keeps V8's
    // property access monomorphic on the hot path.
    const out: DecodedFrame = {
      n, tsNs: f.tsNs, caplen: f.caplen, origlen: f.origlen, linktype: f.linktype, ifIndex: f.ifIndex,
      eth: undefined, link: undefined, ip: undefined, tcp: undefined, udp: undefined, tcpRole: undefined,
      payloadLength: 0, tcpData: undefined, roce: undefined, smc: [], issues: [], tree: undefined, bytes: undefined,
    };
    const t = this.wantTree ? new Tree(0) : undefined;
    if (t) { out.tree = t.nodes; out.bytes = b.slice(); }
    try {
      this.link(out, b, t);
    } catch (e) {
      // Decoders never throw by contract; this is the last line of defence so one bad
      // frame can never stop a replay. Reported as an issue, with the decoder's message.
      out.issues.push({ severity: 'error', code: 'internal', message: `decoder error: ${(e as Error).message}`, offset: 0, length: b.length });
    }
    if (f.caplen < f.origlen) {
      out.issues.push({ severity: 'note', code: 'frame.snaplen', message: `frame cut to ${f.caplen} of ${f.origlen} bytes by the capture's snaplen`, offset: f.caplen, length: 0 });
    }
    return out;
  }

  private link(out: DecodedFrame, b: Uint8Array, t: Tree | undefined): void {
    switch (out.linktype) {
      case LINKTYPE.ETHERNET: {
        // Ethernet starts the frame: its issues go straight onto the frame's list, offsets as they are
        const n0 = out.issues.length;
        const e = decodeEthernetAt(out.issues, b, t?.sub('Ethernet', 0, ETHERNET_LEN), this.reused?.eth);
        out.eth = e;
        fitLast(t, e.headerLength);
        if (truncatedError(out.issues, n0)) return;
        return this.ethertype(out, b, e.ethertype, e.headerLength, t);
      }
      case LINKTYPE.LINUX_SLL: {
        const r = decodeSll(b, t?.sub('Linux cooked capture v1', 0, SLL_LEN));
        push(out.issues, r.issues, 0);
        out.link = { kind: 'sll', protocol: r.value.protocol };
        return this.ethertype(out, b, r.value.protocol, r.value.headerLength, t);
      }
      case LINKTYPE.LINUX_SLL2: {
        const r = decodeSll2(b, t?.sub('Linux cooked capture v2', 0, SLL2_LEN));
        push(out.issues, r.issues, 0);
        out.link = { kind: 'sll2', protocol: r.value.protocol };
        return this.ethertype(out, b, r.value.protocol, r.value.headerLength, t);
      }
      case LINKTYPE.RAW:
      case LINKTYPE.IPV4:
      case LINKTYPE.IPV6: {
        const v = ipVersionAt(b, 0);
        out.link = { kind: 'raw', protocol: v === 6 ? ETHERTYPE_IPV6 : ETHERTYPE_IPV4 };
        return this.ethertype(out, b, v === 6 ? ETHERTYPE_IPV6 : ETHERTYPE_IPV4, 0, t);
      }
      default:
        out.issues.push({ severity: 'note', code: 'frame.linktype', message: `link type ${out.linktype} not decoded`, offset: 0, length: b.length });
    }
  }

  private ethertype(out: DecodedFrame, b: Uint8Array, type: number, off: number, t: Tree | undefined): void {
    if (type === ETHERTYPE_IPV4 || type === ETHERTYPE_IPV6) return this.ip(out, b, off, type === ETHERTYPE_IPV6 ? 6 : 4, t);
    if (type === ROCE_V1_ETHERTYPE) return this.roceV1(out, b, off, t);
  }

  private ip(out: DecodedFrame, b: Uint8Array, off: number, version: 4 | 6, t: Tree | undefined): void {
    let proto: number;
    let hlen: number;
    let plen: number; // upper-layer length according to the IP header
    if (version === 4) {
      // IPv4 and UDP/RoCE decode in place (offsets, no subarray view per layer: ~70 ns each)
      const r = this.reused;
      const h = r ? r.ipv4 : blankIpv4Header();
      const n0 = out.issues.length;
      decodeIpv4At(h, out.issues, b, off, t?.sub('IPv4', off, IPV4_MIN_LEN), Math.max(0, b.length - off) + this.cut);
      rebase(out.issues, n0, off);
      fitLast(t, h.headerLength);
      if (r) { const ip = r.ip; ip.src = h.src; ip.dst = h.dst; out.ip = ip; } else out.ip = { version: 4, src: h.src, dst: h.dst, header: h };
      proto = h.protocol; hlen = h.headerLength; plen = h.totalLength - h.headerLength;
      if (h.fragmentOffset !== 0 || h.moreFragments) return; // fragments: header only
    } else {
      const view = b.subarray(off);
      const r = decodeIpv6(view, t?.sub('IPv6', off, IPV6_LEN), view.length + this.cut);
      push(out.issues, r.issues, off);
      const h = r.value;
      fitLast(t, h.upperOffset);
      out.ip = { version: 6, src: h.src, dst: h.dst, header: h };
      proto = h.upperProtocol; hlen = h.upperOffset; plen = IPV6_LEN + h.payloadLength - h.upperOffset;
      if (h.fragment) return;
    }
    const l4 = off + hlen;
    if (l4 > b.length) return;
    // Trust the IP length over the capture (Ethernet padding), bounded by what was captured.
    const l4end = Math.min(b.length, l4 + Math.max(0, plen));
    if (proto === IPPROTO_TCP) this.tcp(out, b, l4, l4end, t);
    else if (proto === IPPROTO_UDP) this.udp(out, b, l4, l4end, off, t);
  }

  /** TCP at b[off, end) (end: the IP packet's end within the frame). */
  private tcp(out: DecodedFrame, b: Uint8Array, off: number, end: number, t: Tree | undefined): void {
    const n0 = out.issues.length;
    const h = decodeTcpAt(out.issues, b, off, end, t?.sub('TCP', off, TCP_MIN_LEN), end - off + this.cut, this.reused?.tcp, this.reused?.tcpTs);
    rebase(out.issues, n0, off);
    fitLast(t, h.headerLength);
    out.tcp = h;
    // Option 254/253 were decoded by the TCP codec (issues included); surface them as SMC items.
    const opts = h.options;
    for (let i = 0; i < opts.length; i++) {
      const x = opts[i]!.exp;
      if (x) out.smc.push({ proto: 'tcpopt', value: x, summary: this.summaries ? summarizeTcpOpt(x) : '' });
    }
    const poff = off + h.headerLength;
    const plen = poff <= end ? end - poff : 0;
    out.payloadLength = plen;
    const ip = out.ip!;
    const seg = this.clc.segment(ip.src, h.srcPort, ip.dst, h.dstPort, h.seq, h.flags.syn, h.flags.fin, h.flags.rst, b, poff, poff + plen, out.n);
    out.tcpRole = seg.role;
    if (seg.role === 'data' && plen > 0) out.tcpData = b.subarray(poff, poff + plen);
    const msgs = seg.messages;
    for (let i = 0; i < msgs.length; i++) {
      const m = msgs[i]!;
      const msgOff = m.offsetInFrame >= 0 ? poff + m.offsetInFrame : poff;
      const d = decodeClc(m.bytes, t && m.offsetInFrame >= 0 ? t.sub('SMC CLC', msgOff, m.bytes.length) : t?.sub('SMC CLC (reassembled)', poff, plen));
      // Issues of a reassembled message refer to the message; anchor them at the payload start.
      push(out.issues, d.issues, msgOff);
      out.smc.push({ proto: 'clc', value: d.value, summary: this.summaries ? summarizeClc(d.value) : '', frames: m.frames });
    }
  }

  /** UDP at b[off, end) (end: the IP packet's end within the frame). */
  private udp(out: DecodedFrame, b: Uint8Array, off: number, end: number, ipOff: number, t: Tree | undefined): void {
    const r = this.reused;
    const h: UdpHeader = r ? r.udp : { srcPort: 0, dstPort: 0, length: 0, checksum: 0 };
    let n0 = out.issues.length;
    decodeUdpAt(h, out.issues, b, off, end, t?.sub('UDP', off, UDP_LEN), end - off + this.cut);
    rebase(out.issues, n0, off);
    out.udp = h;
    const poff = off + UDP_LEN;
    out.payloadLength = Math.max(0, end - poff);
    if (h.dstPort !== ROCE_V2_PORT && !this.rocePorts.has(h.dstPort)) return;
    const ibTree = t?.sub('InfiniBand (RoCEv2)', poff, Math.max(0, end - poff));
    n0 = out.issues.length;
    const ib = decodeIbPacketAt(out.issues, b, poff, end, ibTree, r?.ib);
    rebase(out.issues, n0, poff);
    let icrc: RoceInfo['icrc'] = 'unchecked';
    if (this.checkIcrc && out.caplen >= out.origlen && ib.icrc !== undefined) {
      icrc = icrcOk(b, ipOff, 'v2') ? 'ok' : 'bad';
      if (icrc === 'bad') {
        const c = checkIcrc(b, ipOff, 'v2');
        out.issues.push({ severity: 'error', code: 'ib.icrc', message: `ICRC mismatch: wire 0x${(c.actual >>> 0).toString(16)}, computed 0x${(c.expected >>> 0).toString(16)}`, offset: end - 4, length: 4 });
      }
    }
    this.roce(out, 2, undefined, ib, icrc, poff, t);
  }

  private roceV1(out: DecodedFrame, b: Uint8Array, off: number, t: Tree | undefined): void {
    // decodeGrh adds its own 'GRH' node: give it a tree at the GRH's offset and adopt its nodes.
    const gt = t ? new Tree(off) : undefined;
    const g = decodeGrh(b.subarray(off), gt);
    if (t && gt) t.nodes.push(...gt.nodes);
    push(out.issues, g.issues, off);
    const poff = off + 40;
    if (poff > b.length) return;
    const n0 = out.issues.length;
    const ib = decodeIbPacketAt(out.issues, b, poff, b.length, t?.sub('InfiniBand (RoCE v1)', poff, b.length - poff));
    rebase(out.issues, n0, poff);
    out.payloadLength = b.length - poff;
    let icrc: RoceInfo['icrc'] = 'unchecked';
    if (this.checkIcrc && out.caplen >= out.origlen && ib.icrc !== undefined) {
      icrc = icrcOk(b, off, 'v1') ? 'ok' : 'bad';
      if (icrc === 'bad') {
        const c = checkIcrc(b, off, 'v1');
        out.issues.push({ severity: 'error', code: 'ib.icrc', message: `ICRC mismatch: wire 0x${(c.actual >>> 0).toString(16)}, computed 0x${(c.expected >>> 0).toString(16)}`, offset: b.length - 4, length: 4 });
      }
    }
    this.roce(out, 1, g.value, ib, icrc, poff, t);
  }

  /** SMC-R payload of a RoCE packet: LLC/CDC in SENDs (reassembled when multi-packet). */
  private roce(out: DecodedFrame, version: 1 | 2, grh: Grh | undefined, ib: IbPacket, icrc: RoceInfo['icrc'], ibOff: number, t: Tree | undefined): void {
    const info = opcodeInfo(ib.bth.opcode);
    const r = this.reused;
    if (r && version === 2) { const roce = r.roce; roce.icrc = icrc; out.roce = roce; } else {
      out.roce = { version, ib, icrc };
      if (grh) out.roce.grh = grh;
    }
    // SMC-R speaks only over RC queue pairs: UD/UC SENDs (e.g. ibv_ud_pingpong) are not LLC/CDC.
    if (!info.isSend || info.transport !== 'RC') return;
    const part: SendPart = info.isOnly ? 'only' : info.isFirst ? 'first' : info.isMiddle ? 'middle' : 'last';
    const dst = out.ip ? out.ip.dst : grh ? grh.dgid : '?';
    const s = this.sends.packet(dst, ib.bth.destQp, part, ib.bth.psn, ib.payload, out.n);
    if (s.problem === 'missing-first' || s.problem === 'psn-gap') {
      out.issues.push({ severity: 'warn', code: 'roce.send-reassembly', message: s.problem === 'psn-gap' ? 'multi-packet SEND abandoned: PSN gap' : 'SEND continuation without its FIRST packet', offset: ibOff, length: 12 });
    }
    const msg = s.message;
    if (!msg || msg.length === 0) return;
    const payloadOff = ibOff + (ib.payloadOffset ?? 12);
    const sub = t && !s.frames ? t.sub(msg[0] === 0xfe ? 'SMC-R CDC' : 'SMC-R LLC', payloadOff, msg.length) : t?.sub('SMC-R LLC (reassembled)', payloadOff, ib.payload.length);
    if (msg[0] === 0xfe) {
      const d = decodeCdc(msg, sub);
      push(out.issues, d.issues, payloadOff);
      out.smc.push({ proto: 'cdc', value: d.value, summary: this.summaries ? summarizeCdc(d.value) : '' });
    } else {
      const d = decodeLlc(msg, sub);
      push(out.issues, d.issues, payloadOff);
      const item: SmcItem = { proto: 'llc', value: d.value, summary: this.summaries ? summarizeLlc(d.value) : '' };
      if (s.frames) item.frames = s.frames;
      out.smc.push(item);
    }
  }
}

/** Header lengths vary (VLAN tags, IP/TCP options): size the layer node just added to what was decoded. */
function fitLast(t: Tree | undefined, length: number): void {
  const node = t?.nodes[t.nodes.length - 1];
  if (node && length > 0) node.length = length;
}

/** An error issue from `from` on saying the header was cut short (no closure per frame: this runs on every one). */
function truncatedError(issues: Issue[], from: number): boolean {
  for (let i = from; i < issues.length; i++) if (issues[i]!.severity === 'error' && issues[i]!.code.endsWith('truncated')) return true;
  return false;
}

/** Issues a codec pushed onto the frame's list since `from` carry offsets relative to its
 *  header: make them the frame's (they are the codec's own fresh objects). */
function rebase(issues: Issue[], from: number, by: number): void {
  if (by !== 0) for (let i = from; i < issues.length; i++) issues[i]!.offset += by;
}

function push(into: Issue[], from: Issue[], by: number): void {
  for (let i = 0; i < from.length; i++) {
    const x = from[i]!;
    into.push(by === 0 ? x : { severity: x.severity, code: x.code, message: x.message, offset: x.offset + by, length: x.length });
  }
}

/** Bit of each protocol in a frame's protocol mask (see frameProtoMask). */
export const PROTO_BIT: Readonly<Record<SmcProto, number>> = { tcpopt: 1, clc: 2, llc: 4, cdc: 8, rdma: 16, roce: 32 };

/** Which SMC protocols a frame shows, as a bit mask of PROTO_BIT (for `--only` and counters). */
export function frameProtoMask(d: DecodedFrame): number {
  let m = 0;
  for (let i = 0; i < d.smc.length; i++) m |= PROTO_BIT[d.smc[i]!.proto];
  if (d.roce) {
    m |= PROTO_BIT.roce;
    if (opcodeInfo(d.roce.ib.bth.opcode).isWrite) m |= PROTO_BIT.rdma;
  }
  return m;
}

