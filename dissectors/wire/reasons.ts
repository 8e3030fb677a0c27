// CLC Decline / SMC fallback reason codes (formats.md §6.1; Linux `SMC_CLC_DECL_*`).
// The same 32-bit codes appear in CLC Decline "peer diagnosis", in smc_diag FALLBACK
// (local reason + peer diagnosis) and in the SMC fallback statistics.
// LLC DELETE LINK reasons are a different table (see the LLC codec).

import { hex32 } from './common.js';

export interface ReasonInfo {
  code: number;
  /** Linux name without the `SMC_CLC_DECL_` prefix; 'UNKNOWN' for codes not in the table. */
  name: string;
  meaning: string;
  /** Meaning in older kernels when it differed (or when the code is no longer used). */
  historical?: string;
}

/** High byte of a reason code = class. */
const REASON_CLASSES: ReadonlyMap<number, string> = new Map([
  [0x01, 'resources'],
  [0x02, 'timeout'],
  [0x03, 'configuration/negotiation'],
  [0x04, 'synchronization'],
  [0x05, 'peer declined'],
  [0x06, 'reply to a decline (Linux 4.11)'],
  [0x07, 'send problem (Linux 4.11)'],
  [0x09, 'internal'],
  [0x99, 'internal (Linux 4.11)'],
]);

const H411 = 'Linux 4.11 (first upstream SMC) value; not used by current kernels';

/** Every known code: current Linux names first, then the values only Linux 4.11 used. */
export const DECLINE_REASONS: readonly ReasonInfo[] = [
  { code: 0x01010000, name: 'MEM', meaning: 'insufficient memory resources' },
  { code: 0x02010000, name: 'TIMEOUT_CL', meaning: 'timeout waiting for QP CONFIRM LINK' },
  { code: 0x02020000, name: 'TIMEOUT_AL', meaning: 'timeout waiting for QP ADD LINK' },
  { code: 0x03000000, name: 'CNFERR', meaning: 'configuration error' },
  { code: 0x03010000, name: 'PEERNOSMC', meaning: 'peer did not indicate SMC (TCP option), local only' },
  { code: 0x03020000, name: 'IPSEC', meaning: 'IPsec in use' },
  {
    code: 0x03030000, name: 'NOSMCDEV', meaning: 'no SMC device found, R or D',
    historical: 'was IPSEC in Linux 4.11: IPsec in use',
  },
  { code: 0x03030001, name: 'NOSMCDDEV', meaning: 'no SMC-D device found' },
  { code: 0x03030002, name: 'NOSMCRDEV', meaning: 'no SMC-R device found' },
  { code: 0x03030003, name: 'NOISM2SUPP', meaning: 'hardware has no ISMv2 support' },
  { code: 0x03030004, name: 'NOV2EXT', meaning: 'peer sent no CLC v2 extension' },
  { code: 0x03030005, name: 'NOV2DEXT', meaning: 'peer sent no SMC-Dv2 extension' },
  { code: 0x03030006, name: 'NOSEID', meaning: 'peer sent no SEID' },
  { code: 0x03030007, name: 'NOSMCD2DEV', meaning: 'no SMC-Dv2 device found' },
  { code: 0x03030008, name: 'NOUEID', meaning: 'no common UEID' },
  { code: 0x03030009, name: 'RELEASEERR', meaning: 'release version negotiation failed' },
  { code: 0x0303000a, name: 'MAXCONNERR', meaning: 'max connections negotiation failed' },
  { code: 0x0303000b, name: 'MAXLINKERR', meaning: 'max links negotiation failed' },
  { code: 0x03040000, name: 'MODEUNSUPP', meaning: 'SMC modes do not match, R or D' },
  { code: 0x03050000, name: 'RMBE_EC', meaning: 'peer has eyecatcher in RMBE' },
  { code: 0x03060000, name: 'OPTUNSUPP', meaning: 'socket option not supported (e.g. TCP Fast Open), local' },
  { code: 0x03070000, name: 'DIFFPREFIX', meaning: 'IP prefix / subnet mismatch' },
  { code: 0x03080000, name: 'GETVLANERR', meaning: 'error getting VLAN id of IP device' },
  { code: 0x03090000, name: 'ISMVLANERR', meaning: 'error registering VLAN id on ISM device' },
  { code: 0x030a0000, name: 'NOACTLINK', meaning: 'no active SMC-R link in link group' },
  { code: 0x030b0000, name: 'NOSRVLINK', meaning: 'SMC-R link from server not found' },
  { code: 0x030c0000, name: 'VERSMISMAT', meaning: 'SMC version mismatch' },
  { code: 0x030d0000, name: 'MAX_DMB', meaning: 'SMC-D DMB limit exceeded' },
  { code: 0x030e0000, name: 'NOROUTE', meaning: 'SMC-Rv2: no route to peer' },
  { code: 0x030f0000, name: 'NOINDIRECT', meaning: 'SMC-Rv2: direct/indirect route mismatch' },
  { code: 0x04000000, name: 'SYNCERR', meaning: 'synchronization error, sent with out-of-sync bit' },
  { code: 0x05000000, name: 'PEERDECL', meaning: 'peer declined during handshake, local label' },
  { code: 0x09990000, name: 'INTERR', meaning: 'internal error' },
  { code: 0x09990001, name: 'ERR_RTOK', meaning: 'rtoken handling failed' },
  { code: 0x09990002, name: 'ERR_RDYLNK', meaning: 'IB ready-link failed' },
  { code: 0x09990003, name: 'ERR_REGBUF', meaning: 'registering RDMA buffers failed' },
  // Only in Linux 4.11:
  { code: 0x02000000, name: 'TIMEOUT', meaning: 'timeout', historical: H411 },
  { code: 0x02040000, name: 'TCL', meaning: 'timeout waiting for QP confirm', historical: H411 },
  { code: 0x06000000, name: 'REPLY', meaning: 'reply to a received decline', historical: H411 },
  { code: 0x07000000, name: 'SEND', meaning: 'sending problem', historical: H411 },
  { code: 0x99990000, name: 'INTERR', meaning: 'internal error (old code)', historical: H411 },
];

const BY_CODE: ReadonlyMap<number, ReasonInfo> = new Map(DECLINE_REASONS.map((r) => [r.code, r]));

/** Name and meaning of a reason code. Unknown codes get name 'UNKNOWN' and their class
 *  (from the high byte), plus the closest known parent code if the low 16 bits are a
 *  sub-code of one. */
export function declineReason(code: number): ReasonInfo {
  const c = code >>> 0;
  const known = BY_CODE.get(c);
  if (known) return known;
  const cls = c >>> 24;
  const clsName = REASON_CLASSES.get(cls);
  let meaning = `unknown reason, class 0x${cls.toString(16).padStart(2, '0')} ${clsName ?? 'unknown'}`;
  const parent = BY_CODE.get((c & 0xffff0000) >>> 0);
  if (parent && (c & 0xffff) !== 0) meaning += `, sub-code of ${parent.name}`;
  return { code: c, name: 'UNKNOWN', meaning };
}

/** `0x03030008 NOUEID (no common UEID)`; historical meanings appended after ';'. */
export function formatReason(code: number): string {
  const r = declineReason(code);
  let s = `${hex32(r.code)} ${r.name} (${r.meaning}`;
  if (r.historical) s += r.historical === H411 ? '; Linux 4.11 only' : `; ${r.historical}`;
  return s + ')';
}
