// Negative interop: a peer that sends malformed LLC and CDC messages (built with our own
// encoders, fields broken on purpose, and raw junk) over a real RC link. The endpoint must
// answer what the protocol answers, never crash, never write outside a buffer, and every
// connection not targeted keeps working.
import test from 'ava';
import { createHash, randomBytes } from 'node:crypto';
import { openStacks, tcpPair, addrOf } from './stacks.js';
import { encodeLlc, llcTypeByte, LlcCode, type LlcMessage } from '../../dissectors/wire/llc.js';
import { encodeCdc, makeCdc } from '../../dissectors/wire/cdc.js';
import type { Established } from '../../endpoint/clc/handshake.js';
import type { CdcConnection } from '../../endpoint/cdc/connection.js';
import type { SmcStack } from '../../endpoint/stack.js';

const UEID = 'SMCSCOPE-HOSTILE';

async function conn(a: SmcStack, b: SmcStack): Promise<[Established, Established, () => void]> {
  const [c, s, srv] = await tcpPair(addrOf(a), addrOf(b));
  const [rc, rs] = await Promise.all([a.handshake('client', c), b.handshake('server', s)]);
  if (rc.mode !== 'smcr' || rs.mode !== 'smcr') throw new Error(`no SMC-R: ${rc.mode === 'tcp' ? rc.reason : ''} ${rs.mode === 'tcp' ? rs.reason : ''}`);
  return [rc, rs, () => { c.destroy(); s.destroy(); srv.close(); }];
}

async function roundTrip(x: CdcConnection, y: CdcConnection, n: number): Promise<boolean> {
  const data = randomBytes(n);
  const got: Buffer[] = [];
  let len = 0;
  const done = new Promise<void>((resolve, reject) => {
    const pull = (): void => { for (let b = y.read(); b; b = y.read()) { got.push(Buffer.from(b)); len += b.length; } if (len >= n) resolve(); };
    y.on('readable', pull);
    y.once('abort', (r: string) => reject(new Error(r)));
    pull();
  });
  let off = 0;
  const pump = (): void => { while (off < n) { const k = x.write(data.subarray(off)); if (!k) return; off += k; } };
  x.on('writable', pump);
  pump();
  await done;
  x.off('writable', pump);
  return createHash('sha256').update(Buffer.concat(got)).digest('hex') === createHash('sha256').update(data).digest('hex');
}

test.serial('malformed LLC and CDC from the peer: answered or dropped, only the targeted connection aborts', async (t) => {
  const logB: string[] = [];
  const [a, b] = await openStacks({ ueids: [UEID] }, { ueids: [UEID], log: (l) => logB.push(l) });
  try {
    const [xc, xs, endX] = await conn(a, b);
    const [yc, ys, endY] = await conn(a, b);
    t.is(xs.lg, ys.lg);
    const X = [a.attach(xc), b.attach(xs)] as const;
    const Y = [a.attach(yc), b.attach(ys)] as const;
    const aborted: string[] = [];
    X[1].on('abort', (r: string) => aborted.push(`X: ${r}`));
    Y[1].on('abort', (r: string) => aborted.push(`Y: ${r}`));
    t.true(await roundTrip(X[0], X[1], 100_000));
    const wr = xc.link.wr; // the client's QP: everything below reaches the server's link as a peer message
    const v = 2 as const;
    const hdr = (code: number) => ({ llcVersion: v, type: llcTypeByte(code, v), length: 44, lengthOrder: 'le' as const, response: false });
    const zeroTok = { linkId: 0, rkey: 0, vaddr: 0n };
    const llcs: Array<[string, Uint8Array]> = [
      ['unknown LLC type', Uint8Array.from([0x2f, 44, 0, 0, ...randomBytes(40)])],
      ['5-byte LLC', Uint8Array.from([0x21, 5, 0, 0, 1])],
      ['8 KiB of random bytes', Uint8Array.from([0x26, ...randomBytes(8191)])],
      ['stray CONFIRM LINK', encodeLlc({ ...hdr(LlcCode.CONFIRM_LINK), kind: 'confirm_link', noRmbeEyecatcher: true, mac: '02:00:00:00:00:01', gid: '::1', qpn: 0xffffff, linkId: 9, linkUid: 0, maxLinks: 0, maxConns: 0 } as LlcMessage)],
      ['ADD LINK with junk GID', encodeLlc({ ...hdr(LlcCode.ADD_LINK), kind: 'add_link', rejected: false, rejectReason: 0, mac: 'ff:ff:ff:ff:ff:ff', gid: 'ffff::', qpn: 0, linkId: 200, mtu: 15, psn: 0xffffff } as LlcMessage)],
      ['CONFIRM RKEY claiming 200 rtokens', encodeLlc({ ...hdr(LlcCode.CONFIRM_RKEY), kind: 'confirm_rkey', negative: false, retry: false, numRtokens: 200, rkey: 0xdead, vaddr: 0xffffffffffffffffn, others: [zeroTok, zeroTok] } as LlcMessage)],
      ['DELETE RKEY of 8 unknown rkeys', encodeLlc({ ...hdr(LlcCode.DELETE_RKEY), kind: 'delete_rkey', negative: false, numRkeys: 8, errorMask: 0, variable: false, rkeys: [1, 2, 3, 4, 5, 6, 7, 8] } as LlcMessage)],
      ['DELETE LINK of a link that does not exist', encodeLlc({ ...hdr(LlcCode.DELETE_LINK), kind: 'delete_link', all: false, orderly: true, linkId: 77, reason: 0x00030000 } as LlcMessage)],
      ['TEST LINK', encodeLlc({ ...hdr(LlcCode.TEST_LINK), kind: 'test_link', userData: Uint8Array.from(randomBytes(16)) } as LlcMessage)],
    ];
    for (const [, m] of llcs) await wr.send(m);
    // CDCs: unknown token, short, and one for X with a producer cursor beyond the ring.
    await wr.send(encodeCdc(makeCdc(1, 0x7777, { wrap: 0, count: 10 }, { wrap: 0, count: 0 })));
    await wr.send(Uint8Array.from([0xfe, 44, 0, 1]));
    await wr.send(encodeCdc(makeCdc(500, xc.peerToken, { wrap: 0, count: 0x7fffffff }, { wrap: 0, count: 0 })));
    await new Promise((r) => setTimeout(r, 300));
    // The server's answers: responses to TEST LINK, CONFIRM RKEY (negative), DELETE RKEY, ADD LINK (reject)
    const sent = logB.filter((l) => l.includes(' > '));
    t.true(sent.some((l) => l.includes('TEST LINK') && l.includes('rsp')), sent.join('\n'));
    t.true(sent.some((l) => l.includes('CONFIRM RKEY') && l.includes('rsp')));
    t.true(sent.some((l) => l.includes('DELETE RKEY') && l.includes('rsp')));
    t.true(sent.some((l) => l.includes('ADD LINK') && l.includes('REJECT')));
    // Only X was aborted; the link group and Y live on.
    t.true(aborted.length === 1 && aborted[0]!.startsWith('X: '), aborted.join('; '));
    t.is(ys.lg.state, 'ACTIVE');
    t.is(ys.lg.links.size, 1);
    t.true(await roundTrip(Y[0], Y[1], 1_000_000));
    t.true(await roundTrip(Y[1], Y[0], 1_000_000));
    t.true(b.linkGroups.has(ys.lg));
    endX(); endY();
  } finally {
    await Promise.all([a.close(), b.close()]);
  }
});

