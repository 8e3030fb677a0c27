// Reading an endpoint's state back: the JSON of `--state-json FILE`, a control-socket reply, or
// SmcStack.snapshot() itself, into the normalized form `smcdump --state` / `--endpoint` work on.
//
// The schema is the endpoint's (endpoint/state.ts); this module does not declare a second one.
// Every field name read here is typed as a key of the schema's interfaces (`key<T>()`), and
// every field of the normalized types below is checked to exist in the schema, so a field the
// endpoint renames or drops is a compile error here, not a silently empty column. Normalizing
// means: numbers from numbers or hex strings, bigints (RMB addresses) from hex strings, CDC
// flags as a list, and fields an older or foreign writer left out as `undefined`.
// Never throws on a malformed value: parseEndpointState reports it in one line.

import type { ConnectionSnapshot, EndpointSnapshot, LinkGroupSnapshot, LinkSnapshot } from '../endpoint/state.js';

type Conn = ConnectionSnapshot;
type Group = LinkGroupSnapshot;
type Peer = NonNullable<LinkSnapshot['peer']>;
type GroupConn = Group['conns'][number];
type Rtoken = GroupConn['rtokens'][number];
type Rmb = Group['rmbs'][number];
/** What stateJson() (endpoint/control.ts) adds to the snapshot. */
interface Taken { takenAt: string; pid: number }

export interface EpCursor { wrap: number; count: number }
export interface EpLink {
  id: number;
  state: string;
  /** Local GID of the link (its device); the endpoint's GID when the snapshot has none. */
  gid: string;
  qpn: number;
  /** Our initial send PSN. */
  psn?: number;
  peer?: { gid: string; mac?: string; qpn: number; psn?: number; mtu?: number };
  uid?: number;
  stats?: Partial<LinkSnapshot['stats']>;
}
export interface EpLinkGroup {
  name: string;
  role?: string;
  version?: number;
  release?: number;
  state: string;
  peerId?: string;
  maxConns?: number;
  maxLinks?: number;
  links: EpLink[];
  conns: Array<{ token: number; peerToken: number; peerRmbeSize?: number; rtokens: Array<{ link: number; rkey: number; addr: bigint }> }>;
  rmbs: Array<{ size: number; rkey: number; addr: bigint; inUse?: boolean; confirmed?: boolean }>;
  stats?: Record<string, number>;
}
export interface EpConn {
  key: string;
  linkGroup: string;
  state: string;
  localToken: number;
  peerToken: number;
  /** Live (false) or from closedConnections (true). */
  closed: boolean;
  since?: string;
  closedAt?: string;
  /** The connection's TCP socket, "ip:port" each end (the CLC handshake ran over it). */
  tcp?: { local: string; remote: string };
  tx: { seq?: number; prod?: EpCursor; cons?: EpCursor; flags: string[]; peerRmbeSize?: number; peerSpace?: number; writeBlocked?: boolean; [k: string]: unknown };
  rx: { seq?: number; prod?: EpCursor; cons?: EpCursor; confirmed?: EpCursor; flags: string[]; rmbeSize?: number; [k: string]: unknown };
  counters: Record<string, number>;
  abortReason?: string;
}
export interface EndpointState {
  device?: string;
  provider?: string;
  peerId?: string;
  gid: string;
  mac?: string;
  mtu?: number;
  tcpOption?: string;
  /** When the snapshot was taken (stateJson() adds it), ms since the epoch. */
  takenAtMs?: number;
  pid?: number;
  linkGroups: EpLinkGroup[];
  /** Live connections first, then closed ones. */
  connections: EpConn[];
}

// Compile-time: every field of the normalized types is a field of the schema (the parser's own
// additions are listed by name).
type Extra<N, S, Own extends PropertyKey = never> = Exclude<keyof N, keyof S | Own>;
type None<T extends never> = T;
export type SchemaChecks = [
  None<Extra<EpLink, LinkSnapshot>>,
  None<Extra<NonNullable<EpLink['peer']>, Peer>>,
  None<Extra<EpLinkGroup, Group>>,
  None<Extra<EpLinkGroup['conns'][number], GroupConn>>,
  None<Extra<EpLinkGroup['conns'][number]['rtokens'][number], Rtoken>>,
  None<Extra<EpLinkGroup['rmbs'][number], Rmb>>,
  None<Extra<EpConn, Conn, 'closed'>>,
  None<Extra<EndpointState, EndpointSnapshot & Taken, 'takenAtMs'>>,
];

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
/** o[k] where k must be a field name of the schema type T. */
function key<T>(o: Obj, k: keyof T & string): unknown { return o[k]; }

