// Link, network and transport headers as field tables: Ethernet II and its VLAN tags, Linux
// cooked capture v1/v2, IPv4 (fixed part), IPv6 (fixed part and the extension headers' common
// fields), TCP (fixed part), UDP; and the EtherType numbers with their names. The codecs in
// ../../net/ decode, render their `-V` trees from and encode through these tables, and the
// endpoint patches its RoCEv2 IPv4/UDP header through them, so each offset is written here
// and nowhere else.

import { defineView, type FieldTable } from './field.js';

/** EtherType numbers the pipeline acts on (IEEE registry). */
export const ETHERTYPE = {
  IPV4: 0x0800,
  ARP: 0x0806,
  /** C-tag (802.1Q). */
  VLAN: 0x8100,
  IPV6: 0x86dd,
  /** S-tag (802.1ad). */
  QINQ: 0x88a8,
  /** RoCE v1: a GRH follows the Ethernet header. */
  ROCE_V1: 0x8915,
  /** Pre-standard QinQ tags. */
  QINQ_9100: 0x9100,
  QINQ_9200: 0x9200,
} as const;

/** Values below this in the EtherType position are IEEE 802.3 lengths (an LLC header follows). */
export const ETHERTYPE_MIN = 0x0600;

/**
 * The one list of EtherType names: [type, our name (-V trees, `-e` summaries), tcpdump's name
 * (ethertype.c's ethertype_values, what `-e` one-lines print; none: tcpdump prints "Unknown")].
 */
export const ETHERTYPE_NAMES: readonly (readonly [number, string, string?])[] = [
  [0x0800, 'IPv4', 'IPv4'], [0x0806, 'ARP', 'ARP'], [0x0842, 'Wake-on-LAN'], [0x22f0, 'AVTP'], [0x6558, 'TEB'],
  [0x8035, 'RARP', 'Reverse ARP'], [0x8100, '802.1Q', '802.1Q'], [0x86dd, 'IPv6', 'IPv6'],
  [0x8808, 'Ethernet flow control', 'MPCP'], [0x8809, 'Slow protocols (LACP)', 'Slow Protocols'],
  [0x8847, 'MPLS unicast', 'MPLS unicast'], [0x8848, 'MPLS multicast', 'MPLS multicast'],
  [0x8863, 'PPPoE discovery', 'PPPoE D'], [0x8864, 'PPPoE session', 'PPPoE S'], [0x888e, 'EAPOL', 'EAPOL'],
  [0x88a8, '802.1ad', '802.1Q-QinQ'], [0x88cc, 'LLDP', 'LLDP'], [0x88e5, 'MACsec', 'MACsec'], [0x88f7, 'PTP', 'PTP'],
  [0x8906, 'FCoE', 'FCoE'], [0x8914, 'FIP', 'FIP'], [0x8915, 'RoCE'], [0x9000, 'Loopback', 'Loopback'],
  [0x9100, 'QinQ (0x9100)', '802.1Q-9100'], [0x9200, 'QinQ (0x9200)', '802.1Q-9200'],
];

/** Ethernet II (without VLAN tags; each tag moves the EtherType by VLAN_TAG_LEN). Addresses are
 *  6 bytes: `dstHi`/`srcHi` are their first 2 bytes, `dstLo`/`srcLo` the last 4 (numbers, no
 *  strings); `dst`/`src` the same bytes as runs (read with macAt). */
export const ETHERNET_FIELDS = {
  dst: { at: 0, len: 6, label: 'Destination' },
  src: { at: 6, len: 6, label: 'Source' },
  dstHi: { at: 0, size: 2 },
  dstLo: { at: 2, size: 4 },
  srcHi: { at: 6, size: 2 },
  srcLo: { at: 8, size: 4 },
  /** Group (multicast) bit of the source address. */
  srcGroup: { at: 6, size: 1, shift: 0, mask: 1, bool: true },
  ethertype: { at: 12, size: 2, label: 'Type', names: Object.fromEntries(ETHERTYPE_NAMES.map(([n, s]) => [n, s])) },
} as const satisfies FieldTable;
export const ETHERNET_LEN = ETHERNET_FIELDS.ethertype.at + ETHERNET_FIELDS.ethertype.size;

/** One 802.1Q/802.1ad tag, at the position of the EtherType it pushes back: TPID · TCI
 *  (PCP 3 bits · DEI 1 · VID 12); the next EtherType (or tag) follows at VLAN_TAG_LEN. */
