// Ethernet II header with any number of 802.1Q / 802.1ad (QinQ) tags.
//
// Layout: ETHERNET_FIELDS and VLAN_TAG_FIELDS (../wire/views/net.ts), the one declaration.
//
// Tag TPIDs recognised: 0x8100 (C-tag, 802.1Q), 0x88A8 (S-tag, 802.1ad), 0x9100/0x9200
// (pre-standard QinQ). A type/length value < 0x0600 is an IEEE 802.3 length (LLC follows): it is
// reported in `ethertype` with a note; the pipeline decides what to do with it.
// Decoding never throws; the FCS is not expected (Linux captures strip it).

import type { Decoded, Issue, Tree } from '../wire/common.js';
import { hexN, issue, parseMac, u16 } from '../wire/common.js';
import { addField, bitPicker, fieldLen } from '../wire/views/field.js';
import { ETHERNET_FIELDS as E, ETHERNET_LEN, ETHERTYPE, ETHERTYPE_MIN, ETHERTYPE_NAMES, VLAN_TAG_FIELDS as V, VLAN_TAG_LEN, VlanTagView } from '../wire/views/net.js';
import { macAt } from './addr.js';

// The numbers live with the field table (../wire/views/net.ts); these names are what the
// pipeline and the tests import.
export const ETHERTYPE_IPV4 = ETHERTYPE.IPV4;
export const ETHERTYPE_VLAN = ETHERTYPE.VLAN;
export const ETHERTYPE_QINQ = ETHERTYPE.QINQ;
export const ETHERTYPE_IPV6 = ETHERTYPE.IPV6;

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

const NAMES: ReadonlyMap<number, string> = new Map(ETHERTYPE_NAMES.map(([n, s]) => [n, s]));

/** Name of an EtherType ('RoCE', 'IPv4', …); '802.3 length' below 0x0600; hex otherwise. */
export function ethertypeName(t: number): string {
  const n = NAMES.get(t);
  if (n !== undefined) return n;
  if (t < ETHERTYPE_MIN) return '802.3 length';
  return '0x' + t.toString(16).padStart(4, '0');
}

/** TPIDs that introduce another 4-byte VLAN tag. */
export function isVlanTpid(t: number): boolean {
  return t === ETHERTYPE.VLAN || t === ETHERTYPE.QINQ || t === ETHERTYPE.QINQ_9100 || t === ETHERTYPE.QINQ_9200;
}

export function decodeEthernet(b: Uint8Array, t?: Tree): Decoded<EthernetHeader> {
  const issues: Issue[] = [];
  return { value: decodeEthernetAt(issues, b, t), issues };
}

/** Offsets: ../wire/views/net.ts (ETHERNET_FIELDS, VLAN_TAG_FIELDS); tags go through this view. */
const tagView = new VlanTagView();
const SRC_GROUP = bitPicker(E.srcGroup);
// the offsets read per frame, from the table once (constants, not property loads per frame)
const AT_DST = E.dst.at, AT_SRC = E.src.at, AT_GROUP = E.srcGroup.at, AT_TYPE = E.ethertype.at, TYPE_SIZE = E.ethertype.size;

/** The EtherType (or next TPID) at b[o]: a tag's TPID sits where the type it pushes back was. */
function typeAt(b: Uint8Array, o: number): number { return tagView.reset(b, o).tpid; }

/** A header value with every field present (decodeEthernetAt refills it). */
export function blankEthernetHeader(): EthernetHeader {
  return { dst: '', src: '', vlans: NO_VLANS, ethertype: 0, headerLength: ETHERNET_LEN };
}

/** decodeEthernet() with its issues pushed onto `issues` (the frame's own list: the replay path
 *  makes no result object and no issue list per frame), into `into` when given (every field
 *  overwritten: a reusing decoder's one record). Kept small (the cold parts are functions of their
 *  own) so that it inlines into the frame decoder. */
export function decodeEthernetAt(issues: Issue[], b: Uint8Array, t?: Tree, into?: EthernetHeader): EthernetHeader {
  const value = into ?? blankEthernetHeader();
  value.dst = macAt(b, AT_DST);
  value.src = macAt(b, AT_SRC);
  value.vlans = NO_VLANS; value.ethertype = 0; value.headerLength = ETHERNET_LEN;
  if (b.length < ETHERNET_LEN) return truncated(issues, b, t, value);
  if (t) treeAddresses(t, b, value);
  // the replay path's fast form: bytes read at the table's offsets (no view per frame)
  if (SRC_GROUP(b[AT_GROUP]!) !== 0) issue(issues, 'warn', 'eth.src-multicast', `source MAC ${value.src} has the group bit set`, E.src.at, E.src.len);
  const type = u16(b, AT_TYPE);
  if (isVlanTpid(type)) return decodeTags(issues, b, t, value, type);
  return finishType(issues, t, value, type, AT_TYPE);
}

function truncated(issues: Issue[], b: Uint8Array, t: Tree | undefined, value: EthernetHeader): EthernetHeader {
  issue(issues, 'error', 'eth.truncated', `truncated Ethernet header: need ${ETHERNET_LEN} bytes, have ${b.length}`, 0, b.length);
  value.headerLength = Math.min(ETHERNET_LEN, b.length);
  if (t) {
    if (b.length > E.dst.at) t.add(E.dst.label, E.dst.at, Math.min(E.dst.len, b.length - E.dst.at), value.dst);
    if (b.length > E.src.at) t.add(E.src.label, E.src.at, Math.min(E.src.len, b.length - E.src.at), value.src);
  }
  return value;
}

