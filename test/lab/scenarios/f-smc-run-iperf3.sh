# (f) an unmodified TCP application under smc_run (the lab's LD_PRELOAD shim, like smc-tools'
# smc_run): iperf3's control and data connections both go SMC-R. 1 MiB, to keep it small.
setup_rdma
both rdma-ready
if [ "$ROLE" = b ]; then
    SMC_PRELOAD_DEBUG=1 smc_run iperf3 -s -1 -p 5201 &
    srv=$!
    sleep 2; signal listening
    wait_for client-running
    sleep 2
    smcdiag sockets
    wait $srv || fail "iperf3 server exit $?"
else
    wait_for listening
    ( sleep 4; signal client-running ) &
    must env SMC_PRELOAD_DEBUG=1 smc_run iperf3 -c "$PEER_IP" -p 5201 -n 1M -l 64K
    sleep 1
    smc_state "A after iperf3"
fi
finish
