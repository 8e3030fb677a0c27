// The CLC handshake, both roles (RFC 7609 3.5.2, SMCv2 as Linux implements it): Proposal →
// Accept → Confirm over the connection's TCP socket, the server's choice of version and of
// first vs subsequent contact, the link bring-up that first contact needs (QP RTR/RTS and
// CONFIRM LINK), CONFIRM RKEY for a new RMB in an existing link group, and a Decline with the
// right reason on every failure — after which the connection silently continues over TCP,
// exactly like kernel SMC.
//
//   client                                      server
//   ──────                                      ──────
//   PROPOSAL ───────────────────────────────▶   choose version/path, find or create link group
//                                               (CONFIRM RKEY if a new RMB in an existing group)
//            ◀─────────────────────────────── ACCEPT (first contact: new QP in INIT, FCE)
//   first contact: QP → RTR
//   (CONFIRM RKEY if a new RMB in an existing group)
//   CONFIRM ────────────────────────────────▶   first contact: QP → RTR → RTS
//            ◀═══════ LLC CONFIRM LINK req ═══
//   QP → RTS ═══════ LLC CONFIRM LINK rsp ══▶
//
// Early data (3.5.2.4): the peer may send CDCs as soon as it considers the connection up, before
// our side has attached the connection; they are queued in a PendingSink.

import type { Socket } from 'node:net';
import { networkInterfaces } from 'node:os';
import {
  CLC_ACCEPT, CLC_CONFIRM, CLC_PROPOSAL, PATH_B, PATH_N, PATH_R, PATH_D,
  encodeClc, type ClcAcceptConfirm, type ClcProposal, type ClcMessage, type ClcFce, type ClcInput,
} from '../../dissectors/wire/clc.js';
import { formatReason } from '../../dissectors/wire/reasons.js';
import { parseIpv4, ipv4Str, put32, u32 } from '../../dissectors/wire/common.js';
import type { Mtu, Pd } from '../verbs/index.js';
import { ClcChannel, ClcError, DECL, describeDecline } from './channel.js';
import { sizeCode, sizeFromCode, type ResolvedOptions } from '../config.js';
import type { BufDesc, ConnSink, Link, LinkGroup, Role, Rtoken } from '../llc/linkgroup.js';

/** The local RoCE identity the handshake advertises. */
export interface LocalIdentity {
  /** System ID "instance@mac" (Linux: 2 random bytes + the first RoCE device's MAC). */
  peerId: string;
  gid: string;
  mac: string;
  mtu: Mtu;
  sgidIndex: number;
  pd: Pd;
}

/** What a handshake needs from the stack. */
export interface HandshakeContext {
  opts: ResolvedOptions;
  /** The first local RoCE port (its identity goes into CLC). */
  id: LocalIdentity;
  /** Every local RoCE port, `id` first (more than one: links can be added). */
  ports: readonly LocalIdentity[];
  findLinkGroup(match: (lg: LinkGroup) => boolean): LinkGroup | undefined;
  newLinkGroup(role: Role, version: 1 | 2, release: number, peerId: string, maxConns: number, maxLinks: number): LinkGroup;
  /** Serialise link-group decisions of one role for one peer (Linux smc_server_lgr_pending,
   *  which is global): concurrent first contacts to one peer must end in one link group. Keyed
   *  by the peer's identity so that a peer that goes silent mid-handshake delays only itself.
   *  Resolves to the unlock function. */
  lgrLock(role: Role, peer: string): Promise<() => void>;
  /** Admission: a handshake slot (resolves to its release) or undefined when none freed up in time. */
  handshakeSlot(): Promise<(() => void) | undefined>;
}

export interface Fallback {
  mode: 'tcp';
  /** Decline / fallback reason code (dissectors/wire/reasons.ts). */
  code: number;
  /** Who decided: the peer declined, or we did (and told it). */
  declinedBy: 'peer' | 'local';
  reason: string;
  /** The server got no Proposal at all (silence or an empty close): Linux closes such a
   *  connection instead of handing it to the application, and so do we. */
  drop?: boolean;
  /** Bytes read past the last CLC message (the peer's first application data). */
  leftover?: Buffer;
  /** The peer's FIN arrived during the handshake. */
  peerEnded?: boolean;
  /** We decided the fallback (timeout, error): CLC messages the peer sent before it saw our
   *  Decline may still be in the stream; they are not application data. */
  strayClc?: boolean;
  /** Client: the server closed or reset the TCP connection during CLC (before or inside its
   *  Accept, or our Proposal/Confirm could not be sent), so there is no connection to fall back
   *  to. Linux's connect() fails then (smc_clc_wait_msg's ECONNRESET / EPROTO is a negative
   *  reason: no Decline, no fallback); connect() rejects with this code. */
  failed?: { code: string; message: string };
}

