// Shared vocabulary of every wire codec: issues, decode results, the optional field tree
// used by `smcdump -V`, and small byte helpers. Codecs are pure: bytes in, value + issues out
// (decode never throws), value in, bytes out (encode).

export type Severity = 'error' | 'warn' | 'note';

/** Something wrong or noteworthy in the input, with the byte range it concerns
 *  (offset relative to the start of the buffer handed to the codec). */
export interface Issue {
  severity: Severity;
  /** Stable machine-readable code, e.g. 'clc.trailer', 'llc.length', 'ib.icrc'. */
  code: string;
  message: string;
  offset: number;
  length: number;
}

export interface Decoded<T> {
  value: T;
  issues: Issue[];
}

/** One node of the `-V` field tree. Offsets are absolute within the frame once rendered. */
export interface FieldNode {
  name: string;
  offset: number;
  length: number;
  value?: string;
  children?: FieldNode[];
}

/**
 * Collector for the detailed field tree. Codecs take an optional `Tree` and call
 * `t?.add(...)`: on the one-line hot path no tree is passed and nothing is allocated.
 * `base` is added to every offset so a codec can use offsets relative to its own buffer.
 */
export class Tree {
  readonly nodes: FieldNode[] = [];
  constructor(readonly base = 0) {}

  add(name: string, offset: number, length: number, value?: string | number | bigint): FieldNode {
    const node: FieldNode = { name, offset: this.base + offset, length };
    if (value !== undefined) node.value = String(value);
    this.nodes.push(node);
    return node;
  }

  /** A child tree whose nodes hang below a new node; `base` of the child = absolute offset. */
  sub(name: string, offset: number, length: number, value?: string): Tree {
    const node = this.add(name, offset, length, value);
    const child = new Tree(this.base + offset);
    node.children = child.nodes;
    return child;
  }
}

export function issue(issues: Issue[], severity: Severity, code: string, message: string, offset: number, length: number): void {
  issues.push({ severity, code, message, offset, length });
}

// ---- byte helpers (big-endian unless named otherwise) ----

export function u8(b: Uint8Array, o: number): number { return b[o] ?? 0; }
export function u16(b: Uint8Array, o: number): number { return ((b[o] ?? 0) << 8) | (b[o + 1] ?? 0); }
/** Little-endian u32 (e.g. the IB ICRC, transmitted least-significant byte first). */
export function u32le(b: Uint8Array, o: number): number {
  return ((b[o] ?? 0) | ((b[o + 1] ?? 0) << 8) | ((b[o + 2] ?? 0) << 16) | ((b[o + 3] ?? 0) << 24)) >>> 0;
}
export function u24(b: Uint8Array, o: number): number { return ((b[o] ?? 0) << 16) | ((b[o + 1] ?? 0) << 8) | (b[o + 2] ?? 0); }
export function u32(b: Uint8Array, o: number): number {
  return (((b[o] ?? 0) << 24) >>> 0) + (((b[o + 1] ?? 0) << 16) | ((b[o + 2] ?? 0) << 8) | (b[o + 3] ?? 0));
}

export function put16(b: Uint8Array, o: number, v: number): void { b[o] = (v >>> 8) & 0xff; b[o + 1] = v & 0xff; }
export function put32le(b: Uint8Array, o: number, v: number): void {
  b[o] = v & 0xff; b[o + 1] = (v >>> 8) & 0xff; b[o + 2] = (v >>> 16) & 0xff; b[o + 3] = (v >>> 24) & 0xff;
}
export function put24(b: Uint8Array, o: number, v: number): void { b[o] = (v >>> 16) & 0xff; b[o + 1] = (v >>> 8) & 0xff; b[o + 2] = v & 0xff; }
export function put32(b: Uint8Array, o: number, v: number): void {
  b[o] = (v >>> 24) & 0xff; b[o + 1] = (v >>> 16) & 0xff; b[o + 2] = (v >>> 8) & 0xff; b[o + 3] = v & 0xff;
}

/** "SMCR" / "SMCD" in EBCDIC: the CLC eyecatcher (clc.ts) and the TCP option's ExID
 *  (tcpopt.ts) are the same four bytes. */
export const EBCDIC_SMCR = 0xe2d4c3d9;
export const EBCDIC_SMCD = 0xe2d4c3c4;

const HEX: string[] = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));

export function hex(b: Uint8Array, o = 0, n = b.length - o): string {
  let s = '';
  const end = Math.min(b.length, o + n);
  for (let i = o; i < end; i++) s += HEX[b[i]!];
  return s;
}

export function fromHex(s: string): Uint8Array {
  const clean = s.replace(/[^0-9a-fA-F]/g, '');
  const out = new Uint8Array(clean.length >> 1);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(clean.slice(i * 2, i * 2 + 2), 16);
  return out;
}