test.serial('a peer that stops answering TEST LINK loses its link group; connections are told', async (t) => {
  const [a, b] = await openStacks({ ueids: [UEID], testLinkMs: 300, llcTimeoutMs: 600 }, { ueids: [UEID], testLinkMs: 300, llcTimeoutMs: 600 });
  try {
    const [xc, xs, end] = await conn(a, b);
    const X = [a.attach(xc), b.attach(xs)] as const;
    // keepalive works while both answer
    await new Promise((r) => setTimeout(r, 1200));
    t.is(xs.lg.state, 'ACTIVE');
    t.true(await roundTrip(X[0], X[1], 10_000));
    // the client's QP goes to error: no more answers
    const down = new Promise<string>((resolve) => X[1].once('abort', resolve));
    xc.link.wr.qp.modify({ qpState: 6 });
    const why = await down;
    t.regex(why, /link|TEST LINK|retry|down/i);
    t.is(xs.lg.state, 'TERMINATED');
    end();
  } finally {
    await Promise.all([a.close(), b.close()]);
  }
});

test.serial('an idle link group is deleted after its timer (DELETE LINK to the peer)', async (t) => {
  const [a, b] = await openStacks({ ueids: [UEID], idleLinkGroupMs: 300 }, { ueids: [UEID], idleLinkGroupMs: 5000 });
  try {
    const [xc, xs, end] = await conn(a, b);
    const X = [a.attach(xc), b.attach(xs)] as const;
    await Promise.all([X[0].close(), X[1].close()]);
    const gone = new Promise<string>((resolve) => xs.lg.once('terminated', resolve));
    // a keeps its QP until b's DELETE LINK response arrived (then b's send completes), so a ends
    // a moment after b.
    const aGone = new Promise<string>((resolve) => xc.lg.once('terminated', resolve));
    t.regex(await gone, /deleted the link group|no link/);
    t.regex(await aGone, /idle link group/);
    t.is(xc.lg.state, 'TERMINATED');
    end();
  } finally {
    await Promise.all([a.close(), b.close()]);
  }
});

test.serial('handshake and data through uroce fault injection (5 % loss, 2 % reorder/duplicate/ICRC corruption)', async (t) => {
  const faults = { seed: 7, loss: 0.05, reorder: 0.02, duplicate: 0.02, corrupt: 0.02 };
  const [a, b] = await openStacks({ ueids: [UEID] }, { ueids: [UEID] }, 150, { faults }, { faults: { ...faults, seed: 8 } });
  try {
    for (let i = 0; i < 2; i++) {
      const [xc, xs, end] = await conn(a, b);
      t.is(xc.firstContact, i === 0);
      const X = [a.attach(xc), b.attach(xs)] as const;
      t.true(await roundTrip(X[0], X[1], 4 << 20));
      t.true(await roundTrip(X[1], X[0], 4 << 20));
      end();
    }
    const st = (a.device as unknown as { engine: { faults?: { counters: Record<string, number> } } }).engine;
    t.log(JSON.stringify(st.faults?.counters ?? {}));
  } finally {
    await Promise.all([a.close(), b.close()]);
  }
});
