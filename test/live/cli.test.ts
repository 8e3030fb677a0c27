// smcdump's capture-related options that need no privileges: BPF filters on files (checked
// against tcpdump's selection of the same files), -r -w copies read by tshark, -D, the
// one-line errors for unknown interfaces and bad filters, and the -r progress bar.
import test from 'ava';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT, pcapPath, readFrames, haveCommand, KERNEL_CAPTURES } from '../helpers.js';
import { SMCDUMP } from './netns.js';
import { Progress, wantProgress } from '../../cli/progress.js';
import { BpfMatcher } from '../../capture/live.js';

const addonBuilt = existsSync(join(ROOT, 'native', 'build', 'Release', 'pcap_live.node'));
const withAddon = addonBuilt ? test : test.skip;
const title = (s: string): string => (addonBuilt ? s : `${s} [skipped: the libpcap addon is not built (npm run build:native)]`);

function smcdump(args: string[]): { code: number | null; out: string; err: string } {
  const r = spawnSync(process.execPath, [...SMCDUMP, ...args], { encoding: 'utf8', cwd: ROOT, maxBuffer: 256 << 20 });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

withAddon(title('BPF filters on files select the frames tcpdump -r selects with the same filter'), async (t) => {
  if (!haveCommand('tcpdump')) { t.fail('tcpdump is installed by install.sh'); return; }
  const filters = ['udp port 4791', 'tcp', 'tcp[tcpflags] & tcp-syn != 0', 'src host 10.55.0.2 and udp', 'greater 500', 'udp[20] = 0xfe'];
  let checked = 0;
  for (const name of KERNEL_CAPTURES) {
    const frames = await readFrames(pcapPath(name));
    for (const f of filters) {
      const td = spawnSync('tcpdump', ['-n', '-r', pcapPath(name), f], { encoding: 'utf8', maxBuffer: 64 << 20 });
      t.is(td.status, 0, td.stderr);
      const want = td.stdout.split('\n').filter(Boolean).length;
      const m = new BpfMatcher(f);
      t.is(frames.filter((x) => m.matches(x)).length, want, `${name} "${f}"`);
      m.close();
      checked += want;
    }
  }
  t.true(checked > 1000);
  // The command: -r FILE FILTER, counted in the closing summary.
  const r = smcdump(['-r', pcapPath('d-bulk-2MiB'), '-q', 'udp[20] = 0xfe']);
  t.is(r.code, 0, r.err);
  t.regex(r.err, /^69 frames matched the filter \(2252 read\); SMC: 69 cdc; 0 issues \(0 errors\)\n$/);
});

withAddon(title('-r FILE -w OUT FILTER copies the selected frames; tshark reads the copy with the same timestamps and lengths'), async (t) => {
  if (!haveCommand('tshark')) { t.fail('tshark is installed by install.sh'); return; }
  const dir = mkdtempSync(join(tmpdir(), 'smcdump-w-'));
  try {
    for (const [fmt, file] of [['pcapng', join(dir, 'clc.pcapng')], ['pcap', join(dir, 'clc.pcap')]] as const) {
      const r = smcdump(['-r', pcapPath('b-second-contact'), '-w', file, '-F', fmt, '-q', 'tcp']);
      t.is(r.code, 0, r.err);
      const src = (await readFrames(pcapPath('b-second-contact'))).filter((f) => f.data[23] === 6);
      const ts = spawnSync('tshark', ['-r', file, '-T', 'fields', '-e', 'frame.time_epoch', '-e', 'frame.len'], { encoding: 'utf8' });
      t.is(ts.status, 0, ts.stderr);
      const rows = ts.stdout.trim().split('\n').map((l) => l.split('\t'));
      t.is(rows.length, src.length);
      t.deepEqual(rows.map((x) => x[0]!.replace('.', '').replace(/^0+/, '')), src.map((f) => f.tsNs.toString()));
      t.deepEqual(rows.map((x) => Number(x[1])), src.map((f) => f.origlen));
      const again = await readFrames(file);
      t.deepEqual(again.map((f) => Buffer.from(f.data).toString('hex')), src.map((f) => Buffer.from(f.data).toString('hex')));
    }
    // -w - : the capture file on stdout (a pipe), straight into tshark.
    const q = (a: string): string => `'${a.replace(/'/g, `'\\''`)}'`;
    const sh = spawnSync('sh', ['-c', `${[process.execPath, ...SMCDUMP, '-r', pcapPath('d-bulk-2MiB'), '-w', '-', 'udp'].map(q).join(' ')} | tshark -r - -T fields -e frame.len | wc -l`], { encoding: 'utf8', cwd: ROOT });
    t.is(sh.stdout.trim(), '2238', sh.stderr);
    t.regex(sh.stderr, /^2238 frames matched the filter \(2252 read\)/m);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

withAddon(title('a bad filter quotes libpcap, in one line'), (t) => {
  const r = smcdump(['-r', pcapPath('a-first-contact'), 'udp prot 4791']);
  t.is(r.code, 1);
  t.is(r.err, 'smcdump: bad filter "udp prot 4791": can\'t parse filter expression: syntax error\n');
  const l = smcdump(['-i', 'lo', 'tcp and and']);
  t.is(l.code, 1);
  t.regex(l.err, /^smcdump: (bad filter "tcp and and": can't parse filter expression: syntax error|no permission to capture on lo: .*)\n$/);
});

withAddon(title('an unknown interface is named and the known ones listed, in one line'), (t) => {
  const r = smcdump(['-i', 'nosuch0']);
  t.is(r.code, 1);
  t.regex(r.err, /^smcdump: no interface "nosuch0" \(known: [^)]*\blo\b[^)]*\)\n$/);
});

withAddon(title('-D lists the interfaces (text and --json)'), (t) => {
  const r = smcdump(['-D']);
  t.is(r.code, 0, r.err);
  t.regex(r.out, /^\d+\.lo \[Up, Running, Loopback\]/m);
  t.regex(r.out, /^\d+\.any /m);
  const j = smcdump(['-D', '--json']);
  const o = JSON.parse(j.out) as { libpcap: string; interfaces: Array<{ name: string; loopback: boolean }> };
  t.regex(o.libpcap, /^libpcap version \d/);
  t.true(o.interfaces.some((i) => i.name === 'lo' && i.loopback));
});

test('-r and -i together, or neither, are one-line usage errors (exit 2)', (t) => {
  const both = smcdump(['-r', pcapPath('a-first-contact'), '-i', 'lo']);
  t.is(both.code, 2);
  t.is(both.err, 'smcdump: -r and -i exclude each other: read a file or capture live\n');
  const none = smcdump(['-c', '3']);
  t.is(none.code, 2);
  t.regex(none.err, /^smcdump: no input: .*-r FILE.*-i IFACE/);
});

test('--help shows live capture, -w and examples', (t) => {
  const h = smcdump(['--help']);
  t.is(h.code, 0);
  for (const s of ['-i, --interface', '-w, --write', '-F, --format', '-D, --list-interfaces', '-s, --snaplen', 'smcdump -i lo -w smc.pcapng -q', 'CAP_NET_RAW']) t.true(h.out.includes(s), s);
});

test('progress bar: drawn on stderr with --progress, erased before the summary; never when stderr is not a terminal unless asked', (t) => {
  const r = smcdump(['-r', pcapPath('d-bulk-2MiB'), '-q', '--progress']);
  t.is(r.code, 0);
  t.regex(r.err, /\r\[[#.]+\] +\d+%  [\d.]+ (B|KiB|MiB) \/ 2\.2 MiB  \d+ frames/);
  const last = r.err.split('\r').pop()!;
  t.regex(last.trimStart(), /^2252 frames; SMC: /, 'the summary starts on a clean line');
  const auto = smcdump(['-r', pcapPath('d-bulk-2MiB'), '-q']);
  t.false(auto.err.includes('\r'), 'stderr is a pipe here: no bar by default');
  // The policy itself: stdout not a terminal and stderr one => bar; flags win.
  t.true(wantProgress(undefined, false, true));
  t.false(wantProgress(undefined, true, true));
  t.false(wantProgress(undefined, false, false));
  t.true(wantProgress(true, true, false));
  t.false(wantProgress(false, false, true));
  const p = new Progress({ total: 2 << 20, width: 80, delayMs: 0 });
  const half = p.render(1 << 20, 1234);
  const m = /^\[(#+)(\.+)\]  50%  1\.0 MiB \/ 2\.0 MiB  1234 frames/.exec(half);
  t.truthy(m, half);
  t.is(m![1]!.length, m![2]!.length, 'half full');
  t.true(half.length <= 80);
  t.regex(new Progress({ total: 0, width: 80 }).render(5000, 20), /^4\.9 KiB  20 frames/);
});
