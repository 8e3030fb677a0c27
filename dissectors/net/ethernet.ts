// EthernetHeader II header with any number of 802.1Q / 802.1ad (QinQ) tags.
//
//   0  dst MAC (6) · 6 src MAC (6) · [TPID (2) · TCI (2)]* · EtherType (2) · payload
//   TCI = PCP (3 bits) · DEI (1) · VID (12)
//
// Tag TPIDs recognised: 0x8100 (C-tag, 802.1Q), 0x88A8 (S-tag, 802.1ad), 0x9100/0x9200
// (pre-standard QinQ). A type/length value < 0x0600 is an IEEE 802.3 length (LLC follows): it is
// reported in `ethertype` with a note; the pipeline decides what to do with it.
// Decoding never throws; the FCS is not expected (Linux captures strip it).

import type { Decoded, Issue, Tree } from '../wire/common.js';
import { hexN, issue, parseMac, put16, u16 } from '../wire/common.js';
import { macAt } from './addr.js';

export const ETHERTYPE_IPV4 = 0x0800;
export const ETHERTYPE_VLAN = 0x8100;
export const ETHERTYPE_QINQ = 0x88a8;
export const ETHERTYPE_IPV6 = 0x86dd;

export interface VlanTag {
  /** Tag protocol identifier: 0x8100, 0x88a8, 0x9100 or 0x9200. */
  tpid: number;
  /** Priority code point (0–7). */
  pcp: number;
  /** Drop eligible indicator (0/1, formerly CFI). */
  dei: number;
  /** VLAN id (0–4095; 0 = priority tag only, 4095 reserved). */
  vid: number;
}

export interface EthernetHeader {
  dst: string;
  src: string;
  /** Outermost tag first. Shared frozen empty array when untagged (do not push). */
  vlans: readonly VlanTag[];
  /** Type of the payload after the last tag (or an 802.3 length when < 0x0600). */
  ethertype: number;
  /** 14 + 4 per tag: offset of the payload. */
  headerLength: number;
}

const NO_VLANS: readonly VlanTag[] = Object.freeze([]);

const ETHERTYPE_NAMES: ReadonlyMap<number, string> = new Map([
  [0x0800, 'IPv4'], [0x0806, 'ARP'], [0x0842, 'Wake-on-LAN'], [0x22f0, 'AVTP'], [0x6558, 'TEB'],
  [0x8035, 'RARP'], [0x8100, '802.1Q'], [0x86dd, 'IPv6'], [0x8808, 'EthernetHeader flow control'],
  [0x8809, 'Slow protocols (LACP)'], [0x8847, 'MPLS unicast'], [0x8848, 'MPLS multicast'],
  [0x8863, 'PPPoE discovery'], [0x8864, 'PPPoE session'], [0x888e, 'EAPOL'], [0x88a8, '802.1ad'],
  [0x88cc, 'LLDP'], [0x88e5, 'MACsec'], [0x88f7, 'PTP'], [0x8906, 'FCoE'], [0x8914, 'FIP'],
  [0x8915, 'RoCE'], [0x9000, 'Loopback'], [0x9100, 'QinQ (0x9100)'], [0x9200, 'QinQ (0x9200)'],
]);

/** Name of an EtherType ('RoCE', 'IPv4', …); '802.3 length' below 0x0600; hex otherwise. */
export function ethertypeName(t: number): string {
  const n = ETHERTYPE_NAMES.get(t);
  if (n !== undefined) return n;
  if (t < 0x0600) return '802.3 length';
  return '0x' + t.toString(16).padStart(4, '0');
}

/** TPIDs that introduce another 4-byte VLAN tag. */
export function isVlanTpid(t: number): boolean {
  return t === ETHERTYPE_VLAN || t === ETHERTYPE_QINQ || t === 0x9100 || t === 0x9200;
}

export function decodeEthernet(b: Uint8Array, t?: Tree): Decoded<EthernetHeader> {
  const issues: Issue[] = [];
  return { value: decodeEthernetAt(issues, b, t), issues };
}

/** decodeEthernet() with its issues pushed onto `issues` (the frame's own list: the replay path
 *  makes no result object and no issue list per frame). */
