// CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320, zlib conventions) for the RoCE ICRC on
// smcdump's replay path: one N-API call per frame does the masked header stack and the rest
// of the packet (dissectors/wire/crc32.ts decides when to use it and falls back to zlib/JS).
//
// Why native: a frame's ICRC covers ~1 KiB; Node's zlib.crc32 runs about 2.7 GB/s there (no
// SIMD in its build), a JS slicing-by-8 loop 1.3 GB/s. Carry-less multiplication (PCLMULQDQ)
// folds 64 bytes per step: ~10 GB/s, and the call itself costs ~60 ns — measured in
// docs/smcdump.md (performance). Where the CPU has VPCLMULQDQ on 512-bit registers the 64-byte
// step is one instruction pair (a 1 KiB frame's check 70 -> 39 ns in C); SMCSCOPE_CRC_NO512=1
// keeps the 128-bit loop (tests, A/B).
//
// Folding (Gopal et al., "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ",
// Intel, 2009): four 128-bit accumulators are multiplied by x^(512±32) mod P and xor-ed with
// the next 64 bytes; then folded into one (x^(128±32) mod P), reduced to 64 and 32 bits, and
// a Barrett reduction gives the remainder. The constants below are those powers of x modulo
// P(x) = 0x104C11DB7, bit-reflected and shifted by one as the reflected form requires; they
// are facts of the polynomial. Tested against zlib for every length 0..2000 and offsets
// (test/wire/ib.test.ts). Without PCLMUL (other CPUs) the table loop is used and JS prefers
// zlib (the `simd` export says which).

#include <node_api.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define ICRC_X86 1
#endif

/* slicing-by-8 tables: st[k][n] = CRC register of byte n followed by k zero bytes; st[0] is the
 * classic byte table. */
static uint32_t st[8][256];
#define table st[0]

static void table_init(void) {
  for (uint32_t n = 0; n < 256; n++) {
    uint32_t c = n;
    for (int k = 0; k < 8; k++) c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
    st[0][n] = c;
  }
  for (uint32_t n = 0; n < 256; n++)
    for (int k = 1; k < 8; k++) st[k][n] = st[0][st[k - 1][n] & 0xff] ^ (st[k - 1][n] >> 8);
}

/* Raw register over (p[i] | m[i]) for i < n: the masked header stack (40–60 bytes) eight bytes
 * a step; byte by byte it cost ~60 ns of a ~1 KiB frame's check. */
static uint32_t masked(uint32_t r, const uint8_t *p, const uint8_t *m, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint32_t lo = r ^ ((uint32_t)(p[i] | m[i]) | (uint32_t)(p[i + 1] | m[i + 1]) << 8 |
                       (uint32_t)(p[i + 2] | m[i + 2]) << 16 | (uint32_t)(p[i + 3] | m[i + 3]) << 24);
    uint32_t hi = (uint32_t)(p[i + 4] | m[i + 4]) | (uint32_t)(p[i + 5] | m[i + 5]) << 8 |
                  (uint32_t)(p[i + 6] | m[i + 6]) << 16 | (uint32_t)(p[i + 7] | m[i + 7]) << 24;
    r = st[7][lo & 0xff] ^ st[6][(lo >> 8) & 0xff] ^ st[5][(lo >> 16) & 0xff] ^ st[4][lo >> 24] ^
        st[3][hi & 0xff] ^ st[2][(hi >> 8) & 0xff] ^ st[1][(hi >> 16) & 0xff] ^ st[0][hi >> 24];
  }
  for (; i < n; i++) r = table[(r ^ (p[i] | m[i])) & 0xff] ^ (r >> 8);
  return r;
}

/* r: the raw (not inverted) CRC register. */
static uint32_t bytewise(uint32_t r, const uint8_t *p, size_t n) {
  while (n--) r = table[(r ^ *p++) & 0xff] ^ (r >> 8);
  return r;
}

/* The folding's tail (under 16 bytes): eight bytes a step through the slicing tables, then byte
 * by byte. A byte at a time it was ~7 ns of a 1 KiB frame's check for 8 bytes (a chain of
 * dependent table loads), here one step. */
