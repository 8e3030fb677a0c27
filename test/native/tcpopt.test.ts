// TCP option 254 through the eBPF sock_ops program, for real: a network namespace made by this
// test, Node sockets in processes inside it (tcpopt-agent.ts), tcpdump on its lo, every SYN and
// SYN-ACK decoded by the project's own FrameDecoder / TCP codec. Needs root (BPF, netns, cgroup)
// and the built helper (`bash native/bpf/build.sh`); otherwise the tests are skipped with the
// reason in their title.
import test from 'ava';
import { existsSync } from 'node:fs';
import { TcpOptionSignal, TcpOptionError, tcpOptionPaths } from '../../endpoint/tcpopt/index.js';
import { Agent, Capture, Netns, SMCR_OPTION, isRoot, isSyn, isSynAck, run, smcOption, sysTool } from './netns.js';

const haveCommand = (c: string): boolean => sysTool(c) !== undefined;
import type { DecodedFrame } from '../../dissectors/frame.js';

const built = existsSync(tcpOptionPaths().helper) && existsSync(tcpOptionPaths().object);
const tools = ['ip', 'nsenter', 'tcpdump'].filter((c) => !haveCommand(c));
// In CI (root, `npm ci` builds native/bpf) an unbuilt tree is a failure, elsewhere a skip.
const skipWhy = !built && !process.env.CI ? 'native/bpf not built: run `bash native/bpf/build.sh`'
  : !isRoot ? 'needs root (BPF, network namespace, cgroup)'
    : tools.length ? `missing ${tools.join(', ')}` : '';
const real = skipWhy ? test.skip : test.serial;
const title = (s: string): string => (skipWhy ? `${s} (skipped: ${skipWhy})` : s);

let ns: Netns;
let ours: Agent;
let plain: Agent;
let nextPort = 20000;
const port = (): number => nextPort++;

type Res = { role: string; weSent: boolean; peerHad: boolean; synSmc: boolean; done: boolean; synUnknown: boolean } | null | undefined;

test.before(async () => {
  if (skipWhy) return;
  if (!built) throw new Error('native/bpf is not built: run `bash native/bpf/build.sh` (needs clang, gcc, libbpf-dev)');
  ns = Netns.create('tcpopt');
  [ours, plain] = await Promise.all([Agent.spawn(ns), Agent.spawn(ns)]);
  const s = await ours.req('start', { opts: {} });
  if (!s.ok) throw new Error(`start: ${String(s.message)}`);
});

test.after.always(async () => {
  if (skipWhy) return;
  await Promise.all([ours?.exit(), plain?.exit()]);
  ns?.destroy();
});

function handshake(frames: DecodedFrame[], serverPort: number): { syn: DecodedFrame[]; synAck: DecodedFrame[] } {
  return {
    syn: frames.filter((f) => isSyn(f) && f.tcp!.dstPort === serverPort),
    synAck: frames.filter((f) => isSynAck(f) && f.tcp!.srcPort === serverPort),
  };
}

async function accepted(server: Agent, p: number, count = 1): Promise<Array<{ remotePort: number; result: Res; byTuple: Res }>> {
  const r = await server.req('accepted', { port: p, count });
  return r.accepted as Array<{ remotePort: number; result: Res; byTuple: Res }>;
}

for (const [listenHost, connectHost, what] of [
  ['::', '127.0.0.1', 'IPv4 to a dual-stack (::) listener'],
  ['127.0.0.1', '127.0.0.1', 'IPv4'],
  ['::1', '::1', 'IPv6'],
] as const) {
  real(title(`ours -> ours, ${what}: FE 06 E2 D4 C3 D9 on SYN and SYN-ACK, both sides read syn_smc`), async (t) => {
    const p = port();
    const cap = await Capture.start(ns, `tcp port ${p}`);
    t.true((await ours.req('listen', { host: listenHost, port: p })).ok as boolean);
    const c = await ours.req('connect', { host: connectHost, port: p });
    const [srv] = await accepted(ours, p);
    const frames = await cap.stop();
    const h = handshake(frames, p);
    t.is(h.syn.length, 1);
    t.is(h.synAck.length, 1);
    t.deepEqual(smcOption(h.syn[0]!), SMCR_OPTION, 'SYN carries the option (our TCP codec)');
    t.deepEqual(smcOption(h.synAck[0]!), SMCR_OPTION, 'SYN-ACK echoes it');
    t.true(h.syn[0]!.smc.some((i) => i.proto === 'tcpopt'), 'FrameDecoder lists it as an SMC item');
    t.is(h.syn[0]!.ip!.version, connectHost.includes(':') ? 6 : 4);
    // No option after the handshake (the program clears its per-packet callback).
    const later = frames.filter((f) => f.tcp && !f.tcp.flags.syn);
    t.true(later.length > 0 && later.every((f) => smcOption(f) === undefined));
    t.like(c.result as object, { role: 'active', weSent: true, peerHad: true, synSmc: true, done: true });
    t.like(c.byTuple as object, { role: 'active', synSmc: true });
    t.truthy(srv);
    t.like(srv!.result as object, { role: 'passive', weSent: true, peerHad: true, synSmc: true, done: true, synUnknown: false });
    t.like(srv!.byTuple as object, { role: 'passive', synSmc: true });
  });
}

