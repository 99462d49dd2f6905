#!/usr/bin/env bash
# WHIP (RFC 9725) between callend and other stacks. Cases:
#   publish-aiortc  `callend publish` over HTTPS (a private CA, --ca-file) into a WHIP server
#                   written on aiortc (scripts/whip/aiortc_whip_server.py), which records what it
#                   receives to WebM: >= 90 % of the frames callend sent are in the recording and
#                   decode (ffprobe -count_frames), its audio decoded, the session DELETEd at the
#                   end of --duration
#   publish-h264    the same with --video-codec h264: the session is H.264 (aiortc decodes it)
#   publish-pion    `callend publish --video-codec h264` for 20 s into a WHIP server on pion/webrtc
#                   (scripts/pion/whip_server.go) that takes H.264 alone: ffprobe decodes
#                   >= 98 % of the frames callend sent from what pion wrote
#   publish-sigterm publishing without a duration, ended by SIGTERM once media flows: exit 0 and
#                   the server sees the DELETE
#   publish-redirect a 307 is followed to the real endpoint with the same offer
#   publish-refused every refusal is exit 1 with a message that says what it means: a wrong
#                   token (401), 403, 404, 409, 415, 422, 429 (with Retry-After), 500, 503, a 201
#                   that is not SDP and one whose SDP is no answer (whose sessions are DELETEd at
#                   once), an answer from a peer that is gone (ICE fails), a server that is not there
#   publish-leave   'leave' on standard input ends publishing, with the DELETE
#   publish-reports the server negotiates no transport-cc: the automatic mode decides on the loss
#                   its reception reports give (encoder decisions logged), >= 90 % recorded
# Skips, saying so, when aiortc cannot be installed. Removes everything it made.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/wait.sh
source scripts/stage.sh
need_aiortc
command -v ffprobe >/dev/null || skip "needs ffprobe (scripts/install-deps.sh installs ffmpeg)"
bin=$(swift build --show-bin-path)/callend
work=$(mktemp -d /tmp/callend-whip.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  [ -n "${WHIP_KEEP:-}" ] && echo "whip: kept $work" || rm -rf "$work"
}
trap cleanup EXIT
status=0
fail() { echo "whip: $*"; status=1; }

service_tls "$work/tls" localhost || exit 1
echo "whip-token-$RANDOM$RANDOM" > "$work/token"
"$python" scripts/whip/aiortc_whip_server.py --listen 127.0.0.1:0 --token "$(cat "$work/token")" --record "$work/recording.webm" \
  --tls-cert "$work/tls/server.pem" --tls-key "$work/tls/server-key.pem" > "$work/server.log" 2>&1 &
pids+=($!)
wait_for "$work/server.log" "listening on" 30 || { cat "$work/server.log"; exit 1; }
port=$(sed -n 's/listening on 127.0.0.1:\([0-9]*\)/\1/p' "$work/server.log")
base=https://localhost:$port

# publish NAME PATH [ARGS...]: callend publish to base/PATH with the token (token_file, if set)
# and the CA; output in NAME.out / NAME.err.
publish() {
  local name=$1 path=$2
  shift 2
  timeout 90 "$bin" publish "$base$path" --bearer-token-file "${token_file:-$work/token}" --ca-file "$work/tls/ca.pem" --no-stdin "$@" \
    > "$work/$name.out" 2> "$work/$name.err"
}

# publish-aiortc, publish-h264: NAME [ARGS...] publishes for $seconds and judges the recording.
seconds=${WHIP_SECONDS:-10}
publish_recorded() {
  local name=$1
  shift
  publish "$name" /whip/live --video-size 320x240 --duration "$seconds" "$@"
  local rc=$? sent recorded audio
  sent=$(sed -n 's/.*sent \([0-9]*\) frames.*/\1/p' "$work/$name.out")
  recorded=$(decoded_frames v "$work/recording.webm")
  audio=$(decoded_frames a "$work/recording.webm")
  echo "whip: $name: exit $rc; callend sent ${sent:-0} frames; the recording holds ${recorded:-0} decodable video frames and ${audio:-0} audio frames; $(grep -c '^whip-server: DELETE' "$work/server.log") DELETE"
  cat "$work/$name.out"
  if [ $rc -ne 0 ] || [ -z "$sent" ] || [ "$sent" -eq 0 ] || [ "${recorded:-0}" -lt $((sent * 9 / 10)) ] || [ "${audio:-0}" -eq 0 ] \
     || ! grep -q '^whip-server: DELETE' "$work/server.log" || ! grep -q 'session deleted' "$work/$name.out"; then
    fail "$name FAILED"; tail -15 "$work/$name.err"
  else
    echo "whip: $name passed"
  fi
}
publish_recorded publish-aiortc
# H.264 alone (aiortc decodes it with PyAV's libavcodec and records what it decoded).
publish_recorded publish-h264 --video-codec h264
grep -qE "video H264( with ULPFEC in RED)? sendonly" "$work/publish-h264.err" || fail "publish-h264: the session was not H.264: $(grep 'media:' "$work/publish-h264.err")"

