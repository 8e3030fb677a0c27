// The endpoint with the real eBPF TCP option, in a network namespace of the test's own (root):
// option 254 on our SYN and SYN-ACK (decoded from a capture by our own dissector), SMC-R first and
// subsequent contact, PEERNOSMC fallback against a plain TCP server, the capture free of
// anomalies; then 32 parallel connections and 1 GiB each way verified by hash.
import test from 'ava';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';
import { Capture, Netns, isRoot, isSyn, isSynAck, smcOption, SMCR_OPTION } from '../native/netns.js';
import { Tracker } from '../../dissectors/tracker/tracker.js';

const here = dirname(fileURLToPath(import.meta.url));

function runAgent(ns: Netns, phase: string, timeoutMs: number): Promise<Record<string, any>> {
  const ts = import.meta.url.endsWith('.ts');
  const script = join(here, ts ? 'netns-agent.ts' : 'netns-agent.js');
  const p = spawn('nsenter', [`--net=${ns.path}`, '--', process.execPath, ...(ts ? ['--import', 'tsx'] : []), script, phase], { stdio: ['ignore', 'pipe', 'pipe'] });
  let so = '', se = '';
  p.stdout.on('data', (d: Buffer) => { so += d; });
  p.stderr.on('data', (d: Buffer) => { se += d; });
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => { p.kill('SIGKILL'); reject(new Error(`agent ${phase} timed out; stderr: ${se.slice(-2000)}`)); }, timeoutMs);
    p.once('exit', () => {
      clearTimeout(t);
      const line = so.trim().split('\n').pop() ?? '';
      try { resolve(JSON.parse(line)); } catch { reject(new Error(`agent ${phase}: no result; stdout ${so.slice(-1000)} stderr ${se.slice(-2000)}`)); }
    });
  });
}

const root = isRoot ? test.serial : test.serial.skip;

root('SMC-R with the eBPF TCP option: first/subsequent contact, PEERNOSMC fallback, clean capture', async (t) => {
  const ns = Netns.create('ep');
  try {
    const cap = await Capture.start(ns, 'tcp or udp port 4791');
    const r = await runAgent(ns, 'basic', 120_000);
    const frames = await cap.stop();
    t.falsy(r.error, String(r.error));
    t.is(r.conns?.length, 2);
    t.like(r.conns[0], { mode: 'smcr', smcr: { version: 2, release: 1, firstContact: true } });
    t.like(r.conns[1], { mode: 'smcr', smcr: { firstContact: false } });
    for (const c of r.conns) { t.is(c.bytes, 256 * 1024); t.is(c.got, c.sent); }
    t.like(r.plain, { mode: 'tcp', fallback: { name: 'PEERNOSMC' } });
    t.is(r.plain.got, r.plain.sent);
    // Wire: option on both SYN and SYN-ACK toward the SMC server, only on our SYN toward the plain one.
    const toSmc = frames.filter((f) => f.tcp && (f.tcp.dstPort === 7000 ? false : f.tcp.srcPort !== 7000));
    const syns = toSmc.filter(isSyn), synAcks = toSmc.filter(isSynAck);
    t.true(syns.length >= 2 && syns.every((f) => JSON.stringify(smcOption(f)) === JSON.stringify(SMCR_OPTION)));
    t.true(synAcks.length >= 2 && synAcks.every((f) => smcOption(f) !== undefined));
    const plainSynAck = frames.filter((f) => isSynAck(f) && f.tcp!.srcPort === 7000);
    t.true(plainSynAck.length >= 1 && plainSynAck.every((f) => smcOption(f) === undefined));
    // Every frame decodes without error issues; RoCE ICRCs valid; the tracker finds no anomaly.
    const roce = frames.filter((f) => f.roce);
    t.true(roce.length > 20, `${roce.length} RoCE frames`);
    const verdicts: Record<string, number> = {};
    for (const f of roce) verdicts[f.roce!.icrc] = (verdicts[f.roce!.icrc] ?? 0) + 1;
    t.deepEqual(verdicts, { ok: roce.length }, roce.filter((f) => f.roce!.icrc !== 'ok').slice(0, 5).map((f) => `#${f.n} len ${f.caplen} ${f.roce!.ib.bth.opcode}`).join('; '));
    const tr = new Tracker();
    const anomalies: string[] = [];
    for (const f of frames) {
      for (const i of f.issues) if (i.severity === 'error') anomalies.push(`#${f.n} ${i.code} ${i.message}`);
      const note = tr.feed(f);
      for (const a of note?.anomalies ?? []) anomalies.push(`#${f.n} ${a.code} ${a.message}`);
    }
    t.deepEqual(anomalies, []);
    t.log(`${frames.length} frames, ${roce.length} RoCE; handshake+256 KiB echo x2 + fallback`);
  } finally {
    ns.destroy();
  }
});

root('32 parallel connections and 1 GiB each way over SMC-R, verified by hash', async (t) => {
  const ns = Netns.create('epbulk');
  try {
    const r = await runAgent(ns, 'bulk', 900_000);
    t.falsy(r.error, String(r.error));
    t.true(r.parallel.modes.every((m: string) => m === 'smcr'));
    t.is(r.parallel.ok, 32);
    t.is(r.bulk.mode, 'smcr');
    t.is(r.bulk.bytes, 1 << 30);
    t.is(r.bulk.got, r.bulk.sent);
    t.log(`32 x 8 MiB echo in ${r.parallel.ms} ms over ${r.parallel.linkGroups} link group(s); 1 GiB each way in ${r.bulk.ms} ms (${r.bulk.mbps} MB/s echoed)`);
  } finally {
    ns.destroy();
  }
});
