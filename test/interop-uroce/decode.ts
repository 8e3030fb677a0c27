// Decode an interop capture with smcscope's FrameDecoder and say, per sender, how many RoCEv2
// frames there were, whether every ICRC was valid, and which issues the analyzer found.
//   node --import tsx test/interop-uroce/decode.ts bridge.pcap
import { openCapture } from '../../capture/reader.js';
import { FrameDecoder } from '../../dissectors/frame.js';
import { opcodeInfo } from '../../dissectors/wire/ib.js';

const path = process.argv[2]!;
const r = await openCapture(path);
const d = new FrameDecoder();
interface Per { frames: number; ok: number; bad: number; unchecked: number; ops: Map<string, number> }
const per = new Map<string, Per>();
const issues = new Map<string, { n: number; first: number; msg: string }>();
let frames = 0, roce = 0;
for (let f = r.next(); f; f = r.next()) {
  frames++;
  const x = d.decode(f);
  if (!x.roce) continue;
  roce++;
  const src = x.ip?.src ?? '?';
  let p = per.get(src);
  if (!p) { p = { frames: 0, ok: 0, bad: 0, unchecked: 0, ops: new Map() }; per.set(src, p); }
  p.frames++;
  p[x.roce.icrc === 'ok' ? 'ok' : x.roce.icrc === 'bad' ? 'bad' : 'unchecked']++;
  const op = x.roce.ib.bth.opcode === 0x11 && x.roce.ib.aeth ? x.roce.ib.aeth.kind : opcodeInfo(x.roce.ib.bth.opcode).name;
  p.ops.set(op, (p.ops.get(op) ?? 0) + 1);
  for (const i of x.issues) {
    // the SMC-R layers read every SEND as LLC/CDC; perftest payloads are not SMC-R
    if (/^(llc|cdc|clc)\./.test(i.code)) continue;
    const k = `${i.severity} ${i.code}`;
    const e = issues.get(k);
    if (e) e.n++; else issues.set(k, { n: 1, first: x.n, msg: i.message });
  }
}
r.close();
console.log(`${frames} frames, ${roce} RoCEv2`);
for (const [src, p] of [...per].sort()) {
  const ops = [...p.ops].sort((a, b) => b[1] - a[1]).map(([k, v]) => `${k} ${v}`).join(', ');
  console.log(`  from ${src.padEnd(12)} ${String(p.frames).padStart(7)} frames: ICRC ok ${p.ok}, bad ${p.bad}, unchecked ${p.unchecked} | ${ops}`);
}
if (issues.size === 0) console.log('  transport issues: none');
for (const [k, v] of issues) console.log(`  issue ${k} x${v.n} (first frame ${v.first}): ${v.msg}`);
