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

// tcpdump's -x / -X / -A output (print-ascii.c), byte for byte, so that a tcpdump user's
// eyes and scripts find what they expect: 16 bytes a line in 16-bit groups after a tab and a
// hex offset; -X adds the bytes 0x21–0x7e as ASCII (space too is a dot there); -A prints
// the bytes as text, keeping tab, space and newline, dropping a CR before a newline.

/** `\t0x0010:  0a37 0002 8730 3039 …` lines (-x), with the ASCII column (-X) when `ascii`. */
export function tcpdumpHex(b: Uint8Array, ascii: boolean): string {
  const lines: string[] = [];
  for (let o = 0; o < b.length; o += 16) {
    let h = '';
    let a = '';
    const end = Math.min(o + 16, b.length);
    for (let i = o; i < end; i += 2) {
      const c1 = b[i]!;
      const c2 = b[i + 1];
      h += ' ' + HEX[c1]! + (c2 !== undefined && i + 1 < end ? HEX[c2]! : '');
      a += c1 > 0x20 && c1 < 0x7f ? String.fromCharCode(c1) : '.';
      if (c2 !== undefined && i + 1 < end) a += c2 > 0x20 && c2 < 0x7f ? String.fromCharCode(c2) : '.';
    }
    const off = '\t0x' + o.toString(16).padStart(4, '0') + ': ';
    lines.push(ascii ? `${off}${h.padEnd(40)}  ${a}` : off + h);
  }
  return lines.join('\n');
}

/** -A: the bytes as text (printable, tab, space, newline), others as '.'; a CR before a
 *  newline or at the very end is left out, as tcpdump does. Starts on a new line. */
export function tcpdumpAscii(b: Uint8Array): string {
  let s = '';
  for (let i = 0; i < b.length; i++) {
    const c = b[i]!;
    if (c === 0x0d) {
      // tcpdump: "Don't print CRs at the end of the line"; in the middle of one, a '.'
      if (b.length - (i + 1) > 1 && b[i + 1] !== 0x0a) s += '.';
    } else s += (c > 0x20 && c < 0x7f) || c === 0x09 || c === 0x20 || c === 0x0a ? String.fromCharCode(c) : '.';
  }
  return s;
}
