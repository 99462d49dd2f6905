#!/usr/bin/env bash
# The main job: install dependencies, build a release binary, run the demo call (a signaling
# service and two endpoints calling each other on loopback). Extra arguments go to the demo,
# e.g. --seconds 30. The codec bench is `.build/release/callend bench codecs`.
# The Swift runtime is linked into the binary (--static-swift-stdlib): an endpoint then holds
# 53 MiB instead of 59 and takes 10 % less CPU (scripts/footprint/bench.py, side by side).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
scripts/install-deps.sh
swift build -c release --static-swift-stdlib
.build/release/callend --version
.build/release/callend demo "$@"
