#!/usr/bin/python3
# Run by scripts/natlab/bench-setup.sh: NAME FILES...: p50/p95 of the second joiner's setup times.
import re, sys
name, files = sys.argv[1], sys.argv[2:]
times = sorted(int(m.group(1)) for f in files for m in [re.search(r"setup (\d+) ms", open(f).read())] if m)
if not times: print(f"bench-setup: {name}: no call set up"); sys.exit(1)
p = lambda q: times[min(len(times) - 1, int(q * len(times)))]
print(f"bench-setup: {name:9} {len(times)} calls: p50 {p(0.5)} ms, p95 {p(0.95)} ms (min {times[0]}, max {times[-1]})")
