// Memory round 4 of the tracker (docs/smcdump.md): a group's history packed as numbers
// (tracker/group.ts), the QP index keyed to links without slot objects, one reused frame note,
// and no RMB entry left behind by a rejected ADD LINK. Each keeps what the model says.
import test from 'ava';
import { FrameDecoder } from '../../dissectors/frame.js';
import { QpIndex, Tracker } from '../../dissectors/tracker/tracker.js';
import { GroupState } from '../../dissectors/tracker/group.js';
import { LinkState } from '../../dissectors/tracker/link.js';
import { lgEvent, lgEventSaid, noteType } from '../../dissectors/tracker/lgtype.js';
import type { FrameNote, LgEvent, LinkSent } from '../../dissectors/tracker/model.js';
import { jsonReplacer } from '../../dissectors/wire/common.js';
import { pcapPath, readFrames } from '../helpers.js';

const CAPS = ['a-first-contact', 'b-second-contact', 'd-bulk-2MiB', 'e-testlink-teardown', 'l-failover', 'm-device-removal', 'o-urgent-stall'];

test('a reused note says per frame exactly what a fresh note says (same JSON text), and is one object', async (t) => {
  let frames = 0, noted = 0;
  for (const name of CAPS) {
    const fs = await readFrames(pcapPath(name));
    const dec1 = new FrameDecoder({ icrc: false }), dec2 = new FrameDecoder({ icrc: false });
    const fresh = new Tracker({ compact: true }), reused = new Tracker({ compact: true, reuseNote: true });
    let first: FrameNote | undefined;
    for (const f of fs) {
      const a = fresh.feed(dec1.decode(f)), b = reused.feed(dec2.decode(f));
      first ??= b;
      t.is(b, first, `${name}: one note object`);
      t.is(JSON.stringify(b, jsonReplacer), JSON.stringify(a, jsonReplacer), `${name}: frame ${frames + 1}`);
      t.is(b.anomalies.length, a.anomalies.length);
      frames++;
      if (a.link !== undefined || a.conn !== undefined) noted++;
    }
  }
  t.true(frames > 5000 && noted > 4000, `${frames} frames, ${noted} with a link or connection`);
});

const epoch = { base: 1_700_000_000_000_000_000n };

test('a group\'s packed history reads back as the model\'s events and types, in order', (t) => {
  const g = new GroupState(epoch, 7, true, 10);
  const at = (ns: number): bigint => epoch.base + BigInt(ns);
  lgEventSaid(g, 10, at(5), 'LG7/#1', 'server', { kind: 'first-link', conn: 3 });
  lgEventSaid(g, 12, at(900), 'LG7/L1', 'client', { kind: 'confirmed' });
  noteType(g, 12, at(900));
  lgEventSaid(g, 14, at(1000), 'LG7/L2', 'server', { kind: 'add-link', gid: '::ffff:10.0.0.2', qpn: 0x12 });
  lgEvent(g, { frame: 15, tsNs: at(1100), what: 'failover', link: 'LG7/L2', by: 'client', text: 'connection 3 moved to LG7/L2' });
  lgEventSaid(g, 16, at(1200), 'LG7/L2', 'client', { kind: 'rejected', linkId: 2 });
  // a time not exact as a double since the epoch, and a name that is not the group's usual one
  const far = epoch.base + (1n << 60n) + 1n;
  lgEventSaid(g, 17, far, 'LG7/L1', 'server', { kind: 'confirmed' });
  lgEventSaid(g, 18, at(1300), 'LG8/L1', 'server', { kind: 'confirmed' });
  noteType(g, 19, far);
  const want: LgEvent[] = [
    { frame: 10, tsNs: at(5), what: 'link-added', link: 'LG7/#1', by: 'server', text: 'first link proposed in the CLC handshake (connection 3)' },
    { frame: 12, tsNs: at(900), what: 'link-confirmed', link: 'LG7/L1', by: 'client', text: 'LG7/L1 up (CONFIRM LINK answered by the client)' },
    { frame: 14, tsNs: at(1000), what: 'link-added', link: 'LG7/L2', by: 'server', text: 'ADD LINK LG7/L2 proposed by the server (::ffff:10.0.0.2 QP 0x12)' },
    { frame: 15, tsNs: at(1100), what: 'failover', link: 'LG7/L2', by: 'client', text: 'connection 3 moved to LG7/L2' },
    { frame: 16, tsNs: at(1200), what: 'link-rejected', link: 'LG7/L2', by: 'client', text: 'ADD LINK of link 2 rejected by the client' },
    { frame: 17, tsNs: far, what: 'link-confirmed', link: 'LG7/L1', by: 'server', text: 'LG7/L1 up (CONFIRM LINK answered by the server)' },
    { frame: 18, tsNs: at(1300), what: 'link-confirmed', link: 'LG8/L1', by: 'server', text: 'LG8/L1 up (CONFIRM LINK answered by the server)' },
  ];
  t.deepEqual(g.events, want);
  // JSON as plain objects gave it (key order included)
  t.is(JSON.stringify(g.events, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v)), JSON.stringify(want, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v)));
  // no link is active in this bare group: NONE is not recorded after a type, so one type
  t.deepEqual(g.types, [{ type: 'NONE', frame: 12, tsNs: at(900) }]);
  t.is(g.lastType(), 'NONE');
  const seen: [number, string][] = [];
  g.forEachEvent((f, what) => seen.push([f, what]));
  t.deepEqual(seen, want.map((e) => [e.frame, e.what]));
});

