// Link failover of the CDC data path (RFC 7609 4.6; Linux smc_switch_conns / smc_switch_cursor /
// smcr_cdc_msg_send_validation / smc_cdc_msg_validate) over REAL RDMA: four uroce devices on
// loopback make two links between the same two endpoints; link 1 dies under a bulk transfer (its
// QP is moved to ERR on one side, the other side finds out by its own retry timeout), the
// connections switch to link 2, send the failover-validation CDC and replay what was not
// acknowledged. Every byte must arrive exactly once and in order (SHA-256 of the read stream).
import test from 'ava';
import { createHash } from 'node:crypto';
import { decodeCdc, encodeCdc, makeCdc, type CdcMessage } from '../../dissectors/wire/cdc.js';
import { QpState } from '../../endpoint/verbs/index.js';
import type { CdcConnection } from '../../endpoint/cdc/connection.js';
import { pattern, sha256, until } from '../verbs/harness.js';
import { failoverRig, foConnPair, writeAll, readN, waitEvent, type FoRig } from './cdc-harness.js';

/** Send `data` from x to y; SHA-256 of what y read and how many bytes. `onRead` sees the running total. */
async function pump(x: CdcConnection, y: CdcConnection, data: Uint8Array, onRead?: (total: number) => void): Promise<{ hash: string; got: number }> {
  const h = createHash('sha256');
  let total = 0;
  const [, got] = await Promise.all([
    writeAll(x, data),
    readN(y, data.length, (b) => { h.update(b); total += b.length; onRead?.(total); }),
  ]);
  return { hash: h.digest('hex'), got };
}

/** Kill a link the way a dying port does: its QP goes to ERR; the WrLink learns it from the flushed work requests. */
function killQp(r: FoRig, side: 'A' | 'B', link: number): void {
  r[side].links[link]!.qp.modify({ qpState: QpState.ERR });
}

/** Collect decoded CDCs arriving on one side's link. */
function tapCdcs(r: FoRig, side: 'A' | 'B', link: number): CdcMessage[] {
  const seen: CdcMessage[] = [];
  r[side].links[link]!.on('message', (b: Uint8Array) => { if (b[0] === 0xfe) seen.push(decodeCdc(b.slice()).value); });
  return seen;
}

const MiB = 1 << 20;

/** Every CDC the connection sent was acknowledged by the peer's RNIC. */
function settled(c: CdcConnection): boolean {
  const s = c.state().tx;
  return s.inFlight === 0 && s.finSeq === s.seq;
}

