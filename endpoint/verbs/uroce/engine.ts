// The uroce engine: one per local IPv4 address. It owns the RoCEv2 receive socket (UDP 4791
// on that address), checks the ICRC of every packet it receives (bad = dropped and counted,
// as an RNIC does), demultiplexes by destination QPN, and is the single transmit path of its
// QPs: it puts the ICRC on every packet, applies fault injection (tests) and feeds the tap
// (pcap of everything the engine sent and received, as IPv4 frames).
//
// With the socket helper (native/uroce) the per-packet costs of a UDP socket are batched away
// (docs/uroce.md, "The fast path"): packets are built in a staging buffer per send socket and
// leave in sendmmsg(2) batches, runs of equal-size packets optionally as one UDP GSO send; the
// receive socket is read by the helper's recvmmsg loop (UDP_GRO on loopback), one JavaScript
// call per batch, and the QPs' ACKs are coalesced per batch. Since round 14 the helper also
// does the ICRC's arithmetic (icrcInHelper): each staged packet's prefix CRC (icrc.ts) goes
// with it as a job, the receive loop gives each packet a verdict; the rule stays here.

import type dgram from 'node:dgram';
import { BatchQueue, beginBatch, endBatch, microtask } from '../../microtask.js';
import { setIcrc, readIcrc, icrcFromPrefix, BTH_LEN, ICRC_LEN, IB_OP, ROCE_V2_PORT } from '../../../dissectors/wire/ib.js';
import { AETH_FIELDS, BTH_FIELDS as B, DEFAULT_PKEY, PKEY_MEMBERSHIP } from '../../../dissectors/wire/views/ib.js';
import { parseIpv4, u16, u24, u32 } from '../../../dissectors/wire/common.js';
import { encodeIpv4, ipv4Header, IPPROTO_UDP } from '../../../dissectors/net/ipv4.js';
import { encodeUdp, udpHeader } from '../../../dissectors/net/udp.js';
import { LINKTYPE, type CapturedFrame } from '../../../capture/types.js';
import type { CaptureWriter } from '../../../capture/writer.js';
import { IcrcChecker, type IcrcVerdict, type NetHeader } from './icrc.js';
import { FaultInjector, type FaultConfig } from './faults.js';
import { openSocket, openFd, errnoName, sockHelperError, loadSockHelper, helperIcrc, type SockHelper, type RxHandle } from './sockets.js';
import { ViewCache } from './views.js';
import { VerbsError } from '../types.js';

/** Busy polling's counters (UroceEngine.busyPollStats). */
export interface BusyPollStats {
  budgetUs: number; slices: number; batches: number; emptyPolls: number;
  /** Slices ended because the thread lost its CPU (each starts a 5 ms back-off). */
  preempted: number;
  /** Readable events the event path took during a back-off. */
  backedOff: number;
}

export interface EngineStats {
  rxPackets: number;
  rxBytes: number;
  txPackets: number;
  txBytes: number;
  /** Received packets whose ICRC did not match (dropped). */
  icrcErrors: number;
  /** Received packets whose sender's IP ID was recovered from the ICRC (not ID 0). */
  icrcIdRecovered: number;
  /** Too short, undecodable, not RC (dropped). */
  malformed: number;
  /** For a QPN that does not exist here (dropped). */
  unknownQp: number;
  /** From an address that is not the QP's peer (dropped). */
  badSource: number;
  /** P_Key not the default partition (dropped). */
  badPkey: number;
  /** Socket send errors (e.g. EMSGSIZE: path MTU above the link MTU). */
  txErrors: number;
  /** Datagrams handed to the kernel (a GSO send of n packets is one). */
  txDatagrams: number;
  /** Send system calls: sendmmsg(2) batches of the helper, single sends (a transmit flush is one
   *  when its datagrams fit one batch; a wake-up of the peer each, at most). */
  txSends: number;
  /** Datagrams read from the socket (a GRO datagram of n packets is one). */
  rxDatagrams: number;
  /** Native receive batches (JavaScript calls; 0 without the socket helper). */
  rxBatches: number;
  /** The native loop's second call per batch (after(): a flush deferred to the end of the
   *  batch's microtasks). Round 12: only batches whose reaction was not sent from the batch. */
  rxAfterCalls: number;
  /** Packets from a source held to the exact check whose ICRC matched an IP ID 1…63: a GSO
   *  segment the kernel cut for a socket without GRO (see icrc.ts). */
  icrcSegmentIds: number;
  /** Sent packets whose ICRC the socket helper computed (round 14; the rest: TypeScript). */
  icrcHelperTx: number;
  /** Received packets the socket helper found exact (ID 0, or the GRO segment's ID): the rest
   *  were checked in TypeScript (icrc.ts), as every packet without the helper's ICRC. */
  icrcHelperRx: number;
  /** Fault injection counters. */
  faultDropped: number;
  faultDuplicated: number;
  faultReordered: number;
  faultCorrupted: number;
}

function emptyEngineStats(): EngineStats {
  return {
    rxPackets: 0, rxBytes: 0, txPackets: 0, txBytes: 0, icrcErrors: 0, icrcIdRecovered: 0, malformed: 0,
    unknownQp: 0, badSource: 0, badPkey: 0, txErrors: 0, txDatagrams: 0, txSends: 0, rxDatagrams: 0, rxBatches: 0, rxAfterCalls: 0, icrcSegmentIds: 0, icrcHelperTx: 0, icrcHelperRx: 0, faultDropped: 0, faultDuplicated: 0, faultReordered: 0, faultCorrupted: 0,
  };
}

/** What the engine needs from a QP. */
export interface EngineQp {
  readonly qpNum: number;
  /** Peer address (valid from RTR on). */
  remoteIp: string;
  /** Called with every packet for this QPN that passed the engine's checks. */
  receive(buf: Uint8Array, srcIp: string): void;
  /** Send the coalesced ACK, if one is pending (end of a receive batch). */
  flushAck(): void;
}

