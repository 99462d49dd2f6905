#!/usr/bin/python3
# Run by scripts/janus/test.sh: WORK: the Janus VideoRoom case: callend's publisher and
# subscriber, Chromium's subscriber, the wrong secret refused. WORK h264: room 1235 in H.264
# alone: callend's subscriber by frames against what the publisher sent, Chromium's by its frame
# rate over the 20 s it watched against the publisher's (issue 52: >= 98 %, no decode error,
# H.264 on every leg).
import json, re, sys
work = sys.argv[1]
ok = True
def fail(why):
    global ok
    print(f"janus: FAILED: {why}")
    ok = False
def judge_h264():
    pub, sub = open(f"{work}/h264-publisher.out").read(), open(f"{work}/h264-subscriber.out").read()
    m = re.search(r"media from (\d+) ms; sent (\d+) frames", pub)
    sent, media_from = (int(m[2]), int(m[1])) if m else (0, 0)
    m = re.search(r"decoded (\d+) frames in \d+ ms from the first \((\d+) decode errors", sub)
    decoded, errors = (int(m[1]), int(m[2])) if m else (0, -1)
    h264 = all("video H264" in open(f"{work}/h264-{who}.err").read() for who in ("publisher", "subscriber"))
    print(f"janus: h264: the publisher sent {sent} frames, callend's subscriber decoded {decoded} "
          f"({100 * decoded / max(1, sent):.1f} %, {errors} decode errors); H.264 both: {h264}")
    if not (h264 and sent > 0 and decoded >= 0.98 * sent and errors == 0):
        fail("h264: callend's subscriber decodes >= 98 % of the frames sent, with no decode error, in H.264 both ways")
    # The publisher's frame rate over the 30 s it ran, from the moment media could flow.
    pub_fps = sent / (30 - media_from / 1000) if sent else 0
    lines = [l for l in open(f"{work}/h264-chromium.out").read().splitlines() if l.startswith("{")]
    line = json.loads(lines[-1]) if lines else {}
    window, video = line.get("window") or {}, line.get("video") or {}
    share = window.get("fps", 0) / pub_fps if pub_fps else 0
    print(f"janus: h264: Chromium subscriber: {window.get('fps')} fps over {window.get('seconds')} s against the publisher's {pub_fps:.1f} "
          f"= {100 * share:.1f} % of its frames; {video.get('codec')}, {video.get('framesDecoded')} decoded, {video.get('framesDropped')} dropped")
    if share < 0.98 or video.get("codec") != "video/H264":
        fail("h264: Chromium decodes >= 98 % of the frames, in H.264")
if sys.argv[2:] == ["h264"]:
    judge_h264()
    sys.exit(0 if ok else 1)
pub = open(f"{work}/publisher.out").read()
m = re.search(r"media from (\d+) ms; sent (\d+) frames", pub)
if not m:
    print(f"janus: FAILED: no publisher summary: {pub!r}")
    sys.exit(1)
# The publisher's frame rate over the 50 s it ran, from the moment media could flow.
pub_fps = int(m.group(2)) / (50 - int(m.group(1)) / 1000)
estimates = [json.loads(d).get("estimateKbps") for d in re.findall(r"encoding: (\{.*\})", open(f"{work}/publisher.err").read())]
estimates = [e for e in estimates if e is not None]
print(f"janus: publisher: {pub.strip()}")
print(f"janus: publisher: {pub_fps:.1f} fps; estimates of its decisions (kbit/s): {estimates}")
# Without feedback from Janus the estimate would climb to auto mode's ceiling (2.5 Mbit/s); with
# it, it follows the link (its probes overshoot by design, so the median of the later half counts).
settled = sorted(estimates[len(estimates) // 2:])
median = settled[len(settled) // 2] if settled else 0
print(f"janus: publisher: median estimate of its later decisions {median} kbit/s (the link: 1200)")
if not 600 <= median <= 1500:
    fail("the publisher's estimate did not follow the 1.2 Mbit/s link (median of its later decisions 600-1500 kbit/s)")
sub = open(f"{work}/subscriber.out").read()
m = re.search(r"decoded (\d+) frames in (\d+) ms from the first \((\d+) decode errors, (\d+) of (\d+) video packets lost\)", sub)
if not m:
    fail(f"no subscriber summary: {sub!r}")
else:
    fps = int(m.group(1)) / (int(m.group(2)) / 1000)
    share = fps / pub_fps
    print(f"janus: callend subscriber: {sub.strip()}")
    print(f"janus: callend subscriber: {fps:.1f} fps = {100 * share:.0f} % of the publisher's frames")
    if share < 0.9 or int(m.group(3)) > 0:
        fail("callend's subscriber decodes >= 90 % of the frames, with no decode error")
line = json.loads([l for l in open(f"{work}/chromium.out").read().splitlines() if l.startswith("{")][-1])
window = line.get("window") or {}
share = window.get("fps", 0) / pub_fps
print(f"janus: Chromium subscriber: {window.get('fps')} fps, {window.get('kbps')} kbit/s over {window.get('seconds')} s "
      f"= {100 * share:.0f} % of the publisher's frames; {line.get('video')}, pair {line.get('pair')}")
if share < 0.9:
    fail("Chromium decodes >= 90 % of the frames")
if window.get("kbps", 0) > 1200:
    fail("the video Chromium received is within the publisher's 1.2 Mbit/s link")
sys.exit(0 if ok else 1)
