#!/usr/bin/python3
"""A call with viewers beside it (issue 31): what the endpoint spends, and what its call's peer gets.

`callend join` A (--max-viewers 4) calls B (--max-viewers 0) through `callend serve --http` on
loopback, both sending the same 640x360@30 testsrc2 clip and a tone; once their media flows, N
aiortc WHEP viewers (scripts/viewers/whep_viewers.py) watch A for --seconds. Prints A's CPU over
the viewers' window (user + system, in cores), the viewers' frame rates, what B decoded of what A
sent over the whole call, and the encoder changes A logged (its call's peer takes the viewers'
shared encoder while one watches). --callend takes another build for a side-by-side run.

  scripts/viewers/beside-call.py [--viewers 3] [--seconds 12] [--callend BIN] [--out DIR]
"""
import argparse, json, os, re, shutil, subprocess, sys, tempfile

parser = argparse.ArgumentParser(description="a call's endpoint with WHEP viewers beside it: its CPU, its peer's frames")
parser.add_argument("--viewers", type=int, default=3)
parser.add_argument("--seconds", type=float, default=12)
parser.add_argument("--callend", default=None, help="the callend binary (default: the release build)")
parser.add_argument("--out", default=None, help="keep the logs here")
args = parser.parse_args()
if not 1 <= args.viewers <= 4 or not 3 <= args.seconds <= 60:
    sys.exit("beside-call: --viewers 1 ... 4, --seconds 3 ... 60")

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
python = os.path.join(root, ".build/bench-venv/bin/python")
if subprocess.run([python, "-c", "import aiortc"], capture_output=True).returncode != 0:
    sys.exit("beside-call: needs aiortc in .build/bench-venv (scripts/congestion/setup-bench.sh)")
binary = args.callend or os.path.join(subprocess.run(["swift", "build", "-c", "release", "--show-bin-path"], cwd=root,
                                                     capture_output=True, text=True).stdout.strip(), "callend")
if not os.access(binary, os.X_OK):
    sys.exit(f"beside-call: no callend at {binary}: swift build -c release")
work = args.out or tempfile.mkdtemp(prefix="callend-beside.")
os.makedirs(work, exist_ok=True)
duration = int(args.seconds) + 25
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from local_room import LocalRoom  # noqa: E402
room = LocalRoom(binary, work, "beside", "beside-call")

try:
    clip = room.clip()
    port, web = room.serve()
    common = ["--server", f"127.0.0.1:{port}", "--video-source", clip, "--audio-source", "tone", "--no-stdin", "--duration", str(duration)]
    # A first: the service's WHEP endpoint of a room is its first participant.
    a = room.start("a", [binary, "join", "beside", "--token-file", room.token_file("a"), "--max-viewers", "4"] + common)
    room.wait_line("a", r"joined room", a)
    b = room.start("b", [binary, "join", "beside", "--token-file", room.token_file("b"), "--max-viewers", "0"] + common)
    room.wait_line("a", r"media: ", a)
    done = subprocess.run([python, os.path.join(root, "scripts/viewers/whep_viewers.py"), f"{web}/whep/beside", "--count", str(args.viewers),
                           "--seconds", str(args.seconds), "--pid", str(a.pid), "--token", room.token("viewer", can="watch")],
                          capture_output=True, text=True, timeout=args.seconds + 120)
    lines = [l for l in done.stdout.splitlines() if l.startswith("{")]
    if done.returncode != 0 or not lines:
        sys.exit(f"beside-call: the viewers failed ({done.returncode}): {done.stderr[-2000:]}")
    watched = json.loads(lines[-1])
    for proc in (a, b):
        proc.wait(timeout=duration + 30)
    alog, blog = room.log("a"), room.log("b")
    summary = re.search(r"^b <- a;.*?video (\d+) frames decoded \([^)]*?(\d+) errors.*?sent (\d+) frames", blog, re.M)
    sent = re.search(r"^a <- b;.*?sent (\d+) frames", alog, re.M)
    changes = re.findall(r'"cause":"viewers","change":"encoder".*?"from":"(\w+)".*?"to":"(\w+)"', alog)
    fps = [v["fps"] for v in watched["viewers"]]
    print(f"beside-call: A with {args.viewers} viewers: {watched['senderCPU']:.3f} cores over {watched['window']:.0f} s; "
          f"viewers {min(fps)}-{max(fps)} fps")
    if summary and sent:
        print(f"beside-call: B decoded {summary.group(1)} of the {sent.group(1)} frames A sent it ({summary.group(2)} decode errors)")
    print(f"beside-call: A's encoder for its call's peer: {' then '.join(f'{f} -> {t}' for f, t in changes) or 'no change logged'}")
finally:
    room.stop()
    if not args.out:
        shutil.rmtree(work, ignore_errors=True)
