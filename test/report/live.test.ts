// smcdump -i … --report: the report is written when a live capture ends (Ctrl-C), from the
// frames captured. Root, in a network namespace of its own where a real kernel capture is
// replayed through real sockets (test/live/netns.ts, as the live capture tests do).
import test from 'ava';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pcapPath } from '../helpers.js';
import { Netns, SMCDUMP, script, liveSkipReason, liveSummary } from '../live/netns.js';

const skip = liveSkipReason();
(skip ? test.skip : test.serial)(`smcdump -i lo --report: written at the end of a live capture${skip ? ` [skipped: ${skip}]` : ''}`, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'smcreport-live-'));
  const ns = Netns.create('rep');
  try {
    const out = join(dir, 'live.html');
    const cap = ns.spawn(process.execPath, [...SMCDUMP, '-i', 'lo', '-q', '--no-icrc', '--report', out, 'udp port 4791 or tcp']);
    await cap.waitFor(/listening on lo/);
    const sent = JSON.parse(ns.run(process.execPath, [...script('replay'), pcapPath('a-first-contact')], { timeout: 120_000 })) as { udp: number; tcp: number };
    const { code } = await cap.stop('SIGINT');
    t.is(code, 0, cap.err);
    const s = liveSummary(cap.err);
    const html = readFileSync(out, 'utf8');
    const m = /<script id="report-data" type="application\/json">(.*?)<\/script>/s.exec(html);
    t.truthy(m, 'the report data block');
    const d = JSON.parse(m![1]!) as { frames: number; summary: { linkGroups: unknown[]; connections: { mode: string }[] }; ladder: { t: number[] } };
    t.is(d.frames, s.captured, 'every captured frame tracked');
    t.is(d.summary.linkGroups.length, 1, 'the link group rebuilt from the live frames');
    t.true(d.summary.connections.some((c) => c.mode === 'smc-r'));
    t.true(d.ladder.t.length >= sent.udp, 'a ladder row per frame');
  } finally {
    ns.delete();
    rmSync(dir, { recursive: true, force: true });
  }
});
