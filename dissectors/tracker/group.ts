// One link group, as the model's LinkGroup, with its history (events and type changes) packed:
// the tracker keeps every group for the whole capture, and a group whose connection has it to
// itself (one link group per connection) spent more on its history than on anything else: an
// event object, its BigInt time and a copy of its link's name per event (about 140 bytes
// each, four per group), a type record of 128 bytes. Here a step of the history is three numbers
// in one list of doubles: its frame, its time in ns since the capture's first frame, and a code
// (what, who, the link's id) with one number (a connection, a QP, a type); the link's name and
// the sentence are made when read. What does not fit (a sentence of its own, a time not exact
// as a double, a name that is not the group's usual one) is kept as the model's object in a
// side list, in order, with the GIDs the ADD LINK sentences name. Reads give the model's
// objects, new on each read (the summary and the diagnosis read them once or twice per group).

import type { LgEvent, LgType, Link, LinkGroup, SmcConn, TcpConn } from './model.js';
import type { Epoch } from './tcpconn.js';
import { hexQp } from '../wire/common.js';
import { none } from './lists.js';

/** The sentences nearly every group has. */
export type Sentence =
  | { kind: 'first-link'; conn: number }
  | { kind: 'confirmed' }
  | { kind: 'add-link'; gid: string; qpn: number }
  | { kind: 'rejected'; linkId: number };

type Kind = Sentence['kind'] | 'type' | 'other';
const KINDS: readonly Kind[] = ['first-link', 'confirmed', 'add-link', 'rejected', 'type', 'other'];
const TYPES: readonly LgType[] = ['NONE', 'SINGLE', 'SYMMETRIC', 'ASYMMETRIC_LOCAL', 'ASYMMETRIC_PEER'];
/** Numbers per step: frame, time, code and value. */
const STEP = 3;
/** The code and the value share the third number: code * VALUE + value (exact: codes < 2^13). */
const VALUE = 0x100000000;
/** Up to this many numbers the list is copied to its exact size on each step. */
const EXACT = 8 * STEP;

type TypeStep = { type: LgType; frame: number; tsNs: bigint };
/** What a step could not say in numbers: the model's objects, and ADD LINK's GIDs. */
type Extra = LgEvent | TypeStep | string;

/** What a first contact's CLC (and the first CONFIRM LINK) said about the two peers: the same
 *  for every group between the same two hosts, so kept once (`hello`) rather than as nine fields
 *  of each group. */
interface Hello {
  readonly clientPeer: string | undefined;
  readonly serverPeer: string | undefined;
  readonly clientHost: string | undefined;
  readonly serverHost: string | undefined;
  readonly version: number | undefined;
  readonly release: number | undefined;
  readonly ueid: string | undefined;
  readonly maxLinks: number | undefined;
  readonly maxConns: number | undefined;
}
const NO_HELLO: Hello = Object.freeze({
  clientPeer: undefined, serverPeer: undefined, clientHost: undefined, serverHost: undefined, version: undefined, release: undefined,
  ueid: undefined, maxLinks: undefined, maxConns: undefined,
});
/** One record per distinct Hello (bounded: starts over when full). */
const hellos = new Map<string, Hello>();
/** The record made or found last: consecutive groups are mostly between the same two hosts. */
let lastHello: Hello = NO_HELLO;

function sameHello(a: Hello, b: Hello): boolean {
  return a.clientPeer === b.clientPeer && a.serverPeer === b.serverPeer && a.clientHost === b.clientHost && a.serverHost === b.serverHost
    && a.version === b.version && a.release === b.release && a.ueid === b.ueid && a.maxLinks === b.maxLinks && a.maxConns === b.maxConns;
}

function hello(h: Hello): Hello {
  // the last record when it says the same: no key string per group (a nine-part key, its
  // hash and a map lookup were a few µs of every first contact)
  if (sameHello(h, lastHello)) return lastHello;
  lastHello = helloByKey(h);
  return lastHello;
}

function helloByKey(h: Hello): Hello {
  const key = `${h.clientPeer}|${h.serverPeer}|${h.clientHost}|${h.serverHost}|${h.version}|${h.release}|${h.ueid}|${h.maxLinks}|${h.maxConns}`;
  let v = hellos.get(key);
  if (v === undefined) {
    if (hellos.size >= 4096) hellos.clear();
    v = Object.freeze({ ...h });
    hellos.set(JSON.parse(JSON.stringify(key)) as string, v);
  }
  return v;
}

export class GroupState implements LinkGroup {
  private hello: Hello = NO_HELLO;
  firstTcp: TcpConn | undefined = undefined;
  links: Link[] = none();
  conns: SmcConn[] = none();
  state: LinkGroup['state'] = 'active';
  /** frame, time since the epoch, code * VALUE + value (code: kind * 2 + by-server, plus the
   *  link's id * 32 or a provisional name's number * 32 + 16); per step, in capture order. */
  private log: number[] = none();
  /** The extras in order; one GID alone (a group's usual one ADD LINK) as the string itself,
   *  not a list of one (56 bytes of each such group). */
  private extra: Extra[] | string = none();

