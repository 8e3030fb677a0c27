// Every decline path of the CLC handshake, driven by a raw peer that speaks CLC by hand (built
// with our own encoder, fields broken on purpose) against our server and our client. Each
// case checks the Decline on the wire (decoded by our codec), the fallback reported locally,
// and that the TCP connection still carries data afterwards — never a crash.
import test from 'ava';
import { createServer as netServer, connect as netConnect, type Socket } from 'node:net';
import { once } from 'node:events';
import { encodeClc, decodeClc, CLC_ACCEPT, CLC_DECLINE, CLC_PROPOSAL, PATH_D, PATH_N, PATH_R, type ClcInput, type ClcMessage, type ClcDecline } from '../../dissectors/wire/clc.js';
import { createServer, connect, closeAll, type SmcSocket } from '../../endpoint/index.js';
import { ClcChannel } from '../../endpoint/clc/channel.js';
import { freePair } from './stacks.js';

const UEID = 'SMCSCOPE-DECL';
let SRV = '', CLI = '';
test.before(async () => { [CLI, SRV] = await freePair(98); });
const base = { ueids: [UEID], tcpOption: 'ignore' as const, clcTimeoutMs: 400, llcTimeoutMs: 400 };

test.after.always(() => closeAll());

function proposal(over: Partial<ClcInput & { type: 'proposal' }> = {}, v2: Record<string, unknown> = {}): ClcInput {
  return {
    type: 'proposal', eyecatcher: 'SMCR', trailer: 'SMCR', typeCode: CLC_PROPOSAL, version: 2, typev2: PATH_R, typev1: PATH_N,
    peerId: '0@00:00:00:00:00:00', gid: '::', mac: '00:00:00:00:00:00',
    smcd: { ismGid: 0n, ismChid: 0, vendorOui: 0, vendorExp: 0n },
    v2: { eids: [UEID], release: 1, seidFlag: false, roceV2Gid: '::ffff:' + CLI, maxConns: 255, maxLinks: 2, featureMask: 1, ...v2 },
    ...over,
  } as ClcInput;
}

/** Our server; a raw client sends `msgs` and collects what comes back until the server's Decline. */
async function rawClient(msgs: Array<ClcInput | Uint8Array>, opts: Record<string, unknown> = {}): Promise<{ got: ClcMessage[]; server: SmcSocket }> {
  const got: ClcMessage[] = [];
  const srv = createServer({ device: { provider: 'uroce', address: SRV }, ...base, ...opts });
  const conn = once(srv, 'connection') as Promise<[SmcSocket]>;
  const { port } = await srv.listen(0, SRV);
  const c = netConnect({ host: SRV, port, localAddress: CLI });
  await once(c, 'connect');
  const ch = new ClcChannel(c);
  for (const m of msgs) c.write(m instanceof Uint8Array ? m : encodeClc(m));
  for (;;) {
    const m = await ch.read(3000, 'reply');
    got.push(m);
    if (m.type === 'decline') break;
  }
  ch.detach();
  const [server] = await conn;
  // the connection continues over TCP: the server echoes
  server.on('data', (d) => server.write(d));
  // (bytes the server read past the CLC it could parse are not lost: they come back first)
  let echo = '';
  const echoed = new Promise<void>((resolve) => c.on('data', (d: Buffer) => { echo += d.toString('latin1'); if (echo.endsWith('still tcp')) resolve(); }));
  c.resume();
  c.write('still tcp');
  await echoed;
  c.destroy();
  server.destroy();
  await srv.close();
  return { got, server };
}

const declineOf = (got: ClcMessage[]): ClcDecline => got.find((m): m is ClcDecline => m.type === 'decline')!;

test.serial('server: SMC-D only Proposal → NOSMCDEV', async (t) => {
  const p = proposal({ version: 1, typev1: PATH_D, typev2: PATH_N, peerId: '7@02:00:00:00:00:07', smcd: { ismGid: 1n, ismChid: 1, vendorOui: 0, vendorExp: 0n }, prefix: { ipv4: '127.0.0.0', ipv4Len: 8, ipv6: [] } } as never);
  delete (p as { v2?: unknown }).v2;
  t.deepEqual(decodeClc(encodeClc(p)).issues.filter((i) => i.severity === 'error'), []);
  const { got, server } = await rawClient([p]);
  t.is(declineOf(got).diagnosis, 0x03030000);
  t.like(server, { mode: 'tcp', fallback: { name: 'NOSMCDEV' } });
});

test.serial('server: no common UEID → NOUEID', async (t) => {
  const { got, server } = await rawClient([proposal({}, { eids: ['SOMETHING-ELSE'] })], { versions: [2] });
  t.is(declineOf(got).diagnosis, 0x03030008);
  t.is(server.fallback?.name, 'NOUEID');
});

test.serial('server: v1 Proposal from another subnet → DIFFPREFIX', async (t) => {
  const p = proposal({ version: 1, typev1: PATH_R, typev2: PATH_N, peerId: '7@02:00:00:00:00:07', gid: '::ffff:' + CLI, mac: '02:00:00:00:00:07', prefix: { ipv4: '10.9.0.0', ipv4Len: 16, ipv6: [] } } as never);
  delete (p as { v2?: unknown }).v2; delete (p as { smcd?: unknown }).smcd;
  const { got, server } = await rawClient([p]);
  t.is(declineOf(got).diagnosis, 0x03070000);
  t.is(server.fallback?.name, 'DIFFPREFIX');
});

test.serial('server: v2.1 with max connections 5 → MAXCONNERR', async (t) => {
  const { got } = await rawClient([proposal({}, { maxConns: 5 })], { versions: [2] });
  t.is(declineOf(got).diagnosis, 0x0303000a);
});

