// Field tables and the zero-copy views made from them (smoltcp `wire`-style).
//
// A wire format is declared once, as a table: for each field its byte offset, width in bytes,
// byte order, and optionally a bit range (shift + mask) inside that width. `defineView()` turns
// the table into a class with one getter and one setter per field, reading and writing the
// bytes in place. A view is re-pointed per frame with `reset(buf, off, end)` and never
// allocated per frame: the hot path of the analyzer (and of the endpoint) keeps one instance
// per layer.
//
// Reads past `end` give 0 (the codecs' rule for truncated input: a value is always produced,
// the decoder reports the truncation as an issue). Writes past `end` are dropped.
//
// The accessors' code is generated from the tables (compiled() below): at build time into
// accessors.js (tools/views.mjs), else with `new Function` when a view is defined.

import { prebuiltAccessors } from './accessors.js';

/** One field: `at` byte offset in the header, `size` bytes (1, 2, 3, 4 or 8 — 8 reads as a
 *  bigint), big-endian unless `le`; `shift`/`mask` select bits of the (unsigned) value; `bool`
 *  makes it a flag (value !== 0); `names` gives the meaning of its values (for trees and docs). */
export interface FieldSpec {
  readonly at: number;
  readonly size: 1 | 2 | 3 | 4 | 8;
  readonly le?: boolean;
  readonly shift?: number;
  readonly mask?: number;
  readonly bool?: boolean;
  readonly names?: Readonly<Record<number, string>>;
  /** Its name in the `-V` tree, where the tree shows this field as one node. */
  readonly label?: string;
}

/** A run of `len` bytes that is not a number (address, GID, MAC, blank-padded text, reserved
 *  bytes): declared in the table for its offset and tree label, read by the codec's own helper
 *  (ipv6Str, macStr, text …) at `view.off + spec.at`. The view has no accessor for it. */
export interface BytesSpec {
  readonly at: number;
  readonly len: number;
  readonly label?: string;
}

export type FieldTable = Readonly<Record<string, FieldSpec | BytesSpec>>;

/** The TypeScript type of a field's value. */
type FieldValue<S extends FieldSpec> = S extends { bool: true } ? boolean : S extends { size: 8 } ? bigint : number;

/** Getters/setters of every numeric field in table T, plus the view's own methods. */
export type ViewOf<T extends FieldTable> = { -readonly [K in keyof T as T[K] extends FieldSpec ? K : never]: T[K] extends FieldSpec ? FieldValue<T[K]> : never } & ViewBase;

/** Where a view points: a buffer, the header's offset in it, and the end of valid bytes. */
class ViewBase {
  buf: Uint8Array = EMPTY;
  off = 0;
  end = 0;
  /** Point the view at the header starting at buf[off]; bytes at or after `end` read as 0. */
  reset(buf: Uint8Array, off = 0, end = buf.length): this {
    this.buf = buf;
    this.off = off;
    this.end = end < buf.length ? end : buf.length;
    return this;
  }
  /** Bytes of the header available before `end` (may be fewer than the header's size). */
  get available(): number { return this.end > this.off ? this.end - this.off : 0; }
}

const EMPTY = new Uint8Array(0);

/** Type-erased function made from generated source (what compiled() returns). */
type Generated = (...args: never[]) => unknown;

/** The functions tools/views.mjs generated at build time, by their source text; undefined where
 *  the build did not (tsx from source, or tsc alone): then compiled() makes them at run time. */
let prebuilt: ReadonlyMap<string, Generated> | undefined | null = null;
/** Every accessor's source, kept once recordViewSources() asked (the build step). */
let recorded: Map<string, true> | undefined;

/**
 * The function whose source is `fn` (a function expression naming only readUint, writeUint,
 * setBits and read64 besides its parameters). Made at build time when the build generated it:
 * its source is the key, so a table changed since falls back to compiling here. Compiling each
 * field's function at start-up took ~7 ms of smcdump's ~85 ms `--version` (docs/smcdump.md,
 * "Start-up, round six"); generated code is also in the CLI's V8 code cache.
 */
