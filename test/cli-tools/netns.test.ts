// smcping and smcperf with the real TCP option 254 (eBPF sock_ops, root) inside a network
// namespace of the test's own: smcping sees the option echoed and gets SMC-R; smcperf --tcp runs
// plain TCP first, and the capture (decoded by our own dissector) shows option 254 on the SMC-R
// connections' SYNs and SYN-ACKs but not on the plain TCP ones.
import test from 'ava';
import { Capture, Netns, isRoot, isSyn, isSynAck, smcOption, SMCR_OPTION } from '../native/netns.js';
import { runTool, ServerProc, lastJson } from './run.js';

const UEID = 'SMCSCOPE-CLINETNS';
const root = isRoot ? test.serial : test.serial.skip;

root('smcping and smcperf with the eBPF TCP option in a namespace', async (t) => {
  const ns = Netns.create('clitools');
  const prefix = ns.prefix();
  const servers: ServerProc[] = [];
  try {
    const ping = await ServerProc.start('smcping', ['-l', '-b', '127.0.0.2', '-p', '7001', '--ueid', UEID], prefix);
    servers.push(ping);
    const perf = await ServerProc.start('smcperf', ['-s', '-b', '127.0.0.3', '-p', '7002', '--tcp-port', '7003', '--ueid', UEID], prefix);
    servers.push(perf);
    t.regex(ping.out, /option 254 via eBPF/);
    const cap = await Capture.start(ns, 'tcp');

    const r = await runTool('smcping', ['127.0.0.2', '-p', '7001', '-b', '127.0.0.1', '--ueid', UEID, '-c', '3', '-i', '0', '-a', '2', '--json'], { prefix });
    t.is(r.code, 0, r.err);
    const j = lastJson(r.out);
    t.is(j.tcpOption, 'ebpf');
    for (const a of j.attempts) {
      t.is(a.tcp.option254, 'echoed');
      t.like(a.stats, { sent: 3, received: 3 });
    }
    t.like(j.attempts[0].verdict, { mode: 'smcr', version: 2, release: 1, linkGroupState: 'new' });
    t.like(j.attempts[1].verdict, { mode: 'smcr', linkGroupState: 'reused' });

    const p = await runTool('smcperf', ['127.0.0.3', '-p', '7002', '--tcp-port', '7003', '-b', '127.0.0.1', '--ueid', UEID, '--tcp', '-n', '4m', '--sizes', '64k', '--json'], { prefix });
    t.is(p.code, 0, p.err);
    const runs = lastJson(p.out).runs;
    t.deepEqual(runs.map((x: { transport: string }) => x.transport), ['tcp', 'smcr']);
    t.is(runs[0].connections[0].mode, 'plain-tcp');
    t.like(runs[1].connections[0], { mode: 'smcr', verdict: { mode: 'smcr' } }, JSON.stringify(runs[1].connections[0]));
    for (const x of runs) t.is(x.total.receiverBytes, 4 << 20);

    const frames = await cap.stop();
    const port = (f: (typeof frames)[number]): number => (isSyn(f) ? f.tcp!.dstPort : f.tcp!.srcPort);
    const handshake = frames.filter((f) => isSyn(f) || isSynAck(f));
    const smc = handshake.filter((f) => port(f) === 7001 || port(f) === 7002);
    const plain = handshake.filter((f) => port(f) === 7003);
    t.is(smc.filter(isSyn).length, 3, 'two smcping connections and one smcperf SMC-R connection');
    t.true(smc.every((f) => JSON.stringify(smcOption(f)) === JSON.stringify(SMCR_OPTION)), 'option 254 on every SMC SYN and SYN-ACK');
    t.is(plain.filter(isSyn).length, 1);
    t.true(plain.every((f) => smcOption(f) === undefined), 'no option 254 on the plain TCP run');
    t.log(`smcping rtt avg ${j.attempts[1].stats.avg} ms; smcperf 4 MiB at 64k: TCP ${runs[0].total.megabytesPerSecond} MB/s, SMC-R ${runs[1].total.megabytesPerSecond} MB/s`);
  } finally {
    for (const s of servers) await s.stop();
    ns.destroy();
  }
});
