// Host-side part of scenario x-throughput: stage the endpoint program for guest A (as
// q-ibverbs-kernel), then, after guest A's kernel and ibverbs runs, the uroce runs from the
// bridge address (10.55.0.254): q-ibverbs-kernel.guest.ts send, one process per run. Collects
// every "throughput LABEL" result of the run (kernel ones from guest A's log) into
// $LAB_RUN/throughput.json and prints the table.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import './q-ibverbs-kernel.host.js';
import { waitForFile } from '../hostpart.js';

const runDir = process.env.LAB_RUN!, sync = process.env.LAB_SYNC!;
const hostIp = process.env.LAB_HOST_IP ?? '10.55.0.254', peer = process.env.LAB_GUEST_B ?? '10.55.0.2';
const PORT = 12345, BYTES = 16777216, REPS = 2;
await waitForFile(join(sync, 'a.guest-done'));
let ok = true;
for (let r = 1; r <= REPS; r++) {
  const p = spawnSync(process.execPath, ['--import', 'tsx', join(import.meta.dirname, 'q-ibverbs-kernel.guest.ts'), 'send', peer, String(PORT), String(BYTES), `uroce-${r}`], {
    encoding: 'utf8', env: { ...process.env, LAB_ENDPOINT: 'uroce', LAB_ENDPOINT_DEVICES: JSON.stringify({ device: { provider: 'uroce', address: hostIp } }) },
  });
  process.stdout.write(p.stdout.split('\n').filter((l) => /throughput|error|Error/.test(l)).join('\n') + '\n');
  if (p.status !== 0) { ok = false; process.stdout.write(p.stderr); }
}
// kernel runs: the scenario's lines in guest A's log; ours: the JSON files
const lines = existsSync(join(runDir, 'guest-a.log')) ? readFileSync(join(runDir, 'guest-a.log'), 'utf8').split('\n') : [];
const rows = lines.map((l) => /throughput (kernel-\d+): (\d+) bytes in ([\d.]+) s = ([\d.]+) MB\/s \((\w+); reply (.*?)\)$/.exec(l)).filter((m) => m)
  .map((m) => ({ label: m![1]!, bytes: Number(m![2]), seconds: Number(m![3]), mbps: Number(m![4]), mode: m![5]!, reply: m![6]!, ok: !m![6]!.includes('MISMATCH') }));
for (const who of ['ibverbs', 'uroce']) for (let r = 1; r <= REPS; r++) {
  const f = join(runDir, `throughput-${who}-${r}.json`);
  if (existsSync(f)) rows.push(JSON.parse(readFileSync(f, 'utf8')) as (typeof rows)[number]);
}
writeFileSync(join(runDir, 'throughput.json'), JSON.stringify(rows, null, 2));
for (const x of rows) console.log(`${x.label.padEnd(10)} ${x.mbps.toFixed(1).padStart(7)} MB/s  (${x.bytes} bytes in ${x.seconds.toFixed(3)} s, ${x.mode}${x.ok ? '' : ', MISMATCH'})`);
writeFileSync(join(sync, 'host.host-done'), '');
process.exit(ok && rows.length === 3 * REPS && rows.every((x) => x.ok) ? 0 : 1);