/** `0x` + v in hex, zero-padded to `digits` (the one formatter for fixed-width hex fields). */
/**
 * Where a one-line summary is written piece by piece: a string (`StringSink`) or, on the replay
 * path, straight into smcdump's output buffer as bytes (cli/output.ts `Out`), so a printed line
 * is never built as a string first. One writer function per format serves both.
 */
export interface TextSink {
  /** Append `s` as it is. */
  text(s: string): void;
  /** Append the decimal digits of an integer 0 <= n < 2^53 (as `${n}`). */
  dec(n: number): void;
  /** Append `0x` and the unpadded lower-case hex digits of `n >>> 0` (as hexQp). */
  hex(n: number): void;
}

/** A TextSink that builds a string (`s`); `reset()` to reuse it. */
export class StringSink implements TextSink {
  s = '';
  reset(): this { this.s = ''; return this; }
  text(s: string): void { this.s += s; }
  dec(n: number): void { this.s += n; }
  hex(n: number): void { this.s += '0x' + (n >>> 0).toString(16); }
}

const HEX_DIGIT: readonly string[] = Array.from({ length: 16 }, (_, i) => i.toString(16));
/** `0x` and 0–8 zeros: the start of a padded hex number, one piece. */
const HEX_PAD: readonly string[] = Array.from({ length: 9 }, (_, i) => '0x' + '0'.repeat(i));

/** hexN(v, digits) for digits <= 8 written into a sink (`0x` and `digits` lower-case digits, more when v needs
 *  them): a summary written into smcdump's output buffer makes no string for it. */
export function writeHexN(s: TextSink, v: number, digits: number): void {
  const x = v >>> 0;
  let len = 1;
  for (let y = x >>> 4; y !== 0; y >>>= 4) len++;
  s.text(HEX_PAD[digits > len ? Math.min(8, digits - len) : 0]!);
  for (let i = (len - 1) * 4; i >= 0; i -= 4) s.text(HEX_DIGIT[(x >>> i) & 15]!);
}

export function hexN(v: number, digits: number): string { return '0x' + (v >>> 0).toString(16).padStart(digits, '0'); }

export function hex32(v: number): string { return hexN(v, 8); }

/** `0x` + hex, unpadded: QP numbers as Linux and rdma-core print them (and rkeys in the state views). */
export function hexQp(q: number): string { return '0x' + q.toString(16); }

/** MAC as aa:bb:cc:dd:ee:ff. */
export function macStr(b: Uint8Array, o: number): string {
  let s = '';
  for (let i = 0; i < 6; i++) s += (i ? ':' : '') + HEX[b[o + i] ?? 0];
  return s;
}

export function parseMac(s: string): Uint8Array {
  const out = new Uint8Array(6);
  const parts = s.split(':');
  for (let i = 0; i < 6; i++) out[i] = parseInt(parts[i] ?? '0', 16) & 0xff;
  return out;
}

export function ipv4Str(b: Uint8Array, o: number): string {
  return `${b[o] ?? 0}.${b[o + 1] ?? 0}.${b[o + 2] ?? 0}.${b[o + 3] ?? 0}`;
}

export function parseIpv4(s: string): Uint8Array {
  const out = new Uint8Array(4);
  const parts = s.split('.');
  for (let i = 0; i < 4; i++) out[i] = Number(parts[i] ?? 0) & 0xff;
  return out;
}

/** The GID of an IP address as RoCEv2 uses it: IPv4 as IPv4-mapped (10.55.0.1 → ::ffff:10.55.0.1). */
export function gidOfIp(ip: string): string { return ip.includes(':') ? ip : `::ffff:${ip}`; }

/** IPv6 text (RFC 5952: lowercase, longest zero run compressed, IPv4-mapped as ::ffff:a.b.c.d). */
export function ipv6Str(b: Uint8Array, o: number): string {
  const w: number[] = [];
  for (let i = 0; i < 8; i++) w.push(u16(b, o + i * 2));
  if (w[0] === 0 && w[1] === 0 && w[2] === 0 && w[3] === 0 && w[4] === 0 && w[5] === 0xffff) {
    return '::ffff:' + ipv4Str(b, o + 12);
  }
  let bestStart = -1, bestLen = 0;
  for (let i = 0; i < 8;) {
    if (w[i] !== 0) { i++; continue; }
    let j = i;
    while (j < 8 && w[j] === 0) j++;
    if (j - i > bestLen && j - i >= 2) { bestStart = i; bestLen = j - i; }
    i = j;
  }
  const part = (a: number[]): string => a.map((x) => x.toString(16)).join(':');
  if (bestStart < 0) return part(w);
  return part(w.slice(0, bestStart)) + '::' + part(w.slice(bestStart + bestLen));
}

