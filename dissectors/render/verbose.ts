// `-V`: the full field tree with byte offsets, the issues, and a hex dump of the frame.

import type { ChalkInstance } from 'chalk';
import type { DecodedFrame } from '../frame.js';
import type { FieldNode } from '../wire/common.js';
import { hexdump } from './hexdump.js';

const INDENT: string[] = Array.from({ length: 16 }, (_, i) => '    '.repeat(i));

export function renderTree(d: DecodedFrame, c: ChalkInstance): string {
  const lines: string[] = [];
  // chalk costs a call per node even without colour; skip it when there is none
  const dim = c.level > 0 ? (s: string): string => c.dim(s) : undefined;
  const walk = (nodes: FieldNode[], depth: number): void => {
    const ind = INDENT[depth + 1] ?? '    '.repeat(depth + 1);
    for (const n of nodes) {
      const range = `[${n.offset}${n.length > 1 ? '-' + (n.offset + n.length - 1) : ''}]`;
      const val = n.value !== undefined ? ': ' + n.value : '';
      lines.push(`${ind}${n.name}${val} ${dim ? dim(range) : range}`);
      if (n.children) walk(n.children, depth + 1);
    }
  };
  lines.push(`    Frame ${d.n}: ${d.origlen} bytes on wire, ${d.caplen} captured, link type ${d.linktype}, interface ${d.ifIndex}`);
  walk(d.tree ?? [], 0);
  if (d.issues.length > 0) {
    lines.push('    Issues:');
    for (const i of d.issues) {
      const col = i.severity === 'error' ? c.red : i.severity === 'warn' ? c.yellow : c.dim;
      lines.push(`        ${col(i.severity)} ${i.code} [${i.offset}${i.length > 1 ? '-' + (i.offset + i.length - 1) : ''}]: ${i.message}`);
    }
  }
  if (d.bytes) lines.push(hexdump(d.bytes, '    '));
  return lines.join('\n');
}
