#!/usr/bin/python3
# Run by scripts/faults/test.sh: SINCE LIMIT LOGS...: whether each side's media came back after
# the fault (SINCE), within LIMIT seconds.
import json, sys
since, limit = float(sys.argv[1]), float(sys.argv[2])
out = []
for path in sys.argv[3:]:
    side = path.rsplit("/", 1)[1][0]
    lines = []
    for line in open(path, errors="replace"):
        stamp, _, text = line.partition(" ")
        try:
            t = float(stamp)
        except ValueError:
            continue
        if t > since:
            lines.append((t, text))
    # When pictures stopped for a second or more, the side says when they came back; a side
    # that never stalled that long decoded all along. Either is known once stats run past the limit.
    if not any(t >= since + limit + 1 and text.startswith("{") for t, text in lines):
        print("wait")
        sys.exit()
    back = next((t for t, text in lines if "decoding again after" in text and t <= since + limit + 1), None)
    stalled = back is not None
    back = back or since
    fps = next((json.loads(text).get("receivedFps", 0) for t, text in lines
                if text.startswith("{") and t - 1 >= max(back, since + limit)), None)
    if fps is None:
        print("wait")
        sys.exit()
    out.append((side, back - since, fps, stalled))
ok = all(delay <= limit and fps >= 25 for _, delay, fps, _ in out)
print(("pass " if ok else "fail ") + ", ".join(
    (f"{side} decodes {delay:.1f} s after" if stalled else f"{side} never without pictures for 1 s") + f", then {fps:.1f} fps"
    for side, delay, fps, stalled in out))