function num(v: unknown): number | undefined {
  if (typeof v === 'number' && Number.isFinite(v)) return v;
  if (typeof v === 'string' && /^(0x[0-9a-f]+|\d+)$/i.test(v.trim())) { const n = Number(v.trim()); return Number.isSafeInteger(n) ? n : undefined; }
  return undefined;
}
function big(v: unknown): bigint | undefined {
  if (typeof v === 'bigint') return v;
  if (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0) return BigInt(v);
  if (typeof v === 'string' && /^(0x[0-9a-f]+|\d+)$/i.test(v.trim())) return BigInt(v.trim());
  return undefined;
}
function str(v: unknown): string | undefined { return typeof v === 'string' ? v : undefined; }
function cursor(v: unknown): EpCursor | undefined {
  if (!isObj(v)) return undefined;
  const wrap = num(v.wrap), count = num(v.count);
  return wrap !== undefined && count !== undefined ? { wrap, count } : undefined;
}
function arr(v: unknown): unknown[] { return Array.isArray(v) ? v : []; }
function flags(v: unknown): string[] { return typeof v === 'string' ? v.split(',').map((s) => s.trim()).filter(Boolean) : []; }
function counters(v: unknown): Record<string, number> {
  const o: Record<string, number> = {};
  if (isObj(v)) for (const [k, x] of Object.entries(v)) { const n = num(x); if (n !== undefined) o[k] = n; }
  return o;
}
/** Copy the listed optional fields of `from` that read as `read` says into `to`. */
function optional<T, N>(to: N, from: Obj, keys: ReadonlyArray<keyof T & keyof N & string>, read: (v: unknown) => unknown): void {
  for (const k of keys) { const v = read(key<T>(from, k)); if (v !== undefined) (to as Record<string, unknown>)[k] = v; }
}

function parseConn(v: unknown, closed: boolean): EpConn | undefined {
  if (!isObj(v)) return undefined;
  const k = <K extends keyof Conn & string>(f: K): unknown => key<Conn>(v, f);
  const name = str(k('key')), lg = str(k('linkGroup')), lt = num(k('localToken')), pt = num(k('peerToken'));
  if (name === undefined || lg === undefined || lt === undefined || pt === undefined) return undefined;
  const tx = isObj(k('tx')) ? k('tx') as Obj : {}, rx = isObj(k('rx')) ? k('rx') as Obj : {};
  type Tx = Conn['tx']; type Rx = Conn['rx'];
  const c: EpConn = {
    key: name, linkGroup: lg, state: str(k('state')) ?? '?', localToken: lt, peerToken: pt, closed,
    tx: {
      ...tx, seq: num(key<Tx>(tx, 'seq')), prod: cursor(key<Tx>(tx, 'prod')), cons: cursor(key<Tx>(tx, 'cons')), flags: flags(key<Tx>(tx, 'flags')),
      peerRmbeSize: num(key<Tx>(tx, 'peerRmbeSize')), peerSpace: num(key<Tx>(tx, 'peerSpace')),
      writeBlocked: typeof key<Tx>(tx, 'writeBlocked') === 'boolean' ? key<Tx>(tx, 'writeBlocked') as boolean : undefined,
    },
    rx: {
      ...rx, seq: num(key<Rx>(rx, 'seq')), prod: cursor(key<Rx>(rx, 'prod')), cons: cursor(key<Rx>(rx, 'cons')), confirmed: cursor(key<Rx>(rx, 'confirmed')),
      flags: flags(key<Rx>(rx, 'flags')), rmbeSize: num(key<Rx>(rx, 'rmbeSize')),
    },
    counters: counters(k('counters')),
  };
  optional<Conn, EpConn>(c, v, ['since', 'closedAt', 'abortReason'], str);
  const tcp = k('tcp');
  if (isObj(tcp) && str(tcp.local) !== undefined && str(tcp.remote) !== undefined) c.tcp = { local: str(tcp.local)!, remote: str(tcp.remote)! };
  return c;
}

function parseLink(l: Obj, gid: string): EpLink | undefined {
  const id = num(key<LinkSnapshot>(l, 'id')), qpn = num(key<LinkSnapshot>(l, 'qpn'));
  if (id === undefined || qpn === undefined) return undefined;
  const link: EpLink = { id, qpn, state: str(key<LinkSnapshot>(l, 'state')) ?? '?', gid: str(key<LinkSnapshot>(l, 'gid')) ?? gid };
  optional<LinkSnapshot, EpLink>(link, l, ['psn', 'uid'], num);
  const p = key<LinkSnapshot>(l, 'peer');
  if (isObj(p) && str(key<Peer>(p, 'gid')) !== undefined && num(key<Peer>(p, 'qpn')) !== undefined) {
    link.peer = { gid: str(key<Peer>(p, 'gid'))!, qpn: num(key<Peer>(p, 'qpn'))! };
    optional<Peer, NonNullable<EpLink['peer']>>(link.peer, p, ['mac'], str);
    optional<Peer, NonNullable<EpLink['peer']>>(link.peer, p, ['psn', 'mtu'], num);
  }
  const st = key<LinkSnapshot>(l, 'stats');
  if (isObj(st)) link.stats = counters(st);
  return link;
}

