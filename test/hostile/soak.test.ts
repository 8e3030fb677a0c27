// The CI version of the soak (soak.ts): 64 SMC-R connections for 60 s through 1 % loss, duplication
// and reordering on both ends; every echoed byte compared, server RSS flat.
import test from 'ava';
import { soak } from './soak.js';

test('soak: 64 connections, 60 s, 1 % loss, duplication and reordering: every byte verified, RSS flat', async (t) => {
  t.timeout(180_000);
  const r = await soak(60, 64, '127.0.98');
  t.log(`${r.connections} connections (${r.smcr} SMC-R), ${r.bytesVerified} bytes verified, RSS ${r.rssStartKb} → ${r.rssEndKb} kB (samples ${r.rssSamplesKb.join(' ')})`);
  t.is(r.smcr, 64);
  t.deepEqual(r.errors, []);
  t.is(r.mismatches, 0);
  t.true(r.bytesVerified > 10 * 1024 * 1024, `${r.bytesVerified} bytes`);
  // Flat: the end within 25 % (or 25 MB) of the sample after the warm-up (a third of the run).
  t.true(r.rssEndKb <= Math.max(r.rssStartKb * 1.25, r.rssStartKb + 25_000), `RSS ${r.rssStartKb} → ${r.rssEndKb} kB`);
});
