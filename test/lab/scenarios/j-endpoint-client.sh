# (j) smcscope's userspace SMC-R client -> kernel SMC-R server: guest A runs smcpingpong's
# AF_SMC server; our endpoint (j-endpoint-client.host.ts: uroce + eBPF TCP option on the host
# side of the bridge, 10.55.0.254) connects twice over one link group: conn 1 = first contact
# with a short message, conn 2 = subsequent contact with 1 MiB; each gets smcpingpong's
# "ACK <bytes> fnv1a=<hash>" reply, which the host part checks. Then our endpoint deletes its
# link group (DELETE LINK) and the guest shows what it kept.
# lab-guests: a
# lab-timeout: 300
PORT=12345

setup_rdma
run smcpingpong server $PORT -n 2 -x "smcdiag sockets" &
srv=$!
sleep 1
signal listening
wait $srv || fail "server exit $?"
sleep 1
smc_state "A after 2 connections from the smcscope endpoint"
signal conns-done
wait_host closed 60
sleep 2
smc_state "A after the endpoint deleted its link group"
check_dmesg
finish
