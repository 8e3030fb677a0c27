// Throughput of one CdcConnection over uroce on loopback: 256 MiB one way, SHA-256 verified.
// The number goes to docs/endpoint.md ("data path"); the assertion only checks integrity and a
// floor far below the measured rate (the machine is shared, timing is noisy).
import test from 'ava';
import { createHash } from 'node:crypto';
import { pattern } from '../verbs/harness.js';
import { linkPair, connPair, writeAll, readN } from './cdc-harness.js';

test('256 MiB over one CdcConnection (1 MiB RMBE and send buffer), SHA-256 verified', async (t) => {
  const p = await linkPair(['127.0.0.9', '127.0.0.10']);
  try {
    const { a, b } = connPair(p, { rmbeA: 1 << 20, rmbeB: 1 << 20 });
    const block = pattern(16 << 20, 3);
    const total = 256 << 20;
    const expect = createHash('sha256');
    for (let i = 0; i < total / block.length; i++) expect.update(block);
    const h = createHash('sha256');
    const t0 = performance.now();
    const writer = (async () => { for (let i = 0; i < total / block.length; i++) await writeAll(a.conn, block, 1 << 20); })();
    const [, got] = await Promise.all([writer, readN(b.conn, total, (x) => h.update(x), 1 << 20)]);
    const ms = performance.now() - t0;
    t.is(got, total);
    t.is(h.digest('hex'), expect.digest('hex'));
    const mbs = total / ms / 1000;
    const sa = a.conn.state(), sb = b.conn.state();
    t.log(`256 MiB in ${(ms / 1000).toFixed(2)} s = ${mbs.toFixed(1)} MB/s; ${sa.counters.cdcSent} data CDCs, ${sa.counters.rdmaWrites} RDMA WRITEs, ${sb.counters.cursorUpdates} cursor updates, ${sa.counters.windowStalls} window stalls`);
    t.true(mbs > 5, `${mbs} MB/s`);
    await Promise.all([a.conn.close(), b.conn.close()]);
  } finally {
    await p.close();
  }
});
