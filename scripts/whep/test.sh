#!/usr/bin/env bash
# WHIP and WHEP on the service (`serve --http`), with outside clients. Cases:
#   whip-client  Debian's whip-client (GStreamer webrtcbin) publishes 450 frames (15 s) of VP8 and Opus
#                into /whip/ROOM; the room's `callend join` is its peer and records: >= 90 % of
#                the frames in its IVF recording, its audio decoded, and the DELETE seen (the
#                endpoint hears the session's bye). As packaged whip-client aborts at start
#                (libnice's UPnP library pulls in libsoup3 beside its libsoup2): a stub
#                libgupnp-igd-1.0.so.4 made here goes on LD_LIBRARY_PATH. libnice gathers nothing
#                on loopback, so this case runs in a namespace with an address on a veth.
#   publish-restart  `callend publish` (HTTPS) from one namespace into /whip/ROOM of a service in
#                another; the publisher's address changes twice mid-session: each time it
#                restarts ICE by PATCH, the endpoint answers, and >= 90 % of the frames decode; the
#                endpoint has --max-viewers 0, and a WHEP player of it gets 403.
#   whep-loopback  the WHEP player page (player.html, a minimal standard WHEP client served from
#                another origin: CORS and --allowed-origin) in headless Chromium watches a
#                `callend join`: its video element plays and getStats counts >= 90 % of the frames
#                the endpoint sent that viewer decoded, audio arrives, DELETE answers 200.
#   whep-h264    the player offering H.264 alone (codec=h264) watches a `callend join --video-codec
#                auto` for 20 s: getStats names video/H264 and counts >= 98 % of the frames the
#                endpoint sent it decoded (an encoder of the viewer's own: the shared one is VP8).
#   whep-pion    then a WHEP viewer of another stack, pion/webrtc (scripts/pion/whep_viewer.go),
#                that offers H.264 alone, no trickle, watches the same endpoint for 20 s: ffprobe
#                decodes >= 98 % of the frames the endpoint sent it from the Annex B file pion
#                wrote, audio arrives, DELETE answers 200.
#   whep-refused a second player while the endpoint has --max-viewers 1 is refused (503), and
#                one with a token for another room (403).
#   whep-nat     (root) the NAT lab: the player behind one symmetric NAT, the endpoint behind
#                another, the service and coturn on the public side over TLS; the player starts
#                relay-only without servers, takes the TURN credentials of the 201's Link fields
#                and restarts ICE with them by PATCH; >= 90 % decoded through the relay.
# WHEP_CASES="whip-client whep-loopback whep-nat" picks cases (whep-refused runs with whep-loopback).
# Prints POST -> first frame for each player. Skips (77), saying why, where Chromium or
# whip-client cannot run; removes every namespace, process and file it made.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/wait.sh
source scripts/stage.sh
py=/usr/bin/python3
need_chromium
command -v whip-client >/dev/null || skip "needs Debian's simple-whip-client (scripts/install-deps.sh installs it)"
[ "$(id -u)" -eq 0 ] && ip netns list >/dev/null 2>&1 || skip "needs root and ip netns (whip-client needs an address on a veth)"
bin=$(swift build --show-bin-path)/callend
here=$PWD/scripts/whep
work=$(mktemp -d /tmp/callend-whep.XXXXXX)
wns=cw$$  # (not "ns": the NAT lab uses that name for its loops)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  for n in "$wns" "${wns}p" "${wns}e"; do ip netns del "$n" 2>/dev/null; done
  [ -n "${WHEP_KEEP:-}" ] && echo "whep: kept $work" || rm -rf "$work"
}
trap cleanup EXIT
status=0
fail() { echo "whep: $*"; status=1; }
cases=${WHEP_CASES:-whip-client publish-restart whep-loopback whep-h264 whep-pion whep-nat}
wants() { [[ " $cases " == *" $1 "* ]]; }

# judge NAME [CODEC SHARE]: the player's JSON line against what the endpoint sent that viewer.
judge() {
  "$py" scripts/whep/judge.py "$work" "$@"
}

