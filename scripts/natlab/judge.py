#!/usr/bin/python3
# Run by scripts/natlab/test.sh: WORK NAME EXPECT: a NAT case: both sides decoded video and the
# selected pair is the EXPECTed kind (host, srflx, relay).
import json, re, sys
work, name, expect = sys.argv[1:]
sides = {}
for n in ("1", "2"):
    out = open(f"{work}/{name}-{n}.out").read()
    stats = [json.loads(l) for l in out.splitlines() if l.startswith("{") and "receivedFps" in l]
    decoded = re.search(r"video (\d+) frames decoded", out)
    sent = re.search(r"sent (\d+) frames", out)
    pair = next((s["candidatePair"] for s in reversed(stats) if s.get("candidatePair")), None)
    sides[n] = (int(decoded.group(1)) if decoded else 0, int(sent.group(1)) if sent else 0, pair)
ok = True
for me, other in (("1", "2"), ("2", "1")):
    decoded, sent, pair = sides[me][0], sides[other][1], sides[me][2]
    share = decoded / sent if sent else 0
    print(f"natlab: {name}: side {me} decoded {decoded} of {sent} frames ({100 * share:.1f} %) over {pair}")
    if share < 0.95: ok = False
def types(pair):
    if not pair: return set()
    local, remote = pair.split(" -> ")
    return {("local", local.split()[0]), ("remote", remote.split()[0])}
kinds = {t for side in sides.values() for _, t in types(side[2])}
if expect == "srflx": good = bool(kinds & {"srflx", "prflx"}) and "relay" not in kinds
elif expect == "relay": good = "relay" in kinds
elif expect == "tcp-relay": good = ("local", "relay") in types(sides["1"][2])
elif expect == "host": good = kinds == {"host"}
elif expect == "relay-only": good = all(("local", "relay") in types(s[2]) for s in sides.values())
else: good = True
if not good: print(f"natlab: {name}: expected a {expect} pair, got {[s[2] for s in sides.values()]}")
print(f"natlab: {name}: {'passed' if ok and good else 'FAILED'}")
sys.exit(0 if ok and good else 1)
