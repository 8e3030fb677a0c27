// Host side of the uroce interop lab (runs inside the lab namespace, on the bridge address):
// uroce plays server and client of ibv_rc_pingpong and perftest against the guests, in step
// with the guest scenario (guest/uroce-interop.sh) through files in the run folder, then
// collects every result into results.txt.
//   node --import tsx test/interop-uroce/host.ts RUN_DIR
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { openUroce, type UroceDevice } from '../../endpoint/verbs/uroce/index.js';
import { rcPingpongClient, rcPingpongServer } from './rcpingpong.js';
import { perftestClient, perftestServer, type PerftestKind } from './perftest.js';

const HOST_IP = '10.55.0.254';
const GUEST_A = '10.55.0.1';
const runDir = process.argv[2]!;
const params = Object.fromEntries(readFileSync(join(runDir, 'params'), 'utf8').split('\n').filter(Boolean).map((l) => l.split('=') as [string, string]));
const PP_N = Number(params.PP_N ?? 500), BW_N = Number(params.BW_N ?? 300), LAT_N = Number(params.LAT_N ?? 500);

const log = (s: string): void => { process.stdout.write(`${new Date().toISOString().slice(11, 23)} ${s}\n`); };
const sync = (name: string): void => { writeFileSync(join(runDir, 'sync', `host.${name}`), ''); log(`signal ${name}`); };
async function waitGuest(name: string, timeoutS = 600): Promise<void> {
  const f = join(runDir, 'sync', `a.${name}`);
  const end = Date.now() + timeoutS * 1000;
  while (!existsSync(f)) {
    if (Date.now() > end) throw new Error(`timeout waiting for guest A's ${name}`);
    await new Promise((r) => setTimeout(r, 250));
  }
  log(`guest A reached ${name}`);
}
function withTimeout<T>(p: Promise<T>, s: number, what: string): Promise<T> {
  return Promise.race([p, new Promise<T>((_, rej) => setTimeout(() => rej(new Error(`${what}: no result after ${s} s`)), s * 1000).unref())]);
}

interface Row { tool: string; mode: string; value: string }
const rows: Row[] = [];

async function main(): Promise<number> {
  const steps = readFileSync(join(runDir, 'steps'), 'utf8').split('\n').filter(Boolean);
  const dev = await openUroce({ address: HOST_IP, window: 32 }) as UroceDevice;
  log(`uroce ${dev.name} on ${HOST_IP}: GID ${dev.queryGid(1, 0)}, active MTU ${128 << dev.queryPort(1).activeMtu}, ICRC exact on the wire: ${dev.engine.exactIcrc}${dev.engine.icrcNote ? ` (${dev.engine.icrcNote})` : ''}`);
  let failures = 0;
  for (const step of steps) {
    if (step === 'baseline') continue;
    try {
      if (step === 'pingpong') {
        await waitGuest('pingpong-1-ready');
        const r1 = await withTimeout(rcPingpongServer(dev, HOST_IP, { iters: PP_N, log }, () => sync('pingpong-server-ready')), 300, 'rc_pingpong server');
        log(`uroce rc_pingpong server: ${r1.bytes} bytes in ${r1.seconds.toFixed(2)} seconds = ${r1.mbitPerS.toFixed(2)} Mbit/sec, ${r1.usecPerIter.toFixed(2)} usec/iter`);
        await waitGuest('pingpong-2-ready');
        const r2 = await withTimeout(rcPingpongClient(dev, GUEST_A, { iters: PP_N, log }), 300, 'rc_pingpong client');
        log(`uroce rc_pingpong client: ${r2.bytes} bytes in ${r2.seconds.toFixed(2)} seconds = ${r2.mbitPerS.toFixed(2)} Mbit/sec, ${r2.usecPerIter.toFixed(2)} usec/iter`);
        rows.push({ tool: 'ibv_rc_pingpong 4 KiB', mode: 'uroce client -> guest server', value: `${r2.mbitPerS.toFixed(1)} Mbit/s, ${r2.usecPerIter.toFixed(0)} us/iter` });
        sync('pingpong-client-done');
        await waitGuest('pingpong-2-done'); // the guest's server wrote its output
      } else {
        const kind = step as PerftestKind;
        await waitGuest(`${step}-1-ready`);
        const r1 = await withTimeout(perftestServer(dev, kind, HOST_IP, { iters: kind === 'send_lat' ? LAT_N : BW_N, log }, () => sync(`${step}-server-ready`)), 300, `${step} server`);
        log(`uroce ${step} server: ${r1.summary}`);
        await waitGuest(`${step}-2-ready`);
        const r2 = await withTimeout(perftestClient(dev, kind, GUEST_A, { iters: kind === 'send_lat' ? LAT_N : BW_N, log }), 300, `${step} client`);
        log(`uroce ${step} client: ${r2.summary}`);
        rows.push({ tool: `ib_${step}`, mode: 'uroce client -> guest server', value: r2.summary });
        sync(`${step}-client-done`);
        await waitGuest(`${step}-2-done`);
      }
    } catch (e) {
      failures++;
      log(`step ${step} FAILED: ${(e as Error).stack ?? e}`);
      // never leave the guest waiting
      for (const n of [`${step}-server-ready`, `${step}-client-done`]) if (!existsSync(join(runDir, 'sync', `host.${n}`))) sync(n);
    }
  }
  const st = dev.stats();
  log(`uroce engine counters: ${JSON.stringify(st.engine)}`);
  await dev.close();
  writeFileSync(join(runDir, 'results.txt'), results(steps));
  return failures ? 1 : 0;
}

