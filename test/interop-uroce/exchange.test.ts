// The out-of-band exchanges the interop lab uses (ibv_rc_pingpong's and perftest's TCP
// messages), checked against bytes captured from the real tools in the lab (guest<->guest,
// rdma-core 44 / perftest 4.5+0.17 in Debian bookworm), and run uroce<->uroce on loopback —
// no qemu needed. The runs against the real tools are in lab.ts (see docs/uroce.md).
import test from 'ava';
import { openUroce, type UroceDevice } from '../../endpoint/verbs/uroce/index.js';
import { destFromWire, destToWire, rcPingpongClient, rcPingpongServer } from './rcpingpong.js';
import { keysFromWire, keysToWire, perftestClient, perftestServer, KEY_MSG_SIZE_GID } from './perftest.js';

// Captured on the lab bridge (ibv_rc_pingpong client 10.55.0.1 -> server 10.55.0.2).
const RC_PINGPONG_MSG = '0000:000011:09c428:00000000000000000000ffff0a370001\0';
// Captured (ib_send_bw client 10.55.0.1 -> server 10.55.0.2), one of the 108-byte handshakes.
const PERFTEST_KEYS = '0000:0001:000012:9bda7b:000003df:00007f48df621000:00:00:00:00:00:00:00:00:00:00:ff:ff:0a:37:00:01:00000000:\0';

test('ibv_rc_pingpong address message: parse and re-encode the captured bytes', (t) => {
  const b = Buffer.from(RC_PINGPONG_MSG, 'latin1');
  t.is(b.length, 52);
  const d = destFromWire(b);
  t.deepEqual(d, { lid: 0, qpn: 0x11, psn: 0x09c428, gid: '::ffff:10.55.0.1' });
  t.deepEqual(destToWire(d), b);
});

test('perftest handshake message: parse and re-encode the captured bytes', (t) => {
  const b = Buffer.from(PERFTEST_KEYS, 'latin1');
  t.is(b.length, KEY_MSG_SIZE_GID);
  const k = keysFromWire(b);
  t.like(k, { lid: 0, outReads: 1, qpn: 0x12, psn: 0x9bda7b, rkey: 0x3df, vaddr: 0x7f48df621000n, gid: '::ffff:10.55.0.1', srqn: 0 });
  t.deepEqual(keysToWire(k), b);
});

test('rc_pingpong and perftest exchanges, uroce on both ends (loopback)', async (t) => {
  const a = await openUroce({ address: '127.0.0.13' }) as UroceDevice;
  const b = await openUroce({ address: '127.0.0.14' }) as UroceDevice;
  try {
    let ready!: () => void;
    let listening = new Promise<void>((r) => { ready = r; });
    const s = rcPingpongServer(b, '127.0.0.14', { port: 18711, iters: 50 }, () => ready());
    await listening;
    const c = await rcPingpongClient(a, '127.0.0.14', { port: 18711, iters: 50 });
    t.is((await s).bytes, 50 * 4096 * 2);
    t.is(c.peer.gid, '::ffff:127.0.0.14');
    for (const kind of ['send_bw', 'write_bw', 'send_lat'] as const) {
      listening = new Promise<void>((r) => { ready = r; });
      const srv = perftestServer(b, kind, '127.0.0.14', { port: 18712, iters: 40 }, () => ready());
      await listening;
      const r = await perftestClient(a, kind, '127.0.0.14', { port: 18712, iters: 40 });
      const rs = await srv;
      t.true(r.seconds > 0, `${kind}: ${r.summary} / server: ${rs.summary}`);
      if (kind === 'send_bw') t.is(rs.bytes, 40 * 65536);
      if (kind === 'send_lat') t.truthy(r.latUs);
    }
  } finally {
    await a.close();
    await b.close();
  }
});
