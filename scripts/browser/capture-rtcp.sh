#!/usr/bin/env bash
# Captures the RTCP headless Chromium sends to a callend endpoint, decrypted, through a path that
# drops 8 % of UDP at random (so its transport-cc feedback has losses and every chunk kind):
#   scripts/browser/capture-rtcp.sh OUT_DIR
# Root (a network namespace with iptables' statistic match; Chromium needs a non-loopback
# address, a veth pair gives it one). The endpoint writes what it receives with
# CALLEND_RTCP_CAPTURE=OUT_DIR (rtcp-NNNN.bin, one compound packet each). The transport-cc
# vectors in Tests/RTPTransportTests/TransportCCReferenceTests.swift came from such a run,
# decoded by `tshark -V -d udp.port==5005,rtcp` for the expected values.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -eq 1 ] || { echo "usage: scripts/browser/capture-rtcp.sh OUT_DIR" >&2; exit 2; }
out=$(realpath -m "$1")
bin=$(swift build --show-bin-path)/callend
ns=capture$$
work=$(mktemp -d /tmp/callend-capture.XXXXXX)
cleanup() { ip netns pids "$ns" 2>/dev/null | xargs -r kill 2>/dev/null; wait 2>/dev/null; ip netns del "$ns" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
ip netns add "$ns"
ip -n "$ns" link set lo up
ip -n "$ns" link add v0 type veth peer name v1
ip -n "$ns" addr add 10.9.9.1/24 dev v0
ip -n "$ns" link set v0 up; ip -n "$ns" link set v1 up
ip netns exec "$ns" iptables -A INPUT -i lo -p udp -m statistic --mode random --probability 0.08 -j DROP
"$bin" token --new-secret --out "$work/secret"
ip netns exec "$ns" "$bin" serve --listen 127.0.0.1:7000 --http 127.0.0.1:7080 --secret-file "$work/secret" > "$work/serve.log" 2>&1 &
source scripts/wait.sh
wait_for "$work/serve.log" "web page at" 30
tb=$("$bin" token --room capture --identity browser --secret-file "$work/secret")
te=$("$bin" token --room capture --identity endpoint --secret-file "$work/secret")
ip netns exec "$ns" env CALLEND_RTCP_CAPTURE="$out" CALLEND_TOKEN="$te" "$bin" join capture --server 127.0.0.1:7000 \
  --video-size 640x360 --duration 60 --no-stdin > "$work/endpoint.out" 2> "$work/endpoint.err" &
wait_for "$work/endpoint.err" "joined room" 30
ip netns exec "$ns" /usr/bin/python3 scripts/browser/page.py "http://127.0.0.1:7080/?room=capture&token=$tb" --frames 300 --timeout 60 > /dev/null
echo "capture-rtcp: $(ls "$out" | wc -l) RTCP packets in $out"
