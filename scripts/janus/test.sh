#!/usr/bin/env bash
# callend in a Janus VideoRoom (issue 31): Debian's Janus started with a configuration of its own
# (scripts/janus/start.sh: the HTTP API and the VideoRoom plugin alone, an API secret) in a
# namespace; `callend janus publish` in a second namespace behind a veth whose direction towards
# Janus is a 1.2 Mbit/s tbf, sending a testsrc2 clip in auto mode; two subscribers beside Janus:
# `callend janus subscribe` and headless Chromium on a page that uses Janus's own JavaScript
# library (libjs-janus-gateway: scripts/janus/subscriber.html); callend's subscriber is started
# before the publisher and told of it by Janus. Checks:
#   - each subscriber decodes >= 90 % of the frames the publisher sent (its frame rate over the
#     time it watched against the publisher's);
#   - Janus's feedback drove the publisher's estimate: the median of its later decisions follows
#     the link (600-1500 kbit/s, where auto mode's ceiling is 2.5 Mbit/s), and the video that
#     reaches Chromium fits the link;
#   - in room 1235 (videocodec h264), callend publishing for 30 s with --video-codec h264, callend
#     subscribing with it and Chromium subscribing for 20 s: each decodes >= 98 % of the frames
#     sent, in H.264 both ways;
#   - a wrong API secret, a room Janus lacks and a room with no publisher are refused with exit 1
#     and a message that says which.
# Root (namespaces, tc). Removes every namespace, process and file it made.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/wait.sh
source scripts/stage.sh
[ "$(id -u)" -eq 0 ] && ip netns list >/dev/null 2>&1 || skip "needs root and ip netns"
command -v janus >/dev/null || skip "needs Debian's janus (scripts/install-deps.sh installs it)"
[ -f /usr/share/janus/demos/javascript/janus-gateway/janus.js ] || skip "needs janus-demos and libjs-janus-gateway (scripts/install-deps.sh installs them)"
command -v ffmpeg >/dev/null || skip "needs ffmpeg (scripts/install-deps.sh installs it)"
py=/usr/bin/python3
need_chromium
bin=$(swift build --show-bin-path)/callend
work=$(mktemp -d /tmp/callend-janus.XXXXXX)
nj=cj$$ np=cp$$
pids=()
cleanup() {
  stop_pids
  [ -n "${janus_pid:-}" ] && kill "$janus_pid" 2>/dev/null && wait "$janus_pid" 2>/dev/null
  ip netns del "$nj" 2>/dev/null
  ip netns del "$np" 2>/dev/null
  [ -n "${JANUS_KEEP:-}" ] && echo "janus: kept $work" || rm -rf "$work"
}
trap cleanup EXIT
ip netns add "$nj"
ip netns add "$np"
ip link add "${nj}v" type veth peer name "${np}v"
ip link set "${nj}v" netns "$nj"
ip link set "${np}v" netns "$np"
ip -n "$nj" addr add 10.86.0.1/24 dev "${nj}v"
ip -n "$np" addr add 10.86.0.2/24 dev "${np}v"
for n in "$nj" "$np"; do ip -n "$n" link set lo up; done
ip -n "$nj" link set "${nj}v" up
ip -n "$np" link set "${np}v" up

secret=$(head -c 18 /dev/urandom | base64 | tr '+/' '-_')
echo "$secret" > "$work/api-secret"
echo "not-the-secret" > "$work/wrong-secret"
janus_pid=$(ip netns exec "$nj" scripts/janus/start.sh "$work/janus" 10.86.0.1 8088 "$secret") || exit 1
api=http://10.86.0.1:8088/janus
common=(--api-secret-file "$work/api-secret" --insecure-plaintext --no-stdin)
ok=1
fail() { echo "janus: FAILED: $*"; ok=0; }

# Refusals: each ends at once with exit 1 and says why.
refused() {  # NAME TEXT COMMAND...: the command exits 1 and its standard error says TEXT
  local name=$1 text=$2
  shift 2
  timeout 30 "$@" > "$work/$name.out" 2> "$work/$name.err"
  local status=$?
  if [ $status -ne 1 ] || ! grep -qiF -- "$text" "$work/$name.err"; then
    fail "$name: exit $status (want 1) and '$text' said; it said: $(tail -2 "$work/$name.err")"
  else
    echo "janus: $name refused: $(grep -iF -- "$text" "$work/$name.err" | tail -1 | cut -c1-200)"
  fi
}
refused wrong-secret "API secret" ip netns exec "$np" "$bin" janus publish "$api" --room 1234 --api-secret-file "$work/wrong-secret" --insecure-plaintext --no-stdin --video-source pattern --duration 5
refused no-room "no such room" ip netns exec "$np" "$bin" janus publish "$api" --room 4321 "${common[@]}" --video-source pattern --duration 5
refused no-publisher "no publisher" ip netns exec "$nj" "$bin" janus subscribe "$api" --room 1234 --wait 1 "${common[@]}" --duration 5

