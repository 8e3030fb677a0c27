// Classic offset / hex / ASCII dump, as `tcpdump -X` and Wireshark's bytes pane show it.

const HEX: string[] = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));
const HEXB = new TextEncoder().encode('0123456789abcdef');
/** Reused between calls (grown when a frame needs more): no buffer per frame. */
let scratch = Buffer.allocUnsafe(1 << 16);

/**
 * `0010  0a 37 00 02 87 30 30 39  … ` lines: offset, 16 bytes in two groups of 8, ASCII column.
 * Written as bytes into one buffer and decoded once: `-V` dumps every frame, and building the
 * text a byte at a time was a fifth of its run time.
 */
export function hexdump(b: Uint8Array, indent = ''): string {
  const n = b.length;
  if (n === 0) return '';
  const offDigits = Math.max(4, (n - 1).toString(16).length);
  const lines = Math.ceil(n / 16);
  const lineMax = indent.length + offDigits + 2 + 49 + 1 + 16 + 1;
  if (scratch.length < lines * lineMax) scratch = Buffer.allocUnsafe(lines * lineMax * 2);
  const out = scratch;
  let w = 0;
  for (let o = 0; o < n; o += 16) {
    if (o > 0) out[w++] = 0x0a;
    w += out.write(indent, w, 'latin1');
    for (let k = offDigits - 1; k >= 0; k--) out[w + offDigits - 1 - k] = HEXB[(o >>> (4 * k)) & 0xf]!;
    w += offDigits;
    out[w++] = 0x20; out[w++] = 0x20;
    for (let i = 0; i < 16; i++) {
      if (i === 8) out[w++] = 0x20;
      const j = o + i;
      if (j < n) { const c = b[j]!; out[w++] = HEXB[c >> 4]!; out[w++] = HEXB[c & 0xf]!; } else { out[w++] = 0x20; out[w++] = 0x20; }
      out[w++] = 0x20;
    }
    out[w++] = 0x20;
    const end = Math.min(o + 16, n);
    for (let j = o; j < end; j++) { const c = b[j]!; out[w++] = c >= 0x20 && c < 0x7f ? c : 0x2e; }
  }
  return out.toString('latin1', 0, w);
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
