// smcdump on real failures: captures made in the kernel lab (test/lab/scenarios l-…, m-…, n-…,
// o-…, p-…) with the guests' own logs as ground truth (pcaps/NAME.truth.json summarises what
// the guest programs said they sent and received). Each test asserts the diagnosis codes, the
// states in the tables, and the --follow bytes against those checksums.
import test from 'ava';
import { readFileSync } from 'node:fs';
import { FrameDecoder } from '../../dissectors/frame.js';
import { Tracker } from '../../dissectors/tracker/tracker.js';
import { diagnose, type Diagnosis } from '../../dissectors/tracker/diagnosis.js';
import { closeState } from '../../dissectors/render/summary.js';
import { PCAPS, pcapPath, readFrames } from '../helpers.js';
import { join } from 'node:path';

interface Dir { bytes?: number; fnv1a?: string; stream_bytes?: number; stream_fnv1a?: string; client_received?: number; client_received_fnv1a?: string; urgent_bytes?: { offset: number }[] }
interface Truth { connections: { id: number; client: string; server: string; c2s: Dir; s2c: Dir }[] }

function truth(name: string): Truth { return JSON.parse(readFileSync(join(PCAPS, `${name}.truth.json`), 'utf8')) as Truth; }

async function track(name: string, follow?: string): Promise<Tracker> {
  const dec = new FrameDecoder();
  const t = new Tracker(follow ? { followTuple: follow } : {});
  for (const f of await readFrames(pcapPath(name))) t.feed(dec.decode(f));
  t.finish();
  return t;
}

function fnv1a(chunks: readonly { bytes: Uint8Array }[], limit = Infinity): { n: number; h: string } {
  let h = 0x811c9dc5, n = 0;
  for (const c of chunks) for (const b of c.bytes) { if (n++ >= limit) return { n: limit, h: h.toString(16).padStart(8, '0') }; h ^= b; h = Math.imul(h, 0x01000193) >>> 0; }
  return { n, h: h.toString(16).padStart(8, '0') };
}

/** The followed connection's streams, SMC-R (RDMA) or fallback (TCP). */
function streams(t: Tracker): [{ bytes: Uint8Array }[], { bytes: Uint8Array }[]] {
  const c = t.followedTcp()!;
  if (c.smc) return [c.smc.dirs[0].stream!.chunks, c.smc.dirs[1].stream!.chunks];
  return [c.tcpStream![0].chunks, c.tcpStream![1].chunks];
}

const codes = (ds: Diagnosis[], sev?: Diagnosis['severity']): string[] => [...new Set(ds.filter((d) => !sev || d.severity === sev).map((d) => d.code))].sort();

test('l-failover, l2-failover-client: the moved connection is followed across the failover, both directions exact', async (t) => {
  for (const name of ['l-failover', 'l2-failover-client']) for (const c of truth(name).connections) {
    const tk = await track(name, `${c.client}-${c.server}`);
    const [c2s, s2c] = streams(tk);
    t.deepEqual(fnv1a(c2s), { n: c.c2s.bytes!, h: c.c2s.fnv1a! }, `connection ${c.id} c>s`);
    t.deepEqual(fnv1a(s2c), { n: c.s2c.bytes!, h: c.s2c.fnv1a! }, `connection ${c.id} s>c`);
    const s = tk.followedTcp()!.smc!;
    t.true(s.dirs.every((d) => d.stream!.missing.length === 0), `${name} connection ${c.id}: nothing missing`);
  }
});

test('l2-failover-client: the client loses its device, REQUEST ADD LINK when it returns is answered by ADD LINK', async (t) => {
  const tk = await track('l2-failover-client');
  const ds = diagnose(tk);
  t.deepEqual(codes(ds, 'error'), []);
  t.deepEqual(codes(ds, 'warning'), ['lgr.failover', 'link.lost']);
  t.deepEqual(tk.anomalies.filter((a) => a.code === 'llc.no-response' || a.code === 'cdc.unknown-token'), []);
  const g = tk.groups[0]!;
  // Guest B's smcdiag (the server's view): SYMMETRIC → ASYMMETRIC_PEER → SYMMETRIC.
  t.deepEqual(g.types.map((x) => x.type), ['SINGLE', 'SYMMETRIC', 'SINGLE', 'ASYMMETRIC_PEER', 'SYMMETRIC']);
  const req = g.events.findIndex((e) => e.what === 'request-add-link');
  t.is(g.events[req]!.frame, 3788);
  t.is(g.events[req]!.by, 'client');
  t.is(g.events[req + 1]!.what, 'link-added');
  t.is(g.events[req + 1]!.frame, 3790);
  const l2 = g.links.find((l) => l.id === 2)!;
  t.is(l2.state, 'lost');
  t.is(l2.deleted?.by, 'client');
  t.deepEqual(tk.tcp[1]!.smc!.failovers.map((f) => [f.from, f.to, f.by, f.frame]), [['LG1/L2', 'LG1/L1', 'client', 2075], ['LG1/L2', 'LG1/L1', 'server', 2098]]);
});

