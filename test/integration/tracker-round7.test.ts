// Tracker round 7 (docs/smcdump.md, "Tracker, round 7: the cost of a connection"). Work done
// once per connection or group got shorter ways that must say exactly what the long ways said:
// link names read as characters instead of a regular expression, the peers' record compared
// with the last one before a key string is built, the last Proposal's UEIDs reused, strings too
// short to be trees not copied, a side's RMBE size by a shift, and the LLC pairing's searches as
// loops, and the summary's close state built without lists. Each is held here to its definition.
import test from 'ava';
import { flat, intern } from '../../dissectors/tracker/intern.js';
import { GroupState } from '../../dissectors/tracker/group.js';
import { LlcPairing, type LlcKind, type LlcRequest, type Unanswered } from '../../dissectors/tracker/llcpair.js';
import type { LgEvent, Link, LinkGroup, SmcConn, SmcDir } from '../../dissectors/tracker/model.js';
import { closeState } from '../../dissectors/render/summary.js';
import { proposedOf } from '../../dissectors/tracker/tracker.js';
import { bufSizeFromCode } from '../../dissectors/wire/common.js';
import { prng } from '../helpers.js';

const epoch = { base: 1_700_000_000_000_000_000n };
const at = (ns: number): bigint => epoch.base + BigInt(ns);

test('a link event reads back with the name it was given, usual names or not', (t) => {
  // usual: LG<id>/L<n> and LG<id>/#<n>, n 0-9999 without a leading zero; the rest is kept as
  // given (a wrong parse would print another name: "LG7/L01" as "LG7/L1")
  const names = ['LG7/L1', 'LG7/#1', 'LG7/L0', 'LG7/#0', 'LG7/L9999', 'LG7/L10000', 'LG7/L01', 'LG7/#00', 'LG07/L1', 'LG70/L1',
    'LG7/X1', 'LG7/L', 'LG7/', 'LG7', 'LG/L1', 'lg7/L1', 'LG7/L1 ', 'LG7/L1x', 'LG7/L-1', 'LG7/L+1', 'LG7/L1.5', 'LG8/L1', '', 'LG7//L1'];
  const g = new GroupState(epoch, 7, true, 1);
  const want: LgEvent[] = [];
  names.forEach((name, i) => {
    g.addSentence(10 + i, at(100 * i), name, i % 2 === 0 ? 'server' : 'client', { kind: 'confirmed' });
    want.push({ frame: 10 + i, tsNs: at(100 * i), what: 'link-confirmed', link: name, by: i % 2 === 0 ? 'server' : 'client', text: `${name} up (CONFIRM LINK answered by the ${i % 2 === 0 ? 'server' : 'client'})` });
  });
  t.deepEqual(g.events, want);
  // a group with a longer id, and an ADD LINK (its GID kept beside the step)
  const h = new GroupState(epoch, 12345, true, 1);
  h.addSentence(1, at(1), 'LG12345/L2', 'server', { kind: 'add-link', gid: '::ffff:10.0.0.9', qpn: 0x33 });
  h.addSentence(2, at(2), 'LG1234/L2', 'client', { kind: 'rejected', linkId: 2 });
  t.deepEqual(h.events.map((e) => [e.link, e.text]), [
    ['LG12345/L2', 'ADD LINK LG12345/L2 proposed by the server (::ffff:10.0.0.9 QP 0x33)'],
    ['LG1234/L2', 'ADD LINK of link 2 rejected by the client'],
  ]);
});

test('what peers said: the same record for the same values, in any order of groups, and a key given as undefined replaces', (t) => {
  const p = { clientPeer: 'c1', serverPeer: 's1', clientHost: 'ha', serverHost: 'hb', version: 2, release: 1, ueid: 'U', maxLinks: undefined, maxConns: undefined };
  const q = { ...p, serverPeer: 's2' };
  const hello = (g: GroupState): unknown => (g as unknown as { hello: unknown }).hello;
  const a = new GroupState(epoch, 1, true, 1), b = new GroupState(epoch, 2, true, 2), c = new GroupState(epoch, 3, true, 3);
  a.said(p); b.said(q); c.said(p);
  t.is(hello(a), hello(c), 'A B A: the first record again');
  t.not(hello(a), hello(b));
  t.is(b.serverPeer, 's2');
  t.is(c.serverPeer, 's1');
  // a CONFIRM LINK's limits, then a key set back to undefined
  c.said({ maxLinks: 3, maxConns: 255 });
  t.is(c.maxLinks, 3);
  t.is(c.maxConns, 255);
  t.is(a.maxLinks, undefined, 'the shared record is not written');
  c.said({ maxLinks: undefined });
  t.is(c.maxLinks, undefined);
  t.is(c.maxConns, 255);
  t.is(c.clientHost, 'ha');
  c.maxConns = undefined;
  t.is(hello(c), hello(a), 'back to what A said: the same record');
  // saying nothing new keeps the record
  const before = hello(b);
  b.said({ serverPeer: 's2', version: 2 });
  t.is(hello(b), before);
});

