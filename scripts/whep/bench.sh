#!/usr/bin/env bash
# POST -> first decoded frame of a WHEP player (headless Chromium, the standard page in
# player.html) watching a `callend join`: on loopback, and through the NAT lab relayed by TURN
# (the player restarts ICE by PATCH with the Link fields' servers first). Root.
#   scripts/whep/bench.sh [RUNS]      (default 20 players per path, one after another)
# Prints p50, p95 and the longest, per path, from the players' own clocks (performance.now()
# from just before the POST to the first picture the video element shows).
set -uo pipefail
cd "$(dirname "$0")/../.."
WHEP_RUNS=${1:-20} WHEP_CASES="whep-loopback whep-nat" exec bash scripts/whep/test.sh