static uint32_t tail(uint32_t r, const uint8_t *p, size_t n) {
  if (n >= 8) {
    uint32_t lo = r ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
    uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;
    r = st[7][lo & 0xff] ^ st[6][(lo >> 8) & 0xff] ^ st[5][(lo >> 16) & 0xff] ^ st[4][lo >> 24] ^
        st[3][hi & 0xff] ^ st[2][(hi >> 8) & 0xff] ^ st[1][(hi >> 16) & 0xff] ^ st[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  return bytewise(r, p, n);
}

static int have_clmul = 0;
#ifdef ICRC_X86
/* VPCLMULQDQ on 512-bit registers (AVX-512): the 64-byte fold step in one instruction pair. */
static int have_vclmul = 0;
#endif

#ifdef ICRC_X86
#define LOAD(p) _mm_loadu_si128((const __m128i *)(p))
#define CLMUL(a, k, sel) _mm_clmulepi64_si128((a), (k), (sel))

/* One fold step: acc * (k.lo for the low half, k.hi for the high half) xor next. */
__attribute__((target("pclmul,sse4.1")))
static inline __m128i fold16(__m128i acc, __m128i k, __m128i next) {
  return _mm_xor_si128(_mm_xor_si128(CLMUL(acc, k, 0x00), CLMUL(acc, k, 0x11)), next);
}

/* The fold constants for a 64-byte step (x^(512+32), x^(512-32) mod P) and a 16-byte step
 * (x^(128+32), x^(128-32) mod P). */
#define K64_HI 0x01c6e41596LL
#define K64_LO 0x0154442bd4LL
#define K16_HI 0x00ccaa009eLL
#define K16_LO 0x01751997d0LL

/* The four 16-byte accumulators of the first 64 bytes, folded on to the end of p[0, len) (len
 * counts from the end of those 64 bytes), reduced to the raw register. */
__attribute__((target("pclmul,sse4.1")))
static uint32_t fold_rest(__m128i x1, __m128i x2, __m128i x3, __m128i x4, const uint8_t *p, size_t len) {
  __m128i k = _mm_set_epi64x(K64_HI, K64_LO);
  while (len >= 64) {
    x1 = fold16(x1, k, LOAD(p));
    x2 = fold16(x2, k, LOAD(p + 16));
    x3 = fold16(x3, k, LOAD(p + 32));
    x4 = fold16(x4, k, LOAD(p + 48));
    p += 64;
    len -= 64;
  }
  k = _mm_set_epi64x(K16_HI, K16_LO);
  x1 = fold16(x1, k, x2);
  x1 = fold16(x1, k, x3);
  x1 = fold16(x1, k, x4);
  while (len >= 16) {
    x1 = fold16(x1, k, LOAD(p));
    p += 16;
    len -= 16;
  }
  /* 128 -> 96 -> 64 bits */
  const __m128i low32 = _mm_set_epi32(0, ~0, 0, ~0);
  __m128i t = CLMUL(x1, k, 0x10);
  x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), t);
  k = _mm_set_epi64x(0, 0x0163cd6124LL); /* x^64 mod P */
  t = _mm_srli_si128(x1, 4);
  x1 = _mm_xor_si128(CLMUL(_mm_and_si128(x1, low32), k, 0x00), t);
  /* Barrett: mu = floor(x^64 / P), P itself (both reflected) */
  k = _mm_set_epi64x(0x01f7011641LL, 0x01db710641LL);
  t = CLMUL(_mm_and_si128(x1, low32), k, 0x10);
  t = CLMUL(_mm_and_si128(t, low32), k, 0x00);
  x1 = _mm_xor_si128(x1, t);
  return tail((uint32_t)_mm_extract_epi32(x1, 1), p, len);
}

/* Raw register over p[0, len), len >= 64, with m[0, 64) OR-ed over its first 64 bytes when m is
 * given: a masked header stack (up to 64 bytes, zero-padded) rides in the first loads instead of
 * a table pass of its own (~20 ns of a 1 KiB frame's check). */
__attribute__((target("pclmul,sse4.1")))
static uint32_t fold(uint32_t r, const uint8_t *p, const uint8_t *m, size_t len) {
  __m128i x1 = LOAD(p), x2 = LOAD(p + 16), x3 = LOAD(p + 32), x4 = LOAD(p + 48);
  if (m) {
    x1 = _mm_or_si128(x1, LOAD(m));
    x2 = _mm_or_si128(x2, LOAD(m + 16));
    x3 = _mm_or_si128(x3, LOAD(m + 32));
    x4 = _mm_or_si128(x4, LOAD(m + 48));
  }
  x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128((int)r));
  return fold_rest(x1, x2, x3, x4, p + 64, len - 64);
}

/* fold() with the 64-byte steps on one 512-bit register: each 128-bit lane is one of the four
 * accumulators, so a step is two VPCLMULQDQ and one three-way XOR instead of eight PCLMULQDQ and
 * eight XORs. The lanes then go on as fold()'s four accumulators (same constants, same result). */
