#!/usr/bin/env bash
# Three signaling nodes sharing rooms through one redis-server (serve --redis), on loopback:
#   race          20 rounds of three participants joining a room of two at once, each on its own
#                 node: every round two get in and one gets room_full
#   call          a call whose endpoints are on different nodes (a on node 1, b on node 3)
#   node-killed   node 1 is killed (SIGKILL) mid-call: a is back in the room on node 2 within
#                 2 s, and neither side's video drops below 25 fps in any second of it
#   redis-restart redis-server is killed and started again empty: every node says Redis is up
#                 again, nobody reconnected, the room is still a room of two, the call goes on
# Removes every process and file it made. Skips, saying so, without Debian's redis-server.
set -u
cd "$(dirname "$0")/../.."
source scripts/stage.sh
if [ ! -x /usr/bin/redis-server ]; then
  skip "needs Debian's redis-server"
fi
bin=${CALLEND_BIN:-$(swift build --show-bin-path)/callend}
py=/usr/bin/python3
source scripts/wait.sh
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
start=$SECONDS
status=0
fail() { echo "fleet: FAILED: $*"; status=1; }

free_port() { "$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
redis_port=$(free_port)
start_redis() {
  /usr/bin/redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" --loglevel warning \
    > "$work/redis.log" 2>&1 &
  redis_pid=$!
  pids+=($redis_pid)
  local deadline=$((SECONDS + 10))
  until [ "$(redis-cli -p "$redis_port" ping 2>/dev/null)" = PONG ]; do
    [ $SECONDS -lt $deadline ] || { echo "fleet: redis-server did not start"; exit 1; }
    sleep 0.05
  done
}
start_redis

"$bin" token --new-secret --out "$work/secret"
declare -A port metrics
for n in 1 2 3; do
  "$bin" serve --listen 127.0.0.1:0 --secret-file "$work/secret" --redis "redis://127.0.0.1:$redis_port" \
    --metrics 127.0.0.1:0 > "$work/node$n.log" 2>&1 &
  pids+=($!)
  eval "node${n}_pid=$!"
  wait_for "$work/node$n.log" "rooms shared through" 20 || exit 1
  port[$n]=$(sed -n 's/^listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$work/node$n.log")
  metrics[$n]=$(sed -n 's|^metrics at http://127.0.0.1:\([0-9]*\)/metrics|\1|p' "$work/node$n.log")
done
for who in a b p0 p1 p2; do "$bin" token --room '*' --identity "$who" --secret-file "$work/secret" > "$work/token-$who"; done

# join_raw NODE ROOM TOKEN...: each joins at once on its node; prints each outcome (joined or the
# error code), holding every connection until all have answered.
join_raw() {
  "$py" scripts/fleet/join_raw.py "$@"
}

# race
bad=0
for round in $(seq 1 20); do
  got=$(join_raw "race-$round" "${port[1]}" "$work/token-p0" "${port[2]}" "$work/token-p1" "${port[3]}" "$work/token-p2")
  [ "$got" = "joined joined room_full" ] || { echo "fleet: race $round: $got"; bad=$((bad + 1)); }
done
[ $bad -eq 0 ] && echo "fleet: race: 20 of 20 rounds seated two of three" || fail "race: $bad rounds broke the room limit"

# call
stamp() { while IFS= read -r line; do printf '%s %s\n' "$(date +%s.%N)" "$line"; done; }
join_side() {  # join_side WHO SERVERS: the endpoint runs in the background, its pid in pids
  CALLEND_TOKEN="$(cat "$work/token-$1")" "$bin" join fleet --server "$2" --video-size 320x240 --duration 300 --no-stdin \
    > >(stamp > "$work/$1.log") 2>&1 &
  pids+=($!)
}
join_side a "127.0.0.1:${port[1]},127.0.0.1:${port[2]}"
wait_for "$work/a.log" "joined room" 30 || exit 1
join_side b "127.0.0.1:${port[3]},127.0.0.1:${port[2]}"
for who in a b; do wait_for "$work/$who.log" '"receivedFps"' 30 || { fail "no media at $who"; exit 1; }; done

# steady SINCE: waits for a stats line at both sides after SINCE with >= 25 fps.
steady() {
  local deadline=$((SECONDS + 20))
  until "$py" scripts/fleet/steady.py "$1" "$work/a.log" "$work/b.log"; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.1
  done
}
# worst FROM TO: the lowest fps of any stats line at either side stamped in (FROM, TO].
worst() {
  "$py" scripts/fleet/worst.py "$1" "$2" "$work/a.log" "$work/b.log"
}
steady "$(date +%s.%N)" || fail "the call did not reach 25 fps"
echo "fleet: call: a on node 1, b on node 3, both decoding"

# node-killed
killed_at=$(date +%s.%N)
kill -9 "$node1_pid"
wait "$node1_pid" 2>/dev/null
wait_for "$work/a.log" "again on 127.0.0.1:${port[2]}" 10 || fail "a did not rejoin on node 2"
back=$(grep -F "again on 127.0.0.1:${port[2]}" "$work/a.log" | head -1 | cut -d' ' -f1)
took=$("$py" -c "print(f'{$back - $killed_at:.2f}')")
"$py" -c "import sys; sys.exit(0 if $took <= 2 else 1)" || fail "a took $took s to rejoin"
steady "$(date +%s.%N)" || fail "the call did not go on after the node died"
low=$(worst "$killed_at" "$(date +%s.%N)")
echo "fleet: node-killed: a back on node 2 after $took s; lowest fps at either side meanwhile $low"
"$py" -c "import sys; sys.exit(0 if $low >= 25 else 1)" || fail "media dropped to $low fps when the node died"

# redis-restart
rejoins_before=$(grep -c "again on" "$work/a.log" "$work/b.log" | awk -F: '{s += $2} END {print s}')
redis_killed=$(date +%s.%N)
kill -9 "$redis_pid"
wait "$redis_pid" 2>/dev/null
redis_up() {  # redis_up VALUE: every live node's metrics say callend_signaling_redis_up VALUE
  for n in 2 3; do
    "$py" -c 'import sys, urllib.request; sys.exit(0 if sys.argv[2] in urllib.request.urlopen(sys.argv[1], timeout=2).read().decode().splitlines() else 1)' \
      "http://127.0.0.1:${metrics[$n]}/metrics" "callend_signaling_redis_up $1" 2>/dev/null || return 1
  done
}
deadline=$((SECONDS + 10))
until redis_up 0; do [ $SECONDS -lt $deadline ] || { fail "the nodes did not notice Redis was gone"; break; }; sleep 0.1; done
start_redis
deadline=$((SECONDS + 15))
until redis_up 1; do [ $SECONDS -lt $deadline ] || { fail "the nodes did not reconnect to Redis"; break; }; sleep 0.1; done
# The seats come back with the nodes' next renewal (read in Redis itself); then a third
# participant finds the room full. (Asked before, it would take a seat: its seat would then wait
# in its grace for it, and the room would be full of it.)
deadline=$((SECONDS + 5))
until [ "$(redis-cli -p "$redis_port" zcard callend:room:fleet:seats 2>/dev/null)" = 2 ]; do
  [ $SECONDS -lt $deadline ] || { fail "the nodes did not put their seats back in Redis"; break; }
  sleep 0.1
done
[ "$(join_raw fleet "${port[3]}" "$work/token-p0")" = room_full ] || fail "after the restart the room of two let a third in"
steady "$(date +%s.%N)" || fail "the call did not go on after Redis restarted"
low=$(worst "$redis_killed" "$(date +%s.%N)")
rejoins_after=$(grep -c "again on" "$work/a.log" "$work/b.log" | awk -F: '{s += $2} END {print s}')
[ "$rejoins_after" = "$rejoins_before" ] || fail "a client reconnected when Redis restarted"
echo "fleet: redis-restart: both nodes back on Redis, nobody reconnected, room still full for a third; lowest fps meanwhile $low"
"$py" -c "import sys; sys.exit(0 if $low >= 25 else 1)" || fail "media dropped to $low fps when Redis restarted"

[ $status -eq 0 ] || { for who in a b; do echo "--- $who"; grep -v '^[0-9.]* {' "$work/$who.log" | tail -20; done; for n in 1 2 3; do echo "--- node $n"; tail -5 "$work/node$n.log"; done; }
echo "fleet: $([ $status -eq 0 ] && echo passed || echo FAILED) in $((SECONDS - start)) s"
exit $status
