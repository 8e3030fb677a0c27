// Replays the SMC traffic of a real kernel capture inside the current network namespace,
// through real sockets: every RoCEv2 frame becomes a UDP datagram from its original
// address and port to its original address and port (4791), and every CLC message goes
// as TCP payload over a real connection between the original addresses (client to server
// port as captured, the client port chosen by the kernel). Sends follow capture order;
// each TCP write waits until the peer has read it, so the order on the wire is the order
// in the file.
//
// The bytes above UDP are the captured ones. The ICRC is not valid on the wire any more: it
// covers the IPv4 identification field, which the kernel picks for a socket's datagrams.
//
// Run as root inside a namespace the caller created (it adds the capture's IPv4 addresses
// to lo):  node replay.js FILE.pcap
// Prints one JSON line: { udp, tcp, connections, addresses }.

import { spawnSync } from 'node:child_process';
import dgram from 'node:dgram';
import net from 'node:net';
import { openCapture } from '../../capture/reader.js';
import { FrameDecoder } from '../../dissectors/frame.js';
import type { Ipv4Header } from '../../dissectors/net/ipv4.js';

type Step =
  | { kind: 'udp'; src: string; sport: number; dst: string; dport: number; payload: Uint8Array }
  | { kind: 'tcp'; conn: string; fromClient: boolean; payload: Uint8Array };

interface ConnInfo { client: string; server: string; sport: number }

async function plan(path: string): Promise<{ steps: Step[]; conns: Map<string, ConnInfo>; addrs: Set<string> }> {
  const reader = await openCapture(path);
  const dec = new FrameDecoder({ icrc: false });
  const steps: Step[] = [];
  const conns = new Map<string, ConnInfo>();
  const addrs = new Set<string>();
  for (let f = reader.next(); f; f = reader.next()) {
    const d = dec.decode(f);
    if (!d.ip || d.ip.version !== 4 || !d.eth) continue;
    const ipOff = d.eth.headerLength;
    const ip = d.ip.header as Ipv4Header;
    const end = Math.min(f.data.length, ipOff + ip.totalLength);
    const l4 = ipOff + ip.headerLength;
    if (d.udp && d.roce) {
      steps.push({ kind: 'udp', src: d.ip.src, sport: d.udp.srcPort, dst: d.ip.dst, dport: d.udp.dstPort, payload: f.data.slice(l4 + 8, end) });
      addrs.add(d.ip.src).add(d.ip.dst);
    } else if (d.tcp && (d.tcpRole === 'clc' || d.tcpRole === 'clc-part')) {
      const a = `${d.ip.src}:${d.tcp.srcPort}`;
      const b = `${d.ip.dst}:${d.tcp.dstPort}`;
      const key = a < b ? `${a}|${b}` : `${b}|${a}`;
      let c = conns.get(key);
      // The first CLC message of a connection (the Proposal) goes client -> server.
      if (!c) { c = { client: d.ip.src, server: d.ip.dst, sport: d.tcp.dstPort }; conns.set(key, c); }
      steps.push({ kind: 'tcp', conn: key, fromClient: d.ip.src === c.client, payload: f.data.slice(l4 + d.tcp.headerLength, end) });
      addrs.add(d.ip.src).add(d.ip.dst);
    }
  }
  reader.close();
  return { steps, conns, addrs };
}

class Side {
  received = 0;
  private want = 0;
  private wake: (() => void) | undefined;
  constructor(readonly sock: net.Socket) {
    sock.setNoDelay(true);
    sock.on('data', (b: Buffer) => {
      this.received += b.length;
      if (this.wake && this.received >= this.want) { const w = this.wake; this.wake = undefined; w(); }
    });
  }
  until(n: number): Promise<void> {
    if (this.received >= n) return Promise.resolve();
    this.want = n;
    return new Promise((r) => { this.wake = r; });
  }
}