export interface Established {
  mode: 'smcr';
  role: Role;
  version: 1 | 2;
  release: number;
  firstContact: boolean;
  lg: LinkGroup;
  link: Link;
  token: number;
  peerToken: number;
  rmb: BufDesc;
  sndbuf: BufDesc;
  peerRmb: Rtoken;
  peerRmbeSize: number;
  /** Negotiated UEID (v2). */
  eid?: string;
  /** Peer host name (v2 first contact). */
  peerHost?: string;
  /** CDCs that arrived before the connection was attached. */
  sink: PendingSink;
  /** The peer's FIN on the TCP connection arrived during the handshake. */
  peerEnded?: boolean;
  /** Step timings (ms since the handshake began). */
  steps: Array<{ step: string; ms: number }>;
}

export type HandshakeResult = Fallback | Established;

/** Queues CDCs until the connection attaches (the race of 3.5.2.4). */
class PendingSink implements ConnSink {
  private q: Uint8Array[] = [];
  private target: ConnSink | undefined;
  private down: string | undefined;
  private switched: string | undefined;
  receiveCdc(b: Uint8Array): void { if (this.target) this.target.receiveCdc(b); else if (this.q.length < 1024) this.q.push(b.slice()); }
  linkGroupDown(reason: string): void { if (this.target) this.target.linkGroupDown(reason); else this.down = reason; }
  linkSwitched(reason: string): void { if (this.target) this.target.linkSwitched(reason); else this.switched = reason; }
  attach(t: ConnSink): void {
    this.target = t;
    for (const b of this.q.splice(0)) t.receiveCdc(b);
    if (this.down !== undefined) t.linkGroupDown(this.down);
    else if (this.switched !== undefined) t.linkSwitched(this.switched);
  }
}

const FEATURE_MASK_V21 = 1;
const noop = (): void => {};
const OS_LINUX = 2;

/** How long an interface-prefix answer is reused. os.networkInterfaces() is a getifaddrs()
 *  per call: once per handshake it was 20 % of a client's CPU in a burst of 2000 connects,
 *  enough to send Proposals later than the server's Proposal deadline. Addresses change rarely. */
const PREFIX_CACHE_MS = 1000;
const prefixCache = new Map<string, { at: number; v: { prefix: string; len: number } | undefined }>();

/** IPv4 prefix of the interface holding `addr` (for the v1 Proposal's IP area and its check):
 *  the interface with that address, else one whose subnet contains it (127.0.5.1 is on lo's /8). */
function ipv4Prefix(addr: string): { prefix: string; len: number } | undefined {
  const now = Date.now();
  const hit = prefixCache.get(addr);
  if (hit && now - hit.at < PREFIX_CACHE_MS) return hit.v;
  const v = lookupIpv4Prefix(addr);
  if (prefixCache.size > 64) prefixCache.clear();
  prefixCache.set(addr, { at: now, v });
  return v;
}

function lookupIpv4Prefix(addr: string): { prefix: string; len: number } | undefined {
  let found: { len: number } | undefined;
  for (const list of Object.values(networkInterfaces())) {
    for (const a of list ?? []) {
      if (a.family !== 'IPv4') continue;
      const len = a.cidr ? Number(a.cidr.split('/')[1]) : 32;
      if (a.address === addr) { found = { len }; break; }
      if (!found && inPrefix(addr, a.address, len)) found = { len };
    }
  }
  if (!found) return undefined;
  const mask = found.len === 0 ? 0 : (~0 << (32 - found.len)) >>> 0;
  const b = new Uint8Array(4);
  put32(b, 0, (ipNum(addr) & mask) >>> 0);
  return { prefix: ipv4Str(b, 0), len: found.len };
}

function ipNum(s: string): number { return u32(parseIpv4(s), 0); }

function plainIpv4(a: string | undefined): string {
  return (a ?? '').replace(/^::ffff:/, '');
}

function inPrefix(addr: string, prefix: string, len: number): boolean {
  if (len === 0) return true;
  const mask = (~0 << (32 - len)) >>> 0;
  return ((ipNum(addr) & mask) >>> 0) === ((ipNum(prefix) & mask) >>> 0);
}

function fce(ctx: HandshakeContext, release: number, maxConns: number, maxLinks: number): ClcFce {
  return {
    v2Direct: true, osType: OS_LINUX, release, hostname: ctx.opts.hostname,
    ...(release >= 1 ? { maxConns, maxLinks, featureMask: FEATURE_MASK_V21, vendorExp: 0 } : {}),
  };
}

