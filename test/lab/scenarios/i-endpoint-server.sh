# (i) kernel SMC-R client -> smcscope's userspace SMC-R server: guest A's AF_SMC smcpingpong
# connects to our endpoint (i-endpoint-server.host.ts: uroce + eBPF TCP option on the host side
# of the bridge, 10.55.0.254). Conn 1 = first contact (CLC, QP bring-up, CONFIRM LINK, data,
# reply), conn 2 = subsequent contact over the same link group with 1 MiB of data, conn 3 =
# a second listener of ours whose UEID the guest does not have: CLC Decline, TCP fallback;
# conn 4 = a third listener that offers one link per group (v2.1 max links 1): a second link
# group, first contact without the kernel client's wait for an ADD LINK.
# Then our endpoint deletes its link groups (DELETE LINK) and the guest shows what it kept.
# lab-guests: a
# lab-timeout: 300
PORT=12345
FALLBACK_PORT=12346
ONELINK_PORT=12347
MSG='SMC-R interop: guest A kernel client to the smcscope endpoint 0123456789'
BULK=1048576

setup_rdma
wait_host ready 120
log "conn 1: first contact"
must smcpingpong client "$HOST_IP" $PORT -m "$MSG" -x "smcdiag sockets"
sleep 1
smc_state "A after conn 1 (first contact)"
log "conn 2: subsequent contact, $BULK bytes"
must smcpingpong client "$HOST_IP" $PORT -b $BULK -x "smcdiag sockets"
sleep 1
smc_state "A after conn 2 (subsequent contact)"
log "conn 3: our second listener has another UEID"
must smcpingpong client "$HOST_IP" $FALLBACK_PORT -m 'fallback: the endpoint has another UEID' -x "smcdiag sockets"
log "conn 4: first contact with a listener offering max links 1"
must smcpingpong client "$HOST_IP" $ONELINK_PORT -m 'max links 1: no ADD LINK wait' -x "smcdiag sockets"
sleep 1
smc_state "A after conn 4 (second link group)"
signal conns-done
wait_host closed 60
sleep 2
smc_state "A after the endpoint deleted its link group"
check_dmesg
finish
