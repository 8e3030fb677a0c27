// Host-side part of scenario u-uroce-failover: our endpoint over uroce with TWO local addresses
// on the lab bridge against guest A's kernel with two rxe devices, both roles, one after the
// other. The TCP/CLC connections use the bridge's lab address (10.55.0.254); the two uroce
// devices stand on two more addresses of the bridge (device and alternate: .252/.253 in phase
// 1, .250/.251 in phase 2), so taking one of them away leaves every TCP connection alone.
//   phase 1 (our client → kernel server): q-ibverbs-kernel.guest.ts failover-client … self
//   phase 2 (kernel client → our server): q-ibverbs-kernel.guest.ts failover-server … self
// In each phase the endpoint says on which address conn 2 runs (conn2-address, host.conn2-up);
// 1.5 s later this part deletes that address from the bridge (`ip addr del`), mid-transfer: the
// uroce device sees its address gone and reports PORT_ERR, the endpoint fails the link over
// (DELETE LINK LOST_PATH, validation CDC) and the transfer ends on the surviving link. After the
// phase the address is put back, before the next phase opens its devices.
// Before phase 1 a warm-up connection (port 12349, no data, CLC/LLC timeouts of 20 s) makes the
// kernel set up SMC on both of its devices: the first link over a cold device allocates and
// zeroes its CQs, which under TCG on a loaded machine took more than the 2 s CLC timeout (the
// Accept came too late) and stalled the guest longer than uroce's QP retry budget (~1.07 s).
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { waitForFile } from '../hostpart.js';
import { closeAll, connect, endpoint } from '../../../endpoint/index.js';
import { stateJson } from '../../../endpoint/control.js';

const runDir = process.env.LAB_RUN, sync = process.env.LAB_SYNC;
if (!runDir || !sync) { console.error('host part: LAB_SYNC/LAB_RUN not set (run through the lab harness)'); process.exit(2); }
const bridge = process.env.LAB_BRIDGE ?? 'smcbr0';
const guest = process.env.LAB_GUEST_A ?? '10.55.0.1';
// Each part has its own pair of bridge addresses: QPNs and GIDs repeat otherwise (every process
// numbers its uroce QPs from 0x11) and one capture would hold different link groups between the
// same GIDs and QPNs (phase 1's group also stays in the kernel, see the scenario).
const WARM = ['10.55.0.248', '10.55.0.249'] as const;
const PHASE1 = ['10.55.0.252', '10.55.0.253'] as const, PHASE2 = ['10.55.0.250', '10.55.0.251'] as const;
const BYTES = 1572864;
const t0 = Date.now();
const say = (l: string): void => console.log(`[${((Date.now() - t0) / 1000).toFixed(3).padStart(8)} host] ${l}`);
const mark = (l: string): void => say(`MARK ${l} (wall ${new Date().toISOString()} epoch ${(Date.now() / 1000).toFixed(3)})`);

function ip(...args: string[]): boolean {
  const r = spawnSync('ip', args, { encoding: 'utf8' });
  say(`$ ip ${args.join(' ')}${r.status ? ` (exit ${r.status}: ${r.stderr.trim()})` : ''}`);
  return r.status === 0;
}

/** Run one phase's endpoint program; take conn 2's address away mid-transfer; put it back after. */
async function phase(addrs: readonly [string, string], args: string[]): Promise<boolean> {
  const child = spawn(process.execPath, ['--import', 'tsx', join(import.meta.dirname, 'q-ibverbs-kernel.guest.ts'), ...args], {
    stdio: ['ignore', 'inherit', 'inherit'],
    env: {
      ...process.env, LAB_ENDPOINT: 'uroce', LAB_ENDPOINT_AS: 'host', LAB_KERNEL_AS: 'a',
      LAB_ENDPOINT_DEVICES: JSON.stringify({ device: { provider: 'uroce', address: addrs[0] }, alternates: [{ provider: 'uroce', address: addrs[1] }] }),
    },
  });
  const exited = new Promise<number>((r) => child.on('exit', (code) => r(code ?? 1)));
  let gone: string | undefined;
  const conn2 = waitForFile(join(sync!, 'host.conn2-up')).then(async () => {
    gone = readFileSync(join(runDir!, 'conn2-address'), 'utf8').trim();
    await new Promise((r) => setTimeout(r, 1500));
    mark(`FAILURE: ip addr del ${gone}/24 dev ${bridge} (our uroce address under conn 2's link)`);
    ip('addr', 'del', `${gone}/24`, 'dev', bridge);
    mark(`done: ${gone} gone`);
  });
  const code = await Promise.race([exited, conn2.then(() => exited)]);
  if (gone) { ip('addr', 'add', `${gone}/24`, 'dev', bridge); mark(`REPAIR: ${gone} back`); }
  else say('conn 2 never came up: no address taken away');
  // this phase's sync files, so that the next phase's waits do not see them
  for (const f of ['two-links', 'conn2-up', 'transfer-done']) rmSync(join(sync!, `host.${f}`), { force: true });
  say(`phase ${args[0]}: exit ${code}`);
  return code === 0 && gone !== undefined;
}

/** Connect once (no data) with both devices and long timeouts, wait for the second link, close. */
async function warmUp(): Promise<void> {
  const opts = {
    device: { provider: 'uroce' as const, address: WARM[0] }, alternates: [{ provider: 'uroce' as const, address: WARM[1] }], ueids: ['SMC-LAB-UEID'],
    tcpOption: 'ebpf' as const, clcTimeoutMs: 20_000, llcTimeoutMs: 20_000, log: (l: string) => say(`warm-up: ${l}`),
  };
  const w0 = Date.now();
  try {
    const s = await connect({ ...opts, host: guest, port: 12349 });
    say(`warm-up: mode ${s.mode} after ${Date.now() - w0} ms`);
    const stack = await endpoint(opts);
    const active = (): number => ((stateJson(stack).linkGroups as Array<{ links: Array<{ state: string }> }>)[0]?.links ?? []).filter((l) => l.state === 'ACTIVE').length;
    for (let i = 0; i < 120 && active() < 2; i++) await new Promise((r) => setTimeout(r, 250));
    say(`warm-up: ${active()} active links after ${Date.now() - w0} ms`);
    await new Promise<void>((resolve) => { s.on('close', () => resolve()); s.on('error', () => resolve()); s.resume(); s.end(); setTimeout(resolve, 5000); });
  } catch (e) {
    say(`warm-up: ${(e as Error).message}`);
  }
  await closeAll();
  say(`warm-up done in ${Date.now() - w0} ms`);
}

if (![...WARM, ...PHASE1, ...PHASE2].every((a) => ip('addr', 'add', `${a}/24`, 'dev', bridge))) process.exit(1);
ip('-br', 'addr', 'show', 'dev', bridge);
await waitForFile(join(sync, 'a.listening'));
await warmUp();
const ok1 = await phase(PHASE1, ['failover-client', guest, '12345', '12346', String(BYTES), 'after-dump-1', 'closed-1', '', 'self']);
const ok2 = await phase(PHASE2, ['failover-server', '12347', String(BYTES), 'after-dump-2', 'closed-2', '-', 'self']);
say(`host part ${ok1 && ok2 ? 'done' : 'FAILED'}`);
process.exit(ok1 && ok2 ? 0 : 1);
