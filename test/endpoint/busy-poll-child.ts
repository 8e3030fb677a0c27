// Child of busy-poll.test.ts: an echo server and a client in this process, both devices busy
// polling with the budget given (argv: client address, server address, µs); 100 round trips,
// then the client's last answer handler (a receive batch the helper's polling loop delivered)
// closes everything and prints "closed". The process then has nothing left to do and must exit
// at once, whatever the budget.
import { createServer, connect, closeAll, type SmcOptions } from '../../endpoint/index.js';

const [a, b, us] = process.argv.slice(2) as [string, string, string];
const opts = (address: string): SmcOptions => ({ device: { provider: 'uroce', address, gso: true, busyPollUs: Number(us) }, ueids: ['SMCSCOPE-BUSYPOLL'], tcpOption: 'ignore' });

const server = createServer(opts(b), (s) => {
  s.on('error', () => undefined);
  s.on('data', (d: Buffer) => s.write(d));
});
const addr = await server.listen(0, b);
const c = await connect({ ...opts(a), host: b, port: addr.port, localAddress: a });
c.on('error', () => undefined);
const req = Buffer.alloc(64);
let n = 0, have = 0;
c.on('data', (d: Buffer) => {
  have += d.length;
  if (have < 64) return;
  have = 0;
  if (++n < 100) {
    req[0] = n;
    c.write(req);
    return;
  }
  process.stdout.write('rr ok\n');
  c.destroy();
  void server.close().then(() => closeAll()).then(() => process.stdout.write('closed\n'));
});
c.write(req);
