// The time and number columns written as bytes (TimeParts.writeParts, Out.int/text: the
// replay fast path for pcap frames) against the string formatter TimeColumn.format, for
// timestamps over several decades, DST changes (second by second across them) and both
// precisions, in the modes both print.

import test from 'ava';
import { TimeColumn, TimeParts, type TimeMode } from '../../dissectors/render/time.js';
import { prng, writtenByOut } from '../helpers.js';

test('Out.int: digits, space and zero padding, numbers wider than the width, up to 2^53', (t) => {
  const cases: [number, number, number][] = [[0, 0, 32], [7, 6, 32], [123456, 6, 32], [1234567, 6, 32], [42, 9, 48], [999999999, 9, 48], [2 ** 53 - 1, 0, 32], [1795335097, 0, 32]];
  const got = writtenByOut((o) => { for (const [n, w, p] of cases) { o.int(n, w, p); o.byte(124); } });
  const want = cases.map(([n, w, p]) => String(n).padStart(w, p === 48 ? '0' : ' ') + '|').join('');
  t.is(got, want);
});

test('TimeParts.writeParts prints what TimeColumn.format prints (hms, date, epoch, none; local and UTC; 6 and 9 digits)', (t) => {
  const r = prng(5);
  const stamps: [number, number][] = [[0, 0], [1, 999_999_999], [1_711_846_799, 500_000_000], [1_711_846_800, 1], [1_729_990_800, 123_456_789], [4_294_967_295, 999_999_999]];
  for (let i = 0; i < 300; i++) stamps.push([Math.floor(r() * 4_294_967_296), Math.floor(r() * 1e9)]);
  // a burst inside one second, then the next: the cached prefix must follow
  for (let i = 0; i < 20; i++) stamps.push([1_795_335_097 + (i >> 3), i * 37_000_123]);
  // second after second (and in steps of 7) across DST changes and an offset with seconds in it
  // (Monrovia's -0:44:30 until 1972): the prefix changed only in its SS digits within a minute
  for (const at of [1_711_846_800, 1_729_990_800, 63_590_400 + 2_670]) {
    for (let k = -150; k <= 150; k++) stamps.push([at + k, (k + 150) * 1_000_123]);
    for (let k = -4_000; k <= 4_000; k += 7) stamps.push([at + k, 1_000]);
    for (let k = 150; k >= -150; k--) stamps.push([at + k, 999_999_999]);
  }
  const tz = process.env.TZ;
  for (const zone of ['UTC', 'Europe/Berlin', 'America/Sao_Paulo', 'Africa/Monrovia']) {
    process.env.TZ = zone;
    for (const mode of ['hms', 'date', 'epoch', 'none'] as TimeMode[]) {
      for (const utc of [false, true]) {
        for (const digits of [6, 9] as const) {
          const col = new TimeColumn(mode, utc);
          const parts = new TimeParts(mode, utc);
          t.true(parts.supported);
          const want = stamps.map(([s, ns]) => { const c = col.format(BigInt(s) * 1_000_000_000n + BigInt(ns), digits); return c ? c + ' ' : ''; }).join('\n');
          const got = writtenByOut((o) => stamps.forEach(([s, ns], i) => { if (i > 0) o.byte(10); parts.writeParts(o, s, ns, digits); }));
          t.is(got, want, `${zone} ${mode} utc=${utc} digits=${digits}`);
        }
      }
    }
  }
  process.env.TZ = tz;
  for (const mode of ['delta', 'since-first', 'rel'] as TimeMode[]) t.false(new TimeParts(mode).supported, mode);
});