# time_players NAME ENDPOINT_LOG URL [WATCH OPTIONS...]: WHEP_RUNS - 1 more players one after
# another (each once the previous viewer has ended at the endpoint), then POST -> first frame
# over them and the case's first player: p50 and p95 (scripts/whep/bench.sh runs 20).
time_players() {
  local name=$1 endpoint_log=$2 url=$3 i done_before
  shift 3
  for ((i = 2; i <= ${WHEP_RUNS:-1}; i++)); do
    done_before=$(grep -c 'done: sent' "$endpoint_log")
    "${in_ns[@]}" "$py" "$here/watch.py" "$url" --frames 15 --seconds 0 "$@" >> "$work/$name-player.out" 2> /dev/null
    local deadline=$((SECONDS + 15))
    while [ "$(grep -c 'done: sent' "$endpoint_log")" -le "$done_before" ] && [ $SECONDS -lt $deadline ]; do sleep 0.05; done
  done
  "$py" scripts/whep/judge_first_frames.py "$work/$name-player.out" "$name"
}
in_ns=()

# --- whip-client into /whip/ROOM, in a namespace with an address on a veth
if wants whip-client; then
ip netns add "$wns"
ip -n "$wns" link set lo up
ip -n "$wns" link add "${wns}v0" type veth peer name "${wns}v1"
ip -n "$wns" addr add 10.77.0.2/24 dev "${wns}v0"
ip -n "$wns" link set "${wns}v0" up; ip -n "$wns" link set "${wns}v1" up
cat > "$work/gupnp-stub.c" <<'C'
/* Stands in for libgupnp-igd-1.0.so.4, which libnice loads for UPnP port mappings and which
   pulls in libsoup3 beside whip-client's libsoup2 (GLib aborts then). No thread, no mapping:
   libnice does without UPnP. */
void *gupnp_simple_igd_thread_new(void) { return 0; }
unsigned long gupnp_simple_igd_get_type(void) { return 0; }
void gupnp_simple_igd_add_port(void) {}
void gupnp_simple_igd_remove_port_local(void) {}
C
mkdir -p "$work/stub"
cc -shared -fPIC -Wl,-soname,libgupnp-igd-1.0.so.4 -o "$work/stub/libgupnp-igd-1.0.so.4" "$work/gupnp-stub.c" || skip "no C compiler for the stub"
start_service -n "$wns" "$work/ns-serve.log" --listen 127.0.0.1:7000 --http 127.0.0.1:8080 || exit 1
mint studio recorder > "$work/recorder.token"
mint studio gstreamer --can publish > "$work/gstreamer.token"
ip netns exec "$wns" "$bin" join studio --token-file "$work/recorder.token" --server 127.0.0.1:7000 --duration 120 --no-stdin \
  --video-out "$work/whip-client.ivf" --audio-out "$work/whip-client.wav" > "$work/recorder.out" 2> "$work/recorder.err" &
pr=$!; pids+=($pr)
wait_for "$work/recorder.err" "joined room" 30 || exit 1
frames=450
start=$SECONDS
ip netns exec "$wns" env LD_LIBRARY_PATH="$work/stub" timeout -s INT $((frames / 30 + 4)) whip-client -o -u http://127.0.0.1:8080/whip/studio \
  -t "$(cat "$work/gstreamer.token")" \
  -V "videotestsrc is-live=true pattern=ball num-buffers=$frames ! video/x-raw,width=320,height=240,framerate=30/1 ! videoconvert ! queue ! vp8enc deadline=1 ! rtpvp8pay pt=96 ssrc=2 ! queue ! application/x-rtp,media=video,encoding-name=VP8,payload=96" \
  -A "audiotestsrc is-live=true wave=sine ! audioconvert ! audioresample ! queue ! opusenc ! rtpopuspay pt=100 ssrc=1 ! queue ! application/x-rtp,media=audio,encoding-name=OPUS,payload=100" \
  > "$work/whip-client.log" 2>&1
if wait_for "$work/recorder.err" "the WHIP publisher ended its session" 15; then deleted=yes; else deleted=no; fi
kill -TERM $pr; wait $pr 2>/dev/null
recorded=$(decoded_frames v "$work/whip-client.ivf")
audio=$(sed -n 's/.*audio \([0-9]*\) decoded.*/\1/p' "$work/recorder.out")
echo "whep: whip-client: published $frames frames in $((SECONDS - start)) s; the endpoint recorded ${recorded:-0} decodable frames and decoded ${audio:-0} audio frames; DELETE seen: $deleted"
if [ "${recorded:-0}" -ge $((frames * 9 / 10)) ] && [ "${audio:-0}" -gt 0 ] && [ $deleted = yes ]; then
  echo "whep: whip-client passed"
