// Tracker round 6 (docs/smcdump.md). Lists the model keeps grow by concat instead of a copying
// loop: still a new array of exactly its length while short (the shared frozen empty list is
// never written), in order, then grown in place. The tracker skips its timeout check on a frame
// when the LLC pairing says nothing can expire yet: that answer must never hide an expiry.
import test from 'ava';
import { append, none } from '../../dissectors/tracker/lists.js';
import { LlcPairing, type LlcKind } from '../../dissectors/tracker/llcpair.js';
import type { Link, LinkGroup } from '../../dissectors/tracker/model.js';
import { prng } from '../helpers.js';

test('append: a new exact-size list per entry up to eight, then the same list grown; the shared empty list stays empty', (t) => {
  const empty = none<number>();
  let l = empty;
  const seen = new Set<number[]>();
  for (let i = 0; i < 8; i++) {
    const next = append(l, i);
    t.not(next, l, `entry ${i}: a new list`);
    t.is(next.length, i + 1);
    t.false(seen.has(next));
    seen.add(next);
    l = next;
  }
  t.deepEqual(l, [0, 1, 2, 3, 4, 5, 6, 7]);
  const same = append(l, 8);
  t.is(same, l, 'from eight on: grown in place');
  t.deepEqual(same, [0, 1, 2, 3, 4, 5, 6, 7, 8]);
  t.is(empty.length, 0);
  t.true(Object.isFrozen(empty));
  t.false(Object.isFrozen(append(empty, 1)));
});

test('LLC pairing: whenever mayExpire says no, expire finds nothing (random requests, answers and times)', (t) => {
  const rnd = prng(16);
  const groups = [1, 2, 3].map((id) => ({ id }) as unknown as LinkGroup);
  const link = {} as unknown as Link;
  const kinds: LlcKind[] = ['test_link', 'confirm_rkey', 'delete_rkey', 'add_link', 'confirm_link'];
  let expired = 0, skipped = 0;
  for (let run = 0; run < 20; run++) {
    const p = new LlcPairing();
    let now = 1_000_000_000_000n;
    for (let step = 0; step < 400; step++) {
      now += BigInt(Math.floor(rnd() * (rnd() < 0.1 ? 3e9 : 5e7)));
      const lg = groups[Math.floor(rnd() * groups.length)]!, from = (rnd() < 0.5 ? 0 : 1) as 0 | 1, kind = kinds[Math.floor(rnd() * kinds.length)]!;
      const r = rnd();
      if (r < 0.3) p.request({ lg, link, from, kind, frame: step, tsNs: now });
      else if (r < 0.6) p.answer(lg, from, kind, now);
      else if (r < 0.65) p.answerRequestAddLink(lg, from, now);
      const may = p.mayExpire(now);
      const got = p.expire(now, false);
      if (!may) { skipped++; t.is(got.length, 0, `run ${run} step ${step}: nothing may expire, nothing did`); }
      expired += got.length;
    }
  }
  t.true(expired > 10, `${expired} requests expired`);
  t.true(skipped > 1000, `${skipped} frames skipped the check`);
});
