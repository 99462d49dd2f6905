#!/usr/bin/env python3
"""A data-channel peer that sends the parts of one message and never its end (issue 49, item 4),
against a real `callend join --data-socket`: the endpoint's resident memory before and during
the attack, whether it aborted the association, and whether the call's media went on.

    /usr/bin/python3 scripts/datachannel/never_ending.py [--callend BIN] [--before BIN] [--megabytes 200]

The attacker is aiortc (scripts/aiortc/participant.py, run in this interpreter) with its SCTP
sender changed so that every data message on its channel continues one message that never ends
(no E flag, RFC 4960 3.3.1). The endpoint calls it with video and audio at the same time.
Goal: the endpoint's RSS grows by at most 16 MB while the peer sends --megabytes (from what it
held with media up for 2 s, before the attack begins, to its peak).

    never_ending.py attacker ARGS...   (internal) the participant, with the patch applied
"""
import argparse, json, os, re, runpy, subprocess, sys, tempfile, time

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(os.path.dirname(here))
venv_python = os.path.join(root, ".build/bench-venv/bin/python")


def patch_aiortc():
    """Every string or binary message (PPIDs 51, 53) on a stream continues the first one sent
    there: the first chunk ever has the B flag, no chunk has the E flag, and the stream's
    sequence number never moves on. DCEP (PPID 50) goes as aiortc sends it."""
    import asyncio
    import aiortc.rtcsctptransport as sctp

    original = sctp.RTCSctpTransport._send
    begun = set()

    async def send(self, stream_id, pp_id, user_data, expiry=None, max_retransmits=None, ordered=True):
        if pp_id not in (51, 53):
            return await original(self, stream_id, pp_id, user_data, expiry, max_retransmits, ordered)
        if stream_id not in begun:
            # Media settles first: the endpoint's memory is read before the attack begins.
            await asyncio.sleep(4)
        sequence = self._outbound_stream_seq.get(stream_id, 0)
        for start in range(0, len(user_data), sctp.USERDATA_MAX_LENGTH):
            chunk = sctp.DataChunk()
            chunk.flags = 0 if stream_id in begun else sctp.SCTP_DATA_FIRST_FRAG
            begun.add(stream_id)
            chunk.tsn, chunk.stream_id, chunk.stream_seq, chunk.protocol = self._local_tsn, stream_id, sequence, pp_id
            chunk.user_data = user_data[start:start + sctp.USERDATA_MAX_LENGTH]
            chunk._abandoned = chunk._acked = chunk._in_flight = chunk._retransmit = False
            chunk._book_size, chunk._expiry, chunk._max_retransmits = len(chunk.user_data), expiry, max_retransmits
            chunk._misses = chunk._sent_count = 0
            chunk._sent_time = None
            self._local_tsn = sctp.tsn_plus_one(self._local_tsn)
            self._outbound_queue.append(chunk)
        await self._transmit()

    sctp.RTCSctpTransport._send = send


