#!/usr/bin/python3
# Run by scripts/fleet/test.sh: worst FROM TO: the lowest fps of any stats line at either side
# stamped in (FROM, TO].
import json, sys
a, b = float(sys.argv[1]), float(sys.argv[2])
lows = []
for path in sys.argv[3:]:
    values = [json.loads(text)["receivedFps"] for t, _, text in (l.partition(" ") for l in open(path).read().splitlines())
              if a < float(t) <= b and text.startswith("{") and '"receivedFps"' in text]
    lows.append(min(values) if values else 0)
print(f"{min(lows):.1f}")
