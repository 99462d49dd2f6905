#!/usr/bin/env bash
# The loss bench (root: network namespaces). Two hosts, A (10.71.1.2) and B (10.71.2.2), call
# each other through router R, which drops the UDP it forwards to either host at random
# (iptables' statistic match on the way out to each host, so each direction loses P) and, for an
# RTT of 100 ms, holds every forwarded packet 50 ms in a user-space relay (callend bench
# delay-relay) on the way. The same calls run with callend on both hosts and with headless
# Chromium on both hosts (the page of callend serve, its fake camera playing the same clip at
# 640x480@30), and every shown picture is timed: callend's receiver counts gaps between decoded
# pictures, the page times its video element's pictures (requestVideoFrameCallback). Freezes are
# gaps >= 300 ms after the first 5 s, counted the same way for both.
#
# usage: scripts/loss/bench.sh [--seconds S] [--runs N] [--cases "5@1 10@100 ge@1 ..."]
#                              [--stacks "callend chromium"] [--traces DIR] [--out DIR] [--video-codec vp8|h264]
#   --video-codec: both stacks' video (callend's --video-codec, the page's setCodecPreferences).
#   a case is LOSS@RTT: LOSS a percentage or ge (Gilbert-Elliott bursts: 1 % loss for 2 s on
#   average, then 40 % for 0.2 s, about 4.5 % in all); RTT 1 (the path's own) or 100 (50 ms
#   each way). Default: 5@1 10@1 20@1 5@100 10@100 20@100 ge@1 ge@100, 120 s each, one run.
#   Or TRACE@cell, a cellular link (att, tmobile, verizon: mahimahi's ATT-LTE-driving-2016,
#   TMobile-LTE-short and Verizon-LTE-short traces, read from --traces DIR, a copy of the
#   traces folder of https://github.com/ravinet/mahimahi, or $CELLULAR_TRACES): R carries every
#   packet over 'callend bench cellular-link', A's uplink the trace's .up and its downlink its
#   .down, each a 150-packet drop-tail queue, with 30 ms each way.
# Prints a table per case (frames shown per second, freezes per minute, the longest gap, mean
# resolution, ICE restarts, audio concealed) and the goal: callend shows >= Chromium's frames per
# second, no more freezes than Chromium, <= 0.2 freezes per minute and no ICE restart. A
# cellular case is judged per direction (up: what B shows of A; down: what A shows of B) and adds
# frame delay from capture to display (p50, p95), the link's utilization, and callend's seconds
# at the video floor while the trace offered >= 1 Mbit/s; its goal: no more freezes than
# Chromium, frames shown >= Chromium's - 1, delay p95 <= 0.5x Chromium's, 0 s at the floor, no
# ICE restart. Writes results.csv and each run's logs and JSON to DIR (default loss-bench).
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/stage.sh
seconds=120 runs=1 out=loss-bench stacks="callend chromium" traces=${CELLULAR_TRACES:-} codec=vp8
cases="5@1 10@1 20@1 5@100 10@100 20@100 ge@1 ge@100"
while [ $# -gt 0 ]; do
  case $1 in
    --seconds) seconds=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --cases) cases=$2; shift 2 ;;
    --stacks) stacks=$2; shift 2 ;;
    --traces) traces=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --video-codec) codec=$2; shift 2 ;;
    -h|--help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "loss bench: unknown argument $1 (--help)" >&2; exit 2 ;;
  esac
done
[[ $seconds =~ ^[0-9]+$ ]] && [ "$seconds" -ge 20 ] || { echo "loss bench: --seconds must be a whole number >= 20" >&2; exit 2; }
[[ $runs =~ ^[0-9]+$ ]] && [ "$runs" -ge 1 ] || { echo "loss bench: --runs must be >= 1" >&2; exit 2; }
[[ $codec == vp8 || $codec == h264 ]] || { echo "loss bench: --video-codec takes vp8 or h264: $codec" >&2; exit 2; }
declare -A trace_file=([att]=ATT-LTE-driving-2016 [tmobile]=TMobile-LTE-short [verizon]=Verizon-LTE-short)
for c in $cases; do
  [[ $c =~ ^([0-9]+|ge)@(1|100)$ || $c =~ ^(att|tmobile|verizon)@cell$ ]] || { echo "loss bench: a case is LOSS@RTT (5@1, ge@100) or TRACE@cell (att@cell): $c" >&2; exit 2; }
  if [[ $c == *@cell ]]; then
    for d in up down; do
      [ -r "$traces/${trace_file[${c%@*}]}.$d" ] || { echo "loss bench: $c needs $traces/${trace_file[${c%@*}]}.$d: give --traces DIR (mahimahi's traces folder)" >&2; exit 2; }
    done
  fi
