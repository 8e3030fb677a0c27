// A server that ends the TCP connection during CLC instead of answering the Proposal (a separate
// python3 process): connect() fails as Linux's does, with ECONNRESET (FIN before the Accept, or
// RST) or EPROTO (FIN inside a truncated Accept) — smc_clc_wait_msg's negative reasons, for which
// af_smc.c sends no Decline and does not fall back. It used to resolve with a "fallback" socket
// whose TCP connection was already gone, after sending a Decline into it.
import test from 'ava';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { connect, closeAll } from '../../endpoint/index.js';
import { UEID } from './peer.js';

const NET = '127.0.92';

// One connection per mode, in order: read the whole Proposal, then
//   fin:       shutdown(SHUT_WR), read to EOF    rst:   RST (SO_LINGER 0) and close
//   truncated: 20 bytes of a 68-byte Accept, shutdown(SHUT_WR), read to EOF
// and print "MODE N" with N the bytes received after the Proposal (a Decline would be 44 or more).
const SERVER = `
import socket, struct, sys
s = socket.socket(); s.bind((sys.argv[1], 0)); s.listen(8)
print(s.getsockname()[1], flush=True)
def readn(c, n):
    b = b''
    while len(b) < n:
        d = c.recv(n - len(b))
        if not d: break
        b += d
    return b
for mode in sys.argv[2:]:
    c, _ = s.accept()
    hdr = readn(c, 8)
    readn(c, struct.unpack('>H', hdr[5:7])[0] - 8)
    if mode == 'rst':
        c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0)); c.close(); print(mode, 0, flush=True); continue
    if mode == 'truncated':
        c.sendall(bytes([0xe2, 0xd4, 0xc3, 0xd9, 0x02, 0x00, 0x44, 0x20]) + bytes(12))
    c.shutdown(socket.SHUT_WR)
    n = 0
    while True:
        d = c.recv(4096)
        if not d: break
        n += len(d)
    c.close(); print(mode, n, flush=True)
`;

async function server(modes: string[]): Promise<{ port: number; proc: ChildProcess; lines: () => string[] }> {
  const proc = spawn('python3', ['-c', SERVER, `${NET}.2`, ...modes], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  proc.stdout!.on('data', (d: Buffer) => { out += d; });
  while (!out.includes('\n')) await once(proc.stdout!, 'data');
  return { port: Number(out.split('\n')[0]), proc, lines: () => out.split('\n').slice(1).filter(Boolean) };
}

const tcpHandles = (): number => process.getActiveResourcesInfo().filter((r) => r === 'TCPSocketWrap').length;

test('connect() fails with ECONNRESET / EPROTO, sends no Decline and leaves no socket, when the server ends the connection during CLC', async (t) => {
  const modes = ['fin', 'rst', 'truncated'];
  const expected = ['ECONNRESET', 'ECONNRESET', 'EPROTO'];
  const srv = await server(modes);
  const logs: string[] = [];
  const handles0 = tcpHandles();
  try {
    for (const [i, mode] of modes.entries()) {
      const t0 = Date.now();
      const e = await t.throwsAsync(connect({
        device: { provider: 'uroce', address: `${NET}.1` }, ueids: [UEID], tcpOption: 'ignore', log: (l) => logs.push(l),
        host: `${NET}.2`, port: srv.port, localAddress: `${NET}.1`,
      }), undefined, mode);
      const ms = Date.now() - t0;
      t.is((e as NodeJS.ErrnoException | undefined)?.code, expected[i], `${mode}: ${e?.message}`);
      t.log(`${mode}: rejected after ${ms} ms: ${e?.message}`);
      t.true(ms < 1500, `${mode}: ${ms} ms (decided by the close, not by the 2 s CLC timeout)`);
    }
    await once(srv.proc, 'close');
    // What the server received after the Proposal: nothing (a Decline would be 44+ bytes).
    t.deepEqual(srv.lines(), modes.map((m) => `${m} 0`));
    t.is(logs.filter((l) => /connect fails with/.test(l)).length, modes.length, logs.join('\n'));
    t.false(logs.some((l) => /declined/.test(l)), logs.join('\n'));
    await new Promise((r) => setTimeout(r, 50));
    t.true(tcpHandles() <= handles0, `TCP handles ${handles0} → ${tcpHandles()}`);
  } finally {
    srv.proc.kill();
    await closeAll();
  }
});
