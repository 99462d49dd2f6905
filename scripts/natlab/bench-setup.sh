#!/usr/bin/env bash
# Setup time (join to first decoded frame, as the summary's "setup" of the participant that joins
# second and offers) over N calls each: on loopback, across the NAT lab with a server-reflexive
# pair, and through TURN (both behind symmetric NAT). Root for the lab. Prints p50/p95 per case.
#   scripts/natlab/bench-setup.sh [CALLS]        (default 10)
set -uo pipefail
cd "$(dirname "$0")/../.."
calls=${1:-10}
bin=$(swift build -c release --show-bin-path)/callend
[ -x "$bin" ] || { echo "bench-setup: build a release binary first (swift build -c release)"; exit 1; }
source scripts/natlab/lab.sh
natlab_start || exit 1
stun=stun:$server_ip:3478 turn_udp="turn:$server_ip:3478?transport=udp"
report() {  # report NAME FILE...: p50/p95 of the second joiner's setup times
  python3 scripts/natlab/report.py "$@"
}
# Loopback: both endpoints on this host (no namespaces), the service in S's namespace is not used.
"$bin" serve --listen 127.0.0.1:0 --secret-file "$work/secret" > "$work/loop-serve.log" 2>&1 &
pids+=($!)
wait_for "$work/loop-serve.log" "listening on" 30 || exit 1
loop_port=$(sed -n 's/listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$work/loop-serve.log")
for i in $(seq "$calls"); do
  t1=$("$bin" token --room "loop$i" --identity first --secret-file "$work/secret")
  t2=$("$bin" token --room "loop$i" --identity second --secret-file "$work/secret")
  common=(join "loop$i" --server "127.0.0.1:$loop_port" --video-size 320x240 --duration 3 --no-stdin)
  CALLEND_TOKEN=$t1 "$bin" "${common[@]}" > "$work/loop$i-1.out" 2> "$work/loop$i-1.err" & p1=$!
  wait_for "$work/loop$i-1.err" "joined room" 30 || exit 1
  CALLEND_TOKEN=$t2 "$bin" "${common[@]}" > "$work/loop$i-2.out" 2> "$work/loop$i-2.err"
  wait $p1
done
report loopback "$work"/loop*-2.out
natlab_nat "$RA" plain; natlab_nat "$RB" plain
natlab_serve srflx --ice-server "$stun" || exit 1
for i in $(seq "$calls"); do natlab_call "srflx$i" 3 "$P" "$A"; done
report srflx "$work"/srflx*-2.out
natlab_nat "$RA" symmetric; natlab_nat "$RB" symmetric
natlab_serve relay --ice-server "$stun" --ice-server "$turn_udp" || exit 1
for i in $(seq "$calls"); do natlab_call "relay$i" 3 "$A" "$B"; done
report relay "$work"/relay*-2.out
grep -h "candidatePair" "$work"/relay*-2.out | tail -1 | python3 -c "import json,sys; print('bench-setup: last relay pair:', json.loads(sys.stdin.read())['candidatePair'])"