# publish-pion: a WHIP server of another stack that takes H.264 alone (pion/webrtc v3, built
# here from Debian's Go packages), over 20 s: it writes what it receives to an Annex B file, and
# ffprobe decodes >= 98 % of the frames callend sent (issue 52).
if build_go "$work/pion-whip" scripts/pion/api.go scripts/pion/whip_server.go > "$work/pion-build.log" 2>&1; then
  "$work/pion-whip" -out "$work/pion.h264" -token "$(cat "$work/token")" > "$work/pion.log" 2>&1 &
  pids+=($!)
  if wait_for "$work/pion.log" "listening on" 30; then
    pion_port=$(sed -n 's/listening on 127.0.0.1:\([0-9]*\)/\1/p' "$work/pion.log")
    timeout 90 "$bin" publish "http://127.0.0.1:$pion_port/whip" --bearer-token-file "$work/token" --no-stdin --video-codec h264 \
      --video-size 320x240 --duration "${WHIP_PION_SECONDS:-20}" > "$work/publish-pion.out" 2> "$work/publish-pion.err"
    rc=$?
    sent=$(sed -n 's/.*sent \([0-9]*\) frames.*/\1/p' "$work/publish-pion.out")
    decoded=$(decoded_frames v "$work/pion.h264" -f h264)
    echo "whip: publish-pion: exit $rc; callend sent ${sent:-0} frames; ffprobe decodes ${decoded:-0} from what pion received; pion said $(grep '^{' "$work/pion.log" | tail -1)"
    cat "$work/publish-pion.out"
    if [ $rc -eq 0 ] && [ "${sent:-0}" -gt 0 ] && [ "${decoded:-0}" -ge $((sent * 98 / 100)) ] && grep -q '"video/H264"' "$work/pion.log" \
       && grep -q 'video H264 sendonly' "$work/publish-pion.err" && grep -q 'session deleted' "$work/publish-pion.out"; then
      echo "whip: publish-pion passed"
    else
      fail "publish-pion FAILED"; tail -8 "$work/publish-pion.err"; tail -5 "$work/pion.log"
    fi
  else
    fail "publish-pion FAILED: the pion server did not start: $(tail -3 "$work/pion.log")"
  fi
else
  fail "publish-pion FAILED: the pion server did not build: $(tail -5 "$work/pion-build.log")"
fi

# publish-sigterm
deletes=$(grep -c '^whip-server: DELETE' "$work/server.log")
timeout 90 "$bin" publish "$base/whip/live" --bearer-token-file "$work/token" --ca-file "$work/tls/ca.pem" --no-stdin --video-size 320x240 \
  > "$work/publish-sigterm.out" 2> "$work/publish-sigterm.err" &
pp=$!; pids+=($pp)
if wait_for "$work/publish-sigterm.err" "dtls: connected" 30; then
  kill -TERM $pp
  wait $pp; rc=$?
  after=$(grep -c '^whip-server: DELETE' "$work/server.log")
  if [ $rc -eq 0 ] && [ "$after" -eq $((deletes + 1)) ] && grep -q 'ended: stopped' "$work/publish-sigterm.out"; then
    echo "whip: publish-sigterm passed ($(cat "$work/publish-sigterm.out"))"
  else
    fail "publish-sigterm FAILED: exit $rc, DELETEs $deletes -> $after"; cat "$work/publish-sigterm.out"; tail -5 "$work/publish-sigterm.err"
  fi
else
  fail "publish-sigterm FAILED: no media"; tail -10 "$work/publish-sigterm.err"
fi

# publish-redirect
publish publish-redirect /redirect --video-size 160x120 --duration 3
rc=$?
if [ $rc -eq 0 ] && grep -q 'session deleted' "$work/publish-redirect.out" && grep -q "session $base/whip/session/" "$work/publish-redirect.err"; then
  echo "whip: publish-redirect passed"
else
  fail "publish-redirect FAILED: exit $rc"; cat "$work/publish-redirect.out"; tail -5 "$work/publish-redirect.err"
fi

