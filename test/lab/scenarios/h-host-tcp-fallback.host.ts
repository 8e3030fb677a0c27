// Host-side part of scenario h-host-tcp-fallback: a plain TCP server on the lab bridge's host
// address (run by the harness inside the lab's network namespace). It reads one connection to
// EOF and answers like smcpingpong's server: "ACK <bytes> fnv1a=<hash>\n".
import { createServer } from 'node:net';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { FNV1A_INIT, fnv1aUpdate, fnv1aHex } from '../hostpart.js';

const hostIp = process.env.LAB_HOST_IP ?? '10.55.0.254';
const sync = process.env.LAB_SYNC;
if (!sync) { console.error('host part: LAB_SYNC is not set (run through the lab harness)'); process.exit(2); }

const giveUp = setTimeout(() => { console.error('host part: no connection within 240s'); process.exit(1); }, 240_000);
const server = createServer((sock) => {
  let n = 0;
  let h = FNV1A_INIT;
  console.log(`host: connection from ${sock.remoteAddress}:${sock.remotePort}`);
  sock.on('data', (d) => { n += d.length; h = fnv1aUpdate(h, d); });
  sock.on('end', () => {
    const hash = fnv1aHex(h);
    console.log(`host: received ${n} bytes fnv1a=${hash}`);
    sock.end(`ACK ${n} fnv1a=${hash}\n`, () => { clearTimeout(giveUp); server.close(); });
  });
  sock.on('error', (e) => { console.error(`host: ${e.message}`); process.exitCode = 1; });
});
server.listen(12345, hostIp, () => {
  console.log(`host: listening on ${hostIp}:12345 (plain TCP, no SMC)`);
  writeFileSync(join(sync, 'host.ready'), '');
});
