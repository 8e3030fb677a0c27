// Linux "cooked" capture headers (what `tcpdump -i any` produces).
//
// LINKTYPE_LINUX_SLL (113), 16 bytes:
//   0 packet type (2) · 2 ARPHRD type (2) · 4 link-layer address length (2) ·
//   6 link-layer address (8, zero padded) · 14 protocol (2)
// LINKTYPE_LINUX_SLL2 (276), 20 bytes:
//   0 protocol (2) · 2 reserved (2, MBZ) · 4 interface index (4) · 8 ARPHRD type (2) ·
//   10 packet type (1) · 11 address length (1) · 12 link-layer address (8, zero padded)
// All big-endian. `protocol` is an EtherType, except for a few small values (0x0001 Novell
// 802.3, 0x0004 802.2 LLC, 0x000C CAN, 0x000D CAN FD) and when ARPHRD is NETLINK (824: netlink
// family) or IPGRE (778: GRE protocol type). The pipeline continues with `protocol` after
// `headerLength` bytes. Decoding never throws.

import type { Decoded, Issue, Tree } from '../wire/common.js';
import { hex, hexN, issue, put16, put32, u16, u32, u8 } from '../wire/common.js';
import { macAt } from './addr.js';
import { ethertypeName } from './ethernet.js';

export const SLL_HOST = 0;
export const SLL_OUTGOING = 4;

export const ARPHRD_ETHER = 1;
export const ARPHRD_NETLINK = 824;

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

export function arphrdName(n: number): string {
  return ARPHRD_NAMES.get(n) ?? String(n);
}