/** Numbers from the tools' own output in the guests plus ours. */
function results(steps: string[]): string {
  const res = (name: string): string => { try { return readFileSync(join(runDir, `res-${name}.txt`), 'utf8'); } catch { return ''; } };
  const pick = (out: string, kind: string): string => {
    if (!out) return 'not run';
    const rc = /rc=(\d+)/.exec(out)?.[1];
    if (kind === 'pingpong') {
      const a = /= ([\d.]+) Mbit\/sec/.exec(out), b = /= ([\d.]+) usec\/iter/.exec(out);
      return a && b ? `${Number(a[1]).toFixed(1)} Mbit/s, ${Number(b[1]).toFixed(0)} us/iter` : `FAILED (rc ${rc}): ${out.split('\n').filter((l) => /fail|error|couldn/i.test(l)).slice(0, 2).join(' | ')}`;
    }
    const lines = out.split('\n');
    const h = lines.findIndex((l) => /#bytes/.test(l));
    const v = h >= 0 ? lines.slice(h + 1).find((l) => /^\s*\d+\s+\d+/.test(l)) : undefined;
    if (!v) return `FAILED (rc ${rc}): ${lines.filter((l) => /fail|error|couldn|unable/i.test(l)).slice(0, 2).join(' | ')}`;
    const n = v.trim().split(/\s+/).map(Number);
    if (kind === 'send_lat') return `t_typical ${n[4]} us, t_avg ${n[5]} us, p99 ${n[7]} us (${n[0]} B)`;
    return `${n[3]} MB/s average, ${n[2]} MB/s peak (${n[0]} B x ${n[1]})`;
  };
  const out: string[] = ['tool                      mode                               result'];
  const add = (tool: string, mode: string, v: string): void => { out.push(`${tool.padEnd(25)} ${mode.padEnd(34)} ${v}`); };
  out.unshift(`iterations: ibv_rc_pingpong ${PP_N}, ib_send_bw/ib_write_bw ${BW_N}, ib_send_lat ${LAT_N}`);
  for (const [t, step] of [['ibv_rc_pingpong 4 KiB', 'pingpong'], ['ib_send_bw 64 KiB', 'send_bw'], ['ib_write_bw 64 KiB', 'write_bw'], ['ib_send_lat 2 B', 'send_lat']] as const) {
    if (steps.includes('baseline')) add(t, 'guest B rxe <- guest A rxe', pick(res(`baseline-${step}-client`), step));
    if (steps.includes(step)) {
      add(t, 'uroce server <- guest client', pick(res(`${step}-guestclient`), step));
      const mine = rows.find((r) => r.mode.startsWith('uroce client') && (r.tool === t || r.tool === `ib_${step}`));
      add(t, 'guest server <- uroce client', `${mine?.value ?? 'FAILED'}; guest: ${pick(res(`${step}-guestserver`), step)}`);
    }
  }
  return out.join('\n') + '\n';
}

main().then((c) => { process.exitCode = c; }, (e) => { log(`host side failed: ${(e as Error).stack ?? e}`); process.exitCode = 1; });
