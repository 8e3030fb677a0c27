# (c3) fallback with CLC Decline from the client before any Proposal: no UEID anywhere, so only
# SMC-Rv1 is possible, which needs a RoCE v1 GID that rdma_rxe does not have -> the client
# completes the TCP handshake (both SYNs carry option 254) and sends CLC Decline (NOSMCDEV).
PORT=12345
SMC_UEID=
setup_rdma
both rdma-ready
pingpong_pair "after decline" 1 -m 'fallback test: v1 only, client declines' -d 500
finish
