// smcping's verdict, told truthfully: does the peer speak SMC at all (or is it a plain TCP
// server that echoed our CLC Proposal, answered something else, closed, or said nothing), and
// did the data come back intact. And the -v trace lines (each CLC message and LLC exchange
// with its timing), from the endpoint's protocol trace (endpoint/trace.ts).

import { summarizeClc } from '../../dissectors/wire/clc.js';
import { summarizeLlc } from '../../dissectors/wire/llc.js';
import type { TraceEvent } from '../../endpoint/trace.js';
import { handshakeOf, type SmcSocket } from '../../endpoint/index.js';

/** Whether the peer speaks SMC, from what came back on the TCP connection during CLC. */
export type PeerSmc =
  | { smc: 'yes' }
  | { smc: 'no'; why: string }
  | { smc: 'unknown' };

/** "HTTP/1.0 400 Bad…" — printable ASCII as it is, anything else as \xNN; at most `max` bytes. */
export function printable(b: Uint8Array, max = 32): string {
  let s = '';
  for (let i = 0; i < Math.min(b.length, max); i++) {
    const c = b[i]!;
    s += c === 0x5c ? '\\\\' : c === 0x22 ? '\\"' : c >= 0x20 && c < 0x7f ? String.fromCharCode(c) : c === 0x0a ? '\\n' : c === 0x0d ? '\\r' : `\\x${c.toString(16).padStart(2, '0')}`;
  }
  return `"${s}${b.length > max ? '…' : ''}"`;
}

/**
 * What the client's CLC reads saw tells whether the peer speaks SMC. A Decline or an Accept is
 * SMC; our own Proposal coming back is an echo server; non-CLC bytes, silence until the CLC
 * timeout or a close before any CLC message are a peer without SMC on that port.
 * `fallback` is the handshake's result when it fell back (code, who declined, reason).
 */
export function peerSmcOf(clcIn: readonly TraceEvent[], fallback: { code: string; declinedBy: 'peer' | 'local'; reason?: string } | undefined, option254?: string): PeerSmc {
  if (!fallback || fallback.declinedBy === 'peer') return { smc: 'yes' };
  // PEERNOSMC: the peer's SYN-ACK had no option 254 — or we could not look (no eBPF here), which says nothing about the peer
  if (fallback.code === '0x03010000') return option254 === 'not-echoed' ? { smc: 'no', why: 'no TCP option 254 on its SYN-ACK' } : { smc: 'unknown' };
  for (const e of clcIn) {
    if (e.layer !== 'clc') continue;
    if ('msg' in e) {
      // A server never sends a Proposal: this is ours, echoed.
      if (e.msg.type === 'proposal') return { smc: 'no', why: 'it echoed our CLC Proposal back: a plain TCP echo server' };
      return { smc: 'yes' };
    }
    switch (e.problem) {
      case 'not-clc': return { smc: 'no', why: `it answered our CLC Proposal with bytes that are not CLC: ${printable(e.head ?? new Uint8Array())}` };
      case 'timeout': return { smc: 'no', why: `no CLC answer to our Proposal within ${e.detail}` };
      case 'closed': return { smc: 'no', why: 'it closed the connection instead of answering our CLC Proposal' };
      default: return { smc: 'unknown' };
    }
  }
  return { smc: 'unknown' };
}

/** How the probes came back, for the verdict. */
export interface EchoResult {
  sent: number;
  /** Replies byte for byte equal to the probe. */
  intact: number;
  /** Replies (or bytes) that were not our probe. */
  wrong: number;
  /** The first bytes that were not our probe, printable. */
  firstWrong?: string;
  /** Why the probing ended early (the peer closed, an error). */
  closed?: string;
}

export function echoLine(e: EchoResult | undefined, transport: string): string {
  if (!e || e.sent === 0) return 'no probe sent';
  if (e.wrong > 0 && e.intact === 0) return `the peer does not echo: it sent ${e.firstWrong ?? 'other bytes'} back for our probe`;
  if (e.wrong > 0) return `${e.wrong} repl${e.wrong === 1 ? 'y' : 'ies'} with WRONG DATA (first: ${e.firstWrong ?? '?'}), ${e.intact}/${e.sent} echoed intact`;
  if (e.intact === 0) return `no reply${e.closed ? `: ${e.closed}` : ''}`;
  return `${e.intact}/${e.sent} probes echoed intact over ${transport}${e.intact < e.sent ? `, ${e.sent - e.intact} lost` : ''}`;
}

// ------------------------------------------------------------------------------------------
// -v: the handshake and link messages, one line each, with timings
// ------------------------------------------------------------------------------------------

/** A request waiting for its response (LLC), or our CLC message waiting for the peer's. */
interface Open { key: string; t: number }