else
  fail "whip-client FAILED"; grep -v '^$' "$work/whip-client.log" | tail -8; grep -v '"change"' "$work/recorder.err" | tail -8
fi
stop_pids
fi

# --- publish-restart: callend publish into /whip/ROOM from another namespace; its address
# changes twice mid-session (one added, then the first removed): each time it restarts ICE by
# PATCH (If-Match: "*") and the endpoint, which answers with its new candidates, keeps decoding.
if wants publish-restart; then
pns=${wns}p ens=${wns}e
ip netns add "$pns"; ip netns add "$ens"
ip -n "$pns" link set lo up; ip -n "$ens" link set lo up
ip link add "${wns}pv" type veth peer name "${wns}ev"
ip link set "${wns}pv" netns "$pns"; ip link set "${wns}ev" netns "$ens"
ip -n "$pns" addr add 10.78.0.1/24 dev "${wns}pv"; ip -n "$ens" addr add 10.78.0.2/24 dev "${wns}ev"
ip -n "$pns" link set "${wns}pv" up; ip -n "$ens" link set "${wns}ev" up
# The second address stays when the first goes (by default the kernel removes secondaries with it).
ip netns exec "$pns" sysctl -q -w "net.ipv4.conf.${wns}pv.promote_secondaries=1"
service_tls "$work/tls" 10.78.0.2 || exit 1
start_service -n "$ens" "$work/restart-serve.log" --listen 10.78.0.2:7000 --http 10.78.0.2:8443 "${serve_tls[@]}" || exit 1
mint relay box > "$work/box.token"
mint relay roofcam --can publish,watch > "$work/roofcam.token"
ip netns exec "$ens" "$bin" join relay --token-file "$work/box.token" --server tls://10.78.0.2:7000 "${join_tls[@]}" --duration 120 --no-stdin --max-viewers 0 \
  > "$work/restart-endpoint.out" 2> "$work/restart-endpoint.err" &
pe=$!; pids+=($pe)
wait_for "$work/restart-endpoint.err" "joined room" 30 || exit 1
ip netns exec "$pns" "$bin" publish https://10.78.0.2:8443/whip/relay --bearer-token-file "$work/roofcam.token" "${join_tls[@]}" \
  --video-size 320x240 --duration 20 --no-stdin > "$work/restart-publish.out" 2> "$work/restart-publish.err" &
pp=$!; pids+=($pp)
wait_for "$work/restart-publish.err" "dtls: connected" 30
ip -n "$pns" addr add 10.78.0.3/24 dev "${wns}pv"
wait_for "$work/restart-publish.err" "ICE restart answered" 20
wait_for "$work/restart-publish.err" "restart done" 20
ip -n "$pns" addr del 10.78.0.1/24 dev "${wns}pv"
wait $pp; rc=$?
# The endpoint says its publisher ended, whichever of the publisher's two byes (its RTCP BYE, the
# service's bye for its DELETE) comes first.
ended=yes
wait_for "$work/restart-endpoint.err" "the WHIP publisher ended its session" 15 \
  || { ended=no; echo "whep: publish-restart: the endpoint's and the publisher's last lines:"; grep -v '"change"' "$work/restart-endpoint.err" | tail -6 | cut -c1-300
       grep -v '"change"' "$work/restart-publish.err" | tail -4 | cut -c1-300; grep -E "DELETE|PATCH" "$work/restart-serve.log" | tail -3 | cut -c1-300; }
# --max-viewers 0: a WHEP player is refused with 403, and told why (callend publish POSTs as one would).
ip netns exec "$pns" "$bin" publish https://10.78.0.2:8443/whep/relay --bearer-token-file "$work/roofcam.token" "${join_tls[@]}" --duration 2 --no-stdin \
  > /dev/null 2> "$work/no-viewers.err"
viewer_rc=$?
if [ $viewer_rc -eq 1 ] && grep -q '403 Forbidden.*takes no viewers' "$work/no-viewers.err"; then
  echo "whep: publish-restart: a WHEP player of an endpoint with --max-viewers 0: $(tail -1 "$work/no-viewers.err" | cut -c1-200)"
