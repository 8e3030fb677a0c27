# (r) failover with the kernel, the ibverbs provider as CLIENT with two devices: guest A runs our
# endpoint (q-ibverbs-kernel.guest.ts failover-client: rxe0 on eth0, alternate rxe1 on eth1),
# guest B the kernel server with two devices (rxe0/eth0, rxe1/eth1, one PNET ID).
#   conn 1 (PORT): first contact; the kernel server adds the second link (ADD LINK, rxe1).
#   conn 2 (REVPORT): the kernel sends BYTES paced (CHUNK writes, PAUSE_MS pauses); 1.5 s after
#   the accept B takes down the NIC under the link that carries it: the kernel fails over
#   (DELETE LINK, failover validation CDC) and the transfer ends on the surviving link; our
#   client hashes all of it and ACKs. Then B's NIC comes back and the kernel re-adds a
#   symmetric link (a third one for a moment: we accept it) and deletes the asymmetric one.
#   conn 3 (REVPORT2): once our client shows two links over different devices on both sides
#   (relinked), the kernel sends BYTES again over the re-added links; every byte hashed.
# lab-guests: a,b
# lab-nics: 2
# lab-tcg-cpu: max,-erms
# lab-timeout: 420
PORT=12345
REVPORT=12346
REVPORT2=12347
BYTES=1572864
CHUNK=16384
PAUSE_MS=80            # 96 x 80 ms = 7.7 s: the failover falls mid-transfer

setup_two_devices
if [ "$ROLE" = a ]; then
    wait_host staged 120 || fail "nothing staged"
fi
both rdma-ready 180

if [ "$ROLE" = b ]; then
    run smcpingpong server $PORT -n 1 -x "smcdiag sockets" &
    srv=$!
    run smcpingpong server $REVPORT -n 1 -S $BYTES -c $CHUNK -p $PAUSE_MS -x "touch /tmp/accepted" &
    rev=$!
    run smcpingpong server $REVPORT2 -n 1 -S $BYTES -x "smcdiag sockets" &
    rev2=$!
    sleep 1
    signal listening
    wait $srv || fail "server exit $?"
    wait_for two-links 120 || fail "A saw no second link"
    links_state "B before the transfer (two links)"
    wait_file /tmp/accepted 60 || fail "no transfer connection"
    sleep 1.5
    log "---- SMC sockets: B during the transfer, before the failure"
    smcdiag sockets | tee /tmp/sockets.txt
    log "---- end SMC sockets: B during the transfer, before the failure"
    dev=$(awk -v p=":$REVPORT " 'index($0, p) { f = 1; next } /^  state=/ { f = 0 }
        f && /lgrinfo/ { for (i = 1; i <= NF; i++) if ($i ~ /^ibdev=/) print substr($i, 7) }' /tmp/sockets.txt | head -1)
    ndev=$(rdma link show "$dev/1" | sed -n 's/.* netdev \([^ ]*\).*/\1/p')
    log "transfer connection (port $REVPORT) is on B's link over $dev ($ndev)"
    [ -n "$ndev" ] || { fail "cannot tell the transfer's device"; dev=rxe1; ndev=eth1; }
    mark "FAILURE: ip link set $ndev down on B ($dev, the device under the transfer's link)"
    run ip link set "$ndev" down
    mark "done: $ndev down"
    sleep 0.5
    links_state "B right after $ndev down (failover, transfer still running)"
    wait $rev || fail "reverse server exit $?"
    log "transfer finished"
    wait_for transfer-done 120 || fail "A did not finish the transfer"
    links_state "B after the transfer, $ndev still down"
    mark "REPAIR: ip link set $ndev up on B ($dev)"
    run ip link set "$ndev" up
    mark "done: $ndev up"
    log "waiting 15 s for the kernel to re-add a link"
    sleep 15
    links_state "B 15 s after $ndev came back"
    signal nic-back
    wait_for relinked-done 150 || fail "A did not finish the transfer after the device returned"
    wait $rev2 || fail "third server exit $?"
    links_state "B after the transfer over the re-added links"
    signal after-dump
    wait_for closed 90 || fail "the ibverbs client did not close"
    sleep 2
    smc_state "B after the ibverbs client deleted its link group"
else
    export LD_LIBRARY_PATH=/out/pkg/lib
    wait_for listening 120
    must /out/node /out/pkg/guest.mjs failover-client "$PEER_IP" $PORT $REVPORT $BYTES after-dump closed $REVPORT2
fi
check_dmesg
finish
