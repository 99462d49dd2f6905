#!/usr/bin/env bash
# Congestion test (about 3.5 minutes). First (30 s): hosts A and B through router R, whose link toward B is a tbf
# bottleneck (300 ms queue). A sends 640x480@30 + Opus to B in auto mode while the capacity
# goes 2.5 -> 0.6 -> 2.5 Mbit/s. Checks, from A's per-second stats and its decision log:
# A's sending rate is below 0.6 Mbit/s within 2 s of the drop, the video mode steps down, and
# after the capacity returns the mode steps back up. Then the short versions of the shared
# bottleneck cases of 'callend bench congestion' (callend only): three calls started 10 s apart
# through 3 Mbit/s (RFC 8867 §5.3), and one call against a CUBIC TCP download through 2 Mbit/s
# (§5.6); and congestion both ways at once (§5.2: a bottleneck on each direction with its own
# schedule, both ends sending). They print the bench's figures and targets; the test fails below
# floors about a quarter from the worst the short runs measured, each printed beside its long-run
# target (below, with the figures they come from). Removes everything it made.
# Needs root; skips, saying so, without it.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/stage.sh
if [ "$(id -u)" -ne 0 ] || ! ip netns list >/dev/null 2>&1 || ! command -v tc >/dev/null; then
  skip "needs root, ip netns and tc"
fi
bin=$(swift build --show-bin-path)/callend
high=${CONGESTION_HIGH:-2500kbit} low=${CONGESTION_LOW:-600kbit}
phase1=${CONGESTION_PHASE1:-9} phase2=${CONGESTION_PHASE2:-9} phase3=${CONGESTION_PHASE3:-10}
seconds=$((phase1 + phase2 + phase3 + 3))
source scripts/netns-topology.sh
topology_start congestion
# A 4 kB bucket (about three packets): the bottleneck behaves like a link, not a policer.
shape() { tc -n "$r" qdisc replace dev "${tag}rb" root tbf rate "$1" burst 4000 latency 300ms; }
shape "$high"

# Each output line is prefixed with the wall-clock time it appeared, to line it up with the schedule.
stamp() { while IFS= read -r line; do printf '%s %s\n' "$(date +%s.%N)" "$line"; done; }
"$bin" token --new-secret --out "$work/secret"
service_tls "$work/tls" 10.71.1.2 || exit 1
ip netns exec "$a" "$bin" serve --listen 10.71.1.2:7000 --secret-file "$work/secret" "${serve_tls[@]}" > "$work/serve.log" 2>&1 &
pids+=($!)
wait_for "$work/serve.log" "listening on" 30 || exit 1
token_a=$("$bin" token --room bottleneck --identity a --secret-file "$work/secret")
token_b=$("$bin" token --room bottleneck --identity b --secret-file "$work/secret")
common=(bottleneck --server tls://10.71.1.2:7000 "${join_tls[@]}" --video-size 640x480 --fps 30 --duration "$seconds" --no-stdin)
(ip netns exec "$a" env CALLEND_TOKEN="$token_a" "$bin" join "${common[@]}" 2>&1 | stamp > "$work/a.log") &
pids+=($!)
wait_for "$work/a.log" "joined room" 30 || exit 1
ip netns exec "$b" env CALLEND_TOKEN="$token_b" "$bin" join "${common[@]}" --video-source none > "$work/b.log" 2>&1 &
pids+=($!)
# The schedule starts when media flows (A's first stats line), not when B was launched.
wait_for "$work/a.log" '"receivedFps"' 30 || exit 1
start=$(date +%s.%N)
sleep "$phase1"; drop=$(date +%s.%N); shape "$low"
sleep "$phase2"; rise=$(date +%s.%N); shape "$high"
for pid in "${pids[@]:1}"; do
  timeout 40 tail --pid="$pid" -f /dev/null || echo "congestion: an endpoint did not finish in time"
done

python3 - "$work/a.log" "$start" "$drop" "$rise" "$low" <<'PY'
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
PY
first=$?

# The shared-bottleneck cases, short: the bench's own namespaces (removed when it ends).
shared() {  # shared CASE: runs it, prints its report, leaves it in $work/CASE.txt
  "$bin" bench congestion --case "$1" --short --no-aiortc --out "$work/$1" > "$work/$1.txt" 2> "$work/$1.err" \
    || { echo "congestion: FAILED: bench congestion --case $1"; tail -5 "$work/$1.err"; return 1; }
  sed 's/^/congestion: /' "$work/$1.txt"
}
second=0
shared fairness || second=1
shared tcp || second=1
shared both-ways || second=1
if [ $second -eq 0 ]; then
  python3 - "$work/fairness.txt" "$work/tcp.txt" "$work/both-ways/phases.csv" <<'PY' || second=1
import csv, re, sys
# Floors sit about a quarter below (or above, for delays) the worst the short runs measured:
# three calls, shares 0.82-1.22 and Jain 0.93-0.997, queue p95 46-49 ms (the three calls' floors
# are nearer: fifteen short runs on 2026-12-03, of three versions of the code, gave the smallest
# share 0.56-0.90, median 0.76, and Jain 0.887-0.996: which call comes out low is chance, and
# CI once failed on a smallest share under the old floor of 0.62); against TCP, shares
# 0.35-0.45, back after 1.3-2.2 s; both ways, utilization 0.87-0.98, queue p95 24-76 ms, no loss,
# below a fallen capacity after 0.3-0.5 s. Each is printed beside the target of the long run
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
check("three calls: queue p95", float(re.findall(r"[\d.]+", cells[4])[1]), 60, "<= 60 ms", higher=False, unit=" ms")
row = next(l for l in open(sys.argv[2]) if l.startswith("callend  |"))
cells = [c.strip() for c in row.split("|")]
check("against TCP: the call's share of the link", float(cells[2]), 0.28, ">= 0.40")
back = re.match(r"([\d.]+) s", cells[4])
check("against TCP: back to 90 % of its rate after the download", float(back.group(1)) if back else 999, 3.0, "<= 5 s", higher=False, unit=" s")
phases = list(csv.DictReader(open(sys.argv[3])))
if {p["stack"] for p in phases} != {"callend A>B", "callend B>A"}:
    print(f"congestion: FAILED: both ways: expected a row of phases per direction, got {sorted({p['stack'] for p in phases})}"); ok = False
check("both ways: the lowest utilization of a phase", min(float(p["utilization"]) for p in phases), 0.70, ">= 0.9")
check("both ways: the highest queue p95 of a phase", max(float(p["queue_p95_ms"]) for p in phases), 95, "<= 60 ms", higher=False, unit=" ms")
check("both ways: the highest loss of a phase", max(float(p["loss"]) for p in phases), 0.01, "none", higher=False)
for i, p in enumerate(phases):
    fell = i > 0 and phases[i - 1]["stack"] == p["stack"] and int(p["capacity_kbps"]) < int(phases[i - 1]["capacity_kbps"])
    if fell:
        where = f"{p['stack']} from {p['phase_start_s']} s ({p['capacity_kbps']} kbit/s)"
        check(f"both ways: {where}: below the fallen capacity after", float(p["fall_below_s"]) if p["fall_below_s"] else 999, 0.7, "<= 0.5 s",
              higher=False, unit=" s")
print("congestion: shared bottleneck: " + ("passed" if ok else "FAILED"))
sys.exit(0 if ok else 1)
PY
fi
exit $(( first || second ))
