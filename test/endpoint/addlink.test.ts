// A second link per link group over a second device on each side (ADD LINK, SMC-Rv2), and
// what happens to connections when a link dies: they move to the surviving link (failover).
import test from 'ava';
import { createHash, randomBytes } from 'node:crypto';
import type { EventEmitter } from 'node:events';
import { AsyncEventType } from '../../endpoint/verbs/index.js';
import { SmcStack } from '../../endpoint/stack.js';
import { freePair, send, tcpPair, until } from './stacks.js';

const UEID = 'SMCSCOPE-ADDLINK';

async function twoDeviceStacks(extra: Record<string, unknown> = {}): Promise<[SmcStack, SmcStack, string, string]> {
  const [a1, b1] = await freePair(70);
  const [a2, b2] = await freePair(71);
  const a = await SmcStack.open({ ueids: [UEID], tcpOption: 'ignore', device: { provider: 'uroce', address: a1 }, alternates: [{ provider: 'uroce', address: a2 }], ...extra });
  const b = await SmcStack.open({ ueids: [UEID], tcpOption: 'ignore', device: { provider: 'uroce', address: b1 }, alternates: [{ provider: 'uroce', address: b2 }], ...extra });
  return [a, b, a1, b1];
}

test.serial('server adds a second link over the other devices; both sides see two ACTIVE links; rkeys known on both', async (t) => {
  const [a, b, a1, b1] = await twoDeviceStacks();
  try {
    const [c, s, srv] = await tcpPair(a1, b1);
    const [rc, rs] = await Promise.all([a.handshake('client', c), b.handshake('server', s)]);
    if (rc.mode !== 'smcr' || rs.mode !== 'smcr') { t.fail('no SMC-R'); return; }
    t.true(await until(() => [...rs.lg.links.values()].filter((l) => l.state === 'ACTIVE').length === 2 && [...rc.lg.links.values()].filter((l) => l.state === 'ACTIVE').length === 2));
    const l2s = rs.lg.links.get(2)!, l2c = rc.lg.links.get(2)!;
    t.is(l2s.peer?.qpn, l2c.qpn);
    t.is(l2c.peer?.qpn, l2s.qpn);
    t.not(l2s.port.gid, rs.link.port.gid);
    // the connection's peer RMB is known on both links on both sides
    const snapA = rc.lg.snapshot() as { conns: Array<{ rtokens: unknown[] }> };
    const snapB = rs.lg.snapshot() as { conns: Array<{ rtokens: unknown[] }> };
    t.is(snapA.conns[0]!.rtokens.length, 2);
    t.is(snapB.conns[0]!.rtokens.length, 2);
    const X = [a.attach(rc), b.attach(rs)] as const;
    const data = randomBytes(2 << 20);
    t.is(await send(X[0], X[1], data), createHash('sha256').update(data).digest('hex'));
    // a second connection (subsequent contact) gets its RMB confirmed on both links
    const [c2, s2, srv2] = await tcpPair(a1, b1);
    const [rc2, rs2] = await Promise.all([a.handshake('client', c2), b.handshake('server', s2)]);
    if (rc2.mode !== 'smcr' || rs2.mode !== 'smcr') { t.fail('no SMC-R (2)'); return; }
    t.false(rc2.firstContact);
    // Linux smcr_lgr_conn_assign_link: the group holds one connection (odd), so the second goes on link 2
    t.deepEqual([rs.link.id, rs2.link.id, rc2.link.id], [1, 2, 2], 'connections alternate over the two links; the client takes the link the Accept names');
    const Y = [a.attach(rc2), b.attach(rs2)] as const;
    t.is(await send(Y[1], Y[0], data), createHash('sha256').update(data).digest('hex'));
    for (const conn of [...X, ...Y]) void conn.close();
    c.destroy(); s.destroy(); srv.close(); c2.destroy(); s2.destroy(); srv2.close();
  } finally {
    await Promise.all([a.close(), b.close()]);
  }
});

