# (s) failover with the kernel, the ibverbs provider as SERVER with two devices: guest A runs our
# server (q-ibverbs-kernel.guest.ts failover-server: rxe0 on eth0, alternate rxe1 on eth1),
# guest B the kernel client with two devices (rxe0/eth0, rxe1/eth1, one PNET ID).
#   conn 1: first contact (short message); our server adds the second link (ADD LINK, rxe1).
#   conn 2: the kernel client sends BYTES paced (CHUNK writes, PAUSE_MS pauses); 1.5 s after the
#   connect B takes down its NIC under the link that carries it: the kernel client fails over
#   (DELETE LINK LOST_PATH to us, validation CDC) and the transfer ends on the surviving link;
#   we hash every byte and the kernel client compares our ACK; we re-add a link at once
#   (asymmetric on B's side). Then B's NIC comes back: the kernel client asks for a link
#   (REQUEST ADD LINK), we add a symmetric one and delete the asymmetric one.
#   conn 3: once our server shows two links over different devices on both sides (relinked),
#   the kernel client sends BYTES again over the re-added links; every byte hashed.
# lab-guests: a,b
# lab-nics: 2
# lab-tcg-cpu: max,-erms
# lab-timeout: 420
PORT=12345
BYTES=1572864
CHUNK=16384
PAUSE_MS=80            # 96 x 80 ms = 7.7 s: the failover falls mid-transfer

setup_two_devices
if [ "$ROLE" = a ]; then
    wait_host staged 120 || fail "nothing staged"
fi
both rdma-ready 180

if [ "$ROLE" = b ]; then
    wait_for srv-listening 180 || fail "the ibverbs server did not listen"
    must smcpingpong client "$PEER_IP" $PORT -m 'SMC-R interop: kernel client, two devices 0123456789' -x "smcdiag sockets"
    wait_for two-links 120 || fail "A saw no second link"
    links_state "B before the transfer (two links)"
    run smcpingpong client "$PEER_IP" $PORT -b $BYTES -c $CHUNK -p $PAUSE_MS -x "touch /tmp/accepted" &
    cli=$!
    wait_file /tmp/accepted 60 || fail "no transfer connection"
    sleep 1.5
    log "---- SMC sockets: B during the transfer, before the failure"
    smcdiag sockets | tee /tmp/sockets.txt
    log "---- end SMC sockets: B during the transfer, before the failure"
    dev=$(awk -v p=":$PORT " 'index($0, p) { f = 1; next } /^  state=/ { f = 0 }
        f && /lgrinfo/ { for (i = 1; i <= NF; i++) if ($i ~ /^ibdev=/) print substr($i, 7) }' /tmp/sockets.txt | head -1)
    ndev=$(rdma link show "$dev/1" | sed -n 's/.* netdev \([^ ]*\).*/\1/p')
    log "transfer connection (port $PORT) is on B's link over $dev ($ndev)"
    [ -n "$ndev" ] || { fail "cannot tell the transfer's device"; dev=rxe1; ndev=eth1; }
    mark "FAILURE: ip link set $ndev down on B ($dev, the device under the transfer's link)"
    run ip link set "$ndev" down
    mark "done: $ndev down"
    sleep 0.5
    links_state "B right after $ndev down (failover, transfer still running)"
    wait $cli || fail "client exit $?"
    log "transfer finished"
    wait_for transfer-done 120 || fail "A did not finish the transfer"
    links_state "B after the transfer, $ndev still down"
    mark "REPAIR: ip link set $ndev up on B ($dev)"
    run ip link set "$ndev" up
    mark "done: $ndev up"
    log "waiting 15 s for REQUEST ADD LINK / ADD LINK"
    sleep 15
    links_state "B 15 s after $ndev came back"
    signal nic-back
    wait_for relinked 90 || fail "A shows no symmetric pair of links after the device returned"
    must smcpingpong client "$PEER_IP" $PORT -b $BYTES -x "smcdiag sockets"
    links_state "B after the transfer over the re-added links"
    signal after-dump
    wait_for closed 90 || fail "the ibverbs server did not close"
    sleep 2
    smc_state "B after the ibverbs server deleted its link group"
else
    export LD_LIBRARY_PATH=/out/pkg/lib
    must /out/node /out/pkg/guest.mjs failover-server $PORT $BYTES after-dump closed relink
fi
check_dmesg
finish