function compiled(fn: string): Generated {
  if (prebuilt === null) prebuilt = prebuiltAccessors(readUint, writeUint, setBits, read64);
  recorded?.set(fn, true);
  const f = prebuilt?.get(fn);
  if (f !== undefined) return f;
  // new Function: every source given here is built from numbers and our own names, never from input
  return new Function('readUint', 'writeUint', 'setBits', 'read64', `return ${fn};`)(readUint, writeUint, setBits, read64) as Generated;
}

/** Start keeping the source of every accessor made from now on (tools/views.mjs imports the
 *  modules that define views after this and writes what was kept into accessors.js).
 *  @public used by the build step tools/views.mjs, which the unused-export check does not read */
export function recordViewSources(): ReadonlyMap<string, true> {
  return (recorded = new Map());
}

/** Unsigned big/little-endian read of `size` bytes at b[o]; 0 for bytes at or past `end`. */
function readUint(b: Uint8Array, o: number, end: number, size: 1 | 2 | 3 | 4, le: boolean): number {
  if (o + size <= end) {
    // whole field present: the common case, no per-byte bounds checks
    switch (size) {
      case 1: return b[o]!;
      case 2: return le ? b[o]! | (b[o + 1]! << 8) : (b[o]! << 8) | b[o + 1]!;
      case 3: return le ? b[o]! | (b[o + 1]! << 8) | (b[o + 2]! << 16) : (b[o]! << 16) | (b[o + 1]! << 8) | b[o + 2]!;
      default: return le
        ? (b[o]! | (b[o + 1]! << 8) | (b[o + 2]! << 16) | (b[o + 3]! << 24)) >>> 0
        : ((b[o]! << 24) | (b[o + 1]! << 16) | (b[o + 2]! << 8) | b[o + 3]!) >>> 0;
    }
  }
  let v = 0;
  for (let i = 0; i < size; i++) {
    const x = o + i < end ? b[o + i]! : 0;
    v += le ? x * 2 ** (8 * i) : x * 2 ** (8 * (size - 1 - i));
  }
  return v;
}

/** Write the low `size` bytes of v at b[o] (bytes at or past `end` are dropped). */
function writeUint(b: Uint8Array, o: number, end: number, size: 1 | 2 | 3 | 4, le: boolean, v: number): void {
  if (o + size <= end && !le) {
    // whole big-endian field present: the common case (every header the endpoint writes per
    // packet), shifts instead of the per-byte division below (typed arrays keep the low 8 bits)
    switch (size) {
      case 1: b[o] = v; return;
      case 2: b[o] = v >>> 8; b[o + 1] = v; return;
      case 3: b[o] = v >>> 16; b[o + 1] = v >>> 8; b[o + 2] = v; return;
      default: b[o] = v >>> 24; b[o + 1] = v >>> 16; b[o + 2] = v >>> 8; b[o + 3] = v; return;
    }
  }
  for (let i = 0; i < size; i++) {
    if (o + i >= end) return;
    const sh = le ? 8 * i : 8 * (size - 1 - i);
    b[o + i] = Math.floor(v / 2 ** sh) & 0xff;
  }
}

/**
 * A view class for `table`: `new (defineView(T))()` or, better, one instance kept per layer.
 * `name` is used for the class name (stack traces, inspection).
 */
export function defineView<T extends FieldTable>(name: string, table: T): new () => ViewOf<T> {
  const cls = { [name]: class extends ViewBase {} }[name]!;
  for (const [field, spec] of Object.entries(table)) {
    if ('size' in spec) Object.defineProperty(cls.prototype, field, accessor(spec, tagOf(name, field)));
  }
  // reset() of its own per class: one shared ViewBase.reset sees every view class and stays a
  // call on the hot path; a per-class copy is monomorphic and inlined like the getters.
  Object.defineProperty(cls.prototype, 'reset', { value: compileReset(tagOf(name, 'reset')), writable: true, configurable: true });
  return cls as unknown as new () => ViewOf<T>;
}

/**
 * The comment that makes a generated function's source unique to its class and field. V8 caches
 * what `new Function` compiles by source text, so two classes' functions with the same text
 * (every class's reset(), two classes' fields at the same offset) would be one function with one
 * type feedback: its loads and stores of `this.buf`/`this.off` would see every view class and go
 * megamorphic (a generic IC call each: a BTH reset + 3 sets + 1 get 17 ns in a fresh process,
 * 32-43 ns once other views had run, docs/uroce.md round 11). Names come from our own tables.
 */
