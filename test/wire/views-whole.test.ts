// Whole-header writers and readers (field.ts defineWriter/defineReader) against the views'
// setters and getters, field by field: random values and random background bytes, at odd
// offsets, with the header whole and cut short at every length. Both are generated from the
// same tables, so any difference is a bug in one of the generators.
import test from 'ava';
import { BthView, RethView, AethView, BTH_FIELDS, RETH_FIELDS, AETH_FIELDS, writeBth, readBthRx, writeReth, readReth, writeAeth, readAeth } from '../../dissectors/wire/views/ib.js';
import { CdcView, CDC_FIELDS, CDC_RX_FIELDS, writeCdc, readCdc } from '../../dissectors/wire/views/cdc.js';
import { defineReader, defineView, defineWriter, tableSize, type FieldSpec, type FieldTable } from '../../dissectors/wire/views/field.js';
import { prng as rng } from '../helpers.js';

/** A table with what BTH/RETH/AETH lack: little-endian words, a 4-byte bit field, a
 *  little-endian 64-bit field, a field sharing nothing with its neighbours. */
const MIXED = {
  a: { at: 0, size: 2, le: true, shift: 3, mask: 0x1ff },
  b: { at: 0, size: 2, le: true, shift: 12, mask: 0xf },
  c: { at: 2, size: 4, shift: 5, mask: 0x3ffffff },
  d: { at: 6, size: 1, shift: 0, mask: 1, bool: true },
  e: { at: 7, size: 8, le: true },
  f: { at: 15, size: 3, le: true },
  g: { at: 18, size: 8 },
  h: { at: 26, size: 4, le: true },
} as const satisfies FieldTable;
const MixedView = defineView('MixedTestView', MIXED);
const writeMixed = defineWriter('MixedTest', MIXED, ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h']);
const readMixed = defineReader('MixedTest', MIXED, ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h']);
/** Part of a word (b, c, d left out): the bits not written keep their value. */
const writeMixedPart = defineWriter('MixedTestPart', MIXED, ['a', 'e']);

type View = { reset(buf: Uint8Array, off?: number, end?: number): unknown } & Record<string, unknown>;

/** A value for field `s`: in range, or (every fourth) any 32-bit number, as a caller might pass. */
function valueFor(s: FieldSpec, r: () => number): number | boolean {
  if (s.bool === true) return r() < 0.5;
  if (s.size === 8) {
    // below 2^53 (the writer's range), sometimes near it
    const hi = r() < 0.2 ? 0x1fffff : Math.floor(r() * 0x200000);
    return hi * 4294967296 + Math.floor(r() * 4294967296);
  }
  if (r() < 0.25) return Math.floor(r() * 4294967296);
  const full = s.size === 4 ? 0xffffffff : (1 << (8 * s.size)) - 1;
  const mask = s.mask ?? (full >>> (s.shift ?? 0));
  return Math.floor(r() * (mask + 1));
}

function randomBytes(n: number, r: () => number): Uint8Array {
  const b = new Uint8Array(n);
  for (let i = 0; i < n; i++) b[i] = Math.floor(r() * 256);
  return b;
}

interface Case { name: string; table: FieldTable; View: new () => unknown; fields: readonly string[]; write?: (...a: never[]) => void; read?: (...a: never[]) => void }

const CASES: Case[] = [
  { name: 'BTH', table: BTH_FIELDS, View: BthView, fields: ['opcode', 'se', 'migReq', 'padCount', 'tver', 'pkey', 'fecn', 'becn', 'resv6', 'destQp', 'ackReq', 'resv7', 'psn'], write: writeBth },
  { name: 'BTH (receiver)', table: BTH_FIELDS, View: BthView, fields: ['opcode', 'se', 'padCount', 'ackReq', 'psn'], read: readBthRx },
  { name: 'RETH', table: RETH_FIELDS, View: RethView, fields: ['va', 'rkey', 'dmaLen'], write: writeReth, read: readReth },
  { name: 'AETH', table: AETH_FIELDS, View: AethView, fields: ['syndrome', 'msn'], write: writeAeth },
  { name: 'AETH (completer)', table: AETH_FIELDS, View: AethView, fields: ['kindBits', 'code', 'msn'], read: readAeth },
  { name: 'CDC', table: CDC_FIELDS, View: CdcView, fields: ['type', 'length', 'seq', 'token', 'prodReserved', 'prodWrap', 'prodCount', 'consReserved', 'consWrap', 'consCount', 'prodFlags', 'connFlags'], write: writeCdc },
  { name: 'CDC (receiver)', table: CDC_FIELDS, View: CdcView, fields: CDC_RX_FIELDS, read: readCdc },
  { name: 'mixed', table: MIXED, View: MixedView, fields: ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'], write: writeMixed, read: readMixed },
  { name: 'mixed, part of a word', table: MIXED, View: MixedView, fields: ['a', 'e'], write: writeMixedPart },
];

for (const c of CASES.filter((x) => x.write)) {
  test(`defineWriter ${c.name}: the same bytes as the setters field by field, at odd offsets, whole and cut short`, (t) => {
    const r = rng(0x5eed + c.name.length);
    const span = tableSize(c.table);
    const view = new c.View() as View;
    const write = c.write as unknown as (b: Uint8Array, o: number, ...v: unknown[]) => void;
    let checked = 0;
    for (let iter = 0; iter < 400; iter++) {
      const off = 1 + 2 * Math.floor(r() * 8); // odd offsets 1 … 15
      // the buffer ends after the header (most) or anywhere inside it (writes past its end dropped)
      const len = iter % 4 === 3 ? off + Math.floor(r() * span) : off + span + Math.floor(r() * 5);
      const bg = randomBytes(len, r);
      const values = c.fields.map((f) => valueFor(c.table[f] as FieldSpec, r));
      const byWriter = bg.slice();
      write(byWriter, off, ...values);
      const bySetters = bg.slice();
      view.reset(bySetters, off, bySetters.length);
      c.fields.forEach((f, i) => {
        const s = c.table[f] as FieldSpec;
        view[f] = s.size === 8 ? BigInt(values[i] as number) : values[i];
      });
      t.deepEqual(byWriter, bySetters, `${c.name} off ${off} len ${len} values ${JSON.stringify(values)}`);
      checked++;
    }
    t.is(checked, 400);
  });
}

for (const c of CASES.filter((x) => x.read)) {
  test(`defineReader ${c.name}: the same values as the getters, at odd offsets, whole and cut short`, (t) => {
    const r = rng(0xbeef + c.name.length);
    const span = tableSize(c.table);
    const view = new c.View() as View;
    const read = c.read as unknown as (b: Uint8Array, o: number, end: number, into: Record<string, unknown>) => void;
    const into: Record<string, unknown> = {};
    let cut = 0, above53 = 0;
    for (let iter = 0; iter < 400; iter++) {
      const off = 1 + 2 * Math.floor(r() * 8);
      const buf = randomBytes(off + span + 4, r);
      // `end` inside the header (bytes from there read as 0), at its end, or past the buffer
      const end = iter % 3 === 0 ? off + Math.floor(r() * span) : iter % 3 === 1 ? off + span : buf.length + 7;
      if (end < off + span) cut++;
      read(buf, off, end, into);
      view.reset(buf, off, end);
      for (const f of c.fields) {
        const s = c.table[f] as FieldSpec;
        const want = view[f];
        if (s.size === 8) {
          const v = want as bigint;
          if (v >= 2n ** 53n) above53++;
          t.is(into[f], v < 2n ** 53n ? Number(v) : -1, `${c.name}.${f} off ${off} end ${end}`);
        } else {
          t.is(into[f], want, `${c.name}.${f} off ${off} end ${end}`);
        }
      }
    }
    t.true(cut > 50);
    // random 64-bit values are mostly at or above 2^53: the -1 rule was exercised
    if (c.fields.some((f) => (c.table[f] as FieldSpec).size === 8)) t.true(above53 > 50);
  });
}

test('defineWriter refuses fields whose bytes partly overlap (one word written twice)', (t) => {
  const T = { x: { at: 0, size: 2 }, y: { at: 1, size: 1 } } as const satisfies FieldTable;
  t.throws(() => defineWriter('OverlapTest', T, ['x', 'y']), { message: /overlapping/ });
  // fields of the same word are combined, not refused
  t.notThrows(() => defineWriter('SameWordTest', BTH_FIELDS, ['se', 'padCount']));
});
