// Verbs conformance, part 4: what goes on the wire is valid RoCEv2. Two captures of the same
// kind of loopback traffic are decoded with the project's FrameDecoder (ICRC checked by the
// analyzer, independently of the engine):
//   * the engine's own tap (every packet sent and received, written with capture/writer.ts);
//   * tcpdump on lo (root only): the packets as the kernel really sent them, which proves the
//     ICRC the engine computes matches the IP header the kernel builds (IP ID, lengths, ports).
import test from 'ava';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Access, Mtu, SendFlags, WrOpcode, type Device } from '../../endpoint/verbs/index.js';
import { PcapWriter, MemorySink } from '../../capture/writer.js';
import { readCaptureBuffer } from '../../capture/reader.js';
import { FrameDecoder, type DecodedFrame } from '../../dissectors/frame.js';
import { opcodeInfo } from '../../dissectors/wire/ib.js';
import { PROVIDERS, openPair, connectPair, collect } from './harness.js';
import { transfer, stream } from './transfer.js';
import { openUroce, type UroceDevice } from '../../endpoint/verbs/uroce/index.js';

function decodeAll(bytes: Uint8Array): DecodedFrame[] {
  const r = readCaptureBuffer(bytes, { reuseFrame: false });
  const d = new FrameDecoder();
  const out: DecodedFrame[] = [];
  for (let f = r.next(); f; f = r.next()) out.push(d.decode(f));
  return out;
}

/**
 * Issues of the link/IP/UDP/RoCE layers. The SMC-R layers (LLC, CDC, CLC) are left out on
 * purpose: the analyzer reads every SEND as a possible LLC/CDC message, and this test's
 * payloads are random bytes, not SMC-R.
 */
function transportIssues(f: DecodedFrame): string[] {
  return f.issues.filter((i) => !/^(llc|cdc|clc|smc)\./.test(i.code)).map((i) => `${i.code}: ${i.message}`);
}

/** Traffic with every packet type the engine makes: SEND/WRITE first/middle/last/only, immediates, ACK, NAK, RNR NAK. */
async function traffic(a: Device, b: Device, loss: boolean, P: (typeof PROVIDERS)[number]): Promise<void> {
  const { A, B } = connectPair(a, b, { mtu: Mtu.MTU_1024, minRnrTimer: 1, timeout: 12 });
  for (const [op, n] of [['send', 5000], ['write', 70_000], ['send_imm', 1], ['write_imm', 2048], ['write_imm', 100], ['write', 10], ['send', 0]] as const) await transfer(A, B, op, n, n + 1);
  if (loss && P.setFaults) {
    // lose some RDMA WRITE MIDDLE packets: sequence NAKs and go-back-N retransmissions in the
    // capture. Only WRITEs here: a retransmitted multi-packet SEND looks to the analyzer like a
    // SEND restarted in the middle of another one, which it (rightly) reports.
    P.setFaults(a, { seed: 3, loss: 0.05, filter: (op) => op === 0x07 });
    await stream(A, B, { writeBytes: 512 << 10, sends: [], seed: 5 });
    P.setFaults(a, undefined);
  }
  A.qp.destroy(); B.qp.destroy();
  // RNR NAK: the receive is posted late
  const { A: A2, B: B2 } = connectPair(a, b, { minRnrTimer: 1, timeout: 16 });
  const m = B2.pd.regMr(new Uint8Array(16), Access.LOCAL_WRITE);
  A2.qp.postSend({ wrId: 1, opcode: WrOpcode.SEND, sgList: [], sendFlags: SendFlags.SIGNALED });
  await new Promise((r) => setTimeout(r, 20));
  B2.qp.postRecv({ wrId: 1, sgList: [m.sge()] });
  await collect(A2.cq, 1);
  await collect(B2.cq, 1);
  await transfer(A2, B2, 'write', 65536, 3); // path MTU 4096 packets too
  A2.qp.destroy(); B2.qp.destroy();
}

