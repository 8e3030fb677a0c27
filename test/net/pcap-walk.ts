// Tiny test-local pcap walker (classic pcap, little-endian, µs): 24-byte global header,
// then 16-byte record headers (ts_sec, ts_usec, caplen, origlen) + data.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from '../helpers.js';

export interface PcapRecord { n: number; data: Uint8Array; caplen: number; origlen: number; linktype: number }

export const PCAP_DIR = join(ROOT, 'pcaps') + '/';

export function readPcap(name: string): PcapRecord[] {
  const buf = readFileSync(PCAP_DIR + name);
  const b = new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength);
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  if (dv.getUint32(0, true) !== 0xa1b2c3d4) throw new Error(`${name}: not a little-endian µs pcap`);
  const linktype = dv.getUint32(20, true);
  const out: PcapRecord[] = [];
  let o = 24;
  while (o + 16 <= b.length) {
    const caplen = dv.getUint32(o + 8, true);
    const origlen = dv.getUint32(o + 12, true);
    out.push({ n: out.length + 1, data: b.subarray(o + 16, o + 16 + caplen), caplen, origlen, linktype });
    o += 16 + caplen;
  }
  return out;
}

/** Classic little-endian pcap file bytes from frames (for tshark cross-checks). */
export function writePcap(frames: readonly Uint8Array[], linktype: number): Uint8Array {
  let n = 24;
  for (const f of frames) n += 16 + f.length;
  const out = new Uint8Array(n);
  const dv = new DataView(out.buffer);
  dv.setUint32(0, 0xa1b2c3d4, true);
  dv.setUint16(4, 2, true);
  dv.setUint16(6, 4, true);
  dv.setUint32(16, 262144, true);
  dv.setUint32(20, linktype, true);
  let o = 24;
  for (let i = 0; i < frames.length; i++) {
    const f = frames[i]!;
    dv.setUint32(o, 1700000000 + i, true);
    dv.setUint32(o + 8, f.length, true);
    dv.setUint32(o + 12, f.length, true);
    out.set(f, o + 16);
    o += 16 + f.length;
  }
  return out;
}
