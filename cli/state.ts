// smcss-like views of one endpoint's state (a snapshot from its control socket or a
// --state-json file): link groups, links with QPNs/PSNs/GIDs, connections with tokens,
// rtokens, cursors and counters; and the report of where a capture disagrees with it.

import Table from 'cli-table3';
import type { ChalkInstance } from 'chalk';
import { readFileSync } from 'node:fs';
import type { StateAnomaly } from './statejoin.js';
import { parseEndpointState, type EndpointState, type EpConn, type EpCursor } from './stateread.js';
import { queryControl } from '../endpoint/control.js';
import { fmtSize, hexQp, jsonReplacer, mtuFromCode } from '../dissectors/wire/common.js';
import { CliError } from './output.js';

function table(head: string[], c: ChalkInstance): Table.Table {
  return new Table({ head: head.map((h) => c.bold(h)), style: { head: [], border: [] } });
}

/** Read a saved snapshot (JSON file); errors are one line. */
export function loadStateFile(path: string): { state: EndpointState; raw: unknown } {
  let text: string;
  try { text = readFileSync(path, 'utf8'); } catch (e) { throw new CliError(`cannot read ${path}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`); }
  let raw: unknown;
  try { raw = JSON.parse(text); } catch (e) { throw new CliError(`${path}: not JSON (${(e as Error).message})`); }
  const p = parseEndpointState(raw);
  if (!p.state) throw new CliError(`${path}: ${p.error}`);
  return { state: p.state, raw };
}

/** Ask a live endpoint for its state over its control socket. */
export async function fetchState(sock: string): Promise<{ state: EndpointState; raw: unknown }> {
  let raw: unknown;
  try { raw = await queryControl(sock, { cmd: 'state' }); } catch (e) { throw new CliError((e as Error).message); }
  const p = parseEndpointState(raw);
  if (!p.state) throw new CliError(`${sock}: ${p.error}`);
  return { state: p.state, raw };
}

const mtuBytes = (code: number | undefined): string => (code === undefined ? '?' : mtuFromCode(code) ? String(mtuFromCode(code)) : `code ${code}`);
const curs = (c: EpCursor | undefined): string => (c ? `${c.wrap}:${c.count}` : '?');
const hx = (v: number | undefined): string => (v === undefined ? '?' : hexQp(v));

