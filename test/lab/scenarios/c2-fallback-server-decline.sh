# (c2) fallback with CLC Decline from the server: only the client has a UEID, so it proposes
# SMC-Rv2 (no v1: rdma_rxe has no RoCE v1 GID); the server cannot accept v2 without a
# matching UEID and has no v1 device -> CLC Decline, TCP fallback.
PORT=12345
[ "$ROLE" = b ] && SMC_UEID=
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
    must smcpingpong client "$PEER_IP" $PORT -m 'fallback test: server declines' -d 500 -x "smcdiag sockets"
    sleep 1
    smc_state "A after decline"
fi
finish
