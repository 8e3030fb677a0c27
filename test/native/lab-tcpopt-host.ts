// Host-side part for the TCP option kernel-interop check (run by lab-tcpopt.ts through the lab
// harness, inside the lab's network namespace). A listener of ours with TCP option 254 on
// 10.55.0.254:12345: guest A's kernel SMC client (smcpingpong) connects; our SYN-ACK echoes the
// option, so the kernel sends a CLC Proposal instead of falling back. We decode it with our
// codec, answer with a CLC Decline (our encoder; no RDMA on this side), the kernel falls back to
// TCP, and the exchange finishes like smcpingpong's server ("ACK <bytes> fnv1a=<hash>\n").
// Results go to $LAB_RUN/tcpopt-host.json.
import { createServer, type Socket } from 'node:net';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { TcpOptionSignal } from '../../endpoint/tcpopt/index.js';
import { clcMessageLength, decodeClc, encodeClc, summarizeClc, CLC_DECLINE } from '../../dissectors/wire/clc.js';
import { FNV1A_INIT, fnv1aUpdate, fnv1aHex } from '../lab/hostpart.js';

const hostIp = process.env.LAB_HOST_IP ?? '10.55.0.254';
const sync = process.env.LAB_SYNC;
const runDir = process.env.LAB_RUN;
if (!sync || !runDir) { console.error('host part: LAB_SYNC/LAB_RUN not set (run through the lab harness)'); process.exit(2); }

const out: Record<string, unknown> = {};
const save = (): void => writeFileSync(join(runDir, 'tcpopt-host.json'), JSON.stringify(out, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v), 2));

const sig = await TcpOptionSignal.start();
out.signal = sig.info;
console.log(`host: TCP option 254 attached to ${sig.cgroup}${sig.info.mountedCgroup2 ? ' (cgroup2 mounted privately)' : ''}`);

const giveUp = setTimeout(() => { console.error('host part: no connection within 240s'); save(); process.exit(1); }, 240_000);

async function serve(sock: Socket): Promise<void> {
  const r = await sig.lookup(sock);
  out.result = r;
  console.log(`host: connection from ${sock.remoteAddress}:${sock.remotePort}; option: ${JSON.stringify(r, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v))}`);
  let buf = Buffer.alloc(0);
  let clcDone = false;
  let n = 0;
  let h = FNV1A_INIT;
  sock.on('data', (d: Buffer) => {
    if (clcDone) { n += d.length; h = fnv1aUpdate(h, d); return; }
    buf = Buffer.concat([buf, d]);
    const len = buf.length >= 8 ? clcMessageLength(buf) : undefined;
    if (len === undefined || buf.length < len) return;
    const msg = decodeClc(buf.subarray(0, len));
    out.proposal = { summary: summarizeClc(msg.value), type: msg.value.type, version: msg.value.version, issues: msg.issues.map((i) => i.code) };
    console.log(`host: received ${summarizeClc(msg.value)}`);
    const v2 = msg.value.version >= 2;
    const decline = encodeClc({
      type: 'decline', eyecatcher: 'SMCR', typeCode: CLC_DECLINE, version: v2 ? 2 : 1, trailer: 'SMCR', outOfSync: false, typev1: 0,
      peerId: '0@52:54:00:55:00:fe', diagnosis: 0x03030000, osType: v2 ? 15 : 0, ...(v2 ? { diagExtra: [0, 0, 0, 0] } : {}),
    });
    out.decline = summarizeClc(decodeClc(decline).value);
    console.log(`host: sending ${out.decline as string}`);
    sock.write(decline);
    clcDone = true;
    const rest = buf.subarray(len);
    if (rest.length) { n += rest.length; h = fnv1aUpdate(h, rest); }
  });
  sock.on('end', () => {
    const hash = fnv1aHex(h);
    out.payload = { bytes: n, fnv1a: hash };
    console.log(`host: received ${n} bytes over TCP after the Decline, fnv1a=${hash}`);
    save();
    sock.end(`ACK ${n} fnv1a=${hash}\n`, () => { clearTimeout(giveUp); server.close(); void sig.close(); });
  });
  sock.on('error', (e) => { console.error(`host: ${e.message}`); process.exitCode = 1; });
}

const server = createServer((sock) => { void serve(sock); });
server.listen(12345, hostIp, () => {
  console.log(`host: listening on ${hostIp}:12345 with TCP option 254`);
  writeFileSync(join(sync, 'host.ready'), '');
});
