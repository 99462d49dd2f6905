#!/usr/bin/env bash
# Congestion test (about 3.5 minutes). First (30 s): hosts A and B through router R, whose link toward B is a tbf
# bottleneck (300 ms queue). A sends 640x480@30 + Opus to B in auto mode while the capacity
# goes 2.5 -> 0.6 -> 2.5 Mbit/s. Checks, from A's per-second stats and its decision log:
# A's sending rate is below 0.6 Mbit/s within 2 s of the drop, the video mode steps down, and
# after the capacity returns the mode steps back up. Then the short versions of the shared
# bottleneck cases of 'callend bench congestion' (callend only): three calls started 10 s apart
# through 3 Mbit/s (RFC 8867 §5.3), and one call against a CUBIC TCP download through 2 Mbit/s
# (§5.6); and congestion both ways at once (§5.2: a bottleneck on each direction with its own
# schedule, both ends sending). They print the bench's figures and targets; the test fails below
# floors about a quarter from the worst the short runs measured, each printed beside its long-run
# target (below, with the figures they come from). Removes everything it made.
# Needs root; skips, saying so, without it.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/stage.sh
if [ "$(id -u)" -ne 0 ] || ! ip netns list >/dev/null 2>&1 || ! command -v tc >/dev/null; then
  skip "needs root, ip netns and tc"
fi
bin=$(swift build --show-bin-path)/callend
high=${CONGESTION_HIGH:-2500kbit} low=${CONGESTION_LOW:-600kbit}
phase1=${CONGESTION_PHASE1:-9} phase2=${CONGESTION_PHASE2:-9} phase3=${CONGESTION_PHASE3:-10}
seconds=$((phase1 + phase2 + phase3 + 3))
source scripts/netns-topology.sh
topology_start congestion
# A 4 kB bucket (about three packets): the bottleneck behaves like a link, not a policer.
shape() { tc -n "$r" qdisc replace dev "${tag}rb" root tbf rate "$1" burst 4000 latency 300ms; }
shape "$high"

# Each output line is prefixed with the wall-clock time it appeared, to line it up with the schedule.
stamp() { while IFS= read -r line; do printf '%s %s\n' "$(date +%s.%N)" "$line"; done; }
service_tls "$work/tls" 10.71.1.2 || exit 1
start_service -n "$a" "$work/serve.log" --listen 10.71.1.2:7000 "${serve_tls[@]}" || exit 1
token_a=$(mint bottleneck a)
token_b=$(mint bottleneck b)
common=(bottleneck --server tls://10.71.1.2:7000 "${join_tls[@]}" --video-size 640x480 --fps 30 --duration "$seconds" --no-stdin)
(ip netns exec "$a" env CALLEND_TOKEN="$token_a" "$bin" join "${common[@]}" 2>&1 | stamp > "$work/a.log") &
pids+=($!)
wait_for "$work/a.log" "joined room" 30 || exit 1
ip netns exec "$b" env CALLEND_TOKEN="$token_b" "$bin" join "${common[@]}" --video-source none > "$work/b.log" 2>&1 &
pids+=($!)
# The schedule starts when media flows (A's first stats line), not when B was launched.
wait_for "$work/a.log" '"receivedFps"' 30 || exit 1
start=$(date +%s.%N)
sleep "$phase1"; drop=$(date +%s.%N); shape "$low"
sleep "$phase2"; rise=$(date +%s.%N); shape "$high"
for pid in "${pids[@]:1}"; do
  timeout 40 tail --pid="$pid" -f /dev/null || echo "congestion: an endpoint did not finish in time"
done

python3 scripts/congestion/judge_step.py "$work/a.log" "$start" "$drop" "$rise" "$low"
first=$?

# The shared-bottleneck cases, short: the bench's own namespaces (removed when it ends).
shared() {  # shared CASE: runs it, prints its report, leaves it in $work/CASE.txt
  "$bin" bench congestion --case "$1" --short --no-aiortc --out "$work/$1" > "$work/$1.txt" 2> "$work/$1.err" \
    || { echo "congestion: FAILED: bench congestion --case $1"; tail -5 "$work/$1.err"; return 1; }
  sed 's/^/congestion: /' "$work/$1.txt"
}
second=0
shared fairness || second=1
shared tcp || second=1
shared both-ways || second=1
if [ $second -eq 0 ]; then
  python3 scripts/congestion/judge_fairness.py "$work/fairness.txt" "$work/tcp.txt" "$work/both-ways/phases.csv" || second=1
fi
exit $(( first || second ))
