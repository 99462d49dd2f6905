# The NAT lab, sourced by scripts/natlab/test.sh and bench-setup.sh. Namespaces (names carry the
# caller's PID so runs do not collide):
#
#   P 192.0.2.2 ──── S ──── 198.51.100.1 RA 10.1.0.1 ── br ── A 10.1.0.2, A2 10.1.0.3
#   (public host)    │      (NAT router, LAN bridge)
#                    └───── 203.0.113.1  RB 10.2.0.1 ── B 10.2.0.2
#
# S is the public network's core and its server: it forwards between its three links and runs
# the signaling service and coturn (STUN and TURN) on 192.0.2.254; its default route leads to I,
# the rest of the internet, which drops everything. RA and RB are NAT routers:
# iptables MASQUERADE (port-preserving, like most home and LTE routers) or MASQUERADE
# --random-fully (symmetric: a new port per destination). `natlab_start` makes it all and an
# EXIT trap that removes every namespace, process and file (NATLAB_KEEP=1 keeps the logs folder;
# NATLAB_TURN_VERBOSE=1 has coturn log every session).
lab=cn$$
S=${lab}s P=${lab}p RA=${lab}ra RB=${lab}rb A=${lab}a A2=${lab}a2 B=${lab}b I=${lab}i
server_ip=192.0.2.254
pids=()

natlab_link() {  # natlab_link NS1 IF1 ADDR1 NS2 IF2 ADDR2
  ip link add "$2" type veth peer name "$5"
  ip link set "$2" netns "$1"; ip link set "$5" netns "$4"
  ip -n "$1" addr add "$3" dev "$2"; ip -n "$1" link set "$2" up
  [ -n "$6" ] && ip -n "$4" addr add "$6" dev "$5"
  ip -n "$4" link set "$5" up
}

natlab_up() {
  for ns in "$S" "$P" "$RA" "$RB" "$A" "$A2" "$B" "$I"; do ip netns add "$ns"; ip -n "$ns" link set lo up; done
  natlab_link "$S" "${lab}sp" 192.0.2.254/24 "$P" "${lab}ps" 192.0.2.2/24
  natlab_link "$S" "${lab}sa" 198.51.100.254/24 "$RA" "${lab}as" 198.51.100.1/24
  natlab_link "$S" "${lab}sb" 203.0.113.254/24 "$RB" "${lab}bs" 203.0.113.1/24
  ip -n "$RA" link add "${lab}br" type bridge
  ip -n "$RA" addr add 10.1.0.1/24 dev "${lab}br"; ip -n "$RA" link set "${lab}br" up
  for host in "$A:10.1.0.2:a1" "$A2:10.1.0.3:a2"; do
    IFS=: read -r ns addr tag <<< "$host"
    natlab_link "$ns" "${lab}${tag}l" "$addr/24" "$RA" "${lab}${tag}r" ""
    ip -n "$RA" link set "${lab}${tag}r" master "${lab}br"
    ip -n "$ns" route add default via 10.1.0.1
  done
  natlab_link "$RB" "${lab}bl" 10.2.0.1/24 "$B" "${lab}lb" 10.2.0.2/24
  ip -n "$B" route add default via 10.2.0.1
  ip -n "$P" route add default via 192.0.2.254
  ip -n "$RA" route add default via 198.51.100.254
  ip -n "$RB" route add default via 203.0.113.254
  for ns in "$S" "$RA" "$RB"; do ip netns exec "$ns" sysctl -q -w net.ipv4.ip_forward=1; done
  # The rest of the internet, beyond S: a route that takes everything and delivers nothing, as
  # the internet drops packets to private addresses. Without it a TURN relay's send to a peer's
  # private host address fails at once (ENETUNREACH), and coturn closes the whole allocation.
  natlab_link "$S" "${lab}si" 100.100.0.1/30 "$I" "${lab}is" 100.100.0.2/30
  ip -n "$S" route add default via 100.100.0.2
  ip netns exec "$I" iptables -A INPUT -j DROP
}

