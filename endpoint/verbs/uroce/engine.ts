// The uroce engine: one per local IPv4 address. It owns the RoCEv2 receive socket (UDP 4791
// on that address), checks the ICRC of every packet it receives (bad = dropped and counted,
// as an RNIC does), demultiplexes by destination QPN, and is the single transmit path of its
// QPs: it puts the ICRC on every packet, applies fault injection (tests) and feeds the tap
// (pcap of everything the engine sent and received, as IPv4 frames).

import type dgram from 'node:dgram';
import { decodeIbPacket, setIcrc, BTH_LEN, ICRC_LEN, ROCE_V2_PORT } from '../../../dissectors/wire/ib.js';
import { u16, u24 } from '../../../dissectors/wire/common.js';
import { encodeIpv4, ipv4Header, IPPROTO_UDP } from '../../../dissectors/net/ipv4.js';
import { encodeUdp, udpHeader } from '../../../dissectors/net/udp.js';
import { LINKTYPE, type CapturedFrame } from '../../../capture/types.js';
import type { CaptureWriter } from '../../../capture/writer.js';
import { IcrcChecker, type NetHeader } from './icrc.js';
import { FaultInjector, type FaultConfig } from './faults.js';
import { openSocket, sockHelperError, loadSockHelper, type SockHelper } from './sockets.js';

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
  /** Fault injection counters. */
  faultDropped: number;
  faultDuplicated: number;
  faultReordered: number;
  faultCorrupted: number;
}

export function emptyEngineStats(): EngineStats {
  return {
    rxPackets: 0, rxBytes: 0, txPackets: 0, txBytes: 0, icrcErrors: 0, icrcIdRecovered: 0, malformed: 0,
    unknownQp: 0, badSource: 0, badPkey: 0, txErrors: 0, faultDropped: 0, faultDuplicated: 0, faultReordered: 0, faultCorrupted: 0,
  };
}

/** What the engine needs from a QP. */
export interface EngineQp {
  readonly qpNum: number;
  /** Peer address (valid from RTR on). */
  remoteIp: string;
  /** Called with every packet for this QPN that passed the engine's checks. */
  receive(buf: Uint8Array, srcIp: string): void;
}

export interface TxPort {
  sock: dgram.Socket | undefined;
  port: number;
  net: NetHeader;
  ttl: number;
  tos: number;
  /** Packets waiting for an asynchronous bind (only without the socket helper). */
  queue?: Uint8Array[];
  /** Socket fd when opened by the helper: transmits are batched into sendmmsg(2) calls. */
  fd?: number;
  /** Packets of this turn waiting for the batch flush (and their destination). */
  batch?: Uint8Array[];
  batchIp?: string;
}

type Tap = (frame: CapturedFrame) => void;