export function decodeEthernetAt(issues: Issue[], b: Uint8Array, t?: Tree): EthernetHeader {
  const value: EthernetHeader = { dst: '', src: '', vlans: NO_VLANS, ethertype: 0, headerLength: 14 };
  if (b.length < 14) {
    issue(issues, 'error', 'eth.truncated', `truncated Ethernet header: need 14 bytes, have ${b.length}`, 0, b.length);
    value.dst = macAt(b, 0);
    value.src = macAt(b, 6);
    value.headerLength = Math.min(14, b.length);
    if (t) {
      if (b.length > 0) t.add('Destination', 0, Math.min(6, b.length), value.dst);
      if (b.length > 6) t.add('Source', 6, Math.min(6, b.length - 6), value.src);
    }
    return value;
  }
  value.dst = macAt(b, 0);
  value.src = macAt(b, 6);
  if (t) {
    t.add('Destination', 0, 6, value.dst + ((b[0]! & 1) !== 0 ? (value.dst === 'ff:ff:ff:ff:ff:ff' ? ' (broadcast)' : ' (multicast)') : ''));
    t.add('Source', 6, 6, value.src);
  }
  if ((b[6]! & 1) !== 0) issue(issues, 'warn', 'eth.src-multicast', `source MAC ${value.src} has the group bit set`, 6, 6);

  let o = 12;
  let type = u16(b, 12);
  let vlans: VlanTag[] | undefined;
  while (isVlanTpid(type)) {
    if (o + 6 > b.length) {
      issue(issues, 'error', 'eth.vlan-truncated', `truncated VLAN tag (TPID ${hexN(type, 4)}): need 6 bytes at ${o}, have ${b.length - o}`, o, b.length - o);
      if (t) t.add('Type', o, 2, `${ethertypeName(type)} (${hexN(type, 4)})`);
      value.ethertype = type;
      value.headerLength = b.length;
      if (vlans) value.vlans = vlans;
      return value;
    }
    const tci = u16(b, o + 2);
    const tag: VlanTag = { tpid: type, pcp: tci >>> 13, dei: (tci >>> 12) & 1, vid: tci & 0xfff };
    (vlans ??= []).push(tag);
    if (tag.vid === 0xfff) issue(issues, 'warn', 'eth.vlan-vid', 'VLAN id 4095 is reserved', o + 2, 2);
    if (type === ETHERTYPE_QINQ && vlans.length > 1) {
      issue(issues, 'note', 'eth.vlan-order', `802.1ad S-tag (0x88a8) inside another tag (tag ${vlans.length})`, o, 2);
    }
    if (t) {
      const s = t.sub(type === ETHERTYPE_VLAN ? '802.1Q Virtual LAN' : `${ethertypeName(type)} tag`, o, 4, `PRI: ${tag.pcp}, DEI: ${tag.dei}, ID: ${tag.vid}`);
      s.add('TPID', 0, 2, hexN(type, 4));
      s.add('Priority (PCP)', 2, 2, tag.pcp);
      s.add('DEI', 2, 2, tag.dei);
      s.add('ID', 2, 2, tag.vid);
    }
    o += 4;
    type = u16(b, o);
  }
  if (vlans) value.vlans = vlans;
  value.ethertype = type;
  value.headerLength = o + 2;
  if (type < 0x0600) {
    issue(issues, 'note', 'eth.8023', `IEEE 802.3 length field ${type} (LLC frame, not Ethernet II)`, o, 2);
    if (t) t.add('Length', o, 2, type);
  } else if (t) {
    t.add('Type', o, 2, `${ethertypeName(type)} (${hexN(type, 4)})`);
  }
  return value;
}

/** Header bytes (or header + payload when `payload` is given). No FCS, no padding to 60 bytes. */
export function encodeEthernet(v: EthernetHeader, payload?: Uint8Array): Uint8Array {
  const hl = 14 + 4 * v.vlans.length;
  const out = new Uint8Array(hl + (payload ? payload.length : 0));
  out.set(parseMac(v.dst), 0);
  out.set(parseMac(v.src), 6);
  let o = 12;
  for (const tag of v.vlans) {
    put16(out, o, tag.tpid);
    put16(out, o + 2, ((tag.pcp & 7) << 13) | ((tag.dei & 1) << 12) | (tag.vid & 0xfff));
    o += 4;
  }
  put16(out, o, v.ethertype);
  if (payload) out.set(payload, hl);
  return out;
}

/** Convenience constructor: C-tags (0x8100) for plain VLAN ids; headerLength filled in. */
export function ethernetHeader(init: { dst: string; src: string; ethertype: number; vlans?: readonly (VlanTag | number)[] }): EthernetHeader {
  const vlans: VlanTag[] = [];
  const list = init.vlans ?? [];
  for (let i = 0; i < list.length; i++) {
    const x = list[i]!;
    vlans.push(typeof x === 'number'
      ? { tpid: i === 0 && list.length > 1 ? ETHERTYPE_QINQ : ETHERTYPE_VLAN, pcp: 0, dei: 0, vid: x }
      : x);
  }
  return { dst: init.dst, src: init.src, vlans: vlans.length ? vlans : NO_VLANS, ethertype: init.ethertype, headerLength: 14 + 4 * vlans.length };
}

/** tcpdump -e style: `52:54:00:55:00:0a > ff:ff:ff:ff:ff:ff, 802.1ad vlan 100, p 0, 802.1Q vlan 7, p 3, ethertype IPv4 (0x0800)`. */
export function summarizeEthernet(v: EthernetHeader): string {
  let s = `${v.src} > ${v.dst}`;
  for (const tag of v.vlans) {
    s += `, ${tag.tpid === ETHERTYPE_VLAN ? '' : ethertypeName(tag.tpid) + ' '}vlan ${tag.vid}, p ${tag.pcp}${tag.dei ? ', DEI' : ''}`;
  }
  s += v.ethertype < 0x0600 ? `, 802.3, length ${v.ethertype}` : `, ethertype ${ethertypeName(v.ethertype)} (${hexN(v.ethertype, 4)})`;
  return s;
}
