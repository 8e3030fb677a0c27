// The floor under any JavaScript replay of a capture on this machine, run by `npm run bench`
// beside smcdump, tshark and tcpdump: how much CPU it takes only to read the file and walk its
// records, and with a masked CRC-32 over every RoCE frame's ICRC range on top (what verifying
// the ICRC cannot avoid). No decoding, no state, no output. Issue 16's target of 2 M frames/s
// is read against these rows: a replay cannot be faster than its floor.
//
//   node dist/bench/floor.js FILE walk   read in 2 MiB blocks, step over every pcap record
//   node dist/bench/floor.js FILE crc    the same, plus the CRC of each UDP 4791 frame
//
// Classic pcap only (what bench/replay.ts builds), either byte order and time resolution.

import { closeSync, openSync, readSync } from 'node:fs';
import { crc32Engine, registerTrailerMask, trailerCheck } from '../dissectors/wire/crc32.js';
import { u16 } from '../dissectors/wire/common.js';
import { IPPROTO_UDP } from '../dissectors/net/ipv4.js';
import { ETHERNET_FIELDS, ETHERNET_LEN, ETHERTYPE, IPV4_FIELDS, IPV4_MIN_LEN, UDP_FIELDS, UDP_LEN } from '../dissectors/wire/views/net.js';
import { BTH_LEN, ROCE_V2_PORT } from '../dissectors/wire/ib.js';

const BLOCK = 2 << 20;
const FILE_HEADER = 24;
const RECORD_HEADER = 16;
/** Ethernet + IPv4 without options + UDP: where the BTH starts in the frames counted here. */
const BTH_AT = ETHERNET_LEN + IPV4_MIN_LEN + UDP_LEN;

function main(): void {
  const [file, mode] = process.argv.slice(2);
  if (!file || (mode !== 'walk' && mode !== 'crc')) throw new Error('usage: floor.js FILE walk|crc');
  const crc = mode === 'crc';
  // One CRC over the bytes the ICRC covers (IPv4 header to the ICRC); the mask's content does
  // not change the cost.
  const maskId = crc ? registerTrailerMask(new Uint8Array(IPV4_MIN_LEN + UDP_LEN + BTH_LEN), 0) : -1;
  if (crc && crc32Engine() !== 'pclmul') throw new Error('the CRC addon is not built: npm run build:native');
  const fd = openSync(file, 'r');
  const buf = Buffer.allocUnsafe(BLOCK);
  let have = readSync(fd, buf, 0, BLOCK, null);
  const magic = buf.readUInt32LE(0);
  const le = magic === 0xa1b2c3d4 || magic === 0xa1b23c4d;
  if (!le && buf.readUInt32BE(0) !== 0xa1b2c3d4 && buf.readUInt32BE(0) !== 0xa1b23c4d) throw new Error(`${file}: not a classic pcap file`);
  let p = FILE_HEADER;
  let frames = 0;
  let roce = 0;
  let checked = 0;
  for (;;) {
    if (have - p < RECORD_HEADER || have - p < RECORD_HEADER + (le ? buf.readUInt32LE(p + 8) : buf.readUInt32BE(p + 8))) {
      // move the partial record to the front and fill the rest of the block
      buf.copy(buf, 0, p, have);
      have -= p;
      p = 0;
      const n = readSync(fd, buf, have, BLOCK - have, null);
      if (n === 0) break;
      have += n;
      continue;
    }
    const caplen = le ? buf.readUInt32LE(p + 8) : buf.readUInt32BE(p + 8);
    const d = p + RECORD_HEADER;
    if (crc && caplen >= BTH_AT + BTH_LEN + 4
      && u16(buf, d + ETHERNET_FIELDS.ethertype.at) === ETHERTYPE.IPV4
      && buf[d + ETHERNET_LEN + IPV4_FIELDS.protocol.at] === IPPROTO_UDP
      && u16(buf, d + ETHERNET_LEN + IPV4_MIN_LEN + UDP_FIELDS.dstPort.at) === ROCE_V2_PORT) {
      roce++;
      if (trailerCheck(buf, d + ETHERNET_LEN, maskId, d + caplen) >= 0) checked++;
    }
    frames++;
    p = d + caplen;
  }
  closeSync(fd);
  // stderr, so that a caller timing it with stdout to /dev/null still sees what was walked
  process.stderr.write(`${frames} frames${crc ? `, ${roce} RoCE frames, ${checked} checksummed (${crc32Engine()})` : ''}\n`);
}

main();
