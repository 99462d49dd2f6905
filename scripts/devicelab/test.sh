#!/usr/bin/env bash
# The device lab run of the test command: boots the VM (vivid + snd-aloop) and runs, against the
# real drivers, `callend devices --json` and the DeviceLab test suite of the already built test
# binary; checks the results on the host. Skips, saying so, where qemu cannot run here.
set -uo pipefail
cd "$(dirname "$0")/../.."
here=$PWD/scripts/devicelab
start=$(date +%s)
# A lab of its own for this run, removed at the end (setup takes seconds; the kernel package
# stays in apt's cache). DEVICELAB_DIR keeps a lab across runs when set.
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
python3 - "$results/devices.json" "$results/devices-nobody.txt" "$results/watch.jsonl" "$results/doctor-nobody.txt" <<'PY' || exit 1
import json, sys
report = json.load(open(sys.argv[1]))
# As a user outside the video and audio groups, callend devices explains what it cannot open.
nobody = open(sys.argv[2]).read()
assert "/dev/video0" in nobody and "'video' group" in nobody, nobody
assert "sound card 0 (Loopback)" in nobody and "'audio' group" in nobody, nobody
# devices --doctor as that user: forbidden, with the group to join, and an exit code saying so.
doctor = open(sys.argv[4]).read()
# (The lab has no udev: its nodes belong to root, and the doctor says which group udev would give.)
assert "/dev/video0: forbidden; the device belongs to root" in doctor and "the 'video' group" in doctor, doctor
assert "sound card 0 (Loopback): forbidden" in doctor and "the 'audio' group" in doctor and doctor.rstrip().endswith("exit 1"), doctor
print("devicelab: callend devices --doctor as nobody: " + "; ".join(l.strip()[:100] for l in doctor.splitlines() if "forbidden" in l))
camera = next(c for c in report["cameras"] if c["driver"] == "vivid")
yuyv = next(f for f in camera["formats"] if f["fourCC"] == "YUYV")
sizes = {(s["width"], s["height"]): s["frameRates"] for s in yuyv["sizes"]}
assert (640, 480) in sizes and {"frames": 25, "per": 1} in sizes[(640, 480)], sizes
assert len(camera["formats"]) > 50, len(camera["formats"])
assert any(d["hardwareName"] == "hw:CARD=Loopback,DEV=0" for d in report["audio"]), report["audio"]
print(f"devicelab: callend devices saw vivid with {len(camera['formats'])} formats and the Loopback card")
# devices --watch ran beside the tests: the card there at the start, and the one a test plugged
# in (snd-dummy) and unplugged, with its PCM device.
events = [json.loads(line) for line in open(sys.argv[3]) if line.startswith("{")]
seen = [(e["event"], e["card"]) for e in events]
assert ("added", "Loopback") in seen and ("added", "Dummy") in seen and ("removed", "Dummy") in seen, open(sys.argv[3]).read()
dummy = next(e for e in events if e["event"] == "added" and e["card"] == "Dummy")
assert any(d["plugName"] == "plughw:CARD=Dummy,DEV=0" for d in dummy["devices"]), dummy
print(f"devicelab: callend devices --watch saw {seen}")
PY
echo "devicelab: passed in $(( $(date +%s) - start )) s"
