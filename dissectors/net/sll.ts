// Linux "cooked" capture headers (what `tcpdump -i any` produces).
//
// LINKTYPE_LINUX_SLL (113) and LINKTYPE_LINUX_SLL2 (276): layouts in SLL_FIELDS and SLL2_FIELDS
// (../wire/views/net.ts), the one declaration. `protocol` is an EtherType, except for a few small values (0x0001 Novell
// 802.3, 0x0004 802.2 LLC, 0x000C CAN, 0x000D CAN FD) and when ARPHRD is NETLINK (824: netlink
// family) or IPGRE (778: GRE protocol type). The pipeline continues with `protocol` after
// `headerLength` bytes. Decoding never throws.

import type { Decoded, Issue, Tree } from '../wire/common.js';
import { hex, hexN, issue } from '../wire/common.js';
import { addField } from '../wire/views/field.js';
import { SLL_FIELDS as S1, SLL2_FIELDS as S2, SLL_LEN, SLL2_LEN, SllView, Sll2View } from '../wire/views/net.js';
import { macAt } from './addr.js';
import { ethertypeName } from './ethernet.js';

export const SLL_HOST = 0;
export const SLL_OUTGOING = 4;

const ARPHRD_ETHER = 1;
const ARPHRD_NETLINK = 824;

export interface SllHeader {
  /** 1 = LINKTYPE_LINUX_SLL (16 B), 2 = LINKTYPE_LINUX_SLL2 (20 B). */
  version: 1 | 2;
  /** 0 host, 1 broadcast, 2 multicast, 3 otherhost, 4 outgoing (5 loopback, 6 user, 7 kernel). */
  packetType: number;
  /** ARPHRD_* device type (1 Ethernet, 772 loopback, 32 InfiniBand, …). */
  arphrd: number;
  /** Link-layer address length as on the wire (Ethernet: 6; may exceed the 8-byte field). */
  addrLength: number;
  /** First min(addrLength, 8) bytes of the address, colon-separated hex ('' when 0). */
  addr: string;
  /** Hex of the field bytes after the address when any is non-zero, else '' (kept for exact re-encoding). */
  addrPad: string;
  /** EtherType (or special value, see the file header). */
  protocol: number;
  /** SLL2 interface index (0 for SLL v1). */
  ifindex: number;
  /** SLL2 reserved 16 bits (0 for v1; must be zero). */
  reserved: number;
  /** 16 or 20. */
  headerLength: number;
}

const PACKET_TYPE_NAMES = ['host', 'broadcast', 'multicast', 'otherhost', 'outgoing', 'loopback', 'user', 'kernel'];
const PACKET_TYPE_SHORT = ['In', 'B', 'M', 'P', 'Out', 'Loop', 'User', 'Kernel'];

/** tcpdump's short direction: 'In', 'B', 'M', 'P', 'Out', 'Loop', 'User', 'Kernel'; `pkttype N` beyond. */
export function sllPacketTypeShort(n: number): string {
  return PACKET_TYPE_SHORT[n] ?? `pkttype ${n}`;
}

/** 'host' | 'broadcast' | 'multicast' | 'otherhost' | 'outgoing' | … | 'unknown(N)'. */
export function sllPacketTypeName(n: number): string {
  return PACKET_TYPE_NAMES[n] ?? `unknown(${n})`;
}

const ARPHRD_NAMES: ReadonlyMap<number, string> = new Map([
  [1, 'Ethernet'], [24, 'IEEE1394'], [32, 'InfiniBand'], [256, 'SLIP'], [512, 'PPP'], [280, 'CAN'],
  [768, 'IPIP'], [769, 'IP6IP6'], [772, 'Loopback'], [776, 'SIT'], [778, 'IPGRE'], [801, 'IEEE 802.11'],
  [803, 'IEEE 802.11 radiotap'], [823, 'IP6GRE'], [824, 'Netlink'], [825, '6LoWPAN'], [65534, 'None'],
  [65535, 'Void'],
]);

function arphrdName(n: number): string {
  return ARPHRD_NAMES.get(n) ?? String(n);
}

