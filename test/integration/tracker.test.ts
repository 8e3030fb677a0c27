// Correlation on the real kernel captures: the state rebuilt from the wire must match the guests'
// own view (smc_diag / netlink in the logs), --follow must return exactly the application bytes
// (checked by the FNV-1a the guests logged), and faults injected into copies of the captures
// must raise exactly the anomaly they cause.
import test from 'ava';
import { FrameDecoder } from '../../dissectors/frame.js';
import { Tracker } from '../../dissectors/tracker/tracker.js';
import type { Anomaly } from '../../dissectors/tracker/model.js';
import { cloneFrame, type CapturedFrame } from '../../capture/types.js';
import { writeIcrc } from '../../dissectors/wire/ib.js';
import { put24, put32, u24 } from '../../dissectors/wire/common.js';
import { KERNEL_CAPTURES, pcapPath, readFrames } from '../helpers.js';

function track(frames: CapturedFrame[], follow?: number): Tracker {
  const dec = new FrameDecoder();
  const t = new Tracker(follow !== undefined ? { follow } : {});
  for (const f of frames) t.feed(dec.decode(f));
  t.finish();
  return t;
}

async function trackCapture(name: string, follow?: number): Promise<Tracker> {
  return track(await readFrames(pcapPath(name)), follow);
}

function fnv1a(chunks: Uint8Array[]): string {
  let h = 0x811c9dc5;
  for (const c of chunks) for (const b of c) { h ^= b; h = Math.imul(h, 0x01000193) >>> 0; }
  return h.toString(16).padStart(8, '0');
}

function followed(t: Tracker, dir: 0 | 1): { bytes: Uint8Array[]; missing: number } {
  const s = t.followed()!.dirs[dir].stream!;
  return { bytes: s.chunks.map((c) => c.bytes), missing: s.missing.length };
}

const codes = (as: Anomaly[]): string[] => [...new Set(as.map((a) => a.code))].sort();

test('a-first-contact: one link group, one link, one connection, as smc_diag shows it', async (t) => {
  const tr = await trackCapture('a-first-contact', 1);
  t.is(tr.groups.length, 1);
  const lg = tr.groups[0]!;
  // Guest A netlink: role CLIENT, type SINGLE, v2_rel 1, negotiated_eid SMC-LAB-UEID, max_conns 255, max_links 2,
  // peer_host guestb; link_id 1, state ACTIVE, uid/peer_uid 16842752 (bytes 00 00 01 01).
  t.is(lg.ueid, 'SMC-LAB-UEID');
  t.is(lg.release, 1);
  t.is(lg.maxConns, 255);
  t.is(lg.maxLinks, 2);
  t.is(lg.serverHost, 'guestb');
  t.is(lg.clientHost, 'guesta');
  t.is(lg.links.length, 1, 'the rejected ADD LINK leaves one link');
  const l = lg.links[0]!;
  t.is(l.id, 1);
  t.is(l.state, 'active');
  t.is(l.uid, 0x00000101);
  t.deepEqual(l.ends.map((e) => [e.gid, e.qpn]), [['::ffff:10.55.0.1', 0x11], ['::ffff:10.55.0.2', 0x11]]);
  t.is(tr.tcp.length, 1);
  const c = tr.tcp[0]!;
  t.is(c.mode, 'smc-r');
  t.deepEqual(c.steps.map((s) => s.name), ['SYN', 'SYN-ACK', 'Proposal', 'Accept', 'Confirm', 'CONFIRM LINK']);
  // smc_diag conninfo: token=0x1 sndbuf=65536 rmbe=65536 peer_rmbe=65536.
  t.deepEqual(c.smc!.sides.map((s) => [s.token, s.rmbeSize]), [[1, 65536], [1, 65536]]);
  t.deepEqual(tr.anomalies, []);
});

test('--follow a-first-contact: exactly the known payload and the reply', async (t) => {
  const tr = await trackCapture('a-first-contact', 1);
  const up = followed(tr, 0), down = followed(tr, 1);
  t.is(Buffer.concat(up.bytes).toString(), 'SMC-R lab first contact: hello from guest A 0123456789');
  t.is(fnv1a(up.bytes), 'b5ca2d80'); // guest B: received 54 bytes fnv1a=b5ca2d80
  t.is(Buffer.concat(down.bytes).toString(), 'ACK 54 fnv1a=b5ca2d80\n');
  t.is(up.missing + down.missing, 0);
});