export interface TxPort {
  sock: dgram.Socket | undefined;
  port: number;
  net: NetHeader;
  ttl: number;
  tos: number;
  /** Packets waiting for an asynchronous bind (only without the socket helper). */
  queue?: Uint8Array[];
  /** Socket fd when opened by the helper: transmits are staged and sent in sendmmsg(2) batches. */
  fd?: number;
  /** Staging buffer: this turn's packets back to back, built in place by the QP (txAlloc). */
  stage?: Uint8Array;
  /** Views over the stage handed out by txAlloc, reused by window (no view per packet). */
  stageViews?: ViewCache;
  stageW?: number;
  /** The packet txAlloc handed out last (at stage[txLastOff …], the end of the stage) until
   *  emit() stages it: compared by identity, not through the views' buffer getter (a C++ call). */
  txLast?: Uint8Array | undefined;
  txLastOff?: number;
  /** Datagram descriptors over the stage: (offset, length, GSO segment size) triples; from
   *  JOBS_AT on, the ICRC jobs for the helper (offset, length, prefix CRC), nJobs of them. */
  desc?: Int32Array;
  nDesc?: number;
  nJobs?: number;
  /** Destination of the staged packets (IPv4 as a number, and as text). */
  stageIp?: string;
  stageIpNum?: number;
  /** The kernel takes UDP_SEGMENT on this socket (checked once; cleared if a GSO send is refused). */
  gsoOk?: boolean;
  /** Open GSO run (the last descriptor): segment size, packets, bytes, end offset; ended by a shorter packet. */
  gSeg?: number;
  gCount?: number;
  gBytes?: number;
  gEnd?: number;
  gOpen?: boolean;
  /** Something was ever sent through dgram on this socket (its libuv queue may hold packets). */
  viaDgram?: boolean;
}

/**
 * A TxPort with every field present from the start, in one order: the engine reads a port's
 * fields per packet, and a port whose fields were added one by one (stage on first use, the
 * GSO run on the first packet) went through several hidden classes, so those reads were
 * polymorphic inline-cache calls in optimized code (round 11).
 */
export function newTxPort(sock: dgram.Socket | undefined, port: number, ttl: number, tos: number, net: NetHeader, fd: number | undefined): TxPort {
  return {
    sock, port, net, ttl, tos, queue: undefined, fd, stage: undefined, stageViews: undefined, stageW: 0, txLast: undefined, txLastOff: 0, desc: undefined, nDesc: 0, nJobs: 0,
    stageIp: undefined, stageIpNum: 0, gsoOk: false, gSeg: 0, gCount: 0, gBytes: 0, gEnd: 0, gOpen: false, viaDgram: false,
  };
}

type Tap = (frame: CapturedFrame) => void;

const EPOCH_NS = BigInt(Date.now()) * 1_000_000n - process.hrtime.bigint();

/** Staging buffer per send socket (bytes) and descriptors per flush. */
const STAGE_BYTES = 512 << 10;
/** Staged bytes after which a port is flushed at once instead of at the end of the turn, so
 *  that the receiver starts on the first packets while the rest are still being built. */
const FLUSH_AT = Number(process.env.UROCE_FLUSH_KB ?? 128) << 10;
/** Received bytes after which coalesced ACKs leave in the middle of a receive batch (the
 *  requester refills its window while this side is still placing data). */
const ACK_EVERY = Number(process.env.UROCE_ACK_KB ?? 128) << 10;
const MAX_DESC = 256;
/** ICRC jobs per flush for the helper (after them a packet's ICRC is computed here), and where
 *  they start in a port's descriptor array. */
const MAX_JOBS = 1024;
const JOBS_AT = 3 * MAX_DESC;
/** GSO limits: segments per send (the kernel's UDP_MAX_SEGMENTS is 64 before 6.x' 128) and the UDP payload limit. */
const GSO_MAX_SEGS = 64;
const GSO_MAX_BYTES = 65507;
/** Native receive: datagrams per recvmmsg(2) and slot size (a GRO datagram is at most 64 KiB). */
/** A/B switch for the transmit flush order (see scheduleFlush). */
const FLUSH_MICROTASK = process.env.UROCE_FLUSH_MICROTASK === '1';
const FLUSH_IMMEDIATE = process.env.UROCE_FLUSH_IMMEDIATE === '1';
/** Receive batches flush in the native loop's after() call (off in the two A/B modes above). */
const AFTER_BATCH = !FLUSH_MICROTASK && !FLUSH_IMMEDIATE;
/** A batch's reaction leaves from the batch's own call, after() only when something waits
 *  (round 12); UROCE_AFTER_ALWAYS=1: after() every batch (A/B). */
const ONE_CALL = AFTER_BATCH && process.env.UROCE_AFTER_ALWAYS !== '1';
/** A post from the batch's microtasks is flushed by a microtask queued behind it, not by
 *  after() (round 12); UROCE_AFTER_MICROTASK=0: after() (A/B). */
const FLUSH_IN_TURN = ONE_CALL && process.env.UROCE_AFTER_MICROTASK !== '0';
const RX_SLOTS = 32;
const RX_SLOT = 65536;
/** ICRC verdict cells per received datagram (its GRO segments; the kernel merges at most 64). */
const RX_VMAX = 64;
/** Entries of the helper's receive prefix table (a power of two; 16 bytes each). */
const RX_PREFIXES = 1024;

function ipNum(ip: string): number { return u32(parseIpv4(ip), 0); }

/** UROCE_BUSY_POLL=<µs>: the busy polling budget of engines opened without one (0 or unset: off). */
function envBusyPoll(): number {
  const v = process.env.UROCE_BUSY_POLL;
  return v === undefined || v.trim() === '' ? 0 : Number(v);
}

/** Busy polling yields the CPU after each empty poll (round 16); UROCE_BUSY_POLL_YIELD=0: pure
 *  polling (A/B). */
const SPIN_YIELD = process.env.UROCE_BUSY_POLL_YIELD !== '0';
/** UROCE_BUSY_POLL_BACKOFF_MS: how long polling stays off after a slice lost its CPU (A/B;
 *  default the helper's 5 ms, 0: never off). */
const SPIN_BACKOFF_MS = process.env.UROCE_BUSY_POLL_BACKOFF_MS ? Number(process.env.UROCE_BUSY_POLL_BACKOFF_MS) : undefined;

/** A busy polling budget as given (µs), or a VerbsError that says what one is. */
function checkBusyPoll(us: number): number {
  if (!Number.isFinite(us) || us < 0) throw new VerbsError('EINVAL', `uroce: busy poll budget ${us}: a number of µs >= 0 (0 = off; UROCE_BUSY_POLL=<µs>)`);
  return us;
}


