#!/usr/bin/python3
# Run by scripts/trust/test.sh: PORT SECRET: the trust cases against the service (token lifetimes,
# renewal, seats, grace).
import json, socket, sys, time
import jwt

port, secret = int(sys.argv[1]), open(sys.argv[2]).read().strip()
ok = True

class Participant:
    def __init__(self):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.buffer = b""
    def send(self, message):
        self.sock.sendall((json.dumps(message) + "\n").encode())
    def receive(self, timeout=10):
        self.sock.settimeout(timeout)
        while b"\n" not in self.buffer:
            chunk = self.sock.recv(65536)
            if not chunk:
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)
    def join(self, token, rejoin=False):
        self.send({"type": "join", "room": "lab", "token": token, "rejoin": rejoin})
        return self.receive()
    def wait_for(self, kind, timeout):
        deadline = time.time() + timeout
        while time.time() < deadline:
            message = self.receive(max(0.1, deadline - time.time()))
            if message is None:
                return None
            if message.get("type") == kind:
                return message
        return None

def verdict(name, passed, detail):
    global ok
    print(f"trust: {name}: {'refused as it should be' if passed else 'FAILED'}: {detail}")
    ok = ok and passed

# renewal-lifetime: PyJWT's defaults, 20 s left.
token = jwt.encode({"sub": "roof", "room": "lab", "exp": int(time.time()) + 20}, secret, algorithm="HS256")
roof = Participant()
joined = roof.join(token)
renewal = roof.wait_for("token", 30) if joined and joined.get("type") == "joined" else None
if renewal is None:
    verdict("renewal-lifetime", False, f"no renewal came ({joined})")
else:
    claims = jwt.decode(renewal["token"], secret, algorithms=["HS256"])
    lifetime = claims["exp"] - int(time.time())
    verdict("renewal-lifetime", lifetime <= 20, f"the renewal of a token with 20 s left lives {lifetime} s (exp {claims['exp']})")

# renewal-grace: another token of roof while its seat is live, then the renewal within and after the grace.
other = jwt.encode({"sub": "roof", "room": "lab", "exp": int(time.time()) + 600, "iat": int(time.time())}, secret, algorithm="HS256")
thief = Participant()
answer = thief.join(other)
roof.send({"type": "ping", "id": 7})
still = roof.wait_for("pong", 5)
verdict("seat-taken", answer.get("code") == "seat_taken" and still is not None,
        f"another token of roof got {answer.get('code') or answer.get('type')}; roof's own connection {'stayed' if still else 'was lost'}")
if renewal is not None:
    roof.sock.close()
    back = Participant()
    again = back.join(renewal["token"], rejoin=True)
    print(f"trust: renewal-grace: within the grace the renewal takes the seat back: {again.get('type')} {again.get('code', '')}")
    if again.get("type") != "joined":
        verdict("renewal-grace", False, f"the renewal did not take its seat back within the grace: {again}")
    back.sock.close()
    # The grace is time itself: the service's --seat-grace 3s, then the tick that ends it.
    time.sleep(3 + 1.5)
    late = Participant()
    refused = late.join(renewal["token"], rejoin=True)
    verdict("renewal-grace", refused.get("code") == "token_renewal", f"after the grace the renewal with rejoin true got {refused.get('code') or refused.get('type')}")
sys.exit(0 if ok else 1)