test('--follow d-bulk-2MiB: 2 MiB + 123 bytes through the 64 KiB ring, FNV-1a as logged', async (t) => {
  const tr = await trackCapture('d-bulk-2MiB', 1);
  const up = followed(tr, 0);
  t.is(up.bytes.reduce((n, b) => n + b.length, 0), 2 * 1024 * 1024 + 123);
  t.is(fnv1a(up.bytes), 'a1a83141'); // guest A: sent 2097275 bytes fnv1a=a1a83141
  t.is(up.missing, 0);
  const s = tr.tcp[0]!.smc!;
  t.true(s.dirs[0].writerBlocked > 0, 'writer-blocked episodes seen');
  t.is(s.dirs[0].prodLinear, 2097275);
  t.deepEqual(tr.anomalies, []);
});

test('b-second-contact: four connections on one link group, each stream as logged', async (t) => {
  const tr = await trackCapture('b-second-contact');
  t.is(tr.groups.length, 1);
  t.is(tr.groups[0]!.conns.length, 4);
  t.deepEqual(tr.tcp.map((c) => c.smc?.sides[1].token), [1, 2, 3, 4]);
  t.deepEqual(tr.tcp.map((c) => c.steps.some((s) => s.name === 'CONFIRM LINK')), [true, false, false, false]);
  // guest B: conn n received … fnv1a=…
  const want = ['1145fe89', '60fccd24', 'a2a1645f', '76100836'];
  for (let i = 1; i <= 4; i++) {
    const one = await trackCapture('b-second-contact', i);
    t.is(fnv1a(followed(one, 0).bytes), want[i - 1]!, `connection ${i}`);
  }
  t.deepEqual(tr.anomalies, []);
});

test('fallbacks are explained in one sentence', async (t) => {
  const c1 = (await trackCapture('c1-fallback-tcp-server')).tcp[0]!;
  t.is(c1.mode, 'fallback');
  t.regex(c1.why!, /SYN-ACK lacked option 254.*PEERNOSMC/);
  const c2 = (await trackCapture('c2-fallback-server-decline')).tcp[0]!;
  t.is(c2.mode, 'fallback');
  t.is(c2.why, 'server declined 0x03030000 NOSMCDEV: no SMC device found, R or D; client offered SMC-LAB-UEID');
});

test('clean captures raise no anomaly (e: only the RC retransmissions of the unanswered DELETE LINK)', async (t) => {
  for (const name of KERNEL_CAPTURES) {
    const tr = await trackCapture(name);
    const allowed = name === 'e-testlink-teardown' ? ['roce.retransmission'] : [];
    t.deepEqual(codes(tr.anomalies).filter((c) => !allowed.includes(c)), [], name);
  }
  const e = await trackCapture('e-testlink-teardown');
  t.is(e.groups[0]!.state, 'terminated');
  t.true(e.groups[0]!.links.every((l) => l.state === 'deleted'));
});

// ---- fault injection on copies of the real captures ----

/** Frame numbers (1-based) of RoCE frames matching a predicate on the decoded frame. */
async function find(name: string, pred: (d: ReturnType<FrameDecoder['decode']>) => boolean): Promise<{ frames: CapturedFrame[]; hits: number[] }> {
  const frames = await readFrames(pcapPath(name));
  const dec = new FrameDecoder();
  const hits: number[] = [];
  frames.forEach((f, i) => { if (pred(dec.decode(f))) hits.push(i + 1); });
  return { frames, hits };
}

const ETH = 14, BTH = 14 + 20 + 8; // RoCEv2/IPv4 offsets in these captures

test('fault: one CDC dropped from the capture → CDC sequence gap (and the PSN gap it leaves)', async (t) => {
  const { frames, hits } = await find('d-bulk-2MiB', (d) => d.smc.some((i) => i.proto === 'cdc') && d.ip?.src === '10.55.0.1');
  const drop = hits[Math.floor(hits.length / 2)]!;
  const tr = track(frames.filter((_, i) => i + 1 !== drop));
  t.deepEqual(codes(tr.anomalies), ['cdc.seq-gap', 'roce.psn-gap']);
});

test('fault: a corrupted consumer cursor → consumer beyond producer', async (t) => {
  const { frames, hits } = await find('a-first-contact', (d) => d.smc.some((i) => i.proto === 'cdc') && d.ip?.src === '10.55.0.2');
  const f = cloneFrame(frames[hits[0]! - 1]!);
  const cdc = BTH + 12;
  put32(f.data, cdc + 16 + 4, 60000); // consumer cursor count (A's data B consumed): far beyond 54
  writeIcrc(f.data, ETH, 'v2');
  frames[hits[0]! - 1] = f;
  const tr = track(frames);
  t.deepEqual(codes(tr.anomalies), ['cdc.cons-beyond-prod']);
});

