// Many connections on one link: their CDCs compete for the link's 16 send slots, so sends queue
// and are posted by the completions that free slots. Each connection's CDCs (and the RDMA
// WRITEs before them) must still reach the QP in the order they were sent; a later CDC that
// overtakes an earlier one announces bytes whose WRITE is not posted yet, and the reader gets
// stale ring bytes. Every byte is checked by SHA-256, both ways (echo), with and without GSO.
import test from 'ava';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { createServer, connect, closeAll, type SmcSocket } from '../../endpoint/index.js';
import { freePair } from './stacks.js';

const CONNS = 32;
const BYTES = 2 << 20;

function pattern(n: number, seed: number): Buffer {
  const b = Buffer.alloc(n);
  let x = seed | 1;
  for (let i = 0; i + 4 <= n; i += 4) { x ^= x << 13; x ^= x >>> 17; x ^= x << 5; b.writeInt32LE(x, i); }
  return b;
}

/** Write `total` bytes in 256 KiB chunks while reading the echo; hashes of both directions. */
async function exchange(s: SmcSocket, total: number, seed: number): Promise<{ sent: string; got: string; bytes: number }> {
  const hs = createHash('sha256'), hr = createHash('sha256');
  let bytes = 0;
  const reader = (async () => { for await (const c of s) { hr.update(c as Buffer); bytes += (c as Buffer).length; } })();
  for (let off = 0; off < total; off += 256 * 1024) {
    const b = pattern(Math.min(256 * 1024, total - off), seed + off);
    hs.update(b);
    if (!s.write(b)) await once(s, 'drain');
  }
  s.end();
  await reader;
  return { sent: hs.digest('hex'), got: hr.digest('hex'), bytes };
}

test.after.always(async () => { await closeAll(); });

for (const gso of [false, true]) {
  test.serial(`${CONNS} connections on one link, ${BYTES >> 20} MiB echoed each${gso ? ', UDP GSO' : ''}: every byte in order`, async (t) => {
    const [a, b] = await freePair(gso ? 157 : 156);
    const dev = (address: string) => ({ device: { provider: 'uroce' as const, address, gso }, ueids: ['PARALLEL'], tcpOption: 'ignore' as const });
    const server = createServer(dev(b), (s) => { s.on('error', () => undefined); s.pipe(s); });
    const { port } = await server.listen(0, b);
    try {
      const socks = await Promise.all(Array.from({ length: CONNS }, () => connect({ ...dev(a), host: b, port })));
      t.true(socks.every((s) => s.mode === 'smcr'), 'all over SMC-R');
      t.is(new Set(socks.map((s) => s.smcr?.linkGroup)).size, 1, 'one link group');
      const res = await Promise.all(socks.map((s, i) => exchange(s, BYTES, 100 + i)));
      const bad = res.map((r, i) => (r.bytes !== BYTES || r.got !== r.sent ? `conn ${i}: ${r.bytes} bytes${r.got !== r.sent ? ', wrong bytes' : ''}` : '')).filter(Boolean);
      t.deepEqual(bad, []);
    } finally {
      await server.close();
    }
  });
}
