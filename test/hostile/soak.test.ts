// The CI version of the soak (soak.ts): 64 SMC-R connections for 60 s through 1 % loss and
// 1 % duplication (reordering: see FAULTS in soak.ts); every echoed byte compared, server RSS flat.
import test from 'ava';
import { soak } from './soak.js';

test('soak: 64 connections, 60 s, 1 % loss and duplication: every byte verified, RSS flat', async (t) => {
  t.timeout(180_000);
  const r = await soak(60, 64, '127.0.98');
  t.log(`${r.connections} connections (${r.smcr} SMC-R), ${r.bytesVerified} bytes verified, RSS ${r.rssStartKb} → ${r.rssEndKb} kB (samples ${r.rssSamplesKb.join(' ')})`);
  t.is(r.smcr, 64);
  t.deepEqual(r.errors, []);
  t.is(r.mismatches, 0);
  t.true(r.bytesVerified > 10 * 1024 * 1024, `${r.bytesVerified} bytes`);
  // Flat: the end within 20 % (or 20 MB) of the sample after warm-up.
  t.true(r.rssEndKb <= Math.max(r.rssStartKb * 1.2, r.rssStartKb + 20_000), `RSS ${r.rssStartKb} → ${r.rssEndKb} kB`);
});
