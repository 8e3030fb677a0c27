# (g) the host-side attachment point at the RoCE level: guest A's rdma-core ibv_ud_pingpong
# (UD SENDs over rxe) against g-host-roce-ud.host.ts, a Node process on the host side of the
# bridge (10.55.0.254) that speaks RoCEv2 through a plain UDP socket on port 4791 and builds
# its packets and ICRCs with the project's codecs. ibv_ud_pingpong completes only if rxe
# accepted every packet the host built; the capture shows every ICRC, both directions.
# lab-guests: a
counters() { (cd /sys/class/infiniband/rxe0/ports/1/hw_counters && grep -H . sent_pkts rcvd_pkts rcvd_icrc_err* rcvd_seq_err 2>/dev/null | tr '\n' ' '); echo; }
setup_rdma
wait_host ready 120
log "rxe0 counters before: $(counters)"
must timeout 90 ibv_ud_pingpong -d rxe0 -g 1 -s 512 -n 10 "$HOST_IP"
log "rxe0 counters after: $(counters)"
finish