export const VLAN_TAG_FIELDS = {
  tpid: { at: 0, size: 2, label: 'TPID' },
  tci: { at: 2, size: 2 },
  pcp: { at: 2, size: 2, shift: 13, mask: 7, label: 'Priority (PCP)' },
  dei: { at: 2, size: 2, shift: 12, mask: 1, label: 'DEI' },
  vid: { at: 2, size: 2, shift: 0, mask: 0xfff, label: 'ID' },
} as const satisfies FieldTable;
export const VLAN_TAG_LEN = VLAN_TAG_FIELDS.tci.at + VLAN_TAG_FIELDS.tci.size;

/** Linux cooked capture v1 (LINKTYPE_LINUX_SLL), 16 bytes; the address field is 8 bytes,
 *  zero padded. */
export const SLL_FIELDS = {
  packetType: { at: 0, size: 2, label: 'Packet type' },
  arphrd: { at: 2, size: 2, label: 'Link-layer address type' },
  addrLen: { at: 4, size: 2, label: 'Link-layer address length' },
  addr: { at: 6, len: 8, label: 'Source' },
  protocol: { at: 14, size: 2, label: 'Protocol' },
} as const satisfies FieldTable;
export const SLL_LEN = SLL_FIELDS.protocol.at + SLL_FIELDS.protocol.size;

/** Linux cooked capture v2 (LINKTYPE_LINUX_SLL2), 20 bytes. */
export const SLL2_FIELDS = {
  protocol: { at: 0, size: 2, label: 'Protocol' },
  reserved: { at: 2, size: 2, label: 'Reserved' },
  ifIndex: { at: 4, size: 4, label: 'Interface index' },
  arphrd: { at: 8, size: 2, label: 'Link-layer address type' },
  packetType: { at: 10, size: 1, label: 'Packet type' },
  addrLen: { at: 11, size: 1, label: 'Link-layer address length' },
  addr: { at: 12, len: 8, label: 'Source' },
} as const satisfies FieldTable;
export const SLL2_LEN = SLL2_FIELDS.addr.at + SLL2_FIELDS.addr.len;

/** IPv4 header, fixed 20 bytes (options follow up to ihl × 4). */
export const IPV4_FIELDS = {
  /** The first byte whole: version and IHL. */
  verIhl: { at: 0, size: 1 },
  version: { at: 0, size: 1, shift: 4, mask: 15, label: 'Version' },
  ihl: { at: 0, size: 1, shift: 0, mask: 15, label: 'Header length' },
  tos: { at: 1, size: 1, label: 'Differentiated services' },
  dscp: { at: 1, size: 1, shift: 2, mask: 0x3f },
  ecn: { at: 1, size: 1, shift: 0, mask: 3 },
  totalLength: { at: 2, size: 2, label: 'Total length' },
  id: { at: 4, size: 2, label: 'Identification' },
  flagsFragment: { at: 6, size: 2 },
  /** The three flag bits as shown in the tree: one node over their byte. */
  flags: { at: 6, size: 1, shift: 5, mask: 7, label: 'Flags' },
  reservedFlag: { at: 6, size: 2, shift: 15, mask: 1, bool: true },
  dontFragment: { at: 6, size: 2, shift: 14, mask: 1, bool: true },
  moreFragments: { at: 6, size: 2, shift: 13, mask: 1, bool: true },
  fragmentOffset: { at: 6, size: 2, shift: 0, mask: 0x1fff, label: 'Fragment offset' },
  ttl: { at: 8, size: 1, label: 'Time to live' },
  protocol: { at: 9, size: 1, label: 'Protocol', names: { 6: 'TCP', 17: 'UDP' } },
  checksum: { at: 10, size: 2, label: 'Header checksum' },
  src: { at: 12, size: 4, label: 'Source' },
  dst: { at: 16, size: 4, label: 'Destination' },
} as const satisfies FieldTable;

/** An IPv4 option (RFC 791 3.1) or an IPv6 Hop-by-Hop / Destination option (RFC 8200 4.2):
 *  type · length · data, except IPv4's one-byte EOL/NOP and IPv6's Pad1. The data fields of the
 *  kinds the codecs read, from the option's first byte. */
