#!/usr/bin/env bash
# All tests: dependencies, a warning-free build, swift test, then the stages that need
# namespaces, a VM, outside peers; beside those, at the lowest priority, the codec tests under
# AddressSanitizer with LeakSanitizer and the fuzz targets' corpora.
#
# Every stage ends passed, failed or skipped (a stage script exits 77 when it cannot run here,
# saying why), and every stage runs whatever an earlier one did: a later stage never hides an
# earlier failure. The last line is "N passed, N failed, N skipped"; the exit status is 0 only
# when nothing failed. Under CI=true a skipped stage is a failure: CI's machine can run them all.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
scripts/install-deps.sh || { echo "test.sh: the dependencies could not be installed"; echo "0 passed, 1 failed, 0 skipped"; exit 1; }

started=$SECONDS
passed=0 failed=0 skipped=0
failures=() skips=()
# stage NAME COMMAND...: runs one part, says how it ended and how long it took (the whole must
# stay well inside CI's time; the closing notes report these).
stage() {
  local name=$1 start=$SECONDS rc before after left
  shift
  before=$(leftovers)
  "$@" 2>&1 | tee "$stage_log"
  rc=${PIPESTATUS[0]}
  # A stage cleans up every namespace and temp folder it made: what it left fails it. Nothing
  # is removed here: on a machine where something else runs tests at the same time (a
  # developer's swift test), what appeared meanwhile may be theirs.
  after=$(leftovers)
  left=$(comm -13 <(echo "$before") <(echo "$after") | grep .)
  if [ -n "$left" ]; then
    echo "test.sh: $name left behind: $(echo $left) (CI runs alone: each is this stage's)" | tee -a "$stage_log"
    rc=1
  fi
  settle "$name" "$rc" "$stage_log" $((SECONDS - start))
}

# settle NAME STATUS LOG SECONDS: counts how a stage ended (0 passed, 77 skipped, else failed).
settle() {
  local name=$1 rc=$2 stage_output=$3 seconds=$4 outcome
  case $rc in
    0) outcome=passed ;;
    77) outcome=skipped ;;
    *) outcome=failed ;;
  esac
  if [ $outcome = skipped ] && [ "${CI:-}" = true ]; then
    echo "test.sh: $name was skipped under CI=true: CI's machine can run every stage, so a skip fails the run"
    outcome=failed
  fi
  case $outcome in
    passed) passed=$((passed + 1)) ;;
    skipped) skipped=$((skipped + 1)); skips+=("$name") ;;
    failed) failed=$((failed + 1)); failures+=("$name")
      # For the summary: the lines that say FAILED (a check's own verdict, wherever it sits in the
      # stage's output), then the stage's last lines, where a stage that died says why.
      { echo "test.sh: $name failed; its lines that say FAILED:"; grep -a "FAILED" "$stage_output" | head -8 | cut -c1-400
        echo "test.sh: $name: its last lines:"; tail -12 "$stage_output" | cut -c1-400; } >> "$failed_stages" ;;
  esac
  echo "test.sh: $name $outcome in $seconds s ($((SECONDS - started)) s so far)"
}

