#!/usr/bin/python3
# Run by scripts/viewers/test.sh: WORK: the viewers bench's figures: each viewer's frames and
# layers beside the call's, and the shared encode.
import json, re, statistics, sys
work = sys.argv[1]
def load(name):
    line = json.loads([l for l in open(f"{work}/{name}.out").read().splitlines() if l.startswith("{")][-1])
    if "viewers" in line:
        return line["viewers"]
    video = line.get("video") or {}  # the player page (watch.py)
    return [dict(line.get("window") or {"fps": 0, "kbps": 0}, size=f"{video.get('width')}x{video.get('height')}")]
# The viewer behind the veth in each round, by its ICE path, and what the endpoint decided for it.
log = open(f"{work}/endpoint.err").read()
far_sessions = re.findall(r"whep: (whep~[0-9a-f]+): ice: .* -> [a-z]+ 10\.83\.0\.2:", log)
def decisions(session):
    return [json.loads(m) for m in re.findall(session + r": encoding: (\{.*\})", log)]
ok = True
def fail(why):
    global ok
    print(f"viewers: FAILED: {why}")
    ok = False
rounds = {name: (load(f"{name}-near"), load(f"{name}-far")[0]) for name in ["open", "narrow", "thin"]}
if len(far_sessions) != 3:
    fail(f"{len(far_sessions)} sessions of the viewer behind the veth in the log, not 3")
for index, (name, (near, far)) in enumerate(rounds.items()):
    made = decisions(far_sessions[index]) if len(far_sessions) == 3 else []
    layers = [d["to"] for d in made if d["change"] == "layers"]
    own = [d for d in made if d["change"] == "encoder"]
    path = "its own encoder" if own else f"the shared stream, layers {' '.join(layers) or '?'} as logged"
    print(f"viewers: {name}: " + "; ".join(f"{v['fps']} fps {v['kbps']} kbit/s {v['size']}" for v in near + [far])
          + f" (the last behind the veth, served by {path})")
    if name == "open" and (own or any(v["fps"] < 25 for v in near + [far])):
        fail("on open paths every viewer decodes >= 25 fps from the shared stream")
    if name == "narrow" and not (5 <= far["fps"] <= 22 and far["kbps"] <= 1200 and not own and any(l != "0-2" for l in layers)):
        fail("behind 1.2 Mbit/s the viewer keeps decoding the shared stream's lower layers (>= 5 fps, within the link)")
    if name == "thin" and not (far["fps"] >= 5 and far["kbps"] <= 300):
        fail("behind 300 kbit/s the viewer keeps decoding (>= 5 fps, within the link)")
    if name != "open":
        for measure in ["fps", "kbps"]:
            before, after = statistics.median(v[measure] for v in rounds["open"][0]), statistics.median(v[measure] for v in near)
            share = after / before if before else 0
            print(f"viewers: {name}: the three others' {measure}: {before} -> {after} ({100 * share:.0f} %)")
            if share < 0.9:
                fail(f"the others kept {100 * share:.0f} % of their {measure} (want >= 90 %)")
sys.exit(0 if ok else 1)
