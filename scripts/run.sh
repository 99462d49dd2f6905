#!/usr/bin/env bash
# The main job: install dependencies, build a release binary, run the codec bench
# (callend's VP8/Opus against vpxenc/opusenc side by side). Extra arguments go to the bench.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
scripts/install-deps.sh
swift build -c release
.build/release/callend --version
.build/release/callend bench codecs "$@"