export class UroceEngine {
  readonly stats: EngineStats = emptyEngineStats();
  private readonly qps = new Map<number, EngineQp>();
  private readonly checker: IcrcChecker;
  private sock: dgram.Socket | undefined;
  private taps: Tap[] = [];
  private faults: FaultInjector | undefined;
  private held: { port: TxPort; pkt: Uint8Array; ip: string } | undefined;
  private heldTimer: NodeJS.Timeout | undefined;
  private closed = false;
  /** True when packets leave with IP ID 0 (ICRC right on the wire). */
  exactIcrc = false;
  /** Receive buffer the kernel granted (bytes). */
  rcvbuf = 0;
  /**
   * The socket helper's batched paths: staged transmit in sendmmsg(2) batches and the native
   * receive loop (recvmmsg, one JavaScript call per batch). UROCE_NO_BATCH=1 turns both off
   * (dgram for everything, as without the helper; the helper still opens the sockets).
   */
  private readonly helper: SockHelper | undefined = process.env.UROCE_NO_BATCH === '1' ? undefined : loadSockHelper();
  /** Ports with staged packets: pendingPorts[0, nPorts). Counted, not emptied with length = 0
   *  or splice(0): that drops the array's backing store, and the next push allocates one again
   *  (per transmit flush and per receive batch, for one or two entries). */
  private readonly pendingPorts: Array<TxPort | undefined> = [];
  private nPorts = 0;
  private flushScheduled = false;
  /**
   * UDP GSO for runs of equal-size packets (see the constructor). Can be switched at any time;
   * takes effect with the next run of packets.
   */
  gso: boolean;
  /** Native receive loop (undefined: dgram 'message' path). */
  private rx: RxHandle | undefined;
  private rxBuf: Uint8Array | undefined;
  /** Views over rxBuf, one per received packet's window, reused (no view per packet). */
  private rxViews: ViewCache | undefined;
  private rxMeta: Int32Array | undefined;
  /**
   * The socket helper does the ICRC's arithmetic (round 14; sockets.ts helperIcrc): sent
   * packets get theirs in its sendPackets (jobs with the prefix computed here), received ones a
   * verdict in rxIcrc from its receive loop, which looks their prefix up in rxTable (filled
   * here, from icrc.ts). The rule — masks, header model, ID recovery, every verdict's policy —
   * stays in TypeScript; false: every ICRC computed here, as before.
   */
  icrcInHelper = false;
  private rxIcrc: Int32Array | undefined;
  private rxTable: Int32Array | undefined;
  /** True while a receive batch is being handled: ACKs are coalesced until its end. */
  inBatch = false;
  /** From a native receive batch until its after() call (its microtasks included): the
   *  transmit flush waits for after() instead of the check phase. */
  private rxTurn = false;
  /** The native loop calls afterBatch() (a helper built before round 7 does not: then every
   *  flush is a check-phase one, as before). */
  private afterOn = false;
  /**
   * Cells shared with the native loop (undefined: a helper built before round 12, after() every
   * batch and rxTurn above): turn[0] = 1 while a batch's call and its microtasks run (set and
   * cleared by the loop), turn[1] = 1 when a flush was deferred to after() in that turn (set
   * here, read and cleared by the loop, which skips after() without it).
   */
  private turn: Int32Array | undefined;
  /** True during the native loop's call for a batch (its end included), false in the
   *  microtasks that follow it: a flush asked for there is a microtask (see scheduleFlush). */
  private inCall = false;
  /** flushTurnFn is queued. */
  private turnFlushQueued = false;
  private readonly ackQps: Array<EngineQp | undefined> = [];
  /** What the receive batch running deferred (CQ notifications, CDC flushes): run at its end. */
  private readonly deferred = new BatchQueue();
  private nAcks = 0;
  private readonly ipTexts = new Map<number, string>();
  /** Busy polling budget in force (µs, 0 = off; see busyPollUs). */
  private spinUs = 0;
  /** Why busy polling was asked for and is not on ('' when it is, or was not asked for). */
  busyPollNote = '';
  /** busyPollStats() as it was when the engine closed. */
  private spinFinal: BusyPollStats | undefined;

  private constructor(readonly address: string, gso: boolean | undefined) {
    this.checker = new IcrcChecker(address);
    // GSO is off unless asked for (option gso, or UROCE_GSO=1): the kernel numbers the IP IDs
    // of the segments it cuts 0, 1, 2 … (the ICRCs are computed for that), but on loopback a
    // GSO send for a socket with UDP_GRO is never cut, so tcpdump or smcdump -i lo see one
    // super-datagram per run instead of RoCE packets; and on a real interface the IDs of
    // hardware-segmented packets are the NIC's business. UROCE_NO_GSO=1 forces it off.
    this.gso = process.env.UROCE_NO_GSO === '1' ? false : gso ?? process.env.UROCE_GSO === '1';
  }

