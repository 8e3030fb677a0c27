// Host-side part of scenario j-endpoint-client: smcscope's userspace SMC-R endpoint as the
// CLIENT of guest A's kernel SMC-R server (smcpingpong server, port 12345), run by the lab
// harness inside the lab's network namespace on the bridge address 10.55.0.254. RDMA through
// uroce (RoCEv2 over UDP 4791), TCP option 254 through the eBPF sock_ops program.
//   conn 1: first contact, a short message; conn 2: subsequent contact, 1 MiB (smcpingpong's
//   bulk pattern). Each: write, end() (SHUT_WR), read the server's "ACK <bytes> fnv1a=<hash>"
//   to EOF and compare it with our own count and FNV-1a.
// Then closeAll() deletes the link group (LLC DELETE LINK); host.closed tells the guest.
// Results: $LAB_RUN/endpoint-client.json.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { connect, closeAll, type SmcSocket } from '../../../endpoint/index.js';
import { fnv1a, waitForFile } from '../hostpart.js';

const hostIp = process.env.LAB_HOST_IP ?? '10.55.0.254';
const guest = process.env.LAB_GUEST_A ?? '10.55.0.1';
const sync = process.env.LAB_SYNC;
const runDir = process.env.LAB_RUN;
if (!sync || !runDir) { console.error('host part: LAB_SYNC/LAB_RUN not set (run through the lab harness)'); process.exit(2); }

const PORT = 12345;
const UEID = 'SMC-LAB-UEID';
const t0 = Date.now();
const stamp = (): string => ((Date.now() - t0) / 1000).toFixed(3).padStart(8);
const say = (l: string): void => console.log(`[${stamp()}] ${l}`);
const opts = { device: { provider: 'uroce' as const, address: hostIp }, ueids: [UEID], tcpOption: 'ebpf' as const, log: (l: string) => say(`smc: ${l}`) };

interface ConnRecord {
  n: number; mode: string; handshakeMs: number; smcr?: SmcSocket['smcr']; fallback?: SmcSocket['fallback'];
  sent: number; fnv1a: string; reply?: string; replyOk?: boolean; transferMs?: number; error?: string;
}
const out: { conns: ConnRecord[]; closeMs?: number; errors: string[] } = { conns: [], errors: [] };
const save = (): void => writeFileSync(join(runDir, 'endpoint-client.json'), JSON.stringify(out, null, 2));

/** smcpingpong's bulk pattern: byte i is "0123456789abcdef"[i % 16]. */
function pattern(n: number): Buffer {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = '0123456789abcdef'.charCodeAt(i % 16);
  return b;
}

const giveUp = setTimeout(() => { say('host part: not finished within 280s'); out.errors.push('timeout'); save(); process.exit(1); }, 280_000);

async function one(n: number, data: Buffer): Promise<void> {
  const rec: ConnRecord = { n, mode: '?', handshakeMs: 0, sent: data.length, fnv1a: fnv1a(data) };
  out.conns.push(rec);
  try {
    const s0 = Date.now();
    const s = await connect({ ...opts, host: guest, port: PORT, localAddress: hostIp });
    rec.handshakeMs = Date.now() - s0;
    rec.mode = s.mode;
    if (s.smcr) rec.smcr = s.smcr;
    if (s.fallback) rec.fallback = s.fallback;
    say(`conn ${n}: mode ${s.mode} after ${rec.handshakeMs} ms (TCP connect + CLC${s.smcr?.firstContact ? ' + CONFIRM LINK' : ''}) ${JSON.stringify(s.smcr ?? s.fallback)}`);
    const parts: Buffer[] = [];
    const done = new Promise<void>((resolve, reject) => {
      s.on('data', (d: Buffer) => parts.push(d));
      s.on('end', resolve);
      s.on('error', reject);
    });
    const w0 = Date.now();
    s.end(data);
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

await waitForFile(join(sync, 'a.listening'));
say(`guest A listens on ${guest}:${PORT}; connecting from ${hostIp} (uroce + eBPF TCP option)`);
await one(1, Buffer.from('SMC-R interop: the smcscope endpoint to guest A kernel server 0123456789'));
await new Promise((r) => setTimeout(r, 1000));
await one(2, pattern(1 << 20));

await waitForFile(join(sync, 'a.conns-done'));
const c0 = Date.now();
const closed = await Promise.race([closeAll().then(() => true), new Promise<false>((r) => setTimeout(() => r(false), 15_000))]);
if (!closed) { out.errors.push('closeAll did not finish within 15 s'); say('closeAll did not finish within 15 s'); }
out.closeMs = Date.now() - c0;
say(`endpoint closed (link groups deleted) in ${out.closeMs} ms`);
save();
writeFileSync(join(sync, 'host.closed'), '');
clearTimeout(giveUp);
const ok = out.conns.length === 2 && out.errors.length === 0 && out.conns.every((c) => c.replyOk && c.mode === 'smcr');
say(`host part ${ok ? 'done' : 'FAILED'}`);
process.exit(ok ? 0 : 1);
