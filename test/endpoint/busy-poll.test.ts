// Busy polling (issue 17 round 16, docs/uroce.md): uroce's receive loop polls its socket for a
// budget after the last packet instead of sleeping in epoll_wait. Over real UDP on loopback:
// every byte of a request/response run and of a stream arrives exactly with the budget set; a
// timer keeps firing on time while packets never stop coming (the helper returns to the event
// loop after each 0.5 ms slice: without that bound the loop would poll as long as traffic
// lasts); closing from inside a polled batch, with the largest budget, lets the process exit at
// once; and budget 0 (the default) never polls.
import test from 'ava';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { createServer, connect, closeAll, endpoint, type SmcSocket, type SmcOptions } from '../../endpoint/index.js';
import { loadSockHelper, type UroceDevice } from '../../endpoint/verbs/uroce/index.js';
import { freePair } from './stacks.js';

const UEID = 'SMCSCOPE-BUSYPOLL';
let A = '', B = '';
test.before(async () => { [A, B] = await freePair(116); });
test.after.always(() => closeAll());

const opts = (address: string, busyPollUs?: number): SmcOptions => ({
  device: { provider: 'uroce', address, gso: true, ...(busyPollUs !== undefined ? { busyPollUs } : {}) }, ueids: [UEID], tcpOption: 'ignore',
});
const engineOf = async (o: SmcOptions): Promise<UroceDevice['engine']> => ((await endpoint(o)).device as UroceDevice).engine;

/** An echo server on B and a client on A, both devices with `us` (each test its own devices:
 *  the spec, budget included, keys them). */
async function pair(us: number | undefined, onData: (s: SmcSocket, d: Buffer) => void): Promise<{ c: SmcSocket; server: ReturnType<typeof createServer> }> {
  const server = createServer(opts(B, us), (s) => {
    s.on('error', () => undefined);
    s.on('data', (d: Buffer) => onData(s, d));
  });
  const addr = await server.listen(0, B);
  const c = await connect({ ...opts(A, us), host: B, port: addr.port, localAddress: A });
  c.on('error', () => undefined);
  return { c, server };
}

/** End a test's connection and close its devices (the next test opens its own on the same
 *  addresses: a device is keyed by its spec, the budget included, and binds UDP 4791). */
async function done(c: SmcSocket, server: ReturnType<typeof createServer>): Promise<void> {
  c.destroy();
  await server.close();
  await closeAll();
}

/** `rounds` round trips of `size` bytes, each answer compared with its request. */
async function rr(c: SmcSocket, rounds: number, size: number, deadlineMs = 10_000): Promise<void> {
  const req = Buffer.alloc(size);
  let got: Buffer[] = [], have = 0;
  let wake: (() => void) | undefined;
  const onData = (d: Buffer): void => { got.push(d); have += d.length; if (have >= size && wake) { const w = wake; wake = undefined; w(); } };
  c.on('data', onData);
  try {
    for (let i = 0; i < rounds; i++) {
      for (let k = 0; k < size; k++) req[k] = (i * 13 + k * 7) & 0xff;
      c.write(req);
      if (have < size) {
        // the whole answer, or the deadline (a flush that never left, a poll that starved the loop)
        await new Promise<void>((resolve, reject) => {
          const timer = setTimeout(() => reject(new Error(`round trip ${i}: no answer within ${deadlineMs} ms`)), deadlineMs);
          wake = () => { clearTimeout(timer); resolve(); };
        });
      }
      if (!Buffer.concat(got).equals(req)) throw new Error(`round trip ${i}: the answer differs from its request`);
      got = []; have = 0;
    }
  } finally {
    c.off('data', onData);
  }
}

const polling = (() => {
  const h = loadSockHelper();
  return h !== undefined && typeof h.recvBusyPoll === 'function' && process.env.UROCE_NO_BATCH !== '1';
})();
const t1 = polling ? test.serial : test.serial.skip;

t1('rr with busy polling on both sides: every answer is its request, the polling delivered them', async (t) => {
  const { c, server } = await pair(50, (s, d) => s.write(d));
  try {
    t.is(c.mode, 'smcr');
    const ea = await engineOf(opts(A, 50)), eb = await engineOf(opts(B, 50));
    t.is(ea.busyPollUs, 50);
    t.is(eb.busyPollUs, 50);
    await rr(c, 400, 64);
    await rr(c, 50, 3000); // several packets per message
    const sa = ea.busyPollStats()!, sb = eb.busyPollStats()!;
    t.log(`client ${JSON.stringify(sa)}; server ${JSON.stringify(sb)}`);
    // the answers came through the polling loop (one process: each side polls out its budget
    // while the other cannot run, then the event path wakes the other)
    t.true(sa.slices > 0 && sa.batches > 0 && sb.batches > 0);
    t.true(sa.emptyPolls > 0);
  } finally {
    await done(c, server);
  }
});

