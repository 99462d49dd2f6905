#!/usr/bin/env bash
# One endpoint, four viewers, one encode (issue 31): a `callend join` alone in its room is
# watched through `serve --http` by four WHEP viewers: three aiortc ones on the endpoint's own
# machine (scripts/viewers/whep_viewers.py) and headless Chromium on the WHEP player page
# (scripts/whep/player.html, watch.py) in a namespace behind a veth. Two rounds, each counted
# over 10 s from 35 s after the viewers decode, when their estimates have reached the ceiling
# of auto mode (45 s for the one behind the veth):
#   open    the veth as it is: every viewer >= 25 fps from the shared encoder;
#   narrow  a 1.2 Mbit/s tbf on the veth towards the viewer: it keeps decoding the shared
#           stream's lower temporal layers (>= 5 fps; layer 0 alone is 7.5) within the link;
#   thin    300 kbit/s, under even layer 0's share of the shared rate: it keeps decoding
#           (>= 5 fps within the link), from an encoder of its own once it starves;
# and in both bottleneck rounds the other three keep >= 90 % of their frame rate and bitrate of
# the open round. How the endpoint served the viewer behind the veth is read from its log.
# Root (namespaces, tc). Removes every namespace, process and file it made.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/wait.sh
source scripts/stage.sh
[ "$(id -u)" -eq 0 ] && ip netns list >/dev/null 2>&1 || skip "needs root and ip netns"
command -v tc >/dev/null || skip "needs tc (iproute2)"
command -v ffmpeg >/dev/null || skip "needs ffmpeg (scripts/install-deps.sh installs it)"
py=/usr/bin/python3
need_chromium
need_aiortc
bin=$(swift build --show-bin-path)/callend
work=$(mktemp -d /tmp/callend-viewers.XXXXXX)
ns=cv$$
pids=()
cleanup() {
  stop_pids
  ip netns del "$ns" 2>/dev/null
  ip link del "${ns}h" 2>/dev/null
  [ -n "${VIEWERS_KEEP:-}" ] && echo "viewers: kept $work" || rm -rf "$work"
}
trap cleanup EXIT
ip netns add "$ns"
ip link add "${ns}h" type veth peer name "${ns}v"
ip link set "${ns}v" netns "$ns"
ip addr add 10.83.0.1/24 dev "${ns}h"
ip link set "${ns}h" up
ip -n "$ns" addr add 10.83.0.2/24 dev "${ns}v"
ip -n "$ns" link set "${ns}v" up
ip -n "$ns" link set lo up

# A clip with detail everywhere (testsrc2), so the encoder fills its rate as the estimates rise
# (the moving pattern is easy: its rate follows its content more than the target).
ffmpeg -loglevel error -y -f lavfi -i testsrc2=size=640x360:rate=30 -t 4 -pix_fmt yuv420p "$work/clip.y4m" || exit 1
mint bench camera > "$work/camera.token"
vt=$(mint bench viewer --can watch)
page_port=8090
(cd scripts/whep && exec ip netns exec "$ns" "$py" -m http.server "$page_port" --bind 10.83.0.2) > "$work/pages.log" 2>&1 &
pids+=($!)
start_service "$work/serve.log" --listen 10.83.0.1:0 --http 10.83.0.1:0 --insecure-plaintext --allowed-origin "http://10.83.0.2:$page_port" || exit 1
sport=$port
"$bin" join bench --token-file "$work/camera.token" --server "10.83.0.1:$sport" --insecure-plaintext --video-source "$work/clip.y4m" \
  --max-viewers 4 --duration 300 --no-stdin > "$work/endpoint.out" 2> "$work/endpoint.err" &
pids+=($!)
wait_for "$work/endpoint.err" "joined room" 30 || exit 1
wait_port "$ns" 10.83.0.2 "$page_port" 60 || exit 1
player="http://10.83.0.2:$page_port/player.html?whep=$web/whep/bench&token=$vt"

# round NAME: three viewers here and one in the namespace, 15 s each, at the same time.
round() {
  "$python" scripts/viewers/whep_viewers.py "$web/whep/bench" --count 3 --token "$vt" --warmup 35 --seconds 10 > "$work/$1-near.out" 2> "$work/$1-near.err" &
  local near=$!
  ip netns exec "$ns" "$py" scripts/whep/watch.py "$player" --frames 1 --seconds 45 --timeout 90 > "$work/$1-far.out" 2> "$work/$1-far.err"
  local far=$?
  wait "$near"
  local status=$?
  [ $far -eq 0 ] && [ $status -eq 0 ] || { echo "viewers: $1: a viewer failed"; tail -5 "$work/$1-near.err" "$work/$1-far.err"; return 1; }
}
round open || exit 1
tc qdisc add dev "${ns}h" root tbf rate 1200kbit burst 15000 latency 150ms
round narrow || exit 1
tc qdisc change dev "${ns}h" root tbf rate 300kbit burst 4500 latency 150ms
round thin || exit 1
tc qdisc del dev "${ns}h" root

"$python" scripts/viewers/judge.py "$work"
status=$?
[ $status -eq 0 ] && echo "viewers: passed" || { echo "viewers: FAILED"; tail -20 "$work/endpoint.err"; }
exit $status