  constructor(private readonly epoch: Epoch, readonly id: number, public complete: boolean, public firstFrame: number) {}

  get clientPeer(): string | undefined { return this.hello.clientPeer; }
  get serverPeer(): string | undefined { return this.hello.serverPeer; }
  get clientHost(): string | undefined { return this.hello.clientHost; }
  get serverHost(): string | undefined { return this.hello.serverHost; }
  get version(): number | undefined { return this.hello.version; }
  get release(): number | undefined { return this.hello.release; }
  get ueid(): string | undefined { return this.hello.ueid; }
  get maxLinks(): number | undefined { return this.hello.maxLinks; }
  set maxLinks(v: number | undefined) { this.said({ maxLinks: v }); }
  get maxConns(): number | undefined { return this.hello.maxConns; }
  set maxConns(v: number | undefined) { this.said({ maxConns: v }); }
  /** The peers said these (a first contact's CLC, a CONFIRM LINK's limits). */
  said(h: Partial<Hello>): void {
    const o = this.hello;
    // a key given (even as undefined) replaces the old value, as an object spread would
    const n: Hello = {
      clientPeer: 'clientPeer' in h ? h.clientPeer : o.clientPeer, serverPeer: 'serverPeer' in h ? h.serverPeer : o.serverPeer,
      clientHost: 'clientHost' in h ? h.clientHost : o.clientHost, serverHost: 'serverHost' in h ? h.serverHost : o.serverHost,
      version: 'version' in h ? h.version : o.version, release: 'release' in h ? h.release : o.release, ueid: 'ueid' in h ? h.ueid : o.ueid,
      maxLinks: 'maxLinks' in h ? h.maxLinks : o.maxLinks, maxConns: 'maxConns' in h ? h.maxConns : o.maxConns,
    };
    if (!sameHello(n, o)) this.hello = hello(n);
  }

  /** What happened to the group's links, in capture order. */
  get events(): LgEvent[] {
    const out: LgEvent[] = [];
    this.read((kind, frame, tsNs, by, link, n, x) => {
      if (kind === 'other') { if (!isType(x!)) out.push(x as LgEvent); return; }
      if (kind === 'type') return;
      out.push({ frame, tsNs, what: kind === 'confirmed' ? 'link-confirmed' : kind === 'rejected' ? 'link-rejected' : 'link-added', link, by, text: sentence(kind, link, by, n, x as string) });
    });
    return out;
  }

  /** Each event's frame and what happened, in order (the sentence, the time and the link's
   *  name are not made). */
  forEachEvent(f: (frame: number, what: LgEvent['what']) => void): void {
    const s = this.log;
    let j = 0;
    for (let i = 0; i < s.length; i += STEP) {
      const kind = KINDS[(codeOf(s[i + 2]!) % 16) >> 1]!;
      if (kind === 'other') { const x = this.extraAt(j++)!; if (!isType(x)) f((x as LgEvent).frame, (x as LgEvent).what); continue; }
      if (kind === 'add-link') j++;
      if (kind !== 'type') f(s[i]!, kind === 'confirmed' ? 'link-confirmed' : kind === 'rejected' ? 'link-rejected' : 'link-added');
    }
  }

  /** The group's type over time (the server side's view). */
  get types(): TypeStep[] {
    const out: TypeStep[] = [];
    this.read((kind, frame, tsNs, _by, _link, n, x) => {
      if (kind === 'type') out.push({ type: TYPES[n]!, frame, tsNs });
      else if (kind === 'other' && isType(x!)) out.push(x);
    });
    return out;
  }

  /** The last type recorded, or undefined. */
  lastType(): LgType | undefined {
    let extra = typeof this.extra === 'string' ? 1 : this.extra.length;
    for (let i = this.log.length - STEP; i >= 0; i -= STEP) {
      const kind = KINDS[codeOf(this.log[i + 2]!) % 16 >> 1]!;
      if (kind === 'other' || kind === 'add-link') extra--;
      if (kind === 'type') return TYPES[this.log[i + 2]! % VALUE];
      const x = kind === 'other' ? this.extraAt(extra) : undefined;
      if (x !== undefined && isType(x)) return x.type;
    }
    return undefined;
  }

  addType(type: LgType, frame: number, tsNs: bigint): void {
    const t = this.rel(tsNs);
    if (t === undefined) this.other({ type, frame, tsNs }, frame);
    else this.step(frame, t, KINDS.indexOf('type') * 2, TYPES.indexOf(type));
  }

  /** An event as the model's object (kept as given, in order). */
  addEvent(e: LgEvent): void { this.other(e, e.frame); }

