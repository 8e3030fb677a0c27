// Link-group limits like Linux: connections per link group negotiated in CLC (v2.1, the smaller
// of the two sides' max connections, as smcr_max_conns_per_lgr), carried in CONFIRM LINK, and a
// new link group (first contact) once a group is full; both sides agree on which connection is
// in which group, and data flows on all of them.
import test, { type ExecutionContext } from 'ava';
import { createHash, randomBytes } from 'node:crypto';
import type { Server, Socket } from 'node:net';
import type { SmcStack } from '../../endpoint/stack.js';
import type { HandshakeResult } from '../../endpoint/clc/handshake.js';
import type { CdcConnection } from '../../endpoint/cdc/connection.js';
import { addrOf, openStacks, tcpPair } from './stacks.js';

const UEID = 'SMCSCOPE-LIMITS';
type Est = Extract<HandshakeResult, { mode: 'smcr' }>;

/** N connections at once, each kept open: [client results, server results, sockets to close]. */
async function connections(a: SmcStack, b: SmcStack, n: number): Promise<{ cli: Est[]; srv: Est[]; socks: Array<Socket | Server> }> {
  const cli: Est[] = [], srv: Est[] = [], socks: Array<Socket | Server> = [];
  for (let i = 0; i < n; i++) {
    const [c, s, server] = await tcpPair(addrOf(a), addrOf(b));
    socks.push(c, s, server);
    const [rc, rs] = await Promise.all([a.handshake('client', c), b.handshake('server', s)]);
    if (rc.mode !== 'smcr' || rs.mode !== 'smcr') throw new Error(`connection ${i + 1}: not SMC-R (${JSON.stringify(rc.mode === 'tcp' ? rc : rs)})`);
    cli.push(rc); srv.push(rs);
  }
  return { cli, srv, socks };
}

/** Connections per link group name, in order of appearance. */
const perGroup = (ests: Est[]): Array<[string, number]> => {
  const m = new Map<string, number>();
  for (const e of ests) m.set(e.lg.name, (m.get(e.lg.name) ?? 0) + 1);
  return [...m.entries()];
};

/** 8 KiB from each client connection to its server side, SHA-256 compared. */
async function dataOnAll(t: ExecutionContext, a: SmcStack, b: SmcStack, cli: Est[], srv: Est[]): Promise<CdcConnection[]> {
  const conns: CdcConnection[] = [];
  await Promise.all(cli.map(async (c, i) => {
    const x = a.attach(c), y = b.attach(srv[i]!);
    conns.push(x, y);
    const data = randomBytes(8192);
    const got: Buffer[] = [];
    let have = 0;
    const arrived = new Promise<void>((resolve, reject) => {
      const drain = (): void => { for (let r = y.read(); r; r = y.read()) { got.push(Buffer.from(r)); have += r.length; } if (have >= data.length) resolve(); };
      y.on('readable', drain);
      y.once('abort', (why: string) => reject(new Error(why)));
    });
    t.is(x.write(data), data.length);
    await arrived;
    t.is(createHash('sha256').update(Buffer.concat(got)).digest('hex'), createHash('sha256').update(data).digest('hex'), `connection ${i + 1}`);
  }));
  return conns;
}

async function limitRun(t: ExecutionContext, clientMax: number, serverMax: number, octet: number): Promise<void> {
  const [a, b] = await openStacks({ ueids: [UEID], maxConns: clientMax, maxLinks: 1 }, { ueids: [UEID], maxConns: serverMax, maxLinks: 1 }, octet);
  let socks: Array<Socket | Server> = [];
  const conns: CdcConnection[] = [];
  try {
    const limit = Math.min(clientMax, serverMax);
    const r = await connections(a, b, limit + 1);
    socks = r.socks;
    t.deepEqual(perGroup(r.cli).map(([, n]) => n), [limit, 1], 'client: a full group, then a new one');
    t.deepEqual(perGroup(r.srv).map(([, n]) => n), [limit, 1], 'server: the same split');
    t.deepEqual(r.cli.map((e) => e.firstContact), [true, ...Array<boolean>(limit - 1).fill(false), true], 'the connection past the limit is a first contact');
    for (const e of [...r.cli, ...r.srv]) t.deepEqual([e.lg.maxConns, e.lg.maxLinks], [limit, 1], 'negotiated: the smaller max connections, max links 1');
    t.is(r.cli[limit]!.lg.links.size, 1, 'max links 1: no second link');
    conns.push(...await dataOnAll(t, a, b, r.cli, r.srv));
  } finally {
    for (const c of conns) c.abort();
    for (const s of socks) if ('destroy' in s) s.destroy(); else s.close();
    await Promise.all([a.close(), b.close()]);
  }
}

test('server max connections 16: the 17th connection opens a second link group on both sides, data on all', async (t) => {
  await limitRun(t, 255, 16, 160);
});

test('client max connections 16 (server 255): the client\'s limit is the group\'s, the 17th opens a second group', async (t) => {
  await limitRun(t, 16, 255, 161);
});
