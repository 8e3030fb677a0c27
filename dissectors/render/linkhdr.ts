// tcpdump's `-e` text for the link-level header, and the header's length (what tcpdump's
// -x/-X/-A leave out). Written to read exactly like tcpdump 4.99's ether/sll printers, so
// a line can be compared with tcpdump's one layer at a time.

import { decodeEthernet, isVlanTpid } from '../net/ethernet.js';
import { decodeSll, decodeSll2 } from '../net/sll.js';
import { LINKTYPE } from '../../capture/types.js';
import { readdirSync, readFileSync } from 'node:fs';

// tcpdump's ethertype_values names (ethertype.c) for the types a capture of SMC-R may carry;
// any other type prints as "Unknown", as tcpdump does.
const TCPDUMP_ETHERTYPE: ReadonlyMap<number, string> = new Map([
  [0x0800, 'IPv4'], [0x0806, 'ARP'], [0x86dd, 'IPv6'], [0x8035, 'Reverse ARP'], [0x8100, '802.1Q'],
  [0x88a8, '802.1Q-QinQ'], [0x9100, '802.1Q-9100'], [0x9200, '802.1Q-9200'], [0x88cc, 'LLDP'],
  [0x9000, 'Loopback'], [0x8847, 'MPLS unicast'], [0x8848, 'MPLS multicast'], [0x8863, 'PPPoE D'],
  [0x8864, 'PPPoE S'], [0x888e, 'EAPOL'], [0x8809, 'Slow Protocols'], [0x88e5, 'MACsec'], [0x88f7, 'PTP'],
  [0x8906, 'FCoE'], [0x8914, 'FIP'], [0x8808, 'MPCP'],
]);

function etype(t: number): string {
  return `ethertype ${TCPDUMP_ETHERTYPE.get(t) ?? 'Unknown'} (0x${t.toString(16).padStart(4, '0')})`;
}

// sll_pkttype_values in tcpdump's print-sll.c
const SLL_PKTTYPE = ['In', 'B', 'M', 'P', 'Out'];

let ifNames: Map<number, string> | undefined;

/** if_indextoname() of this host, from /sys/class/net; '?' as tcpdump when unknown. */
function localIfName(index: number): string {
  if (!ifNames) {
    ifNames = new Map();
    try {
      for (const n of readdirSync('/sys/class/net')) {
        try { ifNames.set(Number(readFileSync(`/sys/class/net/${n}/ifindex`, 'utf8')), n); } catch { /* gone meanwhile */ }
      }
    } catch { /* no sysfs: every name unknown */ }
  }
  return ifNames.get(index) ?? '?';
}

export interface LinkHeader {
  /** The -e text, ending in ": " ('' for link types without a header, e.g. raw IP). */
  text: string;
  /** Bytes of link-level header (tcpdump's hdrlen: -x/-X/-A start after them). */
  length: number;
}

/** tcpdump -e for one frame: `52:54:00:55:00:0a > 52:54:00:55:00:0b, ethertype IPv4 (0x0800), length 82: `. */
export function linkHeader(b: Uint8Array, linktype: number, origlen: number): LinkHeader {
  switch (linktype) {
    case LINKTYPE.ETHERNET: {
      if (b.length < 14) return { text: '', length: b.length };
      const e = decodeEthernet(b).value;
      const first = (b[12]! << 8) | b[13]!;
      let s = `${e.src} > ${e.dst}, `;
      // 802.3 frames carry a length, not a type; tcpdump prints it, bounded by the frame
      s += first < 0x0600 ? `802.3, length ${Math.min(first, origlen - 14)}: ` : `${etype(first)}, length ${origlen}: `;
      // 802.1Q/QinQ: tcpdump prints each tag after the colon, then the inner type.
      let o = 14;
      let type = first;
      while (isVlanTpid(type) && o + 4 <= b.length) {
        const tci = (b[o]! << 8) | b[o + 1]!;
        type = (b[o + 2]! << 8) | b[o + 3]!;
        s += `vlan ${tci & 0xfff}, p ${tci >> 13}${tci & 0x1000 ? ', DEI' : ''}, ${type < 0x0600 ? '802.3' : etype(type)}, `;
        o += 4;
      }
      return { text: s, length: e.headerLength };
    }
    case LINKTYPE.LINUX_SLL:
    case LINKTYPE.LINUX_SLL2: {
      const v2 = linktype === LINKTYPE.LINUX_SLL2;
      const h = (v2 ? decodeSll2(b) : decodeSll(b)).value;
      if (b.length < h.headerLength) return { text: '', length: b.length };
      const dir = SLL_PKTTYPE[h.packetType] ?? '?';
      // SLL2: tcpdump names the interface as the *reading* host calls that index
      // (if_indextoname), then the direction, then "ifindex N"
      let s = v2 ? `${localIfName(h.ifindex).padEnd(5)} ${dir.padEnd(3)} ifindex ${h.ifindex} ` : `${dir.padStart(3)} `;
      if (h.addrLength > 0 && h.addr) s += `${h.addr} `;
      s += `${etype(h.protocol)}, length ${origlen}: `;
      return { text: s, length: h.headerLength };
    }
    default:
      return { text: '', length: 0 };
  }
}
