// SmcSocket over real sockets: TCP fallback mode on a plain TCP pair, and SMC-R mode on a real
// TCP pair + a uroce RDMA link pair (CdcConnection over WrLink), piping files through it.
import test, { type ExecutionContext } from 'ava';
import net from 'node:net';
import { createHash, randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream, mkdtempSync, writeFileSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { Readable, Writable } from 'node:stream';
import { SmcSocket } from '../../endpoint/socket/socket.js';
import { linkPair, connPair, type LinkPair } from './cdc-harness.js';
import { until } from '../verbs/harness.js';

async function tcpPair(): Promise<[net.Socket, net.Socket, () => void]> {
  const srv = net.createServer({ allowHalfOpen: true });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as net.AddressInfo).port;
  const accepted = new Promise<net.Socket>((r) => srv.once('connection', r));
  const c = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true });
  await new Promise<void>((r, j) => { c.once('connect', r); c.once('error', j); });
  const s = await accepted;
  return [c, s, () => srv.close()];
}

const hashStream = (): { sink: Writable; digest: Promise<string>; bytes: () => number } => {
  const h = createHash('sha256');
  let n = 0;
  let done!: (s: string) => void;
  const digest = new Promise<string>((r) => { done = r; });
  const sink = new Writable({
    write(chunk: Buffer, _e, cb) { h.update(chunk); n += chunk.length; cb(); },
    final(cb) { done(h.digest('hex')); cb(); },
  });
  return { sink, digest, bytes: () => n };
};
const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');
const closed = (s: SmcSocket): Promise<void> => new Promise((r) => (s.closed ? r() : s.once('close', () => r())));

let dir: string;
test.before(() => { dir = mkdtempSync(join(tmpdir(), 'smcsock-')); });
test.after.always(() => { rmSync(dir, { recursive: true, force: true }); });

test.serial('fallback mode: data flows over TCP, reason code and name, half-close, close', async (t) => {
  const [c, s, stop] = await tcpPair();
  const a = new SmcSocket({ tcp: c, mode: 'tcp', fallbackCode: 0x03010000 });
  const b = new SmcSocket({ tcp: s, mode: 'tcp', fallbackCode: 0x03010000 });
  t.is(a.mode, 'tcp');
  t.deepEqual(a.fallback && { code: a.fallback.code, name: a.fallback.name }, { code: 0x03010000, name: 'PEERNOSMC' });
  t.is(a.smcr, undefined);
  t.is(a.remotePort, s.localPort);
  t.is(b.remoteAddress, '127.0.0.1');
  await t.throwsAsync(a.sendUrgent('x'), { code: 'ERR_SMC_NO_URGENT' });
  const data = randomBytes(5 << 20);
  const hb = hashStream();
  // a → b with a.end() (half-close); b answers afterwards on its still-open direction
  const toB = pipeline(Readable.from([data.subarray(0, 1 << 20), data.subarray(1 << 20)]), a);
  const atB = pipeline(b, hb.sink);
  await toB;
  t.is(await hb.digest, sha(data));
  const reply = randomBytes(100_000);
  const ha = hashStream();
  const atA = pipeline(a, ha.sink);
  b.end(reply);
  await Promise.all([atA, atB]);
  t.is(await ha.digest, sha(reply));
  await Promise.all([closed(a), closed(b)]);
  t.true(c.destroyed && s.destroyed);
  stop();
});

let L: LinkPair;
test.before(async () => { L = await linkPair(['127.0.0.7', '127.0.0.8']); });
const smcPair = async (o: Parameters<typeof connPair>[1] = {}): Promise<{ a: SmcSocket; b: SmcSocket; stop: () => void; cA: ReturnType<typeof connPair>['a']; cB: ReturnType<typeof connPair>['b'] }> => {
  const [c, s, stop] = await tcpPair();
  const { a: cA, b: cB } = connPair(L, o);
  const info = { version: 2, release: 1, linkGroup: 1, link: 1, firstContact: true };
  const a = new SmcSocket({ tcp: c, mode: 'smcr', conn: cA.conn, info });
  const b = new SmcSocket({ tcp: s, mode: 'smcr', conn: cB.conn, info: { ...info, firstContact: false } });
  return { a, b, stop, cA, cB };
};