for (const P of PROVIDERS) {
  if (!P.capture) continue;
  let a: Device, b: Device;
  test.before(async () => { [a, b] = await openPair(P, ['127.0.0.7', '127.0.0.8']); });
  test.after.always(async () => { await a?.close(); await b?.close(); });

  test.serial(`${P.name}: the engine's own tap decodes in FrameDecoder: valid ICRC, no issues`, async (t) => {
    const sink = new MemorySink();
    const w = new PcapWriter(sink, { nanosecond: true });
    const detach = P.capture!(a, w); // everything a sent and received
    try { await traffic(a, b, true, P); } finally { detach(); w.close(); }
    const frames = decodeAll(sink.toBytes());
    t.true(frames.length > 200, `${frames.length} frames`);
    const ops = new Set<string>();
    for (const f of frames) {
      t.truthy(f.roce, `frame ${f.n} is RoCEv2`);
      t.is(f.roce?.icrc, 'ok', `frame ${f.n} ICRC`);
      t.deepEqual(transportIssues(f), [], `frame ${f.n} has no issues`);
      if (f.roce) {
        const a0 = f.roce.ib.aeth;
        ops.add(a0 && (f.roce.ib.bth.opcode === 0x11) ? a0.kind : opcodeInfo(f.roce.ib.bth.opcode).name);
      }
    }
    for (const op of ['SEND FIRST', 'SEND MIDDLE', 'SEND LAST', 'SEND ONLY', 'SEND ONLY WITH IMMEDIATE', 'RDMA WRITE FIRST', 'RDMA WRITE MIDDLE', 'RDMA WRITE LAST', 'RDMA WRITE ONLY', 'RDMA WRITE LAST WITH IMMEDIATE', 'RDMA WRITE ONLY WITH IMMEDIATE', 'ACK', 'NAK', 'RNR NAK']) {
      t.true(ops.has(op), `capture contains ${op}`);
    }
  });

  const root = process.getuid?.() === 0;
  const haveTcpdump = spawnSync('sh', ['-c', 'command -v tcpdump'], { stdio: 'ignore' }).status === 0;
  (root && haveTcpdump ? test.serial : test.serial.skip)(`${P.name}: tcpdump on lo: the packets the kernel sent carry a valid ICRC`, async (t) => {
    // With GSO (opt-in, gso.test.ts) tcpdump on lo would show one super-datagram per run of
    // packets, as it shows TSO super-segments of TCP: this test looks at packets as a wire
    // carries them, so its pair has GSO off explicitly, whatever UROCE_GSO says.
    let a: Device, b: Device;
    if (P.name === 'uroce') {
      [a, b] = await openPair({ ...P, open: (address, o) => openUroce({ address, ...o, gso: false }) }, ['127.0.0.9', '127.0.0.10']);
      t.true((a as UroceDevice).engine.exactIcrc, `socket helper loaded (${(a as UroceDevice).engine.icrcNote})`);
    } else [a, b] = await openPair(P, ['127.0.0.9', '127.0.0.10']);
    t.teardown(async () => { await a.close(); await b.close(); });
    const dir = mkdtempSync(join(tmpdir(), 'uroce-cap-'));
    const file = join(dir, 'lo.pcap');
    const addr = (a as UroceDevice).address ?? '127.0.0.7';
    const c0 = P.counters?.(a);
    const td = spawn('tcpdump', ['-i', 'lo', '--immediate-mode', '-U', '-s', '8192', '-B', '32768', '-w', file, `udp port 4791 and host ${addr}`], { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    try {
      await new Promise<void>((res, rej) => {
        td.stderr.on('data', (d: Buffer) => { err += d.toString(); if (err.includes('listening on')) res(); });
        td.once('exit', (c) => rej(new Error(`tcpdump exited ${c}: ${err}`)));
      });
      await new Promise((r) => setTimeout(r, 200));
      await traffic(a, b, false, P);
      await new Promise((r) => setTimeout(r, 500));
    } finally {
      const done = new Promise((r) => td.once('exit', r));
      td.kill('SIGINT');
      await done;
    }
    const raw = new Uint8Array(readFileSync(file));
    const c1 = P.counters?.(a);
    const expected = c0 && c1 ? (c1.txPackets! - c0.txPackets!) + (c1.rxPackets! - c0.rxPackets!) : 0;
    t.log(`tcpdump -i lo 'udp port 4791 and host ${addr}': ${raw.length} bytes; the engine sent+received ${expected} packets; tcpdump: ${err.replace(/\s+/g, ' ').trim()}`);
    const frames = decodeAll(raw);
    rmSync(dir, { recursive: true, force: true });
    t.true(frames.length > 100, `${frames.length} frames captured`);
    t.is(frames.length, expected, 'tcpdump saw every packet the engine sent and received');
    let ok = 0;
    for (const f of frames) {
      t.is(f.roce?.icrc, 'ok', `frame ${f.n} ICRC on the wire`);
      t.deepEqual(transportIssues(f), [], `frame ${f.n} has no issues`);
      if (f.roce?.icrc === 'ok') ok++;
      const ip = f.ip?.header as { id?: number; dontFragment?: boolean } | undefined;
      t.is(ip?.id, 0, 'IP ID 0 (PMTUDISC_DO)');
      t.true(ip?.dontFragment, 'DF');
    }
    t.log(`${ok}/${frames.length} frames captured on lo have a valid ICRC`);
  });
}
