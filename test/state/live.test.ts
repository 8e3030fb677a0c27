// smcdump -i lo --endpoint SOCK (root, libpcap): live frames in the endpoint's names, the state
// followed over the control socket while link groups and connections come up, and no
// disagreement at the end. uroce's loopback GSO is off here: with it, lo shows each run of
// packets as one oversized datagram (see docs/uroce.md), which no analyzer can take apart.
import test from 'ava';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { serveControl } from '../../endpoint/control.js';
import { liveSkipReason } from '../live/netns.js';
import { ROOT } from '../helpers.js';
import { openPair, exchange, addr, writeN, readN } from './pair.js';

const skip = liveSkipReason();
const title = (s: string): string => (skip ? `${s} [skipped: ${skip}]` : s);
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

(skip ? test.skip : test.serial)(title('smcdump -i lo --endpoint: live labels and no disagreement'), async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'smcscope-live-state-'));
  const [a, b] = await openPair(67, false);
  const srv = await serveControl(a, join(dir, 'ep.sock'));
  const compiled = join(ROOT, 'dist', 'cli', 'bin', 'smcdump.js');
  const cmd = import.meta.url.includes('/dist/') && existsSync(compiled) ? [compiled] : ['--import', 'tsx', join(ROOT, 'cli', 'bin', 'smcdump.ts')];
  const p = spawn(process.execPath, [...cmd, '-i', 'lo', '--immediate', '--endpoint', srv.path, `udp port 4791 and host ${addr(a)}`], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '', err = '';
  p.stdout.setEncoding('utf8').on('data', (d: string) => { out += d; });
  p.stderr.setEncoding('utf8').on('data', (d: string) => { err += d; });
  const dones: Array<() => void> = [];
  try {
    for (let i = 0; i < 50 && !err.includes('listening on lo'); i++) await sleep(100);
    t.regex(err, /listening on lo/);
    // names of a new link group/connection reach smcdump one control-socket round trip late:
    // a little more traffic on each connection after a pause carries them
    const x = await exchange(a, b, 100_000, 1000);
    dones.push(x.done);
    await sleep(500);
    await Promise.all([writeN(x.ca, 10, 3), readN(x.cb, 10)]);
    const y = await exchange(a, b, 70_000, 3000);
    dones.push(y.done);
    await sleep(500);
    await Promise.all([writeN(y.cb, 10, 4), readN(y.ca, 10)]);
    await sleep(800);
  } finally {
    p.kill('SIGINT');
    await new Promise((r) => p.once('exit', r));
    for (const d of dones) d();
    await srv.close();
    await Promise.all([a.close(), b.close()]);
    rmSync(dir, { recursive: true, force: true });
  }
  const lg = [...a.linkGroups][0]?.name ?? 'LG';
  void lg;
  t.regex(err, /Endpoint state vs wire \(LG\d+, pid \d+\): no disagreements/, err);
  // names appear once the endpoint's state lists the link group and connection
  t.regex(out, /CDC seq \d+ token 0x0+1 .*\[LG\d+\/L1 LG\d+\/1 (in|out)\]/);
  t.regex(out, /CDC seq \d+ token 0x0+2 .*\[LG\d+\/L1 LG\d+\/2 (in|out)\]/);
  t.regex(err, / 0 frames dropped by kernel|\n0 frames dropped by kernel/);
});