function treeAddresses(t: Tree, b: Uint8Array, value: EthernetHeader): void {
  addField(t, E.dst, value.dst + ((b[E.dst.at]! & 1) !== 0 ? (value.dst === 'ff:ff:ff:ff:ff:ff' ? ' (broadcast)' : ' (multicast)') : ''));
  addField(t, E.src, value.src);
}

/** The type (or 802.3 length) found at b[o], after any tags. */
function finishType(issues: Issue[], t: Tree | undefined, value: EthernetHeader, type: number, o: number): EthernetHeader {
  value.ethertype = type;
  value.headerLength = o + TYPE_SIZE;
  if (type < ETHERTYPE_MIN) {
    issue(issues, 'note', 'eth.8023', `IEEE 802.3 length field ${type} (LLC frame, not Ethernet II)`, o, E.ethertype.size);
    if (t) addField(t, E.ethertype, type, o - E.ethertype.at, 'Length');
  } else if (t) {
    addField(t, E.ethertype, `${ethertypeName(type)} (${hexN(type, 4)})`, o - E.ethertype.at);
  }
  return value;
}

/** 802.1Q / 802.1ad tags from the EtherType position on (`type`: the first TPID). */
function decodeTags(issues: Issue[], b: Uint8Array, t: Tree | undefined, value: EthernetHeader, type: number): EthernetHeader {
  let o: number = E.ethertype.at;
  const vlans: VlanTag[] = [];
  value.vlans = vlans;
  const tagNeed = VLAN_TAG_LEN + fieldLen(E.ethertype);
  while (isVlanTpid(type)) {
    if (o + tagNeed > b.length) {
      issue(issues, 'error', 'eth.vlan-truncated', `truncated VLAN tag (TPID ${hexN(type, 4)}): need ${tagNeed} bytes at ${o}, have ${b.length - o}`, o, b.length - o);
      if (t) addField(t, E.ethertype, `${ethertypeName(type)} (${hexN(type, 4)})`, o - E.ethertype.at);
      value.ethertype = type;
      value.headerLength = b.length;
      if (vlans.length === 0) value.vlans = NO_VLANS;
      return value;
    }
    const g = tagView.reset(b, o);
    const tag: VlanTag = { tpid: type, pcp: g.pcp, dei: g.dei, vid: g.vid };
    vlans.push(tag);
    if (tag.vid === 0xfff) issue(issues, 'warn', 'eth.vlan-vid', 'VLAN id 4095 is reserved', o + V.tci.at, V.tci.size);
    if (type === ETHERTYPE.QINQ && vlans.length > 1) {
      issue(issues, 'note', 'eth.vlan-order', `802.1ad S-tag (0x88a8) inside another tag (tag ${vlans.length})`, o, V.tpid.size);
    }
    if (t) {
      const s = t.sub(type === ETHERTYPE.VLAN ? '802.1Q Virtual LAN' : `${ethertypeName(type)} tag`, o, VLAN_TAG_LEN, `PRI: ${tag.pcp}, DEI: ${tag.dei}, ID: ${tag.vid}`);
      addField(s, V.tpid, hexN(type, 4));
      addField(s, V.pcp, tag.pcp);
      addField(s, V.dei, tag.dei);
      addField(s, V.vid, tag.vid);
    }
    o += VLAN_TAG_LEN;
    type = typeAt(b, o);
  }
  return finishType(issues, t, value, type, o);
}

/** Header bytes (or header + payload when `payload` is given). No FCS, no padding to 60 bytes. */
export function encodeEthernet(v: EthernetHeader, payload?: Uint8Array): Uint8Array {
  const hl = ETHERNET_LEN + VLAN_TAG_LEN * v.vlans.length;
  const out = new Uint8Array(hl + (payload ? payload.length : 0));
  out.set(parseMac(v.dst), E.dst.at);
  out.set(parseMac(v.src), E.src.at);
  let o: number = E.ethertype.at;
  for (const tag of v.vlans) {
    const g = tagView.reset(out, o);
    g.tpid = tag.tpid;
    g.pcp = tag.pcp;
    g.dei = tag.dei;
    g.vid = tag.vid;
    o += VLAN_TAG_LEN;
  }
  tagView.reset(out, o).tpid = v.ethertype;
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
  return { dst: init.dst, src: init.src, vlans: vlans.length ? vlans : NO_VLANS, ethertype: init.ethertype, headerLength: ETHERNET_LEN + VLAN_TAG_LEN * vlans.length };
}

/** tcpdump -e style: `52:54:00:55:00:0a > ff:ff:ff:ff:ff:ff, 802.1ad vlan 100, p 0, 802.1Q vlan 7, p 3, ethertype IPv4 (0x0800)`. */
export function summarizeEthernet(v: EthernetHeader): string {
  let s = `${v.src} > ${v.dst}`;
  for (const tag of v.vlans) {
    s += `, ${tag.tpid === ETHERTYPE_VLAN ? '' : ethertypeName(tag.tpid) + ' '}vlan ${tag.vid}, p ${tag.pcp}${tag.dei ? ', DEI' : ''}`;
  }
  s += v.ethertype < ETHERTYPE_MIN ? `, 802.3, length ${v.ethertype}` : `, ethertype ${ethertypeName(v.ethertype)} (${hexN(v.ethertype, 4)})`;
  return s;
}