test.serial('one device on the client, two on the server: the client accepts an asymmetric link (as Linux does)', async (t) => {
  const [a1, b1] = await freePair(72);
  const [, b2] = await freePair(73);
  const a = await SmcStack.open({ ueids: [UEID], tcpOption: 'ignore', device: { provider: 'uroce', address: a1 } });
  const b = await SmcStack.open({ ueids: [UEID], tcpOption: 'ignore', device: { provider: 'uroce', address: b1 }, alternates: [{ provider: 'uroce', address: b2 }] });
  try {
    const [c, s, srv] = await tcpPair(a1, b1);
    const [rc, rs] = await Promise.all([a.handshake('client', c), b.handshake('server', s)]);
    if (rc.mode !== 'smcr' || rs.mode !== 'smcr') { t.fail('no SMC-R'); return; }
    // the server offers a QP on its other device; the client has one device and puts the second
    // QP on it too (Linux smc_llc_cli_add_link: ASYMMETRIC_LOCAL on the client's side)
    t.true(await until(() => [...rc.lg.links.values()].filter((l) => l.state === 'ACTIVE').length === 2 && [...rs.lg.links.values()].filter((l) => l.state === 'ACTIVE').length === 2));
    t.is(rc.lg.stats.rejectsSent, 0);
    t.deepEqual([rc.lg.type, rs.lg.type], ['ASYMMETRIC_LOCAL', 'ASYMMETRIC_PEER']);
    t.deepEqual([...rs.lg.links.values()].map((l) => l.port.gid), [rs.link.port.gid, b.ports[1]!.gid]);
    const X = [a.attach(rc), b.attach(rs)] as const;
    const data = randomBytes(1 << 20);
    t.is(await send(X[0], X[1], data), createHash('sha256').update(data).digest('hex'));
    for (const conn of X) void conn.close();
    c.destroy(); s.destroy(); srv.close();
  } finally {
    await Promise.all([a.close(), b.close()]);
  }
});

test.serial('one device on each side: the server offers a second link anyway (as Linux does), the client rejects it', async (t) => {
  const [a1, b1] = await freePair(74);
  const a = await SmcStack.open({ ueids: [UEID], tcpOption: 'ignore', device: { provider: 'uroce', address: a1 } });
  const b = await SmcStack.open({ ueids: [UEID], tcpOption: 'ignore', device: { provider: 'uroce', address: b1 } });
  try {
    const [c, s, srv] = await tcpPair(a1, b1);
    const [rc, rs] = await Promise.all([a.handshake('client', c), b.handshake('server', s)]);
    if (rc.mode !== 'smcr' || rs.mode !== 'smcr') { t.fail('no SMC-R'); return; }
    // a second QP between the same two GIDs is no alternate path: rejected (no alternate path)
    t.true(await until(() => rc.lg.stats.rejectsSent === 1));
    await new Promise((r) => setTimeout(r, 100));
    t.is(rs.lg.links.size, 1);
    t.is(rc.lg.links.size, 1);
    t.deepEqual([rc.lg.type, rs.lg.type], ['SINGLE', 'SINGLE']);
    c.destroy(); s.destroy(); srv.close();
  } finally {
    await Promise.all([a.close(), b.close()]);
  }
});

