#!/usr/bin/python3
# Run by scripts/aiortc/test.sh: WORK NAME: the case passes when each side decoded the other's
# video and audio (callend's summary, aiortc's JSON line).
import json, re, sys
work, name = sys.argv[1:]
callend = open(f"{work}/{name}-callend.out").read()
lines = [l for l in open(f"{work}/{name}-aiortc.out").read().splitlines() if l.startswith("{")]
aiortc = json.loads(lines[-1]) if lines else {}
decoded = int((re.search(r"video (\d+) frames decoded", callend) or [0, 0])[1])
audio = int((re.search(r"audio (\d+) decoded", callend) or [0, 0])[1])
sent = int((re.search(r"sent (\d+) frames", callend) or [0, 0])[1])
ok = True
print(f"aiortc-interop: {name}: callend decoded {decoded} of aiortc's {aiortc.get('videoFramesSent', 0)} frames, {audio} audio frames")
print(f"aiortc-interop: {name}: aiortc decoded {aiortc.get('videoFrames', 0)} of callend's {sent} frames ({aiortc.get('videoSize')}), {aiortc.get('audioFrames', 0)} audio frames; connection {aiortc.get('connection')}")
if not aiortc.get("videoFramesSent") or decoded < 0.9 * aiortc["videoFramesSent"] or audio == 0: ok = False
if not sent or aiortc.get("videoFrames", 0) < 0.9 * sent or not aiortc.get("audioFrames"): ok = False
print(f"aiortc-interop: {name}: {'passed' if ok else 'FAILED'}")
sys.exit(0 if ok else 1)
