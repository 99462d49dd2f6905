#!/usr/bin/env bash
# Runs the codec tests under AddressSanitizer + LeakSanitizer in a separate build folder. Leaks
# in the Swift toolchain itself are listed (and explained) in scripts/lsan.supp; anything else,
# such as an encoder whose deinit forgets to destroy its libvpx context, fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
export ASAN_OPTIONS=detect_leaks=1
export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp:print_suppressions=1"
swift test --sanitize=address --scratch-path .build/asan --filter CodecsTests
echo "leak-check: no leaks in the codec tests"
