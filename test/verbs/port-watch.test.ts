// uroce's port 1 follows its IPv4 address (UroceOptions.watchMs): the address removed from its
// network device → port DOWN and IBV_EVENT_PORT_ERR; added again → ACTIVE and PORT_ACTIVE, as rxe
// reports its netdev going down and up (the endpoint fails that port's links over on PORT_ERR).
// Needs root: a /32 on lo that the test adds and removes (127.0.0.0/8 is local anyway).
import test from 'ava';
import { execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { openUroce } from '../../endpoint/verbs/uroce/index.js';
import { AsyncEventType, PortState, type AsyncEvent } from '../../endpoint/verbs/index.js';

const isRoot = process.getuid?.() === 0;
const ip = (...args: string[]): void => { execFileSync('ip', args, { stdio: 'ignore' }); };

(isRoot ? test.serial : test.serial.skip)('address removed → PORT_ERR and port DOWN; back → PORT_ACTIVE and ACTIVE', async (t) => {
  const addr = `127.77.${Math.floor(Math.random() * 200) + 1}.1`;
  ip('addr', 'add', `${addr}/32`, 'dev', 'lo');
  let removed = false;
  const dev = await openUroce({ address: addr, watchMs: 50 });
  try {
    t.is(dev.queryPort(1).state, PortState.ACTIVE);
    const down = once(dev, 'async') as Promise<[AsyncEvent]>;
    ip('addr', 'del', `${addr}/32`, 'dev', 'lo');
    removed = true;
    const [ev] = await down;
    t.is(ev.type, AsyncEventType.PORT_ERR);
    t.is(ev.portNum, 1);
    t.is(dev.queryPort(1).state, PortState.DOWN);
    const back = once(dev, 'async') as Promise<[AsyncEvent]>;
    ip('addr', 'add', `${addr}/32`, 'dev', 'lo');
    removed = false;
    t.is((await back)[0].type, AsyncEventType.PORT_ACTIVE);
    t.is(dev.queryPort(1).state, PortState.ACTIVE);
  } finally {
    await dev.close();
    if (!removed) ip('addr', 'del', `${addr}/32`, 'dev', 'lo');
  }
});

test('an address only implied by lo (in 127/8, not listed on a device) is not taken for gone: the port stays ACTIVE', async (t) => {
  const dev = await openUroce({ address: `127.66.${Math.floor(Math.random() * 200) + 1}.1` });
  try {
    let events = 0;
    dev.on('async', () => { events++; });
    await new Promise((r) => setTimeout(r, 700));
    t.is(events, 0);
    t.is(dev.queryPort(1).state, PortState.ACTIVE);
  } finally { await dev.close(); }
});
