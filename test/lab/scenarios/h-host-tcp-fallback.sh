# (h) the host-side attachment point: guest A's AF_SMC client connects to a process on the
# host side of the bridge (10.55.0.254, h-host-tcp-fallback.host.ts, plain Node TCP). The
# host kernel does not speak SMC: its SYN-ACK has no option 254, so A falls back to TCP
# (PEERNOSMC) and the payload and the host's reply travel in TCP.
# lab-guests: a
PORT=12345
MSG='SMC-R lab: guest A to the host side of the bridge'
setup_rdma
wait_host ready 120
must smcpingpong client "$HOST_IP" $PORT -m "$MSG" -x "smcdiag sockets"
smc_state "A after the connection to the host side"
finish
