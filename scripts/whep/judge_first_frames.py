#!/usr/bin/python3
# Run by scripts/whep/test.sh: PLAYER-OUT NAME: POST to first frame over the players, p50 and p95.
import json, statistics, sys
times = sorted(json.loads(l)["firstFrameMs"] for l in open(sys.argv[1]) if l.startswith("{") and json.loads(l).get("firstFrameMs"))
if times:
    p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
    print(f"whep: {sys.argv[2]}: POST -> first frame over {len(times)} players: p50 {statistics.median(times):.0f} ms, p95 {p95:.0f} ms, max {times[-1]:.0f} ms")