/**
 * Formats trace events as `+1.234 ms  CLC> Proposal v2 …` relative to `t0` (the TCP connect),
 * a CLC answer with the time since our message, an LLC response with the time since its request.
 */
export class TraceFormatter {
  private open: Open[] = [];
  constructor(public t0: number) {}

  reset(t0: number): void { this.t0 = t0; this.open = []; }

  line(e: TraceEvent, t: number): string {
    const at = `+${(t - this.t0).toFixed(3)} ms`.padStart(12);
    if (e.layer === 'clc') {
      const dir = e.dir === 'out' ? 'CLC>' : 'CLC<';
      if (!('msg' in e)) return `${at}  ${dir} (no message: ${e.problem}, ${e.detail}${e.problem === 'not-clc' && e.head ? ` ${printable(e.head)}` : ''})`;
      const text = summarizeClc(e.msg).replace(/^CLC /, '');
      let after = '';
      if (e.dir === 'out') this.open = [{ key: 'clc', t }];
      else {
        const o = this.open.find((x) => x.key === 'clc');
        if (o) after = ` (${(t - o.t).toFixed(3)} ms after ours)`;
        this.open = this.open.filter((x) => x !== o);
      }
      return `${at}  ${dir} ${text} (${e.msg.length} bytes)${after}`;
    }
    const dir = e.dir === 'out' ? 'LLC>' : 'LLC<';
    const text = summarizeLlc(e.msg).replace(/^LLC /, '');
    const key = `${e.linkGroup}/${e.msg.kind}`;
    let after = '';
    if (!e.msg.response) this.open.push({ key: `${key}/${e.dir}`, t });
    else {
      // the response goes the other way than its request
      const want = `${key}/${e.dir === 'out' ? 'in' : 'out'}`;
      const i = this.open.findIndex((x) => x.key === want);
      if (i >= 0) { after = ` (resp, ${(t - this.open[i]!.t).toFixed(3)} ms)`; this.open.splice(i, 1); }
    }
    return `${at}  ${dir} ${e.linkGroup}/L${e.link} ${text}${after}`;
  }
}

/** The verdict fields of a connected socket (for text and JSON). */
export function verdictOf(sock: SmcSocket): Verdict {
  const hs = handshakeOf(sock);
  if (sock.mode === 'smcr' && sock.smcr) {
    return {
      mode: 'smcr', version: sock.smcr.version, release: sock.smcr.release, linkGroup: String(sock.smcr.linkGroup),
      linkGroupState: sock.smcr.firstContact ? 'new' : 'reused', link: sock.smcr.link,
      ...(hs?.token !== undefined ? { token: hs.token } : {}), ...(hs?.peerToken !== undefined ? { peerToken: hs.peerToken } : {}),
      ...(hs?.eid ? { ueid: hs.eid } : {}), ...(hs?.peerHost ? { peerHost: hs.peerHost } : {}),
    };
  }
  const f = sock.fallback!;
  return {
    mode: 'tcp', code: `0x${f.code.toString(16).padStart(8, '0')}`, name: f.name, meaning: f.meaning,
    declinedBy: hs?.declinedBy ?? 'local', ...(hs?.reason ? { reason: hs.reason } : {}), ...(hs?.failed ? { failed: hs.failed } : {}),
  };
}

export type Verdict =
  | { mode: 'smcr'; version: number; release: number; linkGroup: string; linkGroupState: 'new' | 'reused'; link: number; token?: number; peerToken?: number; ueid?: string; peerHost?: string }
  | { mode: 'tcp'; code: string; name: string; meaning: string; declinedBy: 'peer' | 'local'; reason?: string; failed?: string };

export function verdictLine(v: Verdict): string {
  if (v.mode === 'smcr') {
    return `SMC-R v${v.version}${v.version >= 2 ? `.${v.release}` : ''}, link group ${v.linkGroup} ${v.linkGroupState === 'new' ? 'new (first contact)' : 'reused (subsequent contact)'}, link ${v.link}`
      + `${v.ueid ? `, UEID ${v.ueid}` : ''}${v.peerHost ? `, peer host ${v.peerHost}` : ''}`;
  }
  // The server ended the TCP connection during CLC: no Decline went out and there is no
  // connection to fall back to (Linux's connect() fails the same way).
  if (v.failed) return `no SMC-R and no fallback: the peer ended the connection during CLC (${v.failed}${v.reason ? `: ${v.reason}` : ''})`;
  const why = v.reason && !v.reason.includes(v.name) ? `: ${v.reason}` : '';
  return `TCP fallback: ${v.name} ${v.code} (${v.meaning}), declined by ${v.declinedBy === 'peer' ? 'the peer' : 'us (local)'}${why}`;
}
