#!/usr/bin/env bash
# A browser in the room: the page `callend serve --http` serves, in Debian's headless Chromium
# (fake camera and microphone, driven by python3-selenium through chromium-driver), calls a
# `callend join` endpoint. Cases:
#   browser-offers   the endpoint joins first, the browser second (it offers)
#   endpoint-offers  the browser joins first, the endpoint offers
#   h264-browser-offers, h264-endpoint-offers  the same two in H.264 alone (the page's
#                    setCodecPreferences keeps H.264; the endpoint runs --video-codec h264)
#   nat-relay        (root) the NAT lab: the browser behind one symmetric NAT, the endpoint behind
#                    another, coturn on the public side; the page's ICE servers come from the
#                    service; both sides relay-only
# Each case passes when the page decoded >= 150 of the endpoint's video frames with its video
# element playing and received its audio (getStats), and the endpoint decoded >= 40 of the
# browser's VP8 frames (counted in its --video-out recording) and its Opus audio, at least half
# of whose packets came in RED (RFC 2198: callend lists red/48000/2 first, so Chromium sends it),
# and its bandwidth estimate took >= 10 of Chromium's transport-cc feedback packets, in the
# case's codec both ways (its log's media line), with ULPFEC in RED negotiated (in both codecs: callend sends its own video in RED, and the
# page decodes it; Chromium itself sends RED only once its FEC is on, never on this loss-free path, and never for H.264).
# BROWSER_SCREENSHOT=F.png saves the page during the first call (BROWSER_FRAMES=N: once the page
# has decoded N frames, default 150). Skips (exit 77), saying so, where Chromium cannot start at
# all; once it has started, a case where it cannot is a failure, and a case that fails is never
# hidden by a later one. The NAT case needs root; without it the stage is skipped, not passed.
# Removes everything it made.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/wait.sh
source scripts/stage.sh
py=/usr/bin/python3  # Debian's, which has python3-selenium (python3 on PATH may be another)
need_chromium
bin=$(swift build --show-bin-path)/callend
page=$PWD/scripts/browser/page.py
work=$(mktemp -d /tmp/callend-browser.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
status=0
# Whether Chromium has started in this run: after that, one that cannot start is a failure.
started_once=0
skipped=""

# check NAME: judges the page's JSON line and the endpoint's summary and recordings, in $codec.
check() {
  "$py" scripts/browser/judge.py "$work" "$1" "$codec"
}

# run_case NAME FIRST (browser|endpoint) URL_BASE SERVER [PAGE_NS ENDPOINT_NS] [-- JOIN OPTIONS]
run_case() {
  local name=$1 first=$2 base=$3 server=$4 page_ns=${5:-} endpoint_ns=${6:-}
  shift 6 2>/dev/null || shift $#
  local tb te extra=("$@")
  tb=$(mint "$name" browser)
  te=$(mint "$name" endpoint)
  local in_page=() in_endpoint=()
  [ -n "$page_ns" ] && in_page=(ip netns exec "$page_ns")
  [ -n "$endpoint_ns" ] && in_endpoint=(ip netns exec "$endpoint_ns")
  local shot=()
  [ -n "${BROWSER_SCREENSHOT:-}" ] && [ "$name" = browser-offers ] && shot=(--screenshot "$BROWSER_SCREENSHOT")
  local pp pe
  start_page() {
    "${in_page[@]}" "$py" "$page" "$base/?room=$name&token=$tb$page_query" --frames "$frames" --timeout $((frames / 10 + 45)) \
      --ready-file "$work/$name.ready" "${shot[@]}" "${page_extra[@]}" > "$work/$name-page.out" 2> "$work/$name-page.err" &
    pp=$!; pids+=($pp)
  }
  start_endpoint() {
    "${in_endpoint[@]}" env CALLEND_TOKEN="$te" "$bin" join "$name" --server "$server" --video-size 640x360 --duration 90 --no-stdin \
      --video-out "$work/$name.y4m" --audio-out "$work/$name.wav" "${extra[@]}" > "$work/$name-endpoint.out" 2> "$work/$name-endpoint.err" &
    pe=$!; pids+=($pe)
  }
  if [ "$first" = endpoint ]; then
    start_endpoint
    wait_for "$work/$name-endpoint.err" "joined room" 30 || { status=1; return; }
    start_page
  else
    start_page
    # The page has joined (or Chromium could not start: page.py exits 3).
    local deadline=$((SECONDS + 60))
    until [ -s "$work/$name.ready" ] || ! kill -0 "$pp" 2>/dev/null; do
      [ $SECONDS -lt $deadline ] || break
      sleep 0.05
    done
    start_endpoint
  fi
  wait "$pp"; local rc=$?
  if [ $rc -eq 3 ]; then
    if [ $started_once -eq 1 ] || [ $status -ne 0 ]; then
      echo "browser: $name: FAILED: Chromium did not start, though it did before: $(tail -1 "$work/$name-page.err")"
      status=1
      kill "$pe" 2>/dev/null
      return
    fi
    skip "Chromium cannot start here: $(tail -1 "$work/$name-page.err")"
  fi
  started_once=1
  # The page leaves when it has what it needs; the endpoint then ends by itself (bye).
  timeout 30 tail --pid="$pe" -f /dev/null || kill "$pe" 2>/dev/null
  check "$name" || { status=1; echo "--- page"; tail -25 "$work/$name-page.err"; echo "--- endpoint"; grep -v '"change"' "$work/$name-endpoint.err" | tail -15; }
}

start_service "$work/serve.log" --listen 127.0.0.1:0 --http 127.0.0.1:0 || exit 1
sport=$port

# The page's files: the script parses, the HTML's elements close, and the service serves them
# byte for byte as they are in the tree (SwiftPM builds them into the binary).
pagefiles=Sources/SignalingService/Web/Page
if ! node --check "$pagefiles/app.js"; then
  echo "browser: FAILED: $pagefiles/app.js does not parse (node --check)"; exit 1
fi
if ! "$py" scripts/browser/page_files.py "$pagefiles" "$web"; then
  echo "browser: FAILED: the page's files"; exit 1
fi
page_query="" page_extra=() codec=VP8
frames=${BROWSER_FRAMES:-150}
run_case browser-offers endpoint "$web" "127.0.0.1:$sport"
run_case endpoint-offers browser "$web" "127.0.0.1:$sport"
# H.264 alone both ways: the page keeps H.264 (and its RTX, RED, ULPFEC) only, the endpoint runs
# --video-codec h264; each side offers once.
page_query="&codec=h264" codec=H264
run_case h264-browser-offers endpoint "$web" "127.0.0.1:$sport" "" "" --video-codec h264
run_case h264-endpoint-offers browser "$web" "127.0.0.1:$sport" "" "" --video-codec h264
page_query="" codec=VP8

if [ "$(id -u)" -ne 0 ] || ! ip netns list >/dev/null 2>&1 || ! command -v iptables >/dev/null || ! command -v turnserver >/dev/null; then
  echo "browser: nat-relay: SKIPPED: needs root, ip netns, iptables and coturn"
  skipped="nat-relay"
else
  # The NAT lab keeps its own process list, folder and EXIT trap: the loopback service ends
  # first, and the trap set here removes both folders.
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  own_work=$work
  source scripts/natlab/lab.sh
  natlab_start || { rm -rf "$own_work"; exit 1; }
  trap 'natlab_down; rm -rf "$work" "$own_work"' EXIT
  natlab_nat "$RA" symmetric; natlab_nat "$RB" symmetric
  nport=$((7600 + RANDOM % 300))
  start_service -n "$S" "$work/serve-nat.log" --listen "$server_ip:7000" --http "$server_ip:$nport" "${serve_tls[@]}" \
    --turn-secret-file "$work/turn-secret" --ice-server "stun:$server_ip:3478" --ice-server "turn:$server_ip:3478?transport=udp" || exit 1
  # The page over HTTPS with the certificate callend tls made (Chromium trusts its key, as a
  # browser would trust a CA it was given): a secure context, so it sends its camera and microphone.
  page_query="&relay=1" page_extra=(--trust-key "$tls_pin")
  run_case nat-relay endpoint "https://$server_ip:$nport" "tls://$server_ip:7000" "$A" "$B" --ice-transport relay "${join_tls[@]}"
  grep -q "relay" <(sed -n 's/.*"text": "\([^"]*\)".*/\1/p' "$work/nat-relay-page.out") \
    || { echo "browser: nat-relay: the page's path is not relayed"; status=1; }
fi
if [ $status -ne 0 ]; then
  echo "browser: FAILED"
  exit 1
fi
[ -z "$skipped" ] || skip "the other cases passed; $skipped did not run"
echo "browser: passed"