  static async open(address: string, o: { rcvbuf?: number; faults?: FaultConfig; gso?: boolean; gro?: boolean; busyPollUs?: number } = {}): Promise<UroceEngine> {
    const busyPollUs = checkBusyPoll(o.busyPollUs ?? envBusyPoll());
    const e = new UroceEngine(address, o.gso);
    const sopts = { address, port: ROCE_V2_PORT, rcvbuf: o.rcvbuf ?? 4 << 20, sndbuf: 1 << 20 };
    const h = e.helper;
    if (h) {
      // The receive socket is read by the helper's loop, never by dgram.
      const fd = openFd(h, sopts);
      e.rxBuf = new Uint8Array(RX_SLOTS * RX_SLOT);
      e.rxViews = new ViewCache(e.rxBuf);
      e.rxMeta = new Int32Array(RX_SLOTS * 4);
      // GRO changes nothing on the wire or in a capture; it only lets a GSO send from a
      // loopback peer arrive whole. Elsewhere off (a NIC's GRO would merge a kernel peer's packets).
      const turn = ONE_CALL ? new Int32Array(2) : undefined;
      const icrc = helperIcrc(h);
      const vo = icrc ? new Int32Array(RX_SLOTS * RX_VMAX) : undefined;
      const table = icrc ? new Int32Array(4 * RX_PREFIXES).fill(-1) : undefined; // -1: no key has it
      const r = h.recvStart(fd, e.rxBuf, e.rxMeta, RX_SLOTS, RX_SLOT, o.gro ?? (e.gso || address.startsWith('127.')), (n) => e.onBatch(n), AFTER_BATCH ? () => e.afterBatch() : undefined, turn, vo, table);
      if (typeof r === 'number') { h.closeFd(fd); throw new Error(`uroce: native receive loop: ${errnoName(-r)}`); }
      e.rx = r;
      e.icrcInHelper = icrc;
      if (r.icrc === true) { e.rxIcrc = vo; e.rxTable = table; }
      e.afterOn = AFTER_BATCH && r.after === true;
      if (e.afterOn && r.turn === true) e.turn = turn;
      e.checker.segmentIds = !r.gro;
      e.exactIcrc = true;
      e.rcvbuf = Math.max(0, h.rcvbufOf(fd));
    } else {
      const s = await openSocket(sopts);
      e.sock = s.sock;
      e.exactIcrc = s.exact;
      try { e.rcvbuf = s.sock.getRecvBufferSize(); } catch { e.rcvbuf = 0; }
      s.sock.on('message', (m: Buffer, r: dgram.RemoteInfo) => {
        // A packet from the network never takes the process down: anything unexpected while
        // handling one is counted (malformed) and the packet dropped.
        e.stats.rxDatagrams++;
        try { e.onPacket(new Uint8Array(m.buffer, m.byteOffset, m.length), r.address, r.port, 0); } catch { e.stats.malformed++; }
      });
      s.sock.on('error', () => { e.stats.txErrors++; });
    }
    if (o.faults) e.faults = new FaultInjector(o.faults);
    if (busyPollUs > 0) e.busyPollUs = busyPollUs;
    return e;
  }

  /**
   * Busy polling (round 16; opt-in, like perftest's default CQ polling or SO_BUSY_POLL): after a
   * receive batch, and after a send outside one, the native receive loop polls the socket for
   * this many µs since the last packet instead of sleeping until the next one wakes it — the
   * epoll wake-up of each leg of a round trip traded for a core that polls. 0 = off (the
   * default: event-driven). Settable at run time; a build without the helper's receive loop (or
   * one older than round 16) keeps 0 and says why in busyPollNote.
   */
  get busyPollUs(): number { return this.spinUs; }
  set busyPollUs(us: number) {
    checkBusyPoll(us);
    const h = this.helper, rx = this.rx;
    this.busyPollNote = '';
    if (!h || !rx || this.closed || typeof h.recvBusyPoll !== 'function') {
      this.spinUs = 0;
      if (us > 0) this.busyPollNote = `uroce: busy polling needs the socket helper's receive loop (${!h ? sockHelperError() || 'UROCE_NO_BATCH=1' : !rx ? 'not in use' : this.closed ? 'engine closed' : 'helper built before round 16: rebuild native/uroce'})`;
      return;
    }
    const r = SPIN_BACKOFF_MS === undefined ? h.recvBusyPoll(rx, Math.round(us), SPIN_YIELD) : h.recvBusyPoll(rx, Math.round(us), SPIN_YIELD, SPIN_BACKOFF_MS);
    this.spinUs = r > 0 ? r : 0;
  }

  /** What busy polling did so far (undefined: the helper cannot poll): polling slices, the
   *  receive batches they delivered, polls that found nothing, slices ended because another
   *  thread took the CPU, readable events left to the event path while backing off after one
   *  (uroce_sock.c rx_spin). */
  busyPollStats(): BusyPollStats | undefined {
    const h = this.helper, rx = this.rx;
    if (!rx) return this.spinFinal;
    const v = h && typeof h.recvSpinStats === 'function' ? h.recvSpinStats(rx) : undefined;
    if (!Array.isArray(v)) return undefined;
    return { budgetUs: this.spinUs, slices: v[0] ?? 0, batches: v[1] ?? 0, emptyPolls: v[2] ?? 0, preempted: v[3] ?? 0, backedOff: v[4] ?? 0 };
  }

  /** Whether the receive path is the native batched one, and whether it gets GRO datagrams. */
  get rxMode(): 'batched+gro' | 'batched' | 'dgram' { return this.rx ? (this.rx.gro ? 'batched+gro' : 'batched') : 'dgram'; }

  /** Why the ICRC is not exact on the wire ('' when it is). */
  get icrcNote(): string {
    return this.exactIcrc ? '' : `uroce: ${sockHelperError()}; packets carry kernel-chosen IP IDs, so their ICRC is only right for another uroce (kernel RoCE peers will drop them)`;
  }

  setFaults(cfg: FaultConfig | undefined): void { this.faults = cfg ? new FaultInjector(cfg) : undefined; }

  register(qp: EngineQp): void { this.qps.set(qp.qpNum, qp); }
  unregister(qpn: number): void { this.qps.delete(qpn); }
  hasQp(qpn: number): boolean { return this.qps.has(qpn); }

  // -------------------------------------------------------------------------------------
  // Tap
  // -------------------------------------------------------------------------------------

  /** Call `fn` with every packet sent and received, as a raw IPv4 frame. Returns an unsubscribe. */
  tap(fn: Tap): () => void {
    this.taps.push(fn);
    return () => { this.taps = this.taps.filter((t) => t !== fn); };
  }

  /** Write every packet to a capture writer (LINKTYPE_RAW). Returns a detach function. */
  captureTo(w: CaptureWriter): () => void {
    return this.tap((f) => w.write(f));
  }

  private emitTap(src: string, dst: string, srcPort: number, ib: Uint8Array, ttl: number, tos: number, id: number): void {
    const ip = encodeIpv4(ipv4Header({ src, dst, protocol: IPPROTO_UDP, payloadLength: 8 + ib.length, ttl, dscp: tos >> 2, ecn: tos & 3, df: true, id }));
    const udp = encodeUdp(udpHeader({ srcPort, dstPort: ROCE_V2_PORT, payloadLength: ib.length }), ib, { src, dst });
    const data = new Uint8Array(ip.length + udp.length);
    data.set(ip, 0);
    data.set(udp, ip.length);
    const f: CapturedFrame = { data, caplen: data.length, origlen: data.length, tsNs: EPOCH_NS + process.hrtime.bigint(), linktype: LINKTYPE.RAW, ifIndex: 0 };
    for (const t of this.taps) t(f);
  }

  // -------------------------------------------------------------------------------------
  // Transmit
  // -------------------------------------------------------------------------------------

