// tcpdump's relative TCP sequence numbers (its default; -S turns them off), so that a TCP
// line of smcdump reads like tcpdump's: `seq 1:157, ack 1`. Same rule as tcpdump's
// print-tcp.c: only segments with ACK take part; the first one of a conversation (or any
// SYN-ACK) records both directions' bases and prints absolute numbers; later ones print
// the difference. One entry per conversation, keyed with the lower port's side first.

import type { DecodedFrame } from '../frame.js';

interface Bases { seq: number; ack: number }

export class TcpRelative {
  private readonly conv = new Map<string, Bases>();

  /** Bases for this frame's seq/ack (undefined: print absolute numbers). Call once per frame, in order. */
  bases(d: DecodedFrame): { seqBase: number; ackBase: number } | undefined {
    const tcp = d.tcp;
    const ip = d.ip;
    if (!tcp || !ip || !tcp.flags.ack) return undefined;
    const sp = tcp.srcPort, dp = tcp.dstPort;
    // tcpdump's collating order: the lower port first; equal ports, the lower address
    // (memcmp of the raw bytes, so compared as numbers, not as text)
    const rev = sp > dp || (sp === dp && addrCmp(ip.src, ip.dst) > 0);
    const key = rev ? `${ip.dst}.${dp}>${ip.src}.${sp}` : `${ip.src}.${sp}>${ip.dst}.${dp}`;
    const th = this.conv.get(key);
    if (th === undefined || tcp.flags.syn) {
      const ackm1 = (tcp.ack - 1) >>> 0;
      this.conv.set(key, rev ? { ack: tcp.seq, seq: ackm1 } : { seq: tcp.seq, ack: ackm1 });
      return undefined;
    }
    return rev ? { seqBase: th.ack, ackBase: th.seq } : { seqBase: th.seq, ackBase: th.ack };
  }
}

/** memcmp order of two addresses given as text (IPv4 dotted quad or IPv6). */
function addrCmp(a: string, b: string): number {
  const ka = addrKey(a), kb = addrKey(b);
  return ka < kb ? -1 : ka > kb ? 1 : 0;
}

function addrKey(s: string): string {
  if (s.includes('.') && !s.includes(':')) return s.split('.').map((p) => Number(p).toString(16).padStart(2, '0')).join('');
  // IPv6: expand :: and pad each group
  const [head, tail] = s.split('::') as [string, string | undefined];
  const h = head ? head.split(':') : [];
  const t = tail !== undefined && tail !== '' ? tail.split(':') : [];
  const groups = tail === undefined ? h : [...h, ...new Array<string>(8 - h.length - t.length).fill('0'), ...t];
  return groups.map((g) => g.padStart(4, '0')).join('');
}