t1('a stream with busy polling: every byte arrives in order', async (t) => {
  const TOTAL = 6 << 20, CHUNK = 65536;
  let at = 0, bad = -1;
  let arrived: () => void = () => undefined;
  const all = new Promise<void>((resolve) => { arrived = resolve; });
  const { c, server } = await pair(200, (_s, d) => {
    for (let i = 0; i < d.length; i++, at++) if (bad < 0 && d[i] !== ((at * 31 + (at >>> 16)) & 0xff)) bad = at;
    if (at >= TOTAL) arrived();
  });
  try {
    t.is(c.mode, 'smcr');
    const buf = Buffer.alloc(CHUNK);
    for (let o = 0; o < TOTAL; o += CHUNK) {
      for (let i = 0; i < CHUNK; i++) buf[i] = ((o + i) * 31 + ((o + i) >>> 16)) & 0xff;
      if (!c.write(Buffer.from(buf))) await new Promise((r) => c.once('drain', r));
    }
    await all;
    t.is(bad, -1, `first wrong byte at ${bad}`);
    t.is(at, TOTAL);
    const st = (await engineOf(opts(B, 200))).busyPollStats()!;
    t.true(st.batches > 0, JSON.stringify(st));
  } finally {
    await done(c, server);
  }
});

t1('a timer keeps firing while packets never stop coming (each polling slice returns to the loop)', async (t) => {
  // the largest budget: without the slice bound nothing but the traffic's end would end a call
  const MAX = 10_000_000;
  const { c, server } = await pair(MAX, (s, d) => s.write(d));
  try {
    const ea = await engineOf(opts(A, MAX));
    t.is(ea.busyPollUs, MAX);
    let flowing = true;
    let trips = 0;
    const traffic = (async () => { while (flowing) { await rr(c, 20, 64); trips += 20; } })();
    const late: number[] = [];
    let prev = performance.now();
    await new Promise<void>((resolve) => {
      const iv = setInterval(() => {
        const now = performance.now();
        late.push(now - prev - 10);
        prev = now;
        if (late.length >= 60) { clearInterval(iv); resolve(); }
      }, 10);
    });
    const tripsDuring = trips;
    flowing = false;
    await traffic;
    late.sort((x, y) => x - y);
    const p50 = late[late.length >> 1]!;
    t.log(`round trips during the 60 ticks ${tripsDuring}; timer lateness p50 ${p50.toFixed(2)} ms, max ${late[late.length - 1]!.toFixed(2)} ms; ${JSON.stringify(ea.busyPollStats())}`);
    t.true(tripsDuring >= 20, 'traffic flowed while the timer ran');
    t.true(p50 < 5, `a 10 ms interval is late by ${p50.toFixed(2)} ms in the median`);
    t.true((ea.busyPollStats()?.slices ?? 0) > 0);
  } finally {
    await done(c, server);
  }
});

t1('closing from inside a polled batch with the largest budget: the process exits at once', async (t) => {
  const child = fileURLToPath(new URL('./busy-poll-child.js', import.meta.url));
  const [x, y] = await freePair(117);
  const p = spawn(process.execPath, [child, x, y, String(10_000_000)], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '', err = '';
  let closedAt = 0;
  p.stdout.on('data', (d: Buffer) => { out += d; if (!closedAt && out.includes('closed')) closedAt = performance.now(); });
  p.stderr.on('data', (d: Buffer) => { err += d; });
  const code = await new Promise<number | null>((resolve) => p.on('close', resolve));
  const exitAt = performance.now();
  t.is(code, 0, `${out}${err}`);
  t.regex(out, /rr ok/);
  t.true(closedAt > 0, out);
  // the budget is 10 s: a poll that outlived its handle, or an idle handle keeping the loop
  // alive, would hold the process that long
  t.true(exitAt - closedAt < 2000, `exit ${(exitAt - closedAt).toFixed(0)} ms after the close`);
});

test.serial('budget 0 (the default) never polls; UROCE_BUSY_POLL sets a budget, and a bad one is refused', async (t) => {
  const { c, server } = await pair(undefined, (s, d) => s.write(d));
  try {
    const e = await engineOf(opts(A));
    t.is(e.busyPollUs, 0);
    const rx0 = e.stats.rxBatches;
    await rr(c, 200, 64);
    t.true(e.stats.rxBatches - rx0 >= 200);
    t.is(e.busyPollStats()?.slices ?? 0, 0, 'no polling slice with budget 0');
    if (polling) {
      // switched on and off at run time
      e.busyPollUs = 30;
      t.is(e.busyPollUs, 30);
      await rr(c, 50, 64);
      t.true(e.busyPollStats()!.slices > 0);
      e.busyPollUs = 0;
      const s0 = e.busyPollStats()!.slices;
      await rr(c, 50, 64);
      t.is(e.busyPollStats()!.slices, s0, 'off again: no more slices');
    }
  } finally {
    await done(c, server);
  }
  const saved = process.env.UROCE_BUSY_POLL;
  const { openUroce } = await import('../../endpoint/verbs/uroce/index.js');
  try {
    process.env.UROCE_BUSY_POLL = '40';
    const d = await openUroce({ address: A });
    t.is(d.engine.busyPollUs, polling ? 40 : 0);
    if (!polling) t.regex(d.engine.busyPollNote, /busy polling needs/);
    await d.close();
    process.env.UROCE_BUSY_POLL = 'fast';
    await t.throwsAsync(openUroce({ address: A }), { message: /busy poll budget NaN/ });
    await t.throwsAsync(openUroce({ address: A, busyPollUs: -1 }), { message: /busy poll budget -1/ });
  } finally {
    if (saved === undefined) delete process.env.UROCE_BUSY_POLL; else process.env.UROCE_BUSY_POLL = saved;
  }
});
