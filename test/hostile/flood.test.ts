// 2000 concurrent connects to smcping -l (a separate process): the server lives, and every
// connection either completes SMC-R or falls back to TCP, and in both cases its data comes back
// exactly (SHA-256 per connection). Admission control (handshake slots, link groups of at most
// 255 connections) decides which; no connection is lost.
import test from 'ava';
import { closeAll } from '../../endpoint/index.js';
import { EchoCheck, normalPing, rssKb } from './peer.js';
import { startTarget, alive } from './servers.js';

const NET = '127.0.94';

test('2000 concurrent connects: each completes SMC-R or falls back to TCP, and echoes its data exactly', async (t) => {
  t.timeout(240_000); // runs beside the soak in CI: 2000 handshakes on 2 shared cores
  const tg = await startTarget('smcping', `${NET}.2`);
  try {
    const rss0 = rssKb(tg.proc.proc.pid!);
    const t0 = Date.now();
    const N = 2000;
    const results = await Promise.all(Array.from({ length: N }, async (_, i) => {
      let c: EchoCheck | undefined;
      try {
        c = await EchoCheck.open(tg.addr, tg.port, `${NET}.1`, { connectTimeoutMs: 30_000 });
        const ok = (await c.roundTrip(100 + (i % 200), 30_000)) && c.verify();
        return { mode: c.sock.mode, ok, why: `${c.fallbackWhy() ?? ''} ${ok ? '' : `error=${c.error} sent=${c.sentBytes} got=${c.gotBytes}`}` };
      } catch (e) {
        return { mode: 'none', ok: false, why: (e as Error).message };
      } finally {
        c?.close();
      }
    }));
    const ms = Date.now() - t0;
    const smcr = results.filter((r) => r.mode === 'smcr').length;
    const tcp = results.filter((r) => r.mode === 'tcp').length;
    const bad = results.filter((r) => !r.ok);
    const reasons = new Map<string, number>();
    for (const r of results) if (r.mode === 'tcp') reasons.set(String(r.why).split(' ')[0]!, (reasons.get(String(r.why).split(' ')[0]!) ?? 0) + 1);
    t.log(`${N} connects in ${ms} ms: ${smcr} SMC-R, ${tcp} TCP fallback, ${bad.length} failed; server RSS ${rss0} → ${rssKb(tg.proc.proc.pid!)} kB`);
    for (const [why, n] of reasons) t.log(`  fallback ×${n}: ${why}`);
    t.true(alive(tg), tg.proc.err);
    t.is(bad.length, 0, bad.slice(0, 5).map((b) => `${b.mode}: ${b.why}`).join('\n'));
    t.is(smcr + tcp, N);
    const p = await normalPing(tg.addr, tg.port, `${NET}.3`);
    t.is(p.code, 0, p.err);
  } finally {
    await closeAll();
    await tg.proc.stop();
  }
});
