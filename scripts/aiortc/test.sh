#!/usr/bin/env bash
# aiortc (PyPI) as the peer of a `callend join`, through `callend serve`: both offer directions
# (aiortc joins first and callend offers; callend joins first and aiortc offers). Each side must
# decode >= 90 % of the video frames the other sent, and audio. Proves the SDP, ICE and DTLS-SRTP
# are standard, not only self-consistent. Skips, saying so, when aiortc cannot be installed.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/wait.sh
source scripts/stage.sh
need_aiortc
bin=$(swift build --show-bin-path)/callend
seconds=${AIORTC_SECONDS:-8}
work=$(mktemp -d /tmp/callend-aiortc.XXXXXX)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$work"' EXIT
"$bin" token --new-secret --out "$work/secret"
"$bin" serve --listen 127.0.0.1:0 --secret-file "$work/secret" > "$work/serve.log" 2>&1 &
pids+=($!)
wait_for "$work/serve.log" "listening on" 30 || exit 1
port=$(sed -n 's/listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$work/serve.log")
status=0

run() {  # run NAME FIRST (aiortc|callend)
  local name=$1 first=$2
  local ta tc
  ta=$("$bin" token --room "$name" --identity aiortc --secret-file "$work/secret")
  tc=$("$bin" token --room "$name" --identity callend --secret-file "$work/secret")
  start_callend() {
    CALLEND_TOKEN=$tc "$bin" join "$name" --server "127.0.0.1:$port" --video-size 320x240 --duration "$seconds" --no-stdin \
      > "$work/$name-callend.out" 2> "$work/$name-callend.err" &
    pc=$!; pids+=($pc)
  }
  start_aiortc() {
    "$python" scripts/aiortc/participant.py --server "127.0.0.1:$port" --room "$name" --token "$ta" --seconds "$seconds" \
      > "$work/$name-aiortc.out" 2> "$work/$name-aiortc.err" &
    pa=$!; pids+=($pa)
  }
  if [ "$first" = callend ]; then
    start_callend
    wait_for "$work/$name-callend.err" "joined room" 30 || { status=1; return; }
    start_aiortc
  else
    start_aiortc
    wait_for "$work/$name-aiortc.err" "joined room" 30 || { status=1; return; }
    start_callend
  fi
  timeout $((seconds + 60)) tail --pid="$pa" -f /dev/null; timeout $((seconds + 60)) tail --pid="$pc" -f /dev/null
  python3 - "$work" "$name" <<'PY' || { status=1; tail -20 "$work/$name-callend.err" "$work/$name-aiortc.err"; }
import json, re, sys
work, name = sys.argv[1:]
callend = open(f"{work}/{name}-callend.out").read()
lines = [l for l in open(f"{work}/{name}-aiortc.out").read().splitlines() if l.startswith("{")]
aiortc = json.loads(lines[-1]) if lines else {}
decoded = int((re.search(r"video (\d+) frames decoded", callend) or [0, 0])[1])
audio = int((re.search(r"audio (\d+) decoded", callend) or [0, 0])[1])
sent = int((re.search(r"sent (\d+) frames", callend) or [0, 0])[1])
ok = True
print(f"aiortc-interop: {name}: callend decoded {decoded} of aiortc's {aiortc.get('videoFramesSent', 0)} frames, {audio} audio frames")
print(f"aiortc-interop: {name}: aiortc decoded {aiortc.get('videoFrames', 0)} of callend's {sent} frames ({aiortc.get('videoSize')}), {aiortc.get('audioFrames', 0)} audio frames; connection {aiortc.get('connection')}")
if not aiortc.get("videoFramesSent") or decoded < 0.9 * aiortc["videoFramesSent"] or audio == 0: ok = False
if not sent or aiortc.get("videoFrames", 0) < 0.9 * sent or not aiortc.get("audioFrames"): ok = False
print(f"aiortc-interop: {name}: {'passed' if ok else 'FAILED'}")
sys.exit(0 if ok else 1)
PY
}

run callend-offers aiortc
run aiortc-offers callend
echo "aiortc-interop: $([ $status -eq 0 ] && echo passed || echo FAILED)"
exit $status
