"""Plots congestion.csv from `callend bench congestion`: per stack, the sender's rate and the
delivered rate against the capacity, and the queueing delay at the bottleneck."""
import csv
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: plot.py congestion.csv congestion.png")
    rows = defaultdict(list)
    with open(sys.argv[1]) as f:
        for row in csv.DictReader(f):
            rows[row["stack"]].append(row)
    if not rows:
        sys.exit("plot.py: no samples in " + sys.argv[1])
    fig, axes = plt.subplots(2, len(rows), figsize=(7 * len(rows), 7), sharex=True, squeeze=False)
    for column, (stack, samples) in enumerate(rows.items()):
        t = [float(r["time_s"]) for r in samples]

        def series(name):
            return [float(r[name]) for r in samples]

        # The 100 ms rates are noisy: show a 500 ms moving mean.
        def smooth(values, n=5):
            return [sum(values[max(0, i - n + 1):i + 1]) / len(values[max(0, i - n + 1):i + 1]) for i in range(len(values))]

        rate = axes[0][column]
        rate.step(t, series("capacity_kbps"), where="post", color="black", label="capacity")
        rate.plot(t, smooth(series("sent_kbps")), label="sent (500 ms mean)")
        rate.plot(t, smooth(series("delivered_kbps")), label="delivered (500 ms mean)", alpha=0.7)
        rate.set_title(stack)
        rate.set_ylabel("kbit/s")
        rate.legend(loc="upper right", fontsize="small")
        queue = axes[1][column]
        queue.plot(t, series("queue_ms"), color="tab:red")
        queue.set_ylabel("queueing delay (ms)")
        queue.set_xlabel("time (s)")
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=90)


if __name__ == "__main__":
    main()
