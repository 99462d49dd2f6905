#!/usr/bin/env bash
# Coverage-guided fuzzing (libFuzzer, with AddressSanitizer) of every parser the network or a
# user feeds: scripts/fuzz.sh TARGET[,TARGET...]|--all [--seconds S] [--runs N] [--no-asan]
#   targets: rtp rtcp vp8 h264 opus red sdp signaling jwt claims websocket http whip y4m ivf wav dcep extremes session
# Builds .build/fuzz/release/callend-fuzz (swiftc -sanitize=fuzzer,address), starts from the seed
# corpus in Tests/FuzzTargetsTests/Corpus/TARGET (captured from ffmpeg, GStreamer, Chromium and
# PyJWT by scripts/fuzz/capture-seeds.py, plus hand-made ones), keeps what it learns in
# .build/fuzz-corpus/TARGET, and stops after S seconds (default 60) or N executions, whichever
# first. Prints per target: executions, executions per second, coverage (edges) and features.
# A crash fails with the input saved as .build/fuzz-crashes/TARGET-crash-*: copy it into the
# target's corpus folder once the bug is fixed, and the test suite replays it from then on.
# --no-asan builds without AddressSanitizer (.build/fuzz-plain): Swift's own checks (bounds,
# overflow, checked conversions) still trap, at three times the executions a second, for runs
# of millions.
set -uo pipefail
cd "$(dirname "$0")/.."
usage() { echo "usage: scripts/fuzz.sh TARGET[,TARGET...]|--all [--seconds S] [--runs N]" >&2; exit 2; }
[ $# -ge 1 ] || usage
all=(rtp rtcp vp8 h264 opus red sdp signaling jwt claims websocket http whip y4m ivf wav dcep extremes session)
case $1 in
  --all) targets=("${all[@]}") ;;
  -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
  *) IFS=, read -r -a targets <<< "$1"
     for t in "${targets[@]}"; do
       [[ " ${all[*]} " == *" $t "* ]] || { echo "fuzz: unknown target '$t' (${all[*]})" >&2; exit 2; }
     done ;;
esac
shift
seconds=60 runs=-1 sanitize=fuzzer,address build=.build/fuzz
while [ $# -gt 0 ]; do
  case $1 in
    --seconds) [[ ${2:-} =~ ^[0-9]+$ ]] || usage; seconds=$2; shift 2 ;;
    --runs) [[ ${2:-} =~ ^[0-9]+$ ]] || usage; runs=$2; shift 2 ;;
    --no-asan) sanitize=fuzzer; build=.build/fuzz-plain; shift ;;
    *) usage ;;
  esac
done

# lld: gold fails on the sanitizer's objects (an internal error in its DWARF reader).
if ! swift build -c release --product callend-fuzz --build-path "$build" -Xswiftc -sanitize="$sanitize" \
    -Xswiftc -DCALLEND_FUZZING -Xswiftc -use-ld=lld > .build/fuzz-build.log 2>&1; then
  grep -E "error" .build/fuzz-build.log | head -20 >&2
  echo "fuzz: the fuzzing build failed (.build/fuzz-build.log)" >&2
  exit 1
fi
bin=$build/release/callend-fuzz
mkdir -p .build/fuzz-crashes
status=0
for target in "${targets[@]}"; do
  work=.build/fuzz-corpus/$target
  mkdir -p "$work"
  log=.build/fuzz-$target.log
  ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 "$bin" "$target" -max_total_time="$seconds" -runs="$runs" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix=".build/fuzz-crashes/$target-" "$work" "Tests/FuzzTargetsTests/Corpus/$target" > "$log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  cov=$(grep -oE "cov: [0-9]+ ft: [0-9]+" "$log" | tail -1)
  if [ $rc -ne 0 ]; then
    echo "fuzz: $target: FAILED after ${execs:-?} executions: $(grep -m1 -E "ERROR|panic|Fatal error|deadly signal" "$log")"
    grep -m1 "Test unit written to" "$log"
    status=1
  else
    echo "fuzz: $target: ${execs:-0} executions, ${rate:-0}/s, ${cov:-no coverage line}, corpus $(ls "$work" | wc -l) inputs"
  fi
done
exit $status