function tagOf(view: string, field: string): string {
  return `/* ${`${view}.${field}`.replace(/[^A-Za-z0-9_.]/g, '')} */`;
}

/** getter/setter pair for one field, each generated with the field's constants in its code
 *  (small, monomorphic, inlined by V8; see tagOf for why each has a source of its own). */
function accessor(s: FieldSpec, tag: string): PropertyDescriptor {
  const at = s.at;
  const le = s.le === true;
  if (s.size === 8) return { get: compileGetter64(at, le, tag), set: compileSetter64(at, le, tag), enumerable: true };
  const size = s.size;
  const shift = s.shift ?? 0;
  const full = size === 4 ? 0xffffffff : (1 << (8 * size)) - 1;
  const mask = s.mask ?? (full >>> shift);
  const whole = shift === 0 && mask === full;
  // Getters are generated with the field's constants written into their code: each field gets
  // its own small function, which V8 inlines at the call site (closures made from one shared
  // function body would share one type feedback and stay calls: 7x slower, measured).
  const get = compileGetter(at, size, le, shift, mask, s.bool === true, tag);
  return { get, set: compileSetter(at, size, le, shift, mask, whole, s.bool === true, tag), enumerable: true };
}

/** The setter of one field: the view's loads in its own code, the byte work in the shared
 *  writeUint/setBits (they only touch a Uint8Array, so their feedback stays monomorphic). */
function compileSetter(at: number, size: 1 | 2 | 3 | 4, le: boolean, shift: number, mask: number, whole: boolean, bool: boolean, tag: string): (v: number | boolean) => void {
  const value = bool ? `(v ? ${mask} : 0)` : 'v';
  const body = whole && !bool
    ? `writeUint(this.buf, this.off + ${at}, this.end, ${size}, ${le}, v >>> 0);`
    : `setBits(this.buf, this.off + ${at}, this.end, ${size}, ${le}, ${shift}, ${mask}, ${value});`;
  // new Function: the source above is built from numbers and our own names only, never from input
  return compiled(`function set(v) { ${tag}\n    ${body}\n}`) as (v: number | boolean) => void;
}

/** The setter of one 64-bit field (two 32-bit words in the field's byte order). */
function compileSetter64(at: number, le: boolean, tag: string): (v: bigint) => void {
  const body = `
    const hi = Number((v >> 32n) & 0xffffffffn), lo = Number(v & 0xffffffffn);
    const b = this.buf, o = this.off + ${at}, end = this.end;
    ${le ? 'writeUint(b, o, end, 4, true, lo); writeUint(b, o + 4, end, 4, true, hi);' : 'writeUint(b, o, end, 4, false, hi); writeUint(b, o + 4, end, 4, false, lo);'}`;
  // new Function: the source above is built from numbers and our own names only, never from input
  return compiled(`function set(v) { ${tag}${body}\n}`) as (v: bigint) => void;
}

/** Reads a 64-bit field that may run past `end` (bytes there read as 0). */
function read64(v: ViewBase, at: number, le: boolean): bigint {
  const o = v.off + at;
  const hi = readUint(v.buf, le ? o + 4 : o, v.end, 4, false);
  const lo = readUint(v.buf, le ? o : o + 4, v.end, 4, false);
  return le ? (BigInt(swap32(hi)) << 32n) | BigInt(swap32(lo)) : (BigInt(hi) << 32n) | BigInt(lo);
}

/** A 64-bit getter of its own per field (like compileGetter: one shared closure for every
 *  64-bit field would stay a polymorphic call). Only numbers go into the code. */
function compileGetter64(at: number, le: boolean, tag: string): () => bigint {
  const word = (first: number, lsbFirst: boolean): string => {
    const idx = lsbFirst ? [3, 2, 1, 0] : [0, 1, 2, 3];
    return `(((b[o + ${first + idx[0]!}] << 24) | (b[o + ${first + idx[1]!}] << 16) | (b[o + ${first + idx[2]!}] << 8) | b[o + ${first + idx[3]!}]) >>> 0)`;
  };
  const hi = le ? word(4, true) : word(0, false);
  const lo = le ? word(0, true) : word(4, false);
  const body = `
    const b = this.buf, o = this.off + ${at};
    if (o + 8 > this.end) return read64(this, ${at}, ${le});
    return (BigInt(${hi}) << 32n) | BigInt(${lo});`;
  // new Function: the source above is built from numbers only, never from input
  return compiled(`function get() { ${tag}${body}\n}`) as () => bigint;
}

