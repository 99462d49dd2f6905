#!/usr/bin/python3
"""The loss bench's figures (scripts/loss/bench.sh): reads DIR/STACK-LOSS-RTT-RUN/ for the cases
named, per direction of each run: frames shown per second, freezes (gaps >= 300 ms between
shown pictures after the first 5 s) per minute, the longest gap, mean resolution, ICE restarts
and audio concealed; then a table per case and the goal (callend >= Chromium's frames per
second, no more freezes than Chromium, <= 0.2 freezes per minute, no ICE restart). A cellular
case (TRACE@cell) is judged per direction, with the frame delay from capture to display, the
link's utilization and callend's seconds at the video floor while the trace offered >= 1 Mbit/s.
Writes DIR/results.csv.
"""
import csv, glob, json, os, re, sys
from datetime import datetime

WARMUP = 5.0
FREEZE = 0.3


def callend_side(directory, who):
    """One direction: what `who` received, from its stats lines (one a second) and summary."""
    path = f"{directory}/{who}.out"
    if not os.path.exists(path):
        return None
    lines, summary = [], ""
    for text in open(path, errors="replace"):
        if text.startswith("{"):
            try:
                lines.append(json.loads(text))
            except ValueError:
                pass
        elif " <- " in text:
            summary = text
    started = [l for l in lines if l.get("framesDecoded", 0) > 0]
    if len(started) < 3:
        return None
    t0 = started[0]["seconds"] + WARMUP
    window = [l for l in lines if l["seconds"] > t0]
    base = max((l for l in lines if l["seconds"] <= t0), key=lambda l: l["seconds"])
    if not window:
        return None
    end = window[-1]
    minutes = (end["seconds"] - base["seconds"]) / 60
    sizes = [tuple(int(x) for x in l["resolution"].split("x")) for l in window if re.fullmatch(r"\d+x\d+", l.get("resolution", ""))]
    numbers = lambda pattern: int((re.search(pattern, summary) or [0, 0])[1])
    decoded, fec, concealed = numbers(r"audio (\d+) decoded"), numbers(r"(\d+) FEC"), numbers(r"(\d+) concealed")
    delay = re.search(r"; latency p50 (\d+) ms p95 (\d+) ms", summary)
    return {
        "delay50": int(delay[1]) if delay else None,
        "delay95": int(delay[2]) if delay else None,
        "fps": (end["framesDecoded"] - base["framesDecoded"]) / (minutes * 60),
        "freezes": end.get("freezes", 0) - base.get("freezes", 0),
        "minutes": minutes,
        "longest": max([l.get("longestFreezeMs") or 0 for l in window] + [0]),
        "width": sum(w for w, _ in sizes) / len(sizes) if sizes else 0,
        "height": sum(h for _, h in sizes) / len(sizes) if sizes else 0,
        "restarts": end.get("iceRestarts", 0),
        "outages": end.get("outages", 0),
        "concealed": 100 * concealed / max(1, decoded + fec + concealed),
    }


