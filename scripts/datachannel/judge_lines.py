#!/usr/bin/python3
# Run by scripts/datachannel/test.sh: ALICE BOB PONG: the lines mode's figures: 10 MiB each way
# with video running, message latency.
import json, sys
a, b, p = (json.loads(open(f).read().splitlines()[-1]) for f in sys.argv[1:])
print(f"datachannel: callend <-> callend with video running, lines mode: 10 MiB took {a['bigSeconds']} s to alice and {b['bigSeconds']} s to bob "
      f"({10 * 8 * 1.048576 / max(a['bigSeconds'], 0.001):.0f} and {10 * 8 * 1.048576 / max(b['bigSeconds'], 0.001):.0f} Mbit/s, both ways at once); "
      f"message latency p50 {p['p50']} ms, p95 {p['p95']} ms, max {p['max']:.1f} ms (200 at 20 Hz)")
