// ICRC for packets that go through a UDP socket: the socket never shows the IP header, so the
// engine models it — the IPv4 + UDP header the kernel puts on the wire — and feeds that model
// to the project's ICRC (dissectors/wire/ib.ts icrcFromParts; masked fields are forced to
// ones there anyway).
//
// Sending: the engine's sockets use IP_PMTUDISC_DO, so Linux sends DF with IP ID 0 (see
// sockets.ts); the model is exact.
//
// Receiving: every field of the model is known (addresses, ports, lengths, DF) except the
// sender's IP Identification, which the ICRC covers but a UDP socket does not report. A peer
// like uroce sends ID 0 and is checked against the full 32-bit ICRC. Linux rxe picks IDs from
// the kernel's hashed counters (different for every packet). CRC-32 is affine, so the ID can
// be recovered from the ICRC itself: ICRC(id) = ICRC(0) xor L(id) with L linear in the 16 ID
// bits; solving L(id) = received xor ICRC(0) over GF(2) gives the one ID that makes the ICRC
// match, if any. The price is honesty about strength: for such senders 16 of the 32 check
// bits confirm the packet (a random corruption passes with probability 2^-16 instead of
// 2^-32), and the engine counts every recovered ID. A source that has been sending ID 0 is
// held to the exact check (no recovery) so uroce-to-uroce traffic keeps the full 32 bits.
//
// UDP GSO (a uroce sender on loopback): the packets of one GSO send carry IP IDs 0, 1, 2 …
// (the numbers the kernel gives the segments it cuts). A receiver with UDP_GRO gets the send
// whole and knows each packet's index, so it checks the full 32 bits against that ID (`hint`)
// and accepts nothing else from a source held to the exact check. A receiver without GRO gets
// the segments one by one: it accepts an ID of 1…63 found by the solve (verdict 'segment',
// counted; the source stays eligible for the exact check); a random corruption passes that
// with probability about 2^-26.

import { encodeIpv4, ipv4Header, IPPROTO_UDP } from '../../../dissectors/net/ipv4.js';
import { encodeUdp, udpHeader } from '../../../dissectors/net/udp.js';
import { crc32UpdateByte } from '../../../dissectors/wire/crc32.js';
import { icrcPrefix, icrcFromPrefix, readIcrc, ICRC_LEN, LRH_STANDIN, ROCE_V2_PORT } from '../../../dissectors/wire/ib.js';
import { IPV4_FIELDS, IPV4_MIN_LEN, Ipv4View, UDP_LEN, UdpView } from '../../../dissectors/wire/views/net.js';

/** IPv4 without options + UDP: what the kernel puts before each RoCEv2 packet it sends for us. */
const NET_LEN = IPV4_MIN_LEN + UDP_LEN;
/** Entries of a NetHeader's prefix table (a power of two). */
const PREFIX_SLOTS = 256;

/**
 * A 28-byte IPv4 + UDP header model (built with the project's codecs); `setLength()` patches the
 * two length fields for an IB packet of n bytes. TTL/TOS/checksums are what the kernel will
 * write (they are masked by the ICRC, kept right for taps/captures).
 */
export class NetHeader {
  readonly bytes: Uint8Array;
  constructor(readonly src: string, readonly dst: string, readonly srcPort: number, readonly dstPort = ROCE_V2_PORT,
    readonly ttl = 64, readonly tos = 0, readonly df = true) {
    const ip = encodeIpv4(ipv4Header({ src, dst, protocol: IPPROTO_UDP, payloadLength: UDP_LEN, ttl, dscp: tos >> 2, ecn: tos & 3, df, id: 0 }));
    const udp = encodeUdp(udpHeader({ srcPort, dstPort, payloadLength: 0 }));
    this.bytes = new Uint8Array(NET_LEN);
    this.bytes.set(ip, 0);
    this.bytes.set(udp, IPV4_MIN_LEN);
    this.ip = new Ipv4View().reset(this.bytes, 0);
    this.udp = new UdpView().reset(this.bytes, IPV4_MIN_LEN);
  }

  /** Views over `bytes` (../../../dissectors/wire/views/net.ts): the fields patched per packet. */
  private readonly ip: Ipv4View;
  private readonly udp: UdpView;

  /** Patch IP total length and UDP length for an IB packet (BTH … ICRC) of `ibLen` bytes. */
  setLength(ibLen: number): Uint8Array {
    this.ip.totalLength = NET_LEN + ibLen;
    this.udp.length = UDP_LEN + ibLen;
    return this.bytes;
  }

