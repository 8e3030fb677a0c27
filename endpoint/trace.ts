// The endpoint's protocol trace: one optional callback (SmcOptions.trace) that the CLC channel
// and the link groups call for each control message they send or receive, and for a CLC read
// that found no message (smcping -v prints these with timings; smcping's verdict uses them to
// tell "no SMC on the peer" from an SMC peer that declined). With no callback set the cost is
// one undefined check per message; nothing is allocated.
//
// The callback runs synchronously inside the protocol code: it must not throw or block (time
// stamps are taken by the caller, e.g. performance.now() on entry).

import type { ClcMessage } from '../dissectors/wire/clc.js';
import type { LlcMessage } from '../dissectors/wire/llc.js';

export type TraceEvent =
  /** A CLC message on a connection's TCP socket (`local`/`remote` are its ip:port). */
  | { layer: 'clc'; dir: 'out' | 'in'; msg: ClcMessage; local: string; remote: string }
  /** A CLC read that got no message: bytes that are not CLC (their first ones in `head`), a
   *  timeout, the peer's close, a truncated or malformed message. */
  | { layer: 'clc'; dir: 'in'; problem: 'not-clc' | 'timeout' | 'closed' | 'truncated' | 'malformed'; detail: string; head?: Uint8Array; local: string; remote: string }
  /** An LLC message on a link (CDC messages are not traced). */
  | { layer: 'llc'; dir: 'out' | 'in'; linkGroup: string; link: number; msg: LlcMessage };

export type Trace = (e: TraceEvent) => void;

/** "ip:port" of a socket end (IPv4-mapped IPv6 shown as IPv4). */
export function endpointStr(addr: string | undefined, port: number | undefined): string {
  return `${(addr ?? '?').replace(/^::ffff:/, '')}:${port ?? '?'}`;
}
