// smcdump's tcpdump flags against the real tcpdump on the same frames: the layers both print
// must be the same text — the time column (-t … -ttttt, --nano, local time in several TZ),
// the -e link-level header, the -x/-xx/-X/-XX hex lines, the -A/-AA text, and TCP sequence
// numbers (relative by default, absolute with -S). The SMC part of a line is smcdump's own.
import test from 'ava';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT, pcapPath, haveCommand, readFrames, KERNEL_CAPTURES } from '../helpers.js';

const run = promisify(execFile);
const compiled = join(ROOT, 'dist', 'cli', 'bin', 'smcdump.js');
const fromDist = import.meta.url.includes('/dist/') && existsSync(compiled);
const SMCDUMP = fromDist ? [compiled] : ['--import', 'tsx', join(ROOT, 'cli', 'bin', 'smcdump.ts')];
const haveTcpdump = haveCommand('tcpdump');
const ttest = haveTcpdump ? test : test.skip;

async function both(file: string, args: string[], tz = 'UTC', tcpdumpArgs = args): Promise<{ ours: string; theirs: string }> {
  const env = { ...process.env, TZ: tz };
  const opts = { env, cwd: ROOT, maxBuffer: 256 << 20, encoding: 'utf8' as const };
  const [o, t] = await Promise.all([
    run(process.execPath, [...SMCDUMP, '-r', file, ...args], opts),
    run('tcpdump', ['-n', '-r', file, ...tcpdumpArgs], opts),
  ]);
  return { ours: o.stdout, theirs: t.stdout };
}

/** Frames of a -x/-X output: a header line, then its tab-indented dump lines. */
function packets(out: string): Array<{ head: string; dump: string[] }> {
  const res: Array<{ head: string; dump: string[] }> = [];
  for (const l of out.split('\n')) {
    if (l === '') continue;
    if (l.startsWith('\t')) res[res.length - 1]!.dump.push(l);
    else res.push({ head: l, dump: [] });
  }
  return res;
}

const NUM = /^ *\d+ /;
const TIME: Record<string, string> = {
  '': '\\d\\d:\\d\\d:\\d\\d\\.\\d{6} ', '-t': '', '-tt': '\\d{10}\\.\\d{6} ', '-ttt': '[ -]\\d\\d:\\d\\d:\\d\\d\\.\\d{6} ',
  '-tttt': '\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d\\.\\d{6} ', '-ttttt': '[ -]\\d\\d:\\d\\d:\\d\\d\\.\\d{6} ',
};
const LINK = '[0-9a-f:]{17} > [0-9a-f:]{17}, (?:802\\.3|ethertype [^,]+ \\(0x[0-9a-f]{4}\\)), length \\d+: ';

/** tcpdump's prefix (time column, link header) of each header line, found in ours at the start. */
function samePrefixes(t: import('ava').ExecutionContext, ours: string[], theirs: string[], time: string, link: boolean, what: string): void {
  t.is(ours.length, theirs.length, `${what}: frame count`);
  const re = new RegExp(`^${time}${link ? LINK : ''}`);
  for (let i = 0; i < theirs.length; i++) {
    const m = re.exec(theirs[i]!);
    if (!m) { t.fail(`${what}: tcpdump line ${i + 1} unexpected: ${theirs[i]}`); return; }
    const mine = ours[i]!.replace(NUM, '');
    if (!mine.startsWith(m[0])) { t.is(mine.slice(0, m[0].length), m[0], `${what}: frame ${i + 1}`); return; }
  }
}

ttest('acceptance: -e -tttt -X -c 5 on every bundled capture prints what tcpdump prints, layer by layer', async (t) => {
  for (const name of KERNEL_CAPTURES) {
    const { ours, theirs } = await both(pcapPath(name), ['-e', '-tttt', '-X', '-c', '5'], 'Europe/Berlin');
    const o = packets(ours), th = packets(theirs);
    samePrefixes(t, o.map((p) => p.head), th.map((p) => p.head), TIME['-tttt']!, true, name);
    t.deepEqual(o.map((p) => p.dump), th.map((p) => p.dump), `${name}: -X lines`);
    t.true(th.every((p) => p.dump.length > 0));
  }
});