test('fault: a duplicated RDMA WRITE → retransmission, data placed once', async (t) => {
  const { frames, hits } = await find('d-bulk-2MiB', (d) => d.roce?.ib.bth.opcode === 0x07);
  const i = hits[100]! - 1;
  frames.splice(i + 1, 0, cloneFrame(frames[i]!));
  const tr = track(frames, 1);
  t.deepEqual(codes(tr.anomalies), ['roce.retransmission']);
  t.is(tr.anomalies[0]!.conn, 1, 'attributed to its connection');
  t.is(tr.anomalies[0]!.link, 'LG1/L1');
  t.is(fnv1a(followed(tr, 0).bytes), 'a1a83141');
});

test('fault: CONFIRM LINK response never sent → LLC request without response', async (t) => {
  const { frames, hits } = await find('a-first-contact', (d) => d.smc.some((i) => i.proto === 'llc' && i.value.kind === 'confirm_link' && i.value.response));
  const gone = hits[0]!;
  // The client never sent it: later client PSNs on that QP are one lower.
  const dec = new FrameDecoder();
  const out: CapturedFrame[] = [];
  frames.forEach((f, i) => {
    if (i + 1 === gone) return;
    const d = dec.decode(f);
    if (i + 1 > gone && d.roce && d.ip?.src === '10.55.0.1' && d.roce.ib.bth.opcode !== 0x11) {
      const c = cloneFrame(f);
      put24(c.data, BTH + 9, (u24(c.data, BTH + 9) - 1) & 0xffffff);
      writeIcrc(c.data, ETH, 'v2');
      out.push(c);
    } else out.push(f);
  });
  const tr = track(out);
  t.deepEqual(codes(tr.anomalies), ['llc.no-response']);
  t.is(tr.groups[0]!.links[0]!.state, 'confirming');
});

test('fault: the capture\'s first half cut → link learned mid-stream, nothing guessed, nothing flagged', async (t) => {
  const frames = await readFrames(pcapPath('d-bulk-2MiB'));
  const tr = track(frames.slice(Math.floor(frames.length / 2)));
  t.deepEqual(codes(tr.anomalies), ['track.midstream']);
  t.is(tr.groups.length, 1);
  t.false(tr.groups[0]!.complete);
  t.is(tr.orphanConns.length, 1, 'the connection is known by its tokens only');
  t.is(tr.orphanConns[0]!.dirs[0].ringSize, 0, 'ring size unknown, not guessed');
});

test('fault: a corrupted byte without fixing the ICRC → the ICRC anomaly only', async (t) => {
  const frames = await readFrames(pcapPath('a-first-contact'));
  const f = cloneFrame(frames[19]!); // the RDMA WRITE of the 54-byte payload
  f.data[f.data.length - 10]! ^= 0x40; // a payload byte: nothing but the ICRC can tell
  frames[19] = f;
  t.deepEqual(codes(track(frames).anomalies), ['ib.icrc']);
});

test('fault: an RDMA WRITE with a foreign rkey and one beyond the RMB', async (t) => {
  const { frames, hits } = await find('a-first-contact', (d) => d.roce?.ib.bth.opcode === 0x0a && d.ip?.src === '10.55.0.1');
  const bad = cloneFrame(frames[hits[0]! - 1]!);
  put32(bad.data, BTH + 12 + 8, 0x12345); // RETH rkey
  writeIcrc(bad.data, ETH, 'v2');
  const t1 = track(frames.map((f, i) => (i + 1 === hits[0] ? bad : f)));
  t.deepEqual(codes(t1.anomalies), ['rdma.unknown-rkey']);
  const far = cloneFrame(frames[hits[0]! - 1]!);
  put32(far.data, BTH + 12 + 4, 65536 - 10); // low word of the VA: offset 65526 + 54 bytes > 64 KiB
  writeIcrc(far.data, ETH, 'v2');
  const t2 = track(frames.map((f, i) => (i + 1 === hits[0] ? far : f)));
  t.true(codes(t2.anomalies).includes('rdma.out-of-bounds'));
});

test('tracking state stays bounded on a long replay (20 × the bulk capture)', async (t) => {
  const frames = await readFrames(pcapPath('d-bulk-2MiB'));
  const dec = new FrameDecoder();
  const tr = new Tracker();
  const heap = (): number => { global.gc?.(); return process.memoryUsage().heapUsed; };
  const before = heap();
  for (let r = 0; r < 20; r++) for (const f of frames) tr.feed(dec.decode(f));
  const grown = heap() - before;
  t.is(tr.tcp.length, 20);
  t.is(tr.groups.length, 20);
  // 20 × 2 MiB of RDMA data went through; without --follow none of it may be kept.
  t.true(grown < 16 * 1024 * 1024, `heap grew ${grown} bytes`);
  t.log(`heap growth over ${20 * frames.length} frames: ${(grown / 1024).toFixed(0)} KiB`);
});