  /**
   * A buffer for one outgoing IB packet of `len` bytes (BTH … ICRC slot), to be filled and
   * given to transmit(). With the socket helper it is a view into the port's staging buffer
   * (no allocation; valid until transmit()); otherwise a new array.
   */
  txAlloc(port: TxPort, len: number): Uint8Array {
    const st = this.stageOf(port);
    if (!st || len > st.length) return new Uint8Array(len);
    if (port.stageW! + len > FLUSH_AT || port.nDesc! >= MAX_DESC) this.flushPort(port);
    const o = port.stageW!;
    port.stageW = o + len;
    const v = port.stageViews!.get(o, len);
    port.txLast = v;
    port.txLastOff = o;
    return v;
  }

  /** The port's staging buffer (made on first use), or undefined without the helper's batched path. */
  private stageOf(port: TxPort): Uint8Array | undefined {
    if (port.stage) return port.stage;
    if (port.fd === undefined || !this.helper || !port.sock) return undefined;
    port.desc = new Int32Array(JOBS_AT + 3 * MAX_JOBS);
    port.stageW = 0;
    port.nDesc = 0;
    port.gOpen = false;
    port.gsoOk = this.helper.gsoSupported(port.fd) === 1;
    port.stage = new Uint8Array(STAGE_BYTES);
    port.stageViews = new ViewCache(port.stage);
    return port.stage;
  }

  /**
   * Send one IB packet (BTH … ICRC slot) of a QP to its peer: faults, ICRC, socket, tap.
   * `pkt` is owned by the engine afterwards (best from txAlloc: then it is sent in place).
   */
  transmit(port: TxPort, pkt: Uint8Array, dstIp: string): void {
    if (this.closed) return;
    // send socket still binding (no helper): the ICRC needs its port, so wait for it
    if (!port.sock) { (port.queue ??= []).push(pkt); return; }
    const f = this.faults;
    if (!f) { this.emit(port, pkt, dstIp); return; }
    const op = pkt[B.opcode.at]!;
    const a = f.decide(u24(pkt, B.destQp.at), u24(pkt, B.psn.at), op, op === IB_OP.ACKNOWLEDGE || op === IB_OP.ATOMIC_ACKNOWLEDGE ? pkt[BTH_LEN + AETH_FIELDS.syndrome.at]! : 0);
    switch (a) {
      case 'drop': this.stats.faultDropped++; return;
      case 'duplicate': {
        this.stats.faultDuplicated++;
        const copy = pkt.slice();
        this.emit(port, pkt, dstIp);
        this.emit(port, copy, dstIp);
        break;
      }
      case 'reorder': {
        // held back (a copy: the staging buffer moves on) and sent after the next packet
        this.stats.faultReordered++;
        const prev = this.held;
        this.held = { port, pkt: pkt.slice(), ip: dstIp };
        if (prev) this.emit(prev.port, prev.pkt, prev.ip);
        if (!this.heldTimer) this.heldTimer = setTimeout(() => this.flushHeld(), 1);
        return;
      }
      case 'corrupt': case 'corruptPayload': {
        this.stats.faultCorrupted++;
        this.emit(port, pkt, dstIp, FaultInjector.flipIndex(pkt.length, a === 'corruptPayload', u24(pkt, B.psn.at)));
        break;
      }
      default: this.emit(port, pkt, dstIp); break;
    }
    if (this.held) {
      const h = this.held;
      this.held = undefined;
      this.emit(h.port, h.pkt, h.ip);
    }
  }

  private flushHeld(): void {
    this.heldTimer = undefined;
    const h = this.held;
    this.held = undefined;
    if (h && !this.closed) this.emit(h.port, h.pkt, h.ip);
  }

  /**
   * Put the ICRC on a packet and queue it. Staged: the packet joins the open GSO run if it
   * directly follows it with the same size (or is the shorter last one); its IP ID is then
   * its index in the run (the kernel numbers the segments it cuts 0, 1, 2 …), which the ICRC
   * covers. `flip`: index of a byte to corrupt after the ICRC (fault injection).
   */
  private emit(port: TxPort, pkt: Uint8Array, ip: string, flip = -1): void {
    const st = this.stats;
    st.txPackets++;
    st.txBytes += pkt.length;
    const stage = this.stageOf(port);
    if (stage && port.nDesc! > 0 && port.stageIp !== ip) this.flushPort(port);
    if (stage && pkt !== port.txLast) {
      // not the packet txAlloc handed out last (an ACK, a fault copy): copy it into the stage
      const c = this.txAlloc(port, pkt.length);
      c.set(pkt);
      pkt = c;
    }
    if (!stage || pkt !== port.txLast) { // no stage, or larger than it
      setIcrc(pkt, port.net.icrc(pkt, 0));
      if (flip >= 0) pkt[flip] = pkt[flip]! ^ 0x5a;
      this.sendDgram(port, pkt, ip);
      return;
    }
    port.txLast = undefined; // staged now: a second emit of it would be a copy
    const off = port.txLastOff!;
    const len = pkt.length;
    const d = port.desc!;
    let id = 0;
    if (port.gOpen && off === port.gEnd && len <= port.gSeg! && port.gCount! < GSO_MAX_SEGS && port.gBytes! + len <= GSO_MAX_BYTES) {
      id = port.gCount!;
      port.gCount = id + 1;
      port.gBytes = port.gBytes! + len;
      port.gEnd = off + len;
      const j = 3 * (port.nDesc! - 1) + 1;
      d[j] = d[j]! + len;
      if (len < port.gSeg!) port.gOpen = false;
    } else {
      const i = port.nDesc!;
      port.nDesc = i + 1;
      d[3 * i] = off;
      d[3 * i + 1] = len;
      const gso = this.gso && port.gsoOk === true;
      d[3 * i + 2] = gso ? len : 0;
      port.gSeg = len; port.gCount = 1; port.gBytes = len; port.gEnd = off + len;
      port.gOpen = gso;
    }
    const nj = port.nJobs!;
    if (this.icrcInHelper && flip < 0 && nj < MAX_JOBS && this.taps.length === 0) {
      // the helper puts the ICRC on it right before it is sent (a tap, or a fault that corrupts
      // the packet after its ICRC, sees or changes the final bytes: computed here for those)
      const j = JOBS_AT + 3 * nj;
      d[j] = off;
      d[j + 1] = len;
      d[j + 2] = port.net.prefix(len, id);
      port.nJobs = nj + 1;
      st.icrcHelperTx++;
    } else {
      setIcrc(pkt, port.net.icrc(pkt, id));
      if (flip >= 0) pkt[flip] = pkt[flip]! ^ 0x5a; // after the ICRC: the receiver must drop it
    }
    if (port.nDesc === 1 && id === 0) {
      if (port.stageIp !== ip) { port.stageIp = ip; port.stageIpNum = ipNum(ip); }
      this.pendingPorts[this.nPorts++] = port;
      // once the current JavaScript job is done: one sendmmsg(2) for the whole turn
      this.scheduleFlush();
    }
  }