function compileReset(tag: string): ViewBase['reset'] {
  // new Function: fixed source and our own names, no input in it
  return compiled(`function reset(buf, off = 0, end = buf.length) { ${tag}
    this.buf = buf;
    this.off = off;
    this.end = end < buf.length ? end : buf.length;
    return this;
  }`) as ViewBase['reset'];
}

/** `function () { … }` reading one field of `this` (a ViewBase): the byte expression for the
 *  whole-field case, readUint() when the field runs past `end`. Only numbers go into the code. */
function compileGetter(at: number, size: 1 | 2 | 3 | 4, le: boolean, shift: number, mask: number, bool: boolean, tag: string): () => number | boolean {
  const byte = (i: number): string => `b[o + ${i}]`;
  const parts: string[] = [];
  for (let i = 0; i < size; i++) {
    const sh = le ? 8 * i : 8 * (size - 1 - i);
    parts.push(sh === 0 ? byte(i) : `(${byte(i)} << ${sh})`);
  }
  let raw = parts.join(' | ');
  if (size === 4) raw = `((${raw}) >>> 0)`;
  const full = size === 4 ? 0xffffffff : (1 << (8 * size)) - 1;
  const pick = (x: string): string => (shift === 0 && mask === full ? x : `(((${x}) >>> ${shift}) & ${mask})`);
  const fin = (x: string): string => (bool ? `(${pick(x)} !== 0)` : size === 4 && !(shift === 0 && mask === full) ? `(${pick(x)} >>> 0)` : pick(x));
  const body = `
    const b = this.buf, o = this.off + ${at};
    if (o + ${size} > this.end) { const r = readUint(b, o, this.end, ${size}, ${le}); return ${fin('r')}; }
    return ${fin(raw)};`;
  // new Function: the source above is built from numbers only, never from input
  return compiled(`function get() { ${tag}${body}\n}`) as () => number | boolean;
}

function setBits(b: Uint8Array, o: number, end: number, size: 1 | 2 | 3 | 4, le: boolean, shift: number, mask: number, value: number): void {
  const old = readUint(b, o, end, size, le);
  const m = (mask << shift) >>> 0;
  writeUint(b, o, end, size, le, ((old & ~m) | ((value & mask) << shift)) >>> 0);
}

function swap32(x: number): number {
  return (((x & 0xff) << 24) | ((x & 0xff00) << 8) | ((x >>> 8) & 0xff00) | (x >>> 24)) >>> 0;
}

/** A bit field: `shift` and `mask` given. */
export type BitSpec = FieldSpec & { readonly shift: number; readonly mask: number };

/** Bit field `s` out of `word`, the whole field holding it as read once: several flags of one
 *  byte cost one read. For trees and rare paths; a hot path uses bitPicker(). */
export function bitsOf(word: number, s: BitSpec): number { return (word >>> s.shift) & s.mask; }

/**
 * A function of its own that picks bit field `s` out of the word holding it, with the shift and
 * mask written into its code (as a view's getters are). One shared helper reading spec objects
 * of many shapes goes megamorphic on the replay path (measured: IPv4 + Ethernet decode ~60 ns
 * per frame slower); one small function per field is monomorphic and inlined.
 */
export function bitPicker(s: BitSpec): (word: number) => number {
  // new Function: the source is built from the spec's two numbers only, never from input
  return compiled(`function pick(w) { return (w >>> ${s.shift >>> 0}) & ${s.mask >>> 0}; }`) as (word: number) => number;
}

/** Bytes a field covers: its width (a bit field: the width of the bytes holding it). */
export function fieldLen(s: FieldSpec | BytesSpec): number { return 'size' in s ? s.size : s.len; }

/** Size in bytes covered by a table (end of its last field). */
export function tableSize(t: FieldTable): number {
  let n = 0;
  for (const s of Object.values(t)) n = Math.max(n, s.at + fieldLen(s));
  return n;
}