__attribute__((target("avx512f,avx512vl,vpclmulqdq,pclmul,sse4.1")))
static uint32_t fold512(uint32_t r, const uint8_t *p, const uint8_t *m, size_t len) {
  __m512i z = _mm512_loadu_si512((const void *)p);
  if (m) z = _mm512_or_si512(z, _mm512_loadu_si512((const void *)m));
  z = _mm512_xor_si512(z, _mm512_zextsi128_si512(_mm_cvtsi32_si128((int)r)));
  const __m512i k = _mm512_broadcast_i32x4(_mm_set_epi64x(K64_HI, K64_LO));
  p += 64;
  len -= 64;
  while (len >= 64) {
    /* 0x96: a ^ b ^ c */
    z = _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(z, k, 0x00), _mm512_clmulepi64_epi128(z, k, 0x11),
                                  _mm512_loadu_si512((const void *)p), 0x96);
    p += 64;
    len -= 64;
  }
  return fold_rest(_mm512_extracti32x4_epi32(z, 0), _mm512_extracti32x4_epi32(z, 1), _mm512_extracti32x4_epi32(z, 2),
                   _mm512_extracti32x4_epi32(z, 3), p, len);
}
#endif

/* Raw register over p[0, n), m as in fold() (only when n >= 64: callers pass NULL otherwise). */
static uint32_t update_m(uint32_t r, const uint8_t *p, const uint8_t *m, size_t n) {
#ifdef ICRC_X86
  if (have_vclmul && n >= 64) return fold512(r, p, m, n);
  if (have_clmul && n >= 64) return fold(r, p, m, n);
#endif
  (void)m;
  return bytewise(r, p, n);
}

static uint32_t update(uint32_t r, const uint8_t *p, size_t n) { return update_m(r, p, NULL, n); }

static int typed_bytes(napi_env env, napi_value v, const uint8_t **data, size_t *len) {
  napi_typedarray_type type;
  void *d;
  napi_value ab;
  size_t off;
  if (napi_get_typedarray_info(env, v, &type, len, &d, &ab, &off) != napi_ok || type != napi_uint8_array) return 0;
  *data = (const uint8_t *)d;
  return 1;
}

/*
 * crc32Masked(buf, crc, start, mask, end) -> CRC
 * zlib-style: `crc` is the CRC so far (0 to start). Feeds buf[start + i] | mask[i] for every
 * mask byte inside buf, then buf[start + mask.length, end) as it is (clamped to buf).
 * `mask` may be empty: then it is a plain crc32 over buf[start, end).
 */
static napi_value crc32_masked(napi_env env, napi_callback_info info) {
  size_t argc = 5;
  napi_value a[5];
  napi_value out = NULL;
  if (napi_get_cb_info(env, info, &argc, a, NULL, NULL) != napi_ok || argc < 5) return NULL;
  const uint8_t *buf, *mask;
  size_t blen, mlen;
  uint32_t crc, start, end;
  if (!typed_bytes(env, a[0], &buf, &blen) || !typed_bytes(env, a[3], &mask, &mlen) ||
      napi_get_value_uint32(env, a[1], &crc) != napi_ok || napi_get_value_uint32(env, a[2], &start) != napi_ok ||
      napi_get_value_uint32(env, a[4], &end) != napi_ok) {
    napi_throw_type_error(env, NULL, "crc32Masked(Uint8Array, crc, start, Uint8Array, end)");
    return NULL;
  }
  uint32_t r = ~crc;
  size_t s = start;
  if (s < blen) {
    size_t m = mlen < blen - s ? mlen : blen - s;
    r = masked(r, buf + s, mask, m);
    size_t from = s + mlen, to = end < blen ? end : blen;
    if (to > from) r = update(r, buf + from, to - from);
  }
  napi_create_uint32(env, ~r, &out);
  return out;
}

/*
 * The per-frame check without the per-call cost of typed-array arguments. Measured on the
 * replay path, crc32Masked's N-API glue (two typed-array lookups, three numbers, a uint32 result
 * that is a heap number half the time) took ~120 ns of its ~210 ns on a 1 KiB frame; a call with
 * three plain numbers and a boolean result takes ~35 ns. So the caller binds the ArrayBuffer its
 * frames live in once (the capture reader's block buffer: one bind per buffer, not per frame),
 * registers each header-stack mask once, and then asks per frame with offsets into that buffer.
 * The JS side (dissectors/wire/crc32.ts) keeps the bound ArrayBuffer referenced, so its memory
 * stays valid while it is bound; a frame of another buffer binds that one first. This state is
 * process-wide, not per thread: only the main thread calls bind/setMask/check (crc32.ts).
 */
#define MASKS 8
#define MASK_MAX 64
static uint8_t masks[MASKS][MASK_MAX];
static size_t mask_len[MASKS];
static uint32_t mask_init[MASKS];
static const uint8_t *bound = NULL;
static size_t bound_len = 0;