/** Accept/Confirm body for our side of a connection. */
function acceptConfirm(
  ctx: HandshakeContext, type: 'accept' | 'confirm', version: 1 | 2, first: boolean, link: Link, token: number, rmb: BufDesc,
  mtu: Mtu, extra: { eid?: string; fce?: ClcFce; gidList?: string[] },
): ClcAcceptConfirm {
  const mr = rmb.mrs.get(link.port) ?? rmb.mr; // the RMB as registered on the named link's device
  return {
    type, eyecatcher: 'SMCR', trailer: 'SMCR', typeCode: type === 'accept' ? CLC_ACCEPT : CLC_CONFIRM, length: 0, version,
    firstContact: first, typev1: PATH_R,
    r: {
      // the GID/MAC of the link named (after a failover, not necessarily the first device's)
      peerId: ctx.id.peerId, gid: link.port.gid, mac: link.port.mac, qpn: link.qpn, rkey: mr.rkey, rmbeIdx: 1, token,
      rmbeSizeCode: sizeCode(rmb.size), mtuCode: mtu, rmbVa: mr.addr, psn: link.wr.psn,
      ...(version === 2 ? { eid: extra.eid ?? '' } : {}),
      ...(version === 2 && first && extra.fce ? { fce: extra.fce } : {}),
      ...(version === 2 && first && type === 'confirm' ? { gidList: extra.gidList ?? [] } : {}),
    },
  };
}

function withoutLength<T extends { length: number }>(m: T): Omit<T, 'length'> {
  const { length: _l, ...rest } = m;
  return rest;
}

/** Client side: Proposal, Accept, Confirm (+ first-contact link bring-up). Never throws. */
export async function clientHandshake(ctx: HandshakeContext, tcp: Socket): Promise<HandshakeResult> {
  const ch = new ClcChannel(tcp, ctx.opts.trace);
  return withStream(await clientSteps(ctx, tcp, ch), ch);
}

/** Server side: Proposal in, Accept out, Confirm in (+ first-contact link bring-up). Never throws. */
export async function serverHandshake(ctx: HandshakeContext, tcp: Socket): Promise<HandshakeResult> {
  const ch = new ClcChannel(tcp, ctx.opts.trace);
  return withStream(await serverSteps(ctx, tcp, ch), ch);
}

/** Stop reading CLC and say what the stream holds for whoever reads it next. */
function withStream(r: HandshakeResult, ch: ClcChannel): HandshakeResult {
  const { leftover, ended } = ch.detach();
  if (r.mode === 'smcr') return ended ? { ...r, peerEnded: true } : r;
  return { ...r, leftover, peerEnded: ended, strayClc: r.declinedBy === 'local' };
}

/** Encoded Proposals by stack and local prefix: the same bytes for every connection of a stack
 *  from one address (encoding each anew was 9 % of a client's CPU in a connect burst). */
const proposals = new WeakMap<HandshakeContext, Map<string, Uint8Array>>();

function proposalBytes(ctx: HandshakeContext, pfx: { prefix: string; len: number }, v1: boolean, v2: boolean, version: 1 | 2): Uint8Array {
  const key = `${pfx.prefix}/${pfx.len}`;
  let byPrefix = proposals.get(ctx);
  if (!byPrefix) { byPrefix = new Map(); proposals.set(ctx, byPrefix); }
  const hit = byPrefix.get(key);
  if (hit) return hit;
  const o = ctx.opts;
  const proposal: Omit<ClcProposal, 'length'> = {
    type: 'proposal', eyecatcher: 'SMCR', trailer: 'SMCR', typeCode: CLC_PROPOSAL, version,
    typev2: v2 ? PATH_R : PATH_N, typev1: v1 ? PATH_R : PATH_N,
    // A v2-only Proposal carries no v1 identity (Linux leaves these zero).
    peerId: v1 ? ctx.id.peerId : '0@00:00:00:00:00:00', gid: v1 ? ctx.id.gid : '::', mac: v1 ? ctx.id.mac : '00:00:00:00:00:00',
    ...(v1 ? { prefix: { ipv4: pfx.prefix, ipv4Len: pfx.len, ipv6: [] } } : {}),
    ...(v2 ? {
      smcd: { ismGid: 0n, ismChid: 0, vendorOui: 0, vendorExp: 0n },
      v2: { eids: o.ueids, release: o.release, seidFlag: false, roceV2Gid: ctx.id.gid, maxConns: o.maxConns, maxLinks: o.maxLinks, featureMask: o.release >= 1 ? FEATURE_MASK_V21 : 0 },
    } : {}),
  };
  const bytes = encodeClc(proposal as ClcInput);
  if (byPrefix.size > 64) byPrefix.clear();
  byPrefix.set(key, bytes);
  return bytes;
}

