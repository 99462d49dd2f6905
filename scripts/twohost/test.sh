#!/usr/bin/env bash
# Two-host test: network namespaces A and B joined through a router namespace R, the signaling
# service and one endpoint on A, the other endpoint on B, a call with synthetic sources; checks
# that each side decoded >= 95 % of the other's frames and that its received audio is the tone
# the other sent. Removes every namespace, process and file it made. Needs root (CI runs as root);
# skips, saying so, without it. docker-compose.yml runs the same topology with the same commands.
set -uo pipefail
cd "$(dirname "$0")/../.."
seconds=${TWOHOST_SECONDS:-20}
source scripts/stage.sh
if [ "$(id -u)" -ne 0 ] || ! ip netns list >/dev/null 2>&1; then
  skip "needs root and ip netns"
fi
bin=$(swift build --show-bin-path)/callend
source scripts/netns-topology.sh
topology_start twohost

# The same commands docker-compose.yml runs in its three containers: signaling over TLS, the
# certificate from callend tls.
service_tls "$work/tls" 10.71.1.2 || exit 1
start_service -n "$a" "$work/serve.log" --listen 10.71.1.2:7000 "${serve_tls[@]}" || exit 1
token_a=$(mint rooftop host-a)
token_b=$(mint rooftop host-b)
common=(--server tls://10.71.1.2:7000 "${join_tls[@]}" --video-size 640x480 --fps 30 --duration "$seconds")
ip netns exec "$a" env CALLEND_TOKEN="$token_a" "$bin" join rooftop "${common[@]}" --audio-out "$work/a.wav" > "$work/a.out" 2> "$work/a.err" &
pids+=($!)
wait_for "$work/a.err" "joined room" 30 || exit 1
ip netns exec "$b" env CALLEND_TOKEN="$token_b" "$bin" join rooftop "${common[@]}" --audio-out "$work/b.wav" > "$work/b.out" 2> "$work/b.err" &
pids+=($!)
status=0
for pid in "${pids[@]:1}"; do
  timeout $((seconds + 30)) tail --pid="$pid" -f /dev/null || { echo "twohost: FAILED: an endpoint did not finish"; status=1; }
done
cat "$work/a.out" "$work/b.out"
[ $status -eq 0 ] || { cat "$work/a.err" "$work/b.err"; exit 1; }

python3 scripts/twohost/judge.py "$work" "$seconds"
result=$?
[ $result -eq 0 ] && echo "twohost: passed" || echo "twohost: FAILED"
exit $result