test('a Proposal\'s UEIDs: one shared list per distinct list, whatever came before, not tied to the caller\'s array', (t) => {
  const a1 = ['SMC-A', 'SMC-B'], b1 = ['SMC-C'], a2 = ['SMC-A', 'SMC-B'];
  const pa = proposedOf(a1), pb = proposedOf(b1), pa2 = proposedOf(a2), pa3 = proposedOf(a2);
  t.deepEqual(pa.ueids, ['SMC-A', 'SMC-B']);
  t.deepEqual(pb.ueids, ['SMC-C']);
  t.is(pa2, pa, 'the same list after another one');
  t.is(pa3, pa, 'the same list twice in a row');
  t.deepEqual(proposedOf(['SMC-A']).ueids, ['SMC-A'], 'a prefix is another list');
  t.deepEqual(proposedOf(['SMC-A', 'SMC-B', 'SMC-D']).ueids, ['SMC-A', 'SMC-B', 'SMC-D'], 'a longer list is another list');
  a2[1] = 'SMC-X';
  t.deepEqual(pa.ueids, ['SMC-A', 'SMC-B'], 'the caller changing its array changes nothing kept');
  t.deepEqual(proposedOf(a2).ueids, ['SMC-A', 'SMC-X']);
  t.is(proposedOf([]).ueids.length, 0);
  t.is(proposedOf(undefined), proposedOf([]));
});

test('strings: short ones pass as they are, long ones come back equal; intern gives one instance per value', (t) => {
  const parts = ['10', '55', '0', '1'];
  const short = parts.join('.');
  t.is(flat(short), short);
  const long = `::ffff:${short}` + ':x'.repeat(10);
  t.is(flat(long), long);
  const i1 = intern(`${'02:00:0a'}:${'37:00:01'}`), i2 = intern(['02:00:0a', '37:00:01'].join(':'));
  t.is(i1, '02:00:0a:37:00:01');
  t.is(i1, i2);
});

test('RMBE size: the shift for 4-bit codes gives the power of two the formula says, and other codes the power', (t) => {
  for (let c = -2; c <= 300; c++) t.is(bufSizeFromCode(c), 2 ** (c + 14), `code ${c}`);
  t.is(bufSizeFromCode(0.5), 2 ** 14.5);
  t.is(bufSizeFromCode(1), 32768);
  t.is(bufSizeFromCode(16), 2 ** 30);
});

/** The pairing rules of llcpair.ts as a plain model (lists and first matches), to hold the
 *  pairing's loops to: what each call returns, what expires, how many were reordered. */
class ModelPairing {
  pending: LlcRequest[] = [];
  early: { lg: LinkGroup; from: 0 | 1; kind: LlcKind; tsNs: bigint }[] = [];
  reordered = 0;
  private static answers(resp: LlcKind, req: LlcKind): boolean { return resp === req || (req === 'request_add_link' && resp === 'add_link'); }
  request(r: LlcRequest): void {
    const i = this.early.findIndex((e) => e.lg === r.lg && e.from !== r.from && ModelPairing.answers(e.kind, r.kind) && r.tsNs - e.tsNs <= 50_000_000n);
    if (i >= 0) { this.early.splice(i, 1); this.reordered++; return; }
    if (r.kind === 'delete_link') {
      const j = this.pending.findIndex((p) => p.lg === r.lg && p.from !== r.from && p.kind === 'delete_link' && p.linkId === r.linkId);
      if (j >= 0) { this.pending.splice(j, 1); return; }
    }
    this.pending.push(r);
  }
  answer(lg: LinkGroup, from: 0 | 1, kind: LlcKind, tsNs: bigint): LlcRequest | undefined {
    const i = this.pending.findIndex((p) => p.lg === lg && p.from !== from && ModelPairing.answers(kind, p.kind));
    if (i >= 0) return this.pending.splice(i, 1)[0];
    this.early.push({ lg, from, kind, tsNs });
    if (this.early.length > 64) this.early.shift();
    return undefined;
  }
  answerRequestAddLink(lg: LinkGroup, from: 0 | 1, tsNs: bigint): LlcRequest | undefined {
    const i = this.pending.findIndex((p) => p.lg === lg && p.from !== from && p.kind === 'request_add_link');
    if (i >= 0) return this.pending.splice(i, 1)[0];
    this.early.push({ lg, from, kind: 'add_link', tsNs });
    return undefined;
  }
  expire(now: bigint, final: boolean): Unanswered[] {
    this.early = this.early.filter((e) => !(now > e.tsNs + 50_000_000n));
    const out: Unanswered[] = [];
    this.pending = this.pending.filter((p) => {
      const overdue = now > p.tsNs + 2_000_000_000n;
      if (overdue || final) { out.push({ req: p, overdue }); return false; }
      return true;
    });
    return out;
  }
}

