#!/usr/bin/env bash
# The two programs a package or a container image holds (not the benches or the fuzzer), in
# release with the Swift runtime linked in, into .build/static/release: scripts/package.sh and the
# containers stage build them here, and test.sh builds them first, beside the stages before
# those, so that each finds them built (SwiftPM waits for another build of the same folder).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
swift build -c release --static-swift-stdlib --build-path .build/static --product callend
swift build -c release --static-swift-stdlib --build-path .build/static --product callend-serve
