// CRC-32 (IEEE 802.3 / zlib polynomial 0xEDB88320 reflected, init 0xFFFFFFFF, final
// complement) — the CRC the InfiniBand ICRC uses (formats.md §11.4).
//
// Table-driven, slicing-by-8 for the bulk path. The API is zlib-style: a CRC "value" is the
// finished CRC of everything fed so far (0 for nothing), so updates compose:
//   crc32(a ++ b) === crc32Update(crc32(a), b)
// which lets the ICRC be computed over a frame with masked fields without copying it:
// feed the unchanged ranges with crc32Update and the masked bytes with crc32UpdateFill.
// Pure functions. Where the native addon (native/src/icrc.c, PCLMULQDQ folding) is built and
// the CPU has carry-less multiply, ranges of ADDON_MIN bytes or more go to it (~4x zlib.crc32 on
// a 1 KiB frame, one call ~60 ns); otherwise ranges of NATIVE_MIN bytes or more go to Node's
// zlib.crc32 (about twice the JS loop on 1 KiB; costs one subarray view per call), shorter ones
// to the table-driven JS loop. crc32UpdateJs() is always the pure JS path. SMCSCOPE_CRC=js
// turns the addon off (A/B measurements, tests of the fallback).

import { createRequire } from 'node:module';
import { nativePath } from '../../native/paths.js';

type NativeCrc = (data: Uint8Array, value?: number) => number;
/** Range length from which the native CRC is used (below it the call overhead dominates). */
const NATIVE_MIN = 256;

interface IcrcAddon {
  /** CRC so far `crc`; feeds b[start + i] | mask[i] (inside b), then b[start + mask.length, end). */
  crc32Masked(b: Uint8Array, crc: number, start: number, mask: Uint8Array, end: number): number;
  /** true when the CPU folds with PCLMULQDQ (else the addon is no faster than zlib: unused). */
  simd: boolean;
  /** Make `ab` the buffer check() reads (false: not an ArrayBuffer). */
  bind?(ab: ArrayBufferLike): boolean;
  /** Mask `id` (0–7, at most 64 bytes) fed from the CRC value `init`. */
  setMask?(id: number, mask: Uint8Array, init: number): boolean;
  /** CRC of bound[start, end − 4) with mask `id` over its first bytes === LE u32 at end − 4. */
  check?(start: number, end: number, id: number): boolean;
}

// The engines are chosen on the first CRC, not when this module is imported: loading the addon
// (dlopen), node:worker_threads and node:zlib costs a few ms of start-up that runs without a
// RoCE frame (--version, --help, TCP-only captures) never need (docs/smcdump.md, "Start-up, round six").
/** The addon, undefined when not usable; null until the first CRC asks (`engines()`). */
let addon: IcrcAddon | undefined | null = null;
/** Node's zlib.crc32 where there is no addon (the addon beats it; then never loaded). */
let nativeCrc32: NativeCrc | undefined;
/** The addon's per-frame check with numbers only (an addon built before it has none). */
let checker: IcrcAddon | undefined;
/** Range length from which the addon is used (its folding loop needs 64 bytes). */
const ADDON_MIN = 64;
const NO_MASK = new Uint8Array(0);

function loadAddon(req: NodeJS.Require): IcrcAddon | undefined {
  if (process.env.SMCSCOPE_CRC === 'js') return undefined;
  try {
    const a = req(nativePath('native/build/Release/icrc.node')) as IcrcAddon;
    return a.simd ? a : undefined;
  } catch {
    return undefined; // not built (no toolchain): zlib and JS
  }
}

/** Pick the engines once (the addon; zlib without it) and register the masks asked for so far. */
function engines(): IcrcAddon | undefined {
  if (addon !== null) return addon;
  const req = createRequire(import.meta.url);
  const a = loadAddon(req);
  addon = a;
  if (a === undefined) {
    nativeCrc32 = (req('node:zlib') as { crc32?: NativeCrc }).crc32;
    return a;
  }
  // The bound buffer and the masks are the addon's process-wide state, so only the main thread
  // uses check(): a worker thread binding its own buffer would race with it (workers keep the
  // crc32Masked path, which takes its buffer per call).
  const main = (req('node:worker_threads') as typeof import('node:worker_threads')).isMainThread;
  if (main && typeof a.check === 'function' && typeof a.bind === 'function' && typeof a.setMask === 'function') {
    checker = a;
    for (let id = 0; id < masks.length; id++) {
      if (!a.setMask!(id, masks[id]!, maskInit[id]!)) maskLen[id] = -1;
    }
  }
  return a;
}