  /** An event of `link` (named `name` now) by `by` whose text is one of the common sentences. */
  addSentence(frame: number, tsNs: bigint, name: string, by: 'client' | 'server', said: Sentence): void {
    const t = this.rel(tsNs);
    const lc = this.linkCode(name);
    const n = said.kind === 'first-link' ? said.conn : said.kind === 'add-link' ? said.qpn : said.kind === 'rejected' ? said.linkId : 0;
    if (t === undefined || lc < 0 || !(Number.isInteger(n) && n >= 0 && n < VALUE)) {
      const what = said.kind === 'confirmed' ? 'link-confirmed' : said.kind === 'rejected' ? 'link-rejected' : 'link-added';
      this.other({ frame, tsNs, what, link: name, by, text: sentence(said.kind, name, by, n, said.kind === 'add-link' ? said.gid : '') }, frame);
      return;
    }
    if (said.kind === 'add-link') this.addExtra(said.gid);
    this.step(frame, t, lc * 16 + KINDS.indexOf(said.kind) * 2 + (by === 'server' ? 1 : 0), n);
  }

  /** `name` as a code (id * 2, or a provisional name's number * 2 + 1; numbers up to 9999, so
   *  that code and value stay exact in one double), or -1 when it is not one of this group's
   *  usual names. */
  private linkCode(name: string): number {
    // read as characters: "LG", this group's id (no leading zero), "/", "L" or "#", then 0 or
    // 1-9999 without a leading zero, and nothing else (no prefix string, slice or regular
    // expression per event)
    if (name.charCodeAt(0) !== 76 || name.charCodeAt(1) !== 71) return -1;
    let i = 2, id = 0;
    if (name.charCodeAt(i) === 48) return -1;
    for (let c = name.charCodeAt(i); c >= 48 && c <= 57; c = name.charCodeAt(++i)) id = id * 10 + c - 48;
    if (i === 2 || id !== this.id || name.charCodeAt(i) !== 47) return -1;
    const k = name.charCodeAt(++i);
    if (k !== 76 && k !== 35) return -1;
    const from = ++i;
    let n = 0;
    for (let c = name.charCodeAt(i); c >= 48 && c <= 57; c = name.charCodeAt(++i)) n = n * 10 + c - 48;
    const digits = i - from;
    if (i !== name.length || digits === 0 || digits > 4 || (digits > 1 && name.charCodeAt(from) === 48)) return -1;
    return n * 2 + (k === 35 ? 1 : 0);
  }

  private linkName(code: number): string {
    return `LG${this.id}/${(code & 1) === 1 ? '#' : 'L'}${code >> 1}`;
  }

  /** Time since the epoch, when exact as a double. */
  private rel(tsNs: bigint): number | undefined {
    const t = Number(tsNs - this.epoch.base);
    return Number.isSafeInteger(t) ? t : undefined;
  }

  private other(x: LgEvent | TypeStep, frame: number): void {
    this.addExtra(x);
    this.step(frame, 0, KINDS.indexOf('other') * 2, 0);
  }

  private addExtra(x: Extra): void {
    const e = this.extra;
    if (typeof e !== 'string' && e.length === 0 && typeof x === 'string') { this.extra = x; return; }
    this.extra = appendExact(typeof e === 'string' ? [e] : e, x);
  }

  private extraAt(j: number): Extra | undefined {
    const e = this.extra;
    return typeof e === 'string' ? (j === 0 ? e : undefined) : e[j];
  }

  private step(frame: number, t: number, code: number, n: number): void {
    const s = this.log;
    if (s.length >= EXACT) { s.push(frame, t, code * VALUE + n); return; }
    // exact size (concat makes no spare room, and no loop here counts towards optimising a
    // function called a few times per group); numbers only make it an array of unboxed doubles
    this.log = s.concat([frame, t, code * VALUE + n]);
  }

  /** Each step in order: its kind, frame, time, who, link name, value and extra (the model's
   *  object of an 'other' step, the GID of an ADD LINK). */
  private read(f: (kind: Kind, frame: number, tsNs: bigint, by: 'client' | 'server', link: string, n: number, x: Extra | undefined) => void): void {
    const s = this.log;
    let j = 0;
    for (let i = 0; i < s.length; i += STEP) {
      const code = codeOf(s[i + 2]!), kind = KINDS[(code % 16) >> 1]!;
      const x = kind === 'other' || kind === 'add-link' ? this.extraAt(j++) : undefined;
      if (kind === 'other') { f(kind, s[i]!, 0n, 'client', '', 0, x); continue; }
      f(kind, s[i]!, this.epoch.base + BigInt(s[i + 1]!), (code & 1) === 1 ? 'server' : 'client', this.linkName(Math.floor(code / 16)), s[i + 2]! % VALUE, x);
    }
  }
}

function codeOf(v: number): number { return Math.floor(v / VALUE); }

function isType(x: Extra): x is TypeStep {
  return typeof x === 'object' && 'type' in x;
}

function sentence(kind: Kind, link: string, by: 'client' | 'server', n: number, gid: string): string {
  switch (kind) {
    case 'first-link': return `first link proposed in the CLC handshake (connection ${n})`;
    case 'confirmed': return `${link} up (CONFIRM LINK answered by the ${by})`;
    case 'rejected': return `ADD LINK of link ${n} rejected by the ${by}`;
    default: return `ADD LINK ${link} proposed by the ${by} (${gid} QP ${hexQp(n)})`;
  }
}

function appendExact<T>(list: T[], x: T): T[] {
  return list.concat([x]);
}
