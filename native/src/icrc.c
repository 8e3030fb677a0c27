// CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320, zlib conventions) for the RoCE ICRC on
// smcdump's replay path: one N-API call per frame does the masked header stack and the rest
// of the packet (dissectors/wire/crc32.ts decides when to use it and falls back to zlib/JS).
//
// Why native: a frame's ICRC covers ~1 KiB; Node's zlib.crc32 runs about 2.7 GB/s there (no
// SIMD in its build), a JS slicing-by-8 loop 1.3 GB/s. Carry-less multiplication (PCLMULQDQ)
// folds 64 bytes per step: ~10 GB/s, and the call itself costs ~60 ns — measured in
// docs/smcdump.md (performance).
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
#include <stdint.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define ICRC_X86 1
#endif

static uint32_t table[256];

static void table_init(void) {
  for (uint32_t n = 0; n < 256; n++) {
    uint32_t c = n;
    for (int k = 0; k < 8; k++) c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
    table[n] = c;
  }
}

/* r: the raw (not inverted) CRC register. */
static uint32_t bytewise(uint32_t r, const uint8_t *p, size_t n) {
  while (n--) r = table[(r ^ *p++) & 0xff] ^ (r >> 8);
  return r;
}

static int have_clmul = 0;

#ifdef ICRC_X86
#define LOAD(p) _mm_loadu_si128((const __m128i *)(p))
#define CLMUL(a, k, sel) _mm_clmulepi64_si128((a), (k), (sel))

/* One fold step: acc * (k.lo for the low half, k.hi for the high half) xor next. */
__attribute__((target("pclmul,sse4.1")))
static inline __m128i fold16(__m128i acc, __m128i k, __m128i next) {
  return _mm_xor_si128(_mm_xor_si128(CLMUL(acc, k, 0x00), CLMUL(acc, k, 0x11)), next);
}

/* Raw register over p[0, len), len >= 64. */
__attribute__((target("pclmul,sse4.1")))
static uint32_t fold(uint32_t r, const uint8_t *p, size_t len) {
  __m128i x1 = _mm_xor_si128(LOAD(p), _mm_cvtsi32_si128((int)r));
  __m128i x2 = LOAD(p + 16), x3 = LOAD(p + 32), x4 = LOAD(p + 48);
  __m128i k = _mm_set_epi64x(0x01c6e41596LL, 0x0154442bd4LL); /* x^(512+32), x^(512-32) mod P */
  p += 64;
  len -= 64;
  while (len >= 64) {
    x1 = fold16(x1, k, LOAD(p));
    x2 = fold16(x2, k, LOAD(p + 16));
    x3 = fold16(x3, k, LOAD(p + 32));
    x4 = fold16(x4, k, LOAD(p + 48));
    p += 64;
    len -= 64;
  }
  k = _mm_set_epi64x(0x00ccaa009eLL, 0x01751997d0LL); /* x^(128+32), x^(128-32) mod P */
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
  return bytewise((uint32_t)_mm_extract_epi32(x1, 1), p, len);
}
#endif

static uint32_t update(uint32_t r, const uint8_t *p, size_t n) {
#ifdef ICRC_X86
  if (have_clmul && n >= 64) return fold(r, p, n);
#endif
  return bytewise(r, p, n);
}

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
    for (size_t i = 0; i < m; i++) r = table[(r ^ (buf[s + i] | mask[i])) & 0xff] ^ (r >> 8);
    size_t from = s + mlen, to = end < blen ? end : blen;
    if (to > from) r = update(r, buf + from, to - from);
  }
  napi_create_uint32(env, ~r, &out);
  return out;
}

static napi_value init(napi_env env, napi_value exports) {
  table_init();
#ifdef ICRC_X86
  __builtin_cpu_init();
  have_clmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
#endif
  napi_value f, simd;
  napi_create_function(env, "crc32Masked", NAPI_AUTO_LENGTH, crc32_masked, NULL, &f);
  napi_set_named_property(env, exports, "crc32Masked", f);
  napi_get_boolean(env, have_clmul != 0, &simd);
  napi_set_named_property(env, exports, "simd", simd);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