# publish-refused: PATH, what the message must say
refused() {
  local name=$1 path=$2 expect=$3
  shift 3
  publish "refused-$name" "$path" --video-size 160x120 --duration 3 "$@"
  local rc=$?
  if [ $rc -eq 1 ] && grep -qF -- "$expect" "$work/refused-$name.err"; then
    echo "whip: publish-refused $name: exit 1, \"$(tail -1 "$work/refused-$name.err" | cut -c1-220)\""
  else
    fail "publish-refused $name FAILED: exit $rc, expected \"$expect\" in:"; tail -3 "$work/refused-$name.err"
  fi
}
echo "not-the-token" > "$work/wrong-token"
token_file=$work/wrong-token refused 401 /whip/live "refused the bearer token (401"
refused 403 /status/403 "(403 Forbidden)"
refused 404 /nowhere "(404 Not Found)"
refused 409 /status/409 "a conflict (409)"
refused 415 /status/415 "(415 Unsupported Media Type)"
refused 422 /status/422 "cannot use the description (422"
refused 429 /status/429 "retry after 7 s"
refused 500 /status/500 "the server failed (500"
refused 503 /status/503 "unavailable (503): retry after 7 s"
refused not-sdp /wrong-type "not application/sdp"
grep -q "DELETE of the session /wrong-type made" "$work/server.log" || fail "publish-refused not-sdp FAILED: the session the unusable 201 made was not DELETEd"
refused bad-sdp /bad-sdp "not a usable SDP answer"
grep -q "DELETE of the session /bad-sdp made" "$work/server.log" || fail "publish-refused bad-sdp FAILED: its session was not DELETEd"
refused no-ice /no-ice "ICE failed: no candidate pair works"
grep -q "DELETE of the session /no-ice made" "$work/server.log" || fail "publish-refused no-ice FAILED: its session was not DELETEd"
# publish-leave: 'leave' on standard input ends publishing, with the DELETE.
mkfifo "$work/commands"
timeout 90 "$bin" publish "$base/whip/live" --bearer-token-file "$work/token" --ca-file "$work/tls/ca.pem" --video-size 160x120 \
  < "$work/commands" > "$work/publish-leave.out" 2> "$work/publish-leave.err" &
pl=$!; pids+=($pl)
exec 7> "$work/commands"
before=$(grep -c '^whip-server: DELETE [0-9a-f]' "$work/server.log")
if wait_for "$work/publish-leave.err" "dtls: connected" 30; then
  echo leave >&7
  wait $pl; rc=$?
  if [ $rc -eq 0 ] && grep -q '"command":"leave"' "$work/publish-leave.out" && grep -q 'session deleted; ended: stopped' "$work/publish-leave.out" \
     && [ "$(grep -c '^whip-server: DELETE [0-9a-f]' "$work/server.log")" -eq $((before + 1)) ]; then
    echo "whip: publish-leave passed"
  else
    fail "publish-leave FAILED: exit $rc"; cat "$work/publish-leave.out"
  fi
else
  fail "publish-leave FAILED: no media"
fi
exec 7>&-
timeout 30 "$bin" publish "https://localhost:1/whip/live" --ca-file "$work/tls/ca.pem" --no-stdin --duration 3 > /dev/null 2> "$work/refused-nobody.err"
rc=$?
if [ $rc -eq 1 ] && grep -q "connect to localhost:1" "$work/refused-nobody.err"; then
  echo "whip: publish-refused nobody: exit 1, \"$(tail -1 "$work/refused-nobody.err")\""
else
  fail "publish-refused nobody FAILED: exit $rc"; tail -3 "$work/refused-nobody.err"
fi
posts=$(grep -c '^whip-server: POST [0-9a-f]\{12\}$' "$work/server.log") deletes=$(grep -c '^whip-server: DELETE [0-9a-f]' "$work/server.log")
if [ "$posts" -ne "$deletes" ]; then
  fail "a session was left on the server: $posts sessions made, $deletes DELETEd"
fi
# publish-reports: a server that negotiates no transport-cc (reception reports only): the
# automatic mode still decides, on the loss the reports give.
"$python" scripts/whip/aiortc_whip_server.py --listen 127.0.0.1:0 --token "$(cat "$work/token")" --record "$work/reports.webm" \
  --no-transport-cc > "$work/server-reports.log" 2>&1 &
pids+=($!)
wait_for "$work/server-reports.log" "listening on" 30 || exit 1
rport=$(sed -n 's/listening on 127.0.0.1:\([0-9]*\)/\1/p' "$work/server-reports.log")
timeout 90 "$bin" publish "http://127.0.0.1:$rport/whip/live" --bearer-token-file "$work/token" --no-stdin --video-size 320x240 --duration 10 \
  > "$work/reports.out" 2> "$work/reports.err"
rc=$?
sent=$(sed -n 's/.*sent \([0-9]*\) frames.*/\1/p' "$work/reports.out")
recorded=$(decoded_frames v "$work/reports.webm")
decisions=$(grep -c '"cause":"increase"' "$work/reports.err")
probes=$(grep -c '"cause":"probe"' "$work/reports.err")
echo "whip: publish-reports: exit $rc; ${decisions} encoder decisions on reported loss, ${probes} on transport-cc probes (none can come); recorded ${recorded:-0} of ${sent:-0} frames"
if [ $rc -eq 0 ] && [ "$decisions" -ge 1 ] && [ "$probes" -eq 0 ] && [ "${recorded:-0}" -ge $((${sent:-1} * 9 / 10)) ]; then
  echo "whip: publish-reports passed"
else
  fail "publish-reports FAILED"; tail -8 "$work/reports.err"
fi
echo "whip: $([ $status -eq 0 ] && echo passed || echo FAILED)"
exit $status
