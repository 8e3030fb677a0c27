// The allocation-light decode of the frames that make up most SMC-R traffic: RC RDMA WRITE
// (FIRST, MIDDLE, LAST, ONLY) and ACKNOWLEDGE over Ethernet II / IPv4 (no options) / UDP.
//
// The headers are read through the wire views (dissectors/wire/views/), re-pointed per frame,
// and written into ONE set of result objects owned by this class: the DecodedFrame it returns
// is the same object every time, valid until the next decode. Only callers that use a frame
// and drop it (smcdump's one-line, -q and --summary) may ask for it (FrameDecoder `reuse`).
//
// It takes only clean frames: every check the full decoders make is made here first, and a
// frame that would get any issue (bad checksum or ICRC, a trailer, odd lengths, reserved bits,
// snaplen cuts, VLAN tags, ...) returns null and goes the full way, so the result is always the
// one the full decoders give (test/integration/fastpath.test.ts compares them frame by frame).

import type { CapturedFrame } from '../capture/types.js';
import { LINKTYPE } from '../capture/types.js';
import type { DecodedFrame, RoceInfo } from './frame.js';
import { ETHERTYPE_IPV4, type EthernetHeader } from './net/ethernet.js';
import type { Ipv4Header } from './net/ipv4.js';
import type { UdpHeader } from './net/udp.js';
import type { Aeth, Bth, IbPacket, Reth } from './wire/ib.js';
import { icrcRoceV2Ipv4 } from './wire/ib.js';
import { macAt, ipv4At } from './net/addr.js';
import { EthernetView, Ipv4View, UdpView } from './wire/views/net.js';
import { AethView, BthView, RethView } from './wire/views/ib.js';

const ETH = 14;
const IP_OFF = 14;
const UDP_OFF = 34;
const BTH_OFF = 42;
/** Ethernet + IPv4 + UDP + BTH + ICRC. */
const MIN_LEN = BTH_OFF + 12 + 4;
const AETH_KINDS = ['ACK', 'RNR NAK', 'reserved', 'NAK'] as const;
const EMPTY = new Uint8Array(0);
const NONE: never[] = [];

export class FastPath {
  private readonly eth = new EthernetView();
  private readonly ip = new Ipv4View();
  private readonly udp = new UdpView();
  private readonly bth = new BthView();
  private readonly reth = new RethView();
  private readonly aeth = new AethView();

  // The result objects, filled per frame (every field present from the start: one shape).
  private readonly ethV: EthernetHeader = { dst: '', src: '', vlans: NONE, ethertype: ETHERTYPE_IPV4, headerLength: ETH };
  private readonly ipH: Ipv4Header = {
    version: 4, ihl: 5, dscp: 0, ecn: 0, totalLength: 0, id: 0, reservedFlag: false, dontFragment: false, moreFragments: false,
    fragmentOffset: 0, ttl: 0, protocol: 17, checksum: 0, src: '', dst: '', options: NONE, headerLength: 20, checksumStatus: 'ok',
  };
  private readonly udpH: UdpHeader = { srcPort: 0, dstPort: 0, length: 0, checksum: 0 };
  private readonly bthV: Bth = { opcode: 0, se: false, migReq: false, padCount: 0, tver: 0, pkey: 0, fecn: false, becn: false, resv6: 0, destQp: 0, ackReq: false, resv7: 0, psn: 0 };
  private readonly rethV: Reth = { va: 0n, rkey: 0, dmaLen: 0 };
  private readonly aethV: Aeth = { syndrome: 0, msn: 0, kind: 'ACK', code: 0 };
  // One IbPacket per header set, built in the order decodeIbPacket() builds its own (RETH or
  // AETH added after the common fields): the same hidden classes as the full path's objects,
  // so the tracker's and the renderers' property accesses stay monomorphic.
  private readonly ibPlain: IbPacket = { bth: this.bthV, payload: EMPTY, payloadOffset: 12, padCount: 0, icrc: 0 };
  private readonly ibReth: IbPacket = { bth: this.bthV, payload: EMPTY, payloadOffset: 12, padCount: 0, icrc: 0 };
  private readonly ibAeth: IbPacket = { bth: this.bthV, payload: EMPTY, payloadOffset: 12, padCount: 0, icrc: 0 };
  private readonly roce: RoceInfo = { version: 2, ib: this.ibPlain, icrc: 'ok' };
  private readonly out: DecodedFrame = {
    n: 0, tsNs: 0n, caplen: 0, origlen: 0, linktype: LINKTYPE.ETHERNET, ifIndex: 0,
    eth: this.ethV, link: undefined, ip: { version: 4, src: '', dst: '', header: this.ipH }, tcp: undefined, udp: this.udpH, tcpRole: undefined,
    payloadLength: 0, tcpData: undefined, roce: this.roce, smc: NONE, issues: NONE, tree: undefined, bytes: undefined,
  };

