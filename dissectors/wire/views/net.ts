// Link, network and UDP headers of the RoCE fast path as field tables: Ethernet II, Linux
// cooked capture v1/v2, IPv4 (fixed part), IPv6 (fixed part), UDP. The codecs in
// ../../net/ read through these views.

import { defineView, type FieldTable } from './field.js';

/** Ethernet II (without VLAN tags; a tag moves the EtherType by 4). Addresses are 6 bytes:
 *  `dstHi`/`srcHi` are their first 2 bytes, `dstLo`/`srcLo` the last 4 (numbers, no strings). */
export const ETHERNET_FIELDS = {
  dstHi: { at: 0, size: 2 },
  dstLo: { at: 2, size: 4 },
  srcHi: { at: 6, size: 2 },
  srcLo: { at: 8, size: 4 },
  ethertype: { at: 12, size: 2, names: { 0x0800: 'IPv4', 0x86dd: 'IPv6', 0x8100: '802.1Q', 0x88a8: '802.1ad', 0x8915: 'RoCE v1' } },
} as const satisfies FieldTable;

/** Linux cooked capture v1, 16 bytes. */
export const SLL_FIELDS = {
  packetType: { at: 0, size: 2 },
  arphrd: { at: 2, size: 2 },
  addrLen: { at: 4, size: 2 },
  protocol: { at: 14, size: 2 },
} as const satisfies FieldTable;

/** Linux cooked capture v2, 20 bytes. */
export const SLL2_FIELDS = {
  protocol: { at: 0, size: 2 },
  reserved: { at: 2, size: 2 },
  ifIndex: { at: 4, size: 4 },
  arphrd: { at: 8, size: 2 },
  packetType: { at: 10, size: 1 },
  addrLen: { at: 11, size: 1 },
} as const satisfies FieldTable;

/** IPv4 header, fixed 20 bytes (options follow up to ihl × 4). */
export const IPV4_FIELDS = {
  version: { at: 0, size: 1, shift: 4, mask: 15 },
  ihl: { at: 0, size: 1, shift: 0, mask: 15 },
  tos: { at: 1, size: 1 },
  dscp: { at: 1, size: 1, shift: 2, mask: 0x3f },
  ecn: { at: 1, size: 1, shift: 0, mask: 3 },
  totalLength: { at: 2, size: 2 },
  id: { at: 4, size: 2 },
  flagsFragment: { at: 6, size: 2 },
  reservedFlag: { at: 6, size: 2, shift: 15, mask: 1, bool: true },
  dontFragment: { at: 6, size: 2, shift: 14, mask: 1, bool: true },
  moreFragments: { at: 6, size: 2, shift: 13, mask: 1, bool: true },
  fragmentOffset: { at: 6, size: 2, shift: 0, mask: 0x1fff },
  ttl: { at: 8, size: 1 },
  protocol: { at: 9, size: 1, names: { 6: 'TCP', 17: 'UDP' } },
  checksum: { at: 10, size: 2 },
  src: { at: 12, size: 4 },
  dst: { at: 16, size: 4 },
} as const satisfies FieldTable;

/** IPv6 header, fixed 40 bytes; the addresses are byte runs (read them with ipv6Str). */
export const IPV6_FIELDS = {
  version: { at: 0, size: 1, shift: 4, mask: 15 },
  trafficClass: { at: 0, size: 2, shift: 4, mask: 0xff },
  flowLabel: { at: 1, size: 3, shift: 0, mask: 0xfffff },
  payloadLength: { at: 4, size: 2 },
  nextHeader: { at: 6, size: 1 },
  hopLimit: { at: 7, size: 1 },
  src: { at: 8, len: 16 },
  dst: { at: 24, len: 16 },
} as const satisfies FieldTable;

/** UDP (RFC 768), 8 bytes. */
export const UDP_FIELDS = {
  srcPort: { at: 0, size: 2 },
  dstPort: { at: 2, size: 2 },
  length: { at: 4, size: 2 },
  checksum: { at: 6, size: 2 },
} as const satisfies FieldTable;

/** Header lengths, from the tables: IPv4 without options, IPv6 fixed header, UDP. */
export const IPV4_MIN_LEN = IPV4_FIELDS.dst.at + IPV4_FIELDS.dst.size;
export const IPV6_LEN = IPV6_FIELDS.dst.at + IPV6_FIELDS.dst.len;
export const UDP_LEN = UDP_FIELDS.checksum.at + UDP_FIELDS.checksum.size;

export const EthernetView = defineView('EthernetView', ETHERNET_FIELDS);
export const SllView = defineView('SllView', SLL_FIELDS);
export const Sll2View = defineView('Sll2View', SLL2_FIELDS);
export const Ipv4View = defineView('Ipv4View', IPV4_FIELDS);
export const Ipv6View = defineView('Ipv6View', IPV6_FIELDS);
export const UdpView = defineView('UdpView', UDP_FIELDS);
export type EthernetView = InstanceType<typeof EthernetView>;
export type Ipv4View = InstanceType<typeof Ipv4View>;
export type Ipv6View = InstanceType<typeof Ipv6View>;
export type UdpView = InstanceType<typeof UdpView>;
