// Live capture, end to end, as root in network namespaces these tests create (traffic never
// leaves them): smcdump -i on the namespace's lo while real kernel captures are replayed
// through real sockets; -w files checked with smcdump -r, tshark and a parallel tcpdump;
// kernel drop counts at 50k frames/s and the highest rate kept up with; idle CPU; -c.
import test, { type ExecutionContext } from 'ava';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT, pcapPath, readFrames, haveCommand } from '../helpers.js';
import { FrameDecoder } from '../../dissectors/frame.js';
import type { Ipv4Header } from '../../dissectors/net/ipv4.js';
import { openCaptureSync } from '../../capture/reader.js';
import { Netns, SMCDUMP, script, liveSkipReason, liveSummary, sleep, type Proc } from './netns.js';

const skip = liveSkipReason();
const liveTest = skip ? test.skip : test.serial;
const title = (s: string): string => (skip ? `${s} [skipped: ${skip}]` : s);

const NODE = process.execPath;
const SMC_FILTER = 'udp port 4791 or tcp';

function tmp(): string {
  return mkdtempSync(join(tmpdir(), 'smcdump-live-'));
}

async function startCapture(ns: Netns, args: string[]): Promise<Proc> {
  const p = ns.spawn(NODE, [...SMCDUMP, ...args]);
  await p.waitFor(/listening on lo/);
  return p;
}

function replay(ns: Netns, capture: string): { udp: number; tcp: number } {
  return JSON.parse(ns.run(NODE, [...script('replay'), pcapPath(capture)], { timeout: 120_000 })) as { udp: number; tcp: number };
}

interface JsonFrame {
  frame: number; time: string; caplen: number; len: number;
  roce?: unknown; smc?: Array<Record<string, unknown> & { proto: string }>; issues?: Array<{ code: string; severity: string; offset: number }>;
}

function jsonLines(s: string): JsonFrame[] {
  return s.split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l) as JsonFrame);
}

/** What must be equal live and offline: per RoCE frame its IB headers, SMC items and
 *  IB/SMC-level issues; per CLC message its decoded value. Frame numbers, addresses, TCP
 *  ports and segmentation (the kernel re-segments) and the TCP option (needs eBPF) are not. */
function smcView(frames: JsonFrame[]): unknown[] {
  const out: unknown[] = [];
  const strip = (i: Record<string, unknown>): Record<string, unknown> => { const { frames: _f, ...rest } = i; return rest; };
  for (const f of frames) {
    if (f.roce) {
      out.push({
        roce: f.roce,
        smc: (f.smc ?? []).map(strip),
        issues: (f.issues ?? []).filter((i) => /^(ib|llc|cdc|roce|rdma)\./.test(i.code)).map((i) => `${i.severity} ${i.code} @${i.offset}`),
      });
    } else {
      for (const i of f.smc ?? []) if (i.proto === 'clc') out.push({ clc: strip(i) });
    }
  }
  return out;
}

function isoToNs(iso: string): bigint {
  const m = /^(.*T\d\d:\d\d:\d\d)\.(\d{9})Z$/.exec(iso);
  if (!m) throw new Error(`bad time ${iso}`);
  return BigInt(Date.parse(`${m[1]}Z`)) * 1_000_000n + BigInt(m[2]!);
}

function epochToNs(s: string): bigint {
  const [sec, frac = ''] = s.trim().split('.');
  return BigInt(sec!) * 1_000_000_000n + BigInt(frac.padEnd(9, '0').slice(0, 9));
}

