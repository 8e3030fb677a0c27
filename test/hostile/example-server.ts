// The example server of docs/endpoint.md as its own process, for the hostile-peer tests and the
// soak: an echo server on createServer (uroce device on ADDR). It prints "listening ADDR:PORT",
// one line per connection event and the endpoint's CLC lines on stdout; SIGTERM ends it cleanly.
//   node dist/test/hostile/example-server.js ADDR PORT
// HOSTILE_FAULTS='{"seed":1,"loss":0.01,"duplicate":0.01,"reorder":0.01}' injects uroce faults.
import { createServer, closeAll } from '../../endpoint/index.js';
import type { FaultConfig } from '../../endpoint/verbs/uroce/faults.js';

const [addr, portArg] = process.argv.slice(2);
if (!addr || !portArg) { process.stderr.write('usage: example-server ADDR PORT\n'); process.exit(2); }
const faults = process.env.HOSTILE_FAULTS ? JSON.parse(process.env.HOSTILE_FAULTS) as FaultConfig : undefined;
const say = (l: string): void => { process.stdout.write(`${l}\n`); };
const t0 = Date.now();
const at = (): string => `[${((Date.now() - t0) / 1000).toFixed(3)}s]`;
// HOSTILE_STALL_MS=N: say when the event loop did not run for N ms or more (a QP's retry budget is
// ~1.07 s: a longer stall ends its link, which is starvation, not a protocol error).
const stallMs = Number(process.env.HOSTILE_STALL_MS ?? 0);
if (stallMs > 0) {
  let last = Date.now();
  let cpu = process.cpuUsage();
  setInterval(() => {
    const now = Date.now();
    const used = process.cpuUsage(cpu);
    // CPU time used over the stall: about the stall itself = our own long task; much less = not scheduled
    if (now - last - 100 >= stallMs) say(`${at()} event loop stalled ${now - last - 100} ms (process CPU ${Math.round((used.user + used.system) / 1000)} ms of the last ${now - last} ms)`);
    last = now;
    cpu = process.cpuUsage();
  }, 100).unref();
}
let n = 0;
const server = createServer({
  device: { provider: 'uroce', address: addr, ...(faults ? { faults } : {}) } as never,
  ueids: ['SMCSCOPE-HOSTILE'], tcpOption: 'ignore',
  // CLC and fallback lines (the hostile tests count them), and what ends connections or link
  // groups (link down, termination, aborts; a soak failure is explained by these), not LLC traffic.
  log: (l) => { if (/^(CLC:|fallback|smc server|smc:)| down: | terminated: |peer deletes| abort| failed: /.test(l)) say(`${at()} ${l}`); },
}, (s) => {
  const id = ++n;
  let bytes = 0;
  s.on('data', (d: Buffer) => { bytes += d.length; });
  s.on('error', (e) => say(`conn ${id}: ${e.message}`));
  s.on('close', () => say(`conn ${id} closed: ${bytes} bytes echoed (${s.mode})`));
  s.pipe(s);
});
const bound = await server.listen(Number(portArg), addr);
say(`listening ${bound.address}:${bound.port}`);
await new Promise<void>((resolve) => { process.once('SIGTERM', resolve); process.once('SIGINT', resolve); });
await server.close();
await closeAll();
process.exit(0);
