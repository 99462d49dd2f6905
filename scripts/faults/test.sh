#!/usr/bin/env bash
# Network faults in the middle of one call (root: network namespaces). Hosts A (10.71.1.2) and B
# (10.71.2.2) talk through router R (scripts/netns-topology.sh); the signaling service runs on A,
# so B's signaling crosses R too. One call lives through, in turn:
#   blackout-6s     blackhole routes on R for both hosts: silent drops, no ICMP (an LTE stall)
#   blackout-35s    the same for 35 s: past consent's 30 s (RFC 7675), so both sides lose the path,
#                   recheck every second and the offerer restarts ICE 2 s later
#   unreachable-5s  R answers with ICMP host unreachable for 5 s
#   address-change  B's address changes to 10.71.2.3, as a modem's does when it reconnects
# After each fault, both sides must decode video again within 2 s of the path's return (3 s of
# the new address), and the first full second of stats from then on, and no earlier than that
# limit after the return, must show >= 25 fps (a stall that comes back after the first pictures,
# such as a path lost just after it returned, must be over by then). Neither
# process is restarted, and the call holds one media session throughout. Prints the time to
# media after each fault; FAULTS="blackout-6s ..." runs a subset.
set -u
cd "$(dirname "$0")/../.."
source scripts/stage.sh
if [ "$(id -u)" -ne 0 ] || ! ip netns list >/dev/null 2>&1; then
  skip "needs root and ip netns"
fi
bin=${CALLEND_BIN:-$(swift build --show-bin-path)/callend}
py=/usr/bin/python3
source scripts/netns-topology.sh
topology_start faults
start=$(date +%s)
status=0

service_tls "$work/tls" 10.71.1.2 || exit 1
start_service -n "$a" "$work/serve.log" --listen 10.71.1.2:7000 "${serve_tls[@]}" || exit 1
for who in a b; do mint faults "$who" > "$work/token-$who"; done

# Every line of a side's output (stats on stdout, log on stderr) with the wall-clock time it came.
stamp() { while IFS= read -r line; do printf '%s %s\n' "$(date +%s.%N)" "$line"; done; }
join_side() {  # join_side NAMESPACE WHO
  ip netns exec "$1" env CALLEND_TOKEN="$(cat "$work/token-$2")" "$bin" join faults --server tls://10.71.1.2:7000 "${join_tls[@]}" \
    --video-size 320x240 --duration 600 --no-stdin 2>&1 | stamp > "$work/$2.log"
}
join_side "$a" a & pids+=($!)
wait_for "$work/a.log" "joined room" 30 || { echo "faults: a did not join"; exit 1; }
join_side "$b" b & pids+=($!)
for who in a b; do wait_for "$work/$who.log" '"receivedFps"' 30 || { echo "faults: no media at $who"; exit 1; }; done
callers=$(pgrep -f "join faults" | sort | tr '\n' ' ')

now() { date +%s.%N; }

# recovered LABEL SINCE LIMIT: waits (20 s at most) until both sides decode again after SINCE,
# then judges and prints the figures.
recovered() {
  local label=$1 since=$2 limit=$3 deadline=$((SECONDS + 20)) verdict
  while :; do
    verdict=$("$py" scripts/faults/verdict.py "$since" "$limit" "$work/a.log" "$work/b.log")
    [ "$verdict" != wait ] && break
    if [ $SECONDS -ge $deadline ]; then verdict="fail: no decoding again at both sides within 20 s"; break; fi
    sleep 0.2
  done
  echo "faults: $label: ${verdict#* } (limit ${limit} s)"
  case $verdict in pass*) ;; *) status=1 ;; esac
}

# Lets the call settle at full rate before each fault: a stats line at both sides of >= 25 fps.
steady() {
  local deadline=$((SECONDS + 30)) mark
  mark=$(now)
  until "$py" -c '
import json, sys
mark = float(sys.argv[1])
def good(path):
    for line in open(path, errors="replace"):
        stamp, _, text = line.partition(" ")
        try:
            if float(stamp) > mark and text.startswith("{") and json.loads(text)["receivedFps"] >= 25: return True
        except ValueError: pass
    return False
sys.exit(0 if all(good(p) for p in sys.argv[2:]) else 1)' "$mark" "$work/a.log" "$work/b.log"; do
    [ $SECONDS -ge $deadline ] && { echo "faults: the call did not settle at 25 fps"; status=1; return 1; }
    sleep 0.2
  done
}

blackout() {  # blackout SECONDS ROUTE-TYPE
  steady || return
  for host in 10.71.1.2 10.71.2.2; do ip -n "$r" route add "$2" "$host/32"; done
  sleep "$1"
  for host in 10.71.1.2 10.71.2.2; do ip -n "$r" route del "$2" "$host/32"; done
}

for fault in ${FAULTS:-blackout-6s blackout-35s unreachable-5s address-change}; do
  case $fault in
    blackout-6s) blackout 6 blackhole && recovered "$fault" "$(now)" 2 ;;
    blackout-35s) blackout 35 blackhole && recovered "$fault" "$(now)" 2 ;;
    unreachable-5s) blackout 5 unreachable && recovered "$fault" "$(now)" 2 ;;
    address-change)
      steady || continue
      ip -n "$b" addr flush dev "${tag}br"
      ip -n "$b" addr add 10.71.2.3/24 dev "${tag}br"
      ip -n "$b" route add default via 10.71.2.1
      recovered "$fault" "$(now)" 3 ;;
    *) echo "faults: no fault named $fault"; status=1 ;;
  esac
done

# Still the same two processes, in the one media session they started with.
[ "$(pgrep -f "join faults" | sort | tr '\n' ' ')" = "$callers" ] || { echo "faults: a caller was restarted or died"; status=1; }
for pid in $callers; do kill -TERM "$pid" 2>/dev/null; done
for who in a b; do
  wait_for "$work/$who.log" "ended:" 20 || { echo "faults: $who did not end cleanly"; status=1; continue; }
  summary=$(grep "ended:" "$work/$who.log" | cut -d' ' -f2-)
  echo "faults: $who: $summary"
  case $summary in *"media sessions"*) echo "faults: $who needed a new media session"; status=1 ;; esac
  grep -h '"receivedFps"' "$work/$who.log" | tail -1 | cut -d' ' -f2- | "$py" -c '
import json, sys
s = json.load(sys.stdin)
print("faults: %s: outages %d, ICE restarts %d, packets not sent %d" % (sys.argv[1], s["outages"], s["iceRestarts"], s["sendErrors"]))' "$who"
done
[ $status -eq 0 ] || { for who in a b; do echo "--- $who"; grep -v '^[0-9.]* {' "$work/$who.log" | grep -v '"change"' | tail -40; done; }
echo "faults: $([ $status -eq 0 ] && echo passed || echo FAILED) in $(( $(date +%s) - start )) s"
exit $status
