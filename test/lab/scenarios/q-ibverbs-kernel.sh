# (q) smcscope's endpoint on the native libibverbs provider (--device ibverbs:rxe0) against
# Linux kernel SMC-R, both roles, with no host part on the wire: guest A runs our endpoint
# (node + the addon + the eBPF TCP option helper, staged into /out by q-ibverbs-kernel.host.ts;
# q-ibverbs-kernel.guest.ts), guest B runs smcpingpong on AF_SMC.
#   phase 1: our client → B's kernel server: conn 1 first contact (short message), conn 2
#            subsequent contact (1 MiB), each checked by the server's "ACK <bytes> fnv1a=<hash>";
#            conn 3 (REVPORT, smcpingpong server -S): the kernel sends 1 MiB, we hash and ACK.
#            B dumps its state, our endpoint deletes its link group, B dumps it again.
#   phase 2: B's kernel client → our server: the same three connections the other way (the
#            kernel client checks our ACK on 1 and 2; on 3, -r, it hashes our 1 MiB and ACKs).
# SMC-Rv2.1 with UEID SMC-LAB-UEID only: rxe has RoCE v2 GIDs only, SMC-Rv1 cannot run on it.
# lab-guests: a,b
# lab-timeout: 480
PORT=12345
REVPORT=12346
MSG='SMC-R interop: the kernel client to the ibverbs endpoint 0123456789'
BULK=1048576

setup_rdma
if [ "$ROLE" = a ]; then
    wait_host staged 120 || fail "nothing staged"
    run ls -la /out/pkg /out/pkg/lib
fi
both rdma-ready 180

if [ "$ROLE" = b ]; then
    log "phase 1: ibverbs client -> kernel server"
    run smcpingpong server $PORT -n 2 -x "smcdiag sockets" &
    srv=$!
    run smcpingpong server $REVPORT -n 1 -S $BULK -x "smcdiag sockets" &
    rev=$!
    sleep 1
    signal listening
    wait $srv || fail "server exit $?"
    wait $rev || fail "reverse server exit $?"
    sleep 1
    smc_state "B after 3 connections from the ibverbs client"
    signal p1-done
    wait_for p1-closed 90 || fail "the ibverbs client did not close"
    sleep 2
    smc_state "B after the ibverbs client deleted its link group"
    log "phase 2: kernel client -> ibverbs server"
    wait_for srv-listening 180 || fail "the ibverbs server did not listen"
    log "conn 1: first contact"
    must smcpingpong client "$PEER_IP" $PORT -m "$MSG" -x "smcdiag sockets"
    sleep 1
    log "conn 2: subsequent contact, $BULK bytes"
    must smcpingpong client "$PEER_IP" $PORT -b $BULK -x "smcdiag sockets"
    sleep 1
    log "conn 3: subsequent contact, the ibverbs server sends $BULK bytes"
    must smcpingpong client "$PEER_IP" $REVPORT -r -x "smcdiag sockets"
    sleep 1
    smc_state "B after 3 connections to the ibverbs server"
    signal p2-done
    wait_for p2-closed 90 || fail "the ibverbs server did not close"
    sleep 2
    smc_state "B after the ibverbs server deleted its link group"
else
    export LD_LIBRARY_PATH=/out/pkg/lib
    wait_for listening 120
    must /out/node /out/pkg/guest.mjs client "$PEER_IP" $PORT $REVPORT p1-done p1-closed
    must /out/node /out/pkg/guest.mjs server $PORT $REVPORT p2-done p2-closed
fi
check_dmesg
finish
