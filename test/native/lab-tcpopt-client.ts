// Host-side part for the second TCP option kernel-interop check (run by lab-tcpopt.ts through the
// lab harness with scenario a-first-contact, inside the lab's network namespace): as soon as
// guest B's kernel SMC server (smcpingpong, AF_SMC) listens on 10.55.0.2:12345, a client of ours
// with TCP option 254 connects. The kernel's SYN-ACK must carry the option (its listener only
// echoes it when our SYN had it), which our program reports as syn_smc. We then close at once:
// the kernel's SMC listen worker sees EOF instead of a CLC Proposal and drops the connection
// without handing it to the application, so the scenario's own A->B connection is untouched.
// Results go to $LAB_RUN/tcpopt-client.json.
import { connect } from 'node:net';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { TcpOptionSignal } from '../../endpoint/tcpopt/index.js';

const sync = process.env.LAB_SYNC;
const runDir = process.env.LAB_RUN;
if (!sync || !runDir) { console.error('host part: LAB_SYNC/LAB_RUN not set (run through the lab harness)'); process.exit(2); }
const out: Record<string, unknown> = {};
const save = (): void => writeFileSync(join(runDir, 'tcpopt-client.json'), JSON.stringify(out, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v), 2));

const sig = await TcpOptionSignal.start({ remotePorts: [12345] });
console.log(`host: TCP option 254 attached to ${sig.cgroup} (connects to port 12345 only)`);

const deadline = Date.now() + 240_000;
while (!existsSync(join(sync, 'b.listening'))) {
  if (Date.now() > deadline) { console.error('host part: guest B never listened'); process.exit(1); }
  await new Promise((r) => setTimeout(r, 100));
}
const sock = connect({ host: '10.55.0.2', port: 12345 });
sock.on('error', (e) => { out.error = e.message; });
await new Promise<void>((res, rej) => { sock.once('connect', res); sock.once('error', rej); });
const r = await sig.lookup(sock);
out.result = r;
console.log(`host: connected to 10.55.0.2:12345 from port ${sock.localPort}; option: ${JSON.stringify(r, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v))}`);
out.localPort = sock.localPort;
sock.end();
await new Promise((res) => sock.once('close', res));
save();
await sig.close();