export const IP_OPTION_FIELDS = {
  type: { at: 0, size: 1 },
  length: { at: 1, size: 1 },
  data: { at: 2, len: 0 },
  /** IPv4 RR, LSRR, SSRR, TS: the pointer. */
  pointer: { at: 2, size: 1 },
  /** IPv4 RR, LSRR, SSRR: the first route address (4 bytes each). */
  route: { at: 3, len: 4 },
  /** IPv4 TS: overflow count and flag, then the entries (4 or 8 bytes each). */
  tsOverflow: { at: 3, size: 1, shift: 4, mask: 15 },
  tsFlag: { at: 3, size: 1, shift: 0, mask: 15 },
  tsEntries: { at: 4, len: 0 },
  /** IPv4 Router Alert value (RFC 2113). */
  routerAlert: { at: 2, size: 2 },
  /** IPv6 Jumbo Payload length (RFC 2675). */
  jumboLength: { at: 2, size: 4 },
} as const satisfies FieldTable;

/** IPv6 header, fixed 40 bytes; the addresses are byte runs (read them with ipv6At). */
export const IPV6_FIELDS = {
  version: { at: 0, size: 1, shift: 4, mask: 15, label: 'Version' },
  trafficClass: { at: 0, size: 2, shift: 4, mask: 0xff, label: 'Traffic class' },
  flowLabel: { at: 1, size: 3, shift: 0, mask: 0xfffff, label: 'Flow label' },
  payloadLength: { at: 4, size: 2, label: 'Payload length' },
  nextHeader: { at: 6, size: 1, label: 'Next header' },
  hopLimit: { at: 7, size: 1, label: 'Hop limit' },
  src: { at: 8, len: 16, label: 'Source' },
  dst: { at: 24, len: 16, label: 'Destination' },
} as const satisfies FieldTable;

/** What every IPv6 extension header starts with, and the fields of the kinds the codec reads:
 *  Routing (43), Fragment (44; byte 1 is reserved there), AH (51). Offsets from the header's
 *  first byte. */
export const IPV6_EXT_FIELDS = {
  nextHeader: { at: 0, size: 1, label: 'Next header' },
  hdrExtLen: { at: 1, size: 1, label: 'Length' },
  /** Hop-by-Hop / Destination options: TLVs from here to the header's end. */
  options: { at: 2, len: 0 },
  routingType: { at: 2, size: 1, label: 'Routing type' },
  segmentsLeft: { at: 3, size: 1, label: 'Segments left' },
  /** Routing: 4 reserved or type-specific bytes before the addresses. */
  routeWord: { at: 4, size: 4 },
  /** Routing types 0, 2, 4: the first of the 16-byte addresses. */
  routeAddress: { at: 8, len: 16, label: 'Address' },
  fragOffset: { at: 2, size: 2, shift: 3, mask: 0x1fff, label: 'Offset' },
  fragReserved: { at: 2, size: 2, shift: 1, mask: 3 },
  fragMore: { at: 2, size: 2, shift: 0, mask: 1, bool: true },
  /** The More-fragments flag as the tree shows it: one node over its byte. */
  fragMoreByte: { at: 3, size: 1, label: 'More fragments' },
  fragId: { at: 4, size: 4, label: 'Identification' },
  ahSpi: { at: 4, size: 4, label: 'SPI' },
  ahSeq: { at: 8, size: 4, label: 'Sequence' },
  ahIcv: { at: 12, len: 0, label: 'ICV' },
} as const satisfies FieldTable;
/** Extension header lengths count 8-byte units (AH: 4-byte units) after the first 8 bytes: the
 *  smallest header, and the Fragment header's fixed size (its length byte is reserved). */
export const IPV6_EXT_MIN_LEN = 8;

/** TCP header (RFC 9293), fixed 20 bytes (options follow up to dataOffset × 4). */
export const TCP_FIELDS = {
  srcPort: { at: 0, size: 2, label: 'Source port' },
  dstPort: { at: 2, size: 2, label: 'Destination port' },
  seq: { at: 4, size: 4, label: 'Sequence number' },
  ack: { at: 8, size: 4, label: 'Acknowledgment number' },
  dataOffset: { at: 12, size: 1, shift: 4, mask: 15, label: 'Header length' },
  reserved: { at: 12, size: 1, shift: 1, mask: 7 },
  /** The 9 flag bits: AE (byte 12 bit 0) · CWR ECE URG ACK PSH RST SYN FIN (byte 13). */
  flags: { at: 12, size: 2, shift: 0, mask: 0x1ff, label: 'Flags' },
  /** The 12 bits after the data offset, as the tree prints them. */
  flagBits12: { at: 12, size: 2, shift: 0, mask: 0xfff },
  flagByte: { at: 13, size: 1 },
  window: { at: 14, size: 2, label: 'Window' },
  checksum: { at: 16, size: 2, label: 'Checksum' },
  urgentPointer: { at: 18, size: 2, label: 'Urgent pointer' },
} as const satisfies FieldTable;
export const TCP_MIN_LEN = TCP_FIELDS.urgentPointer.at + TCP_FIELDS.urgentPointer.size;