  private sendDgram(port: TxPort, pkt: Uint8Array, ip: string): void {
    const s = port.sock;
    if (!s) return;
    this.stats.txDatagrams++;
    this.stats.txSends++;
    if (this.taps.length) this.emitTap(this.address, ip, port.port, pkt, port.ttl, port.tos, 0);
    port.viaDgram = true;
    try { s.send(pkt, ROCE_V2_PORT, ip); } catch { this.stats.txErrors++; }
  }

  private flushAll(): void {
    this.flushScheduled = false;
    if (this.nAcks && !this.inBatch) this.flushAcks(false);
    const ports = this.pendingPorts;
    try {
      for (let i = 0; i < this.nPorts; i++) {
        const p = ports[i]!;
        ports[i] = undefined;
        this.flushPort(p);
      }
    } finally {
      // emptied even if a tap threw: the list never keeps a port it no longer holds
      for (let i = 0; i < this.nPorts; i++) ports[i] = undefined;
      this.nPorts = 0;
    }
    // busy polling: a send outside a receive batch's call and turn (a request from a timer, the
    // first of a test) starts the poll for its answer; in a batch the loop polls anyway
    if (this.spinUs !== 0 && !this.inCall && this.turn?.[0] !== 1) this.helper!.recvSpin!(this.rx!);
  }

  /** Send what a port has staged (also before its socket is closed). */
  flushPort(port: TxPort): void {
    const n = port.nDesc ?? 0;
    const stage = port.stage;
    let nj = port.nJobs ?? 0;
    port.nDesc = 0;
    port.nJobs = 0;
    port.stageW = 0;
    port.txLast = undefined;
    port.gOpen = false;
    if (!n || !stage || !port.sock) return;
    const d = port.desc!;
    const ip = port.stageIp!;
    // The helper's ICRC jobs run in its first sendPackets call; here instead when a tap is to see
    // the packets first (one added since they were staged) or dgram's queue goes first.
    if (nj > 0 && (this.taps.length !== 0 || (port.viaDgram === true && port.sock.getSendQueueCount() !== 0))) {
      this.icrcJobs(d, stage, nj);
      nj = 0;
    }
    if (this.taps.length) {
      for (let i = 0; i < n; i++) {
        const seg = d[3 * i + 2]! || d[3 * i + 1]!;
        for (let o = d[3 * i]!, end = o + d[3 * i + 1]!, id = 0; o < end; o += seg, id++) {
          this.emitTap(this.address, ip, port.port, stage.subarray(o, Math.min(end, o + seg)), port.ttl, port.tos, id);
        }
      }
    }
    let i = 0;
    try {
      // Node's own queue (after an EAGAIN) goes first, so packets never overtake each other.
      // A port that never sent through dgram has nothing there (no call into libuv to ask).
      while (i < n && (port.viaDgram !== true || port.sock.getSendQueueCount() === 0)) {
        const r = nj > 0
          ? this.helper!.sendPackets(port.fd!, port.stageIpNum!, ROCE_V2_PORT, stage, d, n, nj, JOBS_AT)
          : this.helper!.sendPackets(port.fd!, port.stageIpNum!, ROCE_V2_PORT, stage, i === 0 ? d : d.subarray(3 * i), n - i);
        // (a call that failed may have refused the jobs: then they are done here, the same bytes)
        if (nj > 0 && r < 0) this.icrcJobs(d, stage, nj);
        nj = 0;
        this.stats.txSends++;
        if (r > 0) {
          this.stats.txDatagrams += r;
          i += r;
          continue;
        }
        if (r === 0) break; // EAGAIN: the rest through dgram's queue
        // The first descriptor failed. A GSO send the kernel refuses: no more GSO on this
        // port, its packets go one by one. Anything else (EMSGSIZE: path MTU above the link
        // MTU) is counted and that datagram dropped, never fragmented.
        if (d[3 * i + 2]! > 0 && d[3 * i + 2]! < d[3 * i + 1]! && ['EINVAL', 'EIO', 'ENOPROTOOPT', 'EOPNOTSUPP'].includes(errnoName(-r))) {
          port.gsoOk = false;
          this.sendSingles(port, stage, d, i, i + 1, ip, true);
        } else this.stats.txErrors++;
        i++;
      }
      if (i < n) this.sendSingles(port, stage, d, i, n, ip, false);
    } catch {
      this.stats.txErrors++; // socket already closed (QP destroyed)
    }
  }

  /** The ICRC jobs staged for the helper, computed here (the same prefix, the one ICRC). */
  private icrcJobs(d: Int32Array, stage: Uint8Array, nj: number): void {
    this.stats.icrcHelperTx -= nj; // counted when staged: these got theirs here after all
    for (let k = 0, j = JOBS_AT; k < nj; k++, j += 3) {
      const pkt = stage.subarray(d[j]!, d[j]! + d[j + 1]!);
      setIcrc(pkt, icrcFromPrefix(d[j + 2]!, pkt));
    }
  }