/** Masks registered for trailerCheck(), given to the addon when it is loaded. */
const masks: Uint8Array[] = [];
const maskInit: number[] = [];
/** Length of each registered mask (a range must hold it and the 4-byte trailer; -1 refused). */
const maskLen: number[] = [];
/** The ArrayBuffer the addon reads in check(): referenced here so its memory stays valid while bound. */
let boundAb: ArrayBufferLike | undefined;
/** A buffer the addon refused (a SharedArrayBuffer): not asked again for every frame. */
let refusedAb: ArrayBufferLike | undefined;

/**
 * Register a header-stack mask for trailerCheck(): the CRC starts from `init` (the CRC of what
 * precedes the stack), ORs `mask` over the first bytes. Returns its id, or -1 when no slot is
 * left; the addon gets it when it is loaded (without one, trailerCheck answers -1 for it).
 */
export function registerTrailerMask(mask: Uint8Array, init: number): number {
  if (masks.length >= 8 || mask.length > 64) return -1;
  const id = masks.length;
  masks.push(mask.slice());
  maskInit.push(init >>> 0);
  maskLen.push(mask.length);
  if (checker !== undefined && !checker.setMask!(id, mask, init >>> 0)) maskLen[id] = -1;
  return id;
}

/**
 * Whether the CRC of b[start, end − 4) with mask `id` (registerTrailerMask) over its first
 * bytes equals the little-endian 32-bit value at b[end − 4, end): 1 yes, 0 no, -1 not answered
 * here (no addon, a buffer it cannot read, a range shorter than mask and trailer): the caller
 * computes it another way. One N-API call with three numbers per frame (see native/src/icrc.c).
 */
export function trailerCheck(b: Uint8Array, start: number, id: number, end: number): number {
  if (id < 0) return -1;
  if (addon === null) engines();
  const c = checker;
  if (c === undefined || maskLen[id]! < 0 || start < 0 || end > b.length || end - start < maskLen[id]! + 4) return -1;
  const ab = b.buffer;
  if (ab !== boundAb) {
    if (ab === refusedAb) return -1;
    if (!c.bind!(ab)) { refusedAb = ab; return -1; }
    boundAb = ab;
  }
  const at = b.byteOffset;
  if (at + end > 0xffffffff) return -1; // the call passes 32-bit offsets
  return c.check!(at + start, at + end, id) ? 1 : 0;
}

/** Which CRC engine long ranges use: 'pclmul' (the addon), 'zlib' or 'js' (loads them). */
export function crc32Engine(): 'pclmul' | 'zlib' | 'js' {
  return engines() ? 'pclmul' : nativeCrc32 ? 'zlib' : 'js';
}

/** 8 × 256 entries: T[k*256 + n] = CRC of byte n followed by k zero bytes (slicing tables). */
const T = new Int32Array(8 * 256);
(function init(): void {
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    T[n] = c;
  }
  for (let n = 0; n < 256; n++) {
    let c = T[n]!;
    for (let k = 1; k < 8; k++) {
      c = T[c & 0xff]! ^ (c >>> 8);
      T[k * 256 + n] = c;
    }
  }
})();

/** Advance the raw (non-inverted) CRC register over b[start, end). */
function rawUpdate(r: number, b: Uint8Array, start: number, end: number): number {
  let i = start;
  const t = T;
  // Slicing-by-8: two little-endian words per iteration.
  while (i + 8 <= end) {
    r ^= b[i]! | (b[i + 1]! << 8) | (b[i + 2]! << 16) | (b[i + 3]! << 24);
    const h = b[i + 4]! | (b[i + 5]! << 8) | (b[i + 6]! << 16) | (b[i + 7]! << 24);
    r = t[1792 + (r & 0xff)]! ^ t[1536 + ((r >>> 8) & 0xff)]! ^ t[1280 + ((r >>> 16) & 0xff)]! ^ t[1024 + (r >>> 24)]! ^
      t[768 + (h & 0xff)]! ^ t[512 + ((h >>> 8) & 0xff)]! ^ t[256 + ((h >>> 16) & 0xff)]! ^ t[h >>> 24]!;
    i += 8;
  }
  while (i < end) r = t[(r ^ b[i++]!) & 0xff]! ^ (r >>> 8);
  return r;
}

/**
 * Continue a CRC-32 over b[start, end) (clamped to the buffer). `crc` is the CRC of the data
 * before (0 to start). Returns the CRC of everything so far (unsigned 32-bit).
 */