/** Name of an SLL protocol field, honouring the special small values. */
function sllProtocolName(protocol: number, arphrd = ARPHRD_ETHER): string {
  if (arphrd === ARPHRD_NETLINK) return `netlink family ${protocol}`;
  switch (protocol) {
    case 0x0001: return '802.3 (Novell)';
    case 0x0003: return 'all (ETH_P_ALL)';
    case 0x0004: return '802.2 LLC';
    case 0x000c: return 'CAN';
    case 0x000d: return 'CAN FD';
    default: return ethertypeName(protocol);
  }
}

/** Address text for n bytes at o: cached MAC form for 6 bytes. */
function addrText(b: Uint8Array, o: number, n: number): string {
  if (n === 6) return macAt(b, o);
  let s = '';
  for (let i = 0; i < n; i++) s += (i ? ':' : '') + hex(b, o + i, 1);
  return s;
}

/** Both versions' address field is 8 bytes (the same declaration in either table). */
const ADDR_LEN = S1.addr.len;

function decodeAddr(b: Uint8Array, o: number, len: number, value: SllHeader, issues: Issue[], lenOff: number, lenSize: number): void {
  const n = Math.min(len, ADDR_LEN);
  value.addr = addrText(b, o, n);
  let pad = false;
  for (let i = o + n; i < o + ADDR_LEN; i++) if (b[i] !== 0) { pad = true; break; }
  value.addrPad = pad ? hex(b, o + n, ADDR_LEN - n) : '';
  if (len > ADDR_LEN) issue(issues, 'note', 'sll.addrlen', `link-layer address length ${len} exceeds the ${ADDR_LEN}-byte field (address cut)`, lenOff, lenSize);
  if (pad) issue(issues, 'note', 'sll.addrpad', 'non-zero bytes after the link-layer address', o + n, ADDR_LEN - n);
}

/** Offsets: ../wire/views/net.ts (SLL_FIELDS, SLL2_FIELDS). */
const v1 = new SllView();
const v2 = new Sll2View();

function empty(version: 1 | 2): SllHeader {
  return { version, packetType: 0, arphrd: 0, addrLength: 0, addr: '', addrPad: '', protocol: 0, ifindex: 0, reserved: 0, headerLength: version === 1 ? SLL_LEN : SLL2_LEN };
}

function checkPacketType(v: SllHeader, issues: Issue[], off: number, len: number): void {
  if (v.packetType > 7) issue(issues, 'warn', 'sll.pkttype', `unknown packet type ${v.packetType}`, off, len);
}

/** LINKTYPE_LINUX_SLL (v1, 16 bytes). */
export function decodeSll(b: Uint8Array, t?: Tree): Decoded<SllHeader> {
  const issues: Issue[] = [];
  const value = empty(1);
  if (b.length < SLL_LEN) {
    issue(issues, 'error', 'sll.truncated', `truncated Linux cooked header: need ${SLL_LEN} bytes, have ${b.length}`, 0, b.length);
    value.headerLength = b.length;
  }
  const v = v1.reset(b);
  value.packetType = v.packetType;
  value.arphrd = v.arphrd;
  value.addrLength = v.addrLen;
  decodeAddr(b, S1.addr.at, value.addrLength, value, issues, S1.addrLen.at, S1.addrLen.size);
  value.protocol = v.protocol;
  checkPacketType(value, issues, S1.packetType.at, S1.packetType.size);
  if (t) {
    addField(t, S1.packetType, `${sllPacketTypeName(value.packetType)} (${value.packetType})`);
    addField(t, S1.arphrd, `${arphrdName(value.arphrd)} (${value.arphrd})`);
    addField(t, S1.addrLen, value.addrLength);
    addField(t, S1.addr, value.addr);
    addField(t, S1.protocol, `${sllProtocolName(value.protocol, value.arphrd)} (${hexN(value.protocol, 4)})`);
  }
  return { value, issues };
}