# Stages that need processor time but no clock (builds, and tests judged on what they compute,
# not on when) run one after another beside the others at the lowest priority (SCHED_IDLE), so
# they take the cores only while the stages that follow the clock leave them idle (a call waiting
# out a blackout, a VM booting). Each has a temp folder of its own, where it must leave no callend-*.
# start_beside NAME COMMAND [NAME COMMAND ...] (a COMMAND is split at spaces); join_beside
# waits for them and counts them, their output in one piece.
beside_dir=$(mktemp -d /tmp/test-sh-beside.XXXXXX)
beside_pid= beside_names=()
start_beside() {
  local i=0 names=() commands=()
  while [ $# -ge 2 ]; do names+=("$1"); commands+=("$2"); shift 2; done
  beside_names=("${names[@]}")
  # Stage I holds a lock on I.lock (descriptor 20 + I) from before the queue starts until it has
  # ended; wait_beside takes the lock, so it wakes on that event rather than polling. Taken here,
  # so no wait can come before it; the stages' commands do not inherit them, so a process one
  # leaves behind holds none.
  [ ${#names[@]} -le 4 ] || { echo "test.sh: start_beside takes at most 4 stages"; exit 1; }
  for i in "${!names[@]}"; do
    eval "exec $((20 + i))> \"\$beside_dir/$i.lock\""
    flock $((20 + i))
  done
  set -m   # its own process group: an interrupted test.sh stops the whole of it
  (
    for i in "${!names[@]}"; do
      mkdir -p "$beside_dir/$i.tmp"
      local start=$SECONDS rc left
      # SCHED_IDLE as well as nice 19: swift test starts its test binary at nice 0 whatever its
      # own niceness (seen in CI: the ASan codec tests at a whole core, nice 0, beside the loss
      # and faults stages, which then failed), and the policy is kept by everything below.
      # shellcheck disable=SC2086 # the command's words
      TMPDIR=$beside_dir/$i.tmp nice -n 19 chrt --idle 0 ${commands[$i]} > "$beside_dir/$i.log" 2>&1 20>&- 21>&- 22>&- 23>&-
      rc=$?
      # What the stage's own code made (SwiftPM leaves folders of its own in TMPDIR too).
      left=$(cd "$beside_dir/$i.tmp" && ls -d callend-* 2> /dev/null | head -5 | xargs)
      [ -n "$left" ] && { echo "test.sh: ${names[$i]} left behind: $left" >> "$beside_dir/$i.log"; rc=1; }
      echo "$rc $((SECONDS - start))" > "$beside_dir/$i.rc"
      eval "exec $((20 + i))>&-"
    done
  ) &
  beside_pid=$!
  set +m
  exec 20>&- 21>&- 22>&- 23>&-
  echo "test.sh: started beside the next stages, at the lowest priority: ${names[*]}"
}
# wait_beside I: until the I-th stage beside has ended (its lock is let go), or the whole of
# them has (an ended queue holds no lock). A stage that needs what it makes waits here rather
# than racing it: on a busy machine the static build, at the lowest priority, was still running
# when the containers stage began, and SwiftPM refused a second build of the same folder
# ("database is locked").
wait_beside() {
  local started=$SECONDS
  [ -n "$beside_pid" ] && flock "$beside_dir/$1.lock" true
  [ $((SECONDS - started)) -gt 1 ] && echo "test.sh: waited $((SECONDS - started)) s for ${beside_names[$1]} (beside)"
  return 0
}
join_beside() {
  local i rc seconds
  [ -n "$beside_pid" ] || return 0
  wait "$beside_pid"
  beside_pid=
  for i in "${!beside_names[@]}"; do
    echo "test.sh: ${beside_names[$i]} (beside the stages above):"
    cat "$beside_dir/$i.log"
    read -r rc seconds < "$beside_dir/$i.rc" 2> /dev/null || { rc=1 seconds=0; echo "test.sh: ${beside_names[$i]} never ended"; }
    settle "${beside_names[$i]}" "$rc" "$beside_dir/$i.log" "$seconds"
  done
}

# What a stage could leave behind: network namespaces and the temp folders the stages make.
leftovers() {
  { ip netns list 2>/dev/null | awk '{print "netns", $1}'
    ls -d /tmp/callend-* 2>/dev/null | sed 's/^/tmp /'; } | sort
}

summary() {
  # The failed tests again at the end, where a reader of the output's tail (CI's record keeps
  # only the tail) finds them.
  [ -s "$failed_stages" ] && cat "$failed_stages"
  [ -s "$failed_tests" ] && { echo "test.sh: swift test failed in:"; cat "$failed_tests"; }
  [ ${#failures[@]} -eq 0 ] || echo "test.sh: failed: ${failures[*]}"
  [ ${#skips[@]} -eq 0 ] || echo "test.sh: skipped: ${skips[*]}"
  echo "$passed passed, $failed failed, $skipped skipped"
}

# Warnings are errors, so no file that warns is ever compiled and kept: an incremental build
# cannot hide a warning of a file it did not recompile. The same flags for every swift command
# that builds, so none of them rebuilds what another built.
swift_flags=(-Xswiftc -warnings-as-errors)
log=$(mktemp)
failed_tests=$(mktemp)
stage_log=$(mktemp)
failed_stages=$(mktemp)
trap '[ -n "$beside_pid" ] && kill -- -"$beside_pid" 2> /dev/null; rm -rf "$log" "$failed_tests" "$stage_log" "$failed_stages" "$beside_dir"' EXIT
build() {
  swift build --build-tests "${swift_flags[@]}" 2>&1 | tee "$log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || return 1
  if grep -qE "(warning|error):" "$log"; then
    echo "test.sh: the build printed warnings or errors (the tree must stay warning-free)" >&2
    return 1
  fi
}
stage build build
if [ $failed -ne 0 ]; then
  echo "test.sh: the other stages need the build; none ran"
  summary
  exit 1
fi
# Real V4L2 and ALSA drivers (vivid, snd-aloop) in a qemu VM; skips where qemu cannot run. It
# runs the DeviceLab suite of the test binary the build made, before anything runs beside it: the
# VM's processor is emulated and its sound cards keep real time, so a build beside it starves
# them (176 xruns and an echo canceller restarted 108 times, once, with the builds below beside).
stage devicelab scripts/devicelab/test.sh
# Beside every stage from here on: the static build the containers and package stages use
# (scripts/static-build.sh, counted as a stage of its own), the codec tests under
# AddressSanitizer with LeakSanitizer (a build of their own), then every network- and user-fed
# parser under libFuzzer with AddressSanitizer: each target starts and runs its whole corpus once
# (seeds and past crashes; they also replay in swift test without the sanitizer). Fuzzing for
# millions of executions is a bench: scripts/fuzz.sh TARGET --runs N.
start_beside "static build" scripts/static-build.sh leak-check scripts/leak-check.sh fuzz "scripts/fuzz.sh --all --runs 0"
# swift test; a test skipped for any reason but "it runs in the device lab VM" (the devicelab
# stage runs those) makes the stage skipped, not passed.
unit_tests() {
  swift test "${swift_flags[@]}" 2>&1 | tee "$log"
  if [ "${PIPESTATUS[0]}" -ne 0 ]; then
    # The failing tests and their issues (swift-testing's ✘ lines, XCTest's "error:" lines), at
    # most 40 lines, or the output's last lines when the runner itself died.
    # An issue's comment (a "↳" line) comes right after its ✘ line.
    awk '/^✘ Test .*recorded an issue/ { print; comment = 1; next }
         comment && /^↳ / { print; next }
         { comment = 0 }
         /^✘ Test .*failed|: error: |Fatal error|signal code|GLib-ERROR|crashed:/ { print }' "$log" | cut -c1-600 | head -40 > "$failed_tests"
    [ -s "$failed_tests" ] || tail -20 "$log" > "$failed_tests"
    return 1
  fi
  local hidden
  hidden=$(grep -E '^➜ (Test|Suite) .* skipped' "$log" | grep -v "device lab VM")
  if [ -n "$hidden" ]; then
    echo "$hidden"
    echo "test.sh: swift test: SKIPPED: the tests above did not run here"
    return 77
  fi
}
stage "swift test" unit_tests
# The five slowest tests of that run (wall time; tests run side by side, so a test's time includes
# what it waited for the others): where the test command's minutes go.
grep -aE '^✔ Test .* passed after [0-9.]+ seconds' "$log" | grep -v '^✔ Test run with' | sed -E 's/^✔ Test (.*) passed after ([0-9.]+) seconds.*/\2 \1/' \
  | sort -rn | head -5 | awk '{ time = $1; $1 = ""; printf "test.sh: slowest tests: %6.1f s %s\n", time, $0 }'
# The service against the attacks of issue 27, over real sockets and namespaces: a PyJWT
# default-claims token renewed for no longer than it had, a renewal refused after the grace,
# plaintext refused off loopback (root).
stage trust scripts/trust/test.sh
# Two hosts in network namespaces through a router namespace, a 20 s call (root).
stage twohost scripts/twohost/test.sh
# One call through a router namespace that blacks out for 6 s and 30 s, answers ICMP unreachable
# for 5 s, and sees one host's address change: media back within 2 s (3 s) each time (root).
stage faults scripts/faults/test.sh
# One call through a router that drops 10 % of what it forwards at random, with a 100 ms round
# trip: no ICE restart, no outage, >= 24 pictures a second, <= 6 freezes a minute (root).
stage loss scripts/loss/test.sh
# ICE across NAT routers with coturn: reflexive, relayed (UDP, TCP), host and plain-NAT pairs (root).
stage natlab scripts/natlab/test.sh
# aiortc (PyPI) as the peer of callend join, both offer directions.
stage aiortc scripts/aiortc/test.sh
# WHIP (RFC 9725): callend publish over HTTPS into an aiortc WHIP server that records what it
# gets (>= 90 % of the frames decodable, DELETE at the end, on SIGTERM), a redirect, and every
# refusal a clear exit 1.
stage whip scripts/whip/test.sh
# WHIP and WHEP on serve --http: Debian's whip-client publishes into a room whose endpoint
# records; a WHEP player page in headless Chromium watches an endpoint on loopback and, relayed
# by TURN from the Link fields, through the NAT lab (root).
stage whep scripts/whep/test.sh
# One endpoint watched by four WHEP viewers (three aiortc, Chromium behind a veth) from one shared
# encoder with VP8 temporal layers: behind 1.2 Mbit/s the viewer gets the lower layers, behind
# 300 kbit/s an encoder of its own; the others keep >= 90 % of their frame rate and bitrate (root).
stage viewers scripts/viewers/test.sh
# A mesh of four join --mesh endpoints on serve --max-participants 4: each decodes >= 90 % of
# each other's frames for 60 s while one leaves and comes back; the other three never stop.
stage mesh scripts/mesh/test.sh
# A Janus VideoRoom (Debian's janus, a configuration of the test's own): callend publishes
# through a 1.2 Mbit/s link with Janus's feedback driving its estimate; callend and Chromium (on
# Janus's JavaScript library) subscribe and decode >= 90 % of the frames; refusals say why (root).
stage janus scripts/janus/test.sh
# Headless Chromium on the page of serve --http calls a callend endpoint: both offer directions,
# and relayed through the NAT lab (the NAT case needs root).
stage browser scripts/browser/test.sh
# Data channels (RFC 8831/8832) through join --data-socket: callend with callend, aiortc and the
# page in Chromium, both offer directions, messages and 10 MiB each way; throughput and latency.
stage datachannel scripts/datachannel/test.sh
# docker-compose.yml with a private Docker engine: two containers call each other (root). It and
# the package stage take their programs from the static build beside.
wait_beside 0
stage containers scripts/containers/test.sh
# The Debian package (scripts/package.sh, lintian) in a fresh Debian 12 tree booted under
# systemd-nspawn: installed with apt, a service and two endpoints from config files calling each
# other through a reload, a restart and an upgrade, a whole recording, then remove and purge (root).
stage package scripts/package/test.sh
# Three serve nodes on one redis-server: racing joins, a call across nodes, a node killed mid-call
# and Redis restarted without the call noticing.
stage fleet scripts/fleet/test.sh
# A tbf bottleneck between namespaces whose capacity falls 2.5 -> 0.6 -> 2.5 Mbit/s: the sender
# gets below the new capacity, steps its video mode down and back up; then the short shared-link
# cases of bench congestion (three calls, a TCP download, congestion both ways) against floors
# near what the short runs measure (root).
stage congestion scripts/congestion/test.sh
join_beside
summary
[ $failed -eq 0 ]