  constructor(private readonly rocePorts: ReadonlySet<number>, private readonly checkIcrc: boolean) {
    this.ibReth.reth = this.rethV;
    this.ibAeth.aeth = this.aethV;
  }

  /** The frame decoded (as frame `n`) when it is a clean RC WRITE/ACK; null: use the full decoders.
   *  One small method per layer: V8 inlines a view's getters into each of them (one function
   *  holding every getter of every layer runs out of its inlining budget and calls them). */
  decode(f: CapturedFrame, n: number): DecodedFrame | null {
    if (f.linktype !== LINKTYPE.ETHERNET || f.caplen !== f.origlen) return null;
    const b = f.data;
    const len = b.length;
    if (len < MIN_LEN || !this.cleanNet(b, len)) return null;
    const ext = this.cleanIb(b, len);
    if (ext < 0) return null;
    const icrc = (b[len - 4]! | (b[len - 3]! << 8) | (b[len - 2]! << 16) | (b[len - 1]! << 24)) >>> 0;
    if (this.checkIcrc && icrcRoceV2Ipv4(b, IP_OFF, len) !== icrc) return null;
    // Clean: fill the objects.
    const out = this.out;
    out.n = n; out.tsNs = f.tsNs; out.caplen = f.caplen; out.origlen = f.origlen; out.ifIndex = f.ifIndex;
    out.payloadLength = len - BTH_OFF;
    this.fillNet(b);
    this.fillIb(b, len, ext, icrc);
    return out;
  }

  /** Ethernet II untagged from a unicast source; IPv4 without options exactly filling the frame,
   *  no fragment, TTL > 0, checksum right; UDP to a RoCEv2 port, its length the IP payload. */
  private cleanNet(b: Uint8Array, len: number): boolean {
    if (this.eth.reset(b, 0).ethertype !== ETHERTYPE_IPV4 || (b[6]! & 1) !== 0 || b[IP_OFF] !== 0x45) return false;
    const ip = this.ip.reset(b, IP_OFF);
    const tl = ip.totalLength;
    if (tl !== len - ETH || ip.protocol !== 17 || (ip.flagsFragment & 0xbfff) !== 0 || ip.ttl === 0) return false;
    let acc = 0;
    for (let i = IP_OFF; i < IP_OFF + 20; i += 2) acc += (b[i]! << 8) | b[i + 1]!;
    while (acc > 0xffff) acc = (acc & 0xffff) + (acc >>> 16);
    if (acc !== 0xffff) return false;
    const udp = this.udp.reset(b, UDP_OFF);
    return this.rocePorts.has(udp.dstPort) && udp.length === tl - 20;
  }

