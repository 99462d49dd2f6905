#!/usr/bin/python3
"""The footprint bench (issue 33): what one call endpoint costs in CPU and memory, callend beside
a GStreamer 1.22 pipeline endpoint doing the same work on the same media.

Both ways, on loopback: the same 640x480@30 clip (a scrolling smpte pattern, made once with
videotestsrc, 1,350 frames) and the same 48 kHz tone, VP8 at 1 Mbit/s and Opus at 32 kbit/s,
each endpoint encoding its own copy and decoding the other's.
  callend:   callend serve, two `callend join` processes (--video-source clip.y4m --audio-source
             tone.wav --encoding manual --max-video-bitrate 1000000): ICE, DTLS-SRTP, RTCP,
             NACK, transport-cc and the rest of a real call.
  GStreamer: two gst-launch-1.0 processes, each y4mdec ! vp8enc deadline=1 cpu-used=-6 (realtime,
             as callend's libvpx settings) ! rtpvp8pay ! udpsink and wavparse ! opusenc !
             rtpopuspay ! udpsink out, udpsrc ! rtpjitterbuffer ! depay ! vp8dec / opusdec !
             fakesink in: plain RTP, no crypto, no feedback.
Runs alternate (GStreamer, callend, GStreamer, callend, ...) so a machine's mood falls on both.
Per endpoint: CPU (user + system seconds over the run's wall time, from wait4) and peak resident
memory (ru_maxrss). Prints each run, the medians and callend's ratios to GStreamer, against the
issue's goal (<= 0.8x GStreamer's CPU and peak RSS).

With --where, each callend endpoint's /proc/PID/smaps is read halfway through its call and its
resident memory printed by where it lives: the executable, each library, the heap, thread stacks
and other anonymous memory (the median over runs per endpoint).

With --codecs, one more run of each stack under perf (CPU samples by library) and one under
heaptrack's preload (peak malloc'd memory, and what libvpx itself allocated): how much of each
stack's cost is the codec libraries both share, and how much the 0.8x goal leaves for the rest.

With --record, the callend endpoints also record the call (`join --record-dir`, both directions
as WebM segments): set beside a run without it, what recording costs.

  scripts/footprint/bench.py [--runs N] [--seconds S] [--callend BIN] [--out DIR] [--where] [--codecs] [--record]
"""
import argparse, os, re, shutil, signal, socket, statistics, subprocess, sys, tempfile, time

parser = argparse.ArgumentParser(description="callend's CPU and memory per endpoint against a GStreamer endpoint")
parser.add_argument("--runs", type=int, default=3, help="runs of each stack, alternating (default 3)")
parser.add_argument("--seconds", type=int, default=30, help="length of each call (default 30; the clip is 45 s)")
parser.add_argument("--callend", default=None, help="the callend binary (default: the release build)")
parser.add_argument("--out", default=None, help="keep the clip, logs and a CSV here")
parser.add_argument("--where", action="store_true", help="where callend's resident memory lives, halfway through each call")
parser.add_argument("--codecs", action="store_true", help="one more run of each under perf and heaptrack: the codecs' share")
parser.add_argument("--record", action="store_true", help="callend endpoints also record the call (join --record-dir): what recording costs")
args = parser.parse_args()
if args.runs < 1 or not 5 <= args.seconds <= 45:
    sys.exit("footprint: --runs >= 1 and --seconds 5 ... 45")

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
binary = args.callend or os.path.join(subprocess.run(["swift", "build", "-c", "release", "--show-bin-path"], cwd=root,
                                                     capture_output=True, text=True).stdout.strip(), "callend")
if not os.access(binary, os.X_OK):
    sys.exit(f"footprint: no callend at {binary}: swift build -c release")
HEAPTRACK_PRELOAD = "/usr/lib/heaptrack/libheaptrack_preload.so"
HEAPTRACK_INTERPRET = "/usr/lib/heaptrack/libexec/heaptrack_interpret"
for tool in ["gst-launch-1.0"] + (["perf", "heaptrack_print"] if args.codecs else []):
    if not shutil.which(tool):
        sys.exit(f"footprint: needs {tool} (scripts/install-deps.sh installs it)")