  /**
   * Descriptors [from, to) one datagram at a time: through the helper when `direct`, else via
   * dgram's queue (copies: the stage is reused). A GSO segment sent alone leaves with IP ID 0,
   * so its ICRC is moved from ID k to ID 0 (CRC is affine: the change does not depend on the
   * bytes, so an injected corruption stays a corruption).
   */
  private sendSingles(port: TxPort, stage: Uint8Array, d: Int32Array, from: number, to: number, ip: string, direct: boolean): void {
    const one = new Int32Array(3);
    for (let i = from; i < to; i++) {
      const seg = d[3 * i + 2]! || d[3 * i + 1]!;
      for (let o = d[3 * i]!, end = o + d[3 * i + 1]!, id = 0; o < end; o += seg, id++) {
        const l = Math.min(end, o + seg) - o;
        const pkt = stage.subarray(o, o + l);
        if (id !== 0) setIcrc(pkt, (readIcrc(pkt) ^ port.net.icrc(pkt, id) ^ port.net.icrc(pkt, 0)) >>> 0);
        if (direct) {
          one[0] = o; one[1] = l; one[2] = 0;
          const r = this.helper!.sendPackets(port.fd!, port.stageIpNum!, ROCE_V2_PORT, stage, one, 1);
          this.stats.txSends++;
          if (r === 1) { this.stats.txDatagrams++; continue; }
          if (r < 0) { this.stats.txErrors++; continue; }
        }
        this.stats.txDatagrams++;
        this.stats.txSends++;
        port.viaDgram = true;
        port.sock!.send(pkt.slice(), ROCE_V2_PORT, ip);
      }
    }
  }

  /** A send socket finished binding asynchronously: send what waited (ICRC, faults, socket). */
  flushQueued(port: TxPort, dstIp: string): void {
    const q = port.queue;
    port.queue = undefined;
    if (!q) return;
    for (const p of q) this.transmit(port, p, dstIp);
  }

  // -------------------------------------------------------------------------------------
  // Receive
  // -------------------------------------------------------------------------------------

  private ipText(n: number): string {
    let s = this.ipTexts.get(n);
    if (s === undefined) {
      if (this.ipTexts.size > 4096) this.ipTexts.clear();
      s = `${n >>> 24}.${(n >>> 16) & 255}.${(n >>> 8) & 255}.${n & 255}`;
      this.ipTexts.set(n, s);
    }
    return s;
  }

  /** One batch from the native receive loop: n datagrams (GRO ones cut into their packets). */
  private onBatch(n: number): void {
    const meta = this.rxMeta!, views = this.rxViews!, st = this.stats, vo = this.rxIcrc;
    st.rxBatches++;
    this.inBatch = true;
    this.inCall = true;
    beginBatch(this.deferred);
    this.rxTurn = this.afterOn;
    let sinceAck = 0;
    try {
      for (let i = 0; i < n; i++) {
        const len = meta[4 * i]!, seg = meta[4 * i + 3]!;
        st.rxDatagrams++;
        if (sinceAck >= ACK_EVERY && this.nAcks) { sinceAck = 0; this.flushAcks(true); }
        sinceAck += len;
        if (len < 0) { st.rxPackets++; st.malformed++; continue; } // larger than a slot: not RoCE
        const srcNum = meta[4 * i + 1]!, src = this.ipText(srcNum >>> 0), port = meta[4 * i + 2]!;
        const base = i * RX_SLOT;
        // the helper's ICRC verdict per packet (0 without its ICRC: checked here)
        const vAt = i * RX_VMAX;
        if (seg > 0 && len > seg) {
          for (let o = 0, k = 0; o < len; o += seg, k++) {
            const v = vo !== undefined && k < RX_VMAX ? vo[vAt + k]! : 0;
            // A packet from the network never takes the process down: anything unexpected
            // while handling one is counted (malformed) and the packet dropped.
            try { this.onPacket(views.get(base + o, Math.min(len - o, seg)), src, port, k, v, srcNum); } catch { st.malformed++; }
          }
        } else {
          try { this.onPacket(views.get(base, len), src, port, 0, vo !== undefined ? vo[vAt]! : 0, srcNum); } catch { st.malformed++; }
        }
      }
    } finally {
      this.inBatch = false;
      // the batch's completion notifications, now that every packet of it is handled (what
      // their microtasks did first thing after the batch before), and what they deferred in
      // turn: the CDC flush of a write the application made in its 'data' handler
      endBatch(this.deferred);
      // The batch's ACKs are built in the transmit flush, after the application has reacted
      // to the completions (microtasks): requests it posts go first, the ACK (a shorter packet)
      // then ends their GSO run, so a request and the ACK leave as one datagram — one wake-up
      // of the peer instead of two. The ACK still leaves before any completion of this batch
      // can lead to anything else (destroy_qp flushes it first).
      if (this.nAcks) this.scheduleFlush();
      // Something was posted in the batch (a reaction written synchronously: an echo's answer,
      // a consumer update, the next CDC of a stream): it leaves now with the batch's ACKs, in
      // one sendmmsg(2) as after() would have sent it, and the native loop skips after() (the
      // turn's flag is cleared: nothing waits). A batch that only owes ACKs keeps them flagged
      // for after(): an answer written from a promise continuation (a microtask after this
      // call) then takes them along from its flush microtask (scheduleFlush), and after() is
      // skipped again; with no answer in the turn, after() sends them.
      const turn = this.turn;
      try {
        if (turn !== undefined && this.flushScheduled && this.nPorts > 0) {
          this.flushAll();
          turn[1] = 0;
        }
      } finally {
        this.inCall = false;
      }
    }
  }

  /**
   * The native loop calls this after each receive batch, once the microtasks the batch led to
   * have run: what the application posted in reaction (an answer) and the batch's ACKs leave
   * now, in the same sendmmsg(2) as with a check-phase flush but without going back into the
   * event loop first (poll phase, check phase, Node's immediate queue: rr p50 2-5 µs lower per
   * round trip, docs/uroce.md round 7).
   */
  afterBatch(): void {
    this.stats.rxAfterCalls++;
    this.rxTurn = false;
    // (with the shared cells the loop ended the turn: turn[0] is 0 already)
    if (this.flushScheduled) this.flushAll();
  }