async function clientSteps(ctx: HandshakeContext, tcp: Socket, ch: ClcChannel): Promise<HandshakeResult> {
  const t0 = Date.now();
  const steps: Established['steps'] = [];
  const o = ctx.opts;
  const v2 = o.versions.includes(2) && o.ueids.length > 0;
  const v1 = o.versions.includes(1);
  let version: 1 | 2 = v2 ? 2 : 1;
  let lg: LinkGroup | undefined;
  let newGroup = false;
  let held: { rmb?: BufDesc; sndbuf?: BufDesc; token?: number } = {};
  let unlock: () => void = noop;
  try {
    if (!v1 && !v2) throw new ClcError(DECL.NOUEID, 'SMC-Rv2 needs a UEID and v1 is disabled');
    const local = plainIpv4(tcp.localAddress);
    await ch.sendEncoded(proposalBytes(ctx, ipv4Prefix(local) ?? { prefix: local, len: 32 }, v1, v2, version));
    const m = await ch.read(o.clcTimeoutMs, 'Accept');
    steps.push({ step: 'proposal→accept', ms: Date.now() - t0 });
    if (m.type === 'decline') return fallbackFromPeer(m);
    if (m.type === 'accept' && m.typev1 === PATH_D) throw new ClcError(DECL.MODEUNSUPP, 'server chose SMC-D; only SMC-R is supported');
    if (m.type !== 'accept' || !m.r) throw new ClcError(DECL.SYNCERR, `expected CLC Accept, got ${m.type}`);
    const acc = m;
    const r = m.r;
    if (acc.version >= 2) {
      if (!v2) throw new ClcError(DECL.VERSMISMAT, 'server chose SMC v2, which we did not offer');
      version = 2;
      if (!o.ueids.includes((r.eid ?? '').toUpperCase())) throw new ClcError(DECL.NOUEID, `server chose UEID "${r.eid}" which we did not offer`);
    } else {
      if (!v1) throw new ClcError(DECL.VERSMISMAT, 'server chose SMC v1, which we did not offer');
      version = 1;
    }
    let release = 0;
    let maxConns = o.maxConns;
    let maxLinks = o.maxLinks;
    if (version === 2 && acc.firstContact) {
      const f = r.fce;
      if (!f) throw new ClcError(DECL.SYNCERR, 'first-contact v2 Accept without the first-contact extension');
      if (f.release > o.release) throw new ClcError(DECL.RELEASEERR, `server release v2.${f.release} is newer than ours (v2.${o.release})`);
      release = f.release;
      if (release >= 1) {
        maxConns = Math.min(maxConns, f.maxConns ?? maxConns);
        maxLinks = Math.min(maxLinks, f.maxLinks ?? maxLinks);
        if (maxConns < 16) throw new ClcError(DECL.MAXCONNERR, `server max connections ${f.maxConns} below 16`);
        if (maxLinks < 1) throw new ClcError(DECL.MAXLINKERR, `server max links ${f.maxLinks} below 1`);
      }
    }
    if (r.rmbeSizeCode > 15) throw new ClcError(DECL.SYNCERR, `server RMBE size code ${r.rmbeSizeCode} out of range`);
    if (r.mtuCode < 1 || r.mtuCode > 5) throw new ClcError(DECL.SYNCERR, `server MTU code ${r.mtuCode} out of range`);
    // -- link group: new on first contact; else the one whose link talks to the named QP
    let link: Link | undefined;
    // The server waits for our Confirm for its CLC timeout from its Accept: what we do before
    // the Confirm (the lock, a CONFIRM RKEY queued behind other LLC flows) is bounded by that.
    const serverWaitsUntil = Date.now() + o.clcTimeoutMs;
    unlock = await lockWithin(ctx, 'client', `${r.peerId}|${r.gid}`, o.clcTimeoutMs);
    if (acc.firstContact) {
      lg = ctx.newLinkGroup('client', version, release, r.peerId, maxConns, maxLinks);
      newGroup = true;
      link = lg.createLink();
      lg.connectLink(link, { gid: r.gid, mac: r.mac, qpn: r.qpn, psn: r.psn, mtu: r.mtuCode as Mtu }, false);
    } else {
      lg = ctx.findLinkGroup((g) => g.role === 'client' && g.version === version && g.peerId === r.peerId && !g.full
        && [...g.links.values()].some((l) => l.state === 'ACTIVE' && l.peer?.qpn === r.qpn && l.peer.gid === r.gid));
      if (!lg) throw new ClcError(DECL.SYNCERR, `server continues a link group (QP 0x${r.qpn.toString(16)}) we do not have`, false, true);
      release = lg.release;
      // by QPN and GID: two devices of the peer may use the same QPN (rxe numbers QPs per device)
      link = [...lg.links.values()].find((l) => l.state === 'ACTIVE' && l.peer?.qpn === r.qpn && l.peer.gid === r.gid)!;
      unlock();
      unlock = noop;
    }
    const mtu = Math.min(r.mtuCode, ctx.id.mtu) as Mtu;
    const rmb = lg.getRmb(o.rmbSize);
    held = { rmb: rmb.buf, sndbuf: lg.getSndbuf(o.sndbufSize), token: lg.allocToken() };
    const sink = new PendingSink();
    const peerRmb: Rtoken = { rkey: r.rkey, addr: r.rmbVa };
    lg.addConn(held.token!, sink);
    lg.setConnPeer(held.token!, r.token, peerRmb, sizeFromCode(r.rmbeSizeCode), link);
    if (!acc.firstContact && rmb.fresh) await confirmRkeyWhilePeerWaits(lg, rmb.buf, ch, serverWaitsUntil, DECL.TIMEOUT_CL);
    await ch.send(withoutLength(acceptConfirm(ctx, 'confirm', version, acc.firstContact, link, held.token!, rmb.buf, mtu, {
      ...(r.eid !== undefined ? { eid: r.eid } : {}),
      fce: fce(ctx, release, maxConns, maxLinks), gidList: ctx.ports.map((p) => p.gid),
    })));
    steps.push({ step: 'confirm sent', ms: Date.now() - t0 });
    if (acc.firstContact) {
      try {
        await lg.clientConfirmLink(link);
      } catch (e) {
        throw new ClcError(DECL.TIMEOUT_CL, `first link not confirmed: ${(e as Error).message}`);
      }
      steps.push({ step: 'confirm link', ms: Date.now() - t0 });
    }
    unlock();
    unlock = noop;
    rmb.buf.confirmed = true;
    return {
      mode: 'smcr', role: 'client', version, release, firstContact: acc.firstContact, lg, link, token: held.token!, peerToken: r.token,
      rmb: rmb.buf, sndbuf: held.sndbuf!, peerRmb, peerRmbeSize: sizeFromCode(r.rmbeSizeCode),
      ...(r.eid ? { eid: r.eid } : {}), ...(r.fce?.hostname ? { peerHost: r.fce.hostname } : {}), sink, steps,
    };
  } catch (e) {
    if (e instanceof ClcError && e.errno) return serverGone(ctx, e, e.errno, lg, newGroup, held);
    return fail(ch, ctx, e, version, lg, newGroup, held);
  } finally {
    unlock();
  }
}

