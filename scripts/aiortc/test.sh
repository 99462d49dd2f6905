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
start_service "$work/serve.log" --listen 127.0.0.1:0 || exit 1
status=0

run() {  # run NAME FIRST (aiortc|callend)
  local name=$1 first=$2
  local ta tc
  ta=$(mint "$name" aiortc)
  tc=$(mint "$name" callend)
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
  python3 scripts/aiortc/judge.py "$work" "$name" || { status=1; tail -20 "$work/$name-callend.err" "$work/$name-aiortc.err"; }
}

run callend-offers aiortc
run aiortc-offers callend
echo "aiortc-interop: $([ $status -eq 0 ] && echo passed || echo FAILED)"
exit $status