/** The smcss/smcr-like text view of one endpoint's state. */
export function renderState(s: EndpointState, c: ChalkInstance): string {
  const out: string[] = [];
  const live = s.connections.filter((x) => !x.closed), closed = s.connections.filter((x) => x.closed);
  const when = s.takenAtMs !== undefined ? ` at ${new Date(s.takenAtMs).toISOString()}` : '';
  out.push(c.bold(`Endpoint${s.pid !== undefined ? ` pid ${s.pid}` : ''}${when}: ${s.device ?? '?'} (${s.provider ?? '?'}) gid ${s.gid} mac ${s.mac ?? '?'} mtu ${mtuBytes(s.mtu)}, peer id ${s.peerId ?? '?'}, TCP option ${s.tcpOption ?? '?'}`));
  out.push(`${s.linkGroups.length} link group(s), ${live.length} connection(s), ${closed.length} closed connection(s) kept`);

  if (s.linkGroups.length > 0) {
    out.push('', c.bold('Link groups'));
    const t = table(['LG', 'role', 'ver', 'state', 'peer id', 'links', 'conns/max', 'RMBs (in use)', 'LLC in/out', 'CDC in (dropped)'], c);
    for (const g of s.linkGroups) {
      const st = g.stats ?? {};
      t.push([
        g.name, g.role ?? '?', g.version !== undefined ? `v${g.version}${g.version === 2 && g.release !== undefined ? '.' + g.release : ''}` : '?', g.state, g.peerId ?? '?',
        `${g.links.length}/${g.maxLinks ?? '?'}`, `${g.conns.length}/${g.maxConns ?? '?'}`,
        `${g.rmbs.length} (${g.rmbs.filter((b) => b.inUse).length})`,
        `${st.llcIn ?? '?'}/${st.llcOut ?? '?'}`, `${st.cdcIn ?? '?'} (${st.cdcDropped ?? 0})`,
      ]);
    }
    out.push(t.toString());

    out.push('', c.bold('Links'));
    const lt = table(['link', 'state', 'local GID', 'QP', 'send PSN₀', 'peer GID', 'peer QP', 'peer PSN₀', 'MTU', 'uid', 'SENDs out/in', 'WRITEs (bytes)'], c);
    for (const g of s.linkGroups) {
      for (const l of g.links) {
        const st = l.stats ?? {};
        lt.push([
          `${g.name}/L${l.id}`, l.state, l.gid, hx(l.qpn), l.psn !== undefined ? String(l.psn) : '?',
          l.peer?.gid ?? '?', hx(l.peer?.qpn), l.peer?.psn !== undefined ? String(l.peer.psn) : '?', mtuBytes(l.peer?.mtu),
          l.uid !== undefined ? '0x' + l.uid.toString(16).padStart(8, '0') : '?',
          `${st.sent ?? '?'}/${st.received ?? '?'}`, `${st.writes ?? '?'} (${st.writeBytes ?? '?'})`,
        ]);
      }
    }
    out.push(lt.toString());

    const rk = s.linkGroups.flatMap((g) => g.rmbs.map((b) => [g.name, hx(b.rkey), '0x' + b.addr.toString(16), fmtSize(b.size), b.inUse ? 'yes' : 'no', b.confirmed ? 'yes' : 'no']));
    if (rk.length > 0) {
      out.push('', c.bold('RMBs'));
      const bt = table(['LG', 'rkey', 'address', 'size', 'in use', 'confirmed'], c);
      for (const r of rk) bt.push(r);
      out.push(bt.toString());
    }
  }

  const connTable = (list: EpConn[], title: string): void => {
    if (list.length === 0) return;
    out.push('', c.bold(title));
    // the TCP 4-tuple like ss prints it: the same connection in tcpdump/ss/smcss terms
    const t = table(['conn', 'local ↔ peer (TCP)', 'state', 'tokens local/peer', 'rtokens (link:rkey@addr)', 'tx seq prod / cons', 'rx seq prod / cons (confirmed)', 'flags tx/rx', 'bytes out/in', 'CDC out/in', 'wblk'], c);
    for (const x of list) {
      const g = s.linkGroups.find((lg) => lg.name === x.linkGroup);
      const rt = g?.conns.find((k) => k.token === x.localToken)?.rtokens ?? [];
      t.push([
        x.key, x.tcp ? `${x.tcp.local} ↔ ${x.tcp.remote}` : '?', x.state + (x.abortReason ? ` (${x.abortReason})` : ''), `${hx(x.localToken)}/${hx(x.peerToken)}`,
        rt.length > 0 ? rt.map((r) => `L${r.link}:${hx(r.rkey)}@0x${r.addr.toString(16)}`).join(' ') : '-',
        `${x.tx.seq ?? '?'} ${curs(x.tx.prod)} / ${curs(x.tx.cons)}`,
        `${x.rx.seq ?? '?'} ${curs(x.rx.prod)} / ${curs(x.rx.cons)} (${curs(x.rx.confirmed)})`,
        `${x.tx.flags.join(',') || '-'}/${x.rx.flags.join(',') || '-'}`,
        `${x.counters.bytesSent ?? '?'}/${x.counters.bytesReceived ?? '?'}`,
        `${x.counters.cdcSent ?? '?'}/${x.counters.cdcReceived ?? '?'}`,
        String(x.counters.windowStalls ?? '?'),
      ]);
    }
    out.push(t.toString());
  };
  connTable(live, 'Connections');
  connTable(closed, 'Closed connections (last state)');
  return out.join('\n');
}

/** The "endpoint state vs wire" section of a capture report. */
export function renderDisagreements(list: StateAnomaly[], s: EndpointState, c: ChalkInstance): string {
  const head = `Endpoint state vs wire (${s.linkGroups.map((g) => g.name).join(', ') || 'no link groups'}${s.pid !== undefined ? `, pid ${s.pid}` : ''}): `;
  if (list.length === 0) return c.bold(head + 'no disagreements');
  const out = [c.bold(head + `${list.length} disagreement${list.length === 1 ? '' : 's'}`)];
  for (const a of list) {
    const col = a.severity === 'error' ? c.red : a.severity === 'warn' ? c.yellow : c.dim;
    out.push(`  ${col(a.severity.padEnd(5))} ${a.code}${a.frame ? ` #${a.frame}` : ''}: ${a.message}`);
  }
  return out.join('\n');
}

export function disagreementsJson(list: StateAnomaly[]): unknown {
  return list.map((a) => JSON.parse(JSON.stringify(a, jsonReplacer)) as unknown);
}