test('l-failover: lgr.failover and link.lost as warnings, no error, no unknown token; states and types agree', async (t) => {
  const tk = await track('l-failover');
  t.deepEqual(tk.anomalies.filter((a) => a.code === 'cdc.unknown-token' || a.severity === 'error'), []);
  const ds = diagnose(tk);
  t.deepEqual(codes(ds, 'error'), []);
  t.deepEqual(codes(ds, 'warning'), ['lgr.failover', 'link.lost']);
  const g = tk.groups[0]!;
  t.is(tk.groups.length, 1);
  // Guest B's smcdiag: SYMMETRIC → ASYMMETRIC_LOCAL (links 1 and 3 on rxe0) → SYMMETRIC (links 1 and 4).
  t.deepEqual(g.types.map((x) => x.type), ['SINGLE', 'SYMMETRIC', 'SINGLE', 'ASYMMETRIC_LOCAL', 'SYMMETRIC']);
  const byId = new Map(g.links.map((l) => [l.id, l]));
  t.is(byId.get(1)!.state, 'active');
  t.is(byId.get(2)!.state, 'lost');
  t.is(byId.get(2)!.deleted?.by, 'server');
  t.is(byId.get(2)!.deleted?.reason, 0x00010000);
  t.is(byId.get(3)!.state, 'deleted');
  t.is(byId.get(3)!.deleted?.reason, 0x00050000);
  t.is(byId.get(4)!.state, 'active');
  const f = ds.find((d) => d.code === 'lgr.failover')!;
  t.is(f.conn, 2);
  t.regex(f.message, /LG1\/L2 → LG1\/L1/);
  const moved = tk.tcp[1]!.smc!;
  t.deepEqual(moved.failovers.map((x) => [x.from, x.to, x.by]), [['LG1/L2', 'LG1/L1', 'server'], ['LG1/L2', 'LG1/L1', 'client']]);
  t.regex(closeState(moved), /client closed, server closed/);
  t.is(tk.tcp[0]!.smc!.failovers.length, 0, 'connection 1 stayed on link 1');
  const lost = ds.find((d) => d.code === 'link.lost')!;
  t.is(lost.link, 'LG1/L2');
  t.regex(lost.message, /continued on LG1\/L1/);
});

test('m-device-removal: link.lost, tcp.reset, rdma.retransmit, llc.testlink-unanswered; nothing shown active or open', async (t) => {
  const tk = await track('m-device-removal');
  const ds = diagnose(tk);
  for (const code of ['link.lost', 'tcp.reset', 'rdma.retransmit', 'llc.testlink-unanswered']) t.true(codes(ds).includes(code), code);
  t.is(ds.find((d) => d.code === 'link.lost')!.severity, 'error');
  t.is(ds.find((d) => d.code === 'tcp.reset')!.frames.first, 92);
  t.is(ds.find((d) => d.code === 'llc.testlink-unanswered')!.frames.first, 113);
  const g = tk.groups[0]!;
  t.is(g.state, 'failed');
  t.true(g.links.every((l) => l.state === 'lost'));
  const c = tk.tcp[0]!.smc!;
  t.notRegex(closeState(c), /^open$/);
  t.regex(closeState(c), /reset by the client/);
  // What the client application received (1800 bytes, FNV-1a as logged) is the start of the stream
  // rebuilt from the wire (one more CDC went on the wire but was never acknowledged).
  const tr = truth('m-device-removal').connections[0]!;
  const tf = await track('m-device-removal', `${tr.client}-${tr.server}`);
  t.deepEqual(fnv1a(streams(tf)[1], tr.s2c.client_received!), { n: tr.s2c.client_received!, h: tr.s2c.client_received_fnv1a! });
});

