// Tracker round 5 (docs/smcdump.md). A RoCE v2 frame's link comes from a small cache by
// (destination address, QPN) in front of the QP index, valid while the index is unchanged, and
// a TCP frame of the last frame's connection reuses it without its key string. Both must answer
// what the index and the key map answer, also when a later first contact reuses the same
// addresses, QPNs and ports (a capture repeated: every copy makes a new link group and TCP
// connection on the same tuples, the case a stale entry would get wrong). And a group's one
// ADD LINK GID is kept as the string itself, not a list of one: its events read the same.
import test from 'ava';
import { FrameDecoder } from '../../dissectors/frame.js';
import { Tracker } from '../../dissectors/tracker/tracker.js';
import { LinkCache } from '../../dissectors/tracker/linkcache.js';
import { LinkState } from '../../dissectors/tracker/link.js';
import type { LinkGroup } from '../../dissectors/tracker/model.js';
import { gidOfIp } from '../../dissectors/wire/common.js';
import { TcpIndex } from '../../dissectors/tracker/tcpindex.js';
import { TcpState } from '../../dissectors/tracker/tcpconn.js';
import { GroupState } from '../../dissectors/tracker/group.js';
import { lgEvent, lgEventSaid } from '../../dissectors/tracker/lgtype.js';
import { pcapPath, readFrames } from '../helpers.js';

const COPIES = 3;

test('every RoCE frame\'s link is the QP index\'s and every TCP frame\'s connection its own copy\'s, with the same tuples in every copy', async (t) => {
  const one = await readFrames(pcapPath('a-first-contact'));
  const dec = new FrameDecoder({ icrc: false });
  const tr = new Tracker({ compact: true, reuseNote: true });
  let roce = 0;
  const byCopy = new Set<string>();
  for (let copy = 0; copy < COPIES; copy++) {
    for (const f of one) {
      const d = dec.decode(f);
      const note = tr.feed(d);
      if (d.tcp) t.is(note.conn, copy + 1, `copy ${copy + 1}: a TCP frame of its own connection`);
      const link = tr.frameLink;
      if (!d.roce || !d.ip || link === undefined) continue;
      roce++;
      const want = tr.linkOfQp(gidOfIp(d.ip.dst), d.roce.ib.bth.destQp);
      t.true(link === want?.link, `copy ${copy + 1}: frame ${d.n} on the index's link`);
      t.is(link.lg.id, tr.groups[copy]!.id, `copy ${copy + 1}: frame ${d.n} in its copy's group`);
      byCopy.add(`${copy}:${link.name}`);
    }
  }
  t.is(tr.groups.length, COPIES);
  t.true(roce > COPIES * 20, `${roce} RoCE frames`);
  // the copies' links carry the same packets (none went to an earlier copy's link)
  const packets = (g: LinkGroup): string => g.links.map((l) => `${l.packets[0]}/${l.packets[1]}`).join(' ');
  for (const g of tr.groups) t.is(packets(g), packets(tr.groups[0]!));
  t.is(byCopy.size, COPIES);
});

