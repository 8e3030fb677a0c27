// Shared types of the capture layer: the frame handed from a source (file reader, live
// capture) to the dissectors, link-layer type numbers, and the error thrown for files that
// are not (or no longer) a readable pcap/pcapng stream.

/**
 * One captured frame.
 *
 * Readers REUSE one frame object per reader (unless created with `reuseFrame: false`) and
 * `data` is a view into the reader's internal buffer: both are valid only until the next
 * frame is read. Keep a frame with `cloneFrame()`.
 */
export interface CapturedFrame {
  /** The captured bytes (caplen of them); a view, valid until the next frame is read. */
  data: Uint8Array;
  /** Number of captured bytes (= data.length). */
  caplen: number;
  /** Length of the frame on the wire (>= caplen unless the file is odd). */
  origlen: number;
  /** Absolute time since the Unix epoch in nanoseconds (0n when the file has none, e.g. pcapng SPB). */
  tsNs: bigint;
  /** LINKTYPE_* of this frame (pcap: the file's; pcapng: its interface's). */
  linktype: number;
  /** When present and >= 0: tsNs as whole seconds since the epoch and the nanoseconds within
   *  that second (< 1e9), plain numbers, so the time column prints without BigInt arithmetic
   *  (set by the pcap reader; -1 or absent: use tsNs). */
  tsSec?: number;
  tsSubNs?: number;
  /** pcapng interface id, counted over the whole file (sections add up, as Wireshark's
   *  frame.interface_id does); 0 for pcap. */
  ifIndex: number;
  /** pcapng if_name of the frame's interface, when present. */
  ifName?: string;
  /** pcapng opt_comment(s) of the packet block (several are joined with "\n"). */
  comment?: string;
}

/** The concrete frame object sources fill in (and may reuse: one per reader, see above).
 *  All fields exist from construction, so every frame has one object shape. */
export class MutableFrame implements CapturedFrame {
  data: Uint8Array = new Uint8Array(0);
  caplen = 0;
  origlen = 0;
  tsNs = 0n;
  tsSec = -1;
  tsSubNs = 0;
  linktype = 0;
  ifIndex = 0;
  ifName: string | undefined = undefined;
  comment: string | undefined = undefined;
}

/** Copy a frame (and its bytes) so that it survives the next read. */
export function cloneFrame(f: CapturedFrame): CapturedFrame {
  const c: CapturedFrame = {
    data: f.data.slice(), caplen: f.caplen, origlen: f.origlen, tsNs: f.tsNs,
    linktype: f.linktype, ifIndex: f.ifIndex,
  };
  if (f.ifName !== undefined) c.ifName = f.ifName;
  if (f.comment !== undefined) c.comment = f.comment;
  return c;
}

/** File magic numbers and pcapng block types (the reader and the writer share these): classic
 *  pcap's magic (µs, ns, and the "modified" Kuznetzov variant) as written by a big-endian
 *  writer (a little-endian file reads it byte-swapped); pcapng's section header block type
 *  and byte-order magic. */
export const PCAP_MAGIC = { US: 0xa1b2c3d4, NS: 0xa1b23c4d, MODIFIED: 0xa1b2cd34 } as const;
export const PCAPNG_BYTE_ORDER_MAGIC = 0x1a2b3c4d;
export const PCAPNG_BLOCK = { SHB: 0x0a0d0d0a, IDB: 1, PB: 2, SPB: 3, EPB: 6 } as const;

/** A 32-bit value with its bytes reversed (a magic number as the other byte order reads it). */
export function byteSwapped32(x: number): number {
  return (((x & 0xff) << 24) | ((x & 0xff00) << 8) | ((x >>> 8) & 0xff00) | (x >>> 24)) >>> 0;
}

/** Link-layer header types (tcpdump.org/linktypes.html); the values used in files. */
export const LINKTYPE = {
  NULL: 0,
  ETHERNET: 1,
  AX25: 3,
  IEEE802_5: 6,
  SLIP: 8,
  PPP: 9,
  FDDI: 10,
  PPP_HDLC: 50,
  PPP_ETHER: 51,
  ATM_RFC1483: 100,
  RAW: 101,
  C_HDLC: 104,
  IEEE802_11: 105,
  FRELAY: 107,
  LOOP: 108,
  LINUX_SLL: 113,
  PFLOG: 117,
  IEEE802_11_RADIOTAP: 127,
  USB_LINUX: 189,
  PPI: 192,
  USB_LINUX_MMAPPED: 220,
  CAN_SOCKETCAN: 227,
  IPV4: 228,
  IPV6: 229,
  NFLOG: 239,
  MPEG_2_TS: 243,
  INFINIBAND: 247,
  SCTP: 248,
  USBPCAP: 249,
  WIRESHARK_UPPER_PDU: 252,
  NETLINK: 253,
  ETHERNET_MPACKET: 274,
  LINUX_SLL2: 276,
} as const;

const LINKTYPE_NAMES = new Map<number, string>(Object.entries(LINKTYPE).map(([k, v]) => [v, k]));

/** "ETHERNET", "LINUX_SLL2", ... or "LINKTYPE_<n>" for numbers not in LINKTYPE. */
export function linktypeName(lt: number): string {
  return LINKTYPE_NAMES.get(lt) ?? `LINKTYPE_${lt}`;
}

export type CaptureFileFormat = 'pcap' | 'pcapng';

/**
 * The file cannot be read (further): not a capture file, bad header, corrupt record or
 * block. The message is one line meant for the user (no stack trace needed); `offset` is
 * the absolute byte offset of the damage when known.
 */
export class CaptureFormatError extends Error {
  override readonly name = 'CaptureFormatError';
  constructor(message: string, readonly offset?: number) {
    super(message);
  }
}

/** One pcapng Interface Description Block (or the pcap file header as interface 0). */
export interface CaptureInterface {
  /** Index over the whole file (= CapturedFrame.ifIndex). */
  index: number;
  /** pcapng section number (0 for pcap and for the first section). */
  section: number;
  linktype: number;
  /** 0 = no limit. */
  snaplen: number;
  name?: string;
  description?: string;
  /** Timestamp units per second: 10^exp (base 10) or 2^exp (base 2). pcap: 10^6 or 10^9. */
  tsBase: 10 | 2;
  tsExp: number;
  /** if_tsoffset in seconds (added to every timestamp). */
  tsOffsetSec: bigint;
  /** FCS bytes at the end of every frame when the file says so (pcap link-type field
   *  FCS bits, pcapng if_fcslen); undefined when unknown. */
  fcsLen?: number;
}