real(title('a plain client gets no option from our listener; the server reads peerHad false'), async (t) => {
  const p = port();
  const cap = await Capture.start(ns, `tcp port ${p}`);
  await ours.req('listen', { host: '::', port: p });
  const c = await plain.req('connect', { host: '127.0.0.1', port: p });
  t.true(c.ok as boolean);
  const [srv] = await accepted(ours, p);
  const h = handshake(await cap.stop(), p);
  t.is(h.syn.length, 1);
  t.is(smcOption(h.syn[0]!), undefined, 'plain SYN has no option');
  t.is(h.synAck.length, 1);
  t.is(smcOption(h.synAck[0]!), undefined, 'so our SYN-ACK does not echo it');
  t.like(srv!.result as object, { role: 'passive', weSent: false, peerHad: false, synSmc: false, done: true });
});

real(title('our client to a plain server: option on the SYN only; the client reads peerHad false'), async (t) => {
  const p = port();
  const cap = await Capture.start(ns, `tcp port ${p}`);
  await plain.req('listen', { host: '::', port: p });
  const c = await ours.req('connect', { host: '::1', port: p });
  const h = handshake(await cap.stop(), p);
  t.deepEqual(smcOption(h.syn[0]!), SMCR_OPTION);
  t.is(smcOption(h.synAck[0]!), undefined);
  t.like(c.result as object, { role: 'active', weSent: true, peerHad: false, synSmc: false, done: true });
});

real(title('a retransmitted SYN-ACK still carries the option (client ACKs dropped by nft)'), async (t) => {
  if (!haveCommand('nft')) { t.fail('nft (nftables) is not installed'); return; }
  const p = port();
  const table = `table inet smcscope_t5 {\n chain input {\n  type filter hook input priority 0; policy accept;\n  tcp dport ${p} tcp flags ! syn drop\n }\n}\n`;
  const add = ns.exec('nft', ['-f', '-'], table);
  t.is(add.status, 0, add.stderr);
  const cap = await Capture.start(ns, `tcp port ${p}`);
  await ours.req('listen', { host: '127.0.0.1', port: p });
  const c = await ours.req('connect', { host: '127.0.0.1', port: p });
  t.like(c.result as object, { role: 'active', synSmc: true });
  await new Promise((r) => setTimeout(r, 2000)); // the first SYN-ACK retransmit comes after ~1 s
  t.is(ns.exec('nft', ['delete', 'table', 'inet', 'smcscope_t5']).status, 0);
  await ours.req('write', { conn: c.conn, data: 'x' }); // completes the handshake on the server
  const [srv] = await accepted(ours, p);
  const frames = await cap.stop();
  const h = handshake(frames, p);
  t.true(h.synAck.length >= 2, `${h.synAck.length} SYN-ACKs: ${frames.map((f) => `${f.tcp?.srcPort}>${f.tcp?.dstPort} ${f.tcp?.flags.syn ? 'S' : ''}${f.tcp?.flags.ack ? '.' : ''} +${(f.tsNs - frames[0]!.tsNs) / 1000000n}ms`).join(', ')}`);
  for (const f of h.synAck) t.deepEqual(smcOption(f), SMCR_OPTION, `SYN-ACK #${f.n}`);
  // The child read the client's SYN from the SYN saved by TCP_SAVE_SYN.
  t.like(srv!.result as object, { role: 'passive', weSent: true, peerHad: true, synSmc: true, synUnknown: false });
});