  /** CRC prefixes (icrcPrefix of this header) by IB length and IP ID, the only two fields that
   *  vary: a direct-mapped table (key = length × 64 + ID), no Map lookup per packet. */
  private readonly pKeys = new Int32Array(PREFIX_SLOTS).fill(-1);
  /** Int32 (the CRC's bits, as the CRC functions take them): a value read from a Uint32Array
   *  above 2^31 is a heap number when it crosses a call (~50 bytes per rr leg, round 13). */
  private readonly pVals = new Int32Array(PREFIX_SLOTS);

  /** ICRC of `ib` (BTH … ICRC slot) sent with this header and IP ID `id`. */
  icrc(ib: Uint8Array, id = 0): number {
    return icrcFromPrefix(this.prefix(ib.length, id), ib);
  }

  /** The CRC of everything the ICRC covers before an IB packet of `len` bytes sent with this
   *  header and IP ID `id` (icrcPrefix: the LRH stand-in, the masked IPv4 and UDP headers), as
   *  an int32; what the socket helper continues over the packet (round 14). */
  prefix(len: number, id = 0): number {
    const key = id < 64 ? len * 64 + id : -1;
    const slot = (key ^ (key >>> 9)) & (PREFIX_SLOTS - 1);
    let p: number;
    if (key >= 0 && this.pKeys[slot] === key) p = this.pVals[slot]!;
    else {
      this.setLength(len);
      if (id !== 0) this.ip.id = id;
      p = icrcPrefix('ipv4', this.bytes) | 0;
      if (id !== 0) this.ip.id = 0;
      if (key >= 0) { this.pKeys[slot] = key; this.pVals[slot] = p; }
    }
    return p;
  }
}

// ---------------------------------------------------------------------------------------
// IP ID recovery (GF(2) linear algebra on the CRC register)
// ---------------------------------------------------------------------------------------

/** Raw (no init/xorout) CRC register after one zero byte: r -> T[r & 0xff] ^ (r >>> 8),
 *  expressed through the project's CRC so there is one CRC implementation. */
function zeroByte(r: number): number { return ~crc32UpdateByte(~r >>> 0, 0) >>> 0; }
/** Raw register after one byte b from state 0: T[b]. */
function tableOf(b: number): number { return ~crc32UpdateByte(0xffffffff, b) >>> 0; }

function gf2Times(mat: Uint32Array, vec: number): number {
  let sum = 0;
  for (let i = 0; vec !== 0; i++, vec >>>= 1) if (vec & 1) sum ^= mat[i]!;
  return sum >>> 0;
}

/** ZPOW[j] = 32x32 matrix (column i = image of bit i) of feeding 2^j zero bytes. */
const ZPOW: Uint32Array[] = (() => {
  const out: Uint32Array[] = [];
  let m = new Uint32Array(32);
  for (let i = 0; i < 32; i++) m[i] = zeroByte((1 << i) >>> 0);
  for (let j = 0; j < 20; j++) {
    out.push(m);
    const sq = new Uint32Array(32);
    for (let i = 0; i < 32; i++) sq[i] = gf2Times(m, m[i]!);
    m = sq;
  }
  return out;
})();

/** Raw register state after feeding k zero bytes from state r. */
function advance(r: number, k: number): number {
  for (let j = 0; k !== 0; j++, k >>>= 1) if (k & 1) r = gf2Times(ZPOW[j]!, r);
  return r >>> 0;
}

/**
 * The IP ID that makes the ICRC of a packet match, given delta = received ICRC xor the ICRC
 * computed with ID 0, for an IB packet of `ibLen` bytes (incl. ICRC). undefined if none.
 */
export function solveIpId(delta: number, ibLen: number): number | undefined {
  if (delta === 0) return 0;
  // CRC input: the LRH stand-in (8 x 0xff), IPv4 header (with the ID), UDP, IB packet without its ICRC.
  const total = LRH_STANDIN + NET_LEN + ibLen - ICRC_LEN;
  const idLow = LRH_STANDIN + IPV4_FIELDS.id.at + IPV4_FIELDS.id.size - 1; // the ID's low byte in that input
  const kLow = total - idLow - 1;  // zero bytes after the ID's low byte
  const cols: number[] = [];
  for (let bit = 0; bit < 16; bit++) {
    const byteVal = 1 << (bit & 7);
    const k = bit < 8 ? kLow : kLow + 1;
    cols.push(advance(tableOf(byteVal), k));
  }
  // Gaussian elimination: pivots with the ID bits that make them.
  const pv: number[] = [], pm: number[] = [], pb: number[] = [];
  for (let i = 0; i < 16; i++) {
    let v = cols[i]!, m = 1 << i;
    for (let p = 0; p < pv.length; p++) if ((v >>> pb[p]!) & 1) { v = (v ^ pv[p]!) >>> 0; m ^= pm[p]!; }
    if (v !== 0) { pv.push(v); pm.push(m); pb.push(31 - Math.clz32(v & -v)); }
  }
  let d = delta >>> 0, id = 0;
  for (let p = 0; p < pv.length; p++) if ((d >>> pb[p]!) & 1) { d = (d ^ pv[p]!) >>> 0; id ^= pm[p]!; }
  return d === 0 ? id : undefined;
}