test.serial('failover: link 1 dies mid-transfer, connections move to link 2, every byte arrives once (SHA-256)', async (t) => {
  const [a, b, a1, b1] = await twoDeviceStacks();
  try {
    const [c, s, srv] = await tcpPair(a1, b1);
    const [rc, rs] = await Promise.all([a.handshake('client', c), b.handshake('server', s)]);
    if (rc.mode !== 'smcr' || rs.mode !== 'smcr') { t.fail('no SMC-R'); return; }
    t.true(await until(() => rs.lg.links.size === 2 && [...rc.lg.links.values()].every((l) => l.state === 'ACTIVE') && rc.lg.links.size === 2));
    const X = [a.attach(rc), b.attach(rs)] as const;
    const d1 = randomBytes(24 << 20), d2 = randomBytes(24 << 20);
    const flows = Promise.all([send(X[0], X[1], d1), send(X[1], X[0], d2)]);
    // kill link 1 on the client side once data is flowing
    await until(() => (X[1].state() as { counters: { bytesReceived: number } }).counters.bytesReceived > 4 << 20, 20_000);
    rc.link.wr.qp.modify({ qpState: 6 });
    const [h1, h2] = await flows;
    t.is(h1, createHash('sha256').update(d1).digest('hex'));
    t.is(h2, createHash('sha256').update(d2).digest('hex'));
    t.false(rc.lg.links.has(1));
    t.true(await until(() => !rs.lg.links.has(1)));
    t.is(rs.lg.state, 'ACTIVE');
    const ca = X[0].state() as { counters: { failovers: number; replayedBytes: number } };
    const cb = X[1].state() as { counters: { failovers: number; replayedBytes: number } };
    t.true(ca.counters.failovers === 1 && cb.counters.failovers === 1, JSON.stringify([ca.counters, cb.counters]));
    t.log(`replayed ${ca.counters.replayedBytes} + ${cb.counters.replayedBytes} bytes`);
    // the group keeps working on link 2: a new connection (subsequent contact)
    const [c2, s2, srv2] = await tcpPair(a1, b1);
    const [rc2, rs2] = await Promise.all([a.handshake('client', c2), b.handshake('server', s2)]);
    t.true(rc2.mode === 'smcr' && !rc2.firstContact);
    if (rc2.mode === 'smcr' && rs2.mode === 'smcr') {
      const Y = [a.attach(rc2), b.attach(rs2)] as const;
      t.is(await send(Y[0], Y[1], d1.subarray(0, 1 << 20)), createHash('sha256').update(d1.subarray(0, 1 << 20)).digest('hex'));
    }
    c.destroy(); s.destroy(); srv.close(); c2.destroy(); s2.destroy(); srv2.close();
  } finally {
    await Promise.all([a.close(), b.close()]);
  }
});

