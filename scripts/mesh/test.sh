#!/usr/bin/env bash
# A mesh of four (issue 31): `serve --max-participants 4` on loopback and four `join --mesh`
# endpoints, each sending its test pattern to the three others from one shared encode. A, B and
# C stay 60 s; D leaves after 20 s and joins again (a new process) until the end. Checks, from
# each endpoint's JSON line per peer:
#   - every endpoint decodes >= 90 % of the frames each other sent it (D's two sessions together),
#     with no decode error, and no shared encoder stepped below 15 fps (its reports' mode);
#   - A, B and C never stop between themselves: one session each way, watched >= 55 s, no freeze
#     longer than a second;
#   - A, B and C each had two sessions with D (it left, and came back).
# Then the page (serve --http, ?mesh=1) in headless Chromium with a fake camera joins two mesh
# endpoints for 25 s: it shows a tile for itself and each of them, decodes >= 90 % of each one's frames,
# and each endpoint decodes >= 90 % of the frames the page sent it.
# Removes every process and file it made.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/wait.sh
source scripts/stage.sh
bin=$(swift build --show-bin-path)/callend
work=$(mktemp -d /tmp/callend-mesh.XXXXXX)
pids=()
cleanup() {
  stop_pids
  [ -n "${MESH_KEEP:-}" ] && echo "mesh: kept $work" || rm -rf "$work"
}
trap cleanup EXIT
for p in a b c d; do mint mesh "$p" > "$work/$p.token"; done
mint tiles page > "$work/page.token"
for p in e f; do mint tiles "$p" > "$work/$p.token"; done
start_service "$work/serve.log" --listen 127.0.0.1:0 --http 127.0.0.1:0 --max-participants 4 || exit 1
room=mesh
join() {  # NAME OUT SECONDS: run in a subshell or in the background (it becomes the endpoint's process)
  exec "$bin" join "$room" --token-file "$work/$1.token" --server "127.0.0.1:$port" --mesh --video-source pattern --video-size 640x360 \
    --duration "$3" --no-stdin > "$work/$2.out" 2> "$work/$2.err"
}
for p in a b c; do
  join "$p" "$p" 60 &
  pids+=($!)
  wait_for "$work/$p.err" "joined room $room" 30 || exit 1
done
started=$SECONDS
(join d d1 20) || { echo "mesh: FAILED: D's first session: $(tail -3 "$work/d1.err")"; exit 1; }
# D comes back as a new process at once, and stays until the others end.
(join d d2 $((60 - (SECONDS - started) - 2))) || { echo "mesh: FAILED: D's second session: $(tail -3 "$work/d2.err")"; exit 1; }
for p in "${pids[@]:1}"; do wait "$p" || { echo "mesh: FAILED: an endpoint failed"; tail -3 "$work"/[abc].err; exit 1; }; done
pids=("${pids[0]}")

# The page with two endpoints.
room=tiles
for p in e f; do
  join "$p" "$p" 40 &
  pids+=($!)
  wait_for "$work/$p.err" "joined room $room" 30 || exit 1
done
if has_chromium; then
  /usr/bin/python3 scripts/mesh/tiles.py "$web/?room=tiles&token=$(cat "$work/page.token")&mesh=1" --peers 2 --seconds 15 --timeout 40 \
    > "$work/page.out" 2> "$work/page.err"
  page=$?
else
  page=77
fi
for p in "${pids[@]:1}"; do kill "$p" 2>/dev/null; wait "$p"; done
[ $page -eq 77 ] && skip "needs Debian's chromium, chromium-driver and python3-selenium for the page's tiles (scripts/install-deps.sh installs them)"
[ $page -eq 0 ] || { echo "mesh: FAILED: the page's tiles: $(tail -c 600 "$work/page.out") $(tail -3 "$work/page.err")"; exit 1; }

/usr/bin/python3 scripts/mesh/judge.py "$work"
status=$?
[ $status -eq 0 ] && echo "mesh: passed" || echo "mesh: FAILED"
exit $status
