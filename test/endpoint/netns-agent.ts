// Runs inside a network namespace of the test's own (nsenter --net): two SMC-R endpoints over
// uroce on 127.0.0.1 / 127.0.0.2 with the real eBPF TCP option, plus a plain TCP echo server in
// a child process that stays outside our cgroup (so it does not get the option). Prints one
// JSON line with what happened. Phase 'basic' (captured by the test) or 'bulk' (not captured).
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { createServer, connect, closeAll, type SmcSocket, type SmcOptions } from '../../endpoint/index.js';

const phase = process.argv[2] ?? 'basic';
const UEID = 'SMCSCOPE-NETNS';
const dev = (address: string): SmcOptions => ({ device: { provider: 'uroce', address }, ueids: [UEID], tcpOption: 'ebpf' });
const out: Record<string, unknown> = { phase };

function pattern(n: number, seed: number): Buffer {
  const b = Buffer.alloc(n);
  let x = seed | 1;
  for (let i = 0; i < n; i += 4) { x ^= x << 13; x ^= x >>> 17; x ^= x << 5; b.writeInt32LE(x, Math.min(i, n - 4)); }
  return b;
}

/** Write `total` bytes of pattern in chunks while reading everything back; hashes both ways. */
async function exchange(s: SmcSocket, total: number, seed: number): Promise<{ sent: string; got: string; bytes: number; ms: number }> {
  const t0 = Date.now();
  const hs = createHash('sha256'), hr = createHash('sha256');
  let bytes = 0;
  const reader = (async () => { for await (const c of s) { hr.update(c as Buffer); bytes += (c as Buffer).length; } })();
  const chunk = 1 << 20;
  for (let off = 0; off < total; off += chunk) {
    const b = pattern(Math.min(chunk, total - off), seed + off);
    hs.update(b);
    if (!s.write(b)) await once(s, 'drain');
  }
  s.end();
  await reader;
  return { sent: hs.digest('hex'), got: hr.digest('hex'), bytes, ms: Date.now() - t0 };
}

async function main(): Promise<void> {
  // Plain TCP echo server, spawned before the TCP option program moves us into its cgroup.
  const plain = spawn('python3', ['-c', `
import socket,threading
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1); s.bind(('127.0.0.3',7000)); s.listen(8)
print('ready',flush=True)
def h(c):
  while True:
    d=c.recv(65536)
    if not d: break
    c.sendall(d)
  c.close()
while True:
  c,_=s.accept(); threading.Thread(target=h,args=(c,),daemon=True).start()
`], { stdio: ['ignore', 'pipe', 'inherit'] });
  await once(plain.stdout!, 'data');
  try {
    const server = createServer(dev('127.0.0.2'), (s) => { s.pipe(s); s.on('error', () => undefined); });
    const { port } = await server.listen(0, '127.0.0.2');
    const cli = (): Promise<SmcSocket> => connect({ ...dev('127.0.0.1'), host: '127.0.0.2', port, localAddress: '127.0.0.1' });
    if (phase === 'basic') {
      const conns = [];
      for (let i = 0; i < 2; i++) {
        const s = await cli();
        const r = s.mode === 'smcr' ? await exchange(s, 256 * 1024, i + 1) : undefined;
        conns.push({ mode: s.mode, smcr: s.smcr, fallback: s.fallback, ...r });
      }
      out.conns = conns;
      const p = await connect({ ...dev('127.0.0.1'), host: '127.0.0.3', port: 7000 });
      out.plain = { mode: p.mode, fallback: p.fallback, ...(await exchange(p, 64 * 1024, 9)) };
    } else {
      // 32 parallel connections, then one connection with 1 GiB each way.
      const t0 = Date.now();
      const socks = await Promise.all(Array.from({ length: 32 }, () => cli()));
      const res = await Promise.all(socks.map((s, i) => exchange(s, 8 << 20, 100 + i)));
      out.parallel = { modes: socks.map((s) => s.mode), ok: res.filter((r) => r.sent === r.got && r.bytes === 8 << 20).length, ms: Date.now() - t0, linkGroups: new Set(socks.map((s) => s.smcr?.linkGroup)).size };
      const big = await cli();
      const r = await exchange(big, 1 << 30, 7);
      out.bulk = { mode: big.mode, ...r, mbps: Math.round(((r.bytes / 1e6) / (r.ms / 1000)) * 10) / 10 };
    }
    await server.close();
  } finally {
    plain.kill();
    await closeAll();
  }
}

main().then(() => { console.log(JSON.stringify(out)); process.exit(0); }, (e: Error) => { console.log(JSON.stringify({ ...out, error: e.stack ?? e.message })); process.exit(1); });
