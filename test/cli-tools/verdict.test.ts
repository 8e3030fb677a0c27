// Verdicts that are true: smcping and smcperf against peers that are not what they expect —
// a plain TCP echo server, an HTTP server, a server that closes at once, nothing at all — each
// a real process on loopback (python3), without the TCP option (no root needed). Also
// smcping -v (each CLC message and LLC exchange, in order, with timings) against smcping -l,
// and the endpoint state view's TCP 4-tuples (smcdump --endpoint).
import test from 'ava';
import { spawn, type ChildProcess } from 'node:child_process';
import { createSocket } from 'node:dgram';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runTool, ServerProc, lastJson } from './run.js';
import { ROOT } from '../helpers.js';

// a /24 of loopback whose RoCE port is free (other suites scan for free pairs too)
let NET = '127.0.89';
let CLI = '', TCP = '', SMC = '';
const UEID = 'SMCSCOPE-VERDICT';
const common = ['--no-tcp-option'];
const dir = mkdtempSync(join(tmpdir(), 'smcscope-verdict-'));

// Python servers, each printing "listening PORT" once bound.
const PY_ECHO = `
import socketserver, sys
class H(socketserver.BaseRequestHandler):
    def handle(self):
        while True:
            d = self.request.recv(65536)
            if not d: break
            self.request.sendall(d)
class S(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True
s = S((sys.argv[1], 0), H)
print('listening', s.server_address[1], flush=True)
s.serve_forever()
`;
// An HTTP-style server that answers the first bytes it gets, whatever they are, and closes.
const PY_HTTP400 = PY_ECHO.replace(/def handle\(self\):[\s\S]*?self\.request\.sendall\(d\)/,
  'def handle(self):\n        if self.request.recv(65536):\n            self.request.sendall(b"HTTP/1.0 400 Bad Request\\r\\nContent-Length: 0\\r\\n\\r\\n")');
const PY_CLOSE = PY_ECHO.replace(/def handle\(self\):[\s\S]*?self\.request\.sendall\(d\)/, 'def handle(self):\n        self.request.close()');

interface Py { proc: ChildProcess; port: number }

function startPy(args: string[], portRe: RegExp): Promise<Py> {
  const proc = spawn('python3', ['-u', ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => { proc.kill('SIGKILL'); reject(new Error(`python3 ${args.join(' ')} did not start: ${out}`)); }, 15_000);
    const look = (d: Buffer): void => {
      out += d;
      const m = portRe.exec(out);
      if (m) { clearTimeout(t); resolve({ proc, port: Number(m[1]) }); }
    };
    proc.stdout!.on('data', look);
    proc.stderr!.on('data', look);
    proc.once('error', (e) => { clearTimeout(t); reject(e); });
  });
}

let echo: Py, http: Py, http400: Py, closer: Py, smcPeer: ServerProc, smcPort = 0;
const ctl = join(dir, 'srv.sock');

function udpFree(addr: string): Promise<boolean> {
  const s = createSocket('udp4');
  return new Promise((resolve) => {
    s.once('error', () => { s.close(); resolve(false); });
    s.bind(4791, addr, () => { s.close(); resolve(true); });
  });
}

test.before(async () => {
  for (let n = 89; n >= 80; n--) {
    NET = `127.0.${n}`;
    if ((await Promise.all([1, 2, 3].map((h) => udpFree(`${NET}.${h}`)))).every(Boolean)) break;
  }
  [CLI, TCP, SMC] = [`${NET}.1`, `${NET}.2`, `${NET}.3`];
  echo = await startPy(['-c', PY_ECHO, TCP], /listening (\d+)/);
  closer = await startPy(['-c', PY_CLOSE, TCP], /listening (\d+)/);
  http400 = await startPy(['-c', PY_HTTP400, TCP], /listening (\d+)/);
  http = await startPy(['-m', 'http.server', '0', '--bind', TCP, '--directory', dir], /port (\d+)/);
  smcPeer = await ServerProc.start('smcping', ['-l', '-b', SMC, '-p', '0', '--ueid', UEID, ...common, '--json', '--control', ctl]);
  smcPort = JSON.parse(smcPeer.out.split('\n')[0]!).port;
});

