#!/usr/bin/python3
"""Gilbert-Elliott loss on router R (run inside its namespace): the two rules the loss bench put
in FORWARD (one per device named on the command line, in that order) switch between a good state
(1 % loss, 2 s on average) and a bad one (40 % loss, 0.2 s on average), each state's length drawn
from an exponential distribution (seeded: every run sees the same sequence). About 4.5 % of
packets are lost in all, in bursts, as on a radio link that fades. Prints each switch; runs until
killed.
"""
import random, subprocess, sys, time

devices = sys.argv[1:]
states = [("good", 0.01, 2.0), ("bad", 0.40, 0.2)]
rng = random.Random(29)


def apply(probability):
    for index, device in enumerate(devices, start=1):
        subprocess.run(["iptables", "-R", "FORWARD", str(index), "-o", device, "-p", "udp", "-m", "statistic",
                        "--mode", "random", "--probability", f"{probability:.4f}", "-j", "DROP"], check=True)


start = time.monotonic()
state = 0
while True:
    name, probability, mean = states[state]
    apply(probability)
    length = rng.expovariate(1 / mean)
    print(f"{time.monotonic() - start:8.2f} s: {name} ({probability * 100:.0f} %) for {length:.2f} s", flush=True)
    time.sleep(length)
    state = 1 - state
