// The IB QP state machine for RC QPs as Linux enforces it (drivers/infiniband/core/verbs.c,
// qp_state_table / ib_modify_qp_is_ok): for each transition, the attributes that must be in
// the mask and those that may be. Any other attribute makes the modify fail with EINVAL, as
// it does through libibverbs. Shared by the providers so they reject exactly the same calls.

import { QpAttrMask as M, QpState as S, attrMaskNames, qpStateName, VerbsError } from './types.js';

interface Rule { req: number; opt: number }

const T = new Map<string, Rule>();
function rule(from: number, to: number, req: number, opt: number): void { T.set(`${from}>${to}`, { req, opt }); }

// RESET
rule(S.RESET, S.RESET, 0, 0);
rule(S.RESET, S.INIT, M.PKEY_INDEX | M.PORT | M.ACCESS_FLAGS, 0);
// INIT
rule(S.INIT, S.INIT, 0, M.PKEY_INDEX | M.PORT | M.ACCESS_FLAGS);
rule(S.INIT, S.RTR, M.AV | M.PATH_MTU | M.DEST_QPN | M.RQ_PSN | M.MAX_DEST_RD_ATOMIC | M.MIN_RNR_TIMER,
  M.ALT_PATH | M.ACCESS_FLAGS | M.PKEY_INDEX);
// RTR
rule(S.RTR, S.RTS, M.SQ_PSN | M.MAX_QP_RD_ATOMIC | M.RETRY_CNT | M.RNR_RETRY | M.TIMEOUT,
  M.CUR_STATE | M.ALT_PATH | M.ACCESS_FLAGS | M.MIN_RNR_TIMER | M.PATH_MIG_STATE);
// RTS
rule(S.RTS, S.RTS, 0, M.CUR_STATE | M.ACCESS_FLAGS | M.ALT_PATH | M.PATH_MIG_STATE | M.MIN_RNR_TIMER);
rule(S.RTS, S.SQD, 0, M.EN_SQD_ASYNC_NOTIFY);
// SQD
rule(S.SQD, S.RTS, 0, M.CUR_STATE | M.ALT_PATH | M.ACCESS_FLAGS | M.MIN_RNR_TIMER | M.PATH_MIG_STATE);
rule(S.SQD, S.SQD, 0, M.PKEY_INDEX | M.AV | M.MAX_QP_RD_ATOMIC | M.MIN_RNR_TIMER | M.ALT_PATH | M.TIMEOUT |
  M.RETRY_CNT | M.RNR_RETRY | M.MAX_DEST_RD_ATOMIC | M.PATH_MIG_STATE | M.ACCESS_FLAGS);
// to RESET / ERR from anywhere
for (const from of [S.RESET, S.INIT, S.RTR, S.RTS, S.SQD, S.SQE, S.ERR]) {
  rule(from, S.RESET, 0, 0);
  rule(from, S.ERR, 0, 0);
}

/**
 * Check a modify: current state `cur`, mask (with or without STATE), target state.
 * Throws VerbsError('EINVAL') with the reason, like ib_modify_qp_is_ok() failing.
 */
export function checkTransition(cur: number, mask: number, next: number, curStateAttr?: number): void {
  if ((mask & M.CUR_STATE) && curStateAttr !== undefined && curStateAttr !== cur && cur !== S.RTS && cur !== S.SQD && cur !== S.SQE) {
    throw new VerbsError('EINVAL', `modify_qp: cur_qp_state ${qpStateName(curStateAttr)} does not match ${qpStateName(cur)}`);
  }
  const r = T.get(`${cur}>${next}`);
  if (!r) throw new VerbsError('EINVAL', `modify_qp: no transition ${qpStateName(cur)} -> ${qpStateName(next)} for an RC QP`);
  const given = mask & ~M.STATE;
  const missing = r.req & ~given;
  if (missing) throw new VerbsError('EINVAL', `modify_qp ${qpStateName(cur)} -> ${qpStateName(next)}: missing ${attrMaskNames(missing)}`);
  const extra = given & ~(r.req | r.opt);
  if (extra) throw new VerbsError('EINVAL', `modify_qp ${qpStateName(cur)} -> ${qpStateName(next)}: ${attrMaskNames(extra)} not allowed`);
}
