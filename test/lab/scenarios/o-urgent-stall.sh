# (o) urgent data (send(MSG_OOB)) over SMC-R, twice. Connection 1 (port 12345, smcxfer "oob"):
# the client's stream has two urgent bytes ('!' and '#'), the server reads them with
# recv(MSG_OOB) and the rest inline, then replies with a stream with one urgent byte ('*'):
# all data arrives. Connection 2 (port 12346, "oob-stall"): the server has consumed every byte
# in front of the urgent '!' when it arrives, and reads it with recv(MSG_OOB); Linux 6.12 then
# never moves its consumer cursor over the urgent byte, so the client's next send() blocks: it
# gives up after SO_SNDTIMEO (5 s) and closes; the server gives up after 8 s without data.
# lab-timeout: 300
setup_rdma
both rdma-ready
if [ "$ROLE" = b ]; then
    run smcxfer urg-server 12345 oob &
    srv=$!
    sleep 1; signal listening1
    wait $srv || fail "server 1 exit $?"
    log "connection 1 done"
    run smcxfer urg-server 12346 oob-stall &
    srv=$!
    sleep 1; signal listening2
    wait_for stalled 60
    log "---- SMC sockets: B while the client's send is blocked"
    smcdiag sockets
    log "---- end SMC sockets"
    wait $srv || fail "server 2 exit $?"
    log "connection 2 done"
    smc_state "B end"
else
    wait_for listening1
    must smcxfer urg-client "$PEER_IP" 12345 oob
    log "connection 1 done"
    wait_for listening2
    run smcxfer urg-client "$PEER_IP" 12346 oob-stall &
    cli=$!
    sleep 3.5
    mark "client's send #3 should be blocked by now (stalled urgent byte)"
    signal stalled
    log "---- SMC sockets: A while its send is blocked"
    smcdiag sockets
    log "---- end SMC sockets"
    wait $cli || fail "client 2 exit $?"
    log "connection 2 done"
    smc_state "A end"
fi
finish
