#!/usr/bin/env bash
# Data channels (RFC 8831, DCEP RFC 8832, SCTP over the call's DTLS) through `callend join
# --data-socket`, with video and audio running beside them. Cases, each a fresh room:
#   callend         two endpoints: 200 small lines and 640 big ones (10 MiB) each way on the
#                   reliable channel, all in order and every byte (SHA-256); 200 pings at 20 Hz
#                   one way: message latency; 10 MiB in bytes mode: throughput
#   aiortc-*        aiortc as the peer, in both offer directions: the reliable channel as above,
#                   and an unreliable one (unordered, no retransmissions) both ways, whose
#                   options aiortc must see as callend announced them
#   chromium-*      the callend page in headless Chromium, in both offer directions: a line
#                   typed into its console, then 200 small lines and 10 MiB each way on its
#                   channel; and an unreliable channel both ways (?data=unreliable)
# Prints the figures (throughput, latency); skips, saying so, only where neither aiortc nor
# Chromium can run at all.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/wait.sh
source scripts/stage.sh
bin=$(swift build --show-bin-path)/callend
py=/usr/bin/python3
peer=$PWD/scripts/datachannel/socket_peer.py
work=$(mktemp -d /tmp/callend-datachannel.XXXXXX)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; [ -n "${DATACHANNEL_KEEP:-}" ] || rm -rf "$work"' EXIT
start_service "$work/serve.log" --listen 127.0.0.1:0 --http 127.0.0.1:0 || exit 1
status=0

# join ROOM NAME SECONDS [OPTIONS...]: a callend endpoint in the background (pid in $joined).
join() {
  local room=$1 name=$2 seconds=$3
  shift 3
  CALLEND_TOKEN=$(mint "$room" "$name") "$bin" join "$room" --server "127.0.0.1:$port" --video-size 320x240 --duration "$seconds" --no-stdin \
    "$@" > "$work/$room-$name.out" 2> "$work/$room-$name.err" &
  joined=$!; pids+=($joined)
}

# judge NAME PYTHON-EXPRESSION FILES...: the case passes when the expression over the JSON
# lines of FILES (j[0], j[1], ...) is true.
judge() {
  local name=$1 expression=$2
  shift 2
  "$py" scripts/datachannel/judge.py "$name" "$expression" "$@" || { status=1; for f in "${@}"; do echo "--- $f"; tail -5 "$f"; done; }
}

# --- callend and callend ------------------------------------------------------------------
room=callend
join $room alice 60 --data-socket "$work/alice.sock"
a=$joined
wait_for "$work/$room-alice.err" "joined room" 30 || exit 1
join $room bob 60 --data-socket "$work/bob.sock"
b=$joined
"$py" "$peer" "$work/alice.sock" lines --name callend --peer callend --send 200 --big 640 --expect 200 --expect-big 640 > "$work/lines-alice.json" &
l1=$!
"$py" "$peer" "$work/bob.sock" lines --name callend --peer callend --send 200 --big 640 --expect 200 --expect-big 640 > "$work/lines-bob.json"
wait $l1
judge "callend: 200 small and 640 big lines (10 MiB) each way, in order, every byte" \
  'all(x.get("small") == 200 and x.get("outOfOrder") == 0 and x.get("big") == 640 and x.get("bigOk") for x in j)' "$work/lines-alice.json" "$work/lines-bob.json"
"$py" "$peer" "$work/bob.sock" pong --count 200 > "$work/pong.json" &
l2=$!
"$py" "$peer" "$work/alice.sock" ping --count 200 --interval 0.05
wait $l2
judge "callend: 200 pings at 20 Hz arrive" 'j[0].get("count") == 200' "$work/pong.json"
"$py" scripts/datachannel/judge_lines.py "$work/lines-alice.json" "$work/lines-bob.json" "$work/pong.json"
kill $a $b 2>/dev/null; wait $a $b 2>/dev/null
room=callend-bytes
join $room alice 60 --data-socket "$work/alice-bytes.sock" --data-mode bytes
a=$joined
wait_for "$work/$room-alice.err" "joined room" 30 || exit 1
join $room bob 60 --data-socket "$work/bob-bytes.sock" --data-mode bytes
b=$joined
"$py" "$peer" "$work/bob-bytes.sock" recv-bytes --size 10485760 > "$work/recv.json" &
l3=$!
"$py" "$peer" "$work/alice-bytes.sock" send-bytes --size 10485760 > /dev/null
wait $l3
judge "callend: 10 MiB in bytes mode, every byte" 'j[0].get("received") == 10485760 and j[0]["sha256"] == j[0]["expected"]' "$work/recv.json"
"$py" -c "import json,sys; r=json.loads(open(sys.argv[1]).read().splitlines()[-1]); print(f\"datachannel: callend -> callend bytes mode: 10 MiB in {r['seconds']} s = {r['mbitPerSecond']} Mbit/s, with video running\")" "$work/recv.json"
kill $a $b 2>/dev/null; wait $a $b 2>/dev/null
grep -h "data: channel" "$work"/callend*-alice.err | head -2 | sed 's/^/datachannel: alice: /'