done
for s in $stacks; do
  case $s in callend|chromium) ;; *) echo "loss bench: stacks are callend and chromium: $s" >&2; exit 2 ;; esac
done
[ "$(id -u)" -eq 0 ] && ip netns list >/dev/null 2>&1 || skip "needs root and ip netns"
bin=${CALLEND_BIN:-$(swift build -c release --show-bin-path)/callend}
[ -x "$bin" ] || { echo "loss bench: no $bin (swift build -c release, or CALLEND_BIN)" >&2; exit 1; }
py=/usr/bin/python3
mkdir -p "$out"
out=$(cd "$out" && pwd)
source scripts/netns-topology.sh
topology_start loss

clip=$work/clip.y4m
ffmpeg -loglevel error -f lavfi -i testsrc2=size=640x480:rate=30 -t 4 -pix_fmt yuv420p "$clip" || { echo "loss bench: ffmpeg could not make the clip"; exit 1; }
"$bin" token --new-secret --out "$work/secret"
service_tls "$work/tls" 10.71.1.2 || exit 1

# Loss on the way out of R to each host: one rule per host, so a packet that also passes the
# delay relay is dropped at most once.
loss_rules() {  # loss_rules PERCENT: replaces both rules
  local p
  p=$("$py" -c "print('%.4f' % ($1 / 100))")
  ip netns exec "$r" iptables -F FORWARD
  for dev in "${tag}ra" "${tag}rb"; do
    ip netns exec "$r" iptables -A FORWARD -o "$dev" -p udp -m statistic --mode random --probability "$p" -j DROP
  done
}
delay_pid=""
delay_on() {  # delay_on [BENCH ARGS...]: a relay on TUN device ${tag}d (default: 50 ms of delay) carries what R forwards
  local relay=("$@")
  [ ${#relay[@]} -gt 0 ] || relay=(delay-relay --delay-ms 50)
  ip netns exec "$r" "$bin" bench "${relay[@]}" --device "${tag}d" > "$work/relay.log" 2>&1 &
  delay_pid=$!; pids+=($delay_pid)
  wait_for "$work/relay.log" "relaying on ${tag}d" 10 || { echo "loss bench: the delay relay did not start"; cat "$work/relay.log"; exit 1; }
  ip -n "$r" link set "${tag}d" up
  for key in all default "${tag}d"; do ip netns exec "$r" sysctl -q -w "net.ipv4.conf.$key.rp_filter=0"; done
  ip -n "$r" route add default dev "${tag}d" table 100
  for dev in "${tag}ra" "${tag}rb"; do ip -n "$r" rule add iif "$dev" lookup 100; done
}
delay_off() {
  [ -n "$delay_pid" ] || return 0
  for dev in "${tag}ra" "${tag}rb"; do ip -n "$r" rule del iif "$dev" lookup 100 2>/dev/null; done
  kill "$delay_pid" 2>/dev/null; wait "$delay_pid" 2>/dev/null
  delay_pid=""
}

# run_callend DIR: the two endpoints for $seconds (plus the time to meet).
run_callend() {
  local dir=$1 who ns
  ip netns exec "$a" "$bin" serve --listen 10.71.1.2:7000 --secret-file "$work/secret" "${serve_tls[@]}" > "$dir/serve.log" 2>&1 &
  local serve=$!; pids+=($serve)
  wait_for "$dir/serve.log" "listening on" 30 || { echo "loss bench: the service did not start"; return 1; }
  local joins=()
  for who in a b; do
    ns=${!who}
    ip netns exec "$ns" env CALLEND_TOKEN="$("$bin" token --room loss --identity "$who" --secret-file "$work/secret")" \
      "$bin" join loss --server tls://10.71.1.2:7000 "${join_tls[@]}" --video-source "$clip" --video-size 640x480 --measure-latency \
      --video-codec "$codec" --duration $((seconds + 10)) --no-stdin > "$dir/$who.out" 2> "$dir/$who.log" &
    joins+=($!); pids+=($!)
    [ $who = a ] && { wait_for "$dir/a.log" "joined room" 30 || return 1; }
  done
  for p in "${joins[@]}"; do wait "$p"; done
  kill "$serve" 2>/dev/null; wait "$serve" 2>/dev/null
}

# run_chromium DIR: the page on both hosts, each timing what it shows for $seconds.
run_chromium() {
  local dir=$1 who ns port=$((7600 + RANDOM % 300))
  ip netns exec "$a" "$bin" serve --listen 10.71.1.2:7000 --http "10.71.1.2:$port" --secret-file "$work/secret" "${serve_tls[@]}" > "$dir/serve.log" 2>&1 &
  local serve=$!; pids+=($serve)
  wait_for "$dir/serve.log" "web page at" 30 || { echo "loss bench: the service did not start"; return 1; }
  local pages=() until=$(( $(date +%s) + 20 + seconds ))  # 20 s to start both and meet
  for who in a b; do
    ns=${!who}
    ip netns exec "$ns" "$py" scripts/browser/page.py "https://10.71.1.2:$port/?room=loss$([ "$codec" = h264 ] && echo "&codec=h264")&token=$("$bin" token --room loss --identity "$who" --secret-file "$work/secret")" \
      --trust-key "$tls_pin" --fake-video "$clip" --frames 30 --timeout 60 --run-until "$until" \
      --collected-file "$dir/$who.collected" --peer-collected-file "$dir/$([ $who = a ] && echo b || echo a).collected" \
      --ready-file "$dir/$who.ready" > "$dir/$who.json" 2> "$dir/$who.err" &
    pages+=($!); pids+=($!)
    [ $who = a ] && { wait_for "$dir/a.ready" "" 60 || { echo "loss bench: the first page did not join"; return 1; }; }
  done
  for p in "${pages[@]}"; do wait "$p"; done
  kill "$serve" 2>/dev/null; wait "$serve" 2>/dev/null
}

rtt_now=1
for c in $cases; do
  loss=${c%@*} rtt=${c#*@}
  if [ "$rtt" != "$rtt_now" ] || [ "$rtt" = cell ]; then
    delay_off
    [ "$rtt" = 100 ] && delay_on
    rtt_now=$rtt
  fi
  for stack in $stacks; do
    for run in $(seq 1 "$runs"); do
      dir=$out/$stack-$loss-$rtt-$run
      rm -rf "$dir"; mkdir -p "$dir"
      ge=""
      if [ "$rtt" = cell ]; then
        # A fresh link for each run: both stacks start at the trace's beginning.
        delay_off
        loss_rules 0
        delay_on cellular-link --uplink "$traces/${trace_file[$loss]}.up" --downlink "$traces/${trace_file[$loss]}.down" \
          --uplink-to 10.71.2.0/24 --delay-ms 30 --queue 150 --log "$dir/link.log"
      elif [ "$loss" = ge ]; then
        loss_rules 0
        ip netns exec "$r" "$py" scripts/loss/gilbert.py "${tag}ra" "${tag}rb" > "$dir/gilbert.log" 2>&1 &
        ge=$!; pids+=($ge)
      else
        loss_rules "$loss"
      fi
      ping=$(ip netns exec "$a" ping -c 3 -i 0.2 -q 10.71.2.2 | sed -n 's/.*= [0-9.]*\/\([0-9.]*\)\/.*/\1/p')
      echo "loss bench: $stack, loss $loss, RTT ${rtt} (ping ${ping:-?} ms), run $run: ${seconds} s"
      "run_$stack" "$dir" || echo "loss bench: $stack $c run $run did not complete (logs in $dir)"
      [ -n "$ge" ] && { kill "$ge" 2>/dev/null; wait "$ge" 2>/dev/null; }
      echo "$ping" > "$dir/ping"
    done
  done
done
delay_off
"$py" scripts/loss/judge.py "$out" $cases