test.serial('server: bytes that are not CLC → SYNCERR decline', async (t) => {
  const { got } = await rawClient([Uint8Array.from(Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n'))]);
  t.is(declineOf(got).diagnosis, 0x04000000);
});

test.serial('server: Proposal, Accept, then no Confirm → timeout decline, link group removed', async (t) => {
  const { got, server } = await rawClient([proposal()]);
  t.is(got[0]?.type, 'accept');
  t.is(declineOf(got).diagnosis, 0x02010000);
  t.is(server.mode, 'tcp');
});

/** Our client against a raw server that answers the Proposal with `reply(proposal)`. */
async function rawServer(reply: (p: ClcMessage) => ClcInput | undefined, opts: Record<string, unknown> = {}): Promise<{ got: ClcMessage[]; client: SmcSocket }> {
  const got: ClcMessage[] = [];
  const srv = netServer();
  srv.listen(0, SRV);
  await once(srv, 'listening');
  const port = (srv.address() as { port: number }).port;
  const served = new Promise<void>((resolve) => srv.once('connection', async (s: Socket) => {
    const ch = new ClcChannel(s);
    try {
      const p = await ch.read(3000, 'Proposal');
      got.push(p);
      const r = reply(p);
      if (r) s.write(encodeClc(r));
      for (; r?.type !== 'decline';) { const m = await ch.read(3000, 'reply'); got.push(m); if (m.type === 'decline') break; }
    } catch { /* peer went away */ }
    ch.detach();
    s.on('data', (d) => s.write(d));
    s.on('end', () => s.destroy());
    s.resume();
    resolve();
  }));
  const client = await connect({ device: { provider: 'uroce', address: CLI }, ...base, ...opts, host: SRV, port, localAddress: CLI });
  await served;
  const echoed = once(client, 'data') as Promise<[Buffer]>;
  client.write('tcp after decline');
  const [echo] = await echoed;
  if (echo.toString() !== 'tcp after decline') throw new Error('no echo');
  client.destroy();
  await new Promise((r) => srv.close(r));
  return { got, client };
}

function accept(over: Record<string, unknown> = {}, r: Record<string, unknown> = {}): ClcInput {
  return {
    type: 'accept', eyecatcher: 'SMCR', trailer: 'SMCR', typeCode: CLC_ACCEPT, version: 2, firstContact: true, typev1: PATH_R,
    r: {
      peerId: '99@02:00:00:00:00:99', gid: '::ffff:' + SRV, mac: '02:00:00:00:00:99', qpn: 0x77, rkey: 0x1234, rmbeIdx: 1, token: 5,
      rmbeSizeCode: 2, mtuCode: 3, rmbVa: 0x10000n, psn: 100, eid: UEID,
      fce: { v2Direct: true, osType: 2, release: 1, hostname: 'raw', maxConns: 255, maxLinks: 2, featureMask: 1, vendorExp: 0 },
      ...r,
    },
    ...over,
  } as ClcInput;
}

test.serial('client: server declines → fallback with the peer\'s reason', async (t) => {
  const { client } = await rawServer(() => ({ type: 'decline', eyecatcher: 'SMCR', trailer: 'SMCR', typeCode: CLC_DECLINE, version: 2, outOfSync: false, typev1: 0, peerId: '1@02:00:00:00:00:01', diagnosis: 0x03030002, osType: 2, diagExtra: [0, 0, 0, 0] } as ClcInput));
  t.like(client, { mode: 'tcp', fallback: { name: 'NOSMCRDEV' } });
});

test.serial('client: Accept with SMC-D path → MODEUNSUPP', async (t) => {
  const { got } = await rawServer(() => accept({ typev1: PATH_D }));
  t.is(declineOf(got).diagnosis, 0x03040000);
});

test.serial('client: Accept with a UEID we did not offer → NOUEID', async (t) => {
  const { got } = await rawServer(() => accept({}, { eid: 'NOT-OURS' }));
  t.is(declineOf(got).diagnosis, 0x03030008);
});

test.serial('client: release newer than ours → RELEASEERR', async (t) => {
  const { got } = await rawServer(() => accept({}, { fce: { v2Direct: true, osType: 2, release: 3, hostname: 'raw', maxConns: 255, maxLinks: 2, featureMask: 1, vendorExp: 0 } }));
  t.is(declineOf(got).diagnosis, 0x03030009);
});

test.serial('client: subsequent contact for a link group we do not have → SYNCERR out of sync', async (t) => {
  const { got } = await rawServer(() => accept({ firstContact: false }, { fce: undefined }));
  const d = declineOf(got);
  t.is(d.diagnosis, 0x04000000);
  t.true(d.outOfSync);
});

test.serial('client: first contact but the server never sends CONFIRM LINK → TIMEOUT_CL after our Confirm', async (t) => {
  const { got, client } = await rawServer(() => accept());
  t.is(got[1]?.type, 'confirm');
  t.is(declineOf(got).diagnosis, 0x02010000);
  t.is(client.fallback?.name, 'TIMEOUT_CL');
});

test.serial('client: server silent → timeout decline', async (t) => {
  const { got, client } = await rawServer(() => undefined);
  t.is(declineOf(got).diagnosis >>> 16, 0x0202);
  t.is(client.mode, 'tcp');
});

test('encoded Decline decodes as Linux would read it', (t) => {
  const d = decodeClc(encodeClc({ type: 'decline', eyecatcher: 'SMCR', trailer: 'SMCR', typeCode: CLC_DECLINE, version: 2, outOfSync: true, typev1: 0, peerId: '1@02:00:00:00:00:01', diagnosis: 0x04000000, osType: 2, diagExtra: [0, 0, 0, 0] } as ClcInput));
  t.deepEqual(d.issues, []);
  t.is(d.value.length, 44);
});
