#!/usr/bin/python3
# Run by scripts/twohost/test.sh: WORK SECONDS: each host decoded the other's video and heard its
# tone in its WAV.
import math, re, struct, sys, wave
work, seconds = sys.argv[1], int(sys.argv[2])
ok = True
for side, peer in (("a", "host-b"), ("b", "host-a")):
    text = open(f"{work}/{side}.out").read()
    sent = re.search(r"sent (\d+) frames", open(f"{work}/{'b' if side == 'a' else 'a'}.out").read())
    decoded = re.search(r"video (\d+) frames decoded", text)
    if not (sent and decoded):
        print(f"twohost: FAILED: no summary from {side}: {text}"); ok = False; continue
    s, d = int(sent.group(1)), int(decoded.group(1))
    # Received audio against the 440 Hz tone the other side sends, in the second half of the
    # call: normalised correlation at the best phase over one period, in each 0.1 s window (a
    # concealed packet or a playout gap moves the phase; it does not make the sound another).
    # The median window must be the tone; the windows below 0.9 (a gap or a concealed packet in
    # them) are counted and printed, not judged: continuity is the soak's and the faults' job.
    # (0.5 s windows held a phase move in most windows on a loaded CI machine: 7 of 10 below
    # 0.9, median 0.895, though every window was the tone on either side of its move.)
    w = wave.open(f"{work}/{side}.wav")
    rate, ch = w.getframerate(), w.getnchannels()
    raw = w.readframes(w.getnframes())
    samples = struct.unpack("<%dh" % (len(raw) // 2), raw)[::ch]
    tail = samples[len(samples) // 2:][: rate * 5]
    def correlation(part):
        energy = math.sqrt(sum(x * x for x in part)) or 1.0
        best = 0.0
        for phase in range(0, 109, 4):
            ref = [math.sin(2 * math.pi * 440 * (i + phase) / rate) for i in range(len(part))]
            best = max(best, sum(x * y for x, y in zip(part, ref)) / (energy * math.sqrt(sum(y * y for y in ref))))
        return best
    window = rate // 10
    scores = sorted(correlation(tail[i:i + window]) for i in range(0, len(tail) - window + 1, window))
    median = scores[len(scores) // 2] if scores else 0.0
    low = sum(1 for x in scores if x < 0.9)
    print(f"twohost: {side} <- {peer}: {d} of {s} frames decoded ({100 * d / max(1, s):.1f} %), audio correlation with the tone {median:.3f} (median of {len(scores)} windows of 0.1 s; {low} below 0.9)")
    if d < 0.95 * s or median < 0.9:
        ok = False
sys.exit(0 if ok else 1)
