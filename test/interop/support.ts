// Shared by the interop tests: run a lab scenario and read its capture with the project's own
// reader and FrameDecoder (the same pipeline smcdump uses).
import type { ExecutionContext } from 'ava';
import { readFileSync } from 'node:fs';
import { FrameDecoder, type DecodedFrame, type SmcItem } from '../../dissectors/frame.js';
import type { CapturedFrame } from '../../capture/types.js';
import { readFrames } from '../helpers.js';
import { preflight, runScenario, type ScenarioOptions, type ScenarioResult } from '../lab/harness.js';

/** Issues a healthy kernel↔kernel capture may raise, with why; anything else is an anomaly. */
export const EXPECTED_ISSUES: Record<string, { severity: string; why: string }> = {
  'llc.reject-reason': {
    severity: 'note',
    why: 'Linux 6.12 rejects the server\'s ADD LINK for a second link on the only RoCE device with reason 0 (a true observation, reported as a note)',
  },
  'llc.reason': {
    severity: 'note',
    why: 'a Linux client answers a DELETE LINK of one link with reason 0 (smc_llc_process_cli_delete_link clears it), seen when our server deletes an asymmetric link (a true observation, reported as a note)',
  },
};

export interface Run {
  result: ScenarioResult;
  raw: CapturedFrame[];
  frames: DecodedFrame[];
  guestLog: (g: 'a' | 'b') => string;
}

/** Run a scenario; fails the test (with the harness's reason) unless it passed and left nothing. */
export async function run(t: ExecutionContext, opts: ScenarioOptions): Promise<Run> {
  const why = preflight();
  if (why) t.fail(`the lab cannot run on this machine: ${why}`);
  const result = await runScenario({ ...opts, log: (l) => t.log(l) });
  t.deepEqual(result.leftovers, [], 'nothing left running or mounted');
  if (!result.ok) throw new Error(`${opts.name}: ${result.failure} (logs: ${result.runDir})`);
  const raw = await readFrames(result.pcap);
  const d = new FrameDecoder();
  const frames = raw.map((f) => d.decode(f));
  return { result, raw, frames, guestLog: (g) => readFileSync(result.guests[g]!.log, 'utf8') };
}

export function items<P extends SmcItem['proto']>(frames: DecodedFrame[], proto: P): Array<Extract<SmcItem, { proto: P }> & { n: number; f: DecodedFrame }> {
  const out: Array<Extract<SmcItem, { proto: P }> & { n: number; f: DecodedFrame }> = [];
  for (const f of frames) for (const i of f.smc) if (i.proto === proto) out.push({ ...(i as Extract<SmcItem, { proto: P }>), n: f.n, f });
  return out;
}

/** Issues outside EXPECTED_ISSUES, one line each (an empty list = no anomalies). */
export function anomalies(frames: DecodedFrame[]): string[] {
  return frames.flatMap((f) => f.issues.filter((i) => EXPECTED_ISSUES[i.code]?.severity !== i.severity)
    .map((i) => `#${f.n} ${i.severity} ${i.code}: ${i.message}`));
}

/** Codes of smcdump's correlation anomalies (`--summary --json`), in frame order. */
export function trackerAnomalies(r: ScenarioResult): string[] {
  if (!r.smcSummary) throw new Error('no smcdump summary');
  return r.smcSummary.anomalies.map((a) => a.code);
}

/** smcdump's error diagnoses of the capture (`--summary --json`), "code: sentence" each: a clean
 *  run (failover and re-add included) must have none — a false alarm costs as much as a miss. */
export function errorDiagnoses(r: ScenarioResult): string[] {
  if (!r.smcSummary) throw new Error('no smcdump summary');
  return (r.smcSummary.diagnosis ?? []).filter((d) => d.severity === 'error').map((d) => `${d.code}: ${d.message}`);
}

/** Every frame on the lab bridge is between lab addresses (nothing else was on the wire). */
export function foreignFrames(frames: DecodedFrame[]): string[] {
  return frames.filter((f) => f.ip && !(f.ip.src.startsWith('10.55.0.') && f.ip.dst.startsWith('10.55.0.')))
    .map((f) => `#${f.n} ${f.ip!.src} > ${f.ip!.dst}`);
}

export { fnv1a } from '../lab/hostpart.js';

/** Does the frame's captured data contain the bytes of `text`? */
export function carries(f: CapturedFrame, text: string): boolean {
  return Buffer.from(f.data.buffer, f.data.byteOffset, f.data.byteLength).includes(Buffer.from(text));
}
