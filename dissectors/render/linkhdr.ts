// tcpdump's `-e` text for the link-level header, and the header's length (what tcpdump's
// -x/-X/-A leave out). Written to read exactly like tcpdump 4.99's ether/sll printers, so
// a line can be compared with tcpdump's one layer at a time.

import { decodeEthernet, isVlanTpid } from '../net/ethernet.js';
import { decodeSll, decodeSll2, sllPacketTypeShort, SLL_OUTGOING } from '../net/sll.js';
import { ETHERNET_FIELDS as E, ETHERNET_LEN, ETHERTYPE_MIN, ETHERTYPE_NAMES, VLAN_TAG_LEN, VlanTagView } from '../wire/views/net.js';
import { LINKTYPE } from '../../capture/types.js';
import { readdirSync, readFileSync } from 'node:fs';

// tcpdump's ethertype_values names (ethertype.c), the third column of the one EtherType list;
// any other type prints as "Unknown", as tcpdump does.
const TCPDUMP_ETHERTYPE: ReadonlyMap<number, string> = new Map(ETHERTYPE_NAMES.flatMap(([n, , td]) => (td === undefined ? [] : [[n, td] as const])));

function etype(t: number): string {
  return `ethertype ${TCPDUMP_ETHERTYPE.get(t) ?? 'Unknown'} (0x${t.toString(16).padStart(4, '0')})`;
}

/** sll_pkttype_values in tcpdump's print-sll.c: host … outgoing; tcpdump has no names beyond. */
function tcpdumpPktType(n: number): string { return n <= SLL_OUTGOING ? sllPacketTypeShort(n) : '?'; }

/** A VLAN tag's fields (../wire/views/net.ts): the tag sits where the EtherType it pushes back was. */
const tagView = new VlanTagView();

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
      if (b.length < ETHERNET_LEN) return { text: '', length: b.length };
      const e = decodeEthernet(b).value;
      const first = tagView.reset(b, E.ethertype.at).tpid;
      let s = `${e.src} > ${e.dst}, `;
      // 802.3 frames carry a length, not a type; tcpdump prints it, bounded by the frame
      s += first < ETHERTYPE_MIN ? `802.3, length ${Math.min(first, origlen - ETHERNET_LEN)}: ` : `${etype(first)}, length ${origlen}: `;
      // 802.1Q/QinQ: tcpdump prints each tag after the colon, then the inner type.
      let o: number = E.ethertype.at;
      let type = first;
      while (isVlanTpid(type) && o + VLAN_TAG_LEN + E.ethertype.size <= b.length) {
        const g = tagView.reset(b, o);
        const vid = g.vid, pcp = g.pcp, dei = g.dei;
        o += VLAN_TAG_LEN;
        type = tagView.reset(b, o).tpid;
        s += `vlan ${vid}, p ${pcp}${dei ? ', DEI' : ''}, ${type < ETHERTYPE_MIN ? '802.3' : etype(type)}, `;
      }
      return { text: s, length: e.headerLength };
    }
    case LINKTYPE.LINUX_SLL:
    case LINKTYPE.LINUX_SLL2: {
      const v2 = linktype === LINKTYPE.LINUX_SLL2;
      const h = (v2 ? decodeSll2(b) : decodeSll(b)).value;
      if (b.length < h.headerLength) return { text: '', length: b.length };
      const dir = tcpdumpPktType(h.packetType);
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