test.serial('SMC-R mode: a file piped both ways with stream.pipeline arrives intact; TCP carries no data; close after both', async (t) => {
  const { a, b, stop, cA } = await smcPair({ rmbeA: 65536, rmbeB: 65536 });
  t.is(a.mode, 'smcr');
  t.is(a.smcr?.version, 2);
  t.is(a.fallback, undefined);
  t.is(a.localPort, b.remotePort);
  a.setNoDelay(true);
  const fileA = join(dir, 'a.bin'), fileB = join(dir, 'b.bin'), outB = join(dir, 'at-b.bin');
  const dataA = randomBytes(12 << 20), dataB = randomBytes(3 << 20);
  writeFileSync(fileA, dataA); writeFileSync(fileB, dataB);
  const ha = hashStream();
  const tcpBefore = [a.tcp.bytesWritten, b.tcp.bytesWritten];
  await Promise.all([
    pipeline(createReadStream(fileA), a),
    pipeline(b, createWriteStream(outB)),
    pipeline(createReadStream(fileB), b),
    pipeline(a, ha.sink),
  ]);
  t.is(sha(readFileSync(outB)), sha(dataA), 'file A → B');
  t.is(await ha.digest, sha(dataB), 'file B → A');
  t.deepEqual([a.tcp.bytesWritten, b.tcp.bytesWritten], tcpBefore, 'no data on TCP in SMC-R mode');
  await Promise.all([closed(a), closed(b)]);
  t.is(cA.conn.stateName, 'CLOSED');
  t.false(cA.conn.aborted);
  t.true(a.tcp.destroyed && b.tcp.destroyed);
  stop();
});

test.serial('SMC-R mode: a slow reader blocks the writer through the window, and nothing is lost', async (t) => {
  const { a, b, stop, cA, cB } = await smcPair({ rmbeA: 16384, rmbeB: 16384 });
  const data = randomBytes(2 << 20);
  const writing = pipeline(Readable.from([data]), a);
  a.resume(); // a's readable side must be consumed to see the peer's end (as with net.Socket)
  b.pause();
  t.true(await until(() => cA.conn.state().tx.writeBlocked && cA.conn.writableSpace === 0, 5000), 'writer blocked');
  t.true(await until(() => cB.conn.readableLength === 16384, 5000), 'RMBE full, consumer cursor not advanced');
  const sent = cA.conn.state().counters.bytesSent;
  await new Promise((r) => setTimeout(r, 100));
  t.is(cA.conn.state().counters.bytesSent, sent, 'no progress while the reader does not read');
  t.true(a.writableLength > 0, 'backpressure reached the app');
  const hb = hashStream();
  await Promise.all([writing, pipeline(b, hb.sink)]);
  t.is(await hb.digest, sha(data));
  b.end();
  await Promise.all([closed(a), closed(b)]);
  stop();
});

test.serial('SMC-R mode: direct writes (nothing queued) and queued ones keep their order, callbacks in order, backpressure once the send buffer is full', async (t) => {
  const { a, b, stop } = await smcPair({ rmbeA: 16384, rmbeB: 16384 });
  a.resume();
  b.pause();
  // count the writes that went through the Writable's queue (_write/_writev): the direct path
  // must not call them while nothing is queued, and must hand over to them once something is
  const viaQueue = { n: 0 };
  const w1 = a._write.bind(a), wv = a._writev.bind(a);
  a._write = (c, e, cb) => { viaQueue.n++; w1(c, e, cb); };
  a._writev = (cs, cb) => { viaQueue.n += cs.length; wv(cs, cb); };
  const data = randomBytes(400_000);
  const cbOrder: number[] = [];
  let off = 0, k = 0;
  const writeNext = (len: number): boolean => {
    const i = k++;
    const chunk = data.subarray(off, Math.min(data.length, off + len));
    off += chunk.length;
    return a.write(chunk, (e) => { if (!e) cbOrder.push(i); });
  };
  // a few small writes with nothing queued: direct, no queue, write() true
  t.true(writeNext(100));
  t.true(writeNext(200));
  t.is(viaQueue.n, 0, 'direct path while nothing is queued');
  t.is(a.writableLength, 0);
  // corked writes queue; the write right after uncork() finds the queue empty again and goes direct
  a.cork();
  writeNext(300); writeNext(400);
  t.is(a.writableLength, 700);
  a.uncork();
  t.is(viaQueue.n, 2, 'corked writes went through the queue');
  t.true(writeNext(50));
  t.is(viaQueue.n, 2);
  // the reader is paused: fill the send buffer and the peer's RMBE until write() says stop
  let ok = true, writes = 0;
  while (ok && writes++ < 1000) ok = writeNext(3000);
  t.false(ok, 'write() returned false: backpressure reached the app');
  t.true(a.writableLength > 0);
  const queuedAtStop = viaQueue.n;
  t.true(queuedAtStop > 2, 'the part that did not fit went through the queue');
  // more writes while something is queued: all behind the queue, none direct
  writeNext(10); writeNext(5000);
  t.is(viaQueue.n, queuedAtStop, 'still queued (the Writable writes one at a time)');
  t.true(a.writableLength > 5000);
  // the reader reads: everything arrives in order; the rest is written as 'drain' says
  const hb = hashStream();
  const reading = pipeline(b, hb.sink);
  while (off < data.length) {
    if (!writeNext(7777)) await new Promise((r) => a.once('drain', r));
  }
  a.end();
  await reading;
  t.is(await hb.digest, sha(data), 'every byte, in write order');
  t.is(hb.bytes(), data.length);
  t.deepEqual(cbOrder, Array.from({ length: k }, (_, i) => i), 'each callback once, in write order');
  b.end();
  await Promise.all([closed(a), closed(b)]);
  stop();
});

