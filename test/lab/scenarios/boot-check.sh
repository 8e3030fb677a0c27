# (boot-check) the lab itself: both guests set up Soft-RoCE + SMC and reach each other over the
# bridge (ping); no SMC traffic. The quickest "does the lab work here" run.
setup_rdma
both rdma-ready
must ping -c 3 -W 5 "$PEER_IP"
finish