/* The call's first three arguments (false when fewer were given). */
static int args3(napi_env env, napi_callback_info info, napi_value a[3]) {
  size_t argc = 3;
  return napi_get_cb_info(env, info, &argc, a, NULL, NULL) == napi_ok && argc >= 3;
}

static napi_value boolean(napi_env env, int v) {
  napi_value out = NULL;
  napi_get_boolean(env, v, &out);
  return out;
}

/* bind(arrayBuffer) -> true when bound (false: not an ArrayBuffer, e.g. a SharedArrayBuffer). */
static napi_value icrc_bind(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value a[1];
  void *d = NULL;
  size_t len = 0;
  bool is_ab = false;
  int ok = napi_get_cb_info(env, info, &argc, a, NULL, NULL) == napi_ok && argc >= 1 &&
           napi_is_arraybuffer(env, a[0], &is_ab) == napi_ok && is_ab &&
           napi_get_arraybuffer_info(env, a[0], &d, &len) == napi_ok;
  bound = ok ? (const uint8_t *)d : NULL;
  bound_len = ok ? len : 0;
  return boolean(env, ok);
}

/* setMask(id, mask, init): mask `id` (0..MASKS-1) = those bytes (at most MASK_MAX), fed from the
 * CRC value `init` (zlib-style, the CRC of whatever precedes the stack). */
static napi_value icrc_set_mask(napi_env env, napi_callback_info info) {
  napi_value a[3];
  const uint8_t *m;
  size_t mlen;
  uint32_t id, init;
  if (!args3(env, info, a) || napi_get_value_uint32(env, a[0], &id) != napi_ok || id >= MASKS ||
      !typed_bytes(env, a[1], &m, &mlen) || mlen > MASK_MAX || napi_get_value_uint32(env, a[2], &init) != napi_ok)
    return boolean(env, 0);
  /* zero-padded to MASK_MAX: check() lays all 64 bytes over the frame's first 64 */
  for (size_t i = 0; i < MASK_MAX; i++) masks[id][i] = i < mlen ? m[i] : 0;
  mask_len[id] = mlen;
  mask_init[id] = init;
  return boolean(env, 1);
}

/* check(start, end, id) -> true when the CRC over bound[start, end - 4) with mask `id` laid over
 * its first bytes equals the little-endian 32-bit value at bound[end - 4, end) (the ICRC's place).
 * False as well when the range does not hold the mask and the trailer inside the bound buffer. */
static napi_value icrc_check(napi_env env, napi_callback_info info) {
  napi_value a[3];
  uint32_t start = 0, end = 0, id = MASKS;
  if (!args3(env, info, a) || napi_get_value_uint32(env, a[0], &start) != napi_ok ||
      napi_get_value_uint32(env, a[1], &end) != napi_ok || napi_get_value_uint32(env, a[2], &id) != napi_ok ||
      id >= MASKS || bound == NULL || end > bound_len || start > end || (size_t)(end - start) < mask_len[id] + 4)
    return boolean(env, 0);
  const uint8_t *p = bound + start, *m = masks[id];
  size_t mlen = mask_len[id], body = end - start - 4;
  /* the mask rides in the first 64-byte loads when there are 64 bytes to fold (the clmul paths) */
  uint32_t r = have_clmul && body >= MASK_MAX ? ~update_m(~mask_init[id], p, m, body)
                                              : ~update(masked(~mask_init[id], p, m, mlen), p + mlen, body - mlen);
  const uint8_t *t = p + body;
  return boolean(env, r == ((uint32_t)t[0] | (uint32_t)t[1] << 8 | (uint32_t)t[2] << 16 | (uint32_t)t[3] << 24));
}

static napi_value init(napi_env env, napi_value exports) {
  table_init();
#ifdef ICRC_X86
  __builtin_cpu_init();
  have_clmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
  have_vclmul = have_clmul && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                __builtin_cpu_supports("vpclmulqdq") && getenv("SMCSCOPE_CRC_NO512") == NULL;
#endif
  napi_value f, simd;
  napi_create_function(env, "crc32Masked", NAPI_AUTO_LENGTH, crc32_masked, NULL, &f);
  napi_set_named_property(env, exports, "crc32Masked", f);
  napi_create_function(env, "bind", NAPI_AUTO_LENGTH, icrc_bind, NULL, &f);
  napi_set_named_property(env, exports, "bind", f);
  napi_create_function(env, "setMask", NAPI_AUTO_LENGTH, icrc_set_mask, NULL, &f);
  napi_set_named_property(env, exports, "setMask", f);
  napi_create_function(env, "check", NAPI_AUTO_LENGTH, icrc_check, NULL, &f);
  napi_set_named_property(env, exports, "check", f);
  napi_get_boolean(env, have_clmul != 0, &simd);
  napi_set_named_property(env, exports, "simd", simd);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