/** What `addField` needs of a tree (structurally `Tree` of ../common.ts). */
interface TreeLike { add(name: string, offset: number, length: number, value?: string | number | bigint): unknown }

/**
 * One `-V` tree node for one declared field: name, offset and length come from the table, the
 * codec gives only the value text. `base` is the offset of the view in the tree's buffer (the
 * start of a sub-structure whose fields are relative to it).
 */
export function addField(t: TreeLike, s: FieldSpec | BytesSpec, value: string | number | bigint, base = 0, name = s.label): void {
  t.add(name ?? '?', base + s.at, fieldLen(s), value);
}

/** One tree node spanning the declared fields `first` … `last` (e.g. an address and its prefix
 *  length shown together), named after `first`. */
export function addSpan(t: TreeLike, first: FieldSpec | BytesSpec, last: FieldSpec | BytesSpec, value: string | number | bigint, base = 0, name = first.label): void {
  t.add(name ?? '?', base + first.at, last.at + fieldLen(last) - first.at, value);
}

/** The bits a bit field occupies in its (unsigned) value, e.g. 0x40 for a flag at bit 6. */
export function fieldBits(s: FieldSpec): number {
  const full = s.size >= 4 ? 0xffffffff : (1 << (8 * s.size)) - 1;
  return ((s.mask ?? full) << (s.shift ?? 0)) >>> 0;
}

/** Offset of entry `i` of a list whose first entry is declared as `first` (entries of
 *  `first`'s length follow each other). */
export function entryAt(first: BytesSpec, i: number): number { return first.at + first.len * i; }

/**
 * Per byte of a `len`-byte header, the bits that the given (big-endian) fields occupy: e.g. the
 * fields the ICRC feeds as ones. Built once per format from its table, never per frame.
 */
export function fieldMaskBytes(fields: readonly FieldSpec[], len: number): Uint8Array {
  const m = new Uint8Array(len);
  for (const f of fields) {
    const bits = fieldBits(f); // within the field's `size` bytes, big-endian
    for (let i = 0; i < f.size && f.size <= 4; i++) {
      const byte = (bits >>> (8 * (f.size - 1 - i))) & 0xff;
      if (f.at + i < len) m[f.at + i]! |= byte;
    }
  }
  return m;
}

// ---------------------------------------------------------------------------------------------
// Whole-header writers and readers (docs/uroce.md round 15). A view's setters and getters are
// one call and one bounds check per field, and a bit field's setter reads its byte back first;
// a packet's BTH took five of them to write and five to read. A writer made by defineWriter()
// writes a list of fields in one call, each byte once (fields sharing bytes combined, no read
// back where the listed fields cover all the bits of those bytes); a reader made by
// defineReader() reads a list of fields into an object's properties, each byte range once. Both
// are generated from the same table as the view (no offset written anywhere else) and do what
// the view's accessors do field by field: a write past the buffer's end is dropped, a read past
// `end` gives 0 for the missing bytes.

/** A field's value in a whole-header writer or reader: a flag as a boolean, every other field
 *  as a number, a 64-bit one too (exact below 2^53: the writer's argument must be; the reader
 *  gives -1 for a value at or above 2^53, where the caller reads the view's bigint getter). */
export type WholeValue<S> = S extends { bool: true } ? boolean : number;

/** The names of table T's numeric fields. */
export type NumericField<T extends FieldTable> = { [K in keyof T]: T[K] extends FieldSpec ? K : never }[keyof T] & string;

/** Writes the listed fields of one header at buf[off…], values in the list's order. */
export type HeaderWriter<T extends FieldTable, F extends readonly NumericField<T>[]> =
  (buf: Uint8Array, off: number, ...values: { [I in keyof F]: WholeValue<T[F[I]]> }) => void;

/** What a reader fills: one property per listed field. */
export type HeaderFields<T extends FieldTable, F extends readonly NumericField<T>[]> = { -readonly [K in F[number]]: WholeValue<T[K]> };

/** Reads the listed fields of the header at buf[off…] (bytes at or past `end` read as 0) into `into`. */
export type HeaderReader<T extends FieldTable, F extends readonly NumericField<T>[]> =
  (buf: Uint8Array, off: number, end: number, into: HeaderFields<T, F>) => void;

