# (e) TEST LINK and link group teardown: net.smc.smcr_testlink_time=5 so the idle link gets
# LLC TEST LINK keepalives quickly; then A unloads smc (rmmod smc_diag smc), which ends the
# link group: LLC DELETE LINK.
# lab-timeout: 300
PORT=12345
setup_rdma
must sysctl -w net.smc.smcr_testlink_time=5
both rdma-ready
if [ "$ROLE" = b ]; then
    run smcpingpong server $PORT &
    srv=$!
    sleep 1; signal listening
    wait $srv || fail "server exit $?"
    wait_for unloaded 120
    sleep 3
    smc_state "B after A unloaded smc"
else
    wait_for listening
    must smcpingpong client "$PEER_IP" $PORT -m 'idle link test'
    log "link group idle for 13 s (TEST LINK every 5 s)"
    sleep 13
    smc_state "A before rmmod"
    must rmmod smc_diag
    must rmmod smc
    signal unloaded
    sleep 3
fi
finish
