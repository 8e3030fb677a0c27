# (b) subsequent contact: connection 1 creates the link group (first contact), connection 2
# reuses it (CLC Accept/Confirm without the first-contact flag, no CONFIRM LINK), then
# connections 3+4 are open at the same time so a second RMB is needed (LLC CONFIRM RKEY).
PORT=12345
setup_rdma
both rdma-ready
if [ "$ROLE" = b ]; then
    run smcpingpong server $PORT -n 4 &
    srv=$!
    sleep 1; signal listening
    wait $srv || fail "server exit $?"
    sleep 1
    smc_state "B after 4 connections over one link group"
else
    wait_for listening
    must smcpingpong client "$PEER_IP" $PORT -m 'conn 1: first contact, creates the link group'
    sleep 2
    smc_state "A after conn 1"
    must smcpingpong client "$PEER_IP" $PORT -m 'conn 2: second contact, reuses the link group' -x "smcdiag sockets"
    sleep 2
    log "conns 3 and 4 in parallel (need a second RMB)"
    smcpingpong client "$PEER_IP" $PORT -m 'conn 3: parallel' -d 3000 &
    c3=$!
    sleep 0.3
    smcpingpong client "$PEER_IP" $PORT -m 'conn 4: parallel' -d 1500 -x "smcdiag sockets" &
    c4=$!
    wait $c3 || fail "conn 3 exit $?"
    wait $c4 || fail "conn 4 exit $?"
    sleep 1
    smc_state "A after 4 connections over one link group"
fi
finish