/** The server closed or reset the connection during CLC: nothing to decline, no fallback. */
function serverGone(
  ctx: HandshakeContext, err: ClcError, code: string, lg: LinkGroup | undefined, newGroup: boolean,
  held: { rmb?: BufDesc; sndbuf?: BufDesc; token?: number },
): Fallback {
  cleanup(lg, newGroup, held);
  const message = `the server ended the TCP connection during the SMC handshake (${err.message})`;
  ctx.opts.log(`CLC: ${message}: connect fails with ${code}`);
  return { mode: 'tcp', code: err.code, declinedBy: 'local', reason: err.message, failed: { code, message } };
}

async function serverSteps(ctx: HandshakeContext, tcp: Socket, ch: ClcChannel): Promise<HandshakeResult> {
  const t0 = Date.now();
  const steps: Established['steps'] = [];
  const o = ctx.opts;
  let version: 1 | 2 = 1;
  let lg: LinkGroup | undefined;
  let newGroup = false;
  let held: { rmb?: BufDesc; sndbuf?: BufDesc; token?: number } = {};
  let unlock: () => void = noop;
  let releaseSlot: () => void = noop;
  let proposalSeen = false;
  try {
    const m = await ch.read(o.clcTimeoutMs, 'Proposal');
    proposalSeen = true;
    // The client waits for our Accept for its CLC timeout: everything before the Accept (this
    // peer's lock, a handshake slot, a CONFIRM RKEY queued behind other LLC flows) is bounded by
    // that. Past it the client has declined and sends its data over TCP; a handshake still
    // waiting here would leave that data unread (the 2000-connect flood: 30 s and more).
    const clientWaitsUntil = Date.now() + o.clcTimeoutMs;
    if (m.type === 'decline') return fallbackFromPeer(m);
    if (m.type !== 'proposal') throw new ClcError(DECL.SYNCERR, `expected CLC Proposal, got ${m.type}`);
    const p = m;
    version = p.version >= 2 ? 2 : 1;
    const choice = chooseServer(ctx, p, plainIpv4(tcp.localAddress));
    version = choice.version;
    const { release, maxConns, maxLinks, eid, peerGid } = choice;
    steps.push({ step: 'proposal', ms: Date.now() - t0 });
    // -- admission: at most opts.maxHandshakes past this point at once (their QPs, buffers and
    //    LLC flows are the costly part); a Proposal that finds no slot in time is declined and
    //    the connection goes on as TCP.
    //    Taken after this peer's lock, so Proposals queued behind a silent one of the same peer
    //    hold no slot.
    // -- first or subsequent contact (decided under this peer's lock: a second Proposal from the
    //    same peer waits until this first contact has its link group, then joins it; at most one
    //    CLC timeout, then it is declined)
    unlock = await lockWithin(ctx, 'server', `${p.peerId}|${peerGid}`, Math.max(1, clientWaitsUntil - Date.now()));
    const slot = await ctx.handshakeSlot();
    if (!slot) throw new ClcError(DECL.MEM, `too many handshakes at once (limit ${o.maxHandshakes})`);
    releaseSlot = slot;
    lg = ctx.findLinkGroup((g) => g.role === 'server' && g.version === version && g.peerId === p.peerId && !g.full
      && (g.state === 'ACTIVE' || g.state === 'IDLE') && !!g.activeLink()
      && (g.peerGids.includes(peerGid) || [...g.links.values()].some((l) => l.state === 'ACTIVE' && l.peer?.gid === peerGid)));
    const first = lg === undefined;
    if (!first) { unlock(); unlock = noop; }
    let link: Link;
    if (!lg) {
      lg = ctx.newLinkGroup('server', version, release, p.peerId, maxConns, maxLinks);
      newGroup = true;
      link = lg.createLink();
    } else {
      link = lg.linkForNewConn()!;
    }
    const rmb = lg.getRmb(o.rmbSize);
    held = { rmb: rmb.buf, sndbuf: lg.getSndbuf(o.sndbufSize), token: lg.allocToken() };
    // Registered before the Accept goes out: the client may send data right after its Confirm.
    const sink = new PendingSink();
    lg.addConn(held.token!, sink);
    if (!first && rmb.fresh) await confirmRkeyWhilePeerWaits(lg, rmb.buf, ch, clientWaitsUntil, DECL.TIMEOUT_AL);
    const grp = lg;
    await ch.send(withoutLength(acceptConfirm(ctx, 'accept', version, first, link, held.token!, rmb.buf, ctx.id.mtu, {
      ...(eid !== undefined ? { eid } : {}), fce: fce(ctx, grp.release, grp.maxConns, grp.maxLinks),
    })));
    const c = await ch.read(o.clcTimeoutMs, 'Confirm');
    steps.push({ step: 'accept→confirm', ms: Date.now() - t0 });
    if (c.type === 'decline') { const fb = fallbackFromPeer(c); cleanup(lg, newGroup, held); return fb; }
    if (c.type !== 'confirm' || !c.r) throw new ClcError(DECL.SYNCERR, `expected CLC Confirm, got ${c.type}`);
    const r = c.r;
    if (c.firstContact !== first) throw new ClcError(DECL.SYNCERR, `Confirm says ${c.firstContact ? 'first' : 'subsequent'} contact, we chose ${first ? 'first' : 'subsequent'}`, false, true);
    if (r.rmbeSizeCode > 15) throw new ClcError(DECL.SYNCERR, `client RMBE size code ${r.rmbeSizeCode} out of range`);
    if (r.mtuCode < 1 || r.mtuCode > 5) throw new ClcError(DECL.SYNCERR, `client MTU code ${r.mtuCode} out of range`);
    const peerRmb: Rtoken = { rkey: r.rkey, addr: r.rmbVa };
    lg.setConnPeer(held.token!, r.token, peerRmb, sizeFromCode(r.rmbeSizeCode), link);
    if (first) {
      lg.peerGids = [...new Set([r.gid, ...(r.gidList ?? [])])];
      lg.connectLink(link, { gid: r.gid, mac: r.mac, qpn: r.qpn, psn: r.psn, mtu: r.mtuCode as Mtu }, true);
      try {
        await lg.serverConfirmLink(link);
      } catch (e) {
        throw new ClcError(DECL.TIMEOUT_CL, `first link not confirmed: ${(e as Error).message}`);
      }
      steps.push({ step: 'confirm link', ms: Date.now() - t0 });
      unlock();
      unlock = noop;
    } else if (link.peer && r.qpn !== link.peer.qpn) {
      throw new ClcError(DECL.SYNCERR, `Confirm names QP 0x${r.qpn.toString(16)}, the link group's peer QP is 0x${link.peer.qpn.toString(16)}`, false, true);
    }
    rmb.buf.confirmed = true;
    // A second link (in the background, like Linux's add-link work; LLC flows are serialised, so a
    // CONFIRM RKEY of the next connection waits). Offered even with one local device, as Linux
    // does: a Linux client waits 2 s for this ADD LINK when max links > 1, and rejects it at once
    // when it has no second device itself.
    if (first && lg.maxLinks > 1) void lg.addLink();
    return {
      mode: 'smcr', role: 'server', version, release: lg.release, firstContact: first, lg, link, token: held.token!, peerToken: r.token,
      rmb: rmb.buf, sndbuf: held.sndbuf!, peerRmb, peerRmbeSize: sizeFromCode(r.rmbeSizeCode),
      ...(eid ? { eid } : {}), ...(r.fce?.hostname ? { peerHost: r.fce.hostname } : {}), sink, steps,
    };
  } catch (e) {
    // No Proposal at all (silence until the CLC timeout, or a close without a byte): nothing to
    // decline, and nothing for the application either: Linux closes such a connection.
    const silent = e instanceof ClcError && !proposalSeen && ch.buffered === 0
      && (e.code === DECL.TIMEOUT_AL || e.code === DECL.TIMEOUT_CL || e.eofClean);
    const fb = await fail(ch, ctx, e, version, lg, newGroup, held, silent);
    return silent ? { ...fb, drop: true } : fb;
  } finally {
    unlock();
    releaseSlot();
  }
}

