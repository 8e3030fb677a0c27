// Host-side part of scenario q-ibverbs-kernel: it only stages what guest A needs to run the
// endpoint on the ibverbs provider into the run folder (the guest's /out), then says host.staged:
//   /out/node                                   this host's node binary (same Debian release as the guest)
//   /out/pkg/guest.mjs                          q-ibverbs-kernel.guest.ts + endpoint/, bundled by esbuild
//   /out/pkg/package.json                       {"name":"smcscope"}: packageRoot() for the addon paths
//   /out/pkg/native/verbs/build/Release/verbs.node   the libibverbs addon (the guest has rdma-core)
//   /out/pkg/native/bpf/build/{smcr-helper,smcr_opt.bpf.o}   TCP option 254 (eBPF sock_ops)
//   /out/pkg/lib/{libbpf.so.1,libelf.so.1}      the helper's libraries (not in the guest image)
// Nothing runs on the host side: both SMC-R peers are guests (A: our endpoint, B: the kernel).
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { verbsAddonPath } from '../../../endpoint/verbs/ibverbs/index.js';
import { tcpOptionPaths } from '../../../endpoint/tcpopt/index.js';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..', '..');
const runDir = process.env.LAB_RUN;
const sync = process.env.LAB_SYNC;
if (!runDir || !sync) { console.error('host part: LAB_SYNC/LAB_RUN not set (run through the lab harness)'); process.exit(2); }
const t0 = Date.now();
const pkg = join(runDir, 'pkg');
const need = [verbsAddonPath(), tcpOptionPaths().helper, tcpOptionPaths().object];
for (const f of need) if (!existsSync(f)) { console.error(`host part: ${f} is not built (npm ci builds it)`); process.exit(1); }
mkdirSync(join(pkg, 'native', 'verbs', 'build', 'Release'), { recursive: true });
mkdirSync(join(pkg, 'native', 'bpf', 'build'), { recursive: true });
mkdirSync(join(pkg, 'lib'), { recursive: true });
copyFileSync(process.execPath, join(runDir, 'node'));
copyFileSync(verbsAddonPath(), join(pkg, 'native', 'verbs', 'build', 'Release', 'verbs.node'));
copyFileSync(tcpOptionPaths().helper, join(pkg, 'native', 'bpf', 'build', 'smcr-helper'));
copyFileSync(tcpOptionPaths().object, join(pkg, 'native', 'bpf', 'build', 'smcr_opt.bpf.o'));
// the helper's shared libraries, as this host's loader resolves them
const ldd = spawnSync('ldd', [tcpOptionPaths().helper], { encoding: 'utf8' }).stdout ?? '';
for (const lib of ['libbpf.so.1', 'libelf.so.1']) {
  const m = new RegExp(`${lib.replace(/\./g, '\\.')} => (\\S+)`).exec(ldd);
  if (!m) { console.error(`host part: the helper does not link ${lib}? ldd: ${ldd}`); process.exit(1); }
  copyFileSync(m[1]!, join(pkg, 'lib', lib));
}
writeFileSync(join(pkg, 'package.json'), JSON.stringify({ name: 'smcscope', private: true, type: 'module' }));
const esb = spawnSync(join(root, 'node_modules', '.bin', 'esbuild'), [join(here, 'q-ibverbs-kernel.guest.ts'), '--bundle', '--platform=node', '--format=esm',
  '--target=node20', `--outfile=${join(pkg, 'guest.mjs')}`, '--log-level=warning'], { encoding: 'utf8' });
if (esb.status !== 0) { console.error(`host part: esbuild: ${esb.stderr}`); process.exit(1); }
writeFileSync(join(sync, 'host.staged'), '');
console.log(`staged node, the ibverbs addon, the TCP option helper and the bundle in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
