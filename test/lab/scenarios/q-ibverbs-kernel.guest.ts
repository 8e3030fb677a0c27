// Guest-side part of scenario q-ibverbs-kernel: smcscope's SMC-R endpoint on the native
// libibverbs provider (rxe0 in guest A, Soft-RoCE on eth0) against guest B's kernel SMC-R.
// Bundled with esbuild by q-ibverbs-kernel.host.ts and run by guest A with the host's node:
//   node guest.mjs client PEER PORT REVPORT DONE CLOSED   our client → kernel server
//   node guest.mjs server PORT REVPORT DONE CLOSED        kernel client → our server
// Both: conn 1 = first contact with a short message, conn 2 = subsequent contact with 1 MiB
// (smcpingpong's bulk pattern) from client to server, conn 3 = 1 MiB from server to client
// (REVPORT: smcpingpong server -S / client -r). Every transfer is checked by smcpingpong's
// "ACK <bytes> fnv1a=<hash>": the receiver hashes to EOF and answers, the sender compares.
// Then, after guest B signalled DONE (it dumped its SMC state), closeAll() deletes the link
// group (LLC DELETE LINK) and CLOSED tells guest B. The endpoint's own state before and after
// (stack.status()) and every connection go to /out/ibverbs-ROLE.json. Exit 0 only if all is well.
// The same program runs on the host side over uroce (scenario u-uroce-failover: the host part
// starts it with LAB_ENDPOINT=uroce and the devices in LAB_ENDPOINT_DEVICES, its results in
// $LAB_RUN/uroce-ROLE*.json, its sync files as host.NAME, the kernel guest as "a").
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { networkInterfaces } from 'node:os';
import { connect, createServer, closeAll, endpoint, type SmcSocket } from '../../../endpoint/index.js';
import { stateJson } from '../../../endpoint/control.js';
import type { SmcOptions } from '../../../endpoint/config.js';
import { FNV1A_INIT, fnv1a, fnv1aHex, fnv1aUpdate } from '../hostpart.js';

const [mode, ...args] = process.argv.slice(2);
// Defaults: inside guest A on ibverbs; the uroce host part sets these (see the top).
const PROVIDER = process.env.LAB_ENDPOINT ?? 'ibverbs';
const OUT = process.env.LAB_RUN ?? '/out';
const SYNC = join(OUT, 'sync');
const ME = process.env.LAB_ENDPOINT_AS ?? 'a';          // our sync files: ME.NAME
const KERNEL = process.env.LAB_KERNEL_AS ?? 'b';       // the kernel guest's sync files
const UEID = 'SMC-LAB-UEID';
const t0 = Date.now();
const stamp = (): string => ((Date.now() - t0) / 1000).toFixed(3).padStart(8);
const say = (l: string): void => console.log(`[${stamp()} ${PROVIDER}-${mode}] ${l}`);
const devices = JSON.parse(process.env.LAB_ENDPOINT_DEVICES ?? '{"device":{"provider":"ibverbs","device":"rxe0"},"alternates":[{"provider":"ibverbs","device":"rxe1"}]}') as Pick<SmcOptions, 'device' | 'alternates'>;
const opts: SmcOptions = { device: devices.device, ueids: [UEID], tcpOption: 'ebpf', log: (l) => say(`smc: ${l}`) };

interface ConnRecord {
  n: number; mode: string; handshakeMs: number; smcr?: SmcSocket['smcr']; fallback?: SmcSocket['fallback'];
  bytes: number; fnv1a: string; reply?: string; replyOk?: boolean; transferMs?: number; error?: string;
}
const out: { role: string; provider: string; conns: ConnRecord[]; statusBefore?: unknown; statusAfter?: unknown; closeMs?: number; errors: string[] } =
  { role: mode ?? '?', provider: JSON.stringify(devices.device), conns: [], errors: [] };
const save = (): void => writeFileSync(join(OUT, `${PROVIDER}-${mode}.json`), JSON.stringify(out, null, 2));
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
async function waitFor(name: string, s: number): Promise<boolean> {
  for (let i = 0; i < s * 4; i++) { if (existsSync(join(SYNC, name))) return true; await sleep(250); }
  out.errors.push(`timeout waiting for ${name}`);
  return false;
}
const signal = (name: string): void => { writeFileSync(join(SYNC, `${ME}.${name}`), ''); say(`signal ${name}`); };

