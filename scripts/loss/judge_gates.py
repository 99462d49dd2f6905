#!/usr/bin/python3
# Run by scripts/loss/test.sh: RESULTS RUN-DIR: the loss stage's gates on callend's rows of the
# loss bench (frames, freezes, restarts, audio).
import csv, re, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["stack"] == "callend"]
ok = len(rows) == 2
all_freezes, all_minutes = 0, 0.0
for r in rows:
    fps, freezes, minutes, longest = float(r["fps"]), int(float(r["freezes"])), float(r["minutes"]), float(r["longest"])
    restarts, outages, concealed = int(float(r["restarts"])), int(float(r["outages"] or 0)), float(r["concealed"])
    all_freezes, all_minutes = all_freezes + freezes, all_minutes + minutes
    # Video FEC (ULPFEC in RED) rebuilt some of what was lost, with no round trip.
    summary = open(f"{sys.argv[2]}/{r['receiver']}.out", errors="replace").read()
    rebuilt = int((re.search(r"(\d+) rebuilt from \d+ FEC", summary) or [0, 0])[1])
    good = not r["missing"] and restarts == 0 and outages == 0 and fps >= 27 and longest < 1000 and concealed < 3 and rebuilt > 0
    print(f"loss: {r['receiver']} received {fps:.1f} pictures/s, {freezes} freezes in {minutes:.1f} min (longest {longest:.0f} ms), "
          f"{restarts} ICE restarts, {outages} outages, {concealed:.1f} % of audio concealed, {rebuilt} video packets rebuilt by FEC: "
          f"{'passed' if good else 'FAILED'}")
    ok = ok and good
per_minute = all_freezes / all_minutes if all_minutes else float("inf")
print(f"loss: both directions: {all_freezes} freezes in {all_minutes:.1f} min, {per_minute:.2f} a minute (at most 1): {'passed' if per_minute <= 1 else 'FAILED'}")
ok = ok and per_minute <= 1
print("loss: passed" if ok else "loss: FAILED")
sys.exit(0 if ok else 1)
