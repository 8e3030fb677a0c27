// Soak: N parallel SMC-R connections to the example echo server (a separate process) for T
// seconds over uroce with 1 % loss, duplication and reordering injected on both ends (the uroce
// fault hooks; SOAK_FAULTS overrides). Every byte that comes back is compared with the byte sent; the
// server's RSS is sampled after a warm-up and at the end.
//   node dist/test/hostile/soak.js [seconds=600] [connections=64]
// SOAK_LOG=DIR keeps the server's output and the client's endpoint log there (server.log, client.log).
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { connect, closeAll, type SmcSocket } from '../../endpoint/index.js';
import { startTarget } from './servers.js';
import { rssKb, sleep, UEID } from './peer.js';

export interface SoakResult {
  seconds: number; connections: number; smcr: number; firstErrorMs?: number; clientMaxEventLoopLagMs: number; bytesVerified: number; mismatches: number; errors: string[];
  rssStartKb: number; rssEndKb: number; rssSamplesKb: number[];
}

// 1 % loss, duplication and reordering on both ends (the soak). 60 s runs are clean; 10-min
// runs on a 2-core machine at load average 17-20 lost their link after 410-478 s when a process
// was not scheduled for longer than the QP retry budget (~1.07 s; the lag monitor saw the server
// stall 1.7 s then): starvation, not a protocol bug (docs/endpoint.md). SOAK_FAULTS overrides.
const FAULTS = process.env.SOAK_FAULTS ? JSON.parse(process.env.SOAK_FAULTS) as { seed: number } : { seed: 7, loss: 0.01, duplicate: 0.01, reorder: 0.01 };
/** Bytes a connection keeps in flight (sent, not yet echoed). */
const WINDOW = Number(process.env.SOAK_WINDOW ?? 64 * 1024);