export function crc32Update(crc: number, b: Uint8Array, start = 0, end = b.length): number {
  if (end > b.length) end = b.length;
  if (start < 0) start = 0;
  if (start >= end) return crc >>> 0;
  const a = addon === null ? engines() : addon;
  if (a !== undefined && end - start >= ADDON_MIN) return a.crc32Masked(b, crc >>> 0, start, NO_MASK, end);
  if (nativeCrc32 !== undefined && end - start >= NATIVE_MIN) {
    return nativeCrc32(start === 0 && end === b.length ? b : b.subarray(start, end), crc >>> 0) >>> 0;
  }
  return ~rawUpdate(~crc, b, start, end) >>> 0;
}

/** crc32Update without the native fast path (always the JS slicing-by-8 loop). */
export function crc32UpdateJs(crc: number, b: Uint8Array, start = 0, end = b.length): number {
  if (end > b.length) end = b.length;
  if (start < 0) start = 0;
  if (start >= end) return crc >>> 0;
  return ~rawUpdate(~crc, b, start, end) >>> 0;
}

/** CRC-32 of b[start, end) — same result as zlib's crc32(). */
export function crc32(b: Uint8Array, start = 0, end = b.length): number {
  return crc32Update(0, b, start, end);
}

/**
 * Continue a CRC-32 over b[start, start + mask.length) with each byte OR-ed with its mask byte
 * (clamped to the buffer): the ICRC's variant header fields fed as ones in one pass over the
 * frame, no copy, no per-run calls.
 */
export function crc32UpdateMasked(crc: number, b: Uint8Array, start: number, mask: Uint8Array): number {
  let end = start + mask.length;
  if (end > b.length) end = b.length;
  if (start < 0 || start >= end) return crc >>> 0;
  let r = ~crc;
  let i = start;
  let m = 0;
  const t = T;
  while (i + 8 <= end) {
    r ^= (b[i]! | mask[m]!) | ((b[i + 1]! | mask[m + 1]!) << 8) | ((b[i + 2]! | mask[m + 2]!) << 16) | ((b[i + 3]! | mask[m + 3]!) << 24);
    const h = (b[i + 4]! | mask[m + 4]!) | ((b[i + 5]! | mask[m + 5]!) << 8) | ((b[i + 6]! | mask[m + 6]!) << 16) | ((b[i + 7]! | mask[m + 7]!) << 24);
    r = t[1792 + (r & 0xff)]! ^ t[1536 + ((r >>> 8) & 0xff)]! ^ t[1280 + ((r >>> 16) & 0xff)]! ^ t[1024 + (r >>> 24)]! ^
      t[768 + (h & 0xff)]! ^ t[512 + ((h >>> 8) & 0xff)]! ^ t[256 + ((h >>> 16) & 0xff)]! ^ t[h >>> 24]!;
    i += 8; m += 8;
  }
  while (i < end) r = t[(r ^ (b[i++]! | mask[m++]!)) & 0xff]! ^ (r >>> 8);
  return ~r >>> 0;
}

/**
 * crc32UpdateMasked(crc, b, start, mask) continued with b[start + mask.length, end) as it is:
 * a header stack with its masks and the packet behind it, in one call of the addon when built.
 */
export function crc32UpdateMaskedThen(crc: number, b: Uint8Array, start: number, mask: Uint8Array, end: number): number {
  // below ADDON_MIN bytes after the stack the call costs more than the JS loop (the addon feeds a
  // short tail byte by byte): 56-byte CDC SENDs and 16-byte ACKs, measured 2-2.5x faster in JS
  const a = addon === null ? engines() : addon;
  if (a !== undefined && start >= 0 && end - start - mask.length >= ADDON_MIN) {
    return a.crc32Masked(b, crc >>> 0, start, mask, end > 0 ? end : 0);
  }
  const c = crc32UpdateMasked(crc, b, start, mask);
  return end > start + mask.length ? crc32Update(c, b, start + mask.length, end) : c;
}

/** Continue a CRC-32 with one byte. */
export function crc32UpdateByte(crc: number, byte: number): number {
  const r = ~crc;
  return ~(T[(r ^ byte) & 0xff]! ^ (r >>> 8)) >>> 0;
}

/** Continue a CRC-32 with `count` copies of `byte` (e.g. the masked 0xFF runs of the ICRC). */
export function crc32UpdateFill(crc: number, byte: number, count: number): number {
  let r = ~crc;
  const v = byte & 0xff;
  for (let i = 0; i < count; i++) r = T[(r ^ v) & 0xff]! ^ (r >>> 8);
  return ~r >>> 0;
}