/**
 * CONFIRM RKEY for a new RMB of an existing link group, given up (ClcError `code`) as soon as the
 * peer stops waiting for our next CLC message: it sent something (its Decline) or its CLC
 * timeout ran out (`until`). LLC flows of a group run one at a time, so under a burst the flow
 * may wait long in the queue. An abandoned flow still runs later; if it completes, the RMB goes
 * back to the pool confirmed (the next connection then needs no CONFIRM RKEY for it).
 */
async function confirmRkeyWhilePeerWaits(lg: LinkGroup, rmb: BufDesc, ch: ClcChannel, until: number, code: number): Promise<void> {
  const flow = lg.confirmRkey(rmb);
  flow.catch(() => undefined); // an abandoned flow's failure is nobody's business
  let cancel: () => void = noop;
  let t: NodeJS.Timeout | undefined;
  const gaveUp = new Promise<never>((_, reject) => {
    cancel = ch.onPeerActivity(() => reject(new ClcError(code, 'CONFIRM RKEY: the peer stopped waiting (it sent its Decline or closed)')));
    t = setTimeout(() => reject(new ClcError(code, 'CONFIRM RKEY not done before the peer\'s CLC timeout (LLC flows of the link group busy)')), Math.max(0, until - Date.now()));
  });
  gaveUp.catch(() => undefined);
  try {
    await Promise.race([flow, gaveUp]);
  } catch (e) {
    throw e instanceof ClcError ? e : new ClcError(DECL.ERR_RTOK, `CONFIRM RKEY: ${(e as Error).message}`);
  } finally {
    cancel();
    clearTimeout(t);
  }
}