else
  fail "publish-restart FAILED: a player of an endpoint with --max-viewers 0 got exit $viewer_rc: $(tail -1 "$work/no-viewers.err")"
fi
kill -TERM $pe; wait $pe 2>/dev/null
endpoint_rc=$?
# SIGTERM ends the endpoint with 0; anything else (a crash on its way out) fails, with its report.
[ $endpoint_rc -eq 0 ] || { fail "publish-restart FAILED: the endpoint exited $endpoint_rc after SIGTERM"; crash_report "$work/restart-endpoint.err"; }
sent=$(sed -n 's/.*sent \([0-9]*\) frames.*/\1/p' "$work/restart-publish.out")
decoded=$(sed -n 's/.*video \([0-9]*\) frames decoded.*/\1/p' "$work/restart-endpoint.out")
restarts=$(sed -n 's/.*ICE restarts \([0-9]*\).*/\1/p' "$work/restart-publish.out")
patches=$(grep -c 'PATCH /whip/relay/.* -> 200' "$work/restart-serve.log")
echo "whep: publish-restart: exit $rc; $(cat "$work/restart-publish.out")"
echo "whep: publish-restart: the endpoint decoded ${decoded:-0} of ${sent:-0} frames; ${patches} restarts answered 200 by PATCH; it saw the publisher end: $ended"
if [ $rc -eq 0 ] && [ "${restarts:-0}" -ge 2 ] && [ "$patches" -ge 2 ] && ! grep -q 'sessions [0-9]' "$work/restart-publish.out" \
   && [ "${decoded:-0}" -ge $((${sent:-1} * 9 / 10)) ] && [ $ended = yes ]; then
  echo "whep: publish-restart passed"
else
  fail "publish-restart FAILED"; grep -v '"change"' "$work/restart-publish.err" | tail -12; grep -v '"change"' "$work/restart-endpoint.err" | tail -8
  crash_report "$work/restart-endpoint.err"; crash_report "$work/restart-publish.err"
fi
stop_pids
fi

# --- the WHEP player in Chromium
page_port=$((8400 + RANDOM % 400))
if wants whep-loopback; then
(cd "$here" && exec "$py" -m http.server "$page_port" --bind 127.0.0.1) > "$work/pages.log" 2>&1 &
pids+=($!)
start_service "$work/serve.log" --listen 127.0.0.1:0 --http 127.0.0.1:0 --allowed-origin "http://127.0.0.1:$page_port" || exit 1
sport=$port
# The page server is up once its port takes a connection (at most 60 s).
wait_port "" 127.0.0.1 "$page_port" 60 || exit 1


mint lab camera > "$work/camera.token"
mint lab viewer --can watch > "$work/viewer.token"
mint elsewhere viewer --can watch > "$work/other-room.token"
"$bin" join lab --token-file "$work/camera.token" --server "127.0.0.1:$sport" --video-size 640x360 --duration 120 --no-stdin --max-viewers 1 \
  > "$work/whep-loopback-endpoint.out" 2> "$work/whep-loopback-endpoint.err" &
pe=$!; pids+=($pe)
wait_for "$work/whep-loopback-endpoint.err" "joined room" 30 || exit 1
player="http://127.0.0.1:$page_port/player.html?whep=$web/whep/lab"
"$py" "$here/watch.py" "$player&token=$(cat "$work/viewer.token")" --frames 90 --seconds 6 > "$work/whep-loopback-player.out" 2> "$work/whep-loopback-player.err" &
pw=$!; pids+=($pw)
wait_for "$work/whep-loopback-endpoint.err" "dtls: connected" 60
# whep-refused: while the first player watches, a second is one too many; a token for another room is refused.
"$py" "$here/watch.py" "$player&token=$(cat "$work/viewer.token")" --frames 1 --timeout 20 > "$work/refused-full.out" 2> /dev/null
"$py" "$here/watch.py" "$player&token=$(cat "$work/other-room.token")" --frames 1 --timeout 20 > "$work/refused-room.out" 2> /dev/null
wait $pw; rc=$?
[ $rc -eq 3 ] && skip "Chromium cannot start here: $(tail -1 "$work/whep-loopback-player.err")"
wait_for "$work/whep-loopback-endpoint.err" "done: sent" 15
judge whep-loopback || { status=1; tail -5 "$work/whep-loopback-player.err"; grep whep "$work/whep-loopback-endpoint.err" | tail -5; }
time_players whep-loopback "$work/whep-loopback-endpoint.err" "$player&token=$(cat "$work/viewer.token")"
grep -q '"error": "Error: POST: 503 this endpoint has its 1 viewers' "$work/refused-full.out" \
  && echo "whep: whep-refused: a second viewer over --max-viewers 1: 503" || fail "whep-refused FAILED (max viewers): $(cut -c1-300 "$work/refused-full.out")"
