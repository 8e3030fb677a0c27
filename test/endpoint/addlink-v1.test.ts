// SMC-Rv1 link groups with a second link: ADD LINK v1 (44 bytes, no rkey list) followed by the
// ADD LINK CONTINUATION exchange that carries every RMB's rkey on the new link, two per message,
// the server's requests answered by the client's responses until both sides have sent all of
// theirs (Linux smc_llc_srv_rkey_exchange / smc_llc_cli_rkey_exchange). Endpoint ↔ endpoint over
// uroce with two devices per side: the kernel lab cannot run v1 (rxe has no RoCE v1 GIDs).
import test from 'ava';
import { createHash, randomBytes } from 'node:crypto';
import type { EventEmitter } from 'node:events';
import { AsyncEventType } from '../../endpoint/verbs/index.js';
import { SmcStack } from '../../endpoint/stack.js';
import { LinkGroup as LinkGroupClass, type LinkGroup } from '../../endpoint/llc/linkgroup.js';
import type { CdcConnection } from '../../endpoint/cdc/connection.js';
import { freePair, send, tcpPair, until } from './stacks.js';

async function v1Stacks(log: string[], octets: [number, number]): Promise<[SmcStack, SmcStack, string, string]> {
  const [a1, b1] = await freePair(octets[0]);
  const [a2, b2] = await freePair(octets[1]);
  // no UEID and versions [1]: CLC v1 only, so the link group is SMC-Rv1 with LLC v1
  const opts = { versions: [1] as Array<1 | 2>, tcpOption: 'ignore' as const, log: (l: string) => { log.push(l); if (process.env.DEBUG_LG) console.log(l); } };
  const a = await SmcStack.open({ ...opts, device: { provider: 'uroce', address: a1 }, alternates: [{ provider: 'uroce', address: a2 }] });
  const b = await SmcStack.open({ ...opts, device: { provider: 'uroce', address: b1 }, alternates: [{ provider: 'uroce', address: b2 }] });
  return [a, b, a1, b1];
}

const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');

const active = (lg: LinkGroup): number[] => [...lg.links.entries()].filter(([, l]) => l.state === 'ACTIVE').map(([id]) => id);
/** rtokens per connection of a group's snapshot: how many links know each peer RMB. */
const rtokenLinks = (lg: LinkGroup): number[][] => lg.snapshot().conns.map((c) => c.rtokens.map((r) => r.link).sort());
/** LLC lines of one group's log in one direction matching `re`. */
const llc = (log: string[], lg: LinkGroup, dir: '>' | '<', re: RegExp): string[] => log.filter((l) => l.startsWith(`${lg.name}/`) && l.includes(` ${dir} LLC `) && re.test(l));

