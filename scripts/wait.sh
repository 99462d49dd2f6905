# Sourced by the test scripts. wait_for FILE TEXT SECONDS: waits until FILE holds TEXT (a
# process's "listening on" or "joined room" line), so that steps follow events rather than
# guesses of how long a start takes; fails, saying what it waited for, after SECONDS.
wait_for() {
  local deadline=$((SECONDS + $3))
  until grep -qF -- "$2" "$1" 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || { echo "$(basename "$0"): '$2' did not appear in $1 within $3 s" >&2; return 1; }
    sleep 0.05
  done
}

# wait_port NETNS HOST PORT SECONDS: waits until HOST:PORT takes a TCP connection from inside
# namespace NETNS ("" for this one): a server started in the background is up.
wait_port() {
  local deadline=$((SECONDS + $4))
  local run=()
  [ -n "$1" ] && run=(ip netns exec "$1")
  until "${run[@]}" bash -c "exec 3<>/dev/tcp/$2/$3" 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || { echo "$(basename "$0"): nothing took connections on $2:$3 within $4 s" >&2; return 1; }
    sleep 0.05
  done
}

# wait_until SECONDS WHAT COMMAND...: waits until COMMAND succeeds (a state reached: a unit
# active, a counter grown); fails, saying WHAT it waited for, after SECONDS.
wait_until() {
  local seconds=$1 what=$2
  local deadline=$((SECONDS + seconds))
  shift 2
  until "$@" > /dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || { echo "$(basename "$0"): $what did not happen within $seconds s" >&2; return 1; }
    sleep 0.2
  done
}