test('a cached link answers only for its address, QPN and the index generation it was cached at', (t) => {
  const c = new LinkCache();
  const lg = { id: 1 } as unknown as LinkGroup;
  const a = new LinkState(lg, 'LG1/L1', 1, [{ gid: '::ffff:10.0.0.1', qpn: 0x11 }, { gid: '::ffff:10.0.0.2', qpn: 0x11 }], 1024, 'active', 1, [] as never);
  const b = new LinkState(lg, 'LG1/L2', 2, [{ gid: '::ffff:10.0.0.1', qpn: 0x12 }, { gid: '::ffff:10.0.0.2', qpn: 0x12 }], 1024, 'active', 1, [] as never);
  c.set('10.0.0.2', 0x11, 5, a, 1);
  t.is(c.get('10.0.0.2', 0x11, 5), a);
  t.is(c.hitEnd, 1);
  t.is(c.get('10.0.0.2', 0x11, 6), undefined, 'the index changed since');
  t.is(c.get('10.0.0.1', 0x11, 5), undefined, 'another address, same QPN');
  t.is(c.get('10.0.0.2', 0x12, 5), undefined, 'another QPN');
  c.set('10.0.0.1', 0x12, 5, b, 0);
  t.is(c.get('10.0.0.1', 0x12, 5), b);
  t.is(c.hitEnd, 0);
  // two QPs of one set (the ends of a link with the same QPN) are both kept; a third replaces
  // the one not used last, which then misses (never answers wrongly)
  c.set('10.0.0.1', 0x11, 5, b, 0);
  t.is(c.get('10.0.0.2', 0x11, 5), a);
  t.is(c.get('10.0.0.1', 0x11, 5), b);
  let other = 0x11 + 1;
  while (((other ^ (other >>> 5) ^ (other >>> 10)) & 31) !== ((0x11 ^ (0x11 >>> 5) ^ (0x11 >>> 10)) & 31)) other++;
  c.set('10.0.0.3', other, 5, a, 1);
  t.is(c.get('10.0.0.2', 0x11, 5), undefined, 'the entry not used last went');
  t.is(c.get('10.0.0.1', 0x11, 5), b);
  t.is(c.get('10.0.0.3', other, 5), a);
});

test('TCP connections are found by their tuple either way round, the newest of a tuple, also for an address with many', (t) => {
  const ix = new TcpIndex();
  const epoch = { base: 0n };
  const made: TcpState[] = [];
  // one server address with 40 clients on two client addresses (past the scan: a map by ports),
  // the same client ports on both client addresses
  for (let i = 0; i < 40; i++) {
    const c = new TcpState(epoch, i + 1, i % 2 === 0 ? '10.0.0.1' : '10.0.0.3', 40000 + (i >> 1), '10.0.0.2', 12345);
    ix.set(c);
    made.push(c);
  }
  for (const c of made) {
    t.is(ix.get(c.clientIp, c.clientPort, c.serverIp, c.serverPort), c);
    t.is(ix.get(c.serverIp, c.serverPort, c.clientIp, c.clientPort), c, 'the other way round');
  }
  t.is(ix.get('10.0.0.1', 40000, '10.0.0.2', 12346), undefined, 'another server port');
  t.is(ix.get('10.0.0.4', 40000, '10.0.0.2', 12345), undefined, 'another client address');
  // a tuple used again (a new SYN after the first connection ended): the newest answers
  const again = new TcpState(epoch, 41, '10.0.0.3', 40005, '10.0.0.2', 12345);
  ix.set(again);
  t.is(ix.get('10.0.0.2', 12345, '10.0.0.3', 40005), again);
  t.is(ix.get('10.0.0.1', 40005, '10.0.0.2', 12345), made[10]);
  // a few connections of one address: a list, the newest of a tuple again
  const small = new TcpIndex();
  const a = new TcpState(epoch, 1, '10.1.0.1', 1000, '10.1.0.2', 80), b = new TcpState(epoch, 2, '10.1.0.1', 1001, '10.1.0.2', 80);
  small.set(a); small.set(b);
  const a2 = new TcpState(epoch, 3, '10.1.0.2', 80, '10.1.0.1', 1000); // the same tuple, the server now the client
  small.set(a2);
  t.is(small.get('10.1.0.1', 1000, '10.1.0.2', 80), a2);
  t.is(small.get('10.1.0.1', 1001, '10.1.0.2', 80), b);
});

