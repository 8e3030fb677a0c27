// Host-side part of scenario g-host-roce-ud: the server half of rdma-core's ibv_ud_pingpong,
// speaking RoCEv2 from the host side of the lab bridge.
//  1. TCP 18515: ud_pingpong's exchange of "LID:QPN:PSN:GID" (52 bytes with the NUL each way,
//     then the client's "done").
//  2. UDP 4791, received on a plain UDP socket (which also keeps the host kernel from answering
//     with ICMP port unreachable). Each UD SEND from the guest is answered with a UD SEND to the
//     guest's QP, built whole with the project's codecs (Ethernet, IPv4, UDP, IB + ICRC) and
//     injected on the bridge through libpcap (the `cap` package). Not through the UDP socket:
//     the ICRC covers the IPv4 identification field, and the kernel picks that (randomly, even
//     with DF), so a packet sent through a UDP socket cannot carry a correct ICRC. (Seen here:
//     rxe dropped such packets silently, its rcvd_pkts stayed 0.)
import { createSocket } from 'node:dgram';
import { createServer } from 'node:net';
import { createRequire } from 'node:module';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { decodeIbPacket, encodeIbPacket, ibPadFor, icrcFromParts, setIcrc } from '../../../dissectors/wire/ib.js';
import { encodeIpv4, ipv4Header } from '../../../dissectors/net/ipv4.js';
import { encodeUdp, udpHeader } from '../../../dissectors/net/udp.js';
import { encodeEthernet, ethernetHeader } from '../../../dissectors/net/ethernet.js';
import { parseIpv4 } from '../../../dissectors/wire/common.js';

interface CapHandle { open(dev: string, filter: string, bufSize: number, buf: Buffer): string; send(b: Buffer, len?: number): void; close(): void }
const { Cap } = createRequire(import.meta.url)('cap') as { Cap: new () => CapHandle };

const hostIp = process.env.LAB_HOST_IP ?? '10.55.0.254';
const sync = process.env.LAB_SYNC;
if (!sync) { console.error('host part: LAB_SYNC is not set (run through the lab harness)'); process.exit(2); }
const ITERS = 10, SIZE = 512, MY_QPN = 0x000abc, QKEY = 0x11111111, UD_SEND_ONLY = 0x64, ROCE = 4791;
const MSG_LEN = 52; // sizeof "0000:000000:000000:00000000000000000000000000000000"
const bridge = process.env.LAB_BRIDGE ?? 'smcbr0';
const myMac = readFileSync(`/sys/class/net/${bridge}/address`, 'utf8').trim();
const guestMac = process.env.LAB_MAC_A ?? '52:54:00:55:00:0a';
const inject = new Cap();
inject.open(bridge, 'ether proto 0x88b5', 1 << 20, Buffer.alloc(65536)); // (a filter that matches nothing: send only)
let ipId = 1;

let remoteQpn = -1;
let psn = 0x1234;
let received = 0, sent = 0;
const giveUp = setTimeout(() => { console.error(`host: gave up after 200s (received ${received}, sent ${sent})`); process.exit(1); }, 200_000);

const udp = createSocket('udp4');
udp.on('message', (msg, rinfo) => {
  const d = decodeIbPacket(new Uint8Array(msg.buffer, msg.byteOffset, msg.byteLength));
  const p = d.value;
  if (p.bth.opcode !== UD_SEND_ONLY || p.deth?.qkey !== QKEY || p.bth.destQp !== MY_QPN) {
    console.log(`host: ignored opcode 0x${p.bth.opcode.toString(16)} to QP 0x${p.bth.destQp.toString(16)} from ${rinfo.address}:${rinfo.port}`);
    return;
  }
  received++;
  if (remoteQpn < 0) return void console.log('host: UD SEND before the exchange; ignored');
  const ib = encodeIbPacket({
    bth: { opcode: UD_SEND_ONLY, se: false, migReq: false, padCount: ibPadFor(SIZE), tver: 0, pkey: 0xffff, fecn: false, becn: false, resv6: 0,
      destQp: remoteQpn, ackReq: false, resv7: 0, psn: psn++ & 0xffffff },
    deth: { qkey: QKEY, resv8: 0, srcQp: MY_QPN },
    payload: new Uint8Array(SIZE), padCount: ibPadFor(SIZE), icrc: 0,
  });
  const ipv4 = ipv4Header({ src: hostIp, dst: rinfo.address, protocol: 17, payloadLength: 8 + ib.length, id: ipId++ & 0xffff, df: true, ttl: 64 });
  const udpH = encodeUdp(udpHeader({ srcPort: 0xc000 + (MY_QPN & 0x3fff), dstPort: ROCE, payloadLength: ib.length })); // checksum 0, as rxe sends
  const net = new Uint8Array([...encodeIpv4(ipv4), ...udpH]);
  setIcrc(ib, icrcFromParts('ipv4', net, ib));
  const frame = encodeEthernet(ethernetHeader({ dst: guestMac, src: myMac, ethertype: 0x0800 }), new Uint8Array([...net, ...ib]));
  try {
    inject.send(Buffer.from(frame), frame.length);
  } catch (e) {
    console.error(`host: inject: ${(e as Error).message}`); process.exitCode = 1; return;
  }
  sent++;
  console.log(`host: #${received} UD SEND from ${rinfo.address} (${p.payload.length} bytes, src QP 0x${p.deth!.srcQp.toString(16)}) answered with psn ${psn - 1}`);
  if (sent === ITERS) finish();
});

const tcp = createServer((sock) => {
  let buf = Buffer.alloc(0);
  sock.on('data', (d) => {
    buf = Buffer.concat([buf, d]);
    if (remoteQpn < 0 && buf.length >= MSG_LEN) {
      const m = /^([0-9a-f]{4}):([0-9a-f]{6}):([0-9a-f]{6}):([0-9a-f]{32})/.exec(buf.subarray(0, MSG_LEN).toString('latin1'));
      if (!m) { console.error(`host: bad exchange message ${JSON.stringify(buf.toString('latin1'))}`); process.exit(1); }
      remoteQpn = parseInt(m[2]!, 16);
      console.log(`host: guest lid ${m[1]} qpn 0x${m[2]} psn 0x${m[3]} gid ${m[4]}`);
      const gid = Buffer.concat([Buffer.alloc(10), Buffer.from([0xff, 0xff]), Buffer.from(parseIpv4(hostIp))]).toString('hex');
      const mine = `0000:${MY_QPN.toString(16).padStart(6, '0')}:${psn.toString(16).padStart(6, '0')}:${gid}`;
      sock.write(Buffer.concat([Buffer.from(mine, 'latin1'), Buffer.alloc(MSG_LEN - mine.length)]));
      buf = buf.subarray(MSG_LEN);
    }
  });
  sock.on('error', () => { /* the client closes when it is done */ });
});

function finish(): void {
  console.log(`host: ${received} UD SENDs received, ${sent} sent`);
  clearTimeout(giveUp);
  udp.close();
  tcp.close();
  inject.close();
}

udp.bind(ROCE, hostIp, () => {
  tcp.listen(18515, hostIp, () => {
    console.log(`host: RoCEv2 UD peer on ${hostIp}: QP 0x${MY_QPN.toString(16)}, UDP ${ROCE}, exchange on TCP 18515`);
    writeFileSync(join(sync, 'host.ready'), '');
  });
});