/** smcpingpong's bulk pattern: byte i is "0123456789abcdef"[i % 16]. */
function pattern(n: number): Buffer {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = '0123456789abcdef'.charCodeAt(i % 16);
  return b;
}

const giveUp = setTimeout(() => { say('not finished within 300 s'); out.errors.push('timeout'); save(); process.exit(1); }, 300_000);

interface LinkView { id: number; state: string; gid: string; peer?: { gid: string } }
/** After a device returned: wait (60 s at most) until the group has two ACTIVE links over
 *  different devices on both sides and no third one, write state relinked, signal relinked. */
async function relinked(stack: Awaited<ReturnType<typeof endpoint>>): Promise<void> {
  const links = (): LinkView[] => ((stateJson(stack).linkGroups as Array<{ links: LinkView[] }>)[0]?.links ?? []);
  const symmetric = (): boolean => {
    const ls = links();
    return ls.length === 2 && ls.every((l) => l.state === 'ACTIVE') && ls[0]!.gid !== ls[1]!.gid && ls[0]!.peer?.gid !== ls[1]!.peer?.gid;
  };
  let waited = 0;
  while (!symmetric() && waited < 60_000) { await sleep(250); waited += 250; }
  say(`links ${waited} ms after the device returned: ${JSON.stringify(links())}`);
  await state('relinked');
  if (symmetric()) signal('relinked'); else out.errors.push('no symmetric pair of links within 60 s after the device returned');
}

/** The endpoint's state as smcdump --state reads it (--state-json), also written to
 *  /out/ibverbs-ROLE-state-TAG.json. */
async function state(tag: string): Promise<unknown> {
  let s: unknown;
  try { s = stateJson(await endpoint(opts)); } catch (e) { s = { error: (e as Error).message }; }
  writeFileSync(join(OUT, `${PROVIDER}-${mode}-state-${tag}.json`), JSON.stringify(s, null, 2));
  return s;
}

/** Our own device is about to go under conn 2: write its netdev and address (the guest's shell
 *  or the host part takes that one away) and signal conn2-up. */
function announceConn2(stack: Awaited<ReturnType<typeof endpoint>>, s: SmcSocket): void {
  const link = ((stateJson(stack).linkGroups as Array<{ links: LinkView[] }>)[0]?.links ?? []).find((l) => l.id === s.smcr?.link);
  const ip = link?.gid.replace(/^::ffff:/, '');
  const dev = Object.entries(networkInterfaces()).find(([, as]) => as?.some((x) => x.address === ip))?.[0] ?? 'eth0';
  writeFileSync(join(OUT, 'conn2-netdev'), `${dev}\n`);
  writeFileSync(join(OUT, 'conn2-address'), `${ip}\n`);
  say(`conn 2 is on link ${s.smcr?.link} (${ip}, ${dev})`);
  signal('conn2-up');
}

async function finish(done: string, closed: string): Promise<void> {
  await waitFor(`${KERNEL}.${done}`, 120);
  const stack = await endpoint(opts);
  out.statusBefore = await state('before-close');
  const c0 = Date.now();
  const ok = await Promise.race([closeAll().then(() => true), sleep(15_000).then(() => false)]);
  if (!ok) out.errors.push('closeAll did not finish within 15 s');
  out.closeMs = Date.now() - c0;
  try { out.statusAfter = stateJson(stack); } catch (e) { out.statusAfter = { error: (e as Error).message }; }
  writeFileSync(join(OUT, `${PROVIDER}-${mode}-state-exit.json`), JSON.stringify(out.statusAfter, null, 2));
  say(`endpoint closed (link groups deleted) in ${out.closeMs} ms`);
  save();
  signal(closed);
}

