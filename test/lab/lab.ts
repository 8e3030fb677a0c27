// `npm run lab -- <scenario>...`: run kernel interop scenarios in the lab (see docs/lab.md).
//   npm run lab -- list                 the scenarios
//   npm run lab -- a-first-contact      boot the guests, run, capture, decode, clean up
//   npm run lab -- image                build (or find) the cached guest image
//   npm run lab -- shell a              interactive guest on a fresh lab network
//   npm run lab -- preflight            can this machine run the lab? (exit 3 and why if not)
//   npm run lab -- cleanup              remove what a killed (SIGKILL) run left behind
import { Command, InvalidArgumentError } from 'commander';
import { ensureImage, listScenarios, preflight, runScenario, shell, sweepStale, type GuestName } from './harness.js';

const program = new Command('lab')
  .usage('<scenario...> | list | image | shell [a|b] | preflight | cleanup')
  .description('Kernel SMC-R interop lab: qemu guests (Linux 6.12, Soft-RoCE) on a bridge in a private network namespace.')
  .argument('<what...>', 'scenario name(s), or list, image, shell, preflight, cleanup')
  .option('--boot-timeout <s>', 'seconds a guest may take to boot', positive, 300)
  .option('--timeout <s>', 'scenario watchdog inside each guest (default: the scenario\'s, else 240)', positive)
  .option('--tcg-cpu <model>', 'qemu -cpu under TCG (default: the scenario\'s, else max,-erms)')
  .addHelpText('after', '\nExamples:\n  npm run lab -- list\n  npm run lab -- a-first-contact\n  npm run lab -- a-first-contact d-bulk-2MiB\n  npm run lab -- shell a')
  .showHelpAfterError()
  .action(async (what: string[], o: { bootTimeout: number; timeout?: number; tcgCpu?: string }) => {
    const [cmd, ...rest] = what;
    switch (cmd) {
      case 'list':
        for (const s of listScenarios()) console.log(`${s.name.padEnd(36)} guests ${s.guests.padEnd(4)}${s.host ? ' +host' : '      '}  ${s.title}`);
        return;
      case 'preflight': {
        const why = preflight();
        if (why) { console.error(`lab: cannot run here: ${why}`); process.exitCode = 3; } else console.log('lab: this machine can run the lab');
        return;
      }
      case 'cleanup':
        if (sweepStale().length === 0) console.log('lab: nothing to clean up');
        return;
      case 'image': {
        const t = Date.now();
        const r = await ensureImage();
        console.log(`lab: image ${r.built ? 'built' : 'cached'} in ${((Date.now() - t) / 1000).toFixed(1)}s: ${r.dir}`);
        return;
      }
      case 'shell': {
        const g = (rest[0] ?? 'a') as GuestName;
        if (g !== 'a' && g !== 'b') throw new InvalidArgumentError('shell takes a or b');
        process.exitCode = await shell(g);
        return;
      }
    }
    const known = new Set(listScenarios().map((s) => s.name));
    const unknown = what.filter((w) => !known.has(w));
    if (unknown.length) {
      console.error(`lab: no scenario ${unknown.join(', ')} (npm run lab -- list)`);
      process.exitCode = 2;
      return;
    }
    const results = [];
    for (const name of what) {
      results.push(await runScenario({ name, bootTimeoutS: o.bootTimeout, timeoutS: o.timeout, tcgCpu: o.tcgCpu }));
    }
    if (results.length > 1) for (const r of results) console.log(`[lab] ${r.ok ? 'PASS' : 'FAIL'} ${r.name} ${r.seconds.toFixed(1)}s${r.failure ? ` (${r.failure})` : ''}`);
    if (results.some((r) => !r.ok)) process.exitCode = 1;
  });

function positive(v: string): number {
  const n = Number(v);
  if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError('a positive number of seconds');
  return n;
}

program.parseAsync(process.argv).catch((e: unknown) => {
  console.error(`lab: ${(e as Error).message}`);
  process.exitCode = 1;
});
