#!/usr/bin/python3
"""The fan-out bench (issue 31): what each added viewer costs the sending endpoint, callend beside
aiortc, on loopback.

Both send the same 640x360@30 clip (testsrc2, made once with ffmpeg) and a tone, VP8 held at
800 kbit/s, to N WHEP viewers (aiortc, scripts/viewers/whep_viewers.py, all in one process):
  callend: callend serve --http and one `callend join` alone in its room (--max-viewers 8,
           --encoding manual --max-video-bitrate 800000): its viewers' video comes from one
           encoder at 800 kbit/s.
  aiortc:  scripts/viewers/aiortc_sender.py, one clip relayed to every viewer (MediaRelay), which
           aiortc encodes once per viewer, pinned at 800 kbit/s.
For each N (1, 2, 4, 8), runs alternate (callend, aiortc, callend, ...). Per run: the sender's
CPU (user + system of its process over the window, in cores), and each viewer's decoded frame
rate and video bitrate over it. Before the first run, each sender's CPU with no viewer (its
capture alone). Prints the medians, each sender's cost per added viewer as a share of what its
first viewer cost over the idle sender (one encode plus one session; the goal: callend <= 5 %),
and callend's ratio to aiortc at each N.

With --encoding auto, callend's endpoint runs its automatic mode (the estimate of each viewer
judges whether the shared stream fits it) instead of a held 800 kbit/s (auto mode takes no --max-video-bitrate): the run then also counts
the viewers that the endpoint gave an encoder of their own ("cause":"thin" in its decision log;
the goal on an idle loopback: none) and how far each viewer's frames fall below its siblings'
best (the goal: within 10 %). aiortc is held at 800 kbit/s either way.

  scripts/viewers/bench.py [--counts 1,2,4,8] [--runs 2] [--seconds 10] [--encoding manual|auto] [--callend BIN] [--out DIR]
"""
import argparse, json, os, shutil, statistics, subprocess, sys, tempfile, time

parser = argparse.ArgumentParser(description="the sending endpoint's CPU with 1, 2, 4, 8 viewers: callend against aiortc")
parser.add_argument("--counts", default="1,2,4,8")
parser.add_argument("--runs", type=int, default=2)
parser.add_argument("--seconds", type=float, default=10)
parser.add_argument("--encoding", choices=["manual", "auto"], default="manual")
parser.add_argument("--callend", default=None, help="the callend binary (default: the release build)")
parser.add_argument("--out", default=None, help="keep the clip and the logs here")
args = parser.parse_args()
counts = [int(c) for c in args.counts.split(",")]
if args.runs < 1 or not 3 <= args.seconds <= 60 or not all(1 <= c <= 8 for c in counts):
    sys.exit("viewers: --runs >= 1, --seconds 3 ... 60, --counts each 1 ... 8")

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
python = os.path.join(root, ".build/bench-venv/bin/python")
if subprocess.run([python, "-c", "import aiortc"], capture_output=True).returncode != 0:
    subprocess.run(["bash", os.path.join(root, "scripts/congestion/setup-bench.sh")], capture_output=True)
    if subprocess.run([python, "-c", "import aiortc"], capture_output=True).returncode != 0:
        sys.exit("viewers: aiortc could not be installed into .build/bench-venv (scripts/congestion/setup-bench.sh)")
binary = args.callend or os.path.join(subprocess.run(["swift", "build", "-c", "release", "--show-bin-path"], cwd=root,
                                                     capture_output=True, text=True).stdout.strip(), "callend")
if not os.access(binary, os.X_OK):
    sys.exit(f"viewers: no callend at {binary}: swift build -c release")
if not shutil.which("ffmpeg"):
    sys.exit("viewers: needs ffmpeg (scripts/install-deps.sh installs it)")
work = args.out or tempfile.mkdtemp(prefix="callend-viewers.")
os.makedirs(work, exist_ok=True)
here = os.path.join(root, "scripts/viewers")
sys.path.insert(0, here)
from local_room import LocalRoom  # noqa: E402
room = LocalRoom(binary, work, "bench", "viewers")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def idle_cpu(pid):
    """The sender's CPU with no viewer, over one window (a measurement, not a wait for an event)."""
    before, start = cpu_seconds(pid), time.monotonic()
    time.sleep(args.seconds)
    return (cpu_seconds(pid) - before) / (time.monotonic() - start)


def own_moves(log):
    """The endpoint's moves of a viewer to an encoder of its own (the move back says "to":"shared")."""
    return sum(1 for line in log.splitlines() if '"cause":"thin"' in line and '"to":"own"' in line)