ttest('time columns -t … -ttttt with -e, in three time zones (local time like tcpdump)', async (t) => {
  const file = pcapPath('e-testlink-teardown');
  const seen = new Set<string>();
  for (const tz of ['UTC', 'America/New_York', 'Asia/Kolkata']) {
    for (const flag of ['', '-t', '-tt', '-ttt', '-tttt', '-ttttt']) {
      const args = ['-e', ...(flag ? [flag] : [])];
      const { ours, theirs } = await both(file, args, tz);
      samePrefixes(t, ours.trimEnd().split('\n'), theirs.trimEnd().split('\n'), TIME[flag]!, true, `TZ=${tz} ${flag || '(default)'}`);
      if (flag === '') seen.add(theirs.slice(0, 8));
    }
  }
  t.is(seen.size, 3, 'the time zones give three different times of day (the test is not vacuous)');
  // --utc: UTC whatever TZ says
  const u = await both(file, ['-c', '3', '--utc'], 'Asia/Kolkata', ['-c', '3']);
  const utc = await both(file, ['-c', '3'], 'UTC');
  t.deepEqual(u.ours, utc.ours);
  t.notDeepEqual(u.ours.split(' ').slice(0, 8), u.theirs.split(' ').slice(0, 8));
});

ttest('-x -xx -X -XX: the same hex (and ASCII) lines as tcpdump on every bundled capture', async (t) => {
  for (const name of KERNEL_CAPTURES) {
    for (const flag of ['-x', '-xx', '-X', '-XX']) {
      const { ours, theirs } = await both(pcapPath(name), [flag, '-c', '40']);
      const o = packets(ours), th = packets(theirs);
      t.is(o.length, th.length, `${name} ${flag}`);
      t.deepEqual(o.map((p) => p.dump), th.map((p) => p.dump), `${name} ${flag}`);
    }
  }
});

ttest('-A / -AA: the same text as tcpdump, frame by frame', async (t) => {
  for (const name of ['a-first-contact', 'c1-fallback-tcp-server', 'd-bulk-2MiB']) {
    const file = pcapPath(name);
    // Frames are found by their exact -tt timestamp: -A text can look like anything.
    const stamps = (await readFrames(file)).slice(0, 60).map((f) => `${f.tsNs / 1_000_000_000n}.${String((f.tsNs % 1_000_000_000n) / 1000n).padStart(6, '0')} `);
    const split = (out: string, num: boolean): string[] => {
      const lines = out.split('\n');
      const res: string[] = [];
      let at = -1;
      let k = 0;
      for (let i = 0; i < lines.length; i++) {
        const l = num ? lines[i]!.replace(NUM, '') : lines[i]!;
        if (k < stamps.length && l.startsWith(stamps[k]!)) { k++; at = res.push('') - 1; continue; }
        if (at >= 0) res[at] += lines[i] + '\n';
      }
      return res;
    };
    for (const flag of ['-A', '-AA']) {
      const { ours, theirs } = await both(file, [flag, '-tt', '-c', '60']);
      const o = split(ours, true), th = split(theirs, false);
      t.is(th.length, stamps.length, `${name} ${flag}: tcpdump frames found`);
      t.deepEqual(o, th, `${name} ${flag}`);
    }
  }
});