test.after.always(async () => {
  for (const p of [echo, http, http400, closer]) p?.proc.kill('SIGKILL');
  await smcPeer?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const lastLine = (out: string): string => out.trimEnd().split('\n').pop() ?? '';

test.serial('smcping vs a plain TCP echo server: no SMC on the peer, data echoed intact; exit 0, 1 with --require-smcr', async (t) => {
  const args = [TCP, '-p', String(echo.port), '-b', CLI, ...common, '-c', '3', '-i', '0'];
  const r = await runTool('smcping', args);
  t.is(r.code, 0, r.out + r.err);
  t.regex(lastLine(r.out), /^verdict: TCP fallback: no SMC on the peer \(it echoed our CLC Proposal back: a plain TCP echo server\); we declined with SYNCERR 0x04000000; 3\/3 probes echoed intact over TCP$/);
  t.notRegex(r.out, /WRONG DATA/);
  const strict = await runTool('smcping', [...args, '--require-smcr', '--json']);
  t.is(strict.code, 1, 'SMC required, the peer has none');
  const j = lastJson(strict.out);
  t.like(j, { exitCode: 1, requireSmcr: true, peerSmc: { smc: 'no' }, echo: { sent: 3, intact: 3, wrong: 0 }, verdict: { mode: 'tcp', name: 'SYNCERR', declinedBy: 'local' } });
  t.regex(j.summary, /no SMC on the peer .*; FAIL: SMC-R required \(--require-smcr\)$/);
});

test.serial('smcping vs an HTTP server that answers at once: no SMC on the peer, the peer does not echo; exit 1', async (t) => {
  for (const strict of [[], ['--require-smcr']]) {
    const r = await runTool('smcping', [TCP, '-p', String(http400.port), '-b', CLI, ...common, '-c', '2', '-i', '0', '-W', '1', ...strict]);
    t.is(r.code, 1, r.out + r.err);
    t.regex(lastLine(r.out), /^verdict: TCP fallback: no SMC on the peer \(it answered our CLC Proposal with bytes that are not CLC: "HTTP\/1\.0 400 Bad Request\\r\\nConten…"\); we declined with SYNCERR 0x04000000; /);
    t.notRegex(r.out, /[\x00-\x08\x0e-\x1f\x7f-\x9f\ufffd]/, 'no raw bytes on the terminal');
  }
});

test.serial('smcping vs python3 -m http.server: no SMC on the peer, no echo; exit 1', async (t) => {
  const r = await runTool('smcping', [TCP, '-p', String(http.port), '-b', CLI, ...common, '-c', '2', '-i', '0', '-W', '1']);
  t.is(r.code, 1, r.out + r.err);
  const v = lastLine(r.out);
  // http.server answers once it sees a line end: in our Proposal (non-CLC bytes come back), in a
  // probe (its random time stamp), or never (it waits for the rest of the request line)
  t.regex(v, /^verdict: TCP fallback: no SMC on the peer \((it answered our CLC Proposal with bytes that are not CLC: "(HTTP\/1\.\d|<!DOCTYPE)|no CLC answer to our Proposal within 2000 ms)/);
  t.regex(v, /; (the peer does not echo: it sent "(HTTP\/1\.\d|<!DOCTYPE)(?:[^"\\]|\\.)*" back for our probe|no reply)$/);
  t.notRegex(r.out, /[\x00-\x08\x0e-\x1f\x7f-\x9f\ufffd]/, 'no raw bytes on the terminal');
});

test.serial('smcping vs a server that closes at once: no SMC on the peer, no reply; exit 1', async (t) => {
  const r = await runTool('smcping', [TCP, '-p', String(closer.port), '-b', CLI, ...common, '-c', '2', '-i', '0', '-W', '1', '--json']);
  t.is(r.code, 1, r.out + r.err);
  const j = lastJson(r.out);
  t.like(j, { exitCode: 1, peerSmc: { smc: 'no', why: 'it closed the connection instead of answering our CLC Proposal' }, echo: { intact: 0, wrong: 0 } });
  // the server closed during CLC: no Decline goes out (Linux's connect() fails with ECONNRESET), and smcping says so
  t.regex(j.summary, /^no SMC on the peer \(it closed the connection instead of answering our CLC Proposal\); the connection ended during CLC \(ECONNRESET\), nothing to fall back to; no reply: the peer closed the connection$/);
  t.like(j, { verdict: { mode: 'tcp', failed: 'ECONNRESET' } });
});

test.serial('smcping with nothing listening: connection refused; exit 1', async (t) => {
  const r = await runTool('smcping', [TCP, '-p', '1', '-b', CLI, ...common, '-c', '1']);
  t.is(r.code, 1);
  t.is(lastLine(r.out), `verdict: no connection: connect ${TCP}:1: connection refused (nothing listens there)`);
});

test.serial('smcping -v: CLC Proposal, Accept, Confirm and the CONFIRM LINK exchange, in order, with timings', async (t) => {
  const r = await runTool('smcping', [SMC, '-p', String(smcPort), '-b', CLI, '--ueid', UEID, ...common, '-c', '1', '-v']);
  t.is(r.code, 0, r.out + r.err);
  const lines = r.out.split('\n');
  const trace = lines.filter((l) => /^ +\+\d+\.\d{3} ms {2}(TCP|CLC|LLC)/.test(l));
  const kinds = trace.map((l) => (l.includes('TCP  connected') ? 'TCP connected' : /(CLC[<>]|LLC[<>]) +(?:LG\d+\/L\d+ )?(\S+ \S+)/.exec(l)!.slice(1, 3).join(' ')));
  t.deepEqual(kinds.slice(0, 6), ['TCP connected', 'CLC> Proposal v2', 'CLC< Accept v2', 'CLC> Confirm v2', 'LLC< CONFIRM LINK', 'LLC> CONFIRM LINK'], trace.join('\n'));
  const ms = trace.map((l) => Number(/\+(\d+\.\d{3}) ms/.exec(l)![1]));
  for (let i = 1; i < 6; i++) t.true(ms[i]! >= ms[i - 1]!, `times grow: ${ms.join(' ')}`);
  t.regex(trace[2]!, /first-contact QP 0x[0-9a-f]+ .*\(\d+ bytes\) \(\d+\.\d{3} ms after ours\)$/);
  t.regex(trace[4]!, /LLC< LG\d+\/L1 CONFIRM LINK v2 req link 1 qp 0x[0-9a-f]+/);
  t.regex(trace[5]!, /LLC> LG\d+\/L1 CONFIRM LINK v2 rsp .*\(resp, \d+\.\d{3} ms\)$/);
  // the trace comes between the attempt line and the handshake summary
  const at = lines.findIndex((l) => l.startsWith('attempt 1:'));
  t.is(lines.indexOf(trace[0]!), at + 1);
  t.true(lines.indexOf(trace[5]!) < lines.findIndex((l) => /^ {2}handshake: /.test(l)));
  t.regex(lastLine(r.out), /^verdict: SMC-R v2\.1, link group LG\d+ new \(first contact\).*; 1\/1 probes echoed intact over SMC-R$/);
  // without -v: none of it
  const quiet = await runTool('smcping', [SMC, '-p', String(smcPort), '-b', CLI, '--ueid', UEID, ...common, '-c', '1']);
  t.notRegex(quiet.out, /CLC>|LLC>/);
});

test.serial('smcdump --endpoint: connections with their TCP 4-tuple, like ss', async (t) => {
  const client = runTool('smcping', [SMC, '-p', String(smcPort), '-b', CLI, '--ueid', UEID, ...common, '-c', '30', '-i', '0.1', '-v']);
  // while the client probes, ask the server's endpoint
  let view = '';
  const until = Date.now() + 15_000;
  while (Date.now() < until) {
    await new Promise((r) => setTimeout(r, 300));
    const v = await runNode(['dist/cli/bin/smcdump.js', '--endpoint', ctl, '--summary']);
    if (/Connections/.test(v)) { view = v; break; }
  }
  const r = await client;
  t.is(r.code, 0, r.out + r.err);
  const ends = /TCP {2}connected (127\.0\.\d+\.1:\d+) → (127\.0\.\d+\.3:\d+)/.exec(r.out);
  t.truthy(ends, r.out);
  t.regex(view, /local ↔ peer \(TCP\)/);
  // the server's view: its end first
  t.true(view.includes(`${ends![2]} ↔ ${ends![1]}`), view);
  const json = JSON.parse(await runNode(['dist/cli/bin/smcdump.js', '--endpoint', ctl, '--json'])) as { connections: unknown[]; closedConnections: Array<{ tcp?: { local: string; remote: string } }> };
  t.true(json.closedConnections.some((c) => c.tcp?.local === ends![2] && c.tcp?.remote === ends![1]), 'closed connections keep their 4-tuple');
});

async function runNode(args: string[]): Promise<string> {
  const p = spawn(process.execPath, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, NO_COLOR: '1', COLUMNS: '300' } });
  let out = '';
  p.stdout.on('data', (d: Buffer) => { out += d; });
  await new Promise((r) => p.once('close', r));
  return out;
}

test.serial('smcperf vs peers that are not smcperf servers: one clear line, exit 1, no mojibake', async (t) => {
  const cases: Array<[string, string, number, RegExp]> = [
    ['TCP echo', TCP, echo.port, /peer is not an smcperf server: it echoed our control header back/],
    ['HTTP', TCP, http.port, /peer is not an smcperf server: it answered "(HTTP\/1\.\d|<!DOCTYPE)(?:[^"\\]|\\.)*" to the control header/],
    ['closes at once', TCP, closer.port, /peer is not an smcperf server: it closed the connection instead of answering the control header/],
    ['smcping -l (an SMC-R echo peer)', SMC, smcPort, /peer is not an smcperf server: it echoed our control header back/],
  ];
  for (const [name, host, port, re] of cases) {
    const r = await runTool('smcperf', [host, '-p', String(port), '-b', CLI, '--ueid', UEID, ...common, '-t', '1', '--sizes', '4k,64k']);
    t.is(r.code, 1, `${name}: ${r.out}${r.err}`);
    const failed = r.out.split('\n').filter((l) => /^== /.test(l));
    t.is(failed.length, 1, `${name}: stops after the first run: ${r.out}`);
    t.regex(failed[0]!, re, name);
    t.notRegex(r.out, /[\x00-\x08\x0e-\x1f\x7f-\x9f\ufffd]/, `${name}: printable only`);
  }
});