test.serial('link 1 dies mid-stream: 32 MiB each way through a 64 KiB RMBE continue on link 2, every byte once and in order', async (t) => {
  const r = await failoverRig();
  try {
    t.log(`links: A ${r.addrs[0]}↔B ${r.addrs[1]} (1), A ${r.addrs[2]}↔B ${r.addrs[3]} (2)`);
    const { a, b } = foConnPair(r, { rmbeA: 65536, rmbeB: 65536, sndA: 65536, sndB: 65536 });
    const onLink2ToB = tapCdcs(r, 'B', 1);
    const onLink2ToA = tapCdcs(r, 'A', 1);
    const x = pattern(32 * MiB, 81), y = pattern(32 * MiB, 82);
    let killedAt = -1;
    const t0 = performance.now();
    const [ab, ba] = await Promise.all([
      pump(a, b, x, (n) => {
        if (killedAt < 0 && n >= 8 * MiB) { killedAt = n; killQp(r, 'A', 0); }
      }),
      pump(b, a, y),
    ]);
    const ms = performance.now() - t0;
    t.is(ab.got, x.length);
    t.is(ab.hash, sha256(x), 'A→B: every byte once, in order');
    t.is(ba.got, y.length);
    t.is(ba.hash, sha256(y), 'B→A: every byte once, in order');
    t.is(a.readableLength, 0, 'nothing beyond the stream');
    t.is(b.readableLength, 0, 'nothing beyond the stream');

    // both sides saw link 1 die: A from its flushed QP, B by its retry timeout
    t.deepEqual(r.A.downs.map((d) => d.link), [0]);
    t.deepEqual(r.B.downs.map((d) => d.link), [0]);
    t.regex(r.A.downs[0]!.reason, /flush/i);
    t.regex(r.B.downs[0]!.reason, /RETRY_EXC|retry|REM|NAK/i);
    t.false(r.A.links[1]!.isDown);
    t.false(r.B.links[1]!.isDown);
    t.is(r.A.current, 1);
    t.is(r.B.current, 1);

    t.true(await until(() => settled(a) && settled(b)), 'the last CDCs are acknowledged');
    const sa = a.state(), sb = b.state();
    for (const [name, s] of [['A', sa], ['B', sb]] as const) {
      t.is(s.state, 'ACTIVE', `${name} not aborted`);
      t.is(s.counters.failovers, 1, `${name} failed over once`);
      t.is(s.counters.validationsSent, 1);
      t.is(s.counters.validationsReceived, 1);
      t.is(s.counters.bytesSent, 32 * MiB, `${name}: new stream bytes counted once, replays separately`);
      t.is(s.counters.bytesReceived, 32 * MiB);
      t.is(s.tx.linkEpoch, 1);
      t.is(s.tx.replayPending, 0);
      t.is(s.tx.finSeq, s.tx.seq);
    }
    // B kept writing into the dead link until its timeout: that data was not acknowledged, so it
    // must have been written again
    t.true(sb.counters.replayedBytes > 0, `B replayed ${sb.counters.replayedBytes} bytes`);
    // the first CDC each side got on link 2 from the peer is its validation, carrying a
    // sequence number the receiver had seen and zero cursors (as Linux sends it)
    for (const [name, seen] of [['A→B', onLink2ToB], ['B→A', onLink2ToA]] as const) {
      const v = seen[0]!;
      t.true(v.prodFlags.failoverValidation, `${name}: first CDC on link 2 is the validation`);
      t.deepEqual([v.prod, v.cons], [{ wrap: 0, count: 0 }, { wrap: 0, count: 0 }]);
      t.is(seen.filter((m) => m.prodFlags.failoverValidation).length, 1);
      t.true(seen.length > 100, `${name}: the transfer went on over link 2 (${seen.length} CDCs)`);
    }
    t.log(`${(64 * MiB / ms / 1000).toFixed(1)} MB/s both ways in ${(ms / 1000).toFixed(2)} s; link 1 killed after ${(killedAt / MiB).toFixed(1)} MiB`);
    t.log(`A detected at ${r.A.downs[0]!.at.toFixed(0)} ms (${r.A.downs[0]!.reason}), B at ${r.B.downs[0]!.at.toFixed(0)} ms (${r.B.downs[0]!.reason})`);
    t.log(`replayed bytes: A ${sa.counters.replayedBytes}, B ${sb.counters.replayedBytes}; validation seq A→B ${onLink2ToB[0]!.seq}, B→A ${onLink2ToA[0]!.seq}; stale CDCs dropped: A ${sa.counters.staleCdcs}, B ${sb.counters.staleCdcs}; replay CDCs behind the receiver's cursor: at A ${sa.counters.replayCdcsReceived}, at B ${sb.counters.replayCdcsReceived}`);
    for (const l of [...r.A.logs, ...r.B.logs].filter((l) => /failover|validation/.test(l))) t.log(l);

    await Promise.all([a.close(), b.close()]);
    t.is(a.stateName, 'CLOSED');
    t.false(a.aborted);
    t.false(b.aborted);
    t.is(r.A.unknownToken + r.B.unknownToken, 0);
  } finally {
    await r.close();
  }
});

test.serial('orderly switch with nothing in flight: validation only (seq = last acknowledged), no replay, data continues on link 2', async (t) => {
  const r = await failoverRig({ policy: 'none' });
  try {
    const { a, b } = foConnPair(r);
    const first = await pump(a, b, pattern(100_000, 3));
    t.is(first.got, 100_000);
    await pump(b, a, pattern(50_000, 4));
    t.true(await until(() => settled(a) && settled(b)));
    const before = a.state();
    t.is(before.tx.finSeq, before.tx.seq, 'every CDC acknowledged');
    const onB = tapCdcs(r, 'B', 1);
    const l1Sent = r.A.links[0]!.stats.sent;
    r.A.current = 1;
    a.switchLink();
    r.B.current = 1;
    b.switchLink();
    t.true(await until(() => onB.length >= 1 && b.state().counters.validationsReceived === 1 && a.state().counters.validationsReceived === 1));
    t.true(onB[0]!.prodFlags.failoverValidation);
    t.is(onB[0]!.seq, before.tx.seq);
    t.is(onB[0]!.token, b.localToken);
    const sb = b.state();
    t.deepEqual(sb.rx.prod, before.tx.prod, 'the validation moved no cursor');
    t.is(sb.rx.seq, before.tx.seq);
    t.is(a.state().counters.replayedBytes, 0);
    t.is(b.state().counters.replayedBytes, 0);
    // no CDC was unacknowledged, so the switch sent only the validation
    t.is(a.state().counters.cdcSent, before.counters.cdcSent + 1);
    const x = pattern(3 * MiB, 5), y = pattern(2 * MiB, 6);
    const [ab, ba] = await Promise.all([pump(a, b, x), pump(b, a, y)]);
    t.is(ab.hash, sha256(x));
    t.is(ba.hash, sha256(y));
    t.is(r.A.links[0]!.stats.sent, l1Sent, 'nothing more on link 1');
    t.true(r.A.links[1]!.stats.sent > 10);
    t.is(a.state().tx.linkEpoch, 1);
    await Promise.all([a.close(), b.close()]);
    t.false(a.aborted || b.aborted);
  } finally {
    await r.close();
  }
});

