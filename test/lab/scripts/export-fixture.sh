#!/bin/bash
# export-fixture.sh NAME [RUN_DIR]: copy a lab run's capture and guest logs into pcaps/ as a
# committed fixture (pcaps/NAME.pcap, NAME.guest-a.log, NAME.guest-b.log). RUN_DIR defaults to
# the newest test/lab/out/NAME-* run. The ground truth (pcaps/NAME.truth.json) is written by
# hand from the guest logs; see pcaps/README.md.
set -euo pipefail
LAB=$(cd "$(dirname "$0")/.." && pwd)
ROOT=$(cd "$LAB/../.." && pwd)
NAME=$1
RUN=${2:-$(ls -1dt "$LAB/out/$NAME"-* 2>/dev/null | head -1)}
[ -n "$RUN" ] && [ -f "$RUN/capture.pcap" ] || { echo "no run of $NAME with a capture" >&2; exit 1; }
cp "$RUN/capture.pcap" "$ROOT/pcaps/$NAME.pcap"
for g in a b; do
    [ -f "$RUN/guest-$g.log" ] && tr -d '\r' <"$RUN/guest-$g.log" >"$ROOT/pcaps/$NAME.guest-$g.log"
done
echo "exported $RUN -> pcaps/$NAME.{pcap,guest-a.log,guest-b.log}"
ls -la "$ROOT/pcaps/$NAME".*