/** Name of an SLL protocol field, honouring the special small values. */
export function sllProtocolName(protocol: number, arphrd = ARPHRD_ETHER): string {
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

function decodeAddr(b: Uint8Array, o: number, len: number, value: SllHeader, issues: Issue[], lenOff: number, lenSize: number): void {
  const n = Math.min(len, 8);
  value.addr = addrText(b, o, n);
  let pad = false;
  for (let i = o + n; i < o + 8; i++) if (b[i] !== 0) { pad = true; break; }
  value.addrPad = pad ? hex(b, o + n, 8 - n) : '';
  if (len > 8) issue(issues, 'note', 'sll.addrlen', `link-layer address length ${len} exceeds the 8-byte field (address cut)`, lenOff, lenSize);
  if (pad) issue(issues, 'note', 'sll.addrpad', 'non-zero bytes after the link-layer address', o + n, 8 - n);
}

function empty(version: 1 | 2): SllHeader {
  return { version, packetType: 0, arphrd: 0, addrLength: 0, addr: '', addrPad: '', protocol: 0, ifindex: 0, reserved: 0, headerLength: version === 1 ? 16 : 20 };
}

function checkPacketType(v: SllHeader, issues: Issue[], off: number, len: number): void {
  if (v.packetType > 7) issue(issues, 'warn', 'sll.pkttype', `unknown packet type ${v.packetType}`, off, len);
}

/** LINKTYPE_LINUX_SLL (v1, 16 bytes). */
export function decodeSll(b: Uint8Array, t?: Tree): Decoded<SllHeader> {
  const issues: Issue[] = [];
  const value = empty(1);
  if (b.length < 16) {
    issue(issues, 'error', 'sll.truncated', `truncated Linux cooked header: need 16 bytes, have ${b.length}`, 0, b.length);
    value.headerLength = b.length;
  }
  value.packetType = u16(b, 0);
  value.arphrd = u16(b, 2);
  value.addrLength = u16(b, 4);
  decodeAddr(b, 6, value.addrLength, value, issues, 4, 2);
  value.protocol = u16(b, 14);
  checkPacketType(value, issues, 0, 2);
  if (t) {
    t.add('Packet type', 0, 2, `${sllPacketTypeName(value.packetType)} (${value.packetType})`);
    t.add('Link-layer address type', 2, 2, `${arphrdName(value.arphrd)} (${value.arphrd})`);
    t.add('Link-layer address length', 4, 2, value.addrLength);
    t.add('Source', 6, 8, value.addr);
    t.add('Protocol', 14, 2, `${sllProtocolName(value.protocol, value.arphrd)} (${hexN(value.protocol, 4)})`);
  }
  return { value, issues };
}

/** LINKTYPE_LINUX_SLL2 (v2, 20 bytes). */
export function decodeSll2(b: Uint8Array, t?: Tree): Decoded<SllHeader> {
  const issues: Issue[] = [];
  const value = empty(2);
  if (b.length < 20) {
    issue(issues, 'error', 'sll.truncated', `truncated Linux cooked v2 header: need 20 bytes, have ${b.length}`, 0, b.length);
    value.headerLength = b.length;
  }
  value.protocol = u16(b, 0);
  value.reserved = u16(b, 2);
  value.ifindex = u32(b, 4);
  value.arphrd = u16(b, 8);
  value.packetType = u8(b, 10);
  value.addrLength = u8(b, 11);
  decodeAddr(b, 12, value.addrLength, value, issues, 11, 1);
  checkPacketType(value, issues, 10, 1);
  if (value.reserved !== 0) issue(issues, 'warn', 'sll.reserved', `reserved field is ${hexN(value.reserved, 4)}, must be zero`, 2, 2);
  if (t) {
    t.add('Protocol', 0, 2, `${sllProtocolName(value.protocol, value.arphrd)} (${hexN(value.protocol, 4)})`);
    t.add('Reserved', 2, 2, hexN(value.reserved, 4));
    t.add('Interface index', 4, 4, value.ifindex);
    t.add('Link-layer address type', 8, 2, `${arphrdName(value.arphrd)} (${value.arphrd})`);
    t.add('Packet type', 10, 1, `${sllPacketTypeName(value.packetType)} (${value.packetType})`);
    t.add('Link-layer address length', 11, 1, value.addrLength);
    t.add('Source', 12, 8, value.addr);
  }
  return { value, issues };
}

function putAddr(out: Uint8Array, o: number, v: SllHeader): void {
  const parts = v.addr === '' ? [] : v.addr.split(':');
  let i = 0;
  for (; i < parts.length && i < 8; i++) out[o + i] = parseInt(parts[i]!, 16) & 0xff;
  for (let j = 0; j + 1 < v.addrPad.length && i < 8; j += 2, i++) out[o + i] = parseInt(v.addrPad.slice(j, j + 2), 16) & 0xff;
}

/** Encodes v1 or v2 according to `v.version` (header, then `payload` if given). */
export function encodeSll(v: SllHeader, payload?: Uint8Array): Uint8Array {
  const hl = v.version === 1 ? 16 : 20;
  const out = new Uint8Array(hl + (payload ? payload.length : 0));
  if (v.version === 1) {
    put16(out, 0, v.packetType);
    put16(out, 2, v.arphrd);
    put16(out, 4, v.addrLength);
    putAddr(out, 6, v);
    put16(out, 14, v.protocol);
  } else {
    put16(out, 0, v.protocol);
    put16(out, 2, v.reserved);
    put32(out, 4, v.ifindex);
    put16(out, 8, v.arphrd);
    out[10] = v.packetType & 0xff;
    out[11] = v.addrLength & 0xff;
    putAddr(out, 12, v);
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
    reserved: 0, headerLength: init.version === 1 ? 16 : 20,
  };
}

/** tcpdump style: `ifindex 2 In 52:54:00:55:00:0a ethertype IPv4 (0x0800)` (`ifindex` only for SLL2). */
export function summarizeSll(v: SllHeader): string {
  const dir = PACKET_TYPE_SHORT[v.packetType] ?? `pkttype ${v.packetType}`;
  return `${v.version === 2 ? `ifindex ${v.ifindex} ` : ''}${dir} ${v.addr || '-'} ethertype ${sllProtocolName(v.protocol, v.arphrd)} (${hexN(v.protocol, 4)})`;
}