test.serial('device down and back on the client: failover, asymmetric re-add, REQUEST ADD LINK, symmetric link added and the asymmetric one deleted; bytes exact', async (t) => {
  const log: string[] = [];
  const [a, b, a1, b1] = await twoDeviceStacks({ log: (l: string) => { log.push(l); if (process.env.DEBUG_LG) console.log(l); } });
  const portEvent = (dev: unknown, type: number): boolean => (dev as EventEmitter).emit('async', { type, portNum: 1, reason: 'test' });
  const active = (lg: { links: Map<number, { state: string }> }): number[] => [...lg.links.entries()].filter(([, l]) => l.state === 'ACTIVE').map(([id]) => id);
  try {
    const [c, s, srv] = await tcpPair(a1, b1);
    const [rc, rs] = await Promise.all([a.handshake('client', c), b.handshake('server', s)]);
    if (rc.mode !== 'smcr' || rs.mode !== 'smcr') { t.fail('no SMC-R'); return; }
    t.true(await until(() => active(rc.lg).length === 2 && active(rs.lg).length === 2));
    t.deepEqual([rc.lg.type, rs.lg.type], ['SYMMETRIC', 'SYMMETRIC']);
    const X = [a.attach(rc), b.attach(rs)] as const;
    const d1 = randomBytes(16 << 20), d2 = randomBytes(16 << 20);
    const flows = Promise.all([send(X[0], X[1], d1), send(X[1], X[0], d2)]);
    await until(() => (X[1].state() as { counters: { bytesReceived: number } }).counters.bytesReceived > 2 << 20, 20_000);
    // the client's first device reports its port down (IBV_EVENT_PORT_ERR)
    portEvent(a.ports[0]!.pd.device, AsyncEventType.PORT_ERR);
    const [h1, h2] = await flows;
    t.is(h1, createHash('sha256').update(d1).digest('hex'));
    t.is(h2, createHash('sha256').update(d2).digest('hex'));
    // the server re-added a link at once; the client had only its second device: asymmetric
    t.true(await until(() => active(rc.lg).length === 2 && active(rs.lg).length === 2), JSON.stringify([active(rc.lg), active(rs.lg)]));
    t.deepEqual([active(rc.lg), rc.lg.type, rs.lg.type], [[2, 3], 'ASYMMETRIC_LOCAL', 'ASYMMETRIC_PEER']);
    t.deepEqual([...rc.lg.links.values()].map((l) => l.port.gid), [a.ports[1]!.gid, a.ports[1]!.gid], 'both client links on the device that stayed up');
    // the device returns: the client asks for a link, the server adds a symmetric one and deletes the asymmetric one
    portEvent(a.ports[0]!.pd.device, AsyncEventType.PORT_ACTIVE);
    t.true(await until(() => rc.lg.links.size === 2 && rs.lg.links.size === 2 && rc.lg.type === 'SYMMETRIC' && rs.lg.type === 'SYMMETRIC'), JSON.stringify([active(rc.lg), active(rs.lg)]));
    t.deepEqual([active(rc.lg), active(rs.lg)], [[2, 4], [2, 4]]);
    const mine = (lg: string, re: RegExp): string[] => log.filter((l) => l.includes(`${lg}/`) && re.test(l));
    t.is(mine(rc.lg.name, /> LLC REQUEST ADD LINK/).length, 1, 'the client sent REQUEST ADD LINK once');
    t.is(mine(rs.lg.name, /< LLC REQUEST ADD LINK/).length, 1, 'the server got it');
    t.is(mine(rs.lg.name, /> LLC DELETE LINK v2 req ORDERLY link 3 reason 0x00050000/).length, 1, 'the server deleted the asymmetric link 3');
    t.deepEqual([...rc.lg.links.values()].map((l) => [l.id, l.port.gid, l.peer?.gid]), [[2, a.ports[1]!.gid, b.ports[1]!.gid], [4, a.ports[0]!.gid, b.ports[0]!.gid]]);
    // data continues both ways on the symmetric pair, and a new connection (subsequent contact) runs
    const d3 = randomBytes(4 << 20);
    t.is(await send(X[0], X[1], d3), createHash('sha256').update(d3).digest('hex'));
    t.is(await send(X[1], X[0], d3), createHash('sha256').update(d3).digest('hex'));
    const [c2, s2, srv2] = await tcpPair(a1, b1);
    const [rc2, rs2] = await Promise.all([a.handshake('client', c2), b.handshake('server', s2)]);
    t.true(rc2.mode === 'smcr' && !rc2.firstContact && rc2.lg === rc.lg);
    if (rc2.mode === 'smcr' && rs2.mode === 'smcr') {
      const Y = [a.attach(rc2), b.attach(rs2)] as const;
      t.is(await send(Y[0], Y[1], d3), createHash('sha256').update(d3).digest('hex'));
      for (const conn of Y) void conn.close();
    }
    for (const conn of X) void conn.close();
    c.destroy(); s.destroy(); srv.close(); c2.destroy(); s2.destroy(); srv2.close();
  } finally {
    await Promise.all([a.close(), b.close()]);
  }
});

test.serial('max links 1 (CLC): no second link, and a returning device asks for none', async (t) => {
  const log: string[] = [];
  const [a, b, a1, b1] = await twoDeviceStacks({ maxLinks: 1, log: (l: string) => log.push(l) });
  try {
    const [c, s, srv] = await tcpPair(a1, b1);
    const [rc, rs] = await Promise.all([a.handshake('client', c), b.handshake('server', s)]);
    if (rc.mode !== 'smcr' || rs.mode !== 'smcr') { t.fail('no SMC-R'); return; }
    await new Promise((r) => setTimeout(r, 300));
    t.deepEqual([rc.lg.links.size, rs.lg.links.size, rc.lg.type], [1, 1, 'SINGLE']);
    (a.ports[1]!.pd.device as unknown as EventEmitter).emit('async', { type: AsyncEventType.PORT_ERR, portNum: 1 });
    (a.ports[1]!.pd.device as unknown as EventEmitter).emit('async', { type: AsyncEventType.PORT_ACTIVE, portNum: 1 });
    t.false(await rc.lg.requestAddLink());
    await new Promise((r) => setTimeout(r, 200));
    t.deepEqual(log.filter((l) => /ADD LINK/.test(l)), []);
    c.destroy(); s.destroy(); srv.close();
  } finally {
    await Promise.all([a.close(), b.close()]);
  }
});