async function clientOne(peer: string, port: number, n: number, data: Buffer, paced?: { chunk: number; pauseMs: number; onUp: (s: SmcSocket) => void }, beforeSend?: () => Promise<void>): Promise<void> {
  const rec: ConnRecord = { n, mode: '?', handshakeMs: 0, bytes: data.length, fnv1a: fnv1a(data) };
  out.conns.push(rec);
  try {
    const s0 = Date.now();
    const s = await connect({ ...opts, host: peer, port });
    rec.handshakeMs = Date.now() - s0;
    rec.mode = s.mode;
    if (s.smcr) rec.smcr = s.smcr;
    if (s.fallback) rec.fallback = s.fallback;
    say(`conn ${n}: mode ${s.mode} after ${rec.handshakeMs} ms ${JSON.stringify(s.smcr ?? s.fallback)}`);
    const parts: Buffer[] = [];
    const done = new Promise<void>((resolve, reject) => { s.on('data', (d: Buffer) => parts.push(d)); s.on('end', resolve); s.on('error', reject); });
    await beforeSend?.();
    const w0 = Date.now();
    if (paced) {
      // CHUNK bytes every PAUSE ms (as smcpingpong -c/-p), so a failure falls mid-transfer
      paced.onUp(s);
      for (let off = 0; off < data.length; off += paced.chunk) {
        if (!s.write(data.subarray(off, off + paced.chunk))) await new Promise<void>((r) => s.once('drain', () => r()));
        await sleep(paced.pauseMs);
      }
      s.end();
    } else {
      s.end(data);
    }
    await done;
    rec.transferMs = Date.now() - w0;
    rec.reply = Buffer.concat(parts).toString('latin1').trim();
    rec.replyOk = rec.reply === `ACK ${data.length} fnv1a=${rec.fnv1a}`;
    say(`conn ${n}: sent ${data.length} bytes fnv1a=${rec.fnv1a}; reply after ${rec.transferMs} ms: ${rec.reply} (${rec.replyOk ? 'matches' : 'MISMATCH'})`);
    await new Promise<void>((resolve) => { if (s.destroyed) resolve(); else s.once('close', () => resolve()); setTimeout(resolve, 5000); });
  } catch (e) {
    rec.error = (e as Error).message;
    say(`conn ${n}: error ${rec.error}`);
  }
  save();
}

/** Conn 3 of the client: the kernel server sends (smcpingpong server -S); we hash to EOF and
 *  answer "ACK <bytes> fnv1a=<hash>", which the server prints. */
async function clientReverse(peer: string, port: number, n: number, expect: Buffer, onUp?: (s: SmcSocket) => void): Promise<void> {
  const rec: ConnRecord = { n, mode: '?', handshakeMs: 0, bytes: 0, fnv1a: '' };
  out.conns.push(rec);
  try {
    const s0 = Date.now();
    const s = await connect({ ...opts, host: peer, port });
    rec.handshakeMs = Date.now() - s0;
    rec.mode = s.mode;
    if (s.smcr) rec.smcr = s.smcr;
    if (s.fallback) rec.fallback = s.fallback;
    say(`conn ${n}: mode ${s.mode} after ${rec.handshakeMs} ms ${JSON.stringify(s.smcr ?? s.fallback)} (reverse: the server sends)`);
    onUp?.(s);
    let h = FNV1A_INIT;
    let tData = 0;
    await new Promise<void>((resolve, reject) => {
      s.on('data', (d: Buffer) => { if (!rec.bytes) tData = Date.now(); rec.bytes += d.length; h = fnv1aUpdate(h, d); });
      s.on('end', resolve);
      s.on('error', reject);
    });
    rec.fnv1a = fnv1aHex(h);
    rec.transferMs = tData ? Date.now() - tData : 0;
    rec.reply = `ACK ${rec.bytes} fnv1a=${rec.fnv1a}`;
    rec.replyOk = rec.bytes === expect.length && rec.fnv1a === fnv1a(expect);
    say(`conn ${n}: received ${rec.bytes} bytes in ${rec.transferMs} ms fnv1a=${rec.fnv1a} (${rec.replyOk ? 'matches' : 'MISMATCH'} the pattern)`);
    s.end(`${rec.reply}\n`);
    await new Promise<void>((resolve) => { if (s.destroyed) resolve(); else s.once('close', () => resolve()); setTimeout(resolve, 5000); });
  } catch (e) {
    rec.error = (e as Error).message;
    say(`conn ${n}: error ${rec.error}`);
  }
  save();
}

