// A responder played by hand on a plain UDP socket (port 4791) for uroce requester tests: it
// records the request packets it receives, waits for a number of them, and sends ACKs/NAKs
// with a right ICRC, so a test decides exactly which PSNs are acknowledged and when.
import dgram from 'node:dgram';
import { once } from 'node:events';
import { Access, QpState, type Device, type Mtu, type Qp } from '../../endpoint/verbs/index.js';
import { NetHeader } from '../../endpoint/verbs/uroce/icrc.js';
import { encodeIbPacket, makeAeth, setIcrc, IB_OP } from '../../dissectors/wire/ib.js';
import { srcGid } from './common.js';

export interface HandPeer<T> {
  /** What `pick` returned for each packet received, in order. */
  readonly got: T[];
  /** Whether `n` packets were recorded within `ms`. */
  waitFor(n: number, ms: number): Promise<boolean>;
  /** Send an ACKNOWLEDGE with this AETH to the QP. */
  respond(kind: 'ACK' | 'NAK', code: number, psn: number, qpNum: number): Promise<void>;
  close(): void;
}

/** A hand-played peer at peerIp for a uroce device at localIp; `pick` turns a received
 *  datagram into a record (undefined: not recorded). */
export async function handPeer<T>(peerIp: string, localIp: string, pick: (m: Buffer) => T | undefined): Promise<HandPeer<T>> {
  const sock = dgram.createSocket('udp4');
  sock.bind(4791, peerIp);
  await once(sock, 'listening');
  const got: T[] = [];
  let wake: (() => void) | undefined;
  sock.on('message', (m: Buffer) => {
    const r = pick(m);
    if (r !== undefined) { got.push(r); wake?.(); }
  });
  const net = new NetHeader(peerIp, localIp, 4791, 4791, 64, 0);
  return {
    got,
    waitFor: (n, ms) => new Promise((resolve) => {
      if (got.length >= n) { resolve(true); return; }
      const tm = setTimeout(() => { wake = undefined; resolve(false); }, ms);
      wake = () => { if (got.length >= n) { clearTimeout(tm); wake = undefined; resolve(true); } };
    }),
    respond: (kind, code, psn, qpNum) => {
      const ib = encodeIbPacket({
        bth: { opcode: IB_OP.ACKNOWLEDGE, se: false, migReq: false, padCount: 0, tver: 0, pkey: 0xffff, fecn: false, becn: false, resv6: 0, destQp: qpNum, ackReq: false, resv7: 0, psn },
        aeth: makeAeth(kind, code, 0), payload: new Uint8Array(0), padCount: 0, icrc: 0,
      });
      setIcrc(ib, net.icrc(ib, 0));
      return new Promise((r) => sock.send(ib, 4791, localIp, () => r()));
    },
    close: () => sock.close(),
  };
}

/** Bring a QP of `dev` to RTS towards the hand-played peer (timeout 18 ≈ 1 s, so a go-back in a
 *  test comes from the peer's NAK, not from the retransmission timer). */
export function rtsToPeer(dev: Device, qp: Qp, peerIp: string, peerQpn: number, sqPsn: number, pathMtu: Mtu): void {
  const g = srcGid(dev);
  qp.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: 1, qpAccessFlags: Access.LOCAL_WRITE });
  qp.modify({
    qpState: QpState.RTR, pathMtu, destQpNum: peerQpn, rqPsn: 0, maxDestRdAtomic: 0, minRnrTimer: 1,
    ahAttr: { isGlobal: true, portNum: 1, grh: { dgid: `::ffff:${peerIp}`, sgidIndex: g.index, hopLimit: 64, trafficClass: 0, flowLabel: 0 } },
  });
  qp.modify({ qpState: QpState.RTS, sqPsn, timeout: 18, retryCnt: 7, rnrRetry: 7, maxRdAtomic: 0 });
}
