#!/usr/bin/python3
"""A program on the box using `callend join --data-socket PATH` (lines mode, or bytes).

  socket_peer.py PATH lines --name N --peer P --send S --big B --expect S2 --expect-big B2 [--timeout T]
      sends S small lines and B big ones (lines.py), reads until S2 small and B2 big lines from P
      came (or T seconds); prints one JSON line: what came, the SHA-256 of the big lines and
      whether it is the expected one, and the seconds the big lines took from the first.
  socket_peer.py PATH ping --count K [--interval 0.05]
      sends K lines "ping <CLOCK_MONOTONIC ns>" (the peer's socket_peer in 'pong' measures them)
  socket_peer.py PATH pong --count K [--timeout T]
      reads K ping lines; prints their one-way latency (same machine, same clock) p50/p95/max in ms
  socket_peer.py PATH send-bytes --size N  /  recv-bytes --size N [--timeout T]
      bytes mode: sends N pseudo-random bytes / reads N bytes; prints the SHA-256 and the seconds
"""
import argparse, hashlib, json, os, random, select, socket, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lines  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("path")
parser.add_argument("mode", choices=["lines", "ping", "pong", "send-bytes", "recv-bytes"])
parser.add_argument("--name", default="callend")
parser.add_argument("--peer", default="peer")
parser.add_argument("--send", type=int, default=0)
parser.add_argument("--big", type=int, default=0)
parser.add_argument("--expect", type=int, default=0)
parser.add_argument("--expect-big", type=int, default=0)
parser.add_argument("--unordered", action="store_true", help="--expect counts every line that is not big, in any order")
parser.add_argument("--idle", type=float, help="stop once nothing came for this long after something did (an unreliable channel may lose)")
parser.add_argument("--count", type=int, default=100)
parser.add_argument("--interval", type=float, default=0.05)
parser.add_argument("--size", type=int, default=10 * 1024 * 1024)
parser.add_argument("--timeout", type=float, default=60)
args = parser.parse_args()

s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
deadline = time.monotonic() + 30
while True:
    try:
        s.connect(args.path)
        break
    except OSError:
        if time.monotonic() > deadline:
            raise
        time.sleep(0.05)
end = time.monotonic() + args.timeout


def readable():
    """Waits up to 0.5 s (the socket stays blocking: a sending thread shares it)."""
    return bool(select.select([s], [], [], 0.5)[0])


def read_lines():
    pending = b""
    while time.monotonic() < end:
        if not readable():
            yield None
            continue
        chunk = s.recv(65536)
        if not chunk:
            return
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            yield line.decode()


def pattern(size):
    rng = random.Random(8831)
    return bytes(rng.getrandbits(8) for _ in range(size)) if size < 1 << 16 else rng.randbytes(size)


if args.mode == "lines":
    import threading

    def send():
        for i in range(args.send):
            s.sendall((lines.small(args.name, i) + "\n").encode())
        for i in range(args.big):
            s.sendall((lines.big(i) + "\n").encode())

    sender = threading.Thread(target=send)
    sender.start()
    tally, first_big, last_big, last = lines.Tally(args.peer), None, None, None
    for line in read_lines():
        if line is None:
            if args.idle and last and time.monotonic() - last > args.idle:
                break
            continue
        last = time.monotonic()
        tally.take(line)
        if len(line) == lines.BIG:
            first_big = first_big or time.monotonic()
            last_big = time.monotonic()
        came = tally.small + tally.out_of_order if args.unordered else tally.small
        if came >= args.expect and tally.big >= args.expect_big:
            break
    sender.join()
    report = tally.report()
    report["bigOk"] = report["bigSha256"] == lines.big_digest(args.expect_big)
    report["bigSeconds"] = round(last_big - first_big, 3) if first_big and last_big else None
    print(json.dumps(report), flush=True)
elif args.mode == "ping":
    for i in range(args.count):
        s.sendall(f"ping {time.monotonic_ns()}\n".encode())
        time.sleep(args.interval)  # the pace (20 Hz), not an order: the bridge sends all it read before EOF
elif args.mode == "pong":
    latencies = []
    for line in read_lines():
        if line is None:
            continue
        if line.startswith("ping "):
            latencies.append((time.monotonic_ns() - int(line[5:])) / 1e6)
        if len(latencies) >= args.count:
            break
    latencies.sort()
    pick = lambda q: round(latencies[min(len(latencies) - 1, int(q * len(latencies)))], 2) if latencies else None
    print(json.dumps({"count": len(latencies), "p50": pick(0.5), "p95": pick(0.95), "max": latencies[-1] if latencies else None}), flush=True)
elif args.mode == "send-bytes":
    data = pattern(args.size)
    started = time.monotonic()
    s.sendall(data)
    print(json.dumps({"sent": len(data), "sha256": hashlib.sha256(data).hexdigest(), "seconds": round(time.monotonic() - started, 3)}), flush=True)
else:
    h, got, first = hashlib.sha256(), 0, None
    while got < args.size and time.monotonic() < end:
        if not readable():
            continue
        chunk = s.recv(1 << 20)
        if not chunk:
            break
        first = first or time.monotonic()
        h.update(chunk)
        got += len(chunk)
    seconds = time.monotonic() - first if first else None
    print(json.dumps({"received": got, "sha256": h.hexdigest(), "expected": hashlib.sha256(pattern(args.size)).hexdigest(),
                      "seconds": round(seconds, 3) if seconds else None,
                      "mbitPerSecond": round(got * 8 / seconds / 1e6, 1) if seconds else None}), flush=True)