# natlab_nat ROUTER plain|symmetric|block-udp: the router's NAT for the next case (rules and
# connection tracking start afresh).
natlab_nat() {
  local router=$1 wan
  wan=$([ "$router" = "$RA" ] && echo "${lab}as" || echo "${lab}bs")
  ip netns exec "$router" iptables -t nat -F
  ip netns exec "$router" iptables -F FORWARD
  case $2 in
    plain) ip netns exec "$router" iptables -t nat -A POSTROUTING -o "$wan" -j MASQUERADE ;;
    symmetric) ip netns exec "$router" iptables -t nat -A POSTROUTING -o "$wan" -j MASQUERADE --random-fully ;;
    block-udp)
      ip netns exec "$router" iptables -t nat -A POSTROUTING -o "$wan" -j MASQUERADE
      ip netns exec "$router" iptables -A FORWARD -o "$wan" -p udp -j DROP ;;
  esac
}

natlab_down() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
  wait 2>/dev/null
  for ns in "$S" "$P" "$RA" "$RB" "$A" "$A2" "$B" "$I"; do ip netns del "$ns" 2>/dev/null; done
}

source "$(dirname "${BASH_SOURCE[0]}")/../wait.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../stage.sh"

natlab_start() {
  work=$(mktemp -d /tmp/callend-natlab.XXXXXX)
  trap 'natlab_down; [ -n "${NATLAB_KEEP:-}" ] || rm -rf "$work"' EXIT
  natlab_up
  turn_secret=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
  printf '%s\n' "$turn_secret" > "$work/turn-secret"
  chmod 600 "$work/turn-secret"
  # coturn: STUN and TURN (UDP and TCP) on 3478, credentials checked the TURN REST way.
  ip netns exec "$S" turnserver -n --listening-ip="$server_ip" --relay-ip="$server_ip" --listening-port=3478 \
    --use-auth-secret --static-auth-secret="$turn_secret" --realm=callend.test --fingerprint \
    --no-tls --no-dtls --no-cli --no-multicast-peers ${NATLAB_TURN_VERBOSE:+--verbose} --simple-log --log-file="$work/turn.log" \
    --pidfile="$work/turn.pid" > "$work/turn.out" 2>&1 &
  pids+=($!)
  local deadline=$((SECONDS + 20))
  until ip netns exec "$S" ss -ltn | grep -q "$server_ip:3478"; do
    [ $SECONDS -lt $deadline ] || { echo "natlab: coturn did not start: $(tail -5 "$work/turn.out")" >&2; return 1; }
    sleep 0.05
  done
  "$bin" token --new-secret --out "$work/secret"
  # Signaling crosses the lab's networks: TLS, with the certificate callend tls makes.
  service_tls "$work/tls" "$server_ip"
}

# natlab_serve NAME [--ice-server URL]...: a signaling service on S for one case, on its own port.
natlab_serve() {
  local name=$1; shift
  serve_port=$((7000 + ${#pids[@]}))
  ip netns exec "$S" "$bin" serve --listen "$server_ip:$serve_port" --secret-file "$work/secret" "${serve_tls[@]}" \
    --turn-secret-file "$work/turn-secret" "$@" > "$work/serve-$name.log" 2>&1 &
  pids+=($!)
  wait_for "$work/serve-$name.log" "listening on" 30
}

# natlab_call NAME SECONDS NS1 NS2 [JOIN OPTIONS...]: NS1 joins, then NS2 (which offers); both
# run SECONDS; outputs in $work/NAME-1.out/.err and NAME-2.out/.err.
natlab_call() {
  local name=$1 seconds=$2 first=$3 second=$4; shift 4
  local t1 t2
  t1=$("$bin" token --room "$name" --identity first --secret-file "$work/secret")
  t2=$("$bin" token --room "$name" --identity second --secret-file "$work/secret")
  local common=(join "$name" --server "tls://$server_ip:$serve_port" "${join_tls[@]}" --video-size 320x240 --fps 30 --duration "$seconds" --no-stdin "$@")
  ip netns exec "$first" env CALLEND_TOKEN="$t1" "$bin" "${common[@]}" > "$work/$name-1.out" 2> "$work/$name-1.err" &
  local p1=$!
  pids+=($p1)
  wait_for "$work/$name-1.err" "joined room" 30 || return 1
  ip netns exec "$second" env CALLEND_TOKEN="$t2" "$bin" "${common[@]}" > "$work/$name-2.out" 2> "$work/$name-2.err" &
  local p2=$!
  pids+=($p2)
  timeout $((seconds + 60)) tail --pid="$p1" -f /dev/null; timeout $((seconds + 60)) tail --pid="$p2" -f /dev/null
}