# callend's subscriber comes first and waits in the room: Janus tells it of the publisher when it
# publishes (its lookout handle hears the room's events; nothing polls).
ip netns exec "$nj" "$bin" janus subscribe "$api" --room 1234 --display camera --wait 30 "${common[@]}" --duration 30 \
  > "$work/subscriber.out" 2> "$work/subscriber.err" &
sub=$!
pids+=($sub)
wait_for "$work/subscriber.err" "no publisher in room 1234 yet" 30 || { tail -5 "$work/subscriber.err"; exit 1; }

# The publisher behind 1.2 Mbit/s, in auto mode (a clip with detail everywhere fills its rate).
ffmpeg -loglevel error -y -f lavfi -i testsrc2=size=640x360:rate=30 -t 4 -pix_fmt yuv420p "$work/clip.y4m" || exit 1
ip netns exec "$np" tc qdisc add dev "${np}v" root tbf rate 1200kbit burst 15000 latency 100ms
ip netns exec "$np" "$bin" janus publish "$api" --room 1234 --display camera "${common[@]}" --video-source "$work/clip.y4m" \
  --duration 50 > "$work/publisher.out" 2> "$work/publisher.err" &
pub=$!
pids+=($pub)
wait_for "$work/publisher.err" "published as" 30 || { tail -5 "$work/publisher.err"; exit 1; }

# The page and its library (Janus's JavaScript, and webrtc-adapter, from janus-demos), served beside Janus.
mkdir -p "$work/page"
cp scripts/janus/subscriber.html "$work/page/"
ln -s /usr/share/janus/demos/javascript "$work/page/javascript"
(cd "$work/page" && exec ip netns exec "$nj" "$py" -m http.server 8091 --bind 127.0.0.1) > "$work/page.log" 2>&1 &
pids+=($!)
wait_port "$nj" 127.0.0.1 8091 30 || exit 1

ip netns exec "$nj" "$py" scripts/whep/watch.py "http://127.0.0.1:8091/subscriber.html?server=$api&room=1234&display=camera&secret=$secret" \
  --page janus --frames 30 --seconds 25 --timeout 60 > "$work/chromium.out" 2> "$work/chromium.err" || fail "Chromium did not watch: $(tail -c 300 "$work/chromium.out") $(tail -3 "$work/chromium.err")"
wait "$sub" || fail "callend's subscriber failed: $(tail -3 "$work/subscriber.err")"
wait "$pub" || fail "the publisher failed: $(tail -3 "$work/publisher.err")"
ip netns exec "$np" tc qdisc del dev "${np}v" root

"$py" scripts/janus/judge.py "$work" || ok=0

# H.264 alone (room 1235, videocodec h264): callend's subscriber waits, callend publishes the
# pattern for 30 s, and Chromium (janus.js) subscribes too and watches 20 s of it: each decodes
# >= 98 % of what was sent (callend by frames, Chromium by its frame rate over its 20 s against
# the publisher's), with no decode error, in H.264 both ways.
ip netns exec "$nj" "$bin" janus subscribe "$api" --room 1235 --display h264 --wait 30 --video-codec h264 "${common[@]}" --duration 35 \
  > "$work/h264-subscriber.out" 2> "$work/h264-subscriber.err" &
sub=$!
pids+=($sub)
wait_for "$work/h264-subscriber.err" "no publisher in room 1235 yet" 30 || { tail -5 "$work/h264-subscriber.err"; exit 1; }
ip netns exec "$np" "$bin" janus publish "$api" --room 1235 --display h264 --video-codec h264 --video-size 320x240 "${common[@]}" \
  --duration 30 > "$work/h264-publisher.out" 2> "$work/h264-publisher.err" &
pub=$!
pids+=($pub)
wait_for "$work/h264-publisher.err" "published as" 30 || { tail -5 "$work/h264-publisher.err"; exit 1; }
ip netns exec "$nj" "$py" scripts/whep/watch.py "http://127.0.0.1:8091/subscriber.html?server=$api&room=1235&display=h264&secret=$secret" \
  --page janus --frames 30 --seconds 20 --timeout 60 > "$work/h264-chromium.out" 2> "$work/h264-chromium.err" \
  || fail "Chromium did not watch the H.264 room: $(tail -c 300 "$work/h264-chromium.out") $(tail -3 "$work/h264-chromium.err")"
wait "$pub" || fail "the H.264 publisher failed: $(tail -3 "$work/h264-publisher.err")"
wait "$sub" || fail "callend's H.264 subscriber failed: $(tail -3 "$work/h264-subscriber.err")"
"$py" scripts/janus/judge.py "$work" h264 || ok=0
[ $ok -eq 1 ] && echo "janus: passed" || { echo "janus: FAILED"; tail -15 "$work/publisher.err"; }
[ $ok -eq 1 ]
