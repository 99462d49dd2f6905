#!/usr/bin/env bash
# The attacks issue 27 opened with, played against a real `callend serve`, each refused:
#   renewal-lifetime  a token minted with PyJWT's defaults ({"sub", "room", "exp"}, no iat or nbf)
#                     with 20 s left joins and is renewed: the renewal lives no longer than 20 s
#                     (it once lived 57 years: a missing iat read as 0)
#   renewal-grace     a participant receives a renewal and leaves; within the seat's grace the
#                     renewal takes the seat back; after it, a new connection presenting it with
#                     "rejoin": true is refused (token_renewal); another token of the same
#                     identity cannot take a live seat (seat_taken) and evicts nobody
#   plaintext         inside a network namespace of the test's own: serve on its non-loopback
#                     address without TLS, and join to it without tls://, exit 2 and listen or
#                     connect to nothing; with TLS (callend tls) a join gets through
# Needs root for the namespace; skips, saying so, without it. Removes everything it made.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/wait.sh
source scripts/stage.sh
py=/usr/bin/python3
if [ "$(id -u)" -ne 0 ] || ! ip netns list >/dev/null 2>&1; then
  skip "needs root and ip netns (the plaintext case runs in a namespace of its own)"
fi
"$py" -c "import jwt" 2>/dev/null || skip "needs Debian's python3-jwt (PyJWT)"
bin=$(swift build --show-bin-path)/callend
work=$(mktemp -d /tmp/callend-trust.XXXXXX)
ns=callend-trust-$$
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  ip netns del "$ns" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
status=0

start_service "$work/serve.log" --listen 127.0.0.1:0 --seat-grace 3s || exit 1

"$py" scripts/trust/cases.py "$port" "$work/secret" || status=1

# plaintext: a namespace with an address of its own that is not loopback.
ip netns add "$ns"
ip -n "$ns" link set lo up
ip -n "$ns" link add trust0 type veth peer name trust1
ip -n "$ns" addr add 198.51.100.7/24 dev trust0
ip -n "$ns" link set trust0 up
ip -n "$ns" link set trust1 up
ip netns exec "$ns" "$bin" serve --listen 198.51.100.7:7000 --secret-file "$work/secret" > "$work/plain-serve.out" 2> "$work/plain-serve.err"
rc=$?
if [ $rc -eq 2 ] && grep -q "callend tls" "$work/plain-serve.err" && ! ip netns exec "$ns" ss -ltn | grep -q ":7000"; then
  echo "trust: plaintext: refused as it should be: serve on 198.51.100.7 without TLS exited 2: $(head -c 160 "$work/plain-serve.err")"
else
  echo "trust: plaintext: FAILED: serve on 198.51.100.7 without TLS exited $rc: $(cat "$work/plain-serve.err")"; status=1
fi
token=$(mint lab roof)
service_tls "$work/tls" 198.51.100.7 || exit 1
ip netns exec "$ns" "$bin" serve --listen 198.51.100.7:7000 --secret-file "$work/secret" "${serve_tls[@]}" > "$work/tls-serve.log" 2>&1 &
pids+=($!)
wait_for "$work/tls-serve.log" "listening on" 30 || exit 1
ip netns exec "$ns" env CALLEND_TOKEN="$token" timeout 20 "$bin" join lab --server 198.51.100.7:7000 --duration 2 --no-stdin \
  > /dev/null 2> "$work/plain-join.err"
rc=$?
if [ $rc -eq 2 ] && grep -q "callend tls" "$work/plain-join.err"; then
  echo "trust: plaintext: refused as it should be: join to 198.51.100.7:7000 without tls:// exited 2"
else
  echo "trust: plaintext: FAILED: join to 198.51.100.7:7000 without tls:// exited $rc: $(tail -2 "$work/plain-join.err")"; status=1
fi
ip netns exec "$ns" env CALLEND_TOKEN="$token" timeout 30 "$bin" join lab --server tls://198.51.100.7:7000 "${join_tls[@]}" \
  --video-source none --audio-source none --duration 2 --no-stdin > /dev/null 2> "$work/tls-join.err" &
joiner=$!
if wait_for "$work/tls-join.err" "joined room" 20; then
  echo "trust: plaintext: over TLS with the CA callend tls made, the join gets through"
else
  echo "trust: plaintext: FAILED: the join over TLS did not get in: $(tail -3 "$work/tls-join.err")"; status=1
fi
wait $joiner 2>/dev/null
echo "trust: $([ $status -eq 0 ] && echo passed || echo FAILED)"
exit $status