/**
 * This peer's link-group lock, waiting at most `ms` (another handshake of the same peer holds it
 * and its peer went silent). A lock granted after we gave up is released at once.
 */
async function lockWithin(ctx: HandshakeContext, role: Role, peer: string, ms: number): Promise<() => void> {
  const p = ctx.lgrLock(role, peer);
  let t: NodeJS.Timeout | undefined;
  const late = new Promise<undefined>((resolve) => { t = setTimeout(() => resolve(undefined), ms); });
  const got = await Promise.race([p, late]);
  clearTimeout(t);
  if (got) return got;
  void p.then((u) => u());
  throw new ClcError(DECL.INTERR, `another handshake with this peer held its link group decision for ${ms} ms`);
}

interface Choice { version: 1 | 2; release: number; maxConns: number; maxLinks: number; eid?: string; peerGid: string }

/** The server's choice (Linux smc_listen_find_device order: SMC-Rv2, then SMC-Rv1), or the decline reason. */
function chooseServer(ctx: HandshakeContext, p: ClcProposal, localAddr: string): Choice {
  const o = ctx.opts;
  let why: ClcError | undefined;
  const offersR = (t: number): boolean => t === PATH_R || t === PATH_B;
  if (p.version >= 2 && offersR(p.typev2)) {
    if (!o.versions.includes(2)) why = new ClcError(DECL.VERSMISMAT, 'client offers SMC-Rv2 only; v2 is disabled here');
    else if (!p.v2) why = new ClcError(DECL.NOV2EXT, 'v2 Proposal without the v2 extension');
    else {
      const eid = p.v2.eids.map((e) => e.toUpperCase()).find((e) => o.ueids.includes(e));
      if (!eid) why = new ClcError(DECL.NOUEID, `no common UEID (client ${p.v2.eids.join(',') || 'none'}, ours ${o.ueids.join(',') || 'none'})`);
      else {
        const release = Math.min(p.v2.release, o.release);
        let maxConns = o.maxConns, maxLinks = o.maxLinks;
        if (release >= 1) {
          if (p.v2.maxConns) maxConns = Math.min(maxConns, p.v2.maxConns);
          if (p.v2.maxLinks) maxLinks = Math.min(maxLinks, p.v2.maxLinks);
          if (maxConns < 16) throw new ClcError(DECL.MAXCONNERR, `client max connections ${p.v2.maxConns} below 16`);
          if (maxLinks < 1) throw new ClcError(DECL.MAXLINKERR, `client max links ${p.v2.maxLinks} below 1`);
        }
        return { version: 2, release, maxConns, maxLinks, eid, peerGid: p.v2.roceV2Gid };
      }
    }
  }
  if (offersR(p.typev1)) {
    if (!o.versions.includes(1)) throw why ?? new ClcError(DECL.VERSMISMAT, 'client offers SMC-Rv1 only; v1 is disabled here');
    const pre = p.prefix;
    const match = pre !== undefined && pre.ipv4Len <= 32 && inPrefix(localAddr, pre.ipv4, pre.ipv4Len) && (ipv4Prefix(localAddr)?.len ?? pre.ipv4Len) === pre.ipv4Len;
    if (!match) throw why ?? new ClcError(DECL.DIFFPREFIX, `client prefix ${pre ? `${pre.ipv4}/${pre.ipv4Len}` : 'none'} does not contain our ${localAddr}`);
    return { version: 1, release: 0, maxConns: o.maxConns, maxLinks: o.maxLinks, peerGid: p.gid };
  }
  if (why) throw why;
  if (p.typev1 === PATH_D || p.typev2 === PATH_D) throw new ClcError(DECL.NOSMCDEV, 'client offers SMC-D only; SMC-D is not supported');
  throw new ClcError(DECL.MODEUNSUPP, 'client offers no SMC-R path');
}