test('n-link-never-up: link.not-established says what was seen; the fallback is followed in TCP', async (t) => {
  const tk = await track('n-link-never-up');
  const ds = diagnose(tk);
  const ne = ds.find((d) => d.code === 'link.not-established')!;
  t.is(ne.severity, 'error');
  t.regex(ne.message, /from the server/);
  t.regex(ne.message, /none from the client/);
  t.regex(ne.message, /declined 0x02010000/);
  t.is(tk.groups[0]!.state, 'failed');
  t.true(tk.groups[0]!.links.every((l) => l.state === 'failed'));
  t.is(tk.tcp[0]!.mode, 'fallback');
  const tr = truth('n-link-never-up').connections[0]!;
  const tf = await track('n-link-never-up', `${tr.client}-${tr.server}`);
  const [c2s, s2c] = streams(tf);
  t.deepEqual(fnv1a(c2s), { n: tr.c2s.bytes!, h: tr.c2s.fnv1a! });
  t.deepEqual(fnv1a(s2c), { n: tr.s2c.bytes!, h: tr.s2c.fnv1a! });
});

test('o-urgent-stall: cdc.urgent-stall on the stalled connection only; urgent bytes marked where the guests sent them', async (t) => {
  const tk = await track('o-urgent-stall');
  const ds = diagnose(tk);
  const us = ds.filter((d) => d.code === 'cdc.urgent-stall');
  t.is(us.length, 1);
  t.is(us[0]!.conn, 2);
  t.regex(us[0]!.message, /urgent byte at stream offset 61/);
  const [ok, stalled] = truth('o-urgent-stall').connections;
  const tf = await track('o-urgent-stall', `${ok!.client}-${ok!.server}`);
  const s = tf.followedTcp()!.smc!;
  t.deepEqual(s.dirs[0].stream!.urgent, ok!.c2s.urgent_bytes!.map((u) => u.offset));
  t.deepEqual(s.dirs[1].stream!.urgent, ok!.s2c.urgent_bytes!.map((u) => u.offset));
  const [c2s, s2c] = streams(tf);
  t.deepEqual(fnv1a(c2s), { n: ok!.c2s.stream_bytes!, h: ok!.c2s.stream_fnv1a! });
  t.deepEqual(fnv1a(s2c), { n: ok!.s2c.stream_bytes!, h: ok!.s2c.stream_fnv1a! });
  const ts = await track('o-urgent-stall', `${stalled!.client}-${stalled!.server}`);
  t.deepEqual(ts.followedTcp()!.smc!.dirs[0].stream!.urgent, [61]);
});

test('p-window-stall: cdc.window-stall on the blocked direction with the pause the guest made, bytes exact', async (t) => {
  const tk = await track('p-window-stall');
  const ds = diagnose(tk);
  t.deepEqual(codes(ds, 'error'), []);
  // The receiver paused 5000 ms (guest log): the ring-full write_blocked CDC (frame 402) until the
  // consumer update when it read again (frame 405); the short blocks of the transfer are not stalls.
  const ws = ds.filter((d) => d.code === 'cdc.window-stall');
  t.is(ws.length, 1);
  t.is(ws[0]!.severity, 'warning');
  t.deepEqual([ws[0]!.frames.first, ws[0]!.frames.last], [402, 405]);
  t.regex(ws[0]!.message, /client → server: .* 5\.0 s from frame 402/);
  t.true(tk.tcp[0]!.smc!.dirs[0].writerBlocked >= 15);
  const tr = truth('p-window-stall');
  for (const c of tr.connections) {
    const tf = await track('p-window-stall', `${c.client}-${c.server}`);
    const [c2s, s2c] = streams(tf);
    if (c.c2s.fnv1a) t.deepEqual(fnv1a(c2s), { n: c.c2s.bytes!, h: c.c2s.fnv1a });
    if (c.s2c.fnv1a) t.deepEqual(fnv1a(s2c), { n: c.s2c.bytes!, h: c.s2c.fnv1a });
  }
});

test('g-host-roce-ud: UD traffic of another RDMA application is "RoCE traffic, not SMC-R", not a link group', async (t) => {
  // Guest A ran `ibv_ud_pingpong -s 512 -n 10` against a UD peer on the host (guest log: 10 iters, 10240 bytes).
  const tk = await track('g-host-roce-ud');
  t.is(tk.groups.length, 0);
  const flows = [...tk.otherRoce.values()];
  t.deepEqual(flows.map((f) => [f.transport, f.packets, f.bytes]), [['UD', 10, 5120], ['UD', 10, 5120]]);
  const ds = diagnose(tk);
  t.deepEqual(ds.map((d) => [d.code, d.severity]), [['roce.not-smc', 'info'], ['roce.not-smc', 'info']]);
});
