# (a) first contact: TCP SYN/SYN-ACK with option 254, CLC Proposal/Accept/Confirm (SMC-Rv2),
# LLC CONFIRM LINK (+ the server's ADD LINK attempt), RDMA WRITE + CDC of a 54-byte known
# payload and the server's reply, connection close. B = server, A = client.
PORT=12345
MSG='SMC-R lab first contact: hello from guest A 0123456789'
setup_rdma
both rdma-ready
pingpong_pair "after the connection (link group stays)" 2 -m "$MSG" -d 1000
both done
finish
