// Shared by the interop tests that check lab runs of our endpoint against the kernel (ibverbs in
// a guest, uroce on the host side): one lab run per scenario shared by the tests that check it,
// `smcdump --state` of the endpoint's own snapshot against the capture, and views of the LLC
// messages and RDMA WRITEs of a run. Files of a run are named PROVIDER-ROLE*.json (the endpoint
// program q-ibverbs-kernel.guest.ts writes them).
import type { ExecutionContext } from 'ava';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import type { LlcMessage } from '../../dissectors/wire/llc.js';
import { createCaptureWriter } from '../../capture/writer.js';
import { readFrames } from '../helpers.js';
import { FrameDecoder } from '../../dissectors/frame.js';
import { opcodeInfo } from '../../dissectors/wire/ib.js';
import { preflight, ROOT, runScenario, type ScenarioResult } from '../lab/harness.js';
import { items, type Run } from './support.js';

// One lab run per scenario, shared by the tests that check it (q: both roles; r: failover).
const shared = new Map<string, Promise<{ run?: Run; logs: string[]; failure?: string }>>();
export function labRun(name: string): Promise<{ run?: Run; logs: string[]; failure?: string }> {
  let p = shared.get(name);
  if (p) return p;
  p = (async () => {
    const logs: string[] = [];
    // LAB_REUSE_RUN=RUN-FOLDER[,RUN-FOLDER]: check finished runs of the scenarios again without
    // the lab (for working on the assertions; CI never sets it)
    const reuse = process.env.LAB_REUSE_RUN?.split(',').find((d) => basename(d).startsWith(`${name}-`));
    if (reuse) {
      const result = JSON.parse(readFileSync(join(reuse, 'result.json'), 'utf8')) as ScenarioResult;
      // the analyzer's verdict of today's code, not the one stored with the run
      const j = spawnSync(process.execPath, ['--import', 'tsx', join(ROOT, 'cli', 'bin', 'smcdump.ts'), '-r', result.pcap, '--summary', '--json'], { cwd: ROOT, encoding: 'utf8', maxBuffer: 64 << 20 });
      result.smcSummary = JSON.parse(j.stdout) as ScenarioResult['smcSummary'];
      const raw = await readFrames(result.pcap);
      const d = new FrameDecoder();
      return { logs, run: { result, raw, frames: raw.map((f) => d.decode(f)), guestLog: (g) => readFileSync(result.guests[g]!.log, 'utf8') } };
    }
    const why = preflight();
    if (why) return { logs, failure: `the lab cannot run on this machine: ${why}` };
    const result: ScenarioResult = await runScenario({ name, log: (l) => logs.push(l) });
    if (result.leftovers.length) return { logs, failure: `left behind: ${result.leftovers.join('; ')}` };
    if (!result.ok) return { logs, failure: `${name}: ${result.failure} (logs: ${result.runDir})` };
    const raw = await readFrames(result.pcap);
    const d = new FrameDecoder();
    const frames = raw.map((f) => d.decode(f));
    return { logs, run: { result, raw, frames, guestLog: (g) => readFileSync(result.guests[g]!.log, 'utf8') } };
  })();
  shared.set(name, p);
  return p;
}
export async function get(t: ExecutionContext, name: string): Promise<Run> {
  const r = await labRun(name);
  if (!r.run) { for (const l of r.logs.slice(-60)) t.log(l); throw new Error(r.failure); }
  t.log(`lab run ${r.run.result.seconds.toFixed(0)} s (${r.run.result.steps.map((s) => `${s.step} ${s.seconds.toFixed(1)} s`).join(', ')})`);
  return r.run;
}
/** smcdump --state of our endpoint's snapshot against the capture cut before the frame `cut`. */
export async function stateCheck(r: Run, provider: string, role: string, tag: string, cut?: number): Promise<string> {
  return stateFileCheck(r, `${provider}-${role}-state-${tag}.json`, cut);
}

/** The same for any state file of the run (e.g. limits-state-before-close.json); with `from`,
 *  the capture starts at that frame (a run whose earlier processes had link groups of the same
 *  names). */
export async function stateFileCheck(r: Run, stateFile: string, cut?: number, from = 1): Promise<string> {
  let pcap = r.result.pcap;
  if (cut !== undefined || from > 1) {
    pcap = join(r.result.runDir, `capture-until-${stateFile.replace(/\.json$/, '')}.pcap`);
    const w = createCaptureWriter(pcap, { nanosecond: true });
    for (const f of r.raw.slice(from - 1, (cut ?? r.raw.length + 1) - 1)) w.write(f);
    w.close();
  }
  const s = spawnSync(process.execPath, ['--import', 'tsx', join(ROOT, 'cli', 'bin', 'smcdump.ts'), '-r', pcap, '--state', join(r.result.runDir, stateFile), '-q'],
    { cwd: ROOT, encoding: 'utf8', env: { ...process.env, NO_COLOR: '1' } });
  return (s.stdout + s.stderr).split('\n').filter((l) => /Endpoint state vs wire|^ +(error|warn|note) state\./.test(l)).join('\n');
}

/** The first LLC DELETE LINK request our endpoint (from one of `ours`) sent after frame `from`. */
export function ourDeleteLink(r: Run, ours: readonly string[], from: number): number {
  const llc = items(r.frames, 'llc') as Array<{ value: LlcMessage; n: number; f: (typeof r.frames)[number] }>;
  const d = llc.find((l) => l.n > from && l.value.kind === 'delete_link' && ours.includes(l.f.ip!.src) && !l.value.response);
  if (!d) throw new Error(`no DELETE LINK from ${ours.join('/')} after frame ${from}`);
  return d.n;
}

export type LlcItem = { value: LlcMessage & { rejected?: boolean; linkId?: number; all?: boolean; reason?: number; gids?: string[] }; n: number; f: Run['frames'][number] };
export const llcList = (r: Run, kinds: string[]): string[] => (items(r.frames, 'llc') as LlcItem[]).filter((l) => kinds.includes(l.value.kind))
  .map((l) => `${l.f.ip!.src} ${l.value.kind}${l.value.response ? ' rsp' : ''}${l.value.rejected ? ' REJECT' : ''}${l.value.all ? ' ALL' : ''}${l.value.kind === 'request_add_link' ? '' : ` link ${l.value.linkId ?? '-'}`}${l.value.kind === 'delete_link' ? ` 0x${(l.value.reason ?? 0).toString(16)}` : ''}`);
export interface LinkRow { id: number; state: string; gid: string; peer: { gid: string } }
export const stateLinks = (r: Run, provider: string, role: string, tag: string): Array<[number, string, string, string]> =>
  (JSON.parse(readFileSync(join(r.result.runDir, `${provider}-${role}-state-${tag}.json`), 'utf8')) as { linkGroups: Array<{ links: LinkRow[] }> })
    .linkGroups[0]!.links.map((l) => [l.id, l.state, l.gid, l.peer.gid]);
/** RDMA WRITEs per (source address) after frame `from`: which links carried the data. */
export function writesBySrc(r: Run, from: number): Record<string, number> {
  const out: Record<string, number> = {};
  for (const f of r.frames) if (f.n > from && f.roce && opcodeInfo(f.roce.ib.bth.opcode).isWrite) out[f.ip!.src] = (out[f.ip!.src] ?? 0) + 1;
  return out;
}