function fallbackFromPeer(m: ClcMessage & { type: 'decline' }): Fallback {
  return { mode: 'tcp', code: m.diagnosis, declinedBy: 'peer', reason: describeDecline(m) };
}

function cleanup(lg: LinkGroup | undefined, newGroup: boolean, held: { rmb?: BufDesc; sndbuf?: BufDesc; token?: number }): void {
  if (!lg) return;
  if (held.token !== undefined) lg.removeConn(held.token);
  if (newGroup) lg.terminate('handshake failed', false);
  else lg.putBuffers(...[held.rmb, held.sndbuf].filter((b): b is BufDesc => b !== undefined));
}

async function fail(
  ch: ClcChannel, ctx: HandshakeContext, e: unknown, version: 1 | 2, lg: LinkGroup | undefined, newGroup: boolean,
  held: { rmb?: BufDesc; sndbuf?: BufDesc; token?: number }, silent = false,
): Promise<Fallback> {
  const err = e instanceof ClcError ? e : new ClcError(DECL.INTERR, (e as Error).message ?? String(e));
  cleanup(lg, newGroup, held);
  // Out of sync: the peer must drop the link group it believes we share.
  if (silent) {
    ctx.opts.log(`CLC: no Proposal (${err.message}): connection closed`);
  } else {
    await ch.decline(err.code, version, ctx.id.peerId, err.outOfSync);
    ctx.opts.log(`CLC: declined ${formatReason(err.code)}: ${err.message}`);
  }
  return { mode: 'tcp', code: err.code, declinedBy: 'local', reason: err.message };
}