test.serial('data and the close flag lost with the old link are replayed; the old link\'s late failures do not abort', async (t) => {
  const r = await failoverRig({ policy: 'none' });
  try {
    const { a, b } = foConnPair(r);
    await pump(a, b, pattern(10_000, 14));
    // B's end of link 1 dies first: whatever A sends there from now on is lost
    killQp(r, 'B', 0);
    t.true(await until(() => r.B.links[0]!.isDown));
    const x = pattern(12_000, 15);
    t.is(a.write(x), x.length);
    const closing = a.close();
    t.true(await until(() => a.state().tx.flags.includes('closed')), 'closed CDC sent on the dead link');
    t.is(b.state().rx.unread, 0, 'nothing arrived');
    const seqBefore = a.state().tx.seq;
    // the link group moves both ends to link 2 (B knows its link died; A is told by DELETE LINK)
    r.A.current = 1; a.switchLink();
    r.B.current = 1; b.switchLink();
    const h = createHash('sha256');
    const got = await readN(b, x.length, (d) => h.update(d));
    t.is(got, x.length);
    t.is(h.digest('hex'), sha256(x));
    t.true(await until(() => b.peerDone), 'the replayed CDC carried peer_conn_closed');
    t.is(a.state().counters.replayedBytes, x.length);
    t.true(await until(() => a.state().tx.finSeq > seqBefore), 'the replay CDC (a new sequence number) was acknowledged');
    // A's sends on link 1 fail only now, by retry timeout: an older epoch, ignored
    t.true(await until(() => r.A.links[0]!.isDown, 5000), 'link 1 failed on A by its own timeout');
    await new Promise((res) => setTimeout(res, 50));
    t.false(a.aborted, `A not aborted (${a.state().abortReason ?? ''})`);
    await b.close();
    await closing;
    t.is(a.stateName, 'CLOSED');
    t.is(b.stateName, 'CLOSED');
    t.false(a.aborted || b.aborted);
  } finally {
    await r.close();
  }
});

test.serial('out-of-sync validation (a sequence number never sent) aborts only that connection; an in-sync one changes nothing', async (t) => {
  const r = await failoverRig({ policy: 'none' });
  try {
    const victim = foConnPair(r);
    const other = foConnPair(r);
    for (const p of [victim, other]) await pump(p.a, p.b, pattern(20_000, 7));
    // in sync: B speaks for `other` with the sequence number A last received
    const so = other.a.state();
    await r.B.links[0]!.send(encodeCdc(makeCdc(so.rx.seq, other.tokenA, { wrap: 0, count: 0 }, { wrap: 0, count: 0 }, { failoverValidation: true })));
    t.true(await until(() => other.a.state().counters.validationsReceived === 1));
    const so2 = other.a.state();
    t.deepEqual([so2.rx.prod, so2.rx.seq, so2.rx.unread, so2.state], [so.rx.prod, so.rx.seq, so.rx.unread, 'ACTIVE']);
    // out of sync: a validation naming seq+5, which A never received
    const sv = victim.a.state();
    const abortA = waitEvent<string>(victim.a, 'abort');
    const abortB = waitEvent<string>(victim.b, 'abort');
    await r.B.links[0]!.send(encodeCdc(makeCdc((sv.rx.seq + 5) & 0xffff, victim.tokenA, { wrap: 0, count: 0 }, { wrap: 0, count: 0 }, { failoverValidation: true })));
    t.regex(await abortA, /failover validation names seq \d+, last received \d+: CDCs were lost \(out of sync\)/);
    t.regex(await abortB, /peer aborted/, 'the peer got peer_conn_abort');
    t.is(victim.a.stateName, 'CLOSED');
    t.is(victim.a.state().counters.validationsReceived, 0);
    // the other connection on the same links is unaffected
    const x = pattern(500_000, 8);
    t.is((await pump(other.a, other.b, x)).hash, sha256(x));
    t.is((await pump(other.b, other.a, x)).hash, sha256(x));
    t.false(r.A.links[0]!.isDown);
    await victim.b.close();
    await Promise.all([other.a.close(), other.b.close()]);
    t.false(other.a.aborted);
  } finally {
    await r.close();
  }
});

