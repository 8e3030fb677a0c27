# (x) throughput side by side in one run: one kernel receiver (guest B's smcpingpong server on
# AF_SMC, which hashes every byte and answers "ACK <bytes> fnv1a=<hash>") and one transfer
# (BYTES of the pattern in 64 KiB writes, shutdown, wait for the ACK; MB/s = BYTES / (first
# write -> ACK)) from three senders, one after the other, REPS times each:
#   kernel   guest A's smcpingpong client (AF_SMC over rxe0)
#   ibverbs  our endpoint in guest A on rxe0 (q-ibverbs-kernel.guest.ts send, staged by the host part)
#   uroce    our endpoint on the host side of the bridge (10.55.0.254) over uroce
# Every line "throughput LABEL: …" is in the logs; the host part collects them (throughput.json).
# lab-guests: a,b
# lab-timeout: 420
PORT=12345
BYTES=16777216
REPS=2

setup_rdma
if [ "$ROLE" = a ]; then
    wait_host staged 120 || fail "nothing staged"
fi
both rdma-ready 180

if [ "$ROLE" = b ]; then
    run smcpingpong server $PORT -n $((3 * REPS)) &
    srv=$!
    sleep 1
    signal listening
    wait $srv || fail "server exit $?"
    signal served
else
    export LD_LIBRARY_PATH=/out/pkg/lib
    wait_for listening 120
    for r in $(seq 1 $REPS); do
        out=$(smcpingpong client "$PEER_IP" $PORT -b $BYTES) || fail "kernel client exit $?"
        echo "$out"
        # "client: sent N bytes fnv1a=H (write() calls took Xs, reply after Ys more); reply: ACK N fnv1a=H"
        echo "$out" | awk -v r=$r '/client: sent/ { n = $3; h = $5; sub(/fnv1a=/, "", h); w = $9; sub(/s,/, "", w); y = $12; sub(/s/, "", y)
            ok = index($0, "reply: ACK " n " fnv1a=" h) ? "" : " MISMATCH"
            printf "throughput kernel-%d: %d bytes in %.3f s = %.1f MB/s (smcr; reply ACK %d fnv1a=%s%s)\n", r, n, w + y, n / (w + y) / 1e6, n, h, ok }'
    done
    for r in $(seq 1 $REPS); do
        must /out/node /out/pkg/guest.mjs send "$PEER_IP" $PORT $BYTES ibverbs-$r
    done
    signal guest-done
    wait_host host-done 240 || fail "the host part did not finish"
fi
finish
