// smcdump -F pcap: a timestamp classic pcap cannot hold (32-bit unsigned seconds: 1970…2106) is
// refused with one clear error instead of being wrapped into a wrong date; pcapng keeps it.
import test from 'ava';
import { MemorySink, PcapWriter, PcapngWriter } from '../../capture/writer.js';
import { CaptureFormatError, LINKTYPE, type CapturedFrame } from '../../capture/types.js';
import { readCaptureBuffer } from '../../capture/reader.js';

const frame = (tsNs: bigint): CapturedFrame => ({ tsNs, linktype: LINKTYPE.ETHERNET, data: new Uint8Array(60), caplen: 60, origlen: 60, ifIndex: 0 });

test('pcap refuses a timestamp after 2106 or before 1970; the last representable second is written exactly', (t) => {
  const w = new PcapWriter(new MemorySink(), { nanosecond: true });
  w.write(frame(4294967295_999999999n));
  const e = t.throws(() => w.write(frame(4294967296_000000000n)), { instanceOf: CaptureFormatError });
  t.regex(e!.message, /classic pcap cannot hold the timestamp of frame 2 .*write pcapng instead/);
  t.throws(() => new PcapWriter(new MemorySink()).write(frame(-1n)), { instanceOf: CaptureFormatError });
});

test('pcapng keeps the timestamp pcap refuses', (t) => {
  const sink = new MemorySink();
  const w = new PcapngWriter(sink);
  w.write(frame(4294967296_000000001n));
  w.close();
  const frames = [...readCaptureBuffer(sink.toBytes())];
  t.is(frames[0]!.tsNs, 4294967296_000000001n);
});