def rss_kb(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def attack(callend, megabytes):
    work = tempfile.mkdtemp(prefix="callend-never-ending-")
    processes = []
    try:
        subprocess.run([callend, "token", "--new-secret", "--out", f"{work}/secret"], check=True, stdout=subprocess.DEVNULL)
        serve = subprocess.Popen([callend, "serve", "--listen", "127.0.0.1:0", "--secret-file", f"{work}/secret"],
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        processes.append(serve)
        port = None
        while port is None:
            line = serve.stdout.readline()
            if not line:
                raise SystemExit("never-ending: serve ended")
            found = re.search(r"listening on 127\.0\.0\.1:(\d+)", line)
            port = found and found.group(1)

        def token(identity):
            return subprocess.run([callend, "token", "--room", "lab", "--identity", identity, "--secret-file", f"{work}/secret"],
                                  check=True, capture_output=True, text=True).stdout.strip()
        endpoint_log = open(f"{work}/endpoint.err", "w")
        endpoint = subprocess.Popen([callend, "join", "lab", "--server", f"127.0.0.1:{port}", "--video-size", "320x240", "--duration", "90",
                                     "--no-stdin", "--data-socket", f"{work}/data.sock"],
                                    env=dict(os.environ, CALLEND_TOKEN=token("endpoint")), stdout=subprocess.DEVNULL, stderr=endpoint_log)
        processes.append(endpoint)
        while "joined room" not in open(f"{work}/endpoint.err").read():
            if endpoint.poll() is not None:
                raise SystemExit("never-ending: the endpoint ended before it joined")
            time.sleep(0.1)
        baseline = rss_kb(endpoint.pid)
        parts = megabytes * 64  # 16 KiB lines
        attacker = subprocess.Popen([venv_python, os.path.abspath(__file__), "attacker", "--server", f"127.0.0.1:{port}", "--room", "lab",
                                     "--token", token("attacker"), "--seconds", "25", "--data-label", "attack", "--data-big", str(parts)],
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        processes.append(attacker)
        # The call's media up for 2 s: what it holds then is the baseline (the attack waits 4 s).
        while "dtls: connected" not in open(f"{work}/endpoint.err").read() and attacker.poll() is None:
            time.sleep(0.1)
        time.sleep(2)
        baseline = rss_kb(endpoint.pid)
        peak = baseline
        while attacker.poll() is None and endpoint.poll() is None:
            peak = max(peak, rss_kb(endpoint.pid))
            time.sleep(0.2)
        report = [l for l in (attacker.stdout.read() or "").splitlines() if l.startswith("{")]
        counts = json.loads(report[-1]) if report else {}
        log = open(f"{work}/endpoint.err").read()
        aborted = [l for l in log.splitlines() if "max-message-size" in l or "abort" in l.lower()]
        # The attacker leaves with a bye at its end, which ends a two-party call: exit 0 then.
        ended = endpoint.wait(15) if attacker.poll() is not None else endpoint.poll()
        return {"baseline": baseline, "peak": peak, "exit": ended, "aborted": aborted[:1],
                "videoFrames": counts.get("videoFrames", 0), "connection": counts.get("connection")}
    finally:
        for p in reversed(processes):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
        if os.environ.get("NEVER_ENDING_KEEP"):
            print(f"kept {work}")
        else:
            subprocess.run(["rm", "-rf", work])


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "attacker":
        patch_aiortc()
        # The parts themselves cost nothing to make: the participant's event loop stays free for
        # its media (the real lines.big takes 2 ms a line in Python).
        sys.path.insert(0, here)
        import lines
        part = "x" * lines.BIG
        lines.big = lambda i: part
        sys.argv = [os.path.join(root, "scripts/aiortc/participant.py")] + sys.argv[2:]
        runpy.run_path(sys.argv[0], run_name="__main__")
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--callend", default=os.path.join(root, ".build/release/callend"))
    parser.add_argument("--before", help="an older callend attacked the same way beside it")
    parser.add_argument("--megabytes", type=int, default=200)
    args = parser.parse_args()
    if not os.path.exists(venv_python):
        subprocess.run(["bash", os.path.join(root, "scripts/congestion/setup-bench.sh")], check=True, stdout=subprocess.DEVNULL)
    builds = [("this build", args.callend)] + ([("before", args.before)] if args.before else [])
    print(f"A data-channel peer (aiortc) sends {args.megabytes} MB as parts of one message that never ends (goal: RSS growth <= 16 MB)")
    for label, binary in builds:
        r = attack(binary, args.megabytes)
        growth = (r["peak"] - r["baseline"]) / 1024
        print(f"  {label}: RSS {r['baseline'] / 1024:.1f} MB -> peak {r['peak'] / 1024:.1f} MB: +{growth:.1f} MB "
              f"({'met' if growth <= 16 else 'NOT met'}); the endpoint exited {r['exit']} when the peer left; "
              f"the attacker decoded {r['videoFrames']} video frames; {r['aborted'][0].strip() if r['aborted'] else 'no abort logged'}")


if __name__ == "__main__":
    main()
