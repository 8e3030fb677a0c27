// Host-side part of scenario w-uroce-limits: our endpoint over uroce (10.55.0.254, max links 1)
// against guest A's kernel with net.smc.smcr_max_conns_per_lgr = 16, N = 17 connections open at
// once in each role: the group fills at 16 (negotiated in CLC v2.1: the smaller max connections)
// and the 17th connection opens a second link group.
//   phase 1: our server on 12345; when all 17 are SMC-R we record our state and say conns-up-1;
//            each connection is hashed to EOF and answered "ACK <bytes> fnv1a=<hash>".
//   phase 2: after a.kserver-listening, 17 connects at once to the kernel's 12346; when all are
//            up we record our state and say conns-up-2; after a.kstate-done each sends BULK bytes
//            of smcpingpong's pattern, ends and checks the kernel's ACK.
// Then closeAll() (DELETE LINK per group) and host.closed. Results: $LAB_RUN/limits.json and
// limits-state-{conns-up-1,conns-up-2,before-close,exit}.json (smcdump --state input).
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { closeAll, connect, createServer, endpoint, type SmcSocket } from '../../../endpoint/index.js';
import { stateJson } from '../../../endpoint/control.js';
import type { SmcOptions } from '../../../endpoint/config.js';
import { FNV1A_INIT, fnv1a, fnv1aHex, fnv1aUpdate, waitForFile } from '../hostpart.js';

const hostIp = process.env.LAB_HOST_IP ?? '10.55.0.254';
const guest = process.env.LAB_GUEST_A ?? '10.55.0.1';
const sync = process.env.LAB_SYNC, runDir = process.env.LAB_RUN;
if (!sync || !runDir) { console.error('host part: LAB_SYNC/LAB_RUN not set (run through the lab harness)'); process.exit(2); }
const N = 17, BULK = 65536, PORT = 12345, KPORT = 12346;
const t0 = Date.now();
const say = (l: string): void => console.log(`[${((Date.now() - t0) / 1000).toFixed(3).padStart(8)}] ${l}`);
const opts: SmcOptions = { device: { provider: 'uroce', address: hostIp }, ueids: ['SMC-LAB-UEID'], tcpOption: 'ebpf', maxLinks: 1, log: (l) => say(`smc: ${l}`) };

interface Rec { n: number; mode: string; smcr?: SmcSocket['smcr']; fallback?: SmcSocket['fallback']; bytes?: number; fnv1a?: string; reply?: string; replyOk?: boolean; error?: string }
const out: { server: Rec[]; client: Rec[]; errors: string[]; closeMs?: number } = { server: [], client: [], errors: [] };
const save = (): void => writeFileSync(join(runDir!, 'limits.json'), JSON.stringify(out, null, 2));
const signal = (name: string): void => { writeFileSync(join(sync!, `host.${name}`), ''); say(`signal ${name}`); };
const state = async (tag: string): Promise<void> => writeFileSync(join(runDir!, `limits-state-${tag}.json`), JSON.stringify(stateJson(await endpoint(opts)), null, 2));
const giveUp = setTimeout(() => { say('host part: not finished within 330 s'); out.errors.push('timeout'); save(); process.exit(1); }, 330_000);
const pattern = (n: number): Buffer => Buffer.from(Array.from({ length: n }, (_, i) => '0123456789abcdef'.charCodeAt(i % 16)));

// ---- phase 1: our server, N kernel clients at once
let up = 0;
const allUp1 = new Promise<void>((resolve) => {
  const server = createServer(opts, (s: SmcSocket) => {
    const rec: Rec = { n: out.server.length + 1, mode: s.mode, ...(s.smcr ? { smcr: s.smcr } : {}), ...(s.fallback ? { fallback: s.fallback } : {}) };
    out.server.push(rec);
    say(`server conn ${rec.n}: ${s.mode} ${JSON.stringify(s.smcr ?? s.fallback)}`);
    let h = FNV1A_INIT, bytes = 0;
    s.on('data', (d: Buffer) => { bytes += d.length; h = fnv1aUpdate(h, d); });
    s.on('end', () => { Object.assign(rec, { bytes, fnv1a: fnv1aHex(h) }); s.end(`ACK ${bytes} fnv1a=${fnv1aHex(h)}\n`); save(); });
    s.on('error', (e) => { rec.error = e.message; save(); });
    if (++up === N) { server.tcp.close(); resolve(); }
  });
  server.on('error', (e: Error) => { out.errors.push(e.message); say(`server: ${e.message}`); });
  void server.listen(PORT, hostIp).then(() => signal('listening'));
});
await allUp1;
await state('conns-up-1');
signal('conns-up-1');
await waitFor('a.clients-done');

// ---- phase 2: our client, N connections at once to the kernel server
await waitFor('a.kserver-listening');
const socks = await Promise.all(Array.from({ length: N }, async (_, i) => {
  const rec: Rec = { n: i + 1, mode: '?' };
  out.client.push(rec);
  try {
    const s = await connect({ ...opts, host: guest, port: KPORT });
    Object.assign(rec, { mode: s.mode, ...(s.smcr ? { smcr: s.smcr } : {}), ...(s.fallback ? { fallback: s.fallback } : {}) });
    say(`client conn ${rec.n}: ${s.mode} ${JSON.stringify(s.smcr ?? s.fallback)}`);
    return { s, rec };
  } catch (e) { rec.error = (e as Error).message; return undefined; }
}));
await state('conns-up-2');
signal('conns-up-2');
await waitFor('a.kstate-done');
const data = pattern(BULK);
await Promise.all(socks.map(async (x) => {
  if (!x) return;
  const { s, rec } = x;
  const parts: Buffer[] = [];
  await new Promise<void>((resolve) => { s.on('data', (d: Buffer) => parts.push(d)); s.on('end', resolve); s.on('error', (e) => { rec.error = e.message; resolve(); }); s.end(data); });
  Object.assign(rec, { bytes: BULK, fnv1a: fnv1a(data), reply: Buffer.concat(parts).toString('latin1').trim() });
  rec.replyOk = rec.reply === `ACK ${BULK} fnv1a=${fnv1a(data)}`;
}));
save();
await new Promise((r) => setTimeout(r, 1500)); // the kernel's DELETE RKEYs of the closed connections
await state('before-close');
const c0 = Date.now();
const stack = await endpoint(opts);
await Promise.race([closeAll(), new Promise((r) => setTimeout(r, 20_000))]);
out.closeMs = Date.now() - c0;
writeFileSync(join(runDir, 'limits-state-exit.json'), JSON.stringify(stateJson(stack), null, 2));
save();
signal('closed');
clearTimeout(giveUp);
const ok = out.errors.length === 0 && [...out.server, ...out.client].every((r) => r.mode === 'smcr' && !r.error)
  && out.server.length === N && out.client.every((r) => r.replyOk);
say(`host part ${ok ? 'done' : 'FAILED'}`);
process.exit(ok ? 0 : 1);

async function waitFor(name: string): Promise<void> { await waitForFile(join(sync!, name)); }