function smcdumpSync(args: string[]): { code: number | null; out: string; err: string } {
  const r = spawnSync(NODE, [...SMCDUMP, ...args], { encoding: 'utf8', cwd: ROOT, maxBuffer: 512 << 20 });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

// ---------------------------------------------------------------------------------------

liveTest(title('live decode of replayed kernel captures equals the offline decode of the same frames'), async (t) => {
  // ICRC off on both sides: it covers the IPv4 ID, which the kernel chooses for datagrams
  // sent through a socket (see replay.ts). Everything above UDP is the captured bytes.
  for (const name of ['a-first-contact', 'b-second-contact', 'c2-fallback-server-decline', 'd-bulk-2MiB', 'e-testlink-teardown']) {
    const ns = Netns.create('eq');
    try {
      const cap = await startCapture(ns, ['-i', 'lo', '--json', '--no-icrc', SMC_FILTER]);
      const sent = replay(ns, name);
      const { code } = await cap.stop('SIGINT');
      t.is(code, 0, `${name}: ${cap.err}`);
      const live = jsonLines(cap.out);
      const s = liveSummary(cap.err);
      t.is(s.dropped, 0, `${name}: kernel drops`);
      t.is(s.captured, live.length, `${name}: summary counts the printed frames`);
      t.true(live.filter((f) => f.roce).length === sent.udp, `${name}: every replayed datagram captured`);

      const off = smcdumpSync(['-r', pcapPath(name), '--json', '--no-icrc']);
      t.is(off.code, 0);
      const want = smcView(jsonLines(off.out));
      const got = smcView(live);
      t.true(want.length > 0, `${name}: the capture has SMC items`);
      t.deepEqual(got, want, `${name}: live and offline SMC items differ`);
      t.log(`${name}: ${got.length} SMC items equal (${sent.udp} datagrams, ${sent.tcp} CLC segments replayed)`);
    } finally {
      ns.delete();
    }
  }
});

liveTest(title('-w pcapng / -F pcap: smcdump -r and tshark -r agree on count and timestamps; tcpdump within 1 ms; -s keeps original lengths'), async (t) => {
  if (!haveCommand('tshark') || !haveCommand('tcpdump')) { t.fail('tshark and tcpdump are installed by install.sh'); return; }
  const dir = tmp();
  const ns = Netns.create('w');
  try {
    const ng = join(dir, 'live.pcapng');
    const pc = join(dir, 'live.pcap');
    const cut = join(dir, 'cut.pcapng');
    const td = join(dir, 'tcpdump.pcap');
    const a = await startCapture(ns, ['-i', 'lo', '-q', '-w', ng, SMC_FILTER]);
    const b = await startCapture(ns, ['-i', 'lo', '-w', pc, '-F', 'pcap', SMC_FILTER]); // -w still prints without -q
    const c = await startCapture(ns, ['-i', 'lo', '-q', '-s', '96', '-w', cut, SMC_FILTER]);
    // tcpdump as a second, independent observer. Two captures of the same traffic differ when
    // one of them loses frames, and tcpdump's defaults lose them at the end: its ring blocks
    // are handed over on a 1 s timer and whatever sits in an unfinished block (or in the
    // ring, unread) when SIGINT comes is neither written nor counted as dropped (once: 2199
    // of 2291 under load). So: --immediate-mode (no blocks), smcdump's ring size (-B), -U
    // (each frame reaches the file at once), and SIGINT only when the file has caught up.
    const tcpdump = ns.spawn('tcpdump', ['-i', 'lo', '-n', '-s', '0', '--immediate-mode', '-B', '32768', '-U', '--time-stamp-precision=nano', '-w', td, SMC_FILTER]);
    await tcpdump.waitFor(/listening on lo/);
    replay(ns, 'a-first-contact');
    replay(ns, 'd-bulk-2MiB');
    for (const p of [a, b, c]) t.is((await p.stop('SIGINT')).code, 0, p.err);
    const ours = liveSummary(a.err).captured;
    let have = -1;
    for (let last = Date.now(); Date.now() - last < 2000;) {
      const n = (await readFrames(td)).length;
      if (n >= ours) break;
      if (n !== have) { have = n; last = Date.now(); }
      await sleep(100);
    }
    t.is((await tcpdump.stop('SIGINT')).code, 0, tcpdump.err);

    const sa = liveSummary(a.err);
    t.is(sa.dropped, 0);
    t.true(sa.captured > 2200, `captured ${sa.captured}`);
    t.is(liveSummary(b.err).captured, sa.captured);
    t.is(b.out.trimEnd().split('\n').length, sa.captured, '-w without -q still prints one line per frame');

    for (const file of [ng, pc]) {
      const r = smcdumpSync(['-r', file, '--json', '--no-icrc']);
      t.is(r.code, 0, r.err);
      const ours = jsonLines(r.out).map((f) => isoToNs(f.time));
      const ts = spawnSync('tshark', ['-r', file, '-T', 'fields', '-e', 'frame.time_epoch'], { encoding: 'utf8', maxBuffer: 64 << 20 });
      t.is(ts.status, 0, ts.stderr);
      const theirs = ts.stdout.trim().split('\n').map(epochToNs);
      t.is(ours.length, sa.captured, `${file}: smcdump -r count`);
      t.is(theirs.length, sa.captured, `${file}: tshark -r count`);
      t.deepEqual(theirs, ours, `${file}: timestamps (ns) differ between tshark and smcdump`);
    }

    // Same frames as tcpdump (matched by content), timestamps within 1 ms.
    const mine = await readFrames(ng);
    const theirs = await readFrames(td);
    // Whatever tcpdump has not, its kernel ring dropped and said so: nothing vanishes
    // unaccounted. (Its drop count can be larger than the frames missing: on lo libpcap sees
    // each packet twice, outgoing and incoming, and drops the outgoing copy itself, so
    // "received by filter" is twice the traffic and a full ring drops both copies.)
    const tdCount = (what: string): number => Number(new RegExp(`^(\\d+) packets? ${what}$`, 'm').exec(tcpdump.err)?.[1] ?? NaN);
    const drops = tdCount('dropped by kernel');
    t.is(theirs.length, tdCount('captured'), `tcpdump wrote what it counted: ${tcpdump.err}`);
    if (drops === 0) t.is(theirs.length, mine.length, 'tcpdump (no drops) saw as many frames');
    else {
      t.true(mine.length - theirs.length <= drops, `${mine.length - theirs.length} frames missing in tcpdump's file, ${drops} dropped by its kernel ring`);
      t.log(`tcpdump's kernel ring dropped ${drops} frames`);
    }
    // every frame tcpdump has is one of ours (matched by content), within 1 ms
    const byBytes = new Map<string, bigint[]>();
    for (const f of mine) {
      const k = Buffer.from(f.data).toString('base64');
      const l = byBytes.get(k);
      if (l) l.push(f.tsNs); else byBytes.set(k, [f.tsNs]);
    }
    let worst = 0n;
    let unmatched = 0;
    for (const f of theirs) {
      const ts = byBytes.get(Buffer.from(f.data).toString('base64'))?.shift();
      if (ts === undefined) { unmatched++; continue; }
      const d = ts > f.tsNs ? ts - f.tsNs : f.tsNs - ts;
      if (d > worst) worst = d;
    }
    t.is(unmatched, 0, 'frames tcpdump has that we do not');
    t.true(worst <= 1_000_000n, `largest timestamp difference to tcpdump: ${worst} ns`);
    t.log(`${mine.length} frames; largest timestamp difference to tcpdump ${worst} ns`);

    // -s 96: caplen cut, original length kept (tshark reads both from the file).
    const lens = spawnSync('tshark', ['-r', cut, '-T', 'fields', '-e', 'frame.len', '-e', 'frame.cap_len'], { encoding: 'utf8', maxBuffer: 64 << 20 });
    const rows = lens.stdout.trim().split('\n').map((l) => l.split('\t').map(Number));
    t.is(rows.length, mine.length);
    t.deepEqual(rows.map((r) => r[0]), mine.map((f) => f.origlen), 'original lengths kept');
    t.true(rows.every((r) => r[1]! <= 96 && r[1] === Math.min(96, r[0]!)), 'cut to the snaplen');
    t.true(mine.some((f) => f.origlen > 96));
  } finally {
    ns.delete();
    rmSync(dir, { recursive: true, force: true });
  }
});

liveTest(title('rate: 50k frames/s of SMC-R traffic on lo, `smcdump -i lo -w file -q` drops nothing; highest rate kept up with'), async (t) => {
  if (!haveCommand('cc')) { t.fail('a C compiler is needed for the sender (node-gyp needs one too)'); return; }
  const dir = tmp();
  const blast = join(dir, 'blast');
  const cc = spawnSync('cc', ['-O2', '-o', blast, join(ROOT, 'test', 'live', 'blast.c')], { encoding: 'utf8' });
  t.is(cc.status, 0, cc.stderr);
  // Real SMC-R frames: the RoCEv2 payloads (RDMA WRITE, CDC, LLC, ACK) of the bulk capture.
  const parts: Uint8Array[] = [];
  const dec = new FrameDecoder({ icrc: false });
  const r = openCaptureSync(pcapPath('d-bulk-2MiB'));
  for (let f = r.next(); f; f = r.next()) {
    const d = dec.decode(f);
    if (!d.roce || !d.eth || !d.ip) continue;
    const ip = d.ip.header as Ipv4Header;
    const p = f.data.slice(d.eth.headerLength + ip.headerLength + 8, d.eth.headerLength + ip.totalLength);
    parts.push(Uint8Array.of(p.length & 0xff, p.length >> 8), p);
  }
  r.close();
  const payloads = join(dir, 'payloads.bin');
  writeFileSync(payloads, Buffer.concat(parts));
  const ns = Netns.create('rate', ['10.55.0.1', '10.55.0.2']);
  try {
    const step = async (rate: number, seconds: number) => {
      const out = join(dir, `rate-${rate}.pcapng`);
      const cap = await startCapture(ns, ['-i', 'lo', '-w', out, '-q', 'udp dst port 4791']);
      const sent = JSON.parse(ns.run(blast, ['10.55.0.1', '49441', '10.55.0.2', '4791', String(rate), String(rate * seconds), payloads], { timeout: 60_000 })) as { sent: number; rate: number };
      await sleep(100);
      const { code } = await cap.stop('SIGINT');
      const s = liveSummary(cap.err);
      const inFile = countFrames(out);
      rmSync(out, { force: true });
      return { rate, achieved: Math.round(sent.rate), sent: sent.sent, code, inFile, ...s };
    };
    const log = (x: Awaited<ReturnType<typeof step>>): void => t.log(`target ${x.rate}/s: sent ${x.sent} at ${x.achieved}/s, captured ${x.captured}, dropped by kernel ${x.dropped}, in file ${x.inFile}`);

    let first = await step(50_000, 2);
    log(first);
    // A shared 2-core machine (and ava runs other test files alongside): when something else
    // had the CPUs — the sender itself then falls short of 50k/s too — try again, twice at most.
    for (let retry = 0; retry < 2 && (first.dropped > 0 || first.captured < first.sent); retry++) {
      t.log('drops at 50k/s: trying again (shared machine)');
      first = await step(50_000, 2);
      log(first);
    }
    t.is(first.code, 0);
    t.is(first.sent, 100_000);
    t.is(first.dropped, 0, 'kernel drops at 50k frames/s');
    t.is(first.captured, first.sent, 'every frame captured');
    t.is(first.inFile, first.sent, 'every frame written');

    let best = first.achieved;
    for (const rate of [60_000, 70_000, 85_000, 100_000, 125_000, 150_000]) {
      const x = await step(rate, 2);
      log(x);
      if (x.dropped > 0 || x.captured < x.sent) break;
      best = x.achieved;
      if (x.achieved < rate * 0.9) { t.log(`the sender tops out at ${x.achieved}/s on this machine`); break; }
    }
    t.log(`highest rate without kernel drops: ${best} frames/s`);
  } finally {
    ns.delete();
    rmSync(dir, { recursive: true, force: true });
  }
});

function countFrames(path: string): number {
  const r = openCaptureSync(path);
  let n = 0;
  while (r.next()) n++;
  r.close();
  return n;
}

liveTest(title('-c N ends the capture by itself; an idle capture does not busy-poll; Ctrl-C on an empty capture'), async (t: ExecutionContext) => {
  const ns = Netns.create('c');
  try {
    const c5 = await startCapture(ns, ['-i', 'lo', '-c', '5', SMC_FILTER]);
    replay(ns, 'a-first-contact');
    const e = await c5.wait(30_000);
    t.is(e.code, 0, c5.err);
    t.is(c5.out.trimEnd().split('\n').length, 5);
    t.is(liveSummary(c5.err).captured, 5);

    const idle = await startCapture(ns, ['-i', 'lo', '-q']);
    await sleep(500);
    const cpu0 = idle.cpuMs();
    await sleep(2000);
    const used = idle.cpuMs() - cpu0;
    t.true(used <= 60, `idle capture used ${used} ms CPU in 2 s`);
    t.log(`idle capture: ${used} ms CPU in 2 s`);
    t.is((await idle.stop('SIGINT')).code, 0);
    t.deepEqual(liveSummary(idle.err), { captured: 0, received: 0, dropped: 0 });
    t.regex(idle.err, /^0 frames; SMC: none; 0 issues \(0 errors\)$/m);
  } finally {
    ns.delete();
  }
});

liveTest(title('permission denied names the missing capability (CAP_NET_RAW), in one line'), (t) => {
  if (!haveCommand('setpriv')) { t.pass('setpriv (util-linux) missing'); return; }
  const r = spawnSync('setpriv', ['--bounding-set', '-net_raw', NODE, ...SMCDUMP, '-i', 'lo', '-c', '1'], { encoding: 'utf8', cwd: ROOT });
  t.is(r.status, 1);
  t.regex(r.stderr, /^smcdump: no permission to capture on lo: this process lacks CAP_NET_RAW .*\(libpcap: .*Operation not permitted\)\n$/);
});
