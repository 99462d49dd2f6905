#!/usr/bin/python3
# Run by scripts/fleet/test.sh: steady SINCE: waits for a stats line at both sides after SINCE
# with >= 25 fps.
import json, sys
since = float(sys.argv[1])
def fps(path):
    for line in reversed(open(path).read().splitlines()):
        t, _, text = line.partition(" ")
        if float(t) > since and text.startswith("{") and '"receivedFps"' in text:
            return json.loads(text)["receivedFps"]
    return 0
sys.exit(0 if all(fps(p) >= 25 for p in sys.argv[2:]) else 1)
