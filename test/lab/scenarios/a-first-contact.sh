# (a) first contact: TCP SYN/SYN-ACK with option 254, CLC Proposal/Accept/Confirm (SMC-Rv2),
# LLC CONFIRM LINK (+ the server's ADD LINK attempt), RDMA WRITE + CDC of a 54-byte known
# payload and the server's reply, connection close. B = server, A = client.
PORT=12345
MSG='SMC-R lab first contact: hello from guest A 0123456789'
setup_rdma
both rdma-ready
if [ "$ROLE" = b ]; then
    run smcpingpong server $PORT -x "smcdiag sockets" &
    srv=$!
    sleep 1; signal listening
    wait $srv || fail "server exit $?"
    sleep 2
    smc_state "B after the connection (link group stays)"
    both done
else
    wait_for listening
    must smcpingpong client "$PEER_IP" $PORT -m "$MSG" -d 1000 -x "smcdiag sockets"
    sleep 2
    smc_state "A after the connection (link group stays)"
    both done
fi
finish