/** Listed fields held by one run of bytes (a field's `at`, `size`, byte order): read or
 *  written as one word. */
interface Word { at: number; size: 1 | 2 | 3 | 4 | 8; le: boolean; fields: Array<{ name: string; idx: number; spec: FieldSpec }> }

function wordsOfFields(table: FieldTable, fields: readonly string[]): Word[] {
  const words: Word[] = [];
  fields.forEach((name, idx) => {
    const spec = table[name];
    if (spec === undefined || !('size' in spec)) throw new Error(`views: ${name} is not a numeric field`);
    if (spec.size === 8 && (spec.shift !== undefined || spec.mask !== undefined)) throw new Error(`views: 64-bit bit field ${name}`);
    const le = spec.le === true;
    let w = words.find((x) => x.at === spec.at && x.size === spec.size && x.le === le);
    if (!w) words.push((w = { at: spec.at, size: spec.size, le, fields: [] }));
    w.fields.push({ name, idx, spec });
  });
  return words;
}

/** All the bits of a `size`-byte word. */
function fullMask(size: number): number { return size === 4 ? 0xffffffff : (1 << (8 * size)) - 1; }

/** The bits field `s` occupies in its word, and how its value is picked out of the word. */
function fieldPick(s: FieldSpec): { shift: number; mask: number; whole: boolean } {
  const full = fullMask(s.size);
  const shift = s.shift ?? 0;
  const mask = s.mask ?? (full >>> shift);
  return { shift, mask, whole: shift === 0 && mask === full };
}

/** Inline big-/little-endian read of a `size`-byte word at b[o + at] (all bytes present), in
 *  parentheses (it is combined with & and |). */
function wordExpr(at: number, size: number, le: boolean): string {
  const parts: string[] = [];
  for (let i = 0; i < size; i++) {
    const sh = le ? 8 * i : 8 * (size - 1 - i);
    parts.push(sh === 0 ? `b[o + ${at + i}]` : `(b[o + ${at + i}] << ${sh})`);
  }
  const raw = parts.join(' | ');
  return size === 4 ? `((${raw}) >>> 0)` : `(${raw})`;
}

/**
 * A function of its own writing `fields` of `table` in one call: `(buf, off, v1, v2, …)`.
 * Fields that share bytes are combined into one word; their bytes are read back only where the
 * listed fields leave bits of them unset (those bits keep their value, as with the setters).
 * The listed fields' byte runs must not partly overlap (checked here, once).
 */
