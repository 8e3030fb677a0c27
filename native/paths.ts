// Where the project's native addons are, from source (tsx) or from dist/: the package root is
// the nearest folder up whose package.json names smcscope. One lookup for every addon loader.

import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

let root: string | undefined;

export function packageRoot(): string {
  if (root !== undefined) return root;
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const pj = join(dir, 'package.json');
    if (existsSync(pj)) {
      try {
        if ((JSON.parse(readFileSync(pj, 'utf8')) as { name?: string }).name === 'smcscope') return (root = dir);
      } catch { /* keep looking */ }
    }
    const up = dirname(dir);
    if (up === dir) return (root = process.cwd());
    dir = up;
  }
}

/** Absolute path of a file of the package, e.g. nativePath('native/build/Release/pcap_live.node'). */
export function nativePath(rel: string): string {
  return join(packageRoot(), rel);
}