real(title('port ranges: only listed ports get the option, others are not in scope'), async (t) => {
  const a = await Agent.spawn(ns);
  try {
    const pIn = port();
    const pOut = port();
    const s = await a.req('start', { opts: { localPorts: [pIn], remotePorts: [[pIn, pIn]] } });
    t.true(s.ok as boolean, String(s.message));
    const cap = await Capture.start(ns, `tcp port ${pIn} or tcp port ${pOut}`);
    await a.req('listen', { host: '::', port: pIn });
    await a.req('listen', { host: '::', port: pOut });
    const cin = await a.req('connect', { host: '127.0.0.1', port: pIn });
    const cout = await a.req('connect', { host: '127.0.0.1', port: pOut });
    const [sout] = await accepted(a, pOut);
    const frames = await cap.stop();
    const hin = handshake(frames, pIn);
    const hout = handshake(frames, pOut);
    t.deepEqual(smcOption(hin.syn[0]!), SMCR_OPTION);
    t.deepEqual(smcOption(hin.synAck[0]!), SMCR_OPTION);
    t.is(smcOption(hout.syn[0]!), undefined);
    t.is(smcOption(hout.synAck[0]!), undefined);
    t.like(cin.result as object, { synSmc: true });
    t.is(cout.result, undefined, 'a connect outside the range has no result');
    t.is(sout!.result, undefined, 'a listener outside the range has no result');
  } finally { await a.exit(); }
});

real(title('syncookies (tcp_syncookies=2): no echo by default; with syncookieEcho the option is echoed'), async (t) => {
  t.is(ns.exec('sysctl', ['-qw', 'net.ipv4.tcp_syncookies=2']).status, 0);
  const echo = await Agent.spawn(ns);
  try {
    t.true((await echo.req('start', { opts: { syncookieEcho: true } })).ok as boolean);
    const p1 = port();
    const p2 = port();
    const cap = await Capture.start(ns, `tcp port ${p1} or tcp port ${p2}`);
    await ours.req('listen', { host: '127.0.0.1', port: p1 });
    await echo.req('listen', { host: '127.0.0.1', port: p2 });
    const c1 = await ours.req('connect', { host: '127.0.0.1', port: p1 });
    const c2 = await ours.req('connect', { host: '127.0.0.1', port: p2 });
    const [s1] = await accepted(ours, p1);
    const [s2] = await accepted(echo, p2);
    const frames = await cap.stop();
    const h1 = handshake(frames, p1);
    const h2 = handshake(frames, p2);
    t.deepEqual(smcOption(h1.syn[0]!), SMCR_OPTION);
    t.is(smcOption(h1.synAck[0]!), undefined, 'default: no echo on a cookie SYN-ACK');
    t.like(c1.result as object, { peerHad: false, synSmc: false });
    t.like(s1!.result as object, { role: 'passive', weSent: false, synSmc: false, synUnknown: true });
    t.deepEqual(smcOption(h2.synAck[0]!), SMCR_OPTION, 'syncookieEcho: echoed');
    t.like(c2.result as object, { synSmc: true });
    t.like(s2!.result as object, { role: 'passive', weSent: true, peerHad: true, synSmc: true, synUnknown: true });
    const st = (await echo.req('stats')).stats as Record<string, number>;
    t.true(st.synAckCookie! >= 1);
  } finally {
    ns.exec('sysctl', ['-qw', 'net.ipv4.tcp_syncookies=1']);
    await echo.exit();
  }
});

real(title('clean detach: after close() SYNs carry no option and the cgroup is gone; killing the process detaches too'), async (t) => {
  const a = await Agent.spawn(ns);
  const s = await a.req('start', { opts: {} });
  const info = s.info as { cgroup: string; progId: number };
  t.true(existsSync(info.cgroup));
  const p = port();
  await plain.req('listen', { host: '127.0.0.1', port: p });
  const cap = await Capture.start(ns, `tcp port ${p}`);
  const before = await a.req('connect', { host: '127.0.0.1', port: p });
  t.like(before.result as object, { weSent: true });
  t.true((await a.req('close')).ok as boolean);
  const after = await a.req('connect', { host: '127.0.0.1', port: p });
  const h = handshake(await cap.stop(), p);
  t.is(h.syn.length, 2);
  t.deepEqual(smcOption(h.syn[0]!), SMCR_OPTION);
  t.is(smcOption(h.syn[1]!), undefined, 'no option once detached');
  t.true(after.ok as boolean);
  t.false(existsSync(info.cgroup), 'our cgroup was removed');
  t.not(run('bpftool', ['prog', 'show', 'id', String(info.progId)]).status, 0, 'program unloaded');
  await a.exit();

  // SIGKILL of the Node process: the helper sees EOF on its pipe and cleans up.
  const b = await Agent.spawn(ns);
  const sb = await b.req('start', { opts: {} });
  const ib = sb.info as { cgroup: string; progId: number };
  t.true(existsSync(ib.cgroup));
  await b.kill();
  // A deadline in time, not in polls (a bpftool run takes long on a loaded machine). This once
  // failed when the kill came right after READY, before the helper had its SIGTERM handler.
  const deadline = Date.now() + 20_000;
  let cgroupGone = false;
  let progGone = false;
  while (!(cgroupGone && progGone) && Date.now() < deadline) {
    cgroupGone ||= !existsSync(ib.cgroup);
    progGone ||= cgroupGone && run('bpftool', ['prog', 'show', 'id', String(ib.progId)]).status !== 0;
    if (!(cgroupGone && progGone)) await new Promise((r) => setTimeout(r, 100));
  }
  t.true(cgroupGone, 'our cgroup was removed after the Node process was killed');
  t.true(progGone, 'the program was unloaded after the Node process was killed');
});