test('LLC pairing: the same answers, expiries and reorder count as the rules written as plain list searches (many groups, random traffic)', (t) => {
  const rnd = prng(7);
  const groups = Array.from({ length: 40 }, (_, id) => ({ id }) as unknown as LinkGroup);
  const link = {} as unknown as Link;
  const kinds: LlcKind[] = ['test_link', 'confirm_rkey', 'delete_rkey', 'add_link', 'confirm_link', 'delete_link', 'request_add_link'];
  let answered = 0, expired = 0, reordered = 0;
  for (let run = 0; run < 30; run++) {
    const p = new LlcPairing(), m = new ModelPairing();
    let now = 5_000_000_000n;
    for (let step = 0; step < 600; step++) {
      now += BigInt(Math.floor(rnd() * (rnd() < 0.05 ? 3e9 : 2e6)));
      // a few groups busy at a time, as on a capture of many connections
      const lg = groups[(run + Math.floor(rnd() * 6)) % groups.length]!, from = (rnd() < 0.5 ? 0 : 1) as 0 | 1;
      const kind = kinds[Math.floor(rnd() * kinds.length)]!;
      const r = rnd();
      if (r < 0.4) {
        const req: LlcRequest = { lg, link, from, kind, frame: step, tsNs: now };
        if (kind === 'delete_link') req.linkId = 1 + Math.floor(rnd() * 2);
        p.request(req); m.request(req);
      } else if (r < 0.8) {
        const a = p.answer(lg, from, kind, now), b = m.answer(lg, from, kind, now);
        t.is(a, b, `run ${run} step ${step}: answer`);
        if (a) answered++;
      } else if (r < 0.9) {
        const a = p.answerRequestAddLink(lg, from, now), b = m.answerRequestAddLink(lg, from, now);
        t.is(a, b, `run ${run} step ${step}: ADD LINK answering`);
        if (a) answered++;
      } else {
        const a = p.expire(now, false), b = m.expire(now, false);
        t.deepEqual(a.map((u) => [u.req, u.overdue]), b.map((u) => [u.req, u.overdue]), `run ${run} step ${step}: expired`);
        expired += a.length;
      }
      // the same requests and early responses left, in the same order
      const inner = p as unknown as { pending: unknown[]; early: unknown[] };
      t.deepEqual(inner.pending, m.pending, `run ${run} step ${step}: pending`);
      t.deepEqual(inner.early, m.early, `run ${run} step ${step}: early`);
    }
    const a = p.expire(now, true), b = m.expire(now, true);
    t.deepEqual(a.map((u) => [u.req, u.overdue]), b.map((u) => [u.req, u.overdue]), `run ${run}: open at the end`);
    t.is(p.reordered, m.reordered, `run ${run}: reordered`);
    reordered += p.reordered;
  }
  t.true(answered > 300, `${answered} answered`);
  t.true(expired > 50, `${expired} expired`);
  t.true(reordered > 20, `${reordered} answered before they were seen`);
});

test('how a connection ended: every combination of direction flags, reset, group state and failover reads as the list of parts', (t) => {
  // the parts as the summary defines them, joined (the long way)
  const want = (s: SmcConn): string => {
    const parts: string[] = [];
    s.dirs.forEach((d, i) => {
      const who = i === 0 ? 'client' : 'server';
      if (d.aborted) parts.push(`${who} aborted`); else if (d.closed) parts.push(`${who} closed`); else if (d.doneWriting) parts.push(`${who} done writing`);
    });
    const open = !s.dirs.every((d) => d.closed || d.aborted);
    if (open && s.tcp?.rst) parts.push(`reset by the ${s.tcp.rst.by}`);
    if (open && s.lg.state === 'failed') parts.push('link group lost');
    else if (open && s.lg.state === 'terminated' && !s.tcp?.rst) parts.push('link group terminated');
    const f = s.failovers[s.failovers.length - 1];
    if (f) parts.push(`failed over to ${f.to}`);
    return parts.join(', ') || 'open';
  };
  const ends = [0, 1, 2, 3, 4, 5, 6, 7]; // aborted, closed, doneWriting bits
  const dir = (b: number): SmcDir => ({ aborted: (b & 1) !== 0, closed: (b & 2) !== 0, doneWriting: (b & 4) !== 0 }) as SmcDir;
  let n = 0;
  const seen = new Set<string>();
  for (const a of ends) for (const b of ends) for (const rst of [undefined, 'client', 'server'] as const) for (const state of ['active', 'failed', 'terminated'] as const) for (const fo of [0, 1, 2]) {
    const s = {
      dirs: [dir(a), dir(b)], tcp: rst ? { rst: { frame: 1, tsNs: 1n, by: rst } } : {}, lg: { state },
      failovers: Array.from({ length: fo }, (_, i) => ({ to: `LG1/L${i + 1}` })),
    } as unknown as SmcConn;
    const got = closeState(s);
    t.is(got, want(s));
    seen.add(got);
    n++;
  }
  t.is(n, 1728);
  t.true(seen.size > 100, `${seen.size} distinct texts`);
});
