# Helpers sourced by every scenario script inside a guest (bash), from /lab/guest/common.sh.
# Environment from lab-init: LAB_NAME (a|b), LAB_IP, LAB_PEER, LAB_SCENARIO, LAB_GUESTS (a,b or a).
# /out is the run folder shared by the guests and the host (9p, cache=none): results, and
# barriers as files in /out/sync (ROLE.NAME; the host-side part of a scenario writes host.NAME).
ROLE=$LAB_NAME
PEER_NAME=$([ "$ROLE" = a ] && echo b || echo a)
MY_IP=${LAB_IP%/*}
PEER_IP=$LAB_PEER
HOST_IP=10.55.0.254          # the host-side attachment point on the lab bridge
FAILED=0
mkdir -p /out/sync

ts() { cut -d' ' -f1 /proc/uptime; }
log() { echo "[$(ts) guest$ROLE] $*"; }
# run CMD...: log the command, run it, log a non-zero exit (the logs show exactly what ran)
run() { echo "[$(ts) guest$ROLE] \$ $*"; "$@"; local rc=$?; [ $rc = 0 ] || echo "[$(ts) guest$ROLE] (exit $rc)"; return $rc; }
# fail WHY: the scenario goes on (so the logs are complete) but ends with exit status 1
fail() { log "FAIL: $*"; FAILED=1; }
# must CMD...: run, and fail the scenario if CMD fails
must() { run "$@" || fail "$* (exit $?)"; }

# signal NAME: tell the others this guest reached point NAME
signal() { : >"/out/sync/$ROLE.$1"; log "signal $1"; }
# wait_file FILE [TIMEOUT]: wait for a sync file, polling twice a second WITHOUT forking
# (bash read -t on a private FIFO): under TCG a loop of fork+exec+9p stat in one guest costs
# enough host CPU to slow the other guest past SMC's 2 s LLC timeouts.
wait_file() {
    local n=0 max=$(( ${2:-90} * 2 )) fifo=/tmp/.wait.$$ fd
    [ -p "$fifo" ] || mkfifo "$fifo"
    exec {fd}<>"$fifo"
    while [ ! -e "$1" ]; do
        read -r -t 0.5 -u "$fd" _ 2>/dev/null
        n=$((n + 1))
        [ $n -lt $max ] || { exec {fd}>&-; fail "timeout waiting for $1"; return 1; }
    done
    exec {fd}>&-
}
# wait_for NAME [TIMEOUT]: wait until the peer guest signalled NAME
wait_for() { wait_file "/out/sync/$PEER_NAME.$1" "${2:-90}" && log "peer reached $1"; }
# wait_host NAME [TIMEOUT]: wait until the host-side part signalled NAME
wait_host() { wait_file "/out/sync/host.$1" "${2:-90}" && log "host reached $1"; }
# both NAME: barrier, both guests wait for each other
both() { signal "$1"; wait_for "$1" "${2:-90}"; }

# setup_rdma: Soft-RoCE on eth0 + SMC modules; prints what a reader needs to trust the setup
# (kernel, modules, RDMA link, GIDs, SMC devices).
#   SMC_UEID=  (empty) skips the UEID,  SMC_PNETID= (empty) skips the PNET ID
setup_rdma() {
    log "kernel: $(uname -r) ($(uname -v))"
    must modprobe rdma_rxe
    must modprobe ib_uverbs
    must modprobe rdma_ucm
    must modprobe smc
    must modprobe smc_diag
    must rdma link add rxe0 type rxe netdev eth0
    run rdma link show
    run ip -br addr show eth0
    run ibv_devices
    run ibv_devinfo -v -d rxe0 | grep -E 'hca_id|transport|fw_ver|node_guid|state|active_mtu|GID|max_qp:|phys_port_cnt|link_layer'
    # non-empty GID table entries with type (one grep: 1024 cat's take ~100 s under TCG)
    (cd /sys/class/infiniband/rxe0/ports/1 && grep -v '^0000:0000:0000:0000:0000:0000:0000:0000$' gids/* |
        while IFS=: read -r f v; do i=${f#gids/}; echo "  gid[$i] $v $(cat gid_attrs/types/$i) $(cat gid_attrs/ndevs/$i)"; done)
    run lsmod | grep -E '^(smc|smc_diag|rdma_rxe|ib_core|ib_uverbs) '
    run sysctl net.smc 2>/dev/null
    # rdma_rxe has no ib_device_ops.get_netdev, so SMC's "no PNET ID" device search never
    # finds rxe0 for eth0 (NOSMCDEV): put eth0 and rxe0 port 1 under one PNET ID.
    if [ -n "${SMC_PNETID-LABNET}" ]; then
        must smcdiag pnet add "${SMC_PNETID-LABNET}" eth0 rxe0 1
    fi
    # SMC-Rv2 is only proposed/accepted with a user EID on both sides, and rxe (RoCE v2
    # GIDs only) cannot do SMC-Rv1.
    if [ -n "${SMC_UEID-SMC-LAB-UEID}" ]; then
        must smcdiag ueid add "${SMC_UEID-SMC-LAB-UEID}"
    fi
    run smcdiag info
    run smcdiag devs
}

# Second NIC (scenario header "# lab-nics: 2"): the harness adds eth1 on the same bridge and
# passes lab.ip2=/lab.peer2= on the kernel command line (A 10.55.0.11, B 10.55.0.12, same /24).
for kv in $(cat /proc/cmdline); do
    case "$kv" in lab.ip2=*) LAB_IP2=${kv#*=} ;; lab.peer2=*) LAB_PEER2=${kv#*=} ;; esac
done
MY_IP2=${LAB_IP2%/*}
PEER_IP2=${LAB_PEER2:-}

# setup_nic2: eth1 up with its address in eth0's subnet. Both NICs sit on one bridge, so
# arp_ignore=1/arp_announce=2 keep each address answered (and used as ARP source) by its own
# NIC; otherwise eth0 answers ARP for eth1's address and RoCE packets for rxe1 arrive on eth0.
setup_nic2() {
    [ -n "$LAB_IP2" ] || { fail "setup_nic2: no lab.ip2 (scenario without '# lab-nics: 2'?)"; return 1; }
    must sysctl -qw net.ipv4.conf.all.arp_ignore=1 net.ipv4.conf.all.arp_announce=2 \
        net.ipv4.conf.eth0.arp_ignore=1 net.ipv4.conf.eth0.arp_announce=2 \
        net.ipv4.conf.eth1.arp_ignore=1 net.ipv4.conf.eth1.arp_announce=2
    must ip addr add "$LAB_IP2" dev eth1
    must ip link set eth1 up
    run ip -br link
    run ip -br addr
    run ip route
}
# add_rxe RXE NETDEV [PNETID]: one more Soft-RoCE device, under the lab PNET ID (call after
# setup_rdma, which loads the modules)
add_rxe() {
    must rdma link add "$1" type rxe netdev "$2"
    must smcdiag pnet add "${3:-LABNET}" "$2" "$1" 1
    (cd "/sys/class/infiniband/$1/ports/1" && grep -v '^0000:0000:0000:0000:0000:0000:0000:0000$' gids/* |
        while IFS=: read -r f v; do i=${f#gids/}; echo "  $1 gid[$i] $v $(cat gid_attrs/types/$i) $(cat gid_attrs/ndevs/$i)"; done)
    run rdma link show
}
# setup_two_devices: what every two-NIC scenario ("# lab-nics: 2") starts with: Soft-RoCE and
# SMC on eth0 (setup_rdma), eth1 with its address (setup_nic2), rxe1 on eth1 under the PNET ID
setup_two_devices() {
    setup_rdma
    setup_nic2
    add_rxe rxe1 eth1
}
# check_dmesg: no WARNING/BUG/call trace from the kernel (smc, rxe or anything else); the
# interop tests look for the "dmesg: no WARNING/BUG/call trace" line
check_dmesg() {
    local bad
    bad=$(dmesg | grep -E 'WARNING:|BUG:|Call Trace:|general protection|Oops' )
    if [ -n "$bad" ]; then fail "kernel warnings in dmesg:"; echo "$bad"; else log "dmesg: no WARNING/BUG/call trace"; fi
}
# links_state TAG: the SMC sockets and links (smc_diag), for the moments between failure steps
links_state() {
    log "---- SMC links: $1"
    smcdiag sockets
    smcdiag links
    log "---- end SMC links: $1"
}
# mark WHAT: a log line with the wall clock (UTC, as the capture's timestamps) next to the
# uptime, for the moments a test must find in the capture (failure actions)
mark() { log "MARK $* (wall $(date -u +%Y-%m-%dT%H:%M:%S.%NZ) epoch $(date +%s.%N))"; }

# smc_state TAG: everything SMC knows, into the log (like smcss -a, smcr linkgroup/link/stats)
smc_state() {
    log "---- SMC state: $1"
    smcdiag all
    log "---- end SMC state: $1"
}

# rdma_res TAG: kernel RDMA objects (QPs with local/remote QPN and PSNs, MRs with rkeys)
rdma_res() {
    log "---- RDMA resources: $1"
    rdma -d resource show qp 2>&1
    rdma -d resource show mr 2>&1
    log "---- end RDMA resources: $1"
}

# finish: common end of every scenario (ends the script). Both guests meet at capture-end,
# where the host stops the capture, so the DELETE LINK that smc's reboot notifier sends at
# power-off stays out of the pcap. Exit status 1 if anything called fail.
# One smcpingpong exchange on $PORT: B serves, A connects with the client options given; after
# SETTLE seconds each side dumps its SMC state under "B LABEL" / "A LABEL".
#   pingpong_pair LABEL SETTLE CLIENT-OPTIONS...
pingpong_pair() {
    local label=$1 settle=$2; shift 2
    if [ "$ROLE" = b ]; then
        run smcpingpong server "$PORT" -x "smcdiag sockets" &
        local srv=$!
        sleep 1; signal listening
        wait $srv || fail "server exit $?"
        sleep "$settle"
        smc_state "B $label"
    else
        wait_for listening
        must smcpingpong client "$PEER_IP" "$PORT" "$@" -x "smcdiag sockets"
        sleep "$settle"
        smc_state "A $label"
    fi
}

finish() {
    case $LAB_GUESTS in *,*) both capture-end 60 ;; *) signal capture-end ;; esac
    dmesg | grep -iE 'smc|rxe|infiniband|rdma' >"/out/dmesg-$ROLE.txt" 2>/dev/null
    dmesg >"/out/dmesg-full-$ROLE.txt" 2>/dev/null
    log "scenario done (failed=$FAILED)"
    exit "$FAILED"
}