grep -q '"error": "Error: POST: 403 token_room' "$work/refused-room.out" \
  && echo "whep: whep-refused: a token for another room: 403" || fail "whep-refused FAILED (another room): $(cut -c1-300 "$work/refused-room.out")"
kill -TERM $pe 2>/dev/null
stop_pids
fi

# --- whep-h264, whep-pion: viewers that take H.264 alone watch an endpoint whose call may use it
if wants whep-h264 || wants whep-pion; then
(cd "$here" && exec "$py" -m http.server "$page_port" --bind 127.0.0.1) > "$work/pages.log" 2>&1 &
pids+=($!)
start_service "$work/serve-h264.log" --listen 127.0.0.1:0 --http 127.0.0.1:0 --allowed-origin "http://127.0.0.1:$page_port" || exit 1
wait_port "" 127.0.0.1 "$page_port" 60 || exit 1
mint lab264 camera > "$work/camera264.token"
mint lab264 viewer --can watch > "$work/viewer264.token"
"$bin" join lab264 --token-file "$work/camera264.token" --server "127.0.0.1:$port" --video-size 640x360 --video-codec auto --duration 120 --no-stdin \
  > "$work/whep-h264-endpoint.out" 2> "$work/whep-h264-endpoint.err" &
pe=$!; pids+=($pe)
wait_for "$work/whep-h264-endpoint.err" "joined room" 30 || exit 1
if wants whep-h264; then
"$py" "$here/watch.py" "http://127.0.0.1:$page_port/player.html?whep=$web/whep/lab264&codec=h264&token=$(cat "$work/viewer264.token")" --frames 30 --seconds 20 \
  > "$work/whep-h264-player.out" 2> "$work/whep-h264-player.err"
[ $? -eq 3 ] && skip "Chromium cannot start here: $(tail -1 "$work/whep-h264-player.err")"
wait_for "$work/whep-h264-endpoint.err" "done: sent" 15
# Over 20 s in H.264 (issue 52: >= 98 % by the outside tool), from an encoder of the viewer's own.
judge whep-h264 video/H264 0.98 || { status=1; tail -5 "$work/whep-h264-player.err"; grep whep "$work/whep-h264-endpoint.err" | tail -5; }
grep -q "whep~.* watches .*video H264 (an encoder of its own)" "$work/whep-h264-endpoint.err" || fail "whep-h264: the endpoint's log does not name H.264 for the viewer: $(grep whep~ "$work/whep-h264-endpoint.err" | head -3)"
fi
if wants whep-pion; then
  ended_before=$(grep -c 'done: sent' "$work/whep-h264-endpoint.err")
  if ! build_go "$work/pion-whep" scripts/pion/api.go scripts/pion/whep_viewer.go > "$work/pion-build.log" 2>&1; then
    fail "whep-pion: the pion viewer does not build: $(tail -3 "$work/pion-build.log")"
  else
    "$work/pion-whep" -url "$web/whep/lab264" -token-file "$work/viewer264.token" -seconds "${WHEP_PION_SECONDS:-20}" -out "$work/pion.h264" \
      > "$work/whep-pion.out" 2> "$work/whep-pion.err"
    rc=$?
    viewer_ended() { [ "$(grep -c 'done: sent' "$work/whep-h264-endpoint.err")" -gt "$ended_before" ]; }
    wait_until 15 "the endpoint's end of the pion viewer" viewer_ended
    sent=$(grep -o 'whep~[a-z0-9]* done: sent [0-9]* frames' "$work/whep-h264-endpoint.err" | tail -1 | awk '{print $4}')
    decoded=$(decoded_frames v "$work/pion.h264" -f h264)
    echo "whep: whep-pion: exit $rc; pion said $(cat "$work/whep-pion.out"); ffprobe decodes ${decoded:-0} of the ${sent:-0} frames the endpoint sent it"
    if [ $rc -ne 0 ] || [ -z "$sent" ] || [ "$sent" -eq 0 ] || [ "${decoded:-0}" -lt $((sent * 98 / 100)) ] \
       || ! grep -q '"video/H264"' "$work/whep-pion.out" || ! grep -q '"audio/opus"' "$work/whep-pion.out" \
       || grep -q '"audioPackets":0' "$work/whep-pion.out" || ! grep -q '"deleteStatus":200' "$work/whep-pion.out"; then
      fail "whep-pion FAILED: $(tail -3 "$work/whep-pion.err")"; grep whep~ "$work/whep-h264-endpoint.err" | tail -4
    else
      echo "whep: whep-pion passed"
    fi
  fi