if args.codecs and not (os.path.exists(HEAPTRACK_PRELOAD) and os.access(HEAPTRACK_INTERPRET, os.X_OK)):
    sys.exit("footprint: --codecs needs heaptrack's preload library (scripts/install-deps.sh installs heaptrack)")

work = args.out or tempfile.mkdtemp(prefix="callend-footprint.")
os.makedirs(work, exist_ok=True)
clip, tone = os.path.join(work, "clip.y4m"), os.path.join(work, "tone.wav")


def log(line):
    print(f"footprint: {line}", flush=True)


def make_media():
    frames = 1350
    if not os.path.exists(clip):
        subprocess.run(["gst-launch-1.0", "-q", "videotestsrc", "pattern=smpte", "horizontal-speed=4", f"num-buffers={frames}", "!",
                        "video/x-raw,format=I420,width=640,height=480,framerate=30/1", "!", "y4menc", "!", "filesink", f"location={clip}"],
                       check=True)
    if not os.path.exists(tone):
        subprocess.run(["gst-launch-1.0", "-q", "audiotestsrc", "wave=sine", "freq=440", "volume=0.3", f"num-buffers={frames * 1600 // 1024 + 1}",
                        "samplesperbuffer=1024", "!", "audio/x-raw,format=S16LE,rate=48000,channels=1", "!", "wavenc", "!", "filesink", f"location={tone}"],
                       check=True)


def free_ports(n):
    socks = []
    for _ in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def resident_by_mapping(pid):
    """Resident KiB of a process by what it maps: a file's name, [heap], [stack], or 'anonymous'
    (thread stacks and malloc's other arenas are anonymous mappings)."""
    groups, name = {}, None
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            fields = line.split()
            if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
                name = os.path.basename(fields[5]) if len(fields) > 5 else "anonymous"
            elif fields[0] == "Rss:":
                groups[name] = groups.get(name, 0) + int(fields[1])
    return groups


where = []  # per callend endpoint sampled: {mapping: KiB}


def measure(processes, seconds, sample=False):
    """Waits for the processes (stopping them after `seconds`), returns per process (cores, peak MiB);
    with `sample`, reads where their memory lives halfway."""
    start = time.monotonic()
    deadline = start + seconds
    results = {}
    sampled = not sample
    while len(results) < len(processes):
        if not sampled and time.monotonic() - start >= (seconds - 15) / 2:
            sampled = True
            for p in processes:
                try:
                    where.append(resident_by_mapping(p.pid))
                except OSError:
                    pass
        for p in processes:
            if p.pid in results:
                continue
            pid, status, usage = os.wait4(p.pid, os.WNOHANG)
            if pid == p.pid:
                results[p.pid] = (usage, time.monotonic() - start, status)
        if time.monotonic() >= deadline:
            for p in processes:
                if p.pid not in results:
                    p.send_signal(signal.SIGINT)
            deadline = float("inf")
        time.sleep(0.05)
    out = []
    for p in processes:
        usage, wall, status = results[p.pid]
        out.append(((usage.ru_utime + usage.ru_stime) / max(wall, 1e-3), usage.ru_maxrss / 1024, wall))
    return out


def profiled(command, name, profile):
    """The command and environment to run it under a profile: None, "perf" or "heap" (heaptrack's
    preload writing its raw trace to a file, so the process stays the one this script signals)."""
    if profile == "perf":
        return ["perf", "record", "-q", "-F", "499", "-o", os.path.join(work, f"{name}.perf"), "--"] + command, os.environ
    if profile == "heap":
        return command, dict(os.environ, LD_PRELOAD=HEAPTRACK_PRELOAD, DUMP_HEAPTRACK_OUTPUT=os.path.join(work, f"{name}.heapraw"))
    return command, os.environ


