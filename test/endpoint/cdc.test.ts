// CDC data path over REAL RDMA (two uroce devices on loopback, WrLinks, registered RMBEs):
// data both ways by SHA-256, ring wraps, window stalls, termination flows of RFC 7609 4.8,
// urgent data, hostile CDCs, link down, and packet loss underneath.
import test from 'ava';
import { createHash } from 'node:crypto';
import { encodeCdc, makeCdc, decodeCdc } from '../../dissectors/wire/cdc.js';
import { pattern, sha256, until } from '../verbs/harness.js';
import { linkPair, connPair, writeAll, readN, waitEvent, type LinkPair, type ConnEnd } from './cdc-harness.js';
import { CdcConnection } from '../../endpoint/cdc/connection.js';
import type { CdcTransport } from '../../endpoint/cdc/transport.js';
import { Access, type Mr } from '../../endpoint/verbs/index.js';
import { MAX_WRITES_PER_MSG, type PendingWrite } from '../../endpoint/llc/wr.js';

let p: LinkPair;
test.before(async () => { p = await linkPair(['127.0.0.1', '127.0.0.2']); });
test.after.always(async () => { await p?.close(); });

test.serial('WrLink: messages with 1 … MAX_WRITES_PER_MSG RDMA WRITEs; sends queued for a slot keep their own copy of the writes', async (t) => {
  const K = 1024;
  const src = pattern(MAX_WRITES_PER_MSG * K, 21);
  const dst = new Uint8Array(8 * MAX_WRITES_PER_MSG * K);
  const smr = p.A.pd.regMr(src, Access.LOCAL_WRITE);
  const dmr = p.B.pd.regMr(dst, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
  try {
    // 40 messages on 16 send slots: most of them wait in the queue. Region j of dst gets the
    // messages m = j (mod 8), each with 1 + (m mod MAX) writes of src's K-byte pieces.
    const sends: Array<Promise<void>> = [];
    for (let m = 0; m < 40; m++) {
      const n = 1 + (m % MAX_WRITES_PER_MSG);
      const writes: PendingWrite[] = [];
      for (let k = 0; k < n; k++) writes.push({ mr: smr, off: k * K, len: K, remoteAddr: dmr.addr + BigInt(((m % 8) * MAX_WRITES_PER_MSG + k) * K), rkey: dmr.rkey });
      sends.push(p.A.link.sendWithWrites(writes, new Uint8Array(8)));
      // the caller may reuse its write list at once: a queued send must not see this
      for (const w of writes) w.off = 0;
    }
    await Promise.all(sends);
    for (let j = 0; j < 8; j++) {
      const n = 1 + (j % MAX_WRITES_PER_MSG);
      const region = dst.subarray(j * MAX_WRITES_PER_MSG * K, (j + 1) * MAX_WRITES_PER_MSG * K);
      t.is(sha256(region.subarray(0, n * K)), sha256(src.subarray(0, n * K)), `region ${j}: ${n} writes`);
      t.true(region.subarray(n * K).every((b) => b === 0), `region ${j}: nothing beyond its writes`);
    }
  } finally {
    smr.dereg();
    dmr.dereg();
  }
});

/** Send `data` from x to y and return the SHA-256 of what y read. */
async function pump(x: CdcConnection, y: CdcConnection, data: Uint8Array, readChunk = 65536): Promise<string> {
  const h = createHash('sha256');
  const [, got] = await Promise.all([writeAll(x, data), readN(y, data.length, (b) => h.update(b), readChunk)]);
  if (got !== data.length) throw new Error(`read ${got} of ${data.length}`);
  return h.digest('hex');
}

async function closeBoth(a: ConnEnd, b: ConnEnd): Promise<void> {
  await Promise.all([a.conn.close(), b.conn.close()]);
}

test.serial('data both ways at several sizes, verified by SHA-256; first CDC seq 1 carries prod 0:n like Linux', async (t) => {
  const { a, b } = connPair(p, { rmbeA: 16384, rmbeB: 32768 });
  // first message: one RDMA WRITE then CDC seq 1 prod 0:54 (capture a-first-contact frames 20-21)
  const first = pattern(54, 1);
  t.is(await pump(a.conn, b.conn, first), sha256(first));
  const sb = b.conn.state();
  t.is(sb.rx.seq, 1);
  t.deepEqual(sb.rx.prod, { wrap: 0, count: 54 });
  for (const [i, size] of [1, 1000, 16384, 32768, 100_000, 1 << 20].entries()) {
    const x = pattern(size, 10 + i), y = pattern(size + 17, 100 + i);
    const [hx, hy] = await Promise.all([pump(a.conn, b.conn, x, 7000), pump(b.conn, a.conn, y)]);
    t.is(hx, sha256(x), `a→b ${size}`);
    t.is(hy, sha256(y), `b→a ${size + 17}`);
  }
  const sa = a.conn.state();
  t.is(sa.counters.bytesSent, 54 + 1 + 1000 + 16384 + 32768 + 100_000 + (1 << 20));
  t.is(sa.counters.bytesReceived, 6 * 17 + 1 + 1000 + 16384 + 32768 + 100_000 + (1 << 20));
  t.true(sa.tx.prod.wrap > 30, 'the peer ring wrapped many times');
  await closeBoth(a, b);
  t.is(a.conn.stateName, 'CLOSED');
  t.is(b.conn.stateName, 'CLOSED');
});

test.serial('64 MiB through a 16 KiB RMBE (4096 ring wraps), SHA-256 verified', async (t) => {
  const { a, b } = connPair(p, { rmbeA: 16384, rmbeB: 16384 });
  const data = pattern(64 << 20, 42);
  const t0 = performance.now();
  t.is(await pump(a.conn, b.conn, data), sha256(data));
  const ms = performance.now() - t0;
  const s = a.conn.state();
  t.log(`64 MiB via 16 KiB ring: ${(data.length / ms / 1000).toFixed(1)} MB/s, ${s.counters.cdcSent} data CDCs, ${b.conn.state().counters.cursorUpdates} cursor updates, ${s.counters.windowStalls} window stalls`);
  t.is(s.tx.prod.wrap, 4096);
  t.is(s.tx.prod.count, 0);
  t.true(s.counters.windowStalls > 0);
  // no update storm: at most a handful of consumer-cursor updates per ring
  t.true(b.conn.state().counters.cursorUpdates <= 4096 * 4, `${b.conn.state().counters.cursorUpdates} updates`);
  await closeBoth(a, b);
});

test.serial('coalescing: 100 app writes in one tick cost one RDMA WRITE batch and one CDC', async (t) => {
  const { a, b } = connPair(p);
  const before = a.conn.state().counters.cdcSent;
  const parts: Uint8Array[] = [];
  for (let i = 0; i < 100; i++) { const x = pattern(10, i); parts.push(x); t.is(a.conn.write(x), 10); }
  const h = createHash('sha256');
  await readN(b.conn, 1000, (x) => h.update(x));
  t.is(h.digest('hex'), sha256(Buffer.concat(parts)));
  t.is(a.conn.state().counters.cdcSent - before, 1);
  t.is(a.conn.state().counters.rdmaWrites, 1);
  await closeBoth(a, b);
});

test.serial('cons_curs_upd_req from the peer is answered with one consumer-cursor update', async (t) => {
  const { a, b } = connPair(p);
  await pump(b.conn, a.conn, pattern(100, 1));
  const s = b.conn.state();
  const before = a.conn.state().counters.cursorUpdates;
  await p.B.link.send(encodeCdc(makeCdc((s.tx.seq + 1) & 0xffff, a.token, s.tx.prod, s.tx.cons, { cursorUpdateRequested: true })));
  t.true(await until(() => a.conn.state().counters.cursorUpdates === before + 1));
  await new Promise((r) => setTimeout(r, 50));
  t.is(a.conn.state().counters.cursorUpdates, before + 1, 'exactly one');
  // the crafted CDC used B's next sequence number, so B's own next CDC would be stale for A:
  // end this pair with an abort
  a.conn.abort('end of test');
  await b.conn.close();
});

test.serial('slow reader: the window stalls the writer (write_blocked), nothing is lost, writing resumes', async (t) => {
  const { a, b } = connPair(p, { rmbeA: 16384, rmbeB: 16384, sndA: 65536 });
  const data = pattern(300_000, 5);
  const writing = writeAll(a.conn, data);
  // reader does nothing: the ring fills completely, then the writer stops
  t.true(await until(() => b.conn.readableLength === 16384, 5000), 'RMBE full');
  t.true(await until(() => a.conn.writableSpace === 0, 5000), 'sndbuf full: backpressure to the app');
  await new Promise((r) => setTimeout(r, 150));
  const sa = a.conn.state();
  t.true(sa.tx.writeBlocked, 'write_blocked set');
  t.is(sa.tx.peerSpace, 0);
  t.is(b.conn.readableLength, 16384, 'no byte written beyond the window');
  t.is(b.conn.state().rx.flags.includes('wb'), true, 'reader sees the peer blocked');
  // slow reading: 1000 bytes every ms at first
  const h = createHash('sha256');
  let got = 0;
  for (let i = 0; i < 20; i++) { const x = b.conn.read(1000); if (x) { h.update(x); got += x.length; } await new Promise((r) => setTimeout(r, 2)); }
  await readN(b.conn, data.length - got, (x) => h.update(x));
  await writing;
  t.is(h.digest('hex'), sha256(data));
  t.true(a.conn.state().counters.windowStalls > 0);
  await closeBoth(a, b);
});

test.serial('half-close both directions: done → end, the other side keeps writing, then [done,closed] as Linux', async (t) => {
  const { a, b } = connPair(p);
  const seen: string[] = [];
  const tap = (side: string, c: CdcConnection): void => { c.on('state', (s) => seen.push(`${side}:${s}`)); };
  tap('a', a.conn); tap('b', b.conn);
  const endB = waitEvent(b.conn, 'end');
  await writeAll(a.conn, pattern(5000, 1));
  await a.conn.shutdownWrite();
  t.is(a.conn.stateName, 'PEERCLOSEWAIT1');
  t.throws(() => a.conn.write(new Uint8Array(1)), { message: /write after end/ });
  const h = createHash('sha256');
  t.is(await readN(b.conn, 1e9, (x) => h.update(x)), 5000);
  await endB;
  t.is(h.digest('hex'), sha256(pattern(5000, 1)));
  t.is(b.conn.stateName, 'APPCLOSEWAIT1');
  // b still writes to a
  const back = pattern(40_000, 2);
  t.is(await pump(b.conn, a.conn, back), sha256(back));
  const endA = waitEvent(a.conn, 'end');
  await b.conn.shutdownWrite();
  t.is(b.conn.stateName, 'APPCLOSEWAIT2');
  await endA;
  t.true(await until(() => a.conn.stateName === 'PEERCLOSEWAIT2'));
  await Promise.all([a.conn.close(), b.conn.close()]);
  t.is(a.conn.stateName, 'CLOSED');
  t.is(b.conn.stateName, 'CLOSED');
  t.log(seen.join(' '));
  t.deepEqual(a.conn.state().tx.flags.split(',').filter((f) => f === 'done' || f === 'closed'), ['done', 'closed']);
});

test.serial('shutdown then peer close then local close: [done], [closed], [done,closed] (capture a-first-contact)', async (t) => {
  const { a, b } = connPair(p);
  await writeAll(a.conn, pattern(54, 9));
  await a.conn.shutdownWrite(); // CDC [done]
  t.is(await readN(b.conn, 1e9, () => undefined), 54);
  await writeAll(b.conn, pattern(22, 9));
  const bClosed = b.conn.close(); // CDC [closed]
  t.true(await until(() => b.conn.stateName === 'PEERFINCLOSEWAIT'));
  t.is(await readN(a.conn, 1e9, () => undefined), 22);
  t.true(await until(() => a.conn.stateName === 'APPFINCLOSEWAIT'));
  await a.conn.close(); // CDC [done,closed]
  await bClosed;
  t.is(a.conn.stateName, 'CLOSED');
  t.is(b.conn.stateName, 'CLOSED');
  t.is(a.conn.state().tx.flags, 'done,closed');
  t.is(b.conn.state().tx.flags, 'closed');
});

for (const who of ['a', 'b'] as const) {
  test.serial(`close from ${who}: the other side reads everything, sees end, closes; both CLOSED and 'closed' emitted`, async (t) => {
    const pair = connPair(p);
    const [x, y] = who === 'a' ? [pair.a, pair.b] : [pair.b, pair.a];
    const data = pattern(50_000, 3);
    const closedX = waitEvent<{ aborted: boolean }>(x.conn, 'closed');
    const closedY = waitEvent<{ aborted: boolean }>(y.conn, 'closed');
    // x writes and closes at once; the close waits until everything is written
    const w = writeAll(x.conn, data);
    const h = createHash('sha256');
    const r = readN(y.conn, 1e9, (b) => h.update(b));
    await w;
    const xc = x.conn.close();
    t.is(await r, data.length);
    t.is(h.digest('hex'), sha256(data));
    t.is(y.conn.stateName, 'APPCLOSEWAIT1');
    await y.conn.close();
    await xc;
    t.false((await closedX).aborted);
    t.false((await closedY).aborted);
  });
}

test.serial('simultaneous close: both send closed, both reach CLOSED without abort', async (t) => {
  const { a, b } = connPair(p);
  await pump(a.conn, b.conn, pattern(1000, 1));
  await pump(b.conn, a.conn, pattern(1000, 2));
  await Promise.all([a.conn.close(), b.conn.close()]);
  t.is(a.conn.stateName, 'CLOSED');
  t.is(b.conn.stateName, 'CLOSED');
  t.false(a.conn.aborted);
  t.false(b.conn.aborted);
});

test.serial('close with unread data sends abort (smc_close_final), the peer gets ECONNRESET-like abort', async (t) => {
  const { a, b } = connPair(p);
  await writeAll(a.conn, pattern(3000, 1));
  t.true(await until(() => b.conn.readableLength === 3000));
  const ab = waitEvent<string>(a.conn, 'abort');
  const bc = b.conn.close(); // resolves when CLOSED: after a's close answers
  t.regex(await ab, /peer aborted/);
  t.is(a.conn.stateName, 'PROCESSABORT');
  t.is(b.conn.stateName, 'PEERCLOSEWAIT1');
  t.is(b.conn.state().tx.flags, 'abort');
  await a.conn.close();
  await bc;
  t.is(a.conn.stateName, 'CLOSED');
  t.is(b.conn.stateName, 'CLOSED');
});

test.serial('abort: peer_conn_abort reaches the peer, which goes PROCESSABORT → CLOSED on close', async (t) => {
  const { a, b } = connPair(p);
  await pump(a.conn, b.conn, pattern(10_000, 1));
  const abortB = waitEvent<string>(b.conn, 'abort');
  a.conn.abort('test abort');
  t.is(a.conn.stateName, 'CLOSED');
  t.regex(await abortB, /peer aborted/);
  t.is(b.conn.stateName, 'PROCESSABORT');
  t.throws(() => b.conn.write(new Uint8Array(1)), { code: 'ECONNRESET' });
  await b.conn.close();
  t.is(b.conn.stateName, 'CLOSED');
});

test.serial('urgent data both ways: the last byte of an urgent send is delivered out of band at its mark', async (t) => {
  const { a, b } = connPair(p);
  for (const [x, y] of [[a.conn, b.conn], [b.conn, a.conn]] as const) {
    const urgent: number[] = [];
    y.on('urgent', (byte: number) => urgent.push(byte));
    t.is(x.write(new TextEncoder().encode('hello ')), 6);
    t.is(x.write(new TextEncoder().encode('XY'), true), 2);
    // Linux urg_tx_pend: nothing more until the peer consumed the urgent data
    t.is(x.write(new TextEncoder().encode('more')), 0);
    t.true(await until(() => urgent.length === 1));
    t.is(String.fromCharCode(urgent[0]!), 'Y');
    const parts: Uint8Array[] = [];
    await readN(y, 7, (c) => parts.push(c));
    t.is(Buffer.concat(parts).toString(), 'hello X', 'in-band stream without the urgent byte');
    // reading up to the mark skips the urgent byte and confirms: the writer may continue
    t.true(await until(() => x.writableSpace > 0));
    await writeAll(x, new TextEncoder().encode(' after'));
    const rest: Uint8Array[] = [];
    await readN(y, 6, (c) => rest.push(c));
    t.is(Buffer.concat(rest).toString(), ' after');
    t.is(x.state().counters.urgentSent, 1);
    t.is(y.state().counters.urgentReceived, 1);
  }
  await closeBoth(a, b);
});

// ---- hostile peers: CDCs crafted with our own encoder, sent on the real link ----

interface Craft { name: string; reason: RegExp; build(victimToken: number, seq: number, prodNow: { wrap: number; count: number }): Uint8Array }
const crafts: Craft[] = [
  { name: 'producer cursor beyond the ring', reason: /producer cursor count 20000 beyond/, build: (tok, seq) => encodeCdc(makeCdc(seq, tok, { wrap: 0, count: 20000 }, { wrap: 0, count: 0 })) },
  { name: 'producer cursor backwards', reason: /moved backwards by 500/, build: (tok, seq, now) => encodeCdc(makeCdc(seq, tok, { wrap: now.wrap, count: now.count - 500 }, { wrap: 0, count: 0 })) },
  { name: 'huge producer jump', reason: /overruns unconsumed data/, build: (tok, seq, now) => encodeCdc(makeCdc(seq, tok, { wrap: (now.wrap + 1000) & 0xffff, count: now.count }, { wrap: 0, count: 0 })) },
  { name: 'consumer cursor beyond what we wrote', reason: /consumer cursor .* beyond what we wrote/, build: (tok, seq, now) => encodeCdc(makeCdc(seq, tok, now, { wrap: 0, count: 4000 })) },
  { name: 'wrong length', reason: /length 40, not 44/, build: (tok, seq, now) => { const m = makeCdc(seq, tok, now, { wrap: 0, count: 0 }); m.length = 40; return encodeCdc(m); } },
];

for (const c of crafts) {
  test.serial(`hostile CDC (${c.name}) aborts that connection only; another connection on the link keeps working`, async (t) => {
    const victim = connPair(p);
    const other = connPair(p);
    // some legitimate traffic first so cursors and seq are not zero
    await pump(victim.b.conn, victim.a.conn, pattern(3000, 1));
    const bState = victim.b.conn.state();
    const aborted = waitEvent<string>(victim.a.conn, 'abort');
    const peerAborted = waitEvent<string>(victim.b.conn, 'abort');
    // the attacker sits on B's side of the link and speaks for B's connection
    await p.B.link.send(c.build(victim.a.token, (bState.tx.seq + 1) & 0xffff, bState.tx.prod));
    const reason = await aborted;
    t.regex(reason, c.reason);
    t.is(victim.a.conn.stateName, 'CLOSED');
    t.true(p.A.logs.some((l) => l.includes('hostile CDC')), 'logged');
    t.regex(await peerAborted, /peer aborted/, 'the victim told its peer (peer_conn_abort)');
    // the other connection on the same link is unaffected
    const d = pattern(200_000, 77);
    t.is(await pump(other.a.conn, other.b.conn, d), sha256(d));
    t.is(await pump(other.b.conn, other.a.conn, d), sha256(d));
    t.false(p.A.link.isDown);
    await closeBoth(other.a, other.b);
    await victim.b.conn.close();
  });
}

test.serial('stale sequence number: ignored and counted like Linux, not applied; the connection continues', async (t) => {
  const { a, b } = connPair(p);
  await pump(b.conn, a.conn, pattern(3000, 1));
  const s = b.conn.state();
  // a replay of an old seq with a cursor moving backwards must not be applied
  await p.B.link.send(encodeCdc(makeCdc((s.tx.seq - 1) & 0xffff, a.token, { wrap: 0, count: 10 }, { wrap: 0, count: 0 })));
  t.true(await until(() => a.conn.state().counters.staleCdcs === 1));
  t.deepEqual(a.conn.state().rx.prod, { wrap: 0, count: 3000 });
  t.is(a.conn.stateName, 'ACTIVE');
  const d = pattern(50_000, 2);
  t.is(await pump(b.conn, a.conn, d), sha256(d));
  await closeBoth(a, b);
});

test.serial('wrong token: a CDC for nobody is dropped by the dispatcher; handed to a connection it aborts it', async (t) => {
  const { a, b } = connPair(p);
  const before = p.A.unknownToken;
  await p.B.link.send(encodeCdc(makeCdc(1, 0xdead, { wrap: 0, count: 1 }, { wrap: 0, count: 0 })));
  t.true(await until(() => p.A.unknownToken === before + 1));
  const ab = waitEvent<string>(a.conn, 'abort');
  a.conn.receiveCdc(encodeCdc(makeCdc(1, 0xdead, { wrap: 0, count: 1 }, { wrap: 0, count: 0 })));
  t.regex(await ab, /token 0x0000dead is not ours/);
  // garbage of every length never throws
  for (let n = 0; n < 50; n++) a.conn.receiveCdc(pattern(n, n));
  t.is(decodeCdc(pattern(3, 1)).issues.length > 0, true);
  await b.conn.close();
});

test.serial('link down: the transport rejects, the connection aborts locally', async (t) => {
  const q = await linkPair(['127.0.0.3', '127.0.0.4']);
  try {
    const { a, b } = connPair(q);
    await pump(a.conn, b.conn, pattern(5000, 1));
    const ab = waitEvent<string>(a.conn, 'abort');
    const closed = waitEvent<{ aborted: boolean; reason: string }>(a.conn, 'closed');
    q.A.link.fail('test: port down');
    a.conn.write(pattern(100, 1));
    t.regex(await ab, /RDMA WRITE failed: test: port down|CDC send failed/);
    t.true((await closed).aborted);
    t.is(a.conn.stateName, 'CLOSED');
  } finally {
    await q.close();
  }
});

test.serial('5 % packet loss underneath (uroce fault injection): 4 MiB both ways arrive intact', async (t) => {
  const q = await linkPair(['127.0.0.5', '127.0.0.6'], { faults: { seed: 17, loss: 0.05 } });
  try {
    const { a, b } = connPair(q, { rmbeA: 65536, rmbeB: 65536 });
    const x = pattern(4 << 20, 1), y = pattern(3 << 20, 2);
    const [hx, hy] = await Promise.all([pump(a.conn, b.conn, x), pump(b.conn, a.conn, y)]);
    t.is(hx, sha256(x));
    t.is(hy, sha256(y));
    const st = q.A.link.qp.stats;
    t.log(`loss 5 %: requester A retransmits ${st.retransmits}, timeouts ${st.timeouts}`);
    t.true(st.retransmits + q.B.link.qp.stats.retransmits > 0, 'losses were repaired by retransmission');
    await closeBoth(a, b);
  } finally {
    await q.close();
  }
});

test('the CDCs a connection writes through the CDC view are exactly the codec\'s bytes (cursors, wrap, flags), and received CDCs are read the same way', async (t) => {
  // No link: a transport that records each CDC (a copy: the connection reuses its buffer) and
  // acknowledges it on the next turn, so the bytes can be compared with the codec's encoding.
  const sent: Uint8Array[] = [];
  const transport: CdcTransport = {
    write: () => undefined,
    sendCdc: () => Promise.reject(new Error('the callback path is the one used')),
    sendCdcCb: (msg, done) => { sent.push(msg.slice()); setImmediate(() => done(undefined)); },
  };
  const snd = new Uint8Array(65536);
  const c = new CdcConnection({
    localToken: 0x1111, peerToken: 0xabcd1234, transport,
    buffers: { rmbe: new Uint8Array(16384), sndbuf: { buffer: snd, length: snd.length } as unknown as Mr, peerRmbeSize: 65536 },
  });
  const total = (n: number): Promise<void> => until(() => c.state().tx.prod.wrap * 65536 + c.state().tx.prod.count >= n).then(() => undefined);
  t.is(c.write(pattern(40_000, 1)), 40_000);
  await total(40_000);
  // the peer consumed all of it (its consumer cursor in a CDC of its own): room for a wrap
  c.receiveCdc(encodeCdc(makeCdc(1, 0x1111, { wrap: 0, count: 0 }, { wrap: 0, count: 40_000 })));
  t.is(c.write(pattern(40_000, 2)), 40_000);
  await total(80_000);
  t.false(c.aborted, c.state().abortReason ?? '');
  t.true(sent.length >= 4, `${sent.length} CDCs`);
  let prev = 0;
  for (const [i, b] of sent.entries()) {
    const d = decodeCdc(b);
    t.deepEqual(d.issues, [], `CDC ${i + 1} decodes without issues`);
    t.deepEqual(encodeCdc(d.value), b, `CDC ${i + 1}: the codec encodes the same 44 bytes`);
    t.is(d.value.seq, i + 1);
    t.is(d.value.token, 0xabcd1234);
    const at = d.value.prod.wrap * 65536 + d.value.prod.count;
    t.true(at > prev, `producer cursor moves forward (${prev} → ${at})`);
    prev = at;
  }
  const last = decodeCdc(sent.at(-1)!).value;
  t.deepEqual([last.prod.wrap, last.prod.count], [1, 80_000 - 65536], 'the producer cursor wrapped the peer ring');
  // a received CDC with a reserved cursor byte set is refused, its reason summarized by the codec
  const bad = encodeCdc(makeCdc(2, 0x1111, { wrap: 0, count: 0 }, { wrap: 0, count: 40_000 }));
  bad[8] = 1;
  c.receiveCdc(bad);
  t.true(c.aborted);
  t.regex(c.state().abortReason ?? '', /hostile CDC: cursor reserved bytes not zero \(CDC seq 2 token 0x0*1111/);
});
