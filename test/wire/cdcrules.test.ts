// The CDC rules (dissectors/wire/cdcrules.ts), used by the tracker and by the endpoint's
// connection: one suite for both. Values from Linux's definitions (smc_cdc.h smc_curs_diff,
// smc_cdc_before, smc_cdc_msg_validate, smc_tx.c rmbe_update_limit) and formats.md §9.2.
import test from 'ava';
import {
  consumerUpdateLimit, cursorAt, cursorDiff, cursorDistance, cursorOutOfRing, movedMultiWrap, overrunBytes,
  seqCheck, seqNewer, urgentByteAt, validationOutOfSync,
} from '../../dissectors/wire/cdcrules.js';

test('cursorDiff follows Linux smc_curs_diff (formats.md §9.2)', (t) => {
  t.is(cursorDiff({ wrap: 3, count: 100 }, { wrap: 3, count: 1100 }, 65536), 1000);
  t.is(cursorDiff({ wrap: 3, count: 65000 }, { wrap: 4, count: 464 }, 65536), 1000);
  t.is(cursorDiff({ wrap: 3, count: 100 }, { wrap: 3, count: 50 }, 65536), 0); // never negative
  t.is(cursorDiff({ wrap: 0xffff, count: 16000 }, { wrap: 0, count: 100 }, 16384), 484);
  t.is(cursorDiff({ wrap: 1, count: 0 }, { wrap: 2, count: 0 }, 65536), 65536);
  // multi-wrap jumps need cursorDistance
  t.is(cursorDistance({ wrap: 1, count: 10 }, { wrap: 4, count: 20 }, 1000), 3010);
  t.is(cursorDistance({ wrap: 4, count: 20 }, { wrap: 1, count: 10 }, 1000), -3010);
  t.is(cursorDistance({ wrap: 0xfffe, count: 0 }, { wrap: 1, count: 5 }, 100), 305);
});

test('seqNewer is a 16-bit serial compare', (t) => {
  t.true(seqNewer(2, 1));
  t.false(seqNewer(1, 2));
  t.false(seqNewer(7, 7));
  t.true(seqNewer(0, 0xffff));
  t.true(seqNewer(5, 0xfff0));
  t.false(seqNewer(0xfff0, 5));
  t.true(seqNewer(0x7fff, 0));
  t.false(seqNewer(0x8001, 0));
});

test('seqCheck: first, next, gap (CDCs missing), stale (replay) across the 16-bit wrap', (t) => {
  t.is(seqCheck(undefined, 9), 'first');
  t.is(seqCheck(1, 2), 'next');
  t.is(seqCheck(0xffff, 0), 'next');
  t.is(seqCheck(1, 5), 'gap');
  t.is(seqCheck(0xfffe, 3), 'gap');
  t.is(seqCheck(5, 5), 'stale');
  t.is(seqCheck(5, 4), 'stale');
  t.is(seqCheck(2, 0xffff), 'stale');
});

test('failover validation is out of sync only when it names a CDC the receiver never got', (t) => {
  t.false(validationOutOfSync(10, 10)); // the last one received: in sync
  t.false(validationOutOfSync(10, 8)); // older: the receiver is ahead, nothing lost
  t.true(validationOutOfSync(10, 11)); // newer: CDCs were lost with the old link
  t.true(validationOutOfSync(0xffff, 0));
});

test('cursorAt is the inverse of cursorDistance from 0:0, the wrap sequence is 16 bits', (t) => {
  for (const [total, size] of [[0, 1024], [1023, 1024], [1024, 1024], [2097275, 65536], [65536 * 0x10001 + 7, 65536]] as const) {
    const c = cursorAt(total, size);
    t.true(c.count < size);
    t.is(cursorDistance({ wrap: 0, count: 0 }, c, size), total % (size * 0x10000));
  }
  t.deepEqual(cursorAt(65536 * 0x10000 + 5, 65536), { wrap: 0, count: 5 });
});

test('movedMultiWrap: more than one wrap forward (never backwards, never across one wrap)', (t) => {
  t.false(movedMultiWrap({ wrap: 3, count: 100 }, { wrap: 3, count: 200 }));
  t.false(movedMultiWrap({ wrap: 3, count: 100 }, { wrap: 4, count: 50 }));
  t.true(movedMultiWrap({ wrap: 3, count: 100 }, { wrap: 5, count: 0 }));
  t.true(movedMultiWrap({ wrap: 0xffff, count: 0 }, { wrap: 1, count: 0 }));
  t.false(movedMultiWrap({ wrap: 5, count: 0 }, { wrap: 3, count: 0 }));
});

test('cursorOutOfRing and overrunBytes: what a receiver must refuse', (t) => {
  t.false(cursorOutOfRing({ wrap: 0, count: 65535 }, 65536));
  t.true(cursorOutOfRing({ wrap: 0, count: 65536 }, 65536));
  t.is(overrunBytes(65536, 0, 65536), 0); // a full ring is allowed
  t.is(overrunBytes(65537, 0, 65536), 1);
  t.is(overrunBytes(100, 200, 65536), 0);
});

test('urgent byte is the last byte before the producer cursor; update limit as Linux', (t) => {
  t.is(urgentByteAt(1000), 999);
  t.is(consumerUpdateLimit(65536), 6553); // RMBE/10
  t.is(consumerUpdateLimit(16384), 2304); // SOCK_MIN_SNDBUF/2 floor
  t.is(consumerUpdateLimit(1 << 20), 104857);
});