/** LINKTYPE_LINUX_SLL2 (v2, 20 bytes). */
export function decodeSll2(b: Uint8Array, t?: Tree): Decoded<SllHeader> {
  const issues: Issue[] = [];
  const value = empty(2);
  if (b.length < SLL2_LEN) {
    issue(issues, 'error', 'sll.truncated', `truncated Linux cooked v2 header: need ${SLL2_LEN} bytes, have ${b.length}`, 0, b.length);
    value.headerLength = b.length;
  }
  const v = v2.reset(b);
  value.protocol = v.protocol;
  value.reserved = v.reserved;
  value.ifindex = v.ifIndex;
  value.arphrd = v.arphrd;
  value.packetType = v.packetType;
  value.addrLength = v.addrLen;
  decodeAddr(b, S2.addr.at, value.addrLength, value, issues, S2.addrLen.at, S2.addrLen.size);
  checkPacketType(value, issues, S2.packetType.at, S2.packetType.size);
  if (value.reserved !== 0) issue(issues, 'warn', 'sll.reserved', `reserved field is ${hexN(value.reserved, 4)}, must be zero`, S2.reserved.at, S2.reserved.size);
  if (t) {
    addField(t, S2.protocol, `${sllProtocolName(value.protocol, value.arphrd)} (${hexN(value.protocol, 4)})`);
    addField(t, S2.reserved, hexN(value.reserved, 4));
    addField(t, S2.ifIndex, value.ifindex);
    addField(t, S2.arphrd, `${arphrdName(value.arphrd)} (${value.arphrd})`);
    addField(t, S2.packetType, `${sllPacketTypeName(value.packetType)} (${value.packetType})`);
    addField(t, S2.addrLen, value.addrLength);
    addField(t, S2.addr, value.addr);
  }
  return { value, issues };
}

function putAddr(out: Uint8Array, o: number, v: SllHeader): void {
  const parts = v.addr === '' ? [] : v.addr.split(':');
  let i = 0;
  for (; i < parts.length && i < ADDR_LEN; i++) out[o + i] = parseInt(parts[i]!, 16) & 0xff;
  for (let j = 0; j + 1 < v.addrPad.length && i < ADDR_LEN; j += 2, i++) out[o + i] = parseInt(v.addrPad.slice(j, j + 2), 16) & 0xff;
}

/** Encodes v1 or v2 according to `v.version` (header, then `payload` if given). */
export function encodeSll(v: SllHeader, payload?: Uint8Array): Uint8Array {
  const hl = v.version === 1 ? SLL_LEN : SLL2_LEN;
  const out = new Uint8Array(hl + (payload ? payload.length : 0));
  if (v.version === 1) {
    const w = v1.reset(out);
    w.packetType = v.packetType;
    w.arphrd = v.arphrd;
    w.addrLen = v.addrLength;
    putAddr(out, S1.addr.at, v);
    w.protocol = v.protocol;
  } else {
    const w = v2.reset(out);
    w.protocol = v.protocol;
    w.reserved = v.reserved;
    w.ifIndex = v.ifindex;
    w.arphrd = v.arphrd;
    w.packetType = v.packetType;
    w.addrLen = v.addrLength;
    putAddr(out, S2.addr.at, v);
  }
  if (payload) out.set(payload, hl);
  return out;
}

/** Convenience constructor (Ethernet device, 6-byte address). */
export function sllHeader(init: { version: 1 | 2; packetType: number; addr: string; protocol: number; ifindex?: number; arphrd?: number }): SllHeader {
  const n = init.addr === '' ? 0 : init.addr.split(':').length;
  return {
    version: init.version, packetType: init.packetType, arphrd: init.arphrd ?? ARPHRD_ETHER, addrLength: n,
    addr: init.addr, addrPad: '', protocol: init.protocol, ifindex: init.version === 2 ? (init.ifindex ?? 0) : 0,
    reserved: 0, headerLength: init.version === 1 ? SLL_LEN : SLL2_LEN,
  };
}

/** tcpdump style: `ifindex 2 In 52:54:00:55:00:0a ethertype IPv4 (0x0800)` (`ifindex` only for SLL2). */
export function summarizeSll(v: SllHeader): string {
  const dir = sllPacketTypeShort(v.packetType);
  return `${v.version === 2 ? `ifindex ${v.ifindex} ` : ''}${dir} ${v.addr || '-'} ethertype ${sllProtocolName(v.protocol, v.arphrd)} (${hexN(v.protocol, 4)})`;
}
