// The ICRC arithmetic the uroce helper does (icrc_arith.c): CRC-32 only, no protocol. Which
// bytes are masked and the CRC of the headers before the BTH come from TypeScript as data.
#ifndef UROCE_ICRC_ARITH_H
#define UROCE_ICRC_ARITH_H
#include <node_api.h>
#include <stddef.h>
#include <stdint.h>

/* Room for a registered mask (bytes); a shorter mask is zero-padded to it. */
#define UROCE_MASK_MAX 64

/* Tables and CPU detection of the CRC code, once per process. */
void uroce_crc_setup(napi_env env);

/* zlib-style CRC value `crc` continued over p[i] | m[i] for i < n (m: UROCE_MASK_MAX bytes,
 * zero beyond the mask's `mlen` bytes, so the bytes after the mask are fed as they are). */
uint32_t uroce_crc_masked(uint32_t crc, const uint8_t *p, const uint8_t *m, size_t mlen, size_t n);

#endif
