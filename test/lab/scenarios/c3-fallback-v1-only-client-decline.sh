# (c3) fallback with CLC Decline from the client before any Proposal: no UEID anywhere, so only
# SMC-Rv1 is possible, which needs a RoCE v1 GID that rdma_rxe does not have -> the client
# completes the TCP handshake (both SYNs carry option 254) and sends CLC Decline (NOSMCDEV).
PORT=12345
SMC_UEID=
setup_rdma
both rdma-ready
if [ "$ROLE" = b ]; then
    run smcpingpong server $PORT -x "smcdiag sockets" &
    srv=$!
    sleep 1; signal listening
    wait $srv || fail "server exit $?"
    sleep 1
    smc_state "B after decline"
else
    wait_for listening
    must smcpingpong client "$PEER_IP" $PORT -m 'fallback test: v1 only, client declines' -d 500 -x "smcdiag sockets"
    sleep 1
    smc_state "A after decline"
fi
finish
