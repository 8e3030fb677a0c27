# (d) bulk transfer: 2 MiB + 123 bytes from A to B over one SMC-R connection (64 KiB RMB: the
# producer/consumer cursors wrap ~32 times; CDC carries the cursors, RDMA WRITEs the data).
PORT=12345
BYTES=$((2 * 1024 * 1024 + 123))
setup_rdma
both rdma-ready
if [ "$ROLE" = b ]; then
    run smcpingpong server $PORT -x "smcdiag sockets" &
    srv=$!
    sleep 1; signal listening
    wait $srv || fail "server exit $?"
    sleep 1
    smc_state "B after bulk"
else
    wait_for listening
    must smcpingpong client "$PEER_IP" $PORT -b $BYTES -x "smcdiag sockets"
    sleep 1
    smc_state "A after bulk"
fi
finish
