#!/usr/bin/python3
# Run by scripts/devicelab/test.sh: DEVICES NOBODY WATCH DOCTOR: what callend devices, devices
# --watch and --doctor (as root and as nobody) said in the lab VM.
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