def gstreamer_endpoint(video_out, audio_out, video_in, audio_in, name, profile=None):
    pipeline = (
        f"filesrc location={clip} ! y4mdec ! queue max-size-buffers=2 ! "
        "vp8enc deadline=1 cpu-used=-6 end-usage=cbr target-bitrate=1000000 keyframe-max-dist=3000 lag-in-frames=0 error-resilient=default threads=1 ! "
        f"rtpvp8pay pt=96 mtu=1200 ! udpsink host=127.0.0.1 port={video_out} sync=true async=false "
        f"filesrc location={tone} ! wavparse ! audioconvert ! audioresample ! opusenc bitrate=32000 frame-size=20 ! "
        f"rtpopuspay pt=111 ! udpsink host=127.0.0.1 port={audio_out} sync=true async=false "
        f"udpsrc address=127.0.0.1 port={video_in} caps=\"application/x-rtp,media=video,encoding-name=VP8,clock-rate=90000,payload=96\" ! "
        "rtpjitterbuffer latency=50 ! rtpvp8depay ! vp8dec ! fakesink name=vsink silent=false sync=false "
        f"udpsrc address=127.0.0.1 port={audio_in} caps=\"application/x-rtp,media=audio,encoding-name=OPUS,clock-rate=48000,payload=111\" ! "
        "rtpjitterbuffer latency=50 ! rtpopusdepay ! opusdec ! fakesink sync=false"
    )
    logfile = open(os.path.join(work, f"gst-{name}.log"), "w")
    # -v prints the video sink's last-message for each decoded picture: the count shows it ran.
    command, env = profiled(["gst-launch-1.0", "-v"] + split(pipeline), f"gst-{name}", profile)
    return subprocess.Popen(command, env=env, stdout=logfile, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def split(pipeline):
    # gst-launch takes the description as words; quoted caps stay one word.
    return [w.replace('"', '') for w in re.findall(r'(?:[^\s"]+|"[^"]*")+', pipeline)]


def run_gstreamer(seconds, profile=None):
    va, aa, vb, ab = free_ports(4)
    a = gstreamer_endpoint(vb, ab, va, aa, "a", profile)
    b = gstreamer_endpoint(va, aa, vb, ab, "b", profile)
    return measure([a, b], seconds)


def run_callend(seconds, index, profile=None):
    secret = os.path.join(work, "secret")
    if not os.path.exists(secret):
        with open(secret, "w") as f:
            f.write(subprocess.run([binary, "token", "--new-secret"], capture_output=True, text=True, check=True).stdout)
        os.chmod(secret, 0o600)
    serve = subprocess.Popen([binary, "serve", "--listen", "127.0.0.1:0", "--secret-file", secret], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True)
    try:
        line = serve.stdout.readline()
        match = re.match(r"listening on \S*:(\d+)", line)
        if not match:
            sys.exit(f"footprint: callend serve said {line!r}")
        port = match.group(1)
        room = f"footprint-{index}"
        joins = []
        for who in ["a", "b"]:
            token = subprocess.run([binary, "token", "--secret-file", secret, "--room", room, "--identity", who, "--ttl", "600"],
                                   capture_output=True, text=True, check=True).stdout.strip()
            out = open(os.path.join(work, f"callend-{index}-{who}.log"), "w")
            command, env = profiled([binary, "join", room, "--server", f"127.0.0.1:{port}", "--video-source", clip, "--audio-source", tone,
                                     "--encoding", "manual", "--max-video-bitrate", "1000000", "--no-stdin", "--duration", str(seconds)]
                                    + (["--record-dir", os.path.join(work, f"recording-{index}-{who}")] if args.record else []),
                                    f"callend-{who}", profile)
            joins.append(subprocess.Popen(command, env=dict(env, CALLEND_TOKEN=token), stdout=out, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL))
        return measure(joins, seconds + 15, sample=args.where)
    finally:
        serve.terminate()
        serve.wait()


def cpu_by_library(name):
    """Per cent of a perf recording's samples by library (the executable, the kernel, each .so)."""
    shares = {}
    report = subprocess.run(["perf", "report", "-q", "-i", os.path.join(work, f"{name}.perf"), "--sort", "dso", "--stdio"],
                            capture_output=True, text=True).stdout
    for line in report.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+(\S+)", line)
        if m:
            library = re.sub(r"\.so[.\d]*$", "", m.group(2))
            shares[library] = shares.get(library, 0) + float(m.group(1))
    return shares


def heap_of(name):
    """(peak malloc'd MiB, of which libvpx allocated itself) from a heaptrack preload's raw trace."""
    raw, trace = os.path.join(work, f"{name}.heapraw"), os.path.join(work, f"{name}.heaptrack")
    with open(raw, "rb") as i, open(trace, "wb") as o:
        subprocess.run([HEAPTRACK_INTERPRET], stdin=i, stdout=o, stderr=subprocess.DEVNULL, check=True)
    text = subprocess.run(["heaptrack_print", "-f", trace, "--print-leaks", "0", "--print-allocators", "0", "--print-temporary", "0"],
                          capture_output=True, text=True).stdout
    unit = {"B": 1 / 2**20, "K": 1 / 2**10, "M": 1, "G": 2**10}
    size = lambda v: float(v[:-1]) * unit[v[-1]]
    peak = re.search(r"peak heap memory consumption: ([\d.]+[BKMG])", text)
    if not peak:
        sys.exit(f"footprint: heaptrack found no allocations for {name}")
    vpx, section, top = 0.0, False, None
    for line in text.splitlines():
        if line.startswith("PEAK MEMORY CONSUMERS"):
            section = True
        elif section and re.match(r"^[A-Z]", line):
            break
        elif section:
            m = re.match(r"^([\d.]+[BKMG]) peak memory consumed over", line)
            if m:
                top = size(m.group(1))
            elif top is not None and line.strip().startswith("in "):
                if "libvpx" in line:
                    vpx += top
                top = None
    return size(peak.group(1)), vpx


def codec_shares(medians):
    """One run of each stack under perf and one under heaptrack: what the codec libraries cost in
    each, and what the 0.8x goals leave for everything else."""
    cpu, heap = {}, {}
    for stack in ["gstreamer", "callend"]:
        names = [f"gst-{w}" if stack == "gstreamer" else f"callend-{w}" for w in ["a", "b"]]
        for profile in ["perf", "heap"]:
            results = run_gstreamer(args.seconds, profile) if stack == "gstreamer" else run_callend(args.seconds, f"{profile}", profile)
            if min(w for _, _, w in results) < 0.9 * args.seconds:
                sys.exit(f"footprint: the {profile} run of {stack} ended early: see the logs in {work} (--out keeps them)")
        shares = [cpu_by_library(n) for n in names]
        cpu[stack] = {lib: statistics.mean(s.get(lib, 0) for s in shares) for lib in {k for s in shares for k in s}}
        heaps = [heap_of(n) for n in names]
        heap[stack] = (statistics.mean(h[0] for h in heaps), statistics.mean(h[1] for h in heaps))
    for stack in ["gstreamer", "callend"]:
        top = sorted(cpu[stack].items(), key=lambda kv: -kv[1])[:6]
        log(f"{stack:9} CPU by library: " + ", ".join(f"{lib} {pct:.0f} %" for lib, pct in top))
        log(f"{stack:9} peak malloc'd memory {heap[stack][0]:.1f} MiB, of which libvpx allocated {heap[stack][1]:.1f} MiB")
    codec = {s: (cpu[s].get("libvpx", 0) + cpu[s].get("libopus", 0)) / 100 for s in cpu}
    gst_cpu, gst_rss = medians["gstreamer"]
    room_cpu = 0.8 * gst_cpu - codec["callend"] * medians["callend"][0]
    log(f"codecs (libvpx + libopus): {codec['gstreamer'] * gst_cpu:.3f} core in GStreamer ({codec['gstreamer'] * 100:.0f} %), "
        f"{codec['callend'] * medians['callend'][0]:.3f} in callend ({codec['callend'] * 100:.0f} %); the 0.8x CPU goal leaves callend "
        f"{room_cpu:.3f} core beside its codecs, where GStreamer spends {(1 - codec['gstreamer']) * gst_cpu:.3f} beside its own")
    log(f"memory: the 0.8x RSS goal ({0.8 * gst_rss:.1f} MiB) leaves callend {0.8 * gst_rss - heap['callend'][0]:.1f} MiB beside its "
        f"{heap['callend'][0]:.1f} MiB malloc'd, for its code, libraries and stacks; GStreamer's take {gst_rss - heap['gstreamer'][0]:.1f} MiB "
        f"beside its {heap['gstreamer'][0]:.1f}, callend's {medians['callend'][1] - heap['callend'][0]:.1f}")


def decoded(index):
    """Frames each callend endpoint decoded (from its summary line), to show the call ran."""
    counts = []
    for who in ["a", "b"]:
        with open(os.path.join(work, f"callend-{index}-{who}.log")) as f:
            m = re.findall(r"video (\d+) frames decoded", f.read())
        counts.append(int(m[-1]) if m else 0)
    return counts


def gst_decoded():
    counts = []
    for who in ["a", "b"]:
        with open(os.path.join(work, f"gst-{who}.log"), errors="replace") as f:
            counts.append(sum(1 for line in f if "vsink" in line and "chain" in line))
    return counts


try:
    make_media()
    log(f"{args.runs} runs of each, {args.seconds} s calls, 640x480@30 smpte scroll at 1 Mbit/s VP8 + 32 kbit/s Opus both ways, on loopback")
    rows = []
    for run in range(args.runs):
        for stack in ["gstreamer", "callend"]:
            results = run_gstreamer(args.seconds) if stack == "gstreamer" else run_callend(args.seconds, run)
            extra = ""
            short = [w for _, _, w in results if w < 0.9 * args.seconds]
            if short:
                sys.exit(f"footprint: run {run + 1} {stack}: an endpoint ended after {min(short):.1f} s of {args.seconds}: see the logs in {work} (--out keeps them)")
            frames = decoded(run) if stack == "callend" else gst_decoded()
            extra = f"; decoded {frames[0]} and {frames[1]} frames"
            if min(frames) < 0.8 * 30 * args.seconds:
                sys.exit(f"footprint: run {run + 1} {stack}: an endpoint decoded too few frames ({frames}): see the logs in {work} (--out keeps them)")
            for cores, rss, _ in results:
                rows.append((stack, run + 1, cores, rss))
            log(f"run {run + 1} {stack:9}: CPU {', '.join(f'{c:.3f}' for c, _, _ in results)} core; peak RSS "
                f"{', '.join(f'{r:.1f}' for _, r, _ in results)} MiB{extra}")
    with open(os.path.join(work, "footprint.csv"), "w") as f:
        f.write("stack,run,cores,peak_rss_mib\n")
        for stack, run, cores, rss in rows:
            f.write(f"{stack},{run},{cores:.4f},{rss:.1f}\n")
    med = {}
    for stack in ["gstreamer", "callend"]:
        med[stack] = (statistics.median(r[2] for r in rows if r[0] == stack), statistics.median(r[3] for r in rows if r[0] == stack))
        log(f"{stack:9} per endpoint, median: CPU {med[stack][0]:.3f} core, peak RSS {med[stack][1]:.1f} MiB")
    cpu_ratio = med["callend"][0] / med["gstreamer"][0]
    rss_ratio = med["callend"][1] / med["gstreamer"][1]
    if where:
        names = sorted({n for w in where for n in w}, key=lambda n: -statistics.median(w.get(n, 0) for w in where))
        total = statistics.median(sum(w.values()) for w in where)
        log(f"where callend's resident memory lives halfway through a call (median of {len(where)} endpoints): {total / 1024:.1f} MiB")
        for n in names:
            kib = statistics.median(w.get(n, 0) for w in where)
            if kib >= 256:
                log(f"  {kib / 1024:5.1f} MiB  {n}")
    log(f"callend / GStreamer: CPU {cpu_ratio:.2f}x ({'met' if cpu_ratio <= 0.8 else 'NOT met'}: goal <= 0.8x), "
        f"peak RSS {rss_ratio:.2f}x ({'met' if rss_ratio <= 0.8 else 'NOT met'}: goal <= 0.8x)")
    if args.codecs:
        codec_shares(med)
finally:
    if not args.out:
        shutil.rmtree(work, ignore_errors=True)
