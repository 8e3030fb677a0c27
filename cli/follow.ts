// `smcdump --follow CONN`: the application byte stream of one SMC-R connection, rebuilt from
// RDMA WRITEs placed by RMB offset and released by CDC producer cursors — like Wireshark's
// "Follow TCP stream", for data that never crossed TCP.

import type { ChalkInstance } from 'chalk';
import type { SmcConn } from '../dissectors/tracker/model.js';
import type { Tracker } from '../dissectors/tracker/tracker.js';
import { hexdump } from '../dissectors/render/hexdump.js';
import { CliError } from './output.js';

export type FollowFormat = 'text' | 'hex' | 'raw';
export type FollowDir = 'both' | 'c2s' | 's2c';

/** CONN as the user gives it: a connection index from --summary, or "ip:port-ip:port". */
export function parseFollow(v: string): { follow?: number; followTuple?: string } {
  if (/^\d+$/.test(v)) return { follow: Number(v) };
  if (/^[^-\s]+:\d+-[^-\s]+:\d+$/.test(v)) return { followTuple: v };
  throw new CliError(`--follow takes a connection number from --summary or a 4-tuple like 10.55.0.1:34608-10.55.0.2:12345, not "${v}"`);
}

interface Piece { dir: 0 | 1; frame: number; offset: number; bytes: Uint8Array }

/** Write the followed stream; returns the closing line for stderr. */
export function renderFollow(t: Tracker, format: FollowFormat, which: FollowDir, c: ChalkInstance, write: (b: string | Uint8Array) => void): string {
  const conn = t.followed();
  if (!conn) {
    const known = t.tcp.filter((x) => x.smc).map((x) => `${x.index} (${x.client.ip}:${x.client.port}-${x.server.ip}:${x.server.port})`);
    throw new CliError(`no SMC-R connection matches --follow; SMC-R connections in this capture: ${known.length ? known.join(', ') : 'none'}`);
  }
  const dirs: (0 | 1)[] = which === 'both' ? [0, 1] : which === 'c2s' ? [0] : [1];
  if (format === 'raw' && dirs.length > 1) throw new CliError('--follow-format raw writes one direction: add --follow-dir c2s or s2c');
  const names = endpoints(conn);
  const pieces: Piece[] = [];
  for (const dir of dirs) for (const ch of conn.dirs[dir].stream!.chunks) pieces.push({ dir, frame: ch.frame, offset: ch.offset, bytes: ch.bytes });
  pieces.sort((a, b) => a.frame - b.frame || a.dir - b.dir);
  const paint = (dir: 0 | 1, s: string): string => (dir === 0 ? c.red(s) : c.blue(s));
  for (const p of pieces) {
    if (format === 'raw') { write(p.bytes); continue; }
    const head = `==== ${names[p.dir]} · stream bytes ${p.offset}-${p.offset + p.bytes.length - 1} (${p.bytes.length}) · released by CDC in frame ${p.frame}`;
    write(c.dim(head) + '\n');
    if (format === 'hex') write(paint(p.dir, hexdump(p.bytes)) + '\n');
    else write(paint(p.dir, printable(p.bytes)) + (p.bytes[p.bytes.length - 1] === 10 ? '' : '\n'));
  }
  const parts: string[] = [];
  for (const dir of dirs) {
    const s = conn.dirs[dir].stream!;
    const miss = s.missing.reduce((n, m) => n + (m.to - m.from), 0);
    parts.push(`${s.released} bytes ${names[dir]}${miss ? `, ${miss} of them missing from the capture (${s.missing.map((m) => `${m.from}-${m.to - 1}`).join(', ')})` : ''}`);
  }
  return `connection ${conn.index}: ${parts.join('; ')}`;
}

function endpoints(conn: SmcConn): [string, string] {
  const t = conn.tcp;
  if (!t) return ['client → server', 'server → client'];
  const a = `${t.client.ip}:${t.client.port}`, b = `${t.server.ip}:${t.server.port}`;
  return [`${a} → ${b}`, `${b} → ${a}`];
}

/** Text as Wireshark shows it: printable ASCII, newlines and tabs kept, the rest as '.'. */
function printable(b: Uint8Array): string {
  let s = '';
  for (const x of b) s += (x >= 0x20 && x < 0x7f) || x === 10 || x === 9 ? String.fromCharCode(x) : x === 13 ? '' : '.';
  return s;
}