test.serial('v1: the server adds a second link with ADD LINK v1 + ADD LINK CONTINUATION; rkeys known on both links; data exact', async (t) => {
  const log: string[] = [];
  const [a, b, a1, b1] = await v1Stacks(log, [76, 77]);
  try {
    const [c, s, srv] = await tcpPair(a1, b1);
    const [rc, rs] = await Promise.all([a.handshake('client', c), b.handshake('server', s)]);
    if (rc.mode !== 'smcr' || rs.mode !== 'smcr') { t.fail('no SMC-R'); return; }
    t.is(rc.lg.version, 1);
    t.true(await until(() => active(rc.lg).length === 2 && active(rs.lg).length === 2), log.join('\n'));
    t.deepEqual([rc.lg.type, rs.lg.type], ['SYMMETRIC', 'SYMMETRIC']);
    // the wire: ADD LINK v1 without rkeys, then one CONTINUATION each way with the one RMB
    t.deepEqual(llc(log, rs.lg, '>', /ADD LINK v1 req/).length, 1);
    t.false(llc(log, rs.lg, '>', /ADD LINK v1 req/)[0]!.includes('rkeys'), 'v1 ADD LINK carries no rkey list');
    const contS = llc(log, rs.lg, '>', /ADD LINK CONT v1 req link 2 remaining 1 0x/);
    const contC = llc(log, rc.lg, '>', /ADD LINK CONT v1 rsp link 2 remaining 1 0x/);
    t.is(contS.length, 1, log.join('\n'));
    t.is(contC.length, 1);
    t.deepEqual([rtokenLinks(rc.lg), rtokenLinks(rs.lg)], [[[1, 2]], [[1, 2]]], 'the peer RMB is known on both links, on both sides');
    const X = [a.attach(rc), b.attach(rs)] as const;
    const data = randomBytes(2 << 20);
    t.is(await send(X[0], X[1], data), sha(data));
    t.is(await send(X[1], X[0], data), sha(data));
    // subsequent contact: the new RMB is confirmed on both links (CONFIRM RKEY v1 with the other link's rtoken)
    const [c2, s2, srv2] = await tcpPair(a1, b1);
    const [rc2, rs2] = await Promise.all([a.handshake('client', c2), b.handshake('server', s2)]);
    if (rc2.mode !== 'smcr' || rs2.mode !== 'smcr') { t.fail('no SMC-R (2)'); return; }
    t.false(rc2.firstContact);
    t.deepEqual(rtokenLinks(rs.lg), [[1, 2], [1, 2]]);
    const Y = [a.attach(rc2), b.attach(rs2)] as const;
    t.is(await send(Y[0], Y[1], data), sha(data));
    for (const conn of [...X, ...Y]) void conn.close();
    c.destroy(); s.destroy(); srv.close(); c2.destroy(); s2.destroy(); srv2.close();
  } finally {
    await Promise.all([a.close(), b.close()]);
  }
});

test.serial('v1: server device down during a transfer, failover, then back: links re-added with three RMBs per side (two CONTINUATION rounds), every byte exact', async (t) => {
  const log: string[] = [];
  const [a, b, a1, b1] = await v1Stacks(log, [78, 79]);
  const portEvent = (dev: unknown, type: number): boolean => (dev as EventEmitter).emit('async', { type, portNum: 1, reason: 'test' });
  const servers: Array<{ close(): void }> = [];
  const socks: Array<{ destroy(): void }> = [];
  try {
    const pairs: Array<readonly [CdcConnection, CdcConnection]> = [];
    let lgC: LinkGroup | undefined, lgS: LinkGroup | undefined;
    for (let i = 0; i < 3; i++) {
      const [c, s, srv] = await tcpPair(a1, b1);
      servers.push(srv); socks.push(c, s);
      const [rc, rs] = await Promise.all([a.handshake('client', c), b.handshake('server', s)]);
      if (rc.mode !== 'smcr' || rs.mode !== 'smcr') { t.fail(`no SMC-R (${i})`); return; }
      lgC = rc.lg; lgS = rs.lg;
      pairs.push([a.attach(rc), b.attach(rs)] as const);
      if (i === 0) t.true(await until(() => active(rc.lg).length === 2 && active(rs.lg).length === 2), log.join('\n'));
    }
    const [gc, gs] = [lgC!, lgS!];
    t.deepEqual(rtokenLinks(gs), [[1, 2], [1, 2], [1, 2]]);
    // the server's first device goes down while connection 1 carries data both ways
    const d1 = randomBytes(8 << 20), d2 = randomBytes(8 << 20);
    const [X0, X1] = pairs[0]!;
    const flows = Promise.all([send(X0, X1, d1), send(X1, X0, d2)]);
    await until(() => (X1.state() as { counters: { bytesReceived: number } }).counters.bytesReceived > 1 << 20, 20_000);
    const before = log.length;
    portEvent(b.ports[0]!.pd.device, AsyncEventType.PORT_ERR);
    const [h1, h2] = await flows;
    t.is(h1, sha(d1));
    t.is(h2, sha(d2));
    // the server re-adds a link over its surviving device (asymmetric: toward the client's free GID)
    t.true(await until(() => active(gc).length === 2 && active(gs).length === 2), log.slice(before).join('\n'));
    const reAdd = log.slice(before);
    // three RMBs per side: two CONTINUATIONs each way (2 + 1 rkeys, "remaining" counts down)
    t.deepEqual(llc(reAdd, gs, '>', /ADD LINK CONT v1 req/).map((l) => / remaining (\d+)/.exec(l)![1]), ['3', '1'], reAdd.join('\n'));
    t.deepEqual(llc(reAdd, gc, '>', /ADD LINK CONT v1 rsp/).map((l) => / remaining (\d+)/.exec(l)![1]), ['3', '1']);
    for (const lg of [gc, gs]) t.deepEqual(rtokenLinks(lg).map((x) => x.length), [2, 2, 2], `${lg.name}: every peer RMB known on both active links`);
    // the device returns: the server adds a symmetric link and deletes the asymmetric one
    portEvent(b.ports[0]!.pd.device, AsyncEventType.PORT_ACTIVE);
    t.true(await until(() => gc.type === 'SYMMETRIC' && gs.type === 'SYMMETRIC' && gc.links.size === 2 && gs.links.size === 2), JSON.stringify([active(gc), active(gs), gc.type, gs.type]));
    // every connection carries data both ways afterwards
    const d3 = randomBytes(1 << 20);
    for (const [x, y] of pairs) {
      t.is(await send(x, y, d3), sha(d3));
      t.is(await send(y, x, d3), sha(d3));
    }
    t.is(gc.stats.rejectsSent + gs.stats.rejectsSent, 0, 'no ADD LINK rejected');
    for (const [x, y] of pairs) { void x.close(); void y.close(); }
  } finally {
    for (const s of socks) s.destroy();
    for (const s of servers) s.close();
    await Promise.all([a.close(), b.close()]);
  }
});

