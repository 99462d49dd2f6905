"""Plots a CSV of `callend bench congestion`.

congestion.csv (a capacity schedule): per run, the sender's rate and the delivered rate against
the capacity, and the queueing delay at the bottleneck. shared-CASE.csv (several flows through
one bottleneck, with a `flow` column): per stack, each flow's delivered rate, and the queue."""
import csv
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


# The 100 ms rates are noisy: show a 500 ms moving mean.
def smooth(values, n=5):
    return [sum(values[max(0, i - n + 1):i + 1]) / len(values[max(0, i - n + 1):i + 1]) for i in range(len(values))]


def plot_flows(rows, output):
    """shared-CASE.csv: one column per stack, each flow's delivered rate above, the queue below."""
    fig, axes = plt.subplots(2, len(rows), figsize=(7 * len(rows), 7), sharex=True, squeeze=False)
    for column, (stack, samples) in enumerate(rows.items()):
        flows = defaultdict(list)
        for r in samples:
            flows[r["flow"]].append(r)
        rate = axes[0][column]
        for flow, points in flows.items():
            rate.plot([float(r["time_s"]) for r in points], smooth([float(r["delivered_kbps"]) for r in points]), label=flow)
        rate.set_title(stack)
        rate.set_ylabel("delivered kbit/s (500 ms mean)")
        rate.legend(loc="upper right", fontsize="small")
        first = next(iter(flows.values()))
        queue = axes[1][column]
        queue.plot([float(r["time_s"]) for r in first], [float(r["queue_ms"]) for r in first], color="tab:red")
        queue.set_ylabel("queueing delay (ms)")
        queue.set_xlabel("time (s)")
    fig.tight_layout()
    fig.savefig(output, dpi=90)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: plot.py congestion.csv|shared-CASE.csv OUTPUT.png")
    rows = defaultdict(list)
    with open(sys.argv[1]) as f:
        reader = csv.DictReader(f)
        for row in reader:
            rows[row["stack"]].append(row)
    if not rows:
        sys.exit("plot.py: no samples in " + sys.argv[1])
    if "flow" in (reader.fieldnames or []):
        plot_flows(rows, sys.argv[2])
        return
    fig, axes = plt.subplots(2, len(rows), figsize=(7 * len(rows), 7), sharex=True, squeeze=False)
    for column, (stack, samples) in enumerate(rows.items()):
        t = [float(r["time_s"]) for r in samples]

        def series(name):
            return [float(r[name]) for r in samples]

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
