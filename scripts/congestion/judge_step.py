#!/usr/bin/python3
# Run by scripts/congestion/test.sh: LOG START DROP RISE LOW: the capacity step: how fast the rate
# fell below the new capacity, the queue, and the climb back.
import json, sys
log, start, drop, rise, low = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
capacity = int(low.replace("kbit", ""))
stats, decisions = [], []
for line in open(log):
    stamp, _, rest = line.partition(" ")
    t = float(stamp)
    if rest.startswith("{") and '"receivedFps"' in rest:
        stats.append((t, json.loads(rest)))
    elif "encoding: " in rest:
        decisions.append((t, json.loads(rest.split("encoding: ", 1)[1])))
ok = True
def rate(s): return s["sentVideoKbps"] + s["sentAudioKbps"]
print("congestion: t(s)  sent kbit/s  estimate  mode")
for t, s in stats:
    print(f"congestion: {t - start:5.1f} {rate(s):8.0f} {s.get('estimateKbps') or 0:9} {s.get('mode') or '-'}")
for t, d in decisions:
    if d["change"] == "mode" or d["cause"] in ("delay", "loss"):
        print(f"congestion: decision at {t - start:5.1f}s: {d['cause']} {d['change']} {d['from']} -> {d['to']} (estimate {d['estimateKbps']})")
# Below capacity within 2 s: the one-second stats line that ends 2 s after the drop, and after.
after = [(t, s) for t, s in stats if drop + 2.0 <= t < rise]
if not after or any(rate(s) >= capacity for _, s in after[:3]):
    print(f"congestion: FAILED: sending not below {capacity} kbit/s 2 s after the drop: {[round(rate(s)) for _, s in after[:3]]}"); ok = False
below = next((t for t, s in stats if t > drop and rate(s) < capacity), None)
if below is not None:
    print(f"congestion: below {capacity} kbit/s in the stats line {below - drop:.1f} s after the drop (lines cover one second)")
def pixels(mode): w, h = mode.split("@")[0].split("x"); return int(w) * int(h)
down = [d for t, d in decisions if drop <= t < rise and d["change"] == "mode" and pixels(d["to"]) < pixels(d["from"])]
up = [d for t, d in decisions if t >= rise and d["change"] == "mode" and pixels(d["to"]) > pixels(d["from"])]
if not down: print("congestion: FAILED: the video mode did not step down after the drop"); ok = False
if not up: print("congestion: FAILED: the video mode did not step back up after the capacity returned"); ok = False
late = [s for t, s in stats if t > rise + 5]
if late and late[-1].get("mode") != "640x480@30":
    print(f"congestion: FAILED: not back at 640x480@30 at the end: {late[-1].get('mode')}"); ok = False
print("congestion: " + ("passed" if ok else "FAILED"))
sys.exit(0 if ok else 1)