/** Per-source bookkeeping for the receive check. */
interface SourceState { zero: number; recovered: number; lastId: number }

export type IcrcVerdict = 'exact' | 'recovered' | 'segment' | 'bad';

/** IDs a GSO segment can carry (index in its send; the engine never puts more segments in one). */
const MAX_SEGMENT_ID = 63;

/** Receive-side ICRC check with ID recovery (see the header comment). */
export class IcrcChecker {
  private readonly sources = new Map<string, SourceState>();
  private readonly hdr = new Map<string, NetHeader>();
  /** After this many exact (ID 0) packets without any recovered one, a source gets no recovery. */
  strictAfter = 8;
  /** Accept GSO segment IDs (1…63) from such a source: set when the socket has no UDP_GRO. */
  segmentIds = true;
  lastId = 0;

  constructor(readonly local: string) {}

  private lastHdr: NetHeader | undefined;
  /** The last source's state (a Map lookup per packet otherwise); dropped with the map. */
  private lastSrc = '';
  private lastState: SourceState | undefined;

  private source(src: string): SourceState {
    let s = this.lastSrc === src ? this.lastState : this.sources.get(src);
    if (!s) {
      if (this.sources.size > 4096) { this.sources.clear(); this.lastState = undefined; this.lastSrc = ''; }
      s = { zero: 0, recovered: 0, lastId: -1 };
      this.sources.set(src, s);
    }
    this.lastSrc = src;
    this.lastState = s;
    return s;
  }

  /**
   * A packet from `src` whose ICRC the socket helper found exact for IP ID `id` (round 14: the
   * helper does the arithmetic, with prefixes from prefix() below): the bookkeeping check()
   * does for an exact packet, so the source's state is the same whoever computed the CRC.
   */
  exact(src: string, id: number): void {
    this.source(src).zero++;
    this.lastId = id;
  }

  /** The prefix (NetHeader.prefix) of a packet of `len` bytes from src:srcPort with IP ID `id`,
   *  sent to this checker's address: what the helper's receive table holds for that key. */
  prefix(src: string, srcPort: number, len: number, id: number): number {
    return this.header(src, srcPort).prefix(len, id);
  }

  private header(src: string, srcPort: number): NetHeader {
    const l = this.lastHdr;
    if (l && l.srcPort === srcPort && l.src === src) return l;
    const key = `${src}:${srcPort}`;
    let h = this.hdr.get(key);
    if (!h) {
      if (this.hdr.size > 4096) this.hdr.clear();
      h = new NetHeader(src, this.local, srcPort);
      this.hdr.set(key, h);
    }
    return (this.lastHdr = h);
  }

  /**
   * Check a received packet from src:srcPort. `hint`: the IP ID the packet should carry if it
   * came from a uroce-style sender (0, or its index in a GRO datagram).
   */
  check(pkt: Uint8Array, src: string, srcPort: number, hint = 0): IcrcVerdict {
    const h = this.header(src, srcPort);
    const got = readIcrc(pkt);
    const s = this.source(src);
    if (hint !== 0 && h.icrc(pkt, hint) === got) { s.zero++; this.lastId = hint; return 'exact'; }
    const c0 = h.icrc(pkt, 0);
    if (c0 === got) { s.zero++; this.lastId = 0; return 'exact'; }
    const id = solveIpId((c0 ^ got) >>> 0, pkt.length);
    if (id === undefined || id === 0) return 'bad';
    if (this.segmentIds && id <= MAX_SEGMENT_ID) { this.lastId = id; return 'segment'; }
    if (s.recovered === 0 && s.zero >= this.strictAfter) return 'bad';
    s.recovered++;
    s.lastId = id;
    this.lastId = id;
    return 'recovered';
  }
}
