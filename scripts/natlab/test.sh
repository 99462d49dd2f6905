#!/usr/bin/env bash
# The NAT lab test (root, network namespaces; see lab.sh for the topology): a 10 s call per
# case, each direction decoding >= 95 % of the frames the other sent, and the ICE pair checked:
#   1 srflx      A behind plain MASQUERADE, P on the public network, STUN only -> a reflexive pair
#   2 relay      A and B behind MASQUERADE --random-fully (symmetric)        -> TURN over UDP
#   3 tcp-relay  A's router drops outbound UDP, B behind plain MASQUERADE    -> TURN over TCP
#   4 host       A and A2 on one LAN                                          -> a host pair
#   5 any        A and B behind plain MASQUERADE: whatever pair ICE finds (two Linux MASQUERADE
#                routers defeat simultaneous hole punching; the relay must take over by itself)
#   6 relay-only A and A2 on one LAN, both with --ice-transport relay        -> a relayed pair anyway
#   7 consent    A and P in a call, then A's router drops every UDP packet A sends, so nothing
#                of A's (media, RTCP, answers to checks) reaches P while P's media still reaches
#                A: P's consent (RFC 7675) expires 30 s after A went silent and P stops sending
#                (between 29 and 35 s: not earlier, or random loss could end it)
# Skips, saying so, without root, ip netns, iptables or coturn. Removes everything it made.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/stage.sh
if [ "$(id -u)" -ne 0 ] || ! ip netns list >/dev/null 2>&1 || ! command -v iptables >/dev/null || ! command -v turnserver >/dev/null; then
  skip "needs root, ip netns, iptables and coturn (scripts/install-deps.sh installs them)"
fi
bin=$(swift build --show-bin-path)/callend
seconds=${NATLAB_SECONDS:-10}
start=$(date +%s)
source scripts/natlab/lab.sh
natlab_start || exit 1
stun=stun:$server_ip:3478
turn_udp="turn:$server_ip:3478?transport=udp" turn_tcp="turn:$server_ip:3478?transport=tcp"
status=0
join_extra=()

run_case() {  # run_case NAME EXPECT NS1 NS2 [SERVE OPTIONS...]
  local name=$1 expect=$2 first=$3 second=$4; shift 4
  natlab_serve "$name" "$@" || { status=1; return; }
  natlab_call "$name" "$seconds" "$first" "$second" "${join_extra[@]}" || { echo "natlab: $name: the call did not run"; status=1; }
  python3 scripts/natlab/judge.py "$work" "$name" "$expect" || { status=1; for f in "$work/$name"-*.err; do echo "--- $f"; tail -15 "$f"; done; }
}

natlab_nat "$RA" plain; natlab_nat "$RB" plain
run_case srflx srflx "$A" "$P" --ice-server "$stun"
natlab_nat "$RA" symmetric; natlab_nat "$RB" symmetric
run_case relay relay "$A" "$B" --ice-server "$stun" --ice-server "$turn_udp"
natlab_nat "$RA" block-udp; natlab_nat "$RB" plain
run_case tcp-relay tcp-relay "$A" "$B" --ice-server "$stun" --ice-server "$turn_udp" --ice-server "$turn_tcp"
natlab_nat "$RA" plain
run_case host host "$A" "$A2" --ice-server "$stun" --ice-server "$turn_udp"
natlab_nat "$RA" plain; natlab_nat "$RB" plain
run_case any any "$A" "$B" --ice-server "$stun" --ice-server "$turn_udp"
natlab_nat "$RA" plain
join_extra=(--ice-transport relay)
run_case relay-only relay-only "$A" "$A2" --ice-server "$stun" --ice-server "$turn_udp"
join_extra=()

consent_case() {
  natlab_nat "$RA" plain
  natlab_serve consent --ice-server "$stun" || { status=1; return; }
  natlab_call consent 90 "$A" "$P" > /dev/null 2>&1 &
  local caller=$!
  wait_for "$work/consent-2.out" '"receivedFps"' 30 || { status=1; return; }
  ip netns exec "$RA" iptables -I FORWARD -s 10.1.0.2 -p udp -j DROP
  local blocked=$SECONDS ok=1
  # "sending paused": consent expired, or the ICE agent failed the path first.
  if wait_for "$work/consent-2.err" "sending paused" 40; then
    echo "natlab: consent: P stopped sending $((SECONDS - blocked)) s after A went silent: $(sed -n 's/.*\(ice: .*sending paused\).*/\1/p' "$work/consent-2.err" | head -1)"
    [ $((SECONDS - blocked)) -ge 29 ] && [ $((SECONDS - blocked)) -le 35 ] || ok=0
  else
    ok=0
  fi
  kill "$caller" 2>/dev/null
  for p in $(pgrep -f "join consent"); do kill "$p" 2>/dev/null; done
  if [ $ok -eq 1 ]; then
    echo "natlab: consent: passed"
  else
    # What each side said about its path (not its per-second stats): the evidence of a miss.
    local side
    for side in 1 2; do
      echo "natlab: consent: side $side said:"
      grep -v '^{' "$work/consent-$side.err" | grep -E "ice|dtls|silent|path|restart|consent" | tail -12 | cut -c1-240
    done
    echo "natlab: consent: FAILED"
    status=1
  fi
}
consent_case
echo "natlab: $([ $status -eq 0 ] && echo passed || echo FAILED) in $(( $(date +%s) - start )) s"
exit $status
