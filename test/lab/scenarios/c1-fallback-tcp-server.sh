# (c1) fallback: the server is a plain TCP socket. The client's SYN carries TCP option 254,
# the SYN-ACK does not, so the client falls back to TCP without any CLC (PEERNOSMC).
PORT=12345
setup_rdma
both rdma-ready
if [ "$ROLE" = b ]; then
    run smcpingpong server $PORT -t &
    srv=$!
    sleep 1; signal listening
    wait $srv || fail "server exit $?"
else
    wait_for listening
    must smcpingpong client "$PEER_IP" $PORT -m 'fallback test: server is plain TCP' -x "smcdiag sockets"
    sleep 1
    smc_state "A after fallback"
fi
finish