test.serial('after a validation, a producer cursor behind ours is the replay (no change, no abort); without one it is a violation', async (t) => {
  const r = await failoverRig({ policy: 'none' });
  try {
    const zero = { wrap: 0, count: 0 };
    const p = foConnPair(r);
    const x = pattern(30_000, 13);
    t.is((await pump(p.b, p.a, x)).hash, sha256(x));
    const s0 = p.a.state();
    const bCons = p.b.state().tx.cons;
    const behind = { wrap: 1, count: 20_000 - 16384 }; // 10 000 bytes before the 30 000 we have
    // what B's side would send after failing over: the validation, then its replay from 10 000 bytes back
    await r.B.links[1]!.send(encodeCdc(makeCdc(s0.rx.seq, p.tokenA, zero, zero, { failoverValidation: true })));
    await r.B.links[1]!.send(encodeCdc(makeCdc((s0.rx.seq + 1) & 0xffff, p.tokenA, behind, bCons)));
    t.true(await until(() => p.a.state().counters.replayCdcsReceived === 1));
    const s1 = p.a.state();
    t.is(s1.state, 'ACTIVE');
    t.deepEqual(s1.rx.prod, s0.rx.prod, 'our producer cursor stays');
    t.is(s1.rx.unread, 0, 'no byte delivered twice');
    t.is(s1.rx.seq, (s0.rx.seq + 1) & 0xffff);
    t.true(s1.rx.peerReplaying);
    t.is(s1.counters.bytesReceived, s0.counters.bytesReceived);
    // the replay caught up: cursors behind ours are violations again
    await r.B.links[1]!.send(encodeCdc(makeCdc((s0.rx.seq + 2) & 0xffff, p.tokenA, s0.rx.prod, bCons)));
    t.true(await until(() => !p.a.state().rx.peerReplaying));
    const ab = waitEvent<string>(p.a, 'abort');
    // B's abort may come before the SEND below completes (A's reaction can overtake its ACK)
    const bb = waitEvent<string>(p.b, 'abort');
    await r.B.links[1]!.send(encodeCdc(makeCdc((s0.rx.seq + 3) & 0xffff, p.tokenA, behind, bCons)));
    t.regex(await ab, /producer cursor moved backwards by 10000 bytes/);
    t.regex(await bb, /peer aborted/);
  } finally {
    await r.close();
  }
});

test.serial('link death with no second link aborts as before (pending sends reject, no switch)', async (t) => {
  const r = await failoverRig({ links: 1, policy: 'none' });
  try {
    const { a, b } = foConnPair(r);
    await pump(a, b, pattern(5000, 9));
    const ab = waitEvent<string>(a, 'abort');
    const closed = waitEvent<{ aborted: boolean; reason: string }>(a, 'closed');
    const writing = writeAll(a, pattern(200_000, 10)).catch((e: Error) => e);
    killQp(r, 'A', 0);
    t.regex(await ab, /CDC send failed|RDMA WRITE failed/);
    t.true((await closed).aborted);
    t.is(a.stateName, 'CLOSED');
    t.is(a.state().counters.failovers, 0);
    t.true((await writing) instanceof Error);
  } finally {
    await r.close();
  }
});

test.serial('after a failover the second link dies too: no link left, the link group calls linkDown() and the connection aborts', async (t) => {
  const r = await failoverRig();
  try {
    const { a, b } = foConnPair(r);
    const x = pattern(4 * MiB, 11);
    let killed = false;
    // link 1 dies on A during the transfer; B is told at once (as a DELETE LINK would) instead of waiting for its timeout
    const res = await pump(a, b, x, (n) => {
      if (!killed && n >= MiB) { killed = true; killQp(r, 'A', 0); r.B.links[0]!.fail('peer deleted the link'); }
    });
    t.is(res.hash, sha256(x));
    t.is(a.state().counters.failovers, 1);
    t.is(b.state().counters.failovers, 1);
    const ab = waitEvent<string>(a, 'abort');
    const writing = writeAll(a, pattern(MiB, 12)).catch((e: Error) => e);
    killQp(r, 'A', 1);
    t.regex(await ab, /link down|CDC send failed/);
    t.is(a.stateName, 'CLOSED');
    t.true((await writing) instanceof Error);
    t.deepEqual(r.A.downs.map((d) => d.link), [0, 1]);
  } finally {
    await r.close();
  }
});