const EPOCH_NS = BigInt(Date.now()) * 1_000_000n - process.hrtime.bigint();


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
  /** Transmit through sendmmsg batches (socket helper loaded; UROCE_NO_BATCH=1 turns it off). */
  private readonly helper: SockHelper | undefined = process.env.UROCE_NO_BATCH === '1' ? undefined : loadSockHelper();
  private readonly pendingBatches: TxPort[] = [];
  private flushScheduled = false;

  private constructor(readonly address: string) {
    this.checker = new IcrcChecker(address);
  }

  static async open(address: string, o: { rcvbuf?: number; faults?: FaultConfig } = {}): Promise<UroceEngine> {
    const e = new UroceEngine(address);
    const s = await openSocket({ address, port: ROCE_V2_PORT, rcvbuf: o.rcvbuf ?? 4 << 20, sndbuf: 1 << 20 });
    e.sock = s.sock;
    e.exactIcrc = s.exact;
    try { e.rcvbuf = s.sock.getRecvBufferSize(); } catch { e.rcvbuf = 0; }
    s.sock.on('message', (m: Buffer, r: dgram.RemoteInfo) => {
      // A packet from the network never takes the process down: anything unexpected while
      // handling one is counted (malformed) and the packet dropped.
      try { e.onMessage(m, r); } catch { e.stats.malformed++; }
    });
    s.sock.on('error', () => { e.stats.txErrors++; });
    if (o.faults) e.faults = new FaultInjector(o.faults);
    return e;
  }

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
   * Send one IB packet (BTH … ICRC slot) of a QP to its peer: ICRC, faults, socket, tap.
   * `pkt` is owned by the engine afterwards.
   */
  transmit(port: TxPort, pkt: Uint8Array, dstIp: string): void {
    if (this.closed) return;
    // send socket still binding (no helper): the ICRC needs its port, so wait for it
    if (!port.sock) { (port.queue ??= []).push(pkt); return; }
    setIcrc(pkt, port.net.icrc(pkt, 0));
    const f = this.faults;
    if (f) {
      const a = f.decide(u24(pkt, 5), u24(pkt, 9), pkt[0]!, pkt[0] === 0x11 || pkt[0] === 0x12 ? pkt[BTH_LEN]! : 0);
      switch (a) {
        case 'drop': this.stats.faultDropped++; return;
        case 'duplicate': this.stats.faultDuplicated++; this.send(port, pkt, dstIp); break;
        case 'reorder': {
          this.stats.faultReordered++;
          const prev = this.held;
          this.held = { port, pkt, ip: dstIp };
          if (prev) this.send(prev.port, prev.pkt, prev.ip);
          if (!this.heldTimer) this.heldTimer = setTimeout(() => this.flushHeld(), 1);
          return;
        }
        case 'corrupt': case 'corruptPayload': {
          this.stats.faultCorrupted++;
          const i = FaultInjector.flipIndex(pkt.length, a === 'corruptPayload', u24(pkt, 9));
          pkt[i] = pkt[i]! ^ 0x5a;
          break;
        }
        default: break;
      }
    }
    this.send(port, pkt, dstIp);
    if (this.held) {
      const h = this.held;
      this.held = undefined;
      this.send(h.port, h.pkt, h.ip);
    }
  }

  private flushHeld(): void {
    this.heldTimer = undefined;
    const h = this.held;
    this.held = undefined;
    if (h && !this.closed) this.send(h.port, h.pkt, h.ip);
  }

  private send(port: TxPort, pkt: Uint8Array, ip: string): void {
    const s = port.sock;
    if (!s) return;
    this.stats.txPackets++;
    this.stats.txBytes += pkt.length;
    if (this.taps.length) this.emitTap(this.address, ip, port.port, pkt, port.ttl, port.tos, 0);
    if (port.fd !== undefined && this.helper) {
      // Collect this turn's packets and hand them to the kernel in sendmmsg(2) batches once
      // the current JavaScript job is done (one syscall for up to 64 datagrams).
      if (port.batch && port.batchIp !== ip) this.flushPort(port);
      (port.batch ??= []).push(pkt);
      port.batchIp = ip;
      if (port.batch.length === 1) this.pendingBatches.push(port);
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        queueMicrotask(() => this.flushBatches());
      }
      return;
    }
    s.send(pkt, ROCE_V2_PORT, ip);
  }

  private flushBatches(): void {
    this.flushScheduled = false;
    const ports = this.pendingBatches.splice(0);
    for (const p of ports) this.flushPort(p);
  }

  /** Send what a port has batched (also before its socket is closed). */
  flushPort(port: TxPort): void {
    const b = port.batch;
    const ip = port.batchIp!;
    port.batch = undefined;
    if (!b || b.length === 0 || !port.sock) return;
    try {
      let done = 0;
      // Node's own queue (after an EAGAIN) goes first, so packets never overtake each other.
      if (port.sock.getSendQueueCount() === 0) {
        const r = this.helper!.sendBatch(port.fd!, ip, ROCE_V2_PORT, b);
        if (r > 0) done = r;
        else if (r < 0) this.stats.txErrors++;
      }
      for (let i = done; i < b.length; i++) port.sock.send(b[i]!, ROCE_V2_PORT, ip);
    } catch {
      this.stats.txErrors++; // socket already closed (QP destroyed)
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

  private onMessage(m: Buffer, r: dgram.RemoteInfo): void {
    const st = this.stats;
    st.rxPackets++;
    st.rxBytes += m.length;
    const buf = new Uint8Array(m.buffer, m.byteOffset, m.length);
    if (buf.length < BTH_LEN + ICRC_LEN) { st.malformed++; return; }
    const v = this.checker.check(buf, r.address, r.port);
    if (this.taps.length) this.emitTap(r.address, this.address, r.port, buf, 64, 0, v === 'recovered' ? this.checker.lastId : 0);
    if (v === 'bad') { st.icrcErrors++; return; }
    if (v === 'recovered') st.icrcIdRecovered++;
    const opcode = buf[0]!;
    if (opcode >= 0x20) { st.malformed++; return; } // not RC (UD, CNP …): uroce has only RC QPs
    if ((u16(buf, 2) & 0x7fff) !== 0x7fff) { st.badPkey++; return; }
    const qp = this.qps.get(u24(buf, 5));
    if (!qp) { st.unknownQp++; return; }
    if (qp.remoteIp && qp.remoteIp !== r.address) { st.badSource++; return; }
    qp.receive(buf, r.address);
  }

  /** Decode helper for QPs (the one IB codec). */
  static decode(buf: Uint8Array): ReturnType<typeof decodeIbPacket> { return decodeIbPacket(buf); }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.heldTimer) clearTimeout(this.heldTimer);
    this.taps = [];
    const s = this.sock;
    this.sock = undefined;
    if (s) await new Promise<void>((res) => s.close(() => res()));
  }
}
