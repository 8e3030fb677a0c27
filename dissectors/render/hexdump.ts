// Classic offset / hex / ASCII dump, as `tcpdump -X` and Wireshark's bytes pane show it.

const HEX: string[] = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));

export function hexdump(b: Uint8Array, indent = ''): string {
  const lines: string[] = [];
  for (let o = 0; o < b.length; o += 16) {
    let h = '';
    let a = '';
    for (let i = 0; i < 16; i++) {
      const c = b[o + i];
      if (i === 8) h += ' ';
      if (c === undefined) { h += '   '; continue; }
      h += HEX[c] + ' ';
      a += c >= 0x20 && c < 0x7f ? String.fromCharCode(c) : '.';
    }
    lines.push(`${indent}${o.toString(16).padStart(4, '0')}  ${h} ${a}`);
  }
  return lines.join('\n');
}
