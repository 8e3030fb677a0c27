// Host-side part of scenario i-endpoint-server: smcscope's userspace SMC-R endpoint as the
// SERVER for guest A's kernel SMC-R client (run by the lab harness inside the lab's network
// namespace, on the bridge address 10.55.0.254). RDMA through uroce (RoCEv2 over UDP 4791 on
// that address), TCP option 254 through the eBPF sock_ops program.
//   port 12345: UEID SMC-LAB-UEID (the guest's): SMC-R, first then subsequent contact;
//   port 12346: UEID SMC-OTHER-UEID only: the kernel's v2 Proposal gets our CLC Decline;
//   port 12347: UEID SMC-LAB-UEID, max links 1 offered (one RoCE device, no second link to add):
//               a second link group, whose first contact skips the kernel client's ADD LINK wait.
// Every connection is answered like smcpingpong's server: read to EOF, reply
// "ACK <bytes> fnv1a=<hash>\n", close. After the guest's conns-done, closeAll() deletes the link
// group (LLC DELETE LINK) and host.closed tells the guest. Results: $LAB_RUN/endpoint-server.json.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createServer, closeAll, type SmcSocket } from '../../../endpoint/index.js';
import { FNV1A_INIT, fnv1aUpdate, fnv1aHex, waitForFile } from '../hostpart.js';

const hostIp = process.env.LAB_HOST_IP ?? '10.55.0.254';
const sync = process.env.LAB_SYNC;
const runDir = process.env.LAB_RUN;
if (!sync || !runDir) { console.error('host part: LAB_SYNC/LAB_RUN not set (run through the lab harness)'); process.exit(2); }

const PORT = 12345, FALLBACK_PORT = 12346, ONELINK_PORT = 12347;
const UEID = 'SMC-LAB-UEID', OTHER_UEID = 'SMC-OTHER-UEID';
const t0 = Date.now();
const stamp = (): string => ((Date.now() - t0) / 1000).toFixed(3).padStart(8);
const say = (l: string): void => console.log(`[${stamp()}] ${l}`);
const device = { provider: 'uroce' as const, address: hostIp };

interface ConnRecord {
  n: number; port: number; peer: string; mode: string; handshakeMs: number;
  smcr?: SmcSocket['smcr']; fallback?: SmcSocket['fallback'];
  bytes?: number; fnv1a?: string; first?: string; reply?: string; transferMs?: number; error?: string;
}
const out: { conns: ConnRecord[]; closeMs?: number; errors: string[] } = { conns: [], errors: [] };
const save = (): void => writeFileSync(join(runDir, 'endpoint-server.json'), JSON.stringify(out, null, 2));

const giveUp = setTimeout(() => { say('host part: the guest did not finish within 280s'); out.errors.push('timeout'); save(); process.exit(1); }, 280_000);
let count = 0;

function serve(port: number, accepted: Map<number, number>) {
  return (s: SmcSocket): void => {
    const n = ++count;
    const start = accepted.get(s.tcp.remotePort ?? 0) ?? Date.now();
    const rec: ConnRecord = { n, port, peer: `${s.tcp.remoteAddress}:${s.tcp.remotePort}`, mode: s.mode, handshakeMs: Date.now() - start };
    if (s.smcr) rec.smcr = s.smcr;
    if (s.fallback) rec.fallback = s.fallback;
    out.conns.push(rec);
    say(`conn ${n} (port ${port}) from ${rec.peer}: mode ${s.mode} after ${rec.handshakeMs} ms ${s.smcr ? JSON.stringify(s.smcr) : JSON.stringify(s.fallback)}`);
    let bytes = 0;
    let h = FNV1A_INIT;
    let first = '';
    let tData = 0;
    s.on('data', (d: Buffer) => {
      if (!bytes) { tData = Date.now(); first = d.subarray(0, 80).toString('latin1').replace(/[^\x20-\x7e]/g, '.'); }
      bytes += d.length;
      h = fnv1aUpdate(h, d);
    });
    s.on('end', () => {
      const hash = fnv1aHex(h);
      Object.assign(rec, { bytes, fnv1a: hash, first, transferMs: tData ? Date.now() - tData : 0, reply: `ACK ${bytes} fnv1a=${hash}` });
      say(`conn ${n}: received ${bytes} bytes in ${rec.transferMs} ms fnv1a=${hash} first='${first}'`);
      s.end(`ACK ${bytes} fnv1a=${hash}\n`);
      save();
    });
    s.on('error', (e) => { rec.error = e.message; say(`conn ${n}: error ${e.message}`); save(); });
    s.on('close', () => say(`conn ${n}: closed`));
  };
}

function listenWith(port: number, ueids: string[], maxLinks?: number) {
  const accepted = new Map<number, number>();
  const server = createServer({ device, ueids, tcpOption: 'ebpf', ...(maxLinks ? { maxLinks } : {}), log: (l) => say(`smc[${port}]: ${l}`) }, serve(port, accepted));
  server.tcp.on('connection', (sock) => accepted.set(sock.remotePort ?? 0, Date.now()));
  server.on('error', (e: Error) => { out.errors.push(e.message); say(`server ${port}: error ${e.message}`); });
  return server;
}

const main = listenWith(PORT, [UEID]);
const other = listenWith(FALLBACK_PORT, [OTHER_UEID]);
const oneLink = listenWith(ONELINK_PORT, [UEID], 1);
try {
  await main.listen(PORT, hostIp);
  await other.listen(FALLBACK_PORT, hostIp);
  await oneLink.listen(ONELINK_PORT, hostIp);
} catch (e) {
  say(`host part: cannot listen: ${(e as Error).message}`);
  process.exit(1);
}
say(`listening on ${hostIp}:${PORT} (UEID ${UEID}), :${FALLBACK_PORT} (UEID ${OTHER_UEID}), :${ONELINK_PORT} (UEID ${UEID}, max links 1); uroce + eBPF TCP option`);
writeFileSync(join(sync, 'host.ready'), '');

// wait for the guest's conns-done (polled: the run folder is a plain directory on this side)
await waitForFile(join(sync, 'a.conns-done'));
for (const s of [main, other, oneLink]) s.tcp.close();
const c0 = Date.now();
const closed = await Promise.race([closeAll().then(() => true), new Promise<false>((r) => setTimeout(() => r(false), 15_000))]);
if (!closed) { out.errors.push('closeAll did not finish within 15 s'); say('closeAll did not finish within 15 s'); }
out.closeMs = Date.now() - c0;
say(`endpoint closed (link groups deleted) in ${out.closeMs} ms`);
save();
writeFileSync(join(sync, 'host.closed'), '');
clearTimeout(giveUp);
const ok = out.conns.length === 4 && out.errors.length === 0 && out.conns.every((c) => c.reply !== undefined && !c.error);
say(`host part ${ok ? 'done' : 'FAILED'}: ${out.conns.length} connections`);
process.exit(ok ? 0 : 1);