async function main(): Promise<void> {
  const path = process.argv[2];
  if (!path) throw new Error('usage: replay FILE');
  const { steps, conns, addrs } = await plan(path);
  for (const a of addrs) {
    const r = spawnSync('ip', ['addr', 'replace', `${a}/32`, 'dev', 'lo'], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`ip addr replace ${a}: ${r.stderr.trim()}`);
  }

  // UDP: one socket per (address, port) seen, used to send from it and to receive on it.
  const udp = new Map<string, dgram.Socket>();
  for (const s of steps) {
    if (s.kind !== 'udp') continue;
    for (const [ip, port] of [[s.src, s.sport], [s.dst, s.dport]] as const) {
      const k = `${ip}:${port}`;
      if (udp.has(k)) continue;
      const sock = dgram.createSocket({ type: 'udp4', reuseAddr: true });
      await new Promise<void>((res, rej) => { sock.once('error', rej); sock.bind(port, ip, () => { sock.off('error', rej); res(); }); });
      sock.on('message', () => undefined);
      udp.set(k, sock);
    }
  }

  // TCP: a listener per server endpoint; connections are opened at their first CLC message.
  const servers = new Map<string, { server: net.Server; accepted: Map<number, net.Socket>; waiters: Map<number, (s: net.Socket) => void> }>();
  interface Conn { client: Side; server: Side; sent: { c2s: number; s2c: number } }
  const open = new Map<string, Conn>();
  const sockets: net.Socket[] = [];
  async function connect(key: string): Promise<Conn> {
    const c = conns.get(key)!;
    const sk = `${c.server}:${c.sport}`;
    let srv = servers.get(sk);
    if (!srv) {
      const accepted = new Map<number, net.Socket>();
      const waiters = new Map<number, (s: net.Socket) => void>();
      const server = net.createServer((s) => {
        sockets.push(s);
        const w = waiters.get(s.remotePort!);
        if (w) { waiters.delete(s.remotePort!); w(s); } else accepted.set(s.remotePort!, s);
      });
      await new Promise<void>((res, rej) => { server.once('error', rej); server.listen(c.sport, c.server, () => res()); });
      srv = { server, accepted, waiters };
      servers.set(sk, srv);
    }
    const client = net.connect({ host: c.server, port: c.sport, localAddress: c.client });
    sockets.push(client);
    await new Promise<void>((res, rej) => { client.once('error', rej); client.once('connect', () => res()); });
    const port = client.localPort!;
    const s = srv;
    const serverSock = s.accepted.get(port) ?? await new Promise<net.Socket>((res) => s.waiters.set(port, res));
    s.accepted.delete(port);
    const o: Conn = { client: new Side(client), server: new Side(serverSock), sent: { c2s: 0, s2c: 0 } };
    open.set(key, o);
    return o;
  }

  let nUdp = 0;
  let nTcp = 0;
  for (const s of steps) {
    if (s.kind === 'udp') {
      const sock = udp.get(`${s.src}:${s.sport}`)!;
      await new Promise<void>((res, rej) => sock.send(s.payload, s.dport, s.dst, (e) => (e ? rej(e) : res())));
      nUdp++;
    } else {
      const c = open.get(s.conn) ?? await connect(s.conn);
      const [from, to] = s.fromClient ? [c.client, c.server] : [c.server, c.client];
      const total = s.fromClient ? (c.sent.c2s += s.payload.length) : (c.sent.s2c += s.payload.length);
      from.sock.write(s.payload);
      await to.until(total);
      nTcp++;
    }
  }
  // Leave a moment so that the last datagrams are through the stack before closing.
  await new Promise((r) => setTimeout(r, 20));
  for (const s of sockets) s.destroy();
  for (const { server } of servers.values()) server.close();
  for (const u of udp.values()) u.close();
  process.stdout.write(`${JSON.stringify({ udp: nUdp, tcp: nTcp, connections: open.size, addresses: [...addrs] })}\n`);
}

main().catch((e: unknown) => {
  process.stderr.write(`replay: ${(e as Error).message}\n`);
  process.exit(1);
});