export function defineWriter<T extends FieldTable, const F extends readonly NumericField<T>[]>(name: string, table: T, fields: F): HeaderWriter<T, F> {
  const words = wordsOfFields(table, fields);
  for (const a of words) {
    for (const b of words) {
      if (a !== b && a.at < b.at + b.size && b.at < a.at + a.size) throw new Error(`views: ${name} writes overlapping words at ${a.at} and ${b.at}`);
    }
  }
  const span = Math.max(...words.map((w) => w.at + w.size));
  const fast: string[] = [];
  const slow: string[] = [];
  words.forEach((w, k) => {
    if (w.size === 8) {
      const v = `v${w.fields[0]!.idx}`;
      const [first, second] = w.le ? ['lo', 'hi'] : ['hi', 'lo'];
      fast.push(`{ const hi = Math.floor(${v} / 4294967296), lo = ${v} >>> 0;`);
      for (let i = 0; i < 8; i++) {
        const word = i < 4 ? first : second, j = i & 3;
        const sh = w.le ? 8 * j : 8 * (3 - j);
        fast.push(`  b[o + ${w.at + i}] = ${sh ? `${word} >>> ${sh}` : word};`);
      }
      fast.push('}');
      slow.push(`{ const hi = Math.floor(${v} / 4294967296), lo = ${v} >>> 0;
    writeUint(b, o + ${w.at}, end, 4, ${w.le}, ${first}); writeUint(b, o + ${w.at + 4}, end, 4, ${w.le}, ${second}); }`);
      return;
    }
    const full = fullMask(w.size);
    let covered = 0;
    const parts: string[] = [];
    for (const f of w.fields) {
      const { shift, mask, whole } = fieldPick(f.spec);
      const v = `v${f.idx}`;
      covered = (covered | (mask << shift)) >>> 0;
      if (f.spec.bool === true) parts.push(`(${v} ? ${(mask << shift) >>> 0} : 0)`);
      else parts.push(whole ? v : `((${v} & ${mask}) << ${shift})`);
      slow.push(whole && f.spec.bool !== true
        ? `writeUint(b, o + ${w.at}, end, ${w.size}, ${w.le}, ${v} >>> 0);`
        : `setBits(b, o + ${w.at}, end, ${w.size}, ${w.le}, ${shift}, ${mask}, ${f.spec.bool === true ? `(${v} ? ${mask} : 0)` : v});`);
    }
    const keep = (full & ~covered) >>> 0;
    const value = (keep ? [`(${wordExpr(w.at, w.size, w.le)} & ${keep})`, ...parts] : parts).join(' | ');
    fast.push(`const w${k} = ${value};`);
    for (let i = 0; i < w.size; i++) {
      const sh = w.le ? 8 * i : 8 * (w.size - 1 - i);
      fast.push(`b[o + ${w.at + i}] = ${sh ? `w${k} >>> ${sh}` : `w${k}`};`);
    }
  });
  const params = fields.map((_, i) => `v${i}`).join(', ');
  // new Function: the source is built from the table's numbers and our own names, never from input
  return compiled(`function write(b, o, ${params}) { ${tagOf(name, 'write')}
  const end = b.length;
  if (o + ${span} > end) {
    ${slow.join('\n    ')}
    return;
  }
  ${fast.join('\n  ')}
}`) as unknown as HeaderWriter<T, F>;
}

/**
 * A function of its own reading `fields` of `table` in one call into `into`'s properties of
 * the same names: each word once, each field picked out of it as its getter would (bytes at or
 * past `end` read as 0). `into` should be one object (or objects of one class) per reader.
 */
export function defineReader<T extends FieldTable, const F extends readonly NumericField<T>[]>(name: string, table: T, fields: F): HeaderReader<T, F> {
  const words = wordsOfFields(table, fields);
  const span = Math.max(...words.map((w) => w.at + w.size));
  const fastWords: string[] = [];
  const slowWords: string[] = [];
  const picks: string[] = [];
  words.forEach((w, k) => {
    if (w.size === 8) {
      const [hiAt, loAt] = w.le ? [w.at + 4, w.at] : [w.at, w.at + 4];
      fastWords.push(`h${k} = ${wordExpr(hiAt, 4, w.le)}; l${k} = ${wordExpr(loAt, 4, w.le)};`);
      slowWords.push(`h${k} = readUint(b, o + ${hiAt}, end, 4, ${w.le}); l${k} = readUint(b, o + ${loAt}, end, 4, ${w.le});`);
      picks.push(`r.${w.fields[0]!.name} = h${k} < 2097152 ? h${k} * 4294967296 + l${k} : -1;`);
      return;
    }
    fastWords.push(`w${k} = ${wordExpr(w.at, w.size, w.le)};`);
    slowWords.push(`w${k} = readUint(b, o + ${w.at}, end, ${w.size}, ${w.le});`);
    for (const f of w.fields) {
      const { shift, mask, whole } = fieldPick(f.spec);
      const x = whole ? `w${k}` : `((w${k} >>> ${shift}) & ${mask})`;
      picks.push(`r.${f.name} = ${f.spec.bool === true ? `${x} !== 0` : w.size === 4 && !whole ? `${x} >>> 0` : x};`);
    }
  });
  const decl = words.map((w, k) => (w.size === 8 ? `h${k} = 0, l${k} = 0` : `w${k} = 0`)).join(', ');
  // new Function: the source is built from the table's numbers and field names (identifiers of
  // our own tables), never from input
  return compiled(`function read(b, o, end, r) { ${tagOf(name, 'read')}
  if (end > b.length) end = b.length;
  let ${decl};
  if (o + ${span} <= end) {
    ${fastWords.join('\n    ')}
  } else {
    ${slowWords.join('\n    ')}
  }
  ${picks.join('\n  ')}
}`) as unknown as HeaderReader<T, F>;
}
