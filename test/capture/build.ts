// Hand-built pcap / pcapng bytes for the capture tests (independent of capture/writer.ts).

export interface Opt { code: number; value: Uint8Array | string }

function enc(v: Uint8Array | string): Uint8Array {
  return typeof v === 'string' ? new TextEncoder().encode(v) : v;
}

export class Bytes {
  private parts: number[] = [];
  constructor(readonly le: boolean) {}
  u8(v: number): this { this.parts.push(v & 0xff); return this; }
  u16(v: number): this {
    if (this.le) this.parts.push(v & 0xff, (v >>> 8) & 0xff); else this.parts.push((v >>> 8) & 0xff, v & 0xff);
    return this;
  }
  u32(v: number): this {
    const b = [(v >>> 24) & 0xff, (v >>> 16) & 0xff, (v >>> 8) & 0xff, v & 0xff];
    this.parts.push(...(this.le ? b.reverse() : b));
    return this;
  }
  u64(v: bigint): this {
    const u = BigInt.asUintN(64, v);
    const hi = Number(u >> 32n);
    const lo = Number(u & 0xffffffffn);
    return this.le ? this.u32(lo).u32(hi) : this.u32(hi).u32(lo);
  }
  raw(b: Uint8Array | number[]): this { for (const x of b) this.parts.push(x); return this; }
  pad4(): this { while (this.parts.length % 4 !== 0) this.parts.push(0); return this; }
  get length(): number { return this.parts.length; }
  bytes(): Uint8Array { return Uint8Array.from(this.parts); }
}

export function concat(...xs: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(xs.reduce((n, x) => n + x.length, 0));
  let o = 0;
  for (const x of xs) { out.set(x, o); o += x.length; }
  return out;
}

// ---- pcap ----

export function pcapHeader(o: { le: boolean; ns?: boolean; snaplen?: number; ltField: number; modified?: boolean }): Uint8Array {
  const magic = o.modified ? 0xa1b2cd34 : o.ns ? 0xa1b23c4d : 0xa1b2c3d4;
  return new Bytes(o.le).u32(magic).u16(2).u16(4).u32(0).u32(0).u32(o.snaplen ?? 65535).u32(o.ltField).bytes();
}

export function pcapRecord(le: boolean, sec: number, frac: number, data: Uint8Array, origlen = data.length, modified = false): Uint8Array {
  const b = new Bytes(le).u32(sec).u32(frac).u32(data.length).u32(origlen);
  if (modified) b.u32(7).u16(0x0800).u8(0).u8(0);
  return b.raw(data).bytes();
}

// ---- pcapng ----

function options(b: Bytes, opts: Opt[]): void {
  if (opts.length === 0) return;
  for (const o of opts) {
    const v = enc(o.value);
    b.u16(o.code).u16(v.length).raw(v).pad4();
  }
  b.u16(0).u16(0);
}

function block(le: boolean, type: number, body: (b: Bytes) => void): Uint8Array {
  const b = new Bytes(le);
  body(b);
  b.pad4();
  const len = b.length + 12;
  return concat(new Bytes(le).u32(type).u32(len).bytes(), b.bytes(), new Bytes(le).u32(len).bytes());
}

export function shb(le: boolean, opts: Opt[] = [], version: [number, number] = [1, 0]): Uint8Array {
  return block(le, 0x0a0d0d0a, (b) => {
    b.u32(0x1a2b3c4d).u16(version[0]).u16(version[1]).u64(-1n);
    options(b, opts);
  });
}

export function idb(le: boolean, linktype: number, opts: Opt[] = [], snaplen = 0): Uint8Array {
  return block(le, 1, (b) => {
    b.u16(linktype).u16(0).u32(snaplen);
    options(b, opts);
  });
}

/** EPB; `ts` in the interface's units. */
export function epb(le: boolean, ifId: number, ts: bigint, data: Uint8Array, origlen = data.length, opts: Opt[] = []): Uint8Array {
  return block(le, 6, (b) => {
    b.u32(ifId).u32(Number(ts >> 32n)).u32(Number(ts & 0xffffffffn)).u32(data.length).u32(origlen).raw(data).pad4();
    options(b, opts);
  });
}

export function spb(le: boolean, origlen: number, data: Uint8Array): Uint8Array {
  return block(le, 3, (b) => { b.u32(origlen).raw(data).pad4(); });
}

/** Obsolete Packet Block (type 2). */
export function pb(le: boolean, ifId: number, ts: bigint, data: Uint8Array, origlen = data.length, opts: Opt[] = []): Uint8Array {
  return block(le, 2, (b) => {
    b.u16(ifId).u16(0).u32(Number(ts >> 32n)).u32(Number(ts & 0xffffffffn)).u32(data.length).u32(origlen).raw(data).pad4();
    options(b, opts);
  });
}

/** Any other block (skipped by readers): NRB 4, ISB 5, DSB 10, custom 0xbad... */
export function otherBlock(le: boolean, type: number, body: Uint8Array): Uint8Array {
  return block(le, type, (b) => { b.raw(body); });
}

export function u8opt(code: number, v: number): Opt { return { code, value: Uint8Array.of(v) }; }
export function i64opt(code: number, v: bigint, le: boolean): Opt { return { code, value: new Bytes(le).u64(v).bytes() }; }

/** A deterministic Ethernet-ish payload of n bytes. */
export function payload(n: number, seed: number): Uint8Array {
  const b = new Uint8Array(n);
  for (let i = 0; i < n; i++) b[i] = (i * 31 + seed * 17 + (i >>> 8)) & 0xff;
  return b;
}

export { prng as rng } from '../helpers.js';

/** tsNs as tshark prints frame.time_epoch ("sec.nnnnnnnnn"). */
export function epochStr(ns: bigint): string {
  const s = ns / 1_000_000_000n;
  const f = ns % 1_000_000_000n;
  return `${s}.${f.toString().padStart(9, '0')}`;
}