function parseGroup(g: Obj, gid: string): EpLinkGroup | undefined {
  const name = str(key<Group>(g, 'name'));
  if (name === undefined) return undefined;
  const links: EpLink[] = [];
  for (const l of arr(key<Group>(g, 'links'))) { const p = isObj(l) ? parseLink(l, gid) : undefined; if (p) links.push(p); }
  const conns: EpLinkGroup['conns'] = [];
  for (const c of arr(key<Group>(g, 'conns'))) {
    if (!isObj(c)) continue;
    const token = num(key<GroupConn>(c, 'token')), peerToken = num(key<GroupConn>(c, 'peerToken'));
    if (token === undefined || peerToken === undefined) continue;
    const rtokens: EpLinkGroup['conns'][0]['rtokens'] = [];
    for (const r of arr(key<GroupConn>(c, 'rtokens'))) {
      if (!isObj(r)) continue;
      const link = num(key<Rtoken>(r, 'link')), rkey = num(key<Rtoken>(r, 'rkey')), addr = big(key<Rtoken>(r, 'addr'));
      if (link !== undefined && rkey !== undefined && addr !== undefined) rtokens.push({ link, rkey, addr });
    }
    const e: EpLinkGroup['conns'][0] = { token, peerToken, rtokens };
    optional<GroupConn, typeof e>(e, c, ['peerRmbeSize'], num);
    conns.push(e);
  }
  const rmbs: EpLinkGroup['rmbs'] = [];
  for (const b of arr(key<Group>(g, 'rmbs'))) {
    if (!isObj(b)) continue;
    const size = num(key<Rmb>(b, 'size')), rkey = num(key<Rmb>(b, 'rkey')), addr = big(key<Rmb>(b, 'addr'));
    if (size === undefined || rkey === undefined || addr === undefined) continue;
    rmbs.push({ size, rkey, addr, inUse: key<Rmb>(b, 'inUse') === true, confirmed: key<Rmb>(b, 'confirmed') === true });
  }
  const lg: EpLinkGroup = { name, state: str(key<Group>(g, 'state')) ?? '?', links, conns, rmbs };
  optional<Group, EpLinkGroup>(lg, g, ['role', 'peerId'], str);
  optional<Group, EpLinkGroup>(lg, g, ['version', 'release', 'maxConns', 'maxLinks'], num);
  const st = key<Group>(g, 'stats');
  if (isObj(st)) lg.stats = counters(st);
  return lg;
}

/**
 * Read a state snapshot. Never throws: a value that is not a snapshot gives `error`.
 */
export function parseEndpointState(v: unknown): { state: EndpointState; error?: undefined } | { state?: undefined; error: string } {
  if (!isObj(v)) return { error: 'not an endpoint state: expected a JSON object' };
  if (typeof v.error === 'string') return { error: `the endpoint answered: ${v.error}` };
  type Snap = EndpointSnapshot & Taken;
  const gid = str(key<Snap>(v, 'gid'));
  const groups = key<Snap>(v, 'linkGroups'), live = key<Snap>(v, 'connections');
  if (gid === undefined || !Array.isArray(groups) || !Array.isArray(live)) {
    return { error: 'not an endpoint state: "gid", "linkGroups" and "connections" are required (write one with --state-json or the control socket)' };
  }
  const linkGroups: EpLinkGroup[] = [];
  for (const g of groups) { const p = isObj(g) ? parseGroup(g, gid) : undefined; if (p) linkGroups.push(p); }
  const connections: EpConn[] = [];
  for (const c of live) { const p = parseConn(c, false); if (p) connections.push(p); }
  for (const c of arr(key<Snap>(v, 'closedConnections'))) { const p = parseConn(c, true); if (p) connections.push(p); }
  const st: EndpointState = { gid, linkGroups, connections };
  optional<Snap, EndpointState>(st, v, ['device', 'provider', 'peerId', 'mac', 'tcpOption'], str);
  optional<Snap, EndpointState>(st, v, ['mtu', 'pid'], num);
  const t = str(key<Snap>(v, 'takenAt'));
  if (t !== undefined && Number.isFinite(Date.parse(t))) st.takenAtMs = Date.parse(t);
  return { state: st };
}