test.serial("SMC-R mode: a flowing reader that pauses inside 'data' gets nothing until resume(), then the rest in order", async (t) => {
  const { a, b, stop } = await smcPair({ rmbeA: 16384, rmbeB: 16384 });
  a.resume();
  const data = randomBytes(1 << 20);
  const got: Buffer[] = [];
  let paused = false, whilePaused = 0, pauses = 0, n = 0;
  b.on('data', (d: Buffer) => {
    if (paused) whilePaused++;
    got.push(d);
    n += d.length;
    // pause three times, each for a while, as a consumer with a slow sink does
    if (pauses < 3 && n >= (pauses + 1) * 200_000) {
      pauses++;
      paused = true;
      b.pause();
      setTimeout(() => { paused = false; b.resume(); }, 30);
    }
  });
  const ended = new Promise<void>((r) => b.once('end', () => r()));
  // many small writes (many CDCs, many 'data' events) and a few large ones
  for (let off = 0; off < data.length;) {
    const len = off < 300_000 ? 1000 : 50_000;
    if (!a.write(data.subarray(off, off + len))) await new Promise((r) => a.once('drain', r));
    off += len;
  }
  a.end();
  await ended;
  t.is(pauses, 3);
  t.is(whilePaused, 0, "no 'data' while paused");
  t.is(sha(Buffer.concat(got)), sha(data), 'every byte, in order');
  b.end();
  await Promise.all([closed(a), closed(b)]);
  stop();
});

test.serial("SMC-R mode: a reader with setEncoding gets strings on every 'data', also on the direct delivery path", async (t) => {
  const { a, b, stop } = await smcPair({ rmbeA: 16384, rmbeB: 16384 });
  a.resume();
  b.setEncoding('utf8');
  const text = 'smc-r \u00e9\u00e8 '.repeat(20_000); // multi-byte characters, split across chunks
  let got = '', buffers = 0;
  b.on('data', (d: string | Buffer) => { if (typeof d !== 'string') buffers++; got += String(d); });
  const ended = new Promise<void>((r) => b.once('end', () => r()));
  const bytes = Buffer.from(text, 'utf8');
  for (let off = 0; off < bytes.length; off += 999) {
    if (!a.write(bytes.subarray(off, off + 999))) await new Promise((r) => a.once('drain', r));
  }
  a.end();
  await ended;
  t.is(buffers, 0, "every 'data' is a string");
  t.is(got, text);
  b.end();
  await Promise.all([closed(a), closed(b)]);
  stop();
});

/** Read `s` through setOnread into a small reused buffer; pauses once after `pauseAt` bytes and resumes later. */
function onreadSink(s: SmcSocket, bufSize: number, pauseAt: number): { digest: Promise<string>; bytes: () => number; pauses: () => number; maxChunk: () => number } {
  const h = createHash('sha256');
  let n = 0, pauses = 0, max = 0;
  const buffer = Buffer.alloc(bufSize);
  s.setOnread({
    buffer,
    callback: (nread, buf) => {
      if (buf !== buffer) throw new Error('onread handed over another buffer');
      h.update(buf.subarray(0, nread));
      n += nread;
      max = Math.max(max, nread);
      if (pauses === 0 && n >= pauseAt) {
        pauses++;
        setTimeout(() => s.resume(), 30);
        return false;
      }
      return undefined;
    },
  });
  s.on('data', () => { throw new Error("'data' emitted in onread mode"); });
  const digest = new Promise<string>((r) => s.once('end', () => r(h.digest('hex'))));
  s.resume();
  return { digest, bytes: () => n, pauses: () => pauses, maxChunk: () => max };
}

/**
 * a → b through b.setOnread: bytes b's Readable already holds (a header parser unshifted them)
 * come first, one pause by returning false, resume, end; every byte by SHA-256.
 */
