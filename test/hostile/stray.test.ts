// The stray-CLC check on a fallback stream we declined (endpoint/clc/stray.ts + SmcSocket), over a
// real TCP connection on loopback. The 2000-connect flood showed connections whose echo came back
// with exactly one extra CLC Accept: the client had timed out waiting for it and fallen back, the
// server's Accept came seconds later, and by then the check had given up (its 2 s clock ran from
// the fallback, not from when bytes were held). A stray message is always at the very start of the
// stream, however late it comes, so it must still be taken off.
import test from 'ava';
import { createServer, connect as netConnect, type Socket } from 'node:net';
import { once } from 'node:events';
import { SmcSocket } from '../../endpoint/socket/socket.js';
import { encodeClc, CLC_DECLINE, CLC_DECLINE_V2_LEN } from '../../dissectors/wire/clc.js';
import { DECL } from '../../endpoint/clc/channel.js';
import { proposal, sleep } from './peer.js';

/** A TCP pair on loopback: `near` is wrapped as a fallback SmcSocket with the stray check on. */
async function pair(strayWaitMs: number): Promise<{ sock: SmcSocket; far: Socket; got: () => Buffer; ended: Promise<unknown>; close: () => void }> {
  const srv = createServer({ pauseOnConnect: true, allowHalfOpen: true });
  srv.listen(0, '127.0.0.1');
  await once(srv, 'listening');
  const far = netConnect({ port: (srv.address() as { port: number }).port, host: '127.0.0.1', allowHalfOpen: true });
  const [near] = (await once(srv, 'connection')) as [Socket];
  await once(far, 'connect');
  const sock = new SmcSocket({ tcp: near, mode: 'tcp', fallbackCode: DECL.TIMEOUT_AL, strayClc: true, strayWaitMs });
  const chunks: Buffer[] = [];
  sock.on('data', (d: Buffer) => chunks.push(d));
  const ended = once(sock, 'end');
  return { sock, far, got: () => Buffer.concat(chunks), ended, close: () => { sock.destroy(); far.destroy(); srv.close(); } };
}

const decline = (): Uint8Array => encodeClc({
  type: 'decline', eyecatcher: 'SMCR', trailer: 'SMCR', typeCode: CLC_DECLINE, version: 2, length: CLC_DECLINE_V2_LEN,
  outOfSync: false, typev1: 0, peerId: '1@02:00:00:00:00:01', diagnosis: DECL.TIMEOUT_CL, osType: 2, diagExtra: [0, 0, 0, 0],
});

test('a stray CLC message that arrives long after the fallback is still taken off the stream', async (t) => {
  const p = await pair(100);
  try {
    await sleep(400); // 4× the hold time, nothing received yet: the check must still be on
    p.far.write(proposal('127.0.0.9'));
    p.far.end('application data');
    await p.ended;
    t.is(p.got().toString(), 'application data');
  } finally { p.close(); }
});

test('two stray messages with a pause longer than the hold time between them are both taken off', async (t) => {
  const p = await pair(100);
  try {
    p.far.write(proposal('127.0.0.9'));
    await sleep(400);
    p.far.write(decline());
    await sleep(50);
    p.far.end('after two');
    await p.ended;
    t.is(p.got().toString(), 'after two');
  } finally { p.close(); }
});

test('bytes that could begin a CLC message are held at most the hold time, then delivered', async (t) => {
  const p = await pair(150);
  try {
    const t0 = Date.now();
    p.far.write(Buffer.from([0xe2, 0xd4, 0xc3])); // "SMC" in EBCDIC, then nothing
    while (p.got().length === 0 && Date.now() - t0 < 3000) await sleep(10);
    const ms = Date.now() - t0;
    t.deepEqual([...p.got()], [0xe2, 0xd4, 0xc3]);
    t.true(ms >= 140 && ms < 1500, `delivered after ${ms} ms`);
  } finally { p.close(); }
});

test('data that cannot begin a CLC message passes at once, and later CLC-looking bytes are data', async (t) => {
  const p = await pair(5000);
  try {
    const t0 = Date.now();
    p.far.write('hi');
    while (p.got().length === 0 && Date.now() - t0 < 3000) await sleep(5);
    t.true(Date.now() - t0 < 1000);
    const later = Buffer.from(proposal('127.0.0.9'));
    p.far.end(later);
    await p.ended;
    t.deepEqual(p.got(), Buffer.concat([Buffer.from('hi'), later]));
  } finally { p.close(); }
});
