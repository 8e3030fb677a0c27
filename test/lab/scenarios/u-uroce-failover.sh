# (u) failover with the kernel, our endpoint over uroce on the host side with two local
# addresses (u-uroce-failover.host.ts: 10.55.0.252 + alternate .253 in phase 1, .250 + .251 in
# phase 2, on the bridge; TCP from 10.55.0.254), guest A the kernel with two devices (rxe0/eth0, rxe1/eth1, one PNET ID).
# Both roles, one after the other; in each the host part deletes our address under conn 2's
# link mid-transfer (uroce: PORT_ERR, our DELETE LINK LOST_PATH and validation CDC) and we send
# BYTES paced (CHUNK every PAUSE_MS) across it: the kernel hashes every byte and answers.
#   phase 1, our client → kernel server: conn 1 (PORT) first contact, the kernel server adds
#   the second link (ADD LINK); conn 2 (REVPORT): we send, the kernel server ACKs the hash.
#   phase 2, kernel client → our server (PORT2): conn 1 first contact, we add the second link;
#   conn 2: we send (smcpingpong client -r hashes and ACKs).
# lab-guests: a
# lab-nics: 2
# lab-tcg-cpu: max,-erms
# lab-timeout: 420
PORT=12345
REVPORT=12346
PORT2=12347
WARMPORT=12349         # the host part's warm-up connection (both kernel devices set up)

# Power-off guard: when our client's address goes, the kernel SERVER may have CDC sends in
# flight on that path; rxe retries them without end (retry count 7 means "forever" in rxe), its
# DELETE LINK processing waits for them (smc_wr_tx_wait_no_pending_sends), the link group stays
# (smcdiag shows it at the end) and smc's reboot notifier then blocks the power-off until the
# harness kills qemu minutes later. Once lab-init has written our exit status, reset at once
# (sysrq b: no reboot notifiers) if the power-off has not happened within 3 s.
# (Waits without forking, as wait_file does.)
( cd / && mkfifo /tmp/.guard && exec 9<>/tmp/.guard && while [ ! -e "/out/guest-$ROLE.rc" ]; do read -r -t 0.5 -u 9 _; done
  read -r -t 3 -u 9 _; echo b >/proc/sysrq-trigger ) >/dev/null 2>&1 &

# phase_end N WHO: the transfer is over; the kernel's links, then our endpoint (our WHO) closes
phase_end() {
    log "transfer finished"
    wait_host transfer-done 180 || fail "our $2 did not finish the transfer"
    links_state "A after the transfer, one host address gone"
    signal "after-dump-$1"
    wait_host "closed-$1" 90 || fail "our $2 did not close"
    sleep 2
    smc_state "A after our $2 deleted its link group"
}

setup_two_devices
# 256 KiB receive buffers (RMBs) in the kernel, so that our paced sender never fills the window:
# Linux can lose a consumer-cursor update on the failing link (it sends it on the connection's
# old link just before smc_switch_conns moves the connection, and its failover validation carries
# no cursors), after which a sender that is write-blocked waits for good (seen in phase 1 with
# 64 KiB: our CDC [wb] at 6:0, the kernel's update "cons 6:0" retried by rxe toward the gone
# address, nothing after it). With room in the window the next update carries the cursor.
must sysctl -w net.smc.rmem=262144

log "phase 1: our client (uroce, two addresses) -> kernel server"
run smcpingpong server $WARMPORT -n 1 &
run smcpingpong server $PORT -n 1 -x "smcdiag sockets" &
srv=$!
run smcpingpong server $REVPORT -n 1 &
rev=$!
sleep 1
signal listening
wait $srv || fail "server exit $?"
wait_host two-links 120 || fail "our client saw no second link"
links_state "A before the transfer (two links)"
wait $rev || fail "transfer server exit $?"
phase_end 1 client

log "phase 2: kernel client -> our server (uroce, two addresses)"
wait_host srv-listening 120 || fail "our server did not listen"
must smcpingpong client "$HOST_IP" $PORT2 -m 'SMC-R interop: kernel client to uroce, two addresses 0123456789' -x "smcdiag sockets"
wait_host two-links 120 || fail "our server saw no second link"
links_state "A before the transfer (two links)"
must smcpingpong client "$HOST_IP" $PORT2 -r -x "smcdiag sockets"
phase_end 2 server
check_dmesg
finish
