#!/usr/bin/env bash
# The device lab run of the test command: boots the VM (vivid + snd-aloop) and runs, against the
# real drivers, `callend devices --json` and the DeviceLab test suite of the already built test
# binary; checks the results on the host. Skips, saying so, where qemu cannot run here.
set -uo pipefail
cd "$(dirname "$0")/../.."
here=$PWD/scripts/devicelab
start=$(date +%s)
# A lab of its own for this run, removed at the end (setup takes seconds; the packages it
# downloads stay in setup.sh's cache). DEVICELAB_DIR keeps a lab across runs when set.
if [ -z "${DEVICELAB_DIR:-}" ]; then
  export DEVICELAB_DIR=$(mktemp -d /var/tmp/callend-devicelab.XXXXXX)
  trap 'rm -rf "$DEVICELAB_DIR"' EXIT
fi
source scripts/stage.sh
if ! lab=$("$here/setup.sh"); then
  skip "the lab could not be set up (see above)"
fi
results=$(mktemp -d "$lab/results.XXXXXX")
# Can qemu boot the lab here at all? (Run from /, so only booting is tested; a failure of the
# real run below is a failure, not a skip.)
if ! (cd / && "$here/vmrun.sh" -t 60 -- true); then
  skip "qemu could not boot the lab VM on this machine"
fi
bin=$(swift build --show-bin-path)
# The kernel the lab boots, whose modules a test loads mid-run (snd-dummy: a sound card plugged in).
version=$(ls "$lab"/ready-* | head -1); version=${version##*/ready-}
# CALLEND_DEVICELAB_FILTER narrows the suites for a developer's rerun (the host checks below
# expect the whole run).
status=0
"$here/vmrun.sh" -t 240 -r "$results" -- sh -c "{ $bin/callend devices --watch --json > $results/watch.jsonl 2>&1 & } && $bin/callend devices --json > $results/devices.json && setpriv --reuid=nobody --regid=nogroup --clear-groups $bin/callend devices > $results/devices-nobody.txt 2>&1 && { setpriv --reuid=nobody --regid=nogroup --clear-groups $bin/callend devices --doctor --seconds 0.2 > $results/doctor-nobody.txt 2>&1; echo \"exit \$?\" >> $results/doctor-nobody.txt; } && CALLEND_DEVICELAB=1 CALLEND_DEVICELAB_KERNEL=$lab/kernel CALLEND_DEVICELAB_KERNEL_VERSION=$version $bin/callendPackageTests.xctest --testing-library swift-testing --filter ${CALLEND_DEVICELAB_FILTER:-DeviceLab} --no-parallel" || status=$?
if [ $status -ne 0 ]; then
  echo "devicelab: FAILED: the tests in the VM exited with $status"
  exit 1
fi
python3 scripts/devicelab/judge_devices.py "$results/devices.json" "$results/devices-nobody.txt" "$results/watch.jsonl" "$results/doctor-nobody.txt" || exit 1
echo "devicelab: passed in $(( $(date +%s) - start )) s"