# --- aiortc -------------------------------------------------------------------------------
ran_outside=0
python=.build/bench-venv/bin/python
if ! "$python" -c "import aiortc" 2>/dev/null; then bash scripts/congestion/setup-bench.sh >/dev/null 2>&1 || true; fi
if "$python" -c "import aiortc" 2>/dev/null; then
  ran_outside=1
  # aiortc_case ROOM FIRST(callend|aiortc) LABEL UNRELIABLE(0|1) SMALL BIG
  aiortc_case() {
    local room=$1 first=$2 label=$3 unreliable=$4 small=$5 big=$6 extra=() aextra=()
    [ "$unreliable" = 1 ] && { extra=(--data-unreliable); aextra=(--data-unreliable --data-idle 3); }
    start_aiortc() {
      "$python" scripts/aiortc/participant.py --server "127.0.0.1:$port" --room "$room" --token "$(mint "$room" aiortc)" --seconds 3 \
        --data-label "$label" "${aextra[@]}" --data-send "$small" --data-big "$big" --data-expect "$small" --data-expect-big "$big" --data-done-file "$work/$room.done" \
        > "$work/$room-aiortc.out" 2> "$work/$room-aiortc.err" &
      pa=$!; pids+=($pa)
    }
    if [ "$first" = callend ]; then
      join "$room" callend 90 --data-socket "$work/$room.sock" --data-label "$label" "${extra[@]}"
      wait_for "$work/$room-callend.err" "joined room" 30 || { status=1; return; }
      start_aiortc
    else
      start_aiortc
      wait_for "$work/$room-aiortc.err" "joined room" 30 || { status=1; return; }
      join "$room" callend 90 --data-socket "$work/$room.sock" --data-label "$label" "${extra[@]}"
    fi
    local pc=$joined
    local order=()
    [ "$unreliable" = 1 ] && order=(--unordered --idle 3)
    "$py" "$peer" "$work/$room.sock" lines --name callend --peer aiortc --send "$small" --big "$big" --expect "$small" --expect-big "$big" --timeout 60 \
      "${order[@]}" > "$work/$room-socket.json"
    touch "$work/$room.done"
    timeout 90 tail --pid="$pa" -f /dev/null
    kill $pc 2>/dev/null; wait $pc 2>/dev/null
    # Small lines: all, in order, on a reliable channel. On an unreliable one a burst of them
    # may lose some for good (a datagram dropped on a loaded machine is never sent again): at
    # least a quarter, in any order, and no more than were sent.
    local ordered=True retransmits=None came="x.get('small') == $small"
    [ "$unreliable" = 1 ] && { ordered=False; retransmits=0; came="$small // 4 <= x.get('small', 0) + x.get('outOfOrder', 0) <= $small"; }
    judge "$room: $small small and $big big lines each way on '$label'$([ "$unreliable" = 1 ] && echo ' (unordered, no retransmissions)')" \
      "all($came and x.get('big') == $big and x.get('bigOk') for x in [j[0], j[1].get('data', {})]) and j[1]['data'].get('peerChannel', {}).get('ordered') == $ordered and j[1]['data']['peerChannel'].get('maxRetransmits') == $retransmits" \
      "$work/$room-socket.json" "$work/$room-aiortc.out"
  }
  aiortc_case aiortc-callend-offers callend callend 0 200 640
  aiortc_case aiortc-aiortc-offers aiortc callend 0 200 640
  # Unreliable on loopback loses nothing: what is checked is that both sides agreed on it.
  aiortc_case aiortc-unreliable callend telemetry 1 500 0
