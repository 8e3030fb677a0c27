// tcpdump's relative TCP sequence numbers (its default; -S turns them off), so that a TCP
// line of smcdump reads like tcpdump's: `seq 1:157, ack 1`. Same rule as tcpdump's
// print-tcp.c: only segments with ACK take part; the first one of a conversation (or any
// SYN-ACK) records both directions' bases and prints absolute numbers; later ones print
// the difference. One entry per conversation, keyed with the lower port's side first.

import type { DecodedFrame } from '../frame.js';

/** A conversation: its ends in collating order (a first) and both directions' bases. */
interface Conv { a: string; ap: number; b: string; bp: number; seq: number; ack: number }

export class TcpRelative {
  /** Conversations by a hash of their ends (numbers as keys: no key string per segment); a
   *  bucket holds one conversation, or a list of those whose hashes collide. */
  private readonly conv = new Map<number, Conv | Conv[]>();
  /** What bases() returns: one object refilled per call (read before the next call). */
  private readonly out = { seqBase: 0, ackBase: 0 };

  /** Bases for this frame's seq/ack (undefined: print absolute numbers). Call once per frame, in
   *  order; the object returned is reused by the next call. */
  bases(d: DecodedFrame): { seqBase: number; ackBase: number } | undefined {
    const tcp = d.tcp;
    const ip = d.ip;
    if (!tcp || !ip || !tcp.flags.ack) return undefined;
    const sp = tcp.srcPort, dp = tcp.dstPort;
    // tcpdump's collating order: the lower port first; equal ports, the lower address
    // (memcmp of the raw bytes, so compared as numbers, not as text)
    const rev = sp > dp || (sp === dp && addrCmp(ip.src, ip.dst) > 0);
    const a = rev ? ip.dst : ip.src, ap = rev ? dp : sp, b = rev ? ip.src : ip.dst, bp = rev ? sp : dp;
    const h = (hashText(hashText(Math.imul(ap, 0x10001) ^ bp, a), b) ^ 0x5bd1e995) | 0;
    const bucket = this.conv.get(h);
    let th: Conv | undefined;
    if (bucket !== undefined) {
      if (!Array.isArray(bucket)) { if (same(bucket, a, ap, b, bp)) th = bucket; }
      else for (const c of bucket) if (same(c, a, ap, b, bp)) { th = c; break; }
    }
    if (th === undefined || tcp.flags.syn) {
      const ackm1 = (tcp.ack - 1) >>> 0;
      const seq = rev ? ackm1 : tcp.seq, ack = rev ? tcp.seq : ackm1;
      if (th !== undefined) { th.seq = seq; th.ack = ack; return undefined; }
      const c: Conv = { a, ap, b, bp, seq, ack };
      if (bucket === undefined) this.conv.set(h, c);
      else if (Array.isArray(bucket)) bucket.push(c);
      else this.conv.set(h, [bucket, c]);
      return undefined;
    }
    const o = this.out;
    if (rev) { o.seqBase = th.ack; o.ackBase = th.seq; } else { o.seqBase = th.seq; o.ackBase = th.ack; }
    return o;
  }
}

function same(c: Conv, a: string, ap: number, b: string, bp: number): boolean {
  return c.ap === ap && c.bp === bp && c.a === a && c.b === b;
}

/** FNV-style mix of a string's characters into h (32 bits). */
function hashText(h: number, s: string): number {
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return h;
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