async function onreadThrough(t: ExecutionContext, a: SmcSocket, b: SmcSocket, stop: () => void, size: number, bufSize: number): Promise<void> {
  a.resume(); // a reads nothing but b's end
  const data = randomBytes(size);
  a.write(data.subarray(0, 1000));
  await new Promise<void>((r) => b.once('data', (d: Buffer) => { b.pause(); b.unshift(d); r(); }));
  const sink = onreadSink(b, bufSize, 1 << 20);
  await pipeline(Readable.from([data.subarray(1000, size >> 1), data.subarray(size >> 1)]), a);
  t.is(await sink.digest, sha(data));
  t.is(sink.bytes(), data.length);
  t.is(sink.pauses(), 1);
  t.true(sink.maxChunk() <= bufSize);
  b.end();
  await Promise.all([closed(a), closed(b)]);
  stop();
}

test.serial('SMC-R mode: setOnread reads through one reused buffer (pause, resume, bytes buffered before it, end)', async (t) => {
  const { a, b, stop } = await smcPair({ rmbeA: 65536, rmbeB: 65536 });
  await onreadThrough(t, a, b, stop, 6 << 20, 7000);
});

test.serial('fallback mode: setOnread copies TCP chunks through the reused buffer', async (t) => {
  const [c, s, stop] = await tcpPair();
  const a = new SmcSocket({ tcp: c, mode: 'tcp', fallbackCode: 0x03010000 });
  const b = new SmcSocket({ tcp: s, mode: 'tcp', fallbackCode: 0x03010000 });
  await onreadThrough(t, a, b, stop, 3 << 20, 5000);
});

test.serial('SMC-R mode: urgent data through the socket', async (t) => {
  const { a, b, stop } = await smcPair();
  a.resume();
  const got: Buffer[] = [];
  b.on('data', (d: Buffer) => got.push(d));
  const urgent = new Promise<number>((r) => b.once('urgent', r));
  a.write('normal ');
  await a.sendUrgent('!U');
  a.write(' after');
  t.is(String.fromCharCode(await urgent), 'U');
  t.true(await until(() => Buffer.concat(got).toString() === 'normal ! after'));
  a.end(); b.end();
  await Promise.all([closed(a), closed(b)]);
  stop();
});

test.serial('SMC-R mode: destroy() aborts; the peer socket gets ECONNRESET and both close', async (t) => {
  const { a, b, stop, cB } = await smcPair();
  a.write('x');
  await new Promise((r) => setTimeout(r, 20));
  const errB = new Promise<Error>((r) => b.once('error', r));
  a.destroy();
  const e = await errB;
  t.is((e as Error & { code?: string }).code, 'ECONNRESET');
  t.regex(e.message, /peer aborted|TCP connection failed/, "abort CDC or the TCP reset, whichever arrives first");
  await Promise.all([closed(a), closed(b)]);
  t.is(cB.conn.stateName, 'CLOSED');
  stop();
});

test.serial('SMC-R mode: a TCP reset while SMC-R is active aborts the connection on both sides', async (t) => {
  const { a, b, stop, cA, cB } = await smcPair();
  const errA = new Promise<Error>((r) => a.once('error', r));
  const errB = new Promise<Error>((r) => b.once('error', r));
  b.tcp.resetAndDestroy();
  const ea = await errA;
  t.regex(ea.message, /ECONNRESET|aborted/);
  await errB.catch(() => undefined);
  await Promise.all([closed(a), closed(b)]);
  t.true(cA.conn.aborted);
  t.is(cB.conn.stateName, 'CLOSED');
  t.is(cA.conn.stateName, 'CLOSED');
  stop();
});

test.serial('SMC-R mode: abort after end() closes the TCP socket (no handle left open)', async (t) => {
  const { a, b, stop, cA } = await smcPair();
  b.resume();
  b.on('error', () => undefined); // the abort reaches b
  // The TCP half-close that end() does after the SMC one (_final), with the abort right behind it
  // (the peer's abort CDC or closeAll() in the same turn): libuv refuses a reset while the
  // shutdown is pending, and Node used to leave the handle open for good.
  a.tcp.end();
  const tcpErrors: string[] = [];
  a.tcp.on('error', (e) => tcpErrors.push(e.message));
  const tcpClosed = new Promise<boolean>((r) => { a.tcp.once('close', () => r(true)); setTimeout(() => r(false), 3000).unref(); });
  a.on('error', () => undefined);
  a.destroy(new Error('test abort'));
  t.true(await tcpClosed, 'the TCP socket emits close (its handle was released)');
  t.deepEqual(tcpErrors, []);
  t.true(cA.conn.aborted);
  b.destroy();
  await Promise.all([closed(a), closed(b)]);
  stop();
});

test.after.always(async () => { await L?.close(); });