def chromium_side(directory, who):
    """One direction: what the page on `who` showed (requestVideoFrameCallback times)."""
    path = f"{directory}/{who}.json"
    lines = [l for l in open(path, errors="replace") if l.startswith("{")] if os.path.exists(path) else []
    run = json.loads(lines[-1]).get("run") if lines else None
    if not run or len(run.get("shown", [])) < 3:
        return None
    shown = run["shown"]
    t0 = shown[0][0] + WARMUP * 1000
    end = run.get("end", shown[-1][0])
    base = [s for s in shown if s[0] <= t0]
    previous = base[-1][0] if base else t0
    gaps = []
    frames = 0
    for t, *_ in shown:
        if t <= t0:
            continue
        frames += 1
        gaps.append(t - previous)
        previous = t
    window = [s for s in shown if s[0] > t0]
    # Capture to display, where Chromium knew the capture time (from the sender's reports).
    delays = sorted(s[4] - s[3] for s in window if len(s) > 4 and s[3] is not None and s[4] is not None)
    minutes = (end - t0) / 60000
    audio = run.get("audio", {})
    restarts = sum(1 for _, state in run.get("ice", []) if state == "failed")
    return {
        "delay50": delays[len(delays) // 2] if delays else None,
        "delay95": delays[int(len(delays) * 0.95)] if delays else None,
        "fps": frames / (minutes * 60),
        "freezes": sum(1 for g in gaps if g >= FREEZE * 1000),
        "minutes": minutes,
        "longest": max([g for g in gaps if g >= FREEZE * 1000] + [0]),
        "width": sum(s[1] for s in window) / max(1, len(window)),
        "height": sum(s[2] for s in window) / max(1, len(window)),
        "restarts": restarts,
        "concealed": 100 * audio.get("concealedSamples", 0) / max(1, audio.get("totalSamplesReceived", 0)),
        "codecs": run.get("codecs", []),
    }


FLOOR_KBPS = 30      # the encoding controller's least video bitrate
OFFERED = 1_000_000  # a second that offered this much (bit/s) should never see the floor


def link_rows(directory, direction):
    """The link's seconds in one direction (up: A to B), from its log: (unix ms, capacity, delivered)."""
    path = f"{directory}/link.log"
    rows = []
    if os.path.exists(path):
        for line in open(path):
            f = line.split()
            if len(f) == 7 and f[2] == direction and f[0].isdigit():
                rows.append((int(f[1]), int(f[3]), int(f[4])))
    return rows


def video_targets(directory, sender):
    """The sender's video target over time: (unix ms, kbit/s) from its encoding decisions."""
    path = f"{directory}/{sender}.log"
    targets = []
    if os.path.exists(path):
        for line in open(path, errors="replace"):
            found = re.match(r"(\S+Z) .*encoding: (\{.*\})\s*$", line)
            if not found:
                continue
            try:
                decision = json.loads(found[2])
                at = datetime.strptime(found[1], "%Y-%m-%dT%H:%M:%S.%fZ").timestamp() * 1000
            except ValueError:
                continue
            if decision.get("change") == "video-bitrate":
                to = str(decision.get("to", ""))
                kbps = float(to[:-1]) * (1000 if to.endswith("M") else 1) if to[-1:] in "kM" else None
                if kbps is not None:
                    targets.append((at, kbps))
    return targets


def cellular_extras(directory, stack, who):
    """For what `who` received: the link's utilization in that direction over the call, and (for
    callend) the seconds its sender sat at the video floor while the link offered >= 1 Mbit/s."""
    direction, sender = ("up", "a") if who == "b" else ("down", "b")
    rows = link_rows(directory, direction)
    active = [i for i, r in enumerate(rows) if r[2] > 0]
    if not active:
        return {"utilization": 0, "floor_seconds": None}
    window = rows[active[0] + 5:active[-1]]
    capacity = sum(r[1] for r in window)
    extras = {"utilization": sum(r[2] for r in window) / capacity if capacity else 0, "floor_seconds": None}
    if stack == "callend":
        targets = video_targets(directory, sender)
        floor = 0
        for at, offered, _ in window:
            current = [kbps for t, kbps in targets if t <= at]
            if current and current[-1] <= FLOOR_KBPS and offered >= OFFERED:
                floor += 1
        extras["floor_seconds"] = floor
    return extras


def cellular_table(case, sides_by_stack):
    """The cellular table of one case: per direction, each stack's figures and callend's goals."""
    trace = case.split("@")[0]
    met = True
    for direction, who in (("up", "b"), ("down", "a")):
        print(f"loss bench: {trace} {direction} (what {'B shows of A' if who == 'b' else 'A shows of B'})")
        print("loss bench: stack    | runs | frames shown/s | freezes/min | delay p50 / p95 ms | longest ms | utilization | ICE restarts | s at floor (>= 1 Mbit/s offered)")
        figures = {}
        for stack in ("callend", "chromium"):
            sides = [f for f in sides_by_stack.get(stack, []) if f["receiver"] == who]
            if not sides:
                continue
            minutes = sum(f["minutes"] for f in sides)
            delays50 = [f["delay50"] for f in sides if f.get("delay50") is not None]
            delays95 = [f["delay95"] for f in sides if f.get("delay95") is not None]
            floors = [f["floor_seconds"] for f in sides if f.get("floor_seconds") is not None]
            g = {
                "fps": sum(f["fps"] for f in sides) / len(sides),
                "per_minute": sum(f["freezes"] for f in sides) / minutes if minutes else float("inf"),
                "delay95": max(delays95) if delays95 else None,
                "restarts": sum(f["restarts"] for f in sides),
                "floor": sum(floors) if floors else None,
                "missing": any(f.get("missing") for f in sides),
            }
            figures[stack] = g
            delay = f"{max(delays50):.0f} / {max(delays95):.0f}" if delays50 and delays95 else "-"
            print(f"loss bench: {stack:8} | {len(sides):4} | {g['fps']:14.1f} | {g['per_minute']:11.2f} | {delay:>18} | "
                  f"{max(f['longest'] for f in sides):10.0f} | {sum(f['utilization'] for f in sides) / len(sides):11.2f} | "
                  f"{g['restarts']:12} | {'-' if g['floor'] is None else g['floor']}")
        c, r = figures.get("callend"), figures.get("chromium")
        if c is None:
            continue
        goals = [("no figures missing", not c["missing"]), ("0 s at the floor", c["floor"] == 0), ("no ICE restart", c["restarts"] == 0)]
        if r is not None and not r["missing"]:
            goals += [("freezes <= Chromium's", c["per_minute"] <= r["per_minute"]), ("frames >= Chromium's - 1", c["fps"] >= r["fps"] - 1)]
            if c["delay95"] is not None and r["delay95"] is not None:
                goals.append(("delay p95 <= 0.5x Chromium's", c["delay95"] <= 0.5 * r["delay95"]))
        missed = [name for name, ok in goals if not ok]
        met = met and not missed
        print(f"loss bench: callend targets at {trace} {direction}: " + ("met" if not missed else "NOT met (" + ", ".join(missed) + ")"))
    return met


def main():
    out, cases = sys.argv[1], sys.argv[2:]
    rows = []
    summary = {}
    for case in cases:
        loss, rtt = case.split("@")
        for stack, side in (("callend", callend_side), ("chromium", chromium_side)):
            for directory in sorted(glob.glob(f"{out}/{stack}-{loss}-{rtt}-*")):
                run = directory.rsplit("-", 1)[1]
                for who in ("a", "b"):
                    figures = side(directory, who)
                    if figures is None:
                        print(f"loss bench: {stack} {case} run {run}: no figures for {who} (logs in {directory})")
                        figures = {"fps": 0, "freezes": 0, "minutes": 0, "longest": 0, "width": 0, "height": 0, "restarts": 0,
                                   "concealed": 100, "missing": True}
                    if rtt == "cell":
                        figures.update(cellular_extras(directory, stack, who))
                    figures["receiver"] = who
                    rows.append({"case": case, "stack": stack, "run": run, **{k: v for k, v in figures.items() if k != "codecs"}})
                    summary.setdefault((case, stack), []).append(figures)
    with open(f"{out}/results.csv", "w", newline="") as f:
        fields = ["case", "stack", "run", "receiver", "fps", "freezes", "minutes", "longest", "width", "height", "restarts", "outages", "concealed",
                  "delay50", "delay95", "utilization", "floor_seconds", "missing"]
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: row.get(k, "") for k in fields})
    all_met = True
    for case in cases:
        loss, rtt = case.split("@")
        if rtt == "cell":
            all_met = cellular_table(case, {stack: summary.get((case, stack), []) for stack in ("callend", "chromium")}) and all_met
            continue
        print(f"loss bench: {'Gilbert-Elliott bursts (about 4.5 %)' if loss == 'ge' else loss + ' % random loss'} each way, RTT about {rtt} ms")
        print("loss bench: stack    | runs x dirs | frames shown/s (each)       | freezes/min | longest ms | mean resolution | ICE restarts | audio concealed")
        figures = {}
        for stack in ("callend", "chromium"):
            sides = summary.get((case, stack))
            if not sides:
                continue
            minutes = sum(s["minutes"] for s in sides)
            f = {
                "fps": sum(s["fps"] for s in sides) / len(sides),
                "per_minute": sum(s["freezes"] for s in sides) / minutes if minutes else float("inf"),
                "longest": max(s["longest"] for s in sides),
                "restarts": sum(s["restarts"] for s in sides),
                "missing": any(s.get("missing") for s in sides),
            }
            figures[stack] = f
            print(f"loss bench: {stack:8} | {len(sides):11} | {f['fps']:5.1f} ({', '.join('%.1f' % s['fps'] for s in sides)}) | "
                  f"{f['per_minute']:11.2f} | {f['longest']:10.0f} | "
                  f"{sum(s['width'] for s in sides) / len(sides):.0f}x{sum(s['height'] for s in sides) / len(sides):.0f} | "
                  f"{f['restarts']:12} | {sum(s['concealed'] for s in sides) / len(sides):.1f} %")
            codecs = sorted({c for s in sides for c in s.get("codecs", [])})
            if codecs:
                print(f"loss bench: {stack} codecs: {'; '.join(codecs)}")
        c = figures.get("callend")
        if c is None:
            continue
        goals = [("no figures missing", not c["missing"]), ("<= 0.2 freezes/min", c["per_minute"] <= 0.2), ("no ICE restart", c["restarts"] == 0)]
        if "chromium" in figures and not figures["chromium"]["missing"]:
            goals += [(">= Chromium's frames/s", c["fps"] >= figures["chromium"]["fps"]),
                      ("no more freezes than Chromium", c["per_minute"] <= figures["chromium"]["per_minute"])]
        missed = [name for name, ok in goals if not ok]
        all_met = all_met and not missed
        print(f"loss bench: callend targets at {case}: " + ("met" if not missed else "NOT met (" + ", ".join(missed) + ")"))
    print(f"loss bench: wrote {out}/results.csv")
    sys.exit(0)


main()
