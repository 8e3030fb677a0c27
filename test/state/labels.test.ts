// Frame labels of the state join come from the tracker's link and connection of each frame: a
// connection that moved to another link (failover) is named on the link its frame travels on,
// and a frame on a link the state does not list gets no endpoint label and asks for a newer state.
// The tracker side is built by hand here: only the fields the join reads (Tracker.frameLink /
// frameDir, the note's connection index, the link's ends, the connection's tokens).
import test from 'ava';
import { StateJoin } from '../../cli/statejoin.js';
import { parseEndpointState } from '../../cli/stateread.js';
import type { DecodedFrame } from '../../dissectors/frame.js';
import type { FrameNote, Link, LinkGroup, SmcConn } from '../../dissectors/tracker/model.js';
import type { Tracker } from '../../dissectors/tracker/tracker.js';

const A = '::ffff:10.0.0.1', A2 = '::ffff:10.0.1.1', B = '::ffff:10.0.0.2', B2 = '::ffff:10.0.1.2';

const parsed = parseEndpointState({
  gid: A,
  linkGroups: [{
    name: 'LG1', state: 'ACTIVE',
    links: [{ id: 1, state: 'ACTIVE', gid: A, qpn: 0x11, peer: { gid: B, qpn: 0x21 } }, { id: 2, state: 'ACTIVE', gid: A2, qpn: 0x12, peer: { gid: B2, qpn: 0x22 } }],
    conns: [], rmbs: [],
  }],
  connections: [{ key: 'LG1/5', linkGroup: 'LG1', localToken: 5, peerToken: 6, tx: {}, rx: {}, counters: {} }],
});

function setup(): { join: StateJoin; fake: { frameLink: Link | undefined; frameDir: 0 | 1 }; l1: Link; l2: Link; l3: Link; conn: SmcConn } {
  const lg = { conns: [] as SmcConn[] } as unknown as LinkGroup;
  // the endpoint is end 1 (server) of every link; dir 0 = the peer sends, the endpoint receives
  const link = (peer: [string, number], ours: [string, number]): Link => ({ lg, name: 'x', ends: [{ gid: peer[0], qpn: peer[1] }, { gid: ours[0], qpn: ours[1] }] }) as unknown as Link;
  const l1 = link([B, 0x21], [A, 0x11]), l2 = link([B2, 0x22], [A2, 0x12]), l3 = link([B2, 0x23], [A2, 0x13]);
  const conn = { index: 7, lg, sides: [{ gid: B, token: 6 }, { gid: A, token: 5 }] } as unknown as SmcConn;
  lg.conns.push(conn);
  const fake = { frameLink: undefined as Link | undefined, frameDir: 0 as 0 | 1 };
  return { join: new StateJoin(parsed.state!, fake as unknown as Tracker), fake, l1, l2, l3, conn };
}

const SEND_ONLY = 0x04;
function frame(n: number): DecodedFrame {
  return { n, tsNs: BigInt(n) * 1000n, roce: { ib: { bth: { opcode: SEND_ONLY } } } } as unknown as DecodedFrame;
}
const note = (conn?: number): FrameNote => ({ anomalies: [], ...(conn !== undefined ? { conn } : {}) });

test('a connection is named on the link its frame travels on, also after it moved', (t) => {
  t.truthy(parsed.state);
  const { join, fake, l1, l2 } = setup();
  const on = (l: Link, dir: 0 | 1, n: number): ReturnType<StateJoin['feed']> => { fake.frameLink = l; fake.frameDir = dir; return join.feed(frame(n), note(7)); };
  t.deepEqual(on(l1, 0, 1), { linkGroup: 'LG1', link: 'LG1/L1', dir: 'in', conn: 'LG1/5' });
  t.deepEqual(on(l1, 1, 2), { linkGroup: 'LG1', link: 'LG1/L1', dir: 'out', conn: 'LG1/5' });
  // failover: the same connection's CDCs now travel on link 2
  t.deepEqual(on(l2, 0, 3), { linkGroup: 'LG1', link: 'LG1/L2', dir: 'in', conn: 'LG1/5' });
  t.deepEqual(on(l2, 1, 4), { linkGroup: 'LG1', link: 'LG1/L2', dir: 'out', conn: 'LG1/5' });
  t.deepEqual(on(l1, 0, 5), { linkGroup: 'LG1', link: 'LG1/L1', dir: 'in', conn: 'LG1/5' });
  t.false(join.stale);
});

test('a frame on a link the state does not list: no label, and a newer state is wanted', (t) => {
  const { join, fake, l3 } = setup();
  fake.frameLink = l3;
  fake.frameDir = 0;
  t.is(join.feed(frame(1), note(7)), undefined);
  t.true(join.stale);
  // a frame the tracker put on no RC link (not RoCE, or UD): no label, nothing asked
  const { join: j2, fake: f2 } = setup();
  f2.frameLink = undefined;
  t.is(j2.feed(frame(1), note()), undefined);
  t.false(j2.stale);
});
