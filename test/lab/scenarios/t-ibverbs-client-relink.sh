# (t) OUR device goes and comes back, the ibverbs provider as CLIENT with two devices: guest A
# runs our endpoint (q-ibverbs-kernel.guest.ts failover-client ... self: rxe0 on eth0, alternate
# rxe1 on eth1), guest B the kernel server with two devices (rxe0/eth0, rxe1/eth1).
#   conn 1 (PORT): first contact; the kernel server adds the second link.
#   conn 2 (REVPORT): we send BYTES paced (CHUNK every PAUSE_MS; the kernel server hashes and
#   ACKs: with the kernel sending instead, rxe retransmits its writes toward our gone QP without
#   end and the kernel's DELETE LINK flow waits for them); when it is up guest A takes down ITS OWN NIC
#   under that connection's link: rxe reports PORT_ERR, our link fails over (DELETE LINK
#   LOST_PATH to the kernel, validation CDC), the kernel server re-adds an asymmetric link (over
#   our remaining device); the transfer ends on the surviving link, every byte hashed.
#   Then guest A's NIC comes back: rxe reports PORT_ACTIVE, our client sends REQUEST ADD LINK, the
#   kernel server adds a symmetric link and deletes the asymmetric one.
#   conn 3 (REVPORT2): once our client shows two links over different devices on both sides
#   (relinked), the kernel sends BYTES again; every byte hashed.
# lab-guests: a,b
# lab-nics: 2
# lab-tcg-cpu: max,-erms
# lab-timeout: 480
PORT=12345
REVPORT=12346
REVPORT2=12347
BYTES=1572864
CHUNK=16384
PAUSE_MS=80            # 96 x 80 ms = 7.7 s: the failure falls mid-transfer

setup_two_devices
if [ "$ROLE" = a ]; then
    wait_host staged 120 || fail "nothing staged"
fi
both rdma-ready 180

if [ "$ROLE" = b ]; then
    run smcpingpong server $PORT -n 1 -x "smcdiag sockets" &
    srv=$!
    run smcpingpong server $REVPORT -n 1 &
    rev=$!
    run smcpingpong server $REVPORT2 -n 1 -S $BYTES -x "smcdiag sockets" &
    rev2=$!
    sleep 1
    signal listening
    wait $srv || fail "server exit $?"
    wait_for two-links 120 || fail "A saw no second link"
    links_state "B before the transfer (two links)"
    wait $rev || fail "reverse server exit $?"
    log "transfer finished"
    wait_for transfer-done 120 || fail "A did not finish the transfer"
    links_state "B after the transfer, A's NIC down"
    wait_for nic-back 120 || fail "A's NIC did not come back"
    wait_for relinked-done 150 || fail "A did not finish the transfer after its device returned"
    wait $rev2 || fail "third server exit $?"
    links_state "B after the transfer over the re-added links"
    signal after-dump
    wait_for closed 90 || fail "the ibverbs client did not close"
    sleep 2
    smc_state "B after the ibverbs client deleted its link group"
else
    export LD_LIBRARY_PATH=/out/pkg/lib
    wait_for listening 120
    run /out/node /out/pkg/guest.mjs failover-client "$PEER_IP" $PORT $REVPORT $BYTES after-dump closed $REVPORT2 self &
    ep=$!
    wait_file /out/sync/a.conn2-up 120 || fail "conn 2 did not come up"
    ndev=$(cat /out/conn2-netdev 2>/dev/null)
    [ -n "$ndev" ] || { fail "cannot tell conn 2's device"; ndev=eth0; }
    sleep 1.5
    mark "FAILURE: ip link set $ndev down on A (our device under the transfer's link)"
    run ip link set "$ndev" down
    mark "done: $ndev down"
    rdma link show
    wait_file /out/sync/a.transfer-done 180 || fail "the transfer did not finish"
    sleep 2
    mark "REPAIR: ip link set $ndev up on A"
    run ip link set "$ndev" up
    mark "done: $ndev up"
    sleep 1
    rdma link show
    ibv_devinfo -d rxe0 2>/dev/null | grep -E 'state|GID' || true
    signal nic-back
    wait $ep || fail "the ibverbs client exit $?"
fi
check_dmesg
finish
