# (w) link-group limits against the kernel: guest A lowers net.smc.smcr_max_conns_per_lgr to 16
# (the smallest Linux allows); our endpoint over uroce on the host side (w-uroce-limits.host.ts,
# one address, max links 1 offered). N=17 connections open at once in each role, so the 17th
# finds its group full and opens a second link group (first contact):
#   phase 1, kernel clients -> our server (PORT): 17 smcpingpong clients connect and wait
#   (-w) until the host part has all 17; then each sends BULK bytes, our server hashes and ACKs.
#   phase 2, our client -> kernel server (KPORT, forked per connection): 17 connects at once,
#   then each sends BULK bytes and checks the kernel's "ACK <bytes> fnv1a=<hash>".
# The kernel's view (smc_diag, link groups with their connection counts) is taken while all 17
# are open; the host part records its own (stateJson) for smcdump --state.
# lab-guests: a
# lab-timeout: 360
PORT=12345
KPORT=12346
N=17
BULK=65536

setup_rdma
must sysctl -w net.smc.smcr_max_conns_per_lgr=16

log "phase 1: $N kernel clients -> our server, all open at once"
wait_host listening 120 || fail "our server did not listen"
pids=""
for i in $(seq 1 $N); do
    smcpingpong client "$HOST_IP" $PORT -b $BULK -w /tmp/go1 >/tmp/c1.$i.log 2>&1 &
    pids="$pids $!"
done
wait_host conns-up-1 120 || fail "our server did not get $N connections"
smc_state "A with $N connections to our server"
: >/tmp/go1
for p in $pids; do wait "$p" || fail "a client exited $?"; done
for i in $(seq 1 $N); do sed "s/^/[c1.$i] /" /tmp/c1.$i.log; done
signal clients-done

log "phase 2: our client -> kernel server, $N connections at once"
run smcpingpong server $KPORT -n $N -f &
srv=$!
sleep 1
signal kserver-listening
wait_host conns-up-2 120 || fail "our client did not open $N connections"
smc_state "A with $N connections from our client"
signal kstate-done
wait $srv || fail "server exit $?"
wait_host closed 90 || fail "our endpoint did not close"
sleep 2
smc_state "A after our endpoint deleted its link groups"
check_dmesg
finish
