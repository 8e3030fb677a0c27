// smcping's verdict rules (cli/verdict.ts) on synthetic trace events: which CLC answers mean
// "no SMC on the peer", which mean an SMC peer, and which say nothing about the peer.
import test from 'ava';
import { echoLine, peerSmcOf, printable, TraceFormatter } from '../../cli/lib/verdict.js';
import type { TraceEvent } from '../../endpoint/trace.js';
import type { ClcMessage } from '../../dissectors/wire/clc.js';

const ends = { local: '10.0.0.1:40000', remote: '10.0.0.2:12345' };
const msg = (type: string): TraceEvent => ({ layer: 'clc', dir: 'in', msg: { type, version: 1, length: 52 } as unknown as ClcMessage, ...ends });
const problem = (p: 'not-clc' | 'timeout' | 'closed', head?: string): TraceEvent => ({ layer: 'clc', dir: 'in', problem: p, detail: p === 'timeout' ? '2000 ms' : 'x', ...(head ? { head: Buffer.from(head) } : {}), ...ends });
const local = (code: string) => ({ code, declinedBy: 'local' as const });

test('SMC-R, or a Decline from the peer: the peer speaks SMC', (t) => {
  t.deepEqual(peerSmcOf([], undefined), { smc: 'yes' });
  t.deepEqual(peerSmcOf([msg('decline')], { code: '0x03030008', declinedBy: 'peer' }), { smc: 'yes' });
  t.deepEqual(peerSmcOf([msg('accept')], local('0x030c0000')), { smc: 'yes' }, 'an Accept we refused is still SMC');
});

test('our Proposal back, non-CLC bytes, silence, a close: no SMC on the peer', (t) => {
  t.like(peerSmcOf([msg('proposal')], local('0x04000000')), { smc: 'no', why: 'it echoed our CLC Proposal back: a plain TCP echo server' });
  t.like(peerSmcOf([problem('not-clc', 'SSH-2.0-OpenSSH_9.2\r\n')], local('0x04000000')), { smc: 'no', why: 'it answered our CLC Proposal with bytes that are not CLC: "SSH-2.0-OpenSSH_9.2\\r\\n"' });
  t.like(peerSmcOf([problem('timeout')], local('0x02020000')), { smc: 'no', why: 'no CLC answer to our Proposal within 2000 ms' });
  t.like(peerSmcOf([problem('closed')], local('0x04000000')), { smc: 'no' });
});

test('option 254: missing on the peer\'s SYN-ACK is no SMC; unavailable here says nothing about the peer', (t) => {
  t.like(peerSmcOf([], local('0x03010000'), 'not-echoed'), { smc: 'no', why: 'no TCP option 254 on its SYN-ACK' });
  t.deepEqual(peerSmcOf([], local('0x03010000'), 'unavailable'), { smc: 'unknown' });
  t.deepEqual(peerSmcOf([], local('0x03010000'), 'unknown'), { smc: 'unknown' });
});

test('printable: ASCII as is, the rest escaped, cut with …', (t) => {
  t.is(printable(Buffer.from([0x48, 0x49, 0x0d, 0x0a, 0x00, 0xe2, 0x22, 0x5c])), '"HI\\r\\n\\x00\\xe2\\"\\\\"');
  t.is(printable(Buffer.alloc(40, 0x41), 4), '"AAAA…"');
});

test('echo line: intact, lost, wrong, none', (t) => {
  t.is(echoLine({ sent: 5, intact: 5, wrong: 0 }, 'SMC-R'), '5/5 probes echoed intact over SMC-R');
  t.is(echoLine({ sent: 5, intact: 3, wrong: 0 }, 'TCP'), '3/5 probes echoed intact over TCP, 2 lost');
  t.is(echoLine({ sent: 2, intact: 0, wrong: 1, firstWrong: '"HTTP/1.0"' }, 'TCP'), 'the peer does not echo: it sent "HTTP/1.0" back for our probe');
  t.is(echoLine({ sent: 1, intact: 0, wrong: 0, closed: 'the peer closed the connection' }, 'TCP'), 'no reply: the peer closed the connection');
});

test('-v lines: an answer timed from our message, an LLC response from its request', (t) => {
  const f = new TraceFormatter(0);
  const out = f.line({ layer: 'clc', dir: 'out', msg: { type: 'decline', version: 1, length: 28, outOfSync: false, diagnosis: 0x04000000 } as unknown as ClcMessage, ...ends }, 1);
  t.regex(out, /^ +\+1\.000 ms {2}CLC> Decline v1 .* \(28 bytes\)$/);
  const req = f.line({ layer: 'llc', dir: 'in', linkGroup: 'LG1', link: 1, msg: { kind: 'test_link', type: 7, llcVersion: 1, response: false, userData: new Uint8Array(16) } as never }, 10);
  const rsp = f.line({ layer: 'llc', dir: 'out', linkGroup: 'LG1', link: 1, msg: { kind: 'test_link', type: 7, llcVersion: 1, response: true, userData: new Uint8Array(16) } as never }, 10.5);
  t.regex(req, /LLC< LG1\/L1 TEST LINK v1 req/);
  t.regex(rsp, /LLC> LG1\/L1 TEST LINK v1 rsp .*\(resp, 0\.500 ms\)$/);
});