test('what a first contact said is shared between groups that said the same, and changes per group', (t) => {
  const a = new GroupState(epoch, 1, true, 1), b = new GroupState(epoch, 2, true, 2);
  for (const g of [a, b]) g.said({ clientPeer: 'p1', serverPeer: 'p2', clientHost: 'ha', serverHost: 'hb', version: 2, release: 1, ueid: 'U', maxLinks: undefined, maxConns: undefined });
  t.is((a as unknown as { hello: unknown }).hello, (b as unknown as { hello: unknown }).hello);
  b.maxLinks = 3;
  t.is(a.maxLinks, undefined);
  t.is(b.maxLinks, 3);
  t.is(b.clientHost, 'ha');
  t.is(b.serverPeer, 'p2');
});

const NO_SENT = [{}, {}] as unknown as [LinkSent, LinkSent];

test('the QP index finds each link by either end, also past 16 QPs on one GID, and forgets a deleted QP', (t) => {
  const g = new GroupState(epoch, 1, true, 1);
  const idx = new QpIndex();
  const links: LinkState[] = [];
  for (let q = 1; q <= 40; q++) {
    const l = new LinkState(g, `LG1/L${q}`, q, [{ gid: 'A', qpn: q }, { gid: `B${q}`, qpn: 100 + q }], 1024, 'active', 1, NO_SENT);
    idx.set('A', q, l);
    idx.set(`B${q}`, 100 + q, l);
    links.push(l);
    // every link so far, from both ends, while the GID 'A' goes from one link to a list to a map
    for (const m of links) {
      const i = links.indexOf(m) + 1;
      if (idx.get('A', i) !== m || idx.get(`B${i}`, 100 + i) !== m) { t.fail(`link ${i} lost after ${q} QPs on A`); return; }
    }
  }
  t.is(idx.get('A', 41), undefined);
  t.is(idx.get('B1', 1), undefined);
  idx.delete('A', 7);
  t.is(idx.get('A', 7), undefined);
  t.is(idx.get('A', 8), links[7]);
  // a link with both ends on one GID (loopback) is found by each QP, and leaves with both
  const lo = new LinkState(g, 'LG1/L99', 99, [{ gid: 'L', qpn: 1 }, { gid: 'L', qpn: 2 }], 1024, 'active', 1, NO_SENT);
  const other = new LinkState(g, 'LG1/L98', 98, [{ gid: 'L', qpn: 3 }, { gid: 'M', qpn: 4 }], 1024, 'active', 1, NO_SENT);
  idx.set('L', 1, lo); idx.set('L', 2, lo); idx.set('L', 3, other);
  t.is(idx.get('L', 1), lo);
  t.is(idx.get('L', 2), lo);
  t.is(idx.get('L', 3), other);
  idx.delete('L', 1);
  t.is(idx.get('L', 1), undefined);
  t.is(idx.get('L', 2), undefined);
  t.is(idx.get('L', 3), other);
  // and from a GID past 16 QPs (a map)
  idx.delete('A', 20);
  t.is(idx.get('A', 20), undefined);
  t.is(idx.get('A', 21), links[20]);
});

test('a rejected ADD LINK leaves no RMB entry behind, and WRITEs still find their connection by the CLC', async (t) => {
  const dec = new FrameDecoder({ icrc: false });
  const tr = new Tracker({ compact: true });
  for (const f of await readFrames(pcapPath('a-first-contact'))) tr.feed(dec.decode(f));
  tr.finish();
  const g = tr.groups[0]!;
  t.deepEqual(g.events.map((e) => e.what), ['link-added', 'link-confirmed', 'link-added', 'link-rejected']);
  t.is((tr as unknown as { rmbs: Map<number, unknown> }).rmbs.size, 0);
  const l = g.links[0]!, c = g.conns[0]!;
  t.is(tr.rmbConn(l, 0, c.sides[1].rkey!), c);
  t.is(tr.rmbConn(l, 1, c.sides[0].rkey!), c);
  t.is(l.ends[0].qpn, 0x11);
  t.deepEqual(tr.linkOfQp(l.ends[1].gid, 0x11), { link: l, end: 1 });
});