real(title('conflict: an exclusive sock_ops program on the cgroup -> TcpOptionError conflict, one line'), async (t) => {
  if (!haveCommand('bpftool')) { t.fail('bpftool is not installed'); return; }
  const cg = `/sys/fs/cgroup/unified/smcscope-t5-conflict-${process.pid}`;
  // Load our own object with bpftool into a private bpffs and attach it WITHOUT multi.
  const script = [
    'set -e', `mkdir -p ${cg}`, 'd=$(mktemp -d)', 'mount -t bpf bpf "$d"',
    `bpftool prog load ${tcpOptionPaths().object} "$d/p" type sockops`,
    `bpftool cgroup attach ${cg} sock_ops pinned "$d/p"`,
    'bpftool prog show pinned "$d/p" | head -1 | cut -d: -f1', 'umount "$d"; rmdir "$d"',
  ].join('\n');
  const r = run('unshare', ['-m', 'sh', '-c', script]);
  if (r.status !== 0) { t.fail(`could not attach the exclusive program: ${r.stderr}`); return; }
  const id = r.stdout.trim();
  try {
    const e = await t.throwsAsync(TcpOptionSignal.start({ cgroup: cg }), { instanceOf: TcpOptionError });
    t.is(e!.code, 'conflict');
    t.false(e!.message.includes('\n'));
    t.regex(e!.message, /another sock_ops program/);
  } finally {
    run('bpftool', ['cgroup', 'detach', cg, 'sock_ops', 'id', id]);
    run('rmdir', [cg]);
  }
});

const privTest = built || process.env.CI ? test : test.skip;
privTest(title('no privilege: TcpOptionError no_permission with one clear line; tryStart falls back to null'), async (t) => {
  // As root, drop to nobody for the helper; as a normal user the helper simply has no privilege.
  const wrapper = isRoot ? ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups', '--inh-caps=-all'] : [];
  if (isRoot && !haveCommand('setpriv')) { t.fail('setpriv (util-linux) missing'); return; }
  const e = await t.throwsAsync(TcpOptionSignal.start({ wrapper }), { instanceOf: TcpOptionError });
  t.is(e!.code, 'no_permission', e!.message);
  t.false(e!.message.includes('\n'));
  t.regex(e!.message, /^TCP option 254 unavailable \(no_permission\): .*CAP_BPF/);
  const lines: string[] = [];
  t.is(await TcpOptionSignal.tryStart({ wrapper }, (l) => lines.push(l)), null);
  t.is(lines.length, 1);
  t.regex(lines[0]!, /^SMC-R disabled, using TCP: /);
  const p = await TcpOptionSignal.probe({ wrapper });
  t.false(p.ok);
});

test('argument validation: bad port ranges are a usage error before anything runs', async (t) => {
  for (const bad of [[0], [[10, 5]], [70000], [1.5]] as const) {
    const e = await t.throwsAsync(TcpOptionSignal.start({ localPorts: bad as never, helperPath: process.execPath }), { instanceOf: TcpOptionError });
    t.is(e!.code, 'usage');
  }
  const e = await t.throwsAsync(TcpOptionSignal.start({ helperPath: '/nonexistent/smcr-helper' }), { instanceOf: TcpOptionError });
  t.is(e!.code, 'no_helper');
  t.regex(e!.message, /native\/bpf\/build\.sh/);
});
