#!/usr/bin/env python3
"""Starvation before authentication (issue 49, item 3): how long a genuine client of one address
takes to be served while another address holds idle connections, and what idle connections cost
the service's CPU.

    /usr/bin/python3 scripts/starvation/bench.py [--callend BIN] [--before BIN] [--idle 500] [--rounds 5]

`callend serve` (TLS on its signaling port and on --http) runs on loopback. An attacker on
127.0.0.1 keeps `--idle` connections open to a listener without a byte (each one the service
closes is opened again at once); meanwhile a client on 127.0.0.2 does, `--rounds` times each:
a TLS join on the signaling port, a WSS join on /ws, and an HTTPS WHEP POST (answered 404: no
endpoint is in the room). Then 40 idle connections are held for 10 s and the service's CPU is
read from /proc. With --before, an older build runs the same beside it. Goals: every join and
request under 1 s; no busy loop (well under 5 % of a core with 40 idle connections).
"""
import argparse, base64, json, os, select, socket, ssl, subprocess, sys, tempfile, threading, time

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(os.path.dirname(here))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout=20):
    end = time.time() + timeout
    while time.time() < end:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"starvation: nothing listens on {port}")


class Service:
    def __init__(self, callend, folder):
        self.callend = callend
        subprocess.run([callend, "token", "--new-secret", "--out", f"{folder}/secret"], check=True, stdout=subprocess.DEVNULL)
        subprocess.run([callend, "tls", "--host", "localhost", "--host", "127.0.0.1", "--out", f"{folder}/tls"], check=True, stdout=subprocess.DEVNULL)
        self.port, self.web = free_port(), free_port()
        self.process = subprocess.Popen([callend, "serve", "--listen", f"127.0.0.1:{self.port}", "--http", f"127.0.0.1:{self.web}",
                                         "--secret-file", f"{folder}/secret", "--tls-cert", f"{folder}/tls/server.pem",
                                         "--tls-key", f"{folder}/tls/server-key.pem"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.folder = folder
        # The service answers TLS: a plain connect to know it listens would count as an idle one.
        wait_port(self.port)
        wait_port(self.web)
        time.sleep(3.5)  # the probes' own connections above pass their first-byte deadline
        self.context = ssl.create_default_context(cafile=f"{folder}/tls/ca.pem")

    def token(self, room):
        return subprocess.run([self.callend, "token", "--room", room, "--identity", "genuine", "--secret-file", f"{self.folder}/secret"],
                              check=True, capture_output=True, text=True).stdout.strip()

    def cpu_seconds(self):
        pid = self.process.pid
        # The service may have replaced itself with callend-serve: same pid.
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self):
        self.process.terminate()
        self.process.wait(10)


class Attacker:
    """Holds `count` connections from 127.0.0.1 to `port` open, sending nothing; with `reopen`,
    one the service closes is opened again, `reopen` a second at most (it keeps trying, without
    turning into a connection flood, which is another attack)."""

    def __init__(self, port, count, reopen=0):
        self.port, self.count, self.reopen = port, count, reopen
        self.sockets = []
        self.running = True
        self.opened = 0
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def open_one(self):
        s = socket.socket()
        s.setblocking(False)
        s.bind(("127.0.0.1", 0))
        s.connect_ex(("127.0.0.1", self.port))
        self.opened += 1
        return s

    def run(self):
        self.sockets = [self.open_one() for _ in range(self.count)]
        budget, refilled = 0.0, time.time()
        while self.running:
            poller = select.poll()
            by_fd = {}
            for s in self.sockets:
                poller.register(s, select.POLLIN)
                by_fd[s.fileno()] = s
            for fd, _ in poller.poll(100):
                s = by_fd[fd]
                try:
                    data = s.recv(1)
                except OSError:
                    data = b""
                if not data:
                    self.sockets.remove(s)
                    s.close()
            now = time.time()
            budget = min(self.reopen, budget + (now - refilled) * self.reopen)
            refilled = now
            while self.reopen and budget >= 1 and len(self.sockets) < self.count:
                self.sockets.append(self.open_one())
                budget -= 1

    def stop(self):
        self.running = False
        self.thread.join()
        for s in self.sockets:
            s.close()


def client_socket(port):
    s = socket.socket()
    s.settimeout(15)
    s.bind(("127.0.0.2", 0))
    s.connect(("127.0.0.1", port))
    return s


def tls_join(service, room, token):
    start = time.time()
    with service.context.wrap_socket(client_socket(service.port), server_hostname="localhost") as s:
        s.sendall((json.dumps({"type": "join", "room": room, "token": token}) + "\n").encode())
        line = s.makefile().readline()
        assert '"joined"' in line, line
    return time.time() - start


def wss_join(service, room, token):
    start = time.time()
    with service.context.wrap_socket(client_socket(service.web), server_hostname="localhost") as s:
        key = base64.b64encode(os.urandom(16)).decode()
        s.sendall((f"GET /ws HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += s.recv(4096)
        assert b" 101 " in head, head
        payload = json.dumps({"type": "join", "room": room, "token": token}).encode()
        mask = os.urandom(4)
        s.sendall(bytes([0x81, 0x80 | 126]) + len(payload).to_bytes(2, "big") + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))
        frame = head.split(b"\r\n\r\n", 1)[1]
        while len(frame) < 2 or len(frame) < 2 + (frame[1] & 0x7f if frame[1] & 0x7f < 126 else 2):
            frame += s.recv(4096)
        assert b'"joined"' in frame or b'"joined"' in frame + s.recv(4096), frame
    return time.time() - start


def https_whep(service, room, token):
    start = time.time()
    with service.context.wrap_socket(client_socket(service.web), server_hostname="localhost") as s:
        body = b"v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\n"
        s.sendall((f"POST /whep/{room} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {token}\r\n"
                   f"Content-Type: application/sdp\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body)
        reply = s.recv(4096)
        assert reply.startswith(b"HTTP/1.1 "), reply
    return time.time() - start


def measure(callend, idle, rounds):
    folder = tempfile.mkdtemp(prefix="callend-starvation-")
    service = Service(callend, folder)
    results = {}
    try:
        for name, port, probe in [("TLS join (signaling port)", service.port, tls_join), ("WSS join (/ws)", service.web, wss_join),
                                  ("HTTPS WHEP POST", service.web, https_whep)]:
            attacker = Attacker(port, idle, reopen=200)
            time.sleep(1)  # the attacker's connections in place before the client comes
            times = []
            for i in range(rounds):
                try:
                    room = f"{name[:3].lower()}-{i}"  # a room each: a seat stays in its grace after the client leaves
                    times.append(probe(service, room, service.token(room)))
                except Exception as error:  # a timeout or a reset: the client was not served
                    times.append(float("inf"))
                    print(f"  {name}: round {i}: {error!r}", file=sys.stderr)
            attacker.stop()
            results[name] = (sorted(times), attacker.opened)
        attacker = Attacker(service.port, 40, reopen=0)
        time.sleep(4)  # past the first-byte deadline: the steady state of 40 idle connections
        before, start = service.cpu_seconds(), time.time()
        time.sleep(10)
        cpu = (service.cpu_seconds() - before) / (time.time() - start)
        attacker.stop()
        results["cpu"] = cpu
    finally:
        service.stop()
        subprocess.run(["rm", "-rf", folder])
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--callend", default=os.path.join(root, ".build/release/callend"))
    parser.add_argument("--before", help="an older callend to measure the same way beside it")
    parser.add_argument("--idle", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    builds = [("this build", args.callend)] + ([("before", args.before)] if args.before else [])
    measured = [(label, measure(binary, args.idle, args.rounds)) for label, binary in builds]
    print(f"\nA client of 127.0.0.2 served while 127.0.0.1 holds {args.idle} idle connections ({args.rounds} rounds; goal: every one under 1 s)")
    print("| listener | " + " | ".join(f"{label}: median / max" for label, _ in measured) + " |")
    print("| --- |" + " --- |" * len(measured))
    for name in ["TLS join (signaling port)", "WSS join (/ws)", "HTTPS WHEP POST"]:
        cells = []
        for label, result in measured:
            times, opened = result[name]
            worst = times[-1]
            met = "met" if worst < 1 else "NOT met"
            show = lambda t: "never" if t == float("inf") else f"{t * 1000:.0f} ms"
            cells.append(f"{show(times[len(times) // 2])} / {show(worst)} ({met}; the attacker opened {opened})")
        print(f"| {name} | " + " | ".join(cells) + " |")
    print("\nThe service's CPU while 40 connections sit idle without a handshake (goal: no busy loop, under 5 % of a core)")
    for label, result in measured:
        print(f"  {label}: {result['cpu'] * 100:.1f} % of a core ({'met' if result['cpu'] < 0.05 else 'NOT met'})")


if __name__ == "__main__":
    main()
