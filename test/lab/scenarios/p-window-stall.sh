# (p) receive window stall: A sends 1 MB (16 RMBs' worth: the RMB is 64 KiB) to B; B reads
# 300000 bytes, then stops reading for 5 s (the ring fills, A's writer blocks: CDC with
# write_blocked, then silence on the wire), then reads the rest. Both sides log bytes and
# FNV-1a; B logs when it stopped and resumed reading (CLOCK_BOOTTIME, as the log's uptime).
# lab-timeout: 300
PORT=12345
BYTES=1000000
setup_rdma
both rdma-ready
if [ "$ROLE" = b ]; then
    run smcpingpong server $PORT -s 300000:5000 &
    srv=$!
    sleep 1; signal listening
    wait_for sending 60
    sleep 3
    log "---- SMC sockets: B while not reading"
    smcdiag sockets
    log "---- end SMC sockets"
    wait $srv || fail "server exit $?"
    log "server finished"
    smc_state "B end"
else
    wait_for listening
    run smcpingpong client "$PEER_IP" $PORT -b $BYTES -x "smcdiag sockets" &
    cli=$!
    sleep 1; signal sending
    sleep 3
    log "---- SMC sockets: A while B is not reading"
    smcdiag sockets
    log "---- end SMC sockets"
    wait $cli || fail "client exit $?"
    log "client finished"
    smc_state "A end"
fi
finish
