// Real capture frames for the header-codec tests, and a tiny pcap writer for tshark cross-checks.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from '../helpers.js';
import { readCaptureBuffer } from '../../capture/reader.js';

export interface PcapRecord { n: number; data: Uint8Array; caplen: number; origlen: number; linktype: number }

export const PCAP_DIR = join(ROOT, 'pcaps') + '/';

export function readPcap(name: string): PcapRecord[] {
  // The project's own reader, with frames that stay valid after the next read.
  const r = readCaptureBuffer(new Uint8Array(readFileSync(PCAP_DIR + name)), { reuseFrame: false });
  const out: PcapRecord[] = [];
  for (let f = r.next(); f; f = r.next()) out.push({ n: out.length + 1, data: f.data, caplen: f.caplen, origlen: f.origlen, linktype: f.linktype });
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