if (mode === 'client') {
  const [peer, portS, revPortS, done, closed] = args as [string, string, string, string, string];
  await clientOne(peer, Number(portS), 1, Buffer.from('SMC-R interop: the ibverbs endpoint to the kernel server 0123456789'));
  await sleep(1000);
  await clientOne(peer, Number(portS), 2, pattern(1 << 20));
  await sleep(1000);
  await clientReverse(peer, Number(revPortS), 3, pattern(1 << 20));
  signal('client-conns-done');
  await finish(done, closed);
  const ok = out.conns.length === 3 && out.errors.length === 0 && out.conns.every((c) => c.replyOk && c.mode === 'smcr');
  say(`client ${ok ? 'done' : 'FAILED'}`);
  clearTimeout(giveUp);
  process.exit(ok ? 0 : 1);
} else if (mode === 'server') {
  const [portS, revPortS, done, closed] = args as [string, string, string, string];
  const port = Number(portS), revPort = Number(revPortS);
  const accepted = new Map<number, number>();
  let count = 0;
  const server = createServer(opts, (s: SmcSocket) => {
    const n = ++count;
    const rec: ConnRecord = { n, mode: s.mode, handshakeMs: Date.now() - (accepted.get(s.tcp.remotePort ?? 0) ?? Date.now()), bytes: 0, fnv1a: '' };
    if (s.smcr) rec.smcr = s.smcr;
    if (s.fallback) rec.fallback = s.fallback;
    out.conns.push(rec);
    say(`conn ${n} from ${s.tcp.remoteAddress}:${s.tcp.remotePort}: mode ${s.mode} after ${rec.handshakeMs} ms ${JSON.stringify(s.smcr ?? s.fallback)}`);
    let h = FNV1A_INIT;
    let tData = 0;
    s.on('data', (d: Buffer) => { if (!rec.bytes) tData = Date.now(); rec.bytes += d.length; h = fnv1aUpdate(h, d); });
    s.on('end', () => {
      rec.fnv1a = fnv1aHex(h);
      rec.transferMs = tData ? Date.now() - tData : 0;
      rec.reply = `ACK ${rec.bytes} fnv1a=${rec.fnv1a}`;
      say(`conn ${n}: received ${rec.bytes} bytes in ${rec.transferMs} ms fnv1a=${rec.fnv1a}`);
      s.end(`${rec.reply}\n`);
      save();
    });
    s.on('error', (e) => { rec.error = e.message; say(`conn ${n}: error ${e.message}`); save(); });
  });
  server.tcp.on('connection', (sock) => accepted.set(sock.remotePort ?? 0, Date.now()));
  server.on('error', (e: Error) => { out.errors.push(e.message); say(`server: error ${e.message}`); });
  // the reverse listener: we send 1 MiB of the pattern, the kernel client (smcpingpong -r)
  // hashes it and answers "ACK <bytes> fnv1a=<hash>", which we check
  const rev = createServer(opts, (s: SmcSocket) => {
    const n = ++count;
    const data = pattern(1 << 20);
    const rec: ConnRecord = { n, mode: s.mode, handshakeMs: Date.now() - (accepted.get(s.tcp.remotePort ?? 0) ?? Date.now()), bytes: data.length, fnv1a: fnv1a(data) };
    if (s.smcr) rec.smcr = s.smcr;
    if (s.fallback) rec.fallback = s.fallback;
    out.conns.push(rec);
    say(`conn ${n} from ${s.tcp.remoteAddress}:${s.tcp.remotePort}: mode ${s.mode} after ${rec.handshakeMs} ms ${JSON.stringify(s.smcr ?? s.fallback)} (reverse: we send)`);
    const parts: Buffer[] = [];
    const w0 = Date.now();
    s.on('data', (d: Buffer) => parts.push(d));
    s.on('end', () => {
      rec.transferMs = Date.now() - w0;
      rec.reply = Buffer.concat(parts).toString('latin1').trim();
      rec.replyOk = rec.reply === `ACK ${data.length} fnv1a=${rec.fnv1a}`;
      say(`conn ${n}: sent ${data.length} bytes fnv1a=${rec.fnv1a}; reply after ${rec.transferMs} ms: ${rec.reply} (${rec.replyOk ? 'matches' : 'MISMATCH'})`);
      s.end();
      save();
    });
    s.on('error', (e) => { rec.error = e.message; say(`conn ${n}: error ${e.message}`); save(); });
    s.write(data);
    s.end();
  });
  rev.tcp.on('connection', (sock) => accepted.set(sock.remotePort ?? 0, Date.now()));
  rev.on('error', (e: Error) => { out.errors.push(e.message); say(`server ${revPort}: error ${e.message}`); });
  await server.listen(port, '0.0.0.0');
  await rev.listen(revPort, '0.0.0.0');
  say(`listening on :${port} and :${revPort} (reverse) (ibverbs rxe0, UEID ${UEID}, eBPF TCP option)`);
  signal('srv-listening');
  await finish(done, closed);
  server.tcp.close();
  rev.tcp.close();
  const ok = out.conns.length === 3 && out.errors.length === 0 && out.conns.every((c) => c.mode === 'smcr' && c.reply && !c.error && c.replyOk !== false);
  say(`server ${ok ? 'done' : 'FAILED'}: ${out.conns.length} connections`);
  clearTimeout(giveUp);
  process.exit(ok ? 0 : 1);
} else if (mode === 'failover-client') {
  // Scenario r-ibverbs-failover: two devices (rxe0 on eth0, rxe1 on eth1 as the alternate).
  // conn 1 (PORT, short message) creates the link group; the kernel server adds the second link
  // (ADD LINK on rxe1); when our snapshot shows two ACTIVE links we signal two-links. conn 2
  // (REVPORT): the kernel server sends BYTES paced; guest B takes down the NIC under that
  // connection's link mid-transfer; every byte must arrive (FNV-1a of the pattern) and our ACK
  // goes back on the surviving link. Then B brings the NIC back and the kernel re-adds a
  // symmetric link (we accept a third link; the kernel then deletes the asymmetric one). With
  // REVPORT2: after B's nic-back we wait for two ACTIVE links over different devices on both
  // sides, record them (state relinked) and conn 3 (REVPORT2): the kernel sends BYTES again,
  // every byte hashed, over the re-added links; then relinked-done and close after DONE.
  // With an 8th argument `self` (scenario t-ibverbs-client-relink) it is OUR device that goes:
  // when conn 2 is up we write the netdev under its link to /out/conn2-netdev and signal
  // conn2-up; guest A's shell takes that NIC down (PORT_ERR: our link fails over) and, after
  // transfer-done, up again (PORT_ACTIVE: we send REQUEST ADD LINK) and signals a.nic-back.
  const [peer, portS, revPortS, bytesS, done, closed, revPort2S, flap] = args as [string, string, string, string, string, string, string | undefined, string | undefined];
  const flapper = flap === 'self' ? ME : KERNEL;
  Object.assign(opts, { alternates: devices.alternates });
  const stack = await endpoint(opts);
  const links = (): Array<{ id: number; state: string }> => ((stateJson(stack).linkGroups as Array<{ links: Array<{ id: number; state: string }> }>)[0]?.links ?? []);
  let waited = 0;
  const twoLinks = async (): Promise<void> => { while (links().filter((l) => l.state === 'ACTIVE').length < 2 && waited < 30_000) { await sleep(500); waited += 500; } };
  // uroce: conn 1's data waits for the second link. The kernel server prepares it right after
  // CONFIRM LINK, and its first link on rxe1 allocates and zeroes rxe1's CQs, which stalls the
  // TCG guest for over a second; uroce gives up after Linux's retry budget (timeout 15, retry 7:
  // ~1.07 s), whereas rxe (ibverbs) retries forever at retry count 7.
  await clientOne(peer, Number(portS), 1, Buffer.from('SMC-R interop: the ibverbs endpoint, two devices 0123456789'), undefined, PROVIDER === 'uroce' ? twoLinks : undefined);
  await twoLinks();
  say(`links after ${waited} ms: ${JSON.stringify(links())}`);
  await state('two-links');
  if (links().filter((l) => l.state === 'ACTIVE').length >= 2) signal('two-links'); else out.errors.push('no second link within 30 s');
  const conn2Up = (s: SmcSocket): void => announceConn2(stack, s);
  // our own device goes (self): we are the sender of conn 2 (REVPORT serves a plain receiver),
  // so the kernel has no RDMA WRITEs outstanding toward the device that goes (rxe retransmits
  // those without end, and the kernel's DELETE LINK flow waits for them)
  if (flap === 'self') await clientOne(peer, Number(revPortS), 2, pattern(Number(bytesS)), { chunk: 16384, pauseMs: 80, onUp: conn2Up });
  else await clientReverse(peer, Number(revPortS), 2, pattern(Number(bytesS)));
  await state('after-failover');
  signal('transfer-done');
  if (revPort2S) {
    await waitFor(`${flapper}.nic-back`, 180);
    await relinked(stack);
    await clientReverse(peer, Number(revPort2S), 3, pattern(Number(bytesS)));
    await state('after-return');
    signal('relinked-done');
  }
  await finish(done, closed);
  const ok = out.conns.length === (revPort2S ? 3 : 2) && out.errors.length === 0 && out.conns.every((c) => c.replyOk && c.mode === 'smcr');
  say(`failover client ${ok ? 'done' : 'FAILED'}`);
  clearTimeout(giveUp);
  process.exit(ok ? 0 : 1);
} else if (mode === 'failover-server') {
  // Scenario s-ibverbs-failover-server: our server with rxe0 + alternate rxe1. Conn 1 (short
  // message, first contact): we add the second link (ADD LINK on rxe1); when our snapshot shows
  // two ACTIVE links we signal two-links. Conn 2: the kernel client sends BYTES paced and takes
  // down its NIC under the connection's link mid-transfer; we hash every byte and ACK. We re-add
  // a link at once (asymmetric on the kernel's side). With a 5th argument (relink): after B's
  // nic-back the kernel client sends REQUEST ADD LINK, we add a symmetric link and delete the
  // asymmetric one; when that shows we signal relinked and take conn 3 (BYTES, hashed).
  // With a 6th argument `self` (scenario u-uroce-failover, 5th argument '-' for no relink) it is
  // OUR device that goes: from conn 2 on we send BYTES paced (the kernel client reads with -r and
  // answers with its hash: the kernel has no RDMA WRITEs toward the path that goes, see t), and
  // when conn 2 is up we name its address (conn2-address) and signal conn2-up.
  const [portS, bytesS, done, closed, relinkArg, flap] = args as [string, string, string, string, string | undefined, string | undefined];
  const relink = relinkArg && relinkArg !== '-' ? relinkArg : undefined;
  const self = flap === 'self';
  Object.assign(opts, { alternates: devices.alternates });
  const want = Number(bytesS);
  let count = 0;
  const ended: Array<() => void> = [];
  const endedP = [new Promise<void>((r) => ended.push(r)), new Promise<void>((r) => ended.push(r)), new Promise<void>((r) => ended.push(r))];
  const server = createServer(opts, (s: SmcSocket) => {
    const n = ++count;
    const rec: ConnRecord = { n, mode: s.mode, handshakeMs: 0, bytes: 0, fnv1a: '' };
    if (s.smcr) rec.smcr = s.smcr;
    out.conns.push(rec);
    say(`conn ${n} from ${s.tcp.remoteAddress}:${s.tcp.remotePort}: mode ${s.mode} ${JSON.stringify(s.smcr ?? s.fallback)}`);
    s.on('error', (e) => { rec.error = e.message; say(`conn ${n}: error ${e.message}`); save(); ended[n - 1]?.(); });
    if (self && n >= 2) { void sendPaced(s, rec, n).then(() => ended[n - 1]?.()); return; }
    let h = FNV1A_INIT;
    let tData = 0;
    s.on('data', (d: Buffer) => { if (!rec.bytes) tData = Date.now(); rec.bytes += d.length; h = fnv1aUpdate(h, d); });
    s.on('end', () => {
      rec.fnv1a = fnv1aHex(h);
      rec.transferMs = tData ? Date.now() - tData : 0;
      rec.reply = `ACK ${rec.bytes} fnv1a=${rec.fnv1a}`;
      say(`conn ${n}: received ${rec.bytes} bytes in ${rec.transferMs} ms fnv1a=${rec.fnv1a}`);
      s.end(`${rec.reply}\n`);
      save();
      ended[n - 1]?.();
    });
  });
  /** Server, `self`: send BYTES of the pattern paced (16 KiB every 80 ms), then read the kernel
   *  client's "ACK <bytes> fnv1a=<hash>" to EOF and compare. */
  async function sendPaced(s: SmcSocket, rec: ConnRecord, n: number): Promise<void> {
    const data = pattern(want);
    Object.assign(rec, { bytes: data.length, fnv1a: fnv1a(data) });
    const parts: Buffer[] = [];
    const replied = new Promise<void>((resolve) => { s.on('data', (d: Buffer) => parts.push(d)); s.on('end', resolve); s.on('error', () => resolve()); });
    if (n === 2) announceConn2(await endpoint(opts), s);
    const w0 = Date.now();
    for (let off = 0; off < data.length && !s.destroyed; off += 16384) {
      if (!s.write(data.subarray(off, off + 16384))) await new Promise<void>((r) => s.once('drain', () => r()));
      await sleep(80);
    }
    s.end();
    await replied;
    rec.transferMs = Date.now() - w0;
    rec.reply = Buffer.concat(parts).toString('latin1').trim();
    rec.replyOk = rec.reply === `ACK ${data.length} fnv1a=${rec.fnv1a}`;
    say(`conn ${n}: sent ${data.length} bytes fnv1a=${rec.fnv1a}; reply after ${rec.transferMs} ms: ${rec.reply} (${rec.replyOk ? 'matches' : 'MISMATCH'})`);
    save();
  }
  server.on('error', (e: Error) => { out.errors.push(e.message); say(`server: error ${e.message}`); });
  await server.listen(Number(portS), '0.0.0.0');
  say(`listening on :${portS} (${JSON.stringify(opts.device)} + alternates ${JSON.stringify(opts.alternates)})`);
  signal('srv-listening');
  await endedP[0];
  const stack = await endpoint(opts);
  const links = (): Array<{ id: number; state: string }> => ((stateJson(stack).linkGroups as Array<{ links: Array<{ id: number; state: string }> }>)[0]?.links ?? []);
  let waited = 0;
  while (links().filter((l) => l.state === 'ACTIVE').length < 2 && waited < 30_000) { await sleep(500); waited += 500; }
  say(`links after ${waited} ms: ${JSON.stringify(links())}`);
  await state('two-links');
  if (links().filter((l) => l.state === 'ACTIVE').length >= 2) signal('two-links'); else out.errors.push('no second link within 30 s');
  await Promise.race([endedP[1], sleep(180_000)]);
  await state('after-failover');
  signal('transfer-done');
  if (relink) {
    await waitFor(`${KERNEL}.nic-back`, 180);
    await relinked(stack);
    await Promise.race([endedP[2], sleep(120_000)]);
    await state('after-return');
  }
  await finish(done, closed);
  server.tcp.close();
  const n = relink ? 3 : 2;
  const ok = out.conns.length === n && out.errors.length === 0 && out.conns.every((c) => c.mode === 'smcr' && !c.error)
    && out.conns.slice(1).every((c) => c.bytes === want && c.fnv1a === fnv1a(pattern(want)) && (!self || c.replyOk));
  say(`failover server ${ok ? 'done' : 'FAILED'}`);
  clearTimeout(giveUp);
  process.exit(ok ? 0 : 1);
} else if (mode === 'send') {
  // Scenario x-throughput: one connection to a kernel smcpingpong server, BYTES of the pattern in
  // 64 KiB writes, end, wait for its "ACK <bytes> fnv1a=<hash>"; MB/s = BYTES / (first write →
  // ACK), as the scenario computes it for a kernel client. One line "throughput LABEL: …" and
  // $OUT/throughput-LABEL.json.
  const [peer, portS, bytesS, label] = args as [string, string, string, string];
  const data = pattern(Number(bytesS));
  const h = fnv1a(data);
  const s = await connect({ ...opts, host: peer, port: Number(portS) });
  const parts: Buffer[] = [];
  const replied = new Promise<void>((resolve) => { s.on('data', (d: Buffer) => parts.push(d)); s.on('end', resolve); s.on('error', () => resolve()); });
  const w0 = process.hrtime.bigint();
  for (let off = 0; off < data.length; off += 65536) {
    if (!s.write(data.subarray(off, off + 65536))) await new Promise<void>((r) => s.once('drain', () => r()));
  }
  s.end();
  await replied;
  const secs = Number(process.hrtime.bigint() - w0) / 1e9;
  const reply = Buffer.concat(parts).toString('latin1').trim();
  const ok = s.mode === 'smcr' && reply === `ACK ${data.length} fnv1a=${h}`;
  const res = { label, mode: s.mode, bytes: data.length, seconds: secs, mbps: data.length / secs / 1e6, reply, ok };
  writeFileSync(join(OUT, `throughput-${label}.json`), JSON.stringify(res, null, 2));
  console.log(`throughput ${label}: ${data.length} bytes in ${secs.toFixed(3)} s = ${res.mbps.toFixed(1)} MB/s (${s.mode}; reply ${reply}${ok ? '' : ' MISMATCH'})`);
  await Promise.race([closeAll(), sleep(15_000)]);
  clearTimeout(giveUp);
  process.exit(ok ? 0 : 1);
} else {
  console.error('usage: guest.mjs client PEER PORT REVPORT DONE CLOSED | server PORT REVPORT DONE CLOSED | send PEER PORT BYTES LABEL');
  process.exit(2);
}
