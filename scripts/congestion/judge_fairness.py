#!/usr/bin/python3
# Run by scripts/congestion/test.sh: FAIRNESS TCP PHASES: the shared-bottleneck cases' shares,
# Jain's index, queue and recovery against their floors.
import csv, re, sys
# Floors sit about a quarter below (or above, for delays) the worst the short runs measured:
# three calls, shares 0.82-1.22 and Jain 0.93-0.997, queue p95 46-49 ms (the three calls' floors
# are nearer: fifteen short runs on 2026-12-03, of three versions of the code, gave the smallest
# share 0.56-0.90, median 0.76, and Jain 0.887-0.996: which call comes out low is chance, and
# CI once failed on a smallest share under the old floor of 0.62; the queue p95 reached 54 ms in
# CI on 2026-12-04); against TCP, shares 0.35-0.45, back after 1.3-2.2 s; both ways, utilization
# 0.87-0.98, no loss, below a fallen capacity after 0.3-0.5 s, and the highest queue p95 of a
# phase 52-97 ms in seven runs (CI failed once at 97 under the old floor of 95). That figure is
# the 500 kbit/s phase's, and mostly the 0.3-0.6 s after the capacity halves: the queue tops
# 140-150 ms before the cut drains it, and a periodic probe that happens to start at the drop
# makes the cut come later (the 97 ms run); at 100 ms samples over 10 s, those few samples are
# the p95. Each is printed beside the target of the long run
# (bench congestion without --short), which these 10-25 s windows are too short to judge.
ok = True
def check(what, value, floor, target, higher=True, unit=""):
    global ok
    good = value >= floor if higher else value <= floor
    sign = ">=" if higher else "<="
    print(f"congestion: {what}: {value}{unit} (floor {sign} {floor}{unit}; long-run target {target}){'' if good else ': FAILED'}")
    ok = ok and good
row = next(l for l in open(sys.argv[1]) if l.startswith("callend  |"))
cells = [c.strip() for c in row.split("|")]
shares = [float(x) for x in cells[2].split("/")]
check("three calls: the smallest share of the fair share", min(shares), 0.50, "0.8-1.25")
check("three calls: the largest share of the fair share", max(shares), 1.5, "0.8-1.25", higher=False)
check("three calls: Jain's index", float(cells[3]), 0.85, ">= 0.95")
check("three calls: queue p95", float(re.findall(r"[\d.]+", cells[4])[1]), 70, "<= 60 ms", higher=False, unit=" ms")
row = next(l for l in open(sys.argv[2]) if l.startswith("callend  |"))
cells = [c.strip() for c in row.split("|")]
check("against TCP: the call's share of the link", float(cells[2]), 0.28, ">= 0.40")
back = re.match(r"([\d.]+) s", cells[4])
check("against TCP: back to 90 % of its rate after the download", float(back.group(1)) if back else 999, 3.0, "<= 5 s", higher=False, unit=" s")
phases = list(csv.DictReader(open(sys.argv[3])))
if {p["stack"] for p in phases} != {"callend A>B", "callend B>A"}:
    print(f"congestion: FAILED: both ways: expected a row of phases per direction, got {sorted({p['stack'] for p in phases})}"); ok = False
check("both ways: the lowest utilization of a phase", min(float(p["utilization"]) for p in phases), 0.70, ">= 0.9")
check("both ways: the highest queue p95 of a phase", max(float(p["queue_p95_ms"]) for p in phases), 120, "<= 60 ms", higher=False, unit=" ms")
check("both ways: the highest loss of a phase", max(float(p["loss"]) for p in phases), 0.01, "none", higher=False)
for i, p in enumerate(phases):
    fell = i > 0 and phases[i - 1]["stack"] == p["stack"] and int(p["capacity_kbps"]) < int(phases[i - 1]["capacity_kbps"])
    if fell:
        where = f"{p['stack']} from {p['phase_start_s']} s ({p['capacity_kbps']} kbit/s)"
        check(f"both ways: {where}: below the fallen capacity after", float(p["fall_below_s"]) if p["fall_below_s"] else 999, 0.7, "<= 0.5 s",
              higher=False, unit=" s")
print("congestion: shared bottleneck: " + ("passed" if ok else "FAILED"))
sys.exit(0 if ok else 1)
