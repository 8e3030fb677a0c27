// makeChalk without colour returns a stand-in that does not load chalk (cli/output.ts PLAIN):
// it must print exactly what chalk itself prints at level 0, for every way the renderers call it.

import test from 'ava';
import { Chalk, type ChalkInstance } from 'chalk';
import { makeChalk } from '../../cli/output.js';

test('makeChalk(false) prints what chalk prints at level 0: styles, chains, several arguments, visible, colour models', (t) => {
  const plain = makeChalk(false);
  const real = new Chalk({ level: 0 });
  t.is(plain.level, 0);
  t.not(plain as unknown, real as unknown);
  const calls: Array<(c: ChalkInstance) => string> = [
    (c) => c.red('x'), (c) => c.bold.red('a b'), (c) => c.dim(''), (c) => c.cyan(42 as unknown as string),
    (c) => c.yellow('a', 'b', 3 as unknown as string), (c) => c.magenta(), (c) => c.bold.underline.inverse('z'),
    (c) => c('plain', 'call'), (c) => c.visible('gone'), (c) => c.red.visible('gone'), (c) => c.visible.red('gone'),
    (c) => c.hex('#ff0000')('hex'), (c) => c.bgRgb(1, 2, 3).bold('rgb'), (c) => c.ansi256(5)('n'),
    (c) => c.green(undefined as unknown as string), (c) => c.blue('ü€ line\nbreak'),
  ];
  for (const [i, f] of calls.entries()) t.is(f(plain), f(real), `call ${i}`);
});

test('makeChalk(true) off a terminal or with NO_COLOR has no colour; on a terminal it is chalk', (t) => {
  const tty = { isTTY: true } as NodeJS.WriteStream;
  const pipe = { isTTY: false } as NodeJS.WriteStream;
  t.is(makeChalk(true, pipe).red('x'), 'x');
  const saved = process.env.NO_COLOR;
  process.env.NO_COLOR = '1';
  t.is(makeChalk(true, tty).red('x'), 'x');
  delete process.env.NO_COLOR;
  t.is(makeChalk(true, tty).red('x'), '\u001b[31mx\u001b[39m');
  if (saved !== undefined) process.env.NO_COLOR = saved;
});