export function parseIpv6(s: string): Uint8Array {
  const out = new Uint8Array(16);
  let text = s;
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  const tail: number[] = [];
  if (v4) {
    const p = parseIpv4(v4[1]!);
    tail.push((p[0]! << 8) | p[1]!, (p[2]! << 8) | p[3]!);
    text = text.slice(0, text.length - v4[1]!.length);
    if (text.endsWith(':') && !text.endsWith('::')) text = text.slice(0, -1);
  }
  const [head, rest] = text.includes('::') ? text.split('::') as [string, string] : [text, undefined];
  const hw = head ? head.split(':').filter((x) => x !== '').map((x) => parseInt(x, 16)) : [];
  const rw = rest !== undefined ? rest.split(':').filter((x) => x !== '').map((x) => parseInt(x, 16)) : [];
  const words = [...hw, ...new Array(8 - hw.length - rw.length - tail.length).fill(0), ...rw, ...tail];
  for (let i = 0; i < 8; i++) put16(out, i * 2, words[i] ?? 0);
  return out;
}

/** Write text blank-padded to n bytes. */
export function putAscii(b: Uint8Array, o: number, n: number, s: string, pad = 0x20): void {
  for (let i = 0; i < n; i++) b[o + i] = i < s.length ? s.charCodeAt(i) & 0xff : pad;
}

export function isZero(b: Uint8Array, o: number, n: number): boolean {
  for (let i = o; i < o + n && i < b.length; i++) if (b[i] !== 0) return false;
  return true;
}

/** Size code → bytes for RMBE/DMBE (2^(code+14)). */
export function bufSizeFromCode(code: number): number {
  // a shift for the 4-bit codes the wire can carry (`2 **` with a variable exponent is a call
  // into the C library's pow, twice per connection in the tracker); the power for anything else
  return (code | 0) === code && code >= 0 && code <= 16 ? 1 << (code + 14) : 2 ** (code + 14);
}
/** IB MTU code → bytes (1 = 256 … 5 = 4096); 0 for invalid codes. */
export function mtuFromCode(code: number): number { return code >= 1 && code <= 5 ? 128 << code : 0; }

/** Units for fmtSize, largest first, and the suffix of a size none of them divides. */
export interface SizeUnits { units: ReadonlyArray<readonly [string, number]>; none: string }
/** RMB and buffer sizes: 65536 → "64KiB", 1000 → "1000B". */
const BYTE_UNITS: SizeUnits = { units: [['MiB', 1024 ** 2], ['KiB', 1024]], none: 'B' };
/** The way size options take them (cli/lib/args.ts parseSize): 65536 → "64k", 1000 → "1000". */
export const OPTION_UNITS: SizeUnits = { units: [['g', 1024 ** 3], ['m', 1024 ** 2], ['k', 1024]], none: '' };

/** An exact size in the largest unit that divides it. */
export function fmtSize(n: number, u: SizeUnits = BYTE_UNITS): string {
  for (const [name, m] of u.units) if (n >= m && n % m === 0) return `${n / m}${name}`;
  return `${n}${u.none}`;
}

const BIN_UNITS = ['KiB', 'MiB', 'GiB', 'TiB'] as const;
/** A byte count for people: "512 B", "1.5 KiB", "12.3 MiB", "1.25 GiB" (at most GiB). `compact`
 *  (progress lines): two or three digits, "1.5 MiB", "15 MiB", "150 MiB", up to TiB. */
export function fmtBytes(n: number, compact = false): string {
  if (n < 1024) return `${n} B`;
  let v = n / 1024, i = 0;
  const top = compact ? 3 : 2;
  while (v >= 1024 && i < top) { v /= 1024; i++; }
  if (compact) return `${v < 10 ? v.toFixed(1) : Math.round(v)} ${BIN_UNITS[i]}`;
  return `${v.toFixed(i === 2 ? 2 : 1)} ${BIN_UNITS[i]}`;
}

/** Checks that `need` bytes are available from `o`; records a truncation issue otherwise. */
export function need(b: Uint8Array, o: number, n: number, issues: Issue[], code: string, what: string): boolean {
  if (o + n <= b.length) return true;
  issue(issues, 'error', code, `truncated ${what}: need ${n} bytes at ${o}, have ${Math.max(0, b.length - o)}`, o, Math.max(0, b.length - o));
  return false;
}

/** JSON.stringify replacer: bigint → hex string, byte arrays → hex. */
export function jsonReplacer(_k: string, v: unknown): unknown {
  if (typeof v === 'bigint') return '0x' + v.toString(16);
  if (v instanceof Uint8Array) return hex(v);
  return v;
}
