# (l2) link failover, client side: as l-failover (two RoCE devices per guest, two links, an idle
# connection and a paced 1.5 MiB transfer both ways), but the CLIENT (A) takes down the NIC under
# the link that carries the transfer's connection. The client learns of the loss first (port
# error) and asks the server to delete the link; the transfer completes on the surviving link;
# when A's NIC comes back, the client asks for a link again (REQUEST ADD LINK) and the link group
# becomes symmetric again.
# lab-nics: 2
# lab-tcg-cpu: max,-erms
# lab-timeout: 300
IDLE_PORT=12300
PORT=12301
BYTES=1572864          # each way
CHUNK=16384
PAUSE_MS=80            # >= 96 x 80 ms = 7.7 s per direction: the failover falls mid-transfer

setup_two_devices
run smcdiag devs
both rdma-ready

if [ "$ROLE" = b ]; then
    run smcpingpong server $IDLE_PORT &
    idle=$!
    run smcxfer bidir-server $PORT $BYTES $CHUNK $PAUSE_MS &
    xfer=$!
    sleep 1; signal listening
    wait_for two-links 120 || fail "A saw no second link"
    links_state "B before the transfer (two links)"
    signal go
    wait_for failed 60
    sleep 0.5
    links_state "B right after A's NIC went down (failover, transfer still running)"
    wait $xfer || fail "bidir server exit $?"
    log "transfer finished"
    wait_for repaired 120
    sleep 10
    links_state "B 10 s after A's NIC came back"
    signal b-checked
    wait $idle || fail "idle server exit $?"
    sleep 1
    smc_state "B end"
else
    wait_for listening
    run smcpingpong client "$PEER_IP" $IDLE_PORT -m 'idle connection across the failover' \
        -w /tmp/release-idle -x "smcdiag sockets" &
    idle=$!
    # the server adds the second link after the first contact's CONFIRM LINK (no polling in
    # the first seconds: a busy guest makes the other one miss SMC's 2 s LLC timeouts)
    sleep 4
    n=0
    until [ "$(smcdiag links | grep -c 'state = 3 (ACTIVE)')" -ge 2 ] || [ $n -ge 20 ]; do sleep 1; n=$((n + 1)); done
    links_state "A before the transfer (after ${n} s)"
    [ $n -lt 20 ] && signal two-links || fail "no second link"
    wait_for go 60
    export SMCXFER_HOOK='touch /tmp/connected'
    run smcxfer bidir-client "$PEER_IP" $PORT $BYTES $CHUNK $PAUSE_MS &
    xfer=$!
    unset SMCXFER_HOOK
    wait_file /tmp/connected 60 || fail "no transfer connection"
    sleep 1.5
    # the device and NIC under the link that carries the transfer connection (port $PORT): the
    # client's smc_diag names the link the server chose (the CLC Accept's QP)
    log "---- SMC sockets: A during the transfer, before the failure"
    smcdiag sockets | tee /tmp/sockets.txt
    log "---- end SMC sockets: A during the transfer, before the failure"
    dev=$(awk -v p=":$PORT " 'index($0, p) { f = 1; next } /^  state=/ { f = 0 }
        f && /lgrinfo/ { for (i = 1; i <= NF; i++) if ($i ~ /^ibdev=/) print substr($i, 7) }' /tmp/sockets.txt | head -1)
    ndev=$(rdma link show "$dev/1" | sed -n 's/.* netdev \([^ ]*\).*/\1/p')
    log "transfer connection (port $PORT) is on A's link over $dev ($ndev)"
    [ -n "$ndev" ] || { fail "cannot tell the transfer's device"; dev=rxe1; ndev=eth1; }
    mark "FAILURE: ip link set $ndev down on A ($dev, the device under the transfer's link)"
    run ip link set "$ndev" down
    mark "done: $ndev down"
    signal failed
    sleep 0.5
    links_state "A right after $ndev down (failover, transfer still running)"
    wait $xfer || fail "bidir client exit $?"
    log "transfer finished"
    sleep 2
    links_state "A after the transfer, $ndev still down"
    mark "REPAIR: ip link set $ndev up on A ($dev)"
    run ip link set "$ndev" up
    mark "done: $ndev up"
    signal repaired
    log "waiting 10 s for the link group to become symmetric again"
    sleep 10
    links_state "A 10 s after $ndev came back"
    wait_for b-checked 60
    touch /tmp/release-idle
    wait $idle || fail "idle client exit $?"
    sleep 1
    smc_state "A end"
fi
finish