export async function soak(seconds: number, n: number, net = '127.0.97'): Promise<SoakResult> {
  const srv = await startTarget('example', `${net}.2`, { HOSTILE_FAULTS: JSON.stringify(FAULTS), HOSTILE_STALL_MS: '500' });
  const errors: string[] = [];
  let verified = 0, mismatches = 0;
  let firstErrorMs: number | undefined;
  let maxLagMs = 0;
  // The client's endpoint events that end connections or links (not LLC traffic), with times.
  const clientLog: string[] = [];
  const t0 = Date.now();
  const log = (l: string): void => { if (!/ [<>] /.test(l)) clientLog.push(`${Date.now() - t0} ${l}`); };
  // Stalls of the client's event loop (see HOSTILE_STALL_MS in example-server.ts).
  let tick = Date.now();
  let cpu = process.cpuUsage();
  const stalls = setInterval(() => {
    const now = Date.now();
    const used = process.cpuUsage(cpu);
    if (now - tick - 100 >= 500) log(`event loop stalled ${now - tick - 100} ms (process CPU ${Math.round((used.user + used.system) / 1000)} ms of the last ${now - tick} ms)`);
    tick = now;
    cpu = process.cpuUsage();
  }, 100);
  try {
    // Opened 8 at a time: 64 at once would time out some handshakes (each new RMB costs a
    // CONFIRM RKEY, and LLC flows of a link group run one at a time) and fall back to TCP.
    const socks: SmcSocket[] = [];
    for (let i = 0; i < n; i += 8) {
      socks.push(...await Promise.all(Array.from({ length: Math.min(8, n - i) }, () => connect({
        device: { provider: 'uroce', address: `${net}.1`, faults: { ...FAULTS, seed: 11 } }, ueids: [UEID], tcpOption: 'ignore', log,
        host: srv.addr, port: srv.port, localAddress: `${net}.1`, connectTimeoutMs: 30_000,
      }))));
    }
    const start = Date.now();
    const lag = monitorEventLoopDelay({ resolution: 20 });
    lag.enable();
    const until = Date.now() + seconds * 1000;
    const pattern = randomBytes(1 << 20);
    const runs = socks.map((s, i) => new Promise<void>((resolve) => {
      // What was sent and not yet echoed: offsets into `pattern` (a ring), compared byte by byte.
      let sentOff = (i * 7919) % pattern.length, checkOff = sentOff, outstanding = 0;
      let stopping = false;
      s.on('error', (e) => { firstErrorMs ??= Date.now() - start; errors.push(`conn ${i}: ${e.message}`); resolve(); });
      s.on('data', (d: Buffer) => {
        for (let k = 0; k < d.length;) {
          const len = Math.min(d.length - k, pattern.length - checkOff);
          if (d.compare(pattern, checkOff, checkOff + len, k, k + len) !== 0) mismatches++;
          verified += len; k += len; checkOff = (checkOff + len) % pattern.length;
        }
        outstanding -= d.length;
        pump();
        if (stopping && outstanding === 0) { s.end(); resolve(); }
      });
      const pump = (): void => {
        if (Date.now() >= until) { stopping = true; if (outstanding === 0) { s.end(); resolve(); } return; }
        while (outstanding < WINDOW) {
          const len = Math.min(1 + ((sentOff * 31) % 65536), pattern.length - sentOff);
          s.write(pattern.subarray(sentOff, sentOff + len));
          sentOff = (sentOff + len) % pattern.length;
          outstanding += len;
        }
      };
      pump();
    }));
    await sleep(Math.min(30_000, (seconds * 1000) / 3)); // warm-up: heap and buffers reach their working size
    const samples = [rssKb(srv.proc.proc.pid!)];
    const sampler = setInterval(() => samples.push(rssKb(srv.proc.proc.pid!)), Math.max(1000, seconds * 100));
    let guard: NodeJS.Timeout | undefined;
    await Promise.race([Promise.all(runs), new Promise<void>((r) => { guard = setTimeout(r, seconds * 1000 + 60_000); })]);
    clearTimeout(guard); // a pending timer would keep the test process from exiting
    clearInterval(sampler);
    lag.disable();
    maxLagMs = Math.round(lag.max / 1e6);
    samples.push(rssKb(srv.proc.proc.pid!));
    const smcr = socks.filter((s) => s.mode === 'smcr').length;
    if (errors.length > 0) {
      errors.push(...srv.proc.out.split('\n').filter((l) => l && !/closed:|^listening/.test(l)).slice(0, 10).map((l) => `server: ${l}`));
      errors.push(...clientLog.slice(0, 10).map((l) => `client: ${l}`));
    }
    // Each connection ended its side (end()) when it stopped; let the orderly SMC close finish
    // (an abort here would show as noise in the logs), then destroy what is left.
    await Promise.all(socks.map((s) => new Promise<void>((r) => {
      if (s.closed) { r(); return; }
      const t = setTimeout(r, 10_000);
      s.once('close', () => { clearTimeout(t); r(); });
    })));
    for (const s of socks) s.destroy();
    return { seconds, connections: n, smcr, clientMaxEventLoopLagMs: maxLagMs, ...(firstErrorMs !== undefined ? { firstErrorMs } : {}), bytesVerified: verified, mismatches, errors, rssStartKb: samples[0]!, rssEndKb: samples[samples.length - 1]!, rssSamplesKb: samples };
  } finally {
    clearInterval(stalls);
    await closeAll();
    await srv.proc.stop();
    if (process.env.SOAK_LOG) {
      writeFileSync(join(process.env.SOAK_LOG, 'server.log'), srv.proc.out + srv.proc.err);
      writeFileSync(join(process.env.SOAK_LOG, 'client.log'), clientLog.join('\n') + '\n');
    }
  }
}

if (process.argv[1]?.endsWith('soak.js') || process.argv[1]?.endsWith('soak.ts')) {
  const r = await soak(Number(process.argv[2] ?? 600), Number(process.argv[3] ?? 64));
  process.stdout.write(`${JSON.stringify(r)}\n`);
  process.exit(r.mismatches === 0 && r.errors.length === 0 ? 0 : 1);
}