test('a group\'s one ADD LINK GID kept as a string reads back as its event; more extras after it as a list', (t) => {
  const epoch = { base: 1_000_000n };
  const at = (ns: number): bigint => epoch.base + BigInt(ns);
  const one = new GroupState(epoch, 3, true, 1);
  lgEventSaid(one, 1, at(1), 'LG3/#1', 'server', { kind: 'first-link', conn: 1 });
  lgEventSaid(one, 2, at(2), 'LG3/L1', 'client', { kind: 'confirmed' });
  one.addType('SINGLE', 2, at(2));
  lgEventSaid(one, 3, at(3), 'LG3/L2', 'server', { kind: 'add-link', gid: '::ffff:10.0.0.2', qpn: 0x12 });
  lgEventSaid(one, 4, at(4), 'LG3/L2', 'client', { kind: 'rejected', linkId: 2 });
  const texts = one.events.map((e) => `${e.frame} ${e.what} ${e.text}`);
  t.deepEqual(texts, [
    '1 link-added first link proposed in the CLC handshake (connection 1)',
    '2 link-confirmed LG3/L1 up (CONFIRM LINK answered by the client)',
    '3 link-added ADD LINK LG3/L2 proposed by the server (::ffff:10.0.0.2 QP 0x12)',
    '4 link-rejected ADD LINK of link 2 rejected by the client',
  ]);
  t.is(one.lastType(), 'SINGLE');
  // then an event of its own and a type change far away (not exact as a double): both extras
  lgEvent(one, { frame: 5, tsNs: at(5), what: 'failover', link: 'LG3/L1', by: 'client', text: 'moved' });
  const far = epoch.base + (1n << 60n) + 1n;
  lgEventSaid(one, 6, at(6), 'LG3/L3', 'server', { kind: 'add-link', gid: '::ffff:10.0.0.9', qpn: 0x13 });
  one.addType('SYMMETRIC', 7, far);
  const after = one.events.map((e) => `${e.frame} ${e.what} ${e.text}`);
  t.deepEqual(after.slice(0, 4), texts);
  t.deepEqual(after.slice(4), ['5 failover moved', '6 link-added ADD LINK LG3/L3 proposed by the server (::ffff:10.0.0.9 QP 0x13)']);
  const frames: number[] = [];
  one.forEachEvent((f) => frames.push(f));
  t.deepEqual(frames, [1, 2, 3, 4, 5, 6]);
  t.deepEqual(one.types.map((x) => `${x.frame} ${x.type}`), ['2 SINGLE', '7 SYMMETRIC']);
  t.is(one.lastType(), 'SYMMETRIC');
});

test('links without rare fields share one record that nothing writes: a new link reads none after captures full of them', async (t) => {
  // retransmissions, NAK-free losses, deletions, unanswered TEST LINKs, RMB keys of links not up yet
  let rare = 0;
  for (const name of ['e-testlink-teardown', 'l-failover', 'm-device-removal', 'n-link-never-up', 'b-second-contact']) {
    const dec = new FrameDecoder({ icrc: false });
    const tr = new Tracker({ compact: true, reuseNote: true });
    for (const f of await readFrames(pcapPath(name))) tr.feed(dec.decode(f));
    tr.finish();
    for (const g of tr.groups) for (const l of g.links) if (l.retransmits > 0 || l.deleted || l.lost || l.testLinkUnanswered) rare++;
  }
  t.true(rare >= 3, `${rare} links with rare fields`);
  const lg = { id: 1 } as unknown as LinkGroup;
  const fresh = new LinkState(lg, 'LG1/L1', 1, [{ gid: 'a' }, { gid: 'b' }], 0, 'unknown', 1, [] as never);
  t.deepEqual([fresh.deleted, fresh.lost, fresh.testLinkUnanswered, fresh.rmbKeys, fresh.retransmits, fresh.psnGaps, fresh.naks, fresh.rnrNaks],
    [undefined, undefined, undefined, undefined, 0, 0, 0, 0]);
  t.deepEqual([...fresh.retx, ...fresh.unclaimed], [undefined, undefined, undefined, undefined]);
  // setting a rare field gives that link a record of its own
  fresh.retransmits = 2;
  const other = new LinkState(lg, 'LG1/L2', 2, [{ gid: 'a' }, { gid: 'b' }], 0, 'unknown', 1, [] as never);
  t.is(fresh.retransmits, 2);
  t.is(other.retransmits, 0);
});
