// Man pages and completions are generated from the commands' commander definitions
// (cli/gendocs.ts): every option --help lists is in the man page and in the completions, the
// page renders without groff warnings, and the exit codes the help states are the real ones.
import test from 'ava';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generate, helpText } from '../../cli/gendocs.js';
import { buildProgram as smcdump } from '../../cli/smcdump.js';
import { buildProgram as smcping } from '../../cli/smcping.js';
import { buildProgram as smcperf } from '../../cli/smcperf.js';
import { ROOT, haveCommand, pcapPath } from '../helpers.js';

const out = mkdtempSync(join(tmpdir(), 'smcscope-share-'));
generate(out);
const PROGRAMS = { smcdump, smcping, smcperf };

for (const [name, build] of Object.entries(PROGRAMS)) {
  test(`${name}: man page = --help (options, examples, exit status), renders without warnings`, (t) => {
    const page = join(out, 'man', 'man1', `${name}.1`);
    t.true(existsSync(page));
    const cmd = build();
    const help = cmd.createHelp();
    // no line breaks, so no hyphenation: the text can be searched
    const r = spawnSync('man', ['-l', page], { encoding: 'utf8', env: { ...process.env, MANWIDTH: '2000', MAN_KEEP_FORMATTING: '', GROFF_NO_SGR: '1' } });
    if (r.error || r.status !== 0) { t.log('man not installed: checked the roff source only'); }
    const text = (r.stdout ?? '').replace(/.\x08/g, '');
    const src = readFileSync(page, 'utf8');
    for (const o of help.visibleOptions(cmd)) {
      const term = help.optionTerm(o);
      if (text) t.true(text.includes(term), `${name} man page lists ${term}`);
      t.true(src.includes(term.split(', ').pop()!.split(' ')[0]!.replace(/-/g, '\\-')), `roff source has ${term}`);
    }
    if (text) {
      t.regex(text, /\nEXIT STATUS\n\s+\S/);
      const exit = /Exit status[^:]*: ([^\n]+)/.exec(helpText(build()).after)![1]!;
      t.true(text.replace(/\s+/g, ' ').includes(exit.replace(/\s+/g, ' ')), 'the exit status text of --help');
      t.regex(text, /\nEXAMPLES\n/);
    }
    if (haveCommand('groff')) {
      const w = spawnSync('groff', ['-man', '-ww', '-z', page], { encoding: 'utf8' });
      t.is(w.stderr, '', 'groff warnings');
    }
  });

  test(`${name}: bash completion offers exactly the --help options`, (t) => {
    const file = join(out, 'bash-completion', 'completions', name);
    const complete = (words: string[]): string[] => {
      const script = `source ${JSON.stringify(file)}; COMP_WORDS=(${words.map((w) => JSON.stringify(w)).join(' ')}); COMP_CWORD=${words.length - 1}; _${name}; printf '%s\\n' "\${COMPREPLY[@]}"`;
      const r = spawnSync('bash', ['-c', script], { encoding: 'utf8' });
      t.is(r.status, 0, r.stderr);
      return r.stdout.split('\n').filter(Boolean);
    };
    const cmd = build();
    const flags = cmd.createHelp().visibleOptions(cmd).flatMap((o) => [o.short, o.long]).filter((f): f is string => !!f);
    t.deepEqual(complete([name, '-']).sort(), [...new Set(flags)].sort());
    if (name === 'smcdump') {
      t.deepEqual(complete([name, '-F', '']).sort(), ['pcap', 'pcapng']);
      t.true(complete([name, '-i', '']).includes('lo'));
      t.deepEqual(complete([name, '--time-s']), ['--time-stamp-precision']);
    }
  });
}

test('zsh completion files name their command and every option', (t) => {
  for (const [name, build] of Object.entries(PROGRAMS)) {
    const src = readFileSync(join(out, 'zsh', 'site-functions', `_${name}`), 'utf8');
    t.true(src.startsWith(`#compdef ${name}\n`));
    const cmd = build();
    for (const o of cmd.createHelp().visibleOptions(cmd)) t.true(src.includes(`${o.long ?? o.short}[`), `${name} ${o.flags}`);
  }
});

test('the exit codes --help states are the ones the commands return', (t) => {
  const run = (cmd: string, args: string[]): number | null => spawnSync(process.execPath, [join(ROOT, 'dist', 'cli', 'bin', `${cmd}.js`), ...args], { cwd: ROOT, encoding: 'utf8', timeout: 30_000 }).status;
  // smcdump: 0 success (issues included), 1 unreadable/truncated input or bad filter, 2 bad arguments
  t.is(run('smcdump', ['-r', pcapPath('a-first-contact'), '-q']), 0);
  t.is(run('smcdump', ['-r', '/nonexistent.pcap']), 1);
  t.is(run('smcdump', ['-r', pcapPath('a-first-contact'), 'udp prot 1']), 1);
  t.is(run('smcdump', ['--bogus']), 2);
  t.is(run('smcdump', ['-c', '0', '-r', pcapPath('a-first-contact')]), 2);
  t.is(run('smcdump', []), 2);
  // smcping / smcperf: 2 usage, 1 no reply / a test failed (nothing listens on port 1)
  for (const c of ['smcping', 'smcperf']) {
    t.is(run(c, ['--bogus']), 2, `${c} usage`);
    t.is(run(c, ['--version']), 0);
  }
  t.is(run('smcping', ['127.0.0.1', '-p', '1', '-c', '1', '--no-tcp-option', '-b', '127.0.0.1']), 1, 'smcping: refused');
  t.is(run('smcperf', ['127.0.0.1', '-p', '1', '-t', '1', '--no-tcp-option', '-b', '127.0.0.1']), 1, 'smcperf: connect failed');
});