else
  echo "datachannel: aiortc could not be installed from PyPI into .build/bench-venv: its cases did not run"
  status=1
fi

# --- Chromium -----------------------------------------------------------------------------
if has_chromium; then
  ran_outside=1
  # chromium_case ROOM FIRST(callend|chromium) UNRELIABLE(0|1) SMALL BIG: the socket also gets
  # the one line typed into the page's console (outOfOrder 1: it is not one of the numbered).
  chromium_case() {
    local room=$1 first=$2 unreliable=$3 small=$4 big=$5 query="" extra=()
    local idle=()
    [ "$unreliable" = 1 ] && { query="&data=unreliable&data-label=telemetry"; extra=(--data-label telemetry --data-unreliable); idle=(--data-idle 3); }
    start_page() {
      "$py" scripts/browser/page.py "$web/?room=$room&token=$(mint "$room" chromium)$query" --frames 30 --timeout 60 --ready-file "$work/$room.ready" \
        --data-send "$small" --data-big "$big" --data-expect "$small" --data-expect-big "$big" --data-done-file "$work/$room.done" "${idle[@]}" \
        > "$work/$room-page.out" 2> "$work/$room-page.err" &
      pp=$!; pids+=($pp)
    }
    if [ "$first" = callend ]; then
      join "$room" callend 120 --data-socket "$work/$room.sock" "${extra[@]}"
      wait_for "$work/$room-callend.err" "joined room" 30 || { status=1; return; }
      start_page
    else
      start_page
      local deadline=$((SECONDS + 60))
      until [ -s "$work/$room.ready" ] || ! kill -0 "$pp" 2>/dev/null || [ $SECONDS -ge $deadline ]; do sleep 0.05; done
      join "$room" callend 120 --data-socket "$work/$room.sock" "${extra[@]}"
    fi
    local pc=$joined
    # The console's line comes too: in order before the numbered ones, or anywhere among them.
    local expect=$small order=()
    [ "$unreliable" = 1 ] && { expect=$((small + 1)); order=(--unordered --idle 3); }
    "$py" "$peer" "$work/$room.sock" lines --name callend --peer chromium --send "$small" --big "$big" --expect "$expect" --expect-big "$big" --timeout 90 \
      "${order[@]}" > "$work/$room-socket.json"
    touch "$work/$room.done"
    wait "$pp"
    kill $pc 2>/dev/null; wait $pc 2>/dev/null
    if [ "$unreliable" = 1 ]; then
      judge "$room: $small small lines each way (at least a quarter: see aiortc-unreliable), unordered with no retransmissions, as both sides see the other's channel" \
        "$small // 4 <= j[0].get('small', 0) + j[0].get('outOfOrder', 0) <= $small + 1 and $small // 4 <= j[1].get('data', {}).get('small', 0) + j[1]['data'].get('outOfOrder', 0) <= $small and (j[1]['data'].get('peerChannel') or {}).get('ordered') is False and j[1]['data']['peerChannel'].get('maxRetransmits') == 0" \
        "$work/$room-socket.json" "$work/$room-page.out"
    else
      judge "$room: the console's typed line, $small small and $big big lines (10 MiB) each way" \
        "j[0].get('small') == $small and j[0].get('outOfOrder') == 1 and j[0].get('big') == $big and j[0].get('bigOk') and j[1].get('data', {}).get('small') == $small and j[1]['data'].get('big') == $big and j[1]['data'].get('bigOk') and j[1]['data'].get('outOfOrder') == 0" \
        "$work/$room-socket.json" "$work/$room-page.out"
    fi
  }
  chromium_case chromium-callend-offers callend 0 200 640
  chromium_case chromium-chromium-offers chromium 0 200 640
  chromium_case chromium-unreliable chromium 1 500 0
else
  echo "datachannel: no Chromium, chromium-driver or python3-selenium: its cases did not run"
  status=1
fi
[ $ran_outside -eq 1 ] || skip "neither aiortc nor Chromium could run here"
echo "datachannel: $([ $status -eq 0 ] && echo passed || echo FAILED)"
exit $status