def watch(url, count, pid, token=None):
    command = [python, os.path.join(here, "whep_viewers.py"), url, "--count", str(count), "--seconds", str(args.seconds), "--pid", str(pid)]
    if token:
        command += ["--token", token]
    done = subprocess.run(command, capture_output=True, text=True, timeout=args.seconds + 120)
    lines = [l for l in done.stdout.splitlines() if l.startswith("{")]
    if done.returncode != 0 or not lines:
        sys.exit(f"viewers: the viewers failed ({done.returncode}): {done.stderr[-2000:]}")
    return json.loads(lines[-1])


try:
    clip = room.clip()
    camera_token = room.token_file("camera")
    viewer_token = room.token("viewer", can="watch")
    port, web = room.serve()
    join = room.start("callend", [binary, "join", "bench", "--token-file", camera_token, "--server", f"127.0.0.1:{port}",
                             "--video-source", clip, "--audio-source", "tone", "--encoding", args.encoding,
                             *(["--max-video-bitrate", "800000"] if args.encoding == "manual" else []),
                             "--max-viewers", "8", "--no-stdin", "--duration", "3600"])
    room.wait_line("callend", r"joined room", join)
    aiortc = room.start("aiortc", [python, os.path.join(here, "aiortc_sender.py"), "--clip", clip, "--bitrate", "800000"])
    aport = room.wait_line("aiortc", r"listening on (\d+)", aiortc).group(1)
    senders = {
        "callend": (f"{web}/whep/bench", join.pid, viewer_token),
        "aiortc": (f"http://127.0.0.1:{aport}/whep", aiortc.pid, None),
    }
    idle = {name: idle_cpu(pid) for name, (_, pid, _) in senders.items()}
    print(f"no viewer: callend {idle['callend']:.3f} cores, aiortc {idle['aiortc']:.3f}", flush=True)
    results = {(name, n): [] for name in senders for n in counts}
    own_encoders, worst_spread = 0, 0.0
    for run in range(args.runs):
        for n in counts:
            for name, (url, pid, tok) in senders.items():
                thin_before = own_moves(room.log("callend")) if name == "callend" else 0
                r = watch(url, n, pid, tok)
                results[(name, n)].append(r)
                fps = [v["fps"] for v in r["viewers"]]
                kbps = [v["kbps"] for v in r["viewers"]]
                extra = ""
                if name == "callend":
                    thin = own_moves(room.log("callend")) - thin_before
                    spread = 1 - min(fps) / max(fps) if max(fps) > 0 else 1.0
                    own_encoders += thin
                    worst_spread = max(worst_spread, spread)
                    extra = f"; encoder moves for a thin viewer {thin}; the lowest viewer {100 * spread:.0f} % under the best"
                print(f"run {run + 1}: {name:7} {n} viewers: {r['senderCPU']:.3f} cores; viewers {min(fps)}-{max(fps)} fps, "
                      f"{min(kbps)}-{max(kbps)} kbit/s, {r['viewers'][0]['size']}{extra}", flush=True)
    print()
    medians = {key: statistics.median(r["senderCPU"] for r in runs) for key, runs in results.items()}
    for name in senders:
        first = medians[(name, counts[0])]
        line = ", ".join(f"{n}: {medians[(name, n)]:.3f}" for n in counts)
        print(f"{name}: cores by viewers {line}")
        if len(counts) > 1 and counts[0] == 1:
            one = first - idle[name]
            per = (medians[(name, counts[-1])] - first) / (counts[-1] - 1)
            share = per / one if one > 0 else float("inf")
            goal = f" (goal <= 5 %: {'met' if share <= 0.05 else 'NOT met'})" if name == "callend" else ""
            print(f"{name}: the first viewer costs {one:.3f} cores over the idle sender; each added viewer {per:.3f} "
                  f"= {100 * share:.1f} % of that{goal}")
    print(f"callend ({args.encoding}): encoder moves for a thin viewer on the idle loopback: {own_encoders} "
          f"(goal 0: {'met' if own_encoders == 0 else 'NOT met'}); the lowest viewer's frames under its siblings' best: "
          f"{100 * worst_spread:.0f} % at worst (goal <= 10 %: {'met' if worst_spread <= 0.10 else 'NOT met'})")
    for n in counts:
        print(f"{n} viewers: callend / aiortc CPU = {medians[('callend', n)] / medians[('aiortc', n)]:.2f}")
finally:
    room.stop()
    if not args.out:
        shutil.rmtree(work, ignore_errors=True)
