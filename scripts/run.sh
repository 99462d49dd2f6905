#!/usr/bin/env bash
# The main job: install dependencies, build a release binary, run the demo call (a signaling
# service and two endpoints calling each other on loopback). Extra arguments go to the demo,
# e.g. --seconds 30. The codec bench is `.build/release/callend bench codecs`.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
scripts/install-deps.sh
swift build -c release
.build/release/callend --version
.build/release/callend demo "$@"
