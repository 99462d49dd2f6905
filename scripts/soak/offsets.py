#!/usr/bin/env python3
"""A/V offsets of a `callend bench soak --out DIR` run, from the endpoints' per-second stats
(DIR/a.out, DIR/b.out): by the sender reports (avOffsetMs) and by the capture stamps in picture
and tone (latencyMs - audioLatencyMs), as percentiles over every second of the run, outages
included. Usage: scripts/soak/offsets.py DIR"""
import json
import sys


def percentile(values, p):
    return values[min(len(values) - 1, int(p * len(values)))]


def main(directory):
    for side in "ab":
        rtcp, stamps = [], []
        with open(f"{directory}/{side}.out", errors="replace") as f:
            for line in f:
                if not line.startswith("{"):
                    continue
                stats = json.loads(line)
                if "avOffsetMs" in stats:
                    rtcp.append(stats["avOffsetMs"])
                if "latencyMs" in stats and "audioLatencyMs" in stats:
                    stamps.append(stats["latencyMs"] - stats["audioLatencyMs"])
        for name, values in (("sender reports", rtcp), ("capture stamps", stamps)):
            if not values:
                print(f"{side}: {name}: no figures")
                continue
            values.sort()
            within = sum(1 for v in values if abs(v) <= 40) / len(values)
            print(f"{side}: A/V offset by {name}, {len(values)} s: p1 {percentile(values, .01):+.0f} ms, "
                  f"p50 {percentile(values, .5):+.0f}, p99 {percentile(values, .99):+.0f}, "
                  f"min {values[0]:+.0f}, max {values[-1]:+.0f}; within ±40 ms {within * 100:.1f} % of seconds")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    try:
        main(sys.argv[1])
    except (OSError, ValueError) as error:
        sys.exit(f"offsets.py: {error} (give the --out folder of a soak run)")
