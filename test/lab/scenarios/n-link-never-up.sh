# (n) the first link never comes up: A (client) drops every incoming RoCEv2 packet (UDP
# destination port 4791, a tc ingress filter on eth0; the guest has no nftables). TCP and the CLC
# handshake complete with SMC-R, but B's LLC CONFIRM LINK request never reaches A's rxe: rxe
# retransmits it, B declines with TIMEOUT_CL, and the client falls back to TCP; the 300000-byte
# payload and the reply then travel over TCP. The capture runs a few seconds past the decline.
# lab-timeout: 300
PORT=12345
BYTES=300000
setup_rdma
if [ "$ROLE" = a ]; then
    must tc qdisc add dev eth0 clsact
    if ! run tc filter add dev eth0 ingress protocol ip prio 1 flower ip_proto udp dst_port 4791 action drop; then
        must tc filter add dev eth0 ingress protocol ip prio 1 u32 match ip protocol 17 0xff match ip dport 4791 0xffff action drop
    fi
    run tc -s filter show dev eth0 ingress
    mark "FAILURE: A drops all incoming UDP dport 4791 (RoCEv2) on eth0 from now on"
fi
both rdma-ready
if [ "$ROLE" = b ]; then
    run smcpingpong server $PORT -x "smcdiag sockets" &
    srv=$!
    sleep 1; signal listening
    wait $srv || fail "server exit $?"
    log "server finished"
    wait_for waited 60
    smc_state "B end"
else
    wait_for listening
    must smcpingpong client "$PEER_IP" $PORT -b $BYTES -x "smcdiag sockets"
    log "client finished"
    smc_state "A after the connection"
    run tc -s filter show dev eth0 ingress
    sleep 4
    signal waited
fi
finish
