// The uroce helper's CRC-32 is the project's one CRC implementation, native/src/icrc.c (the
// one smcdump's replay path uses: slicing-by-8 tables, PCLMULQDQ / VPCLMULQDQ folding),
// compiled into this addon as it is. Only its module registration is left out: this file is
// part of uroce_sock.node, which registers itself (uroce_sock.c). No CRC code of its own here.
//
// Project decision (issue 17, round 14; docs/uroce.md): the helper may do the ICRC's
// ARITHMETIC; the protocol RULE stays in TypeScript — which bytes are masked (the wire layer's
// BTH mask, dissectors/wire/ib.ts) and the modelled IPv4 + UDP header (its CRC, the "prefix",
// endpoint/verbs/uroce/icrc.ts) reach this code as data.
#include <node_api.h>
#undef NAPI_MODULE
#define NAPI_MODULE(modname, regfunc)
#include "../src/icrc.c"
#include "icrc_arith.h"

void uroce_crc_setup(napi_env env) {
  // icrc.c's init() builds the tables and detects the CPU (and puts its functions on an
  // object of its own, unused here). Idempotent: every caller writes the same values.
  static int done = 0;
  if (done) return;
  napi_value scratch;
  if (napi_create_object(env, &scratch) != napi_ok) return;
  init(env, scratch);
  done = 1;
}

uint32_t uroce_crc_masked(uint32_t crc, const uint8_t *p, const uint8_t *m, size_t mlen, size_t n) {
  // Up to 64 bytes (an ACK, a CDC SEND): eight bytes a step through the slicing tables, the
  // zero-padded mask over all of them. Longer: the mask rides in the first 64-byte loads of the
  // folding (as icrc.c's check() does), or a table pass over the mask and the rest as it is.
  if (n <= MASK_MAX) return ~masked(~crc, p, m, n);
  if (have_clmul) return ~update_m(~crc, p, m, n);
  return ~update(masked(~crc, p, m, mlen), p + mlen, n - mlen);
}
