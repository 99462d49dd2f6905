#!/usr/bin/python3
# Run by scripts/janus/test.sh: WORK: room 1235 in H.264 alone: callend's subscriber by frames
# against what the publisher sent, Chromium's by its frame rate over the 20 s it watched against
# the publisher's (issue 52: >= 98 %, no decode error, H.264 on every leg).
import json, re, sys
work = sys.argv[1]
ok = True
def fail(why):
    global ok
    print(f"janus: h264: FAILED: {why}")
    ok = False
pub, sub = open(f"{work}/h264-publisher.out").read(), open(f"{work}/h264-subscriber.out").read()
m = re.search(r"media from (\d+) ms; sent (\d+) frames", pub)
sent, media_from = (int(m[2]), int(m[1])) if m else (0, 0)
m = re.search(r"decoded (\d+) frames in \d+ ms from the first \((\d+) decode errors", sub)
decoded, errors = (int(m[1]), int(m[2])) if m else (0, -1)
h264 = all("video H264" in open(f"{work}/h264-{who}.err").read() for who in ("publisher", "subscriber"))
print(f"janus: h264: the publisher sent {sent} frames, callend's subscriber decoded {decoded} "
      f"({100 * decoded / max(1, sent):.1f} %, {errors} decode errors); H.264 both: {h264}")
if not (h264 and sent > 0 and decoded >= 0.98 * sent and errors == 0):
    fail("callend's subscriber decodes >= 98 % of the frames sent, with no decode error, in H.264 both ways")
# The publisher's frame rate over the 30 s it ran, from the moment media could flow.
pub_fps = sent / (30 - media_from / 1000) if sent else 0
lines = [l for l in open(f"{work}/h264-chromium.out").read().splitlines() if l.startswith("{")]
line = json.loads(lines[-1]) if lines else {}
window, video = line.get("window") or {}, line.get("video") or {}
share = window.get("fps", 0) / pub_fps if pub_fps else 0
print(f"janus: h264: Chromium subscriber: {window.get('fps')} fps over {window.get('seconds')} s against the publisher's {pub_fps:.1f} "
      f"= {100 * share:.1f} % of its frames; {video.get('codec')}, {video.get('framesDecoded')} decoded, {video.get('framesDropped')} dropped")
if share < 0.98 or video.get("codec") != "video/H264":
    fail("Chromium decodes >= 98 % of the frames, in H.264")
sys.exit(0 if ok else 1)