  /** RC WRITE or ACK without reserved bits, lengths, pad and RETH/AETH as the full decoder wants
   *  them: the size of the extension header (0, 4, 16), or -1. */
  private cleanIb(b: Uint8Array, len: number): number {
    const bth = this.bth.reset(b, BTH_OFF);
    const op = bth.opcode;
    let ext: number;
    switch (op) {
      case 0x06: case 0x0a: ext = 16; break; // RETH
      case 0x07: case 0x08: ext = 0; break;
      case 0x11: ext = 4; break; // AETH
      default: return -1;
    }
    if (bth.tver !== 0 || bth.resv6 !== 0 || bth.resv7 !== 0) return -1;
    const bodyEnd = len - BTH_OFF - 4;
    const po = 12 + ext;
    if (po > bodyEnd) return -1;
    const avail = bodyEnd - po;
    const pad = bth.padCount;
    if (op === 0x11) {
      if (avail !== 0 || pad !== 0) return -1; // an ACK carries nothing
      const a = this.aeth.reset(b, BTH_OFF + 12);
      const kb = a.kindBits;
      if ((a.syndrome & 0x80) !== 0 || kb === 2 || (kb === 3 && a.code > 4)) return -1;
      return ext;
    }
    if (pad > avail || (avail & 3) !== 0) return -1;
    for (let i = BTH_OFF + bodyEnd - pad; i < BTH_OFF + bodyEnd; i++) if (b[i] !== 0) return -1;
    if (op === 0x0a && this.reth.reset(b, BTH_OFF + 12).dmaLen !== avail - pad) return -1;
    return ext;
  }

  private fillNet(b: Uint8Array): void {
    const e = this.ethV;
    e.dst = macAt(b, 0); e.src = macAt(b, 6);
    const ip = this.ip; // still on this frame (cleanNet)
    const h = this.ipH;
    h.dscp = ip.dscp; h.ecn = ip.ecn; h.totalLength = ip.totalLength; h.id = ip.id; h.dontFragment = ip.dontFragment;
    h.ttl = ip.ttl; h.checksum = ip.checksum; h.src = ipv4At(b, IP_OFF + 12); h.dst = ipv4At(b, IP_OFF + 16);
    const info = this.out.ip!;
    info.src = h.src; info.dst = h.dst;
    const udp = this.udp;
    const u = this.udpH;
    u.srcPort = udp.srcPort; u.dstPort = udp.dstPort; u.length = udp.length; u.checksum = udp.checksum;
  }

  private fillIb(b: Uint8Array, len: number, ext: number, icrc: number): void {
    const bth = this.bth; // still on this frame (cleanIb)
    const v = this.bthV;
    v.opcode = bth.opcode; v.se = bth.se; v.migReq = bth.migReq; v.padCount = bth.padCount; v.pkey = bth.pkey;
    v.fecn = bth.fecn; v.becn = bth.becn; v.destQp = bth.destQp; v.ackReq = bth.ackReq; v.psn = bth.psn;
    let ib: IbPacket;
    if (ext === 16) {
      const r = this.reth.reset(b, BTH_OFF + 12);
      const rv = this.rethV;
      rv.va = r.va; rv.rkey = r.rkey; rv.dmaLen = r.dmaLen;
      ib = this.ibReth;
    } else if (ext === 4) {
      const a = this.aeth;
      const av = this.aethV;
      av.syndrome = a.syndrome; av.msn = a.msn; av.kind = AETH_KINDS[a.kindBits]!; av.code = a.code;
      ib = this.ibAeth;
    } else {
      ib = this.ibPlain;
    }
    const po = 12 + ext;
    const bodyEnd = len - BTH_OFF - 4;
    const pad = v.padCount;
    ib.payload = bodyEnd > po ? b.subarray(BTH_OFF + po, BTH_OFF + bodyEnd - pad) : EMPTY;
    ib.payloadOffset = po;
    ib.padCount = pad;
    ib.icrc = icrc;
    this.roce.ib = ib;
    this.roce.icrc = this.checkIcrc ? 'ok' : 'unchecked';
  }
}