ttest('TCP sequence numbers: relative like tcpdump by default, absolute with -S', async (t) => {
  // the TCP part of smcdump's plain TCP lines (CLC segments print CLC instead)
  const tcpPart = (l: string): string | undefined => /(\d+\.\d+\.\d+\.\d+\.\d+ > \S+: Flags \[.*?, length \d+)/.exec(l)?.[1]?.replace('smc-r', 'exp-e2d4');
  for (const name of ['a-first-contact', 'c1-fallback-tcp-server', 'b-second-contact']) {
    for (const s of [[], ['-S']]) {
      const { ours, theirs } = await both(pcapPath(name), ['-t', ...s]);
      const o = ours.trimEnd().split('\n'), th = theirs.trimEnd().split('\n');
      t.is(o.length, th.length);
      let compared = 0;
      for (let i = 0; i < th.length; i++) {
        const mine = tcpPart(o[i]!);
        if (mine === undefined) continue;
        t.is(mine as string | undefined, tcpPart(th[i]!), `${name} ${s.join(' ')} frame ${i + 1}`);
        compared++;
      }
      t.true(compared > 5, `${name}: ${compared} TCP lines compared`);
    }
  }
});

ttest('nanoseconds: printed when the file has them, as tcpdump --time-stamp-precision=nano does', async (t) => {
  // A nanosecond pcap: the first-contact capture with the ns magic and sub-µs digits added.
  const src = readFileSync(pcapPath('a-first-contact'));
  const b = Buffer.from(src);
  b.writeUInt32LE(0xa1b23c4d, 0);
  for (let o = 24, k = 0; o + 16 <= b.length; k++) {
    b.writeUInt32LE(b.readUInt32LE(o + 4) * 1000 + (k * 37) % 1000, o + 4);
    o += 16 + b.readUInt32LE(o + 8);
  }
  const dir = mkdtempSync(join(tmpdir(), 'smcdump-ns-'));
  const ns = join(dir, 'ns.pcap');
  writeFileSync(ns, b);
  for (const flag of ['-tt', '-ttt', '-tttt']) {
    const r = await both(ns, [flag], 'UTC', [flag, '--time-stamp-precision=nano']);
    const nine = TIME[flag]!.replace('\\d{6}', '\\d{9}');
    samePrefixes(t, r.ours.trimEnd().split('\n'), r.theirs.trimEnd().split('\n'), nine, false, `ns file ${flag}`);
  }
  // --nano on a microsecond file, and --time-stamp-precision=micro on the ns file
  const nano = await both(pcapPath('a-first-contact'), ['--nano'], 'UTC', ['--nano']);
  samePrefixes(t, nano.ours.trimEnd().split('\n'), nano.theirs.trimEnd().split('\n'), TIME['']!.replace('\\d{6}', '\\d{9}'), false, '--nano');
  const micro = await both(ns, ['--time-stamp-precision=micro']);
  samePrefixes(t, micro.ours.trimEnd().split('\n'), micro.theirs.trimEnd().split('\n'), TIME['']!, false, 'micro');
});

ttest('Linux cooked captures (SLL, SLL2, as -i any writes them): -e header and -x/-xx lines as tcpdump', async (t) => {
  // the first-contact frames with their Ethernet header replaced by a cooked one
  const src = readFileSync(pcapPath('a-first-contact'));
  const dir = mkdtempSync(join(tmpdir(), 'smcdump-sll-'));
  const cooked = (v2: boolean): string => {
    const parts: Buffer[] = [Buffer.from(src.subarray(0, 24))];
    parts[0]!.writeUInt32LE(v2 ? 276 : 113, 20);
    for (let o = 24, k = 0; o + 16 <= src.length; k++) {
      const cap = src.readUInt32LE(o + 8), orig = src.readUInt32LE(o + 12);
      const eth = src.subarray(o + 16, o + 16 + cap);
      o += 16 + cap;
      const h = Buffer.alloc(v2 ? 20 : 16);
      const type = eth.readUInt16BE(12);
      if (v2) { h.writeUInt16BE(type, 0); h.writeUInt32BE(1, 4); h.writeUInt16BE(1, 8); h[10] = k % 5; h[11] = 6; eth.copy(h, 12, 6, 12); } else { h.writeUInt16BE(k % 5, 0); h.writeUInt16BE(1, 2); h.writeUInt16BE(6, 4); eth.copy(h, 6, 6, 12); h.writeUInt16BE(type, 14); }
      const rec = Buffer.alloc(16);
      src.copy(rec, 0, o - 16 - cap, o - 8 - cap);
      rec.writeUInt32LE(cap - 14 + h.length, 8);
      rec.writeUInt32LE(orig - 14 + h.length, 12);
      parts.push(rec, h, eth.subarray(14));
    }
    const p = join(dir, v2 ? 'sll2.pcap' : 'sll.pcap');
    writeFileSync(p, Buffer.concat(parts));
    return p;
  };
  const cookedLink = '(?:\\S+ +\\S+ +ifindex \\d+ | *\\S+ )[0-9a-f:]{17} ethertype [^,]+ \\(0x[0-9a-f]{4}\\), length \\d+: ';
  for (const v2 of [false, true]) {
    const file = cooked(v2);
    const e = await both(file, ['-e']);
    const re = new RegExp(`^${TIME['']}${cookedLink}`);
    const o = e.ours.trimEnd().split('\n'), th = e.theirs.trimEnd().split('\n');
    t.is(o.length, 45);
    t.is(o.length, th.length);
    for (let i = 0; i < th.length; i++) {
      const m = re.exec(th[i]!);
      if (!m) { t.fail(`tcpdump line unexpected: ${th[i]}`); break; }
      t.is(o[i]!.replace(NUM, '').slice(0, m[0].length), m[0], `${v2 ? 'SLL2' : 'SLL'} frame ${i + 1}`);
    }
    for (const flag of ['-x', '-xx']) {
      const x = await both(file, [flag]);
      t.deepEqual(packets(x.ours).map((p) => p.dump), packets(x.theirs).map((p) => p.dump), `${v2 ? 'SLL2' : 'SLL'} ${flag}`);
    }
  }
});

ttest('-e names EtherTypes, 802.1Q tags and 802.3 lengths as tcpdump does', async (t) => {
  // first-contact frames with other link headers: RoCE v1's type (tcpdump: Unknown), LLDP,
  // IPv6, Loopback, an 802.3 length, and a real 802.1Q tag in front of IPv4
  const src = readFileSync(pcapPath('a-first-contact'));
  const parts: Buffer[] = [Buffer.from(src.subarray(0, 24))];
  const types = [0x8915, 0x88cc, 0x86dd, 0x9000, 0x0060, -1, -1];
  for (let o = 24, k = 0; o + 16 <= src.length && k < types.length; k++) {
    const cap = src.readUInt32LE(o + 8);
    const rec = Buffer.from(src.subarray(o, o + 16));
    let d = Buffer.from(src.subarray(o + 16, o + 16 + cap));
    o += 16 + cap;
    if (types[k]! >= 0) d.writeUInt16BE(types[k]!, 12);
    else {
      d = Buffer.concat([d.subarray(0, 12), Buffer.from([0x81, 0x00, 0x20 | (k & 1) << 4, 100]), d.subarray(12)]);
      rec.writeUInt32LE(cap + 4, 8);
      rec.writeUInt32LE(rec.readUInt32LE(12) + 4, 12);
    }
    parts.push(rec, d);
  }
  const dir = mkdtempSync(join(tmpdir(), 'smcdump-eth-'));
  const file = join(dir, 'eth.pcap');
  writeFileSync(file, Buffer.concat(parts));
  const { ours, theirs } = await both(file, ['-e', '-x']);
  const o = packets(ours), th = packets(theirs);
  const vlan = '(?:vlan \\d+, p \\d+(?:, DEI)?, ethertype [^,]+ \\(0x[0-9a-f]{4}\\), )?';
  samePrefixes(t, o.map((p) => p.head), th.map((p) => p.head), TIME['']!, true, 'EtherTypes');
  const re = new RegExp(`^${TIME['']}${LINK}${vlan}`);
  for (let i = 0; i < th.length; i++) t.is(o[i]!.head.replace(NUM, '').slice(0, re.exec(th[i]!.head)![0].length), re.exec(th[i]!.head)![0]);
  t.regex(th[0]!.head, /ethertype Unknown \(0x8915\)/);
  t.regex(th[5]!.head, /vlan 100, p 1, DEI, ethertype IPv4/);
  // -x after a tag starts after it, as tcpdump's does (tcpdump dumps unknown types by itself)
  t.deepEqual(o.slice(5).map((p) => p.dump), th.slice(5).map((p) => p.dump));
});

test('several -r are merged by timestamp like mergecap; a quoted glob too', async (t) => {
  const a = pcapPath('a-first-contact'), c = pcapPath('c2-fallback-server-decline');
  const opts = { cwd: ROOT, maxBuffer: 64 << 20, encoding: 'utf8' as const };
  const merged = await run(process.execPath, [...SMCDUMP, '-tt', '--no-number', '--no-track', '-r', c, '-r', a], opts);
  const times = merged.stdout.trimEnd().split('\n').map((l) => l.split(' ')[0]!);
  t.is(times.length, 45 + 15);
  t.deepEqual(times, [...times].sort(), 'timestamp order');
  t.regex(merged.stderr, /^60 frames;/);
  if (haveCommand('mergecap') && haveTcpdump) {
    const dir = mkdtempSync(join(tmpdir(), 'smcdump-merge-'));
    await run('mergecap', ['-F', 'pcap', '-w', join(dir, 'm.pcap'), c, a]);
    const one = await run(process.execPath, [...SMCDUMP, '-tt', '--no-number', '--no-track', '-r', join(dir, 'm.pcap')], opts);
    t.is(merged.stdout, one.stdout, 'same lines as smcdump on the mergecap output');
  }
  const glob = await run(process.execPath, [...SMCDUMP, '-q', '-r', join(ROOT, 'pcaps', 'c*.pcap')], opts);
  t.regex(glob.stderr, /^\d+ frames;/);
  const n1 = Number(/^(\d+)/.exec((await run(process.execPath, [...SMCDUMP, '-q', '-r', pcapPath('c1-fallback-tcp-server')], opts)).stderr)![1]);
  t.is(Number(/^(\d+)/.exec(glob.stderr)![1]), n1 + 15, 'the glob matched both c*.pcap files');
});
