# (k) smcping and smcperf against kernel SMC-R, next to kernel↔kernel figures of the same run.
# Guest B serves with unmodified TCP programs under smc_run (AF_SMC via LD_PRELOAD):
#   12345 socat echo (PIPE)       smcping; smcperf --raw --latency; guest A's echo loops
#   5001  socat sink (/dev/null)  smcperf --raw stream
#   5201  iperf3 -s               guest A's iperf3
# Guest A measures kernel↔kernel first: a 56-byte echo loop (python3 socket, TCP_NODELAY) under
# smc_run, paced 0.2 s apart like smcping and back to back like smcperf rr, the same loop over
# plain TCP (no smc_run: B's SMC listener falls back), then iperf3 under smc_run and without
# (32 MiB each, 64 KiB writes).
# Then the host part (k-smcping-smcperf.host.ts: smcping and smcperf over uroce on the bridge
# address 10.55.0.254 with the eBPF TCP option) runs the tools against B. B dumps smc_diag once
# in the middle of every SMC-R measurement (A's and the host's alike, so both pay the same),
# which shows the mode of each measured connection (smcdiag, a python3 program, needs 1-2 s
# under TCG to answer, so the signals come early in each measurement).
# lab-timeout: 480
ECHO_PORT=12345
SINK_PORT=5001
IPERF_PORT=5201
SECS=5            # seconds per back-to-back echo run
BULK=32M          # bytes per throughput run (a byte budget keeps the capture bounded)
PACED_COUNT=40    # paced echo probes (as smcping -c 40 -i 0.2)
PACED_IVAL=0.2
SIZE=56           # probe size (smcping's default)

# echo_loop LABEL COUNT INTERVAL SECONDS [smc_run]: SIZE-byte round trips to B's echo, one
# connection; COUNT probes INTERVAL s apart, or back to back for SECONDS. Times each round trip
# from send() to the last echoed byte (CLOCK_MONOTONIC via perf_counter) and prints one line
#   echo-loop LABEL: N round trips of SIZE B, interval I s: rtt min/avg/p50/p99/max = ... ms (...)
echo_loop() {
    local label=$1 count=$2 ival=$3 secs=$4 pre=$5
    must $pre python3 /tmp/echoloop.py "$PEER_IP" $ECHO_PORT $SIZE "$count" "$ival" "$secs" "$label"
}

setup_rdma
both rdma-ready
if [ "$ROLE" = b ]; then
    smc_run socat TCP4-LISTEN:$ECHO_PORT,reuseaddr,fork PIPE &
    echo_pid=$!
    smc_run socat -u TCP4-LISTEN:$SINK_PORT,reuseaddr,fork OPEN:/dev/null &
    sink_pid=$!
    smc_run iperf3 -s -B "$MY_IP" -p $IPERF_PORT -f m &
    iperf_pid=$!
    sleep 2
    signal listening
    # one smc_diag dump in the middle of each SMC-R measurement
    for p in a.paced-running a.rr-running a.iperf-running host.ping-running host.stream-running host.rr-running; do
        if wait_file "/out/sync/$p" 300; then log "$p: smc_diag during it"; run smcdiag sockets; fi
    done
    wait_host tools-done 300
    sleep 1
    smc_state "B after guest A's and the smcscope tools' connections"
    kill $echo_pid $sink_pid $iperf_pid 2>/dev/null
    wait
else
    cat >/tmp/echoloop.py <<'EOF'
import socket, sys, time
host, port, size, count, ival, secs, label = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6]), sys.argv[7]
t0 = time.perf_counter()
s = socket.create_connection((host, port))
connect_ms = (time.perf_counter() - t0) * 1000
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
msg = bytes((i * 7 + 1) & 0xff for i in range(size))
rtts = []
end = time.monotonic() + secs if secs > 0 else None
while (count == 0 or len(rtts) < count) and (end is None or time.monotonic() < end):
    t = time.perf_counter()
    s.sendall(msg)
    got = b''
    while len(got) < size:
        d = s.recv(size - len(got))
        if not d:
            sys.exit('echo-loop %s: the echo peer closed the connection' % label)
        got += d
    rtts.append((time.perf_counter() - t) * 1000)
    if got != msg:
        sys.exit('echo-loop %s: WRONG DATA in round trip %d' % (label, len(rtts)))
    if ival > 0:
        time.sleep(ival)
s.close()
r = sorted(rtts)
n = len(r)
pct = lambda p: r[min(n - 1, max(0, -(-p * n // 100) - 1))]
print('echo-loop %s: %d round trips of %d B, interval %g s: rtt min/avg/p50/p99/max = %.3f/%.3f/%.3f/%.3f/%.3f ms (connect %.3f ms, first round trip %.3f ms)'
      % (label, n, size, ival, r[0], sum(r) / n, pct(50), pct(99), r[-1], connect_ms, rtts[0]))
EOF
    wait_for listening
    log "kernel↔kernel latency: $SIZE-byte echo round trips to B:$ECHO_PORT (socat PIPE under smc_run)"
    ( sleep 3; signal paced-running ) &
    echo_loop smc-r-paced $PACED_COUNT $PACED_IVAL 0 smc_run
    ( sleep 2; signal rr-running ) &
    echo_loop smc-r-b2b 0 0 $SECS smc_run
    echo_loop tcp-b2b 0 0 $SECS
    log "kernel↔kernel throughput: iperf3 $BULK bytes, 64 KiB writes, A sends, B receives"
    ( sleep 0.5; signal iperf-running ) &
    must smc_run iperf3 -c "$PEER_IP" -p $IPERF_PORT -n $BULK -l 64K -f m
    must iperf3 -c "$PEER_IP" -p $IPERF_PORT -n $BULK -l 64K -f m
    sleep 1
    smc_state "A after its own measurements"
    signal kk-done
    wait_host tools-done 300
fi
check_dmesg
finish