/** A TCP option (RFC 9293 3.2): kind · length · data, except EOL (0) and NOP (1), which are one
 *  byte. The data fields of the kinds the codec reads, from the option's first byte. RFC 6994
 *  experimental options (253/254, SMC's) add their ExID: ./tcpopt.ts. */
export const TCP_OPTION_FIELDS = {
  kind: { at: 0, size: 1 },
  length: { at: 1, size: 1 },
  data: { at: 2, len: 0 },
  /** 2: maximum segment size. */
  mss: { at: 2, size: 2 },
  /** 3: window scale shift count. */
  wscale: { at: 2, size: 1 },
  /** 5: SACK blocks of SACK_BLOCK_FIELDS, from here to the option's end. */
  sackBlocks: { at: 2, len: 8 },
  /** 8: timestamps. */
  tsVal: { at: 2, size: 4 },
  tsEcr: { at: 6, size: 4 },
  /** 29: TCP-AO key ids. */
  aoKeyId: { at: 2, size: 1 },
  aoRnextKeyId: { at: 3, size: 1 },
  /** 30: MPTCP subtype (high nibble). */
  mptcpSubtype: { at: 2, size: 1, shift: 4, mask: 15 },
} as const satisfies FieldTable;

/** One SACK block: left and right edge. */
export const SACK_BLOCK_FIELDS = {
  left: { at: 0, size: 4 },
  right: { at: 4, size: 4 },
} as const satisfies FieldTable;

/** UDP (RFC 768), 8 bytes. */
export const UDP_FIELDS = {
  srcPort: { at: 0, size: 2, label: 'Source port' },
  dstPort: { at: 2, size: 2, label: 'Destination port' },
  length: { at: 4, size: 2, label: 'Length' },
  checksum: { at: 6, size: 2, label: 'Checksum' },
} as const satisfies FieldTable;

/** Header lengths, from the tables: IPv4 without options, IPv6 fixed header, UDP. */
export const IPV4_MIN_LEN = IPV4_FIELDS.dst.at + IPV4_FIELDS.dst.size;
export const IPV6_LEN = IPV6_FIELDS.dst.at + IPV6_FIELDS.dst.len;
export const UDP_LEN = UDP_FIELDS.checksum.at + UDP_FIELDS.checksum.size;

/** The IP version nibble of the header at b[o] (4 or 6; 0 past the end): where IPv4 and IPv6
 *  agree, so a raw-IP capture or a RoCEv2 frame can be dispatched before either is decoded. */
export function ipVersionAt(b: Uint8Array, o: number): number {
  return o < b.length ? (b[o]! >>> IPV4_FIELDS.version.shift) & IPV4_FIELDS.version.mask : 0;
}

export const EthernetView = defineView('EthernetView', ETHERNET_FIELDS);
export const VlanTagView = defineView('VlanTagView', VLAN_TAG_FIELDS);
export const SllView = defineView('SllView', SLL_FIELDS);
export const Sll2View = defineView('Sll2View', SLL2_FIELDS);
export const Ipv4View = defineView('Ipv4View', IPV4_FIELDS);
export const Ipv6View = defineView('Ipv6View', IPV6_FIELDS);
export const IpOptionView = defineView('IpOptionView', IP_OPTION_FIELDS);
export const Ipv6ExtView = defineView('Ipv6ExtView', IPV6_EXT_FIELDS);
export const TcpView = defineView('TcpView', TCP_FIELDS);
export const UdpView = defineView('UdpView', UDP_FIELDS);
export type EthernetView = InstanceType<typeof EthernetView>;
export type Ipv4View = InstanceType<typeof Ipv4View>;
export type Ipv6View = InstanceType<typeof Ipv6View>;
export type UdpView = InstanceType<typeof UdpView>;
