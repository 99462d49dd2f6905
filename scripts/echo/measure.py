"""Figures of the echo bench (scripts/echo/bench.sh), standard library only.

  measure.py mix-snr CLEAN NOISE SNR_DB OUT   speech plus noise scaled to SNR_DB over the speech
  measure.py report DIR DELAY...              ERLE, convergence, double talk, noise suppression

ERLE (echo return loss enhancement) is the microphone's power over the output's, in the
windows where the echo is loud (within 30 dB of its peak) and no near end speaks (before 14 s):
steady state from 6 s. Convergence: the start of the first half second from which every
following half second (with enough echo in it) has ERLE >= 20 dB, counted from when the far end
starts talking (0.5 s). Double talk (14 s on): the output against the clean near end, aligned:
the near end's level in the output (dB; 0 is untouched) and its correlation with it (1 is
perfect); the microphone itself as the reference. Noise: the speech windows' power over the
noise-only windows' power, in the output against the input (the SNR gain), and the speech's
own level change.
"""
import array
import json
import math
import sys
import wave

RATE = 48000
WIN = RATE // 100  # 10 ms


def read(path):
    with wave.open(path, "rb") as w:
        assert w.getframerate() == RATE and w.getsampwidth() == 2, path
        data = array.array("h", w.readframes(w.getnframes()))
        if w.getnchannels() == 2:
            data = array.array("h", [(data[i] + data[i + 1]) // 2 for i in range(0, len(data), 2)])
    return data


def write(path, samples):
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(RATE)
        w.writeframes(array.array("h", samples).tobytes())


def powers(x):
    return [sum(v * v for v in x[i:i + WIN]) / WIN for i in range(0, len(x) - WIN + 1, WIN)]


def db(a, b):
    return 10 * math.log10(max(a, 1e-9) / max(b, 1e-9))


def best_lag(ref, out, start, length, max_lag):
    """The lag (samples, 0 ... max_lag) at which out follows ref most closely: coarse on 1 ms
    steps, then fine around the best."""
    def corr(lag):
        a = ref[start:start + length]
        b = out[start + lag:start + lag + length]
        ab = sum(x * y for x, y in zip(a, b))
        aa = sum(x * x for x in a)
        bb = sum(y * y for y in b)
        return ab / math.sqrt(aa * bb) if aa and bb else 0
    coarse = max(range(0, max_lag + 1, 48), key=corr)
    return max(range(max(0, coarse - 48), min(max_lag, coarse + 48) + 1), key=corr)


def near_end(near, out, start, end):
    """Level (dB) and correlation of the clean near end in `out` over [start, end) samples."""
    length = min(RATE, end - start)
    probe = start + (end - start - length) // 2
    lag = best_lag(near, out, probe, length, 1920)
    a = near[start:end]
    b = out[start + lag:end + lag]
    ab = sum(x * y for x, y in zip(a, b))
    aa = sum(x * x for x in a)
    bb = sum(y * y for y in b)
    scale = ab / aa if aa else 0
    correlation = ab / math.sqrt(aa * bb) if aa and bb else 0
    return 20 * math.log10(max(abs(scale), 1e-6)), correlation, lag


def echo_figures(echo, mic, out, near):
    pe, pm, po = powers(echo), powers(mic), powers(out)
    peak = max(pe)
    talk = next(i for i, p in enumerate(powers(near)) if p > 0)  # first near-end window
    loud = [i for i in range(min(len(po), talk)) if pe[i] > peak * 1e-3]
    steady = [i for i in loud if i >= 600]
    erle = db(sum(pm[i] for i in steady), sum(po[i] for i in steady))
    halves = []
    for h in range(0, talk // 50):
        windows = [i for i in loud if h * 50 <= i < (h + 1) * 50]
        if len(windows) >= 15:
            halves.append((h * 0.5, db(sum(pm[i] for i in windows), sum(po[i] for i in windows))))
    converged = None
    for k, (t, _) in enumerate(halves):
        if all(v >= 20 for _, v in halves[k:]):
            converged = max(0.0, t - 0.5)
            break
    end = len(near)
    last = max(i for i, p in enumerate(powers(near)) if p > 0)
    level, correlation, lag = near_end(near, out, talk * WIN, min(end, (last + 1) * WIN) - 1920)
    return {"erle_db": round(erle, 1), "converged_s": converged, "near_level_db": round(level, 1),
            "near_correlation": round(correlation, 3), "lag_ms": round(lag / 48, 1)}


def noise_figures(clean, mic, out):
    pc = powers(clean)
    peak = max(pc)
    speech = [i for i, p in enumerate(pc) if p > peak * 1e-2]
    quiet = [i for i, p in enumerate(pc) if p == 0 and i >= 100]
    def snr(x):
        px = powers(x)
        return db(sum(px[i] for i in speech) / len(speech), sum(px[i] for i in quiet) / len(quiet))
    pm, po = powers(mic), powers(out)
    return {"snr_in_db": round(snr(mic), 1), "snr_out_db": round(snr(out), 1), "snr_gain_db": round(snr(out) - snr(mic), 1),
            "noise_reduction_db": round(db(sum(pm[i] for i in quiet), sum(po[i] for i in quiet)), 1),
            "speech_level_db": round(db(sum(po[i] for i in speech), sum(pm[i] for i in speech)), 1)}


def main():
    if sys.argv[1] == "mix-snr":
        clean, noise = read(sys.argv[2]), read(sys.argv[3])
        target = float(sys.argv[4])
        pc = powers(clean)
        peak = max(pc)
        speech = [p for p in pc if p > peak * 1e-2]
        noise_power = sum(v * v for v in noise) / len(noise)
        gain = math.sqrt(sum(speech) / len(speech) / noise_power / 10 ** (target / 10))
        write(sys.argv[5], [max(-32768, min(32767, int(c + gain * n))) for c, n in zip(clean, noise)])
        return 0
    work, delays = sys.argv[2], sys.argv[3:]
    far_start = 0.5
    near = read(f"{work}/near.wav")
    rows = []
    for d in delays:
        echo, mic = read(f"{work}/echo-{d}.wav"), read(f"{work}/mic-{d}.wav")
        stats = json.load(open(f"{work}/callend-{d}.json"))
        for name, path in [("callend", f"callend-{d}.wav"), ("gst webrtcdsp", f"gst-false-{d}.wav"),
                           ("gst delay-agnostic", f"gst-true-{d}.wav")]:
            out = read(f"{work}/{path}")
            out = out[:len(mic)] + array.array("h", [0] * max(0, len(mic) - len(out)))
            f = echo_figures(echo, mic, out, near)
            f["stack"], f["delay_ms"] = name, int(d)
            if name == "callend":
                f["measured_delay_ms"] = stats.get("measuredDelayMs")
            rows.append(f)
        ref = echo_figures(echo, mic, mic, near)
        rows.append({"stack": "microphone (no processing)", "delay_ms": int(d), "near_level_db": ref["near_level_db"],
                     "near_correlation": ref["near_correlation"]})
    print(f"echo bench: ERLE steady state (goal >= 25 dB), time to 20 dB after the far end starts (goal <= 2 s), "
          f"near end in double talk (level dB, correlation with the clean near end)")
    print(f"{'delay':>6} {'stack':<28} {'ERLE dB':>8} {'converged':>10} {'near dB':>8} {'near corr':>10} {'found':>8}")
    failures = []
    for r in rows:
        conv = "never" if r.get("converged_s") is None and "erle_db" in r else (f"{r['converged_s']:.1f} s" if "erle_db" in r else "")
        erle = f"{r['erle_db']:.1f}" if "erle_db" in r else ""
        found = f"{r['measured_delay_ms']} ms" if r.get("measured_delay_ms") is not None else ""
        print(f"{r['delay_ms']:>4}ms {r['stack']:<28} {erle:>8} {conv:>10} {r['near_level_db']:>8.1f} {r['near_correlation']:>10.3f} {found:>8}")
        if r["stack"] == "callend":
            if r["erle_db"] < 25:
                failures.append(f"ERLE {r['erle_db']} dB at {r['delay_ms']} ms (goal 25)")
            if r["converged_s"] is None or r["converged_s"] > 2:
                failures.append(f"convergence {r['converged_s']} s at {r['delay_ms']} ms (goal 2)")
    clean, mic = read(f"{work}/ns-clean.wav"), read(f"{work}/ns-mic.wav")
    print("noise suppression: speech in pink noise at 5 dB SNR; SNR = speech windows over noise-only windows")
    print(f"{'stack':<28} {'SNR in':>7} {'SNR out':>8} {'gain dB':>8} {'noise -dB':>10} {'speech dB':>10}")
    for name, path in [("callend", "callend-ns.wav"), ("gst webrtcdsp (high)", "gst-ns.wav")]:
        out = read(f"{work}/{path}")
        out = out[:len(mic)] + array.array("h", [0] * max(0, len(mic) - len(out)))
        n = noise_figures(clean, mic, out)
        print(f"{name:<28} {n['snr_in_db']:>7.1f} {n['snr_out_db']:>8.1f} {n['snr_gain_db']:>8.1f} {n['noise_reduction_db']:>10.1f} {n['speech_level_db']:>10.1f}")
    if failures:
        print("echo bench: NOT met: " + "; ".join(failures))
        return 1
    print("echo bench: goals met (ERLE >= 25 dB, converged within 2 s, at every delay)")
    return 0


sys.exit(main())
