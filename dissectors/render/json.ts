// `--json`: one JSON object per frame (JSON Lines), stable keys, bigint and bytes as hex.

import type { DecodedFrame } from '../frame.js';
import type { FrameNote } from '../tracker/model.js';
import { jsonReplacer } from '../wire/common.js';

export function renderJson(d: DecodedFrame, note?: FrameNote): string {
  const o: Record<string, unknown> = {
    frame: d.n,
    time: formatIsoNs(d.tsNs),
    caplen: d.caplen,
    len: d.origlen,
  };
  if (d.eth) o.eth = d.eth;
  if (d.link) o.link = d.link;
  if (d.ip) o.ip = d.ip;
  if (d.tcp) { o.tcp = d.tcp; if (d.tcpRole && d.tcpRole !== 'none') o.tcpRole = d.tcpRole; }
  if (d.udp) o.udp = d.udp;
  if (d.roce) {
    const { ib, ...rest } = d.roce;
    const { payload, ...ibRest } = ib;
    o.roce = { ...rest, ib: { ...ibRest, payloadLength: payload.length } };
  }
  if (d.smc.length > 0) o.smc = d.smc;
  if (d.issues.length > 0) o.issues = d.issues;
  if (note && (note.link !== undefined || note.conn !== undefined || note.tcpMode !== undefined || note.anomalies.length > 0)) o.track = note;
  if (d.tree) o.tree = d.tree;
  return JSON.stringify(o, jsonReplacer);
}

/** ISO 8601 UTC with nanoseconds. */
export function formatIsoNs(tsNs: bigint): string {
  // Whole seconds, floored (also before 1970), and the nanoseconds within them.
  let sec = tsNs / 1_000_000_000n;
  let ns = tsNs % 1_000_000_000n;
  if (ns < 0n) { ns += 1_000_000_000n; sec -= 1n; }
  const d = new Date(Number(sec) * 1000);
  // A pcapng timestamp can be any 64-bit value; beyond what Date holds, print seconds since the epoch.
  if (Number.isNaN(d.getTime())) return `@${sec}.${ns.toString().padStart(9, '0')}`;
  const iso = d.toISOString(); // 2026-11-22T09:35:57.000Z (or ±YYYYYY-… far out)
  return `${iso.slice(0, iso.length - 5)}.${ns.toString().padStart(9, '0')}Z`;
}
