# (c2) fallback with CLC Decline from the server: only the client has a UEID, so it proposes
# SMC-Rv2 (no v1: rdma_rxe has no RoCE v1 GID); the server cannot accept v2 without a
# matching UEID and has no v1 device -> CLC Decline, TCP fallback.
PORT=12345
[ "$ROLE" = b ] && SMC_UEID=
setup_rdma
both rdma-ready
pingpong_pair "after decline" 1 -m 'fallback test: server declines' -d 500
finish
