// uroce's short copies go by 32-bit words when both ends are 4-byte aligned in their
// ArrayBuffers (docs/uroce.md round 13), finding each buffer's Int32Array by the identity of
// the Uint8Array in a small table. Every byte must land where a plain byte copy puts it, and
// nothing around it may change: for every length up to the word path's limit and past it, for
// every alignment of source and destination (views at byte offsets 0-3 of their buffers, and
// offsets 0-7 into the views), and with more arrays in turn than the table holds, so that
// entries are replaced while the copies go on.
import test from 'ava';
import { copyBytes } from '../../endpoint/verbs/uroce/views.js';

function pattern(n: number, seed: number): Uint8Array {
  const b = new Uint8Array(n);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) { x ^= x << 13; x ^= x >>> 17; x ^= x << 5; b[i] = x & 0xff; }
  return b;
}

test('copyBytes: every length 0-140 at every alignment of both ends, across more buffers than the word table holds', (t) => {
  // 24 source and 24 destination views (the table has 16 entries); view j sits at byte offset
  // j % 4 of its own ArrayBuffer, and every pair of byte offsets (source, destination) is taken
  // with every offset into the views, so both ends are aligned, or not, in every combination
  const srcs: Uint8Array[] = [], dsts: Uint8Array[] = [], refs: Uint8Array[] = [];
  for (let k = 0; k < 24; k++) {
    srcs.push(new Uint8Array(pattern(400, k + 1).buffer, k % 4, 300));
    const d = new Uint8Array(new ArrayBuffer(400), k % 4, 300);
    d.set(pattern(300, 1000 + k));
    dsts.push(d);
    refs.push(d.slice());
  }
  let copies = 0, mismatches = 0, turn = 0;
  for (let n = 0; n <= 140; n++) {
    for (let sbo = 0; sbo < 4; sbo++) {
      for (let dbo = 0; dbo < 4; dbo++) {
        for (let so = 0; so < 4; so++) {
          for (let dOff = 0; dOff < 4; dOff++) {
            // a different array of the wanted byte offset each time (6 of each offset, cycling)
            turn++;
            const si = 4 * (turn % 6) + sbo, di = 4 * ((turn * 5 + 1) % 6) + dbo;
            const src = srcs[si]!, dst = dsts[di]!, ref = refs[di]!;
            copyBytes(dst, dOff, src, so, n);
            for (let i = 0; i < n; i++) ref[dOff + i] = src[so + i]!;
            copies++;
            for (let i = 0; i < dst.length; i++) if (dst[i] !== ref[i]) { mismatches++; break; }
          }
        }
      }
    }
  }
  t.is(copies, 141 * 256);
  t.is(mismatches, 0);
  // the bytes around each view (in its ArrayBuffer, before and after it) were never written
  for (const d of dsts) {
    const whole = new Uint8Array(d.buffer);
    for (let i = 0; i < d.byteOffset; i++) t.is(whole[i], 0);
    for (let i = d.byteOffset + d.length; i < whole.length; i++) t.is(whole[i], 0);
  }
});

test('copyBytes: the same view object copied through again after its table entry was replaced', (t) => {
  const a = new Uint8Array(256), b = new Uint8Array(256);
  const others = Array.from({ length: 40 }, (_, i) => new Uint8Array(64).fill(i));
  for (let round = 0; round < 5; round++) {
    const src = pattern(256, 77 + round);
    a.set(src);
    copyBytes(b, 16, a, 32, 96);
    t.deepEqual(b.subarray(16, 112), src.subarray(32, 128));
    // push every entry out of the table
    for (const o of others) copyBytes(b, 200, o, 0, 48);
    t.deepEqual(b.subarray(200, 248), new Uint8Array(48).fill(39));
  }
});