  private scheduleFlush(): void {
    const turn = this.turn;
    if (this.flushScheduled) {
      // the batch's ACKs wait for after() (flagged at its end): a post in the batch's
      // microtasks sends them with it (below)
      if (turn !== undefined && !this.inCall && !this.turnFlushQueued && turn[0] === 1 && FLUSH_IN_TURN) this.queueTurnFlush();
      return;
    }
    this.flushScheduled = true;
    // inside a receive batch's turn: afterBatch() flushes (flagged for the loop, which calls
    // it only when flagged)
    if (turn !== undefined ? turn[0] === 1 : this.rxTurn) {
      if (turn === undefined) return;
      // In the batch's call the batch's end sends (or leaves the ACKs to after(), flagged).
      // In the microtasks after it (an answer written from a promise continuation: its CDC
      // flush, a microtask, posted this), a microtask queued behind the post sends it with the
      // batch's ACKs — what after() would send, without the loop's second call into
      // JavaScript; it clears the flag, so the loop skips after(). A post later in the same
      // microtasks queues another. Round 3's two sends per answer came from a microtask flush
      // queued before the answer existed (between the CQ notification and the CDC flush); the
      // notification now runs in the batch's call, and this one is queued by the post itself.
      if (this.inCall || !FLUSH_IN_TURN) turn[1] = 1;
      else this.queueTurnFlush();
      return;
    }
    // Outside a receive batch (a write from a timer, another socket, a promise): process.nextTick,
    // which Node runs once the microtask queue is empty — after the CDC layer's flush (itself a
    // microtask queued by the socket write) and whatever else the current job led to. It is
    // called from inside that microtask, so it does not overtake it; a flush scheduled from
    // plain synchronous code runs when that code returns. Not a microtask: a microtask flush ran
    // between the CQ notification and the CDC flush (two sendmmsg per answer, round 3). Not
    // setImmediate (rounds 3-6): that is one more pass through the event loop (poll phase,
    // check phase, Node's immediate queue) before the first packet of an idle connection's
    // request leaves. A/B: UROCE_FLUSH_IMMEDIATE=1 (check phase for everything, as rounds 3-6),
    // UROCE_FLUSH_MICROTASK=1 (a microtask for everything, as before round 3).
    if (FLUSH_MICROTASK) queueMicrotask(this.flushAllFn);
    else if (FLUSH_IMMEDIATE || (this.rx && !this.afterOn)) setImmediate(this.flushAllFn);
    else process.nextTick(this.flushAllFn);
  }
  private readonly flushAllFn = (): void => this.flushAll();
  private queueTurnFlush(): void {
    this.turnFlushQueued = true;
    microtask(this.flushTurnFn);
  }
  /** The microtask flush of a post made in a batch's microtasks: after() is not needed then. */
  private readonly flushTurnFn = (): void => {
    this.turnFlushQueued = false;
    if (this.turn !== undefined) this.turn[1] = 0;
    if (this.flushScheduled) this.flushAll();
  };

  /** Send the coalesced ACKs; `now`: hand them to the kernel at once (mid-batch). */
  private flushAcks(now: boolean): void {
    const q = this.ackQps;
    for (let i = 0; i < this.nAcks; i++) {
      const qp = q[i]!;
      q[i] = undefined;
      try { qp.flushAck(); } catch { this.stats.malformed++; }
    }
    this.nAcks = 0;
    if (now) this.flushAll();
  }

  /** A QP has an ACK to send with this turn's transmit flush (coalescing). */
  deferAck(qp: EngineQp): void {
    if (!this.ackDeferred(qp)) this.ackQps[this.nAcks++] = qp;
  }

  /** Whether a QP's ACK waits for the transmit flush. */
  ackDeferred(qp: EngineQp): boolean {
    for (let i = 0; i < this.nAcks; i++) if (this.ackQps[i] === qp) return true;
    return false;
  }

  /**
   * One IB packet (BTH … ICRC) from src:port. `segment` = its index in a GRO datagram (the IP
   * ID a GSO sender gave it), 0 for a datagram of its own. `verdict`: the socket helper's on its
   * ICRC (uroce_sock.c rx_verdict): 1 exact for ID `segment`, 2 exact for ID 0; 0 none, and
   * below 0 none for want of the prefix, which it asks for (-1 - 2 × table entry - [ID 0]);
   * `srcNum` the source address as the helper gave it (its table's key).
   */
  private onPacket(buf: Uint8Array, src: string, srcPort: number, segment: number, verdict = 0, srcNum = 0): void {
    const st = this.stats;
    st.rxPackets++;
    st.rxBytes += buf.length;
    if (buf.length < BTH_LEN + ICRC_LEN) { st.malformed++; return; }
    let v: IcrcVerdict;
    if (verdict > 0) {
      // exact: the source's bookkeeping as check() keeps it; recovery, segment IDs and the
      // policy are for the packets below only
      this.checker.exact(src, verdict === 1 ? segment : 0);
      st.icrcHelperRx++;
      v = 'exact';
    } else {
      v = this.checker.check(buf, src, srcPort, segment);
      if (verdict < 0) this.fillPrefix(verdict, buf.length, src, srcPort, srcNum, segment);
    }
    if (this.taps.length) this.emitTap(src, this.address, srcPort, buf, 64, 0, v === 'bad' ? 0 : this.checker.lastId);
    if (v === 'bad') { st.icrcErrors++; return; }
    if (v === 'recovered') st.icrcIdRecovered++;
    else if (v === 'segment') st.icrcSegmentIds++;
    const opcode = buf[B.opcode.at]!;
    if (opcode >= 0x20) { st.malformed++; return; } // not RC (UD, CNP …): uroce has only RC QPs
    if ((u16(buf, B.pkey.at) | PKEY_MEMBERSHIP) !== DEFAULT_PKEY) { st.badPkey++; return; }
    const qp = this.qps.get(u24(buf, B.destQp.at));
    if (!qp) { st.unknownQp++; return; }
    if (qp.remoteIp && qp.remoteIp !== src) { st.badSource++; return; }
    qp.receive(buf, src);
  }

  /** Fill the helper's table entry a packet's verdict asked for: the prefix of its key, from
   *  the checker's header model (the rule the helper's arithmetic continues). */
  private fillPrefix(verdict: number, len: number, src: string, srcPort: number, srcNum: number, segment: number): void {
    const t = this.rxTable;
    const x = -1 - verdict;
    const o = (x >> 1) * 4;
    if (t === undefined || o + 4 > t.length) return;
    const id = (x & 1) !== 0 ? 0 : segment;
    t[o] = srcNum;
    t[o + 1] = (srcPort << 16) | len;
    t[o + 2] = id;
    t[o + 3] = this.checker.prefix(src, srcPort, len, id);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.rxTurn = false;
    if (this.rx) this.spinFinal = this.busyPollStats(); // what stats() shows after the close
    this.spinUs = 0;
    if (this.heldTimer) clearTimeout(this.heldTimer);
    this.taps = [];
    if (this.rx) { this.helper!.recvStop(this.rx); this.rx = undefined; }
    const s = this.sock;
    this.sock = undefined;
    if (s) await new Promise<void>((res) => s.close(() => res()));
  }
}
