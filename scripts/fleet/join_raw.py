#!/usr/bin/python3
# Run by scripts/fleet/test.sh: join_raw NODE ROOM TOKEN...: each joins at once on its node;
# prints each outcome (joined or the error code), holding every connection until all have
# answered.
import json, socket, sys, threading
room, pairs = sys.argv[1], list(zip(sys.argv[2::2], sys.argv[3::2]))
socks = [socket.create_connection(("127.0.0.1", int(p)), timeout=5) for p, _ in pairs]
out = [None] * len(pairs)
def go(i):
    socks[i].sendall((json.dumps({"type": "join", "room": room, "token": open(pairs[i][1]).read().strip()}) + "\n").encode())
    line = socks[i].makefile().readline()
    m = json.loads(line) if line else {}
    out[i] = m.get("type") if m.get("type") == "joined" else m.get("code", "nothing")
threads = [threading.Thread(target=go, args=(i,)) for i in range(len(pairs))]
for t in threads: t.start()
for t in threads: t.join()
print(" ".join(sorted(out)))
