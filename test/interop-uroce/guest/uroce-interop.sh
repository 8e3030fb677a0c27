# uroce interop scenario, run by both guests (lab-init sources /lab/guest/common.sh first).
# Steps come from /out/steps (written by test/interop-uroce/lab.ts). The host side
# (host.ts, inside the lab namespace at 10.55.0.254) and the guests meet at barriers:
#   guest -> others: /out/sync/<a|b>.NAME     host -> guests: /out/sync/host.NAME
# Tool output goes to /out/res-<step>-<what>.txt for host.ts to parse.
HOST=10.55.0.254
[ -f /out/params ] && . /out/params   # PP_N BW_N LAT_N, written by lab.ts (host.ts reads the same file)
PP_N=${PP_N:-500}           # ibv_rc_pingpong iterations (4 KiB each way)
BW_N=${BW_N:-300}           # perftest BW iterations (64 KiB)
LAT_N=${LAT_N:-500}         # ib_send_lat iterations
PT="-d rxe0 -x 1 -F"        # perftest: rxe0, IPv4-mapped GID (index 1), ignore CPU frequency checks

wait_host() { # wait_host NAME [TIMEOUT_S]: the host reached NAME
    local n=0 max=$(( ${2:-300} * 2 )) fifo=/tmp/.wh.$$ fd
    [ -p "$fifo" ] || mkfifo "$fifo"
    exec {fd}<>"$fifo"
    while [ ! -e "/out/sync/host.$1" ]; do
        read -r -t 0.5 -u "$fd" _ 2>/dev/null
        n=$((n + 1)); [ $n -lt $max ] || { log "timeout waiting for host $1"; exec {fd}>&-; return 1; }
    done
    exec {fd}>&-
    log "host reached $1"
}
# run a tool with a timeout, output into /out/res-NAME.txt (and the log)
tool() { local name=$1; shift; log "\$ $*"; timeout 240 "$@" >"/out/res-$name.txt" 2>&1; local rc=$?; cat "/out/res-$name.txt"; echo "rc=$rc" >>"/out/res-$name.txt"; log "($name exit $rc)"; return 0; }
server_bg() { local name=$1; shift; log "\$ $* &"; (timeout 240 "$@" >"/out/res-$name.txt" 2>&1; echo "rc=$?" >>"/out/res-$name.txt") & SRV=$!; }

setup_rdma
run sysctl -w net.core.rmem_max=4194304 net.core.rmem_default=1048576
counters() { (cd /sys/class/infiniband/rxe0/ports/1/hw_counters && grep -H . * 2>/dev/null | tr '\n' ' '); echo; }
both rdma-ready 120

for step in $(cat /out/steps); do
  case $step in
  baseline)
    # guest<->guest rxe, B serves, A is the client
    for t in pingpong send_bw write_bw send_lat; do
      case $t in
        pingpong) srv="ibv_rc_pingpong -d rxe0 -g 1 -n $PP_N"; cli="$srv $PEER_IP" ;;
        send_bw)  srv="ib_send_bw $PT -n $BW_N -s 65536"; cli="$srv $PEER_IP" ;;
        write_bw) srv="ib_write_bw $PT -n $BW_N -s 65536"; cli="$srv $PEER_IP" ;;
        send_lat) srv="ib_send_lat $PT -n $LAT_N"; cli="$srv $PEER_IP" ;;
      esac
      if [ "$ROLE" = b ]; then
        server_bg "baseline-$t-server" $srv; sleep 2; signal "base-$t"; wait $SRV; both "base-$t-done" 300
      else
        wait_for "base-$t" 300; sleep 1; tool "baseline-$t-client" $cli; both "base-$t-done" 300
      fi
    done
    ;;
  pingpong|send_bw|write_bw|send_lat)
    case $step in
      pingpong) base="ibv_rc_pingpong -d rxe0 -g 1 -n $PP_N" ;;
      send_bw)  base="ib_send_bw $PT -n $BW_N -s 65536" ;;
      write_bw) base="ib_write_bw $PT -n $BW_N -s 65536" ;;
      send_lat) base="ib_send_lat $PT -n $LAT_N" ;;
    esac
    if [ "$ROLE" = a ]; then
      # 1) uroce is the server, the guest's tool the client
      signal "$step-1-ready"; wait_host "$step-server-ready" 300
      log "rxe0 counters before: $(counters)"
      tool "$step-guestclient" $base $HOST
      signal "$step-1-done"
      # 2) the guest's tool is the server, uroce the client
      server_bg "$step-guestserver" $base; sleep 2
      signal "$step-2-ready"; wait_host "$step-client-done" 300
      wait $SRV
      log "rxe0 counters after: $(counters)"
      cat "/out/res-$step-guestserver.txt"
      signal "$step-2-done"
    fi
    ;;
  esac
done
finish
