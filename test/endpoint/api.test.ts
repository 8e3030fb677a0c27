// The node:net-like API end to end over uroce on loopback: createServer + connect, echo,
// SMC-R mode reported, subsequent contact on the shared endpoint, TCP fallback on decline.
import test from 'ava';
import { createHash } from 'node:crypto';
import { pipeline } from 'node:stream/promises';
import { Readable, Writable } from 'node:stream';
import { createServer, connect, closeAll, type SmcSocket } from '../../endpoint/index.js';
import { freePair } from './stacks.js';

const UEID = 'SMCSCOPE-API';
// Loopback pair of our own (other test files use 127.0.0.1/.2 and 127.0.150+.x).
let A = '', B = '';
test.before(async () => { [A, B] = await freePair(99); });

test.after.always(() => closeAll());

async function drain(s: SmcSocket): Promise<Buffer> {
  const parts: Buffer[] = [];
  await pipeline(s, new Writable({ write(c: Buffer, _e, cb) { parts.push(c); cb(); } }));
  return Buffer.concat(parts);
}

test.serial('echo over SMC-R, first and subsequent contact', async (t) => {
  const server = createServer({ device: { provider: 'uroce', address: B }, ueids: [UEID], tcpOption: 'ignore' }, (s) => {
    s.pipe(s);
  });
  const addr = await server.listen(0, B);
  try {
    for (let i = 0; i < 2; i++) {
      const s = await connect({ device: { provider: 'uroce', address: A }, ueids: [UEID], tcpOption: 'ignore', host: B, port: addr.port, localAddress: A });
      t.is(s.mode, 'smcr');
      t.like(s.smcr, { version: 2, release: 1, firstContact: i === 0 });
      const data = Buffer.alloc(1 << 20, i + 1);
      for (let k = 0; k < data.length; k += 997) data[k] = k & 0xff;
      const [, back] = await Promise.all([pipeline(Readable.from([data]), new Writable({
        write(c: Buffer, _e, cb) { s.write(c, cb); }, final(cb) { s.end(); cb(); },
      })), drain(s)]);
      t.is(createHash('sha256').update(back).digest('hex'), createHash('sha256').update(data).digest('hex'));
    }
  } finally {
    await server.close();
  }
});

test.serial('server without a common UEID and no v1: NOUEID fallback, data over TCP', async (t) => {
  const server = createServer({ device: { provider: 'uroce', address: B }, ueids: ['OTHER'], versions: [2], tcpOption: 'ignore' }, (s) => s.pipe(s));
  const addr = await server.listen(0, B);
  try {
    const s = await connect({ device: { provider: 'uroce', address: A }, ueids: [UEID], versions: [2], tcpOption: 'ignore', host: B, port: addr.port, localAddress: A });
    t.is(s.mode, 'tcp');
    t.like(s.fallback, { code: 0x03030008, name: 'NOUEID' });
    s.end('hello over tcp');
    t.is((await drain(s)).toString(), 'hello over tcp');
  } finally {
    await server.close();
  }
});
