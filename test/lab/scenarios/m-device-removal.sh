# (m) RoCE device removal under a live connection: one device per guest; B (server) writes 100
# bytes every 200 ms to A (client, reading); 3 s in, A removes its RoCE device (rdma link del
# rxe0). A's link group is terminated at once (its socket sees the end of the connection, the
# CLC TCP connection is reset); B's QP is still there and retransmits to a device that is gone,
# and its link, silent from A's side, gets TEST LINK (smcr_testlink_time=5) that nobody answers.
# The capture runs ~15 s past the removal.
# lab-timeout: 300
PORT=12345
WRITES=100             # B's 100-byte writes, one per 200 ms: at most 20 s
setup_rdma
must sysctl -w net.smc.smcr_testlink_time=5
both rdma-ready
if [ "$ROLE" = b ]; then
    run smcxfer abort-server $PORT devkill $WRITES &
    srv=$!
    sleep 1; signal listening
    wait_for removed 120
    sleep 2
    smc_state "B 2 s after A removed its device"
    rdma_res "B 2 s after A removed its device"
    wait $srv || fail "server exit $?"
    log "server finished"
    wait_for waited 60
    smc_state "B end"
    rdma_res "B end"
else
    wait_for listening
    SMCXFER_HOOK="smcdiag sockets" run smcxfer abort-client "$PEER_IP" $PORT devkill &
    cli=$!
    sleep 3
    run rdma link show
    mark "FAILURE: rdma link del rxe0 on A (the client's only RoCE device, under the connection)"
    run rdma link del rxe0
    mark "done: rxe0 removed"
    signal removed
    run rdma link show
    wait $cli || fail "client exit $?"
    log "client finished"
    smc_state "A after the removal"
    log "capturing on for ~12 s more (B's retransmissions, TEST LINK)"
    sleep 12
    mark "end of the wait after the removal"
    signal waited
    smc_state "A end"
fi
finish
