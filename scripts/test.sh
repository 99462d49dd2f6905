#!/usr/bin/env bash
# All tests: dependencies, a warning-free build, swift test, then the codec tests again under
# AddressSanitizer with LeakSanitizer so a leaked C handle fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
scripts/install-deps.sh

# stage NAME COMMAND...: runs one part and says how long it took (the whole must stay well
# inside CI's time; the closing notes report these).
started=$SECONDS
stage() {
  local name=$1 start=$SECONDS; shift
  "$@"
  echo "test.sh: $name took $((SECONDS - start)) s ($((SECONDS - started)) s so far)"
}

log=$(mktemp)
trap 'rm -f "$log"' EXIT
build() {
  swift build --build-tests 2>&1 | tee "$log"
  if grep -qE "(warning|error):" "$log"; then
    echo "test.sh: the build printed warnings or errors (the tree must stay warning-free)" >&2
    exit 1
  fi
}
stage build build
stage "swift test" swift test
stage leak-check scripts/leak-check.sh
# Every network- and user-fed parser under libFuzzer with AddressSanitizer, 5 s each from the
# seed corpora (the corpora and past crashes also replay in swift test).
stage fuzz scripts/fuzz.sh --all --seconds 5
# Real V4L2 and ALSA drivers (vivid, snd-aloop) in a qemu VM; skips, saying so, where qemu cannot run.
stage devicelab scripts/devicelab/test.sh
# Two hosts in network namespaces through a router namespace, a 20 s call (root; skips without).
stage twohost scripts/twohost/test.sh
# One call through a router namespace that blacks out for 6 s and 30 s, answers ICMP unreachable
# for 5 s, and sees one host's address change: media back within 2 s (3 s) each time (root; skips without).
stage faults scripts/faults/test.sh
# ICE across NAT routers with coturn: reflexive, relayed (UDP, TCP), host and plain-NAT pairs (root; skips without).
stage natlab scripts/natlab/test.sh
# aiortc (PyPI) as the peer of callend join, both offer directions (skips where aiortc cannot be installed).
stage aiortc scripts/aiortc/test.sh
# Headless Chromium on the page of serve --http calls a callend endpoint: both offer directions,
# and relayed through the NAT lab (skips where Chromium cannot start; the NAT case needs root).
stage browser scripts/browser/test.sh
# docker-compose.yml with a private Docker engine: two containers call each other (root; skips
# where the engine cannot start or the Debian mirror cannot be reached).
stage containers scripts/containers/test.sh
# Three serve nodes on one redis-server: racing joins, a call across nodes, a node killed mid-call
# and Redis restarted without the call noticing (skips without redis-server).
stage fleet scripts/fleet/test.sh
# A tbf bottleneck between namespaces whose capacity falls 2.5 -> 0.6 -> 2.5 Mbit/s: the sender
# gets below the new capacity, steps its video mode down and back up; then the short shared-link
# cases of bench congestion (three calls, a TCP download, congestion both ways) against floors
# (root; skips without).
stage congestion scripts/congestion/test.sh
