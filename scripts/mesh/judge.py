#!/usr/bin/python3
# Run by scripts/mesh/test.sh: WORK: the mesh of four and the page's tiles: every peer decoded
# every other, the fifth refused.
import json, re, sys
work = sys.argv[1]
ok = True
def fail(why):
    global ok
    print(f"mesh: FAILED: {why}")
    ok = False
def load(name):
    return {p["peer"]: p for p in (json.loads(l) for l in open(f"{work}/{name}.out") if l.startswith("{"))}
got = {name: load(name) for name in ["a", "b", "c", "d1", "d2"]}
who = {"a": "a", "b": "b", "c": "c", "d1": "d", "d2": "d"}
for name, peers in got.items():
    for peer, p in sorted(peers.items()):
        fps = p["framesDecoded"] / (p["watchedMs"] / 1000) if p["watchedMs"] else 0
        print(f"mesh: {name} from {peer}: {p['sessions']} session(s), decoded {p['framesDecoded']} frames in {p['watchedMs'] / 1000:.1f} s "
              f"({fps:.1f} fps), {p['decodeErrors']} decode errors, {p['freezes']} freezes (longest {p['longestFreezeMs']} ms), "
              f"lost {p['videoPacketsLost']} of {p['videoPackets']} packets; sent it {p['framesSent']} frames")
# Every endpoint decodes >= 90 % of what each other sent it; D's two sessions count together.
for receiver in ["a", "b", "c", "d"]:
    for sender in ["a", "b", "c", "d"]:
        if receiver == sender:
            continue
        recv = [got[n].get(sender, {}) for n in (["d1", "d2"] if receiver == "d" else [receiver])]
        send = [got[n].get(receiver, {}) for n in (["d1", "d2"] if sender == "d" else [sender])]
        decoded = sum(r.get("framesDecoded", 0) for r in recv)
        sent = sum(s.get("framesSent", 0) for s in send)
        errors = sum(r.get("decodeErrors", 0) for r in recv)
        share = decoded / sent if sent else 0
        print(f"mesh: {receiver} decoded {decoded} of the {sent} frames {sender} sent it ({100 * share:.0f} %)")
        if share < 0.9 or errors:
            fail(f"{receiver} decoded {100 * share:.0f} % of {sender}'s frames ({errors} decode errors); want >= 90 %, none")
        seconds = sum(s.get("watchedMs", 0) for s in recv) / 1000
        counted = seconds - len(recv)
        if counted > 0:
            print(f"mesh: {sender} sent {receiver} {sent / counted:.1f} fps after each session's first second")
# The shared encoder steps its frame rate down when the machine is short of time (four debug
# builds encoding and decoding on two cores), to its floor of 15 fps and not below: that is the
# verdict, read from the mode in its reports. The frame rate a busy machine then reaches is a
# figure above, not a verdict (CI's stages beside it took the senders to 13.7-14.9 fps at 15).
for name in ["a", "b", "c", "d1", "d2"]:
    modes = re.findall(r"shared encoder: (\d+x\d+)@(\d+) for", open(f"{work}/{name}.err").read())
    print(f"mesh: {name}'s shared encoder reported " + (", ".join(sorted({f"{m}@{r}" for m, r in modes})) or "nothing"))
    if not modes or min(int(r) for _, r in modes) < 15:
        fail(f"{name}'s shared encoder went below 15 fps or never reported: {modes}")
for x in ["a", "b", "c"]:
    for y in ["a", "b", "c"]:
        if x == y:
            continue
        p = got[x].get(y, {})
        if p.get("sessions") != 1 or p.get("watchedMs", 0) < 55000 or p.get("longestFreezeMs", 10**6) > 1000:
            fail(f"{x} and {y} stopped: {p.get('sessions')} sessions, watched {p.get('watchedMs', 0) / 1000:.1f} s, longest freeze {p.get('longestFreezeMs')} ms")
    if got[x].get("d", {}).get("sessions") != 2:
        fail(f"{x} had {got[x].get('d', {}).get('sessions')} sessions with d, not 2 (it left and came back)")
# The page: a tile for itself and each endpoint; it decodes >= 90 % of what each endpoint sent it,
# and each endpoint >= 90 % of what the page sent it (the endpoints ended on SIGTERM, after the
# page left, so what they sent after the page's last count is a second at most). Judged by frames
# sent, not by a frame rate: how fast a busy machine encodes is not this test's verdict.
page = json.loads([l for l in open(f"{work}/page.out") if l.startswith("{")][-1])
print(f"mesh: the page: {page['tiles']} tiles; " + "; ".join(f"from {k}: {v.get('fps')} fps {v.get('width')}x{v.get('height')}, sent it {v.get('framesSent')} frames" for k, v in sorted(page["peers"].items())))
if page["tiles"] != 3:
    fail(f"the page shows {page['tiles']} tiles, not 3 (itself and two endpoints)")
for name in ["e", "f"]:
    v = page["peers"].get(name, {})
    got_page = load(name).get("page", {})
    shown, offered = v.get("framesDecoded", 0), got_page.get("framesSent", 0)
    print(f"mesh: the page decoded {shown} of the {offered} frames {name} sent it")
    if not offered or shown < 0.9 * offered:
        fail(f"the page decoded {shown} of {name}'s {offered} frames (want >= 90 %)")
    decoded, sent = got_page.get("framesDecoded", 0), v.get("framesSent", 0)
    print(f"mesh: {name} decoded {decoded} of the {sent} frames the page sent it")
    if not sent or decoded < 0.9 * sent:
        fail(f"{name} decoded {decoded} of the page's {sent} frames (want >= 90 %)")
sys.exit(0 if ok else 1)
