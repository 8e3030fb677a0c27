// Capture ↔ endpoint state, acceptance: two of our endpoints exchange data over uroce on
// loopback with the engine's capture tap on; the endpoint's snapshot is saved; smcdump joins the
// capture with it and finds no disagreement. A copy of the capture with ONE CDC's producer
// cursor changed (re-encoded with the CDC codec, ICRC and UDP checksum recomputed with the
// existing helpers) makes smcdump flag exactly that one cursor disagreement and nothing else.
import test from 'ava';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PcapWriter, MemorySink } from '../../capture/writer.js';
import { readCaptureBuffer } from '../../capture/reader.js';
import type { CapturedFrame } from '../../capture/types.js';
import { FrameDecoder } from '../../dissectors/frame.js';
import { decodeCdc, encodeCdc } from '../../dissectors/wire/cdc.js';
import { writeIcrc, checkIcrc } from '../../dissectors/wire/ib.js';
import { transportChecksum } from '../../dissectors/net/checksum.js';
import { stateJson } from '../../endpoint/control.js';
import type { UroceDevice } from '../../endpoint/verbs/uroce/index.js';
import { ROOT } from '../helpers.js';
import { openPair, exchange, addr } from './pair.js';

// From dist/ (npm test) run the compiled command; under tsx run the source.
const compiled = join(ROOT, 'dist', 'cli', 'bin', 'smcdump.js');
const cmd = import.meta.url.includes('/dist/') && existsSync(compiled) ? [compiled] : ['--import', 'tsx', join(ROOT, 'cli', 'bin', 'smcdump.ts')];
function smcdump(args: string[]): { code: number | null; out: string; err: string } {
  const r = spawnSync(process.execPath, [...cmd, ...args], { encoding: 'utf8', cwd: ROOT });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

interface Anom { code: string; frame: number; message: string; key?: string; wire?: string; endpoint?: string; severity: string }
interface SummaryJson { anomalies: Anom[]; stateDisagreements: Anom[]; endpointState: { linkGroups: Array<{ name: string }> } }

const dir = mkdtempSync(join(tmpdir(), 'smcscope-state-'));
test.after.always(() => rmSync(dir, { recursive: true, force: true }));

let capPath = '';
let statePath = '';
let frames: CapturedFrame[] = [];
let snap: { linkGroups: Array<{ name: string; links: Array<{ qpn: number; gid: string; peer: { qpn: number } }> }>; connections: Array<{ key: string; peerToken: string; tx: { seq: number; prod: { wrap: number; count: number } } }>; closedConnections: Array<{ key: string }> };

test.before(async () => {
  const [a, b] = await openPair(60);
  const sink = new MemorySink();
  const w = new PcapWriter(sink, { nanosecond: true });
  const detach = (a.device as UroceDevice).engine.captureTo(w);
  try {
    // one connection opened, used both ways and closed; a second one left open (more than one ring of data)
    const x = await exchange(a, b, 150_000, 3000);
    await Promise.all([x.ca.close(), x.cb.close()]);
    x.done();
    const y = await exchange(a, b, 100_000, 70_000);
    await new Promise((r) => setTimeout(r, 300)); // cursor updates settle
    snap = stateJson(a) as typeof snap;
    y.done();
  } finally {
    detach();
    w.close();
    await Promise.all([a.close(), b.close()]);
  }
  // the capture ends before the close: keep only what was captured up to the snapshot
  const bytes = sink.toBytes();
  capPath = join(dir, 'exchange.pcap');
  statePath = join(dir, 'state.json');
  const r = readCaptureBuffer(bytes, { reuseFrame: false });
  for (let f = r.next(); f; f = r.next()) frames.push(f);
  // the tap saw the DELETE LINK of close(): the snapshot predates it, so cut the capture at the snapshot
  const takenNs = BigInt(Date.parse((snap as unknown as { takenAt: string }).takenAt)) * 1_000_000n;
  frames = frames.filter((f) => f.tsNs <= takenNs);
  writePcap(capPath, frames);
  writeFileSync(statePath, JSON.stringify(snap));
  void addr;
});

function writePcap(path: string, list: CapturedFrame[]): void {
  const sink = new MemorySink();
  const w = new PcapWriter(sink, { nanosecond: true });
  for (const f of list) w.write(f);
  w.close();
  writeFileSync(path, sink.toBytes());
}

test.serial('the capture agrees with the endpoint state: zero disagreements, frames in the endpoint\'s names', (t) => {
  t.true(frames.length > 100, `${frames.length} frames`);
  t.is(snap.connections.length, 1);
  t.is(snap.closedConnections.length, 1);
  const r = smcdump(['-r', capPath, '--state', statePath, '--summary', '--json']);
  t.is(r.code, 0, r.err);
  const j = JSON.parse(r.out) as SummaryJson;
  t.deepEqual(j.stateDisagreements, []);
  t.false(j.anomalies.some((a) => a.code.startsWith('state.')));
  // text mode: the closing report and the labels
  const txt = smcdump(['-r', capPath, '--state', statePath]);
  t.is(txt.code, 0, txt.err);
  t.regex(txt.err, /Endpoint state vs wire \(LG\d+, pid \d+\): no disagreements/);
  const lg = snap.linkGroups[0]!.name;
  const live = snap.connections[0]!.key, closed = snap.closedConnections[0]!.key;
  t.regex(txt.out, new RegExp(`LLC CONFIRM LINK v2 req .*\\[${lg}/L1 in\\]`));
  t.regex(txt.out, new RegExp(`CDC seq 1 .*\\[${lg}/L1 ${closed} out\\]`));
  t.regex(txt.out, new RegExp(`CDC seq 1 .*\\[${lg}/L1 ${live} in\\]`));
  t.regex(txt.out, new RegExp(`RDMA WRITE FIRST .*\\[${lg}/L1 ${live} out\\]`));
  // JSON lines keep the tracker's tags and add the endpoint's
  const js = smcdump(['-r', capPath, '--state', statePath, '--json', '--only', 'cdc']);
  const lines = js.out.trimEnd().split('\n').map((l) => JSON.parse(l) as { track?: { endpoint?: { conn?: string; dir: string; link: string } }; stateDisagreements?: unknown[] });
  t.deepEqual(lines[lines.length - 1]!.stateDisagreements, []);
  const labelled = lines.filter((l) => l.track?.endpoint?.conn !== undefined);
  t.is(labelled.length, lines.length - 1, 'every CDC is named by the endpoint');
  t.deepEqual([...new Set(labelled.map((l) => l.track!.endpoint!.conn!))].sort(), [live, closed].sort());
});

test.serial('one changed producer cursor in a copy of the capture: exactly that disagreement', (t) => {
  // the last CDC the endpoint sent on its open connection
  const dec = new FrameDecoder();
  const peerToken = Number(snap.connections[0]!.peerToken);
  let idx = -1;
  frames.forEach((f, i) => {
    const d = dec.decode(f);
    const cdc = d.smc.find((s) => s.proto === 'cdc');
    if (cdc && cdc.proto === 'cdc' && cdc.value.token === peerToken && d.ip?.src === addrOfState()) idx = i;
  });
  t.true(idx >= 0);
  const orig = frames[idx]!;
  const data = orig.data.slice();
  const ihl = (data[0]! & 0x0f) * 4;
  const cdcOff = ihl + 8 + 12; // IPv4 + UDP + BTH (SEND ONLY: no extension header)
  const m = decodeCdc(data.subarray(cdcOff, cdcOff + 44)).value;
  t.is(m.seq, snap.connections[0]!.tx.seq, 'it is the last CDC sent');
  t.deepEqual({ wrap: m.prod.wrap, count: m.prod.count }, snap.connections[0]!.tx.prod);
  const wrong = { wrap: m.prod.wrap, count: m.prod.count - 1000 };
  data.set(encodeCdc({ ...m, prod: wrong }), cdcOff);
  writeIcrc(data, 0, 'v2');
  t.true(checkIcrc(data, 0, 'v2').ok);
  // the UDP checksum covers the payload too (uroce sends one): recompute it with the header helper
  const udp = data.subarray(ihl);
  const src = data.subarray(12, 16), dst = data.subarray(16, 20);
  const ck = transportChecksum(src, dst, 17, udp);
  udp[6] = ck >> 8; udp[7] = ck & 0xff;
  const copy = frames.slice();
  copy[idx] = { ...orig, data };
  const bad = join(dir, 'one-wrong-cursor.pcap');
  writePcap(bad, copy);

  const before = JSON.parse(smcdump(['-r', capPath, '--state', statePath, '--summary', '--json']).out) as SummaryJson;
  const r = smcdump(['-r', bad, '--state', statePath, '--summary', '--json']);
  t.is(r.code, 0, r.err);
  const j = JSON.parse(r.out) as SummaryJson;
  t.is(j.stateDisagreements.length, 1, JSON.stringify(j.stateDisagreements));
  const a = j.stateDisagreements[0]!;
  t.is(a.code, 'state.cursor');
  t.is(a.frame, idx + 1);
  t.is(a.key, snap.connections[0]!.key);
  t.is(a.wire, `${wrong.wrap}:${wrong.count} (frame ${idx + 1})`);
  t.is(a.endpoint, `tx.prod ${m.prod.wrap}:${m.prod.count}`);
  t.regex(a.message, /producer cursor of the last CDC we sent/);
  // nothing else changed: the same tracker anomalies as the original (no ICRC/checksum issue either)
  const codes = (x: SummaryJson): string[] => x.anomalies.filter((y) => !y.code.startsWith('state.')).map((y) => `${y.frame} ${y.code}`);
  t.deepEqual(codes(j), codes(before));
  // the text report says it in one line on stderr
  const txt = smcdump(['-r', bad, '--state', statePath, '-q']);
  t.regex(txt.err, new RegExp(`1 disagreement\\n +error state\\.cursor #${idx + 1}: ${snap.connections[0]!.key}: producer cursor of the last CDC we sent: wire ${wrong.wrap}:${wrong.count}`));
});

test.serial('--state view and errors', (t) => {
  const v = smcdump(['--state', statePath]);
  t.is(v.code, 0, v.err);
  const lg = snap.linkGroups[0]!;
  t.regex(v.out, /Link groups/);
  t.regex(v.out, new RegExp(`${lg.name}/L1 +│ ACTIVE +│ ${lg.links[0]!.gid.replace(/\./g, '\\.')} │ 0x${lg.links[0]!.qpn.toString(16)} `));
  t.regex(v.out, new RegExp(`${snap.connections[0]!.key} +│ [\\d.]+:\\d+ ↔ [\\d.]+:\\d+ +│ ACTIVE`));
  t.regex(v.out, /Closed connections/);
  const j = smcdump(['--state', statePath, '--json']);
  t.like(JSON.parse(j.out), { linkGroups: [{ name: lg.name }] });
  const notState = join(dir, 'not-state.json');
  writeFileSync(notState, '{"hello":1}');
  const e = smcdump(['-r', capPath, '--state', notState]);
  t.is(e.code, 1);
  t.regex(e.err, /^smcdump: .*not-state\.json: not an endpoint state: .*\n$/);
  const e2 = smcdump(['--state', join(dir, 'missing.json')]);
  t.regex(e2.err, /^smcdump: cannot read .*missing\.json: ENOENT\n$/);
  const e3 = smcdump(['--state', statePath, '--endpoint', '/nonexistent.sock']);
  t.regex(e3.err, /exclude each other/);
});

function addrOfState(): string {
  // the endpoint whose state was saved has the .1 address of the pair
  const g = (snap as unknown as { gid: string }).gid;
  return g.replace('::ffff:', '');
}

test.serial('every kind of state disagreement is flagged with its code and both values', (t) => {
  type S = { linkGroups: Array<{ state: string; links: Array<{ state: string; psn: number; uid: number; peer: { mac: string }; stats: { sent: number } }>; conns: Array<{ rtokens: Array<{ rkey: number }> }>; rmbs: Array<{ addr: string; rkey: number }> }>; connections: Array<{ rx: { seq: number; flags: string } }> };
  const cases: Array<[string, (s: S) => void, string[]]> = [
    ['initial PSN', (s) => { s.linkGroups[0]!.links[0]!.psn = (s.linkGroups[0]!.links[0]!.psn + 5) & 0xffffff; }, ['state.psn']],
    ['link uid', (s) => { s.linkGroups[0]!.links[0]!.uid ^= 0x100; }, ['state.link']],
    ['peer MAC', (s) => { s.linkGroups[0]!.links[0]!.peer.mac = '02:00:00:00:00:99'; }, ['state.mac']],
    ['link still activating', (s) => { s.linkGroups[0]!.links[0]!.state = 'ACTIVATING'; }, ['state.link']],
    ['rtoken rkey', (s) => { s.linkGroups[0]!.conns[0]!.rtokens[0]!.rkey ^= 0x40; }, ['state.rkey']],
    ['RMB address', (s) => { const b = s.linkGroups[0]!.rmbs[0]!; b.addr = '0x' + (BigInt(b.addr) + 4096n).toString(16); }, ['state.addr']],
    ['rx seq', (s) => { s.connections[0]!.rx.seq += 1; }, ['state.seq']],
    ['close flag', (s) => { s.connections[0]!.rx.flags = 'done'; }, ['state.flags']],
    ['SENDs counter', (s) => { s.linkGroups[0]!.links[0]!.stats.sent += 1; }, ['state.counter']],
  ];
  for (const [name, edit, want] of cases) {
    const s = JSON.parse(JSON.stringify(snap)) as S;
    edit(s);
    const p = join(dir, `edited-${want[0]}.json`);
    writeFileSync(p, JSON.stringify(s));
    const r = smcdump(['-r', capPath, '--state', p, '--summary', '--json']);
    t.is(r.code, 0, r.err);
    const got = (JSON.parse(r.out) as SummaryJson).stateDisagreements;
    t.deepEqual(got.map((a) => a.code), want, `${name}: ${JSON.stringify(got)}`);
    for (const a of got) t.true(a.wire !== a.endpoint && (a.wire ?? '').length > 0 && (a.endpoint ?? '').length > 0, name);
  }
});

test.serial('the join reads the tracker: --no-track with --state is a clear error', (t) => {
  const r = smcdump(['-r', capPath, '--state', statePath, '--no-track', '-q']);
  t.is(r.code, 1);
  t.regex(r.err, /^smcdump: --state and --endpoint with a capture compare the correlation with the endpoint: drop --no-track\n$/);
});

test.serial('CDCs of a connection the state does not list: state.conn each way, named by its token', (t) => {
  const s = JSON.parse(JSON.stringify(snap)) as typeof snap;
  const gone = s.closedConnections[0]!.key;
  s.closedConnections = [];
  const p = join(dir, 'no-closed.json');
  writeFileSync(p, JSON.stringify(s));
  const r = smcdump(['-r', capPath, '--state', p, '--summary', '--json']);
  t.is(r.code, 0, r.err);
  const got = (JSON.parse(r.out) as SummaryJson).stateDisagreements;
  t.deepEqual(got.map((a) => `${a.code} ${a.severity}`), ['state.conn warn', 'state.conn warn'], JSON.stringify(got));
  const token = Number(gone.split('/')[1]);
  for (const a of got) {
    t.regex(a.message, /CDCs (sent|received) for token 0x/);
    t.regex(a.endpoint ?? '', new RegExp(`no connection with (peer|local) token 0x0*${token.toString(16)} on ${snap.linkGroups[0]!.name}`));
    t.regex(a.wire ?? '', /^\d+ CDCs, last seq \d+$/);
  }
  t.deepEqual(got.map((a) => /sent/.test(a.message)).sort(), [false, true]);
});

test.serial('mid-stream (no CLC in the capture): the tracker attributes RDMA WRITEs by the CDC that follows them', (t) => {
  const r = smcdump(['-r', capPath, '--summary', '--json']);
  t.is(r.code, 0, r.err);
  const j = JSON.parse(r.out) as { midStreamConnections: Array<{ dirs: Array<{ writes: number; writeBytes: number }> }> };
  t.is(j.midStreamConnections.length, 2);
  // 150 000 / 3000 bytes, then 100 000 / 70 000: each connection's first WRITE (before its first
  // CDC) cannot be attributed; everything after it is
  const sums = j.midStreamConnections.map((c) => c.dirs.map((d) => d.writeBytes).sort((a, b) => a - b));
  const want = [[3000, 150_000], [70_000, 100_000]];
  // (one WRITE message is at most the peer's 64 KiB RMBE here)
  sums.forEach((s, i) => s.forEach((b, k) => {
    const w = want[i]![k]!;
    t.true(b <= w && b >= w - 65_536, `connection ${i} direction ${k}: ${b} of ${w} bytes`);
  }));
  t.true(sums.flat().filter((b) => b > 0).length >= 3, JSON.stringify(sums));
});