fi
kill -TERM $pe 2>/dev/null
stop_pids
fi

# --- whep-nat: through the NAT lab, relayed
if wants whep-nat; then
if ! command -v iptables >/dev/null || ! command -v turnserver >/dev/null; then
  echo "whep: whep-nat: needs iptables and coturn"
  exit 1
fi
own_work=$work
source scripts/natlab/lab.sh
natlab_start || { natlab_down; rm -rf "$work"; work=$own_work; cleanup; trap - EXIT; exit 1; }
trap 'natlab_down; work=$own_work; cleanup; [ -n "${WHEP_KEEP:-}" ] || rm -rf "$lab_work"' EXIT
lab_work=$work
natlab_nat "$RA" symmetric; natlab_nat "$RB" symmetric
nport=$((7600 + RANDOM % 300))
page_origin="http://10.1.0.2:$page_port"
start_service -n "$S" "$work/serve-nat.log" --listen "$server_ip:7000" --http "$server_ip:$nport" "${serve_tls[@]}" \
  --turn-secret-file "$work/turn-secret" --ice-server "stun:$server_ip:3478" --ice-server "turn:$server_ip:3478?transport=udp" \
  --allowed-origin "$page_origin" || exit 1
(cd "$here" && exec ip netns exec "$A" "$py" -m http.server "$page_port" --bind 10.1.0.2) > "$work/pages.log" 2>&1 &
pids+=($!)
mint roof roof > "$work/roof.token"
mint roof phone --can watch > "$work/phone.token"
ip netns exec "$B" "$bin" join roof --token-file "$work/roof.token" --server "tls://$server_ip:7000" "${join_tls[@]}" --video-size 640x360 \
  --duration 120 --no-stdin --ice-transport relay > "$work/whep-nat-endpoint.out" 2> "$work/whep-nat-endpoint.err" &
pe=$!; pids+=($pe)
wait_for "$work/whep-nat-endpoint.err" "joined room" 30 || exit 1
wait_port "$A" 10.1.0.2 "$page_port" 60 || exit 1
ip netns exec "$A" "$py" "$here/watch.py" "$page_origin/player.html?whep=https://$server_ip:$nport/whep/roof&relay=1${WHEP_DEBUG:+&debug=1}&token=$(cat "$work/phone.token")" \
  --frames 90 --seconds 6 --trust-key "$tls_pin" > "$work/whep-nat-player.out" 2> "$work/whep-nat-player.err"
wait_for "$work/whep-nat-endpoint.err" "done: sent" 15
judge whep-nat || { status=1; tail -5 "$work/whep-nat-player.err"; grep whep "$work/whep-nat-endpoint.err" | tail -8; }
grep -q '"pair": "relay' "$work/whep-nat-player.out" || fail "whep-nat: the player's path is not relayed"
in_ns=(ip netns exec "$A")
time_players whep-nat "$work/whep-nat-endpoint.err" "$page_origin/player.html?whep=https://$server_ip:$nport/whep/roof&relay=1&token=$(cat "$work/phone.token")" --trust-key "$tls_pin"
kill -TERM $pe 2>/dev/null
fi
echo "whep: $([ $status -eq 0 ] && echo passed || echo FAILED)"
exit $status