test.serial('v1: a peer whose CONTINUATIONs never end (it keeps announcing rkeys) is cut off after 128 rounds; the group keeps its first link and its data', async (t) => {
  const log: string[] = [];
  // Both sides announce 255 rkeys still to come in every CONTINUATION, as a broken or hostile
  // peer could: without a bound the exchange would never end.
  const proto = LinkGroupClass.prototype as unknown as { addLinkContMsg: (...a: unknown[]) => { numRkeys: number } };
  const orig = proto.addLinkContMsg;
  proto.addLinkContMsg = function (this: unknown, ...a: unknown[]) { const m = orig.apply(this, a); m.numRkeys = 255; return m; };
  const [a, b, a1, b1] = await v1Stacks(log, [80, 81]);
  try {
    const [c, s, srv] = await tcpPair(a1, b1);
    const [rc, rs] = await Promise.all([a.handshake('client', c), b.handshake('server', s)]);
    if (rc.mode !== 'smcr' || rs.mode !== 'smcr') { t.fail('no SMC-R'); return; }
    t.true(await until(() => log.some((l) => /no end after 128 rounds/.test(l)) || (rs.lg.links.size === 1 && llc(log, rs.lg, '>', /ADD LINK CONT/).length >= 128), 20_000), log.slice(-5).join('\n'));
    t.true(await until(() => rs.lg.links.size === 1 && rc.lg.links.size === 1, 10_000), 'the half-added link is gone on both sides');
    const sent = llc(log, rs.lg, '>', /ADD LINK CONT v1 req/).length;
    t.true(sent >= 100 && sent <= 129, `the server sent ${sent} CONTINUATIONs`);
    proto.addLinkContMsg = orig;
    const X = [a.attach(rc), b.attach(rs)] as const;
    const data = randomBytes(1 << 20);
    t.is(await send(X[0], X[1], data), sha(data), 'the first link still carries data');
    for (const conn of X) void conn.close();
    c.destroy(); s.destroy(); srv.close();
  } finally {
    proto.addLinkContMsg = orig;
    await Promise.all([a.close(), b.close()]);
  }
});
