// `smcdump --follow CONN`: the application byte stream of one connection — like Wireshark's
// "Follow TCP stream". For SMC-R the bytes never crossed TCP: they are rebuilt from RDMA WRITEs
// placed by RMB offset and released by CDC producer cursors. A connection that fell back to
// TCP is followed in its TCP payload after the CLC exchange. Urgent bytes are marked, and bytes
// the capture lacks are reported with their offsets, never silently left out.

import type { ChalkInstance } from 'chalk';
import type { Tracker } from '../dissectors/tracker/tracker.js';
import type { TcpConn } from '../dissectors/tracker/model.js';
import { hexdump } from '../dissectors/render/hexdump.js';
import { CliError } from './output.js';

export type FollowFormat = 'text' | 'hex' | 'raw' | 'json';
export type FollowDir = 'both' | 'c2s' | 's2c';

/** CONN as the user gives it: a connection index from --summary, or "ip:port-ip:port". */
export function parseFollow(v: string): { follow?: number; followTuple?: string } {
  if (/^\d+$/.test(v)) return { follow: Number(v) };
  if (/^[^-\s]+:\d+-[^-\s]+:\d+$/.test(v)) return { followTuple: v };
  throw new CliError(`--follow takes a connection number from --summary or a 4-tuple like 10.55.0.1:34608-10.55.0.2:12345, not "${v}"`);
}

interface Piece { dir: 0 | 1; frame: number; offset: number; bytes: Uint8Array }

/** One direction of a followed stream, whatever carried it. */
interface DirStream {
  chunks: readonly { frame: number; offset: number; bytes: Uint8Array }[];
  missing: readonly { frame: number; from: number; to: number }[];
  urgent: readonly number[];
  total: number;
}

/** Write the followed stream; returns the closing line for stderr. */
export function renderFollow(t: Tracker, format: FollowFormat, which: FollowDir, c: ChalkInstance, write: (b: string | Uint8Array) => void): string {
  const tcp = t.followedTcp();
  if (!tcp) {
    const known = t.tcp.map((x) => `${x.index} (${x.client.ip}:${x.client.port}-${x.server.ip}:${x.server.port} ${x.mode})`);
    throw new CliError(`no connection matches --follow; connections in this capture: ${known.length ? known.join(', ') : 'none'}`);
  }
  const streams = streamsOf(tcp);
  if (!streams) throw new CliError(`connection ${tcp.index} is ${tcp.mode}: ${tcp.why ?? 'nothing to follow'}`);
  const dirs: (0 | 1)[] = which === 'both' ? [0, 1] : which === 'c2s' ? [0] : [1];
  if (format === 'raw' && dirs.length > 1) throw new CliError('--follow-format raw writes one direction: add --follow-dir c2s or s2c');
  const names = endpoints(tcp);
  const via = tcp.smc ? 'SMC-R' : 'TCP';
  if (format === 'json') {
    write(JSON.stringify({
      connection: tcp.index, mode: tcp.mode, carriedBy: via,
      directions: dirs.map((dir) => {
        const s = streams[dir];
        const all = concat(s.chunks.map((ch) => ch.bytes));
        return {
          dir: dir === 0 ? 'c>s' : 's>c', from: names[dir].split(' → ')[0], to: names[dir].split(' → ')[1], bytes: s.total,
          urgentOffsets: s.urgent, missing: s.missing.map((m) => ({ from: m.from, to: m.to - 1, frame: m.frame })),
          data: Buffer.from(all).toString('base64'),
        };
      }),
    }) + '\n');
    return closing(tcp, streams, dirs, names);
  }
  const pieces: Piece[] = [];
  for (const dir of dirs) for (const ch of streams[dir].chunks) pieces.push({ dir, frame: ch.frame, offset: ch.offset, bytes: ch.bytes });
  pieces.sort((a, b) => a.frame - b.frame || a.dir - b.dir);
  const paint = (dir: 0 | 1, s: string): string => (dir === 0 ? c.red(s) : c.blue(s));
  for (const p of pieces) {
    if (format === 'raw') { write(p.bytes); continue; }
    const s = streams[p.dir];
    const end = p.offset + p.bytes.length;
    const urg = s.urgent.filter((u) => u >= p.offset && u < end);
    const miss = s.missing.filter((m) => m.from < end && m.to > p.offset);
    let head = `==== ${names[p.dir]} · stream bytes ${p.offset}-${end - 1} (${p.bytes.length}) · ${tcp.smc ? 'released by CDC' : 'TCP'} in frame ${p.frame}`;
    if (urg.length) head += ` · urgent byte at ${urg.join(', ')}`;
    if (miss.length) head += ` · MISSING from the capture: ${miss.map((m) => `${m.from}-${m.to - 1}`).join(', ')}`;
    write(c.dim(head) + '\n');
    if (format === 'hex') write(paint(p.dir, hexdump(p.bytes)) + '\n');
    else write(paint(p.dir, printable(p.bytes, p.offset, urg, c)) + (p.bytes[p.bytes.length - 1] === 10 ? '' : '\n'));
  }
  return closing(tcp, streams, dirs, names);
}

function closing(tcp: TcpConn, streams: [DirStream, DirStream], dirs: (0 | 1)[], names: [string, string]): string {
  const parts: string[] = [];
  for (const dir of dirs) {
    const s = streams[dir];
    const miss = s.missing.reduce((n, m) => n + (m.to - m.from), 0);
    let p = `${s.total} bytes ${names[dir]}`;
    if (s.urgent.length) p += `, urgent byte(s) at ${s.urgent.join(', ')}`;
    if (miss) p += `, ${miss} of them missing from the capture (${s.missing.map((m) => `${m.from}-${m.to - 1}`).join(', ')})`;
    parts.push(p);
  }
  return `connection ${tcp.index}${tcp.smc ? '' : ` (${tcp.mode}, TCP payload)`}: ${parts.join('; ')}`;
}

function streamsOf(tcp: TcpConn): [DirStream, DirStream] | undefined {
  if (tcp.smc) {
    const of = (i: 0 | 1): DirStream => {
      const s = tcp.smc!.dirs[i].stream!;
      return { chunks: s.chunks, missing: s.missing, urgent: s.urgent, total: s.released };
    };
    return [of(0), of(1)];
  }
  if (tcp.mode === 'smc-r' || tcp.mode === 'smc-d' || !tcp.tcpStream) return undefined;
  const [a, b] = tcp.tcpStream;
  return [{ chunks: a.chunks, missing: a.missing, urgent: [], total: a.bytes }, { chunks: b.chunks, missing: b.missing, urgent: [], total: b.bytes }];
}

function concat(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) { out.set(p, o); o += p.length; }
  return out;
}

function endpoints(t: TcpConn): [string, string] {
  const a = `${t.client.ip}:${t.client.port}`, b = `${t.server.ip}:${t.server.port}`;
  return [`${a} → ${b}`, `${b} → ${a}`];
}

/** Text as Wireshark shows it: printable ASCII, newlines and tabs kept, the rest as '.';
 *  urgent bytes inverted (and bracketed, so they show without colour too). */
function printable(b: Uint8Array, base: number, urgent: number[], c: ChalkInstance): string {
  let s = '';
  let u = 0;
  for (let i = 0; i < b.length; i++) {
    const x = b[i]!;
    const ch = (x >= 0x20 && x < 0x7f) || x === 10 || x === 9 ? String.fromCharCode(x) : x === 13 ? '' : '.';
    if (u < urgent.length && urgent[u] === base + i) { s += c.inverse(`[URG ${ch || '.'}]`); u++; } else s += ch;
  }
  return s;
}
