#!/usr/bin/python3
# Run by scripts/browser/test.sh: check NAME [CODEC]: judges the page's JSON line and the
# endpoint's summary and recordings. CODEC (default VP8): the video both sides must have used;
# video FEC (ULPFEC in RED) is required in both codecs, which callend offers it with.
import json, re, struct, sys, wave
work, name = sys.argv[1:3]
codec = sys.argv[3] if len(sys.argv) > 3 else "VP8"
lines = [l for l in open(f"{work}/{name}-page.out").read().splitlines() if l.startswith("{")]
page = json.loads(lines[-1]) if lines else {}
recv = (page.get("stats") or {}).get("recv") or {}
pair = ((page.get("stats") or {}).get("pair") or {}).get("text")
out = open(f"{work}/{name}-endpoint.out").read()
decoded = int((re.search(r"video (\d+) frames decoded", out) or [0, 0])[1])
audio = int((re.search(r"audio (\d+) decoded", out) or [0, 0])[1])
red = int((re.search(r"audio \d+ decoded \((\d+) packets in RED", out) or [0, 0])[1])
endpoint_log = open(f"{work}/{name}-endpoint.err").read()
fec = f"video {codec} with ULPFEC in RED" in endpoint_log
in_codec = re.search(rf"media: .*video {codec}( with ULPFEC in RED)? sendrecv", endpoint_log) is not None
frames = open(f"{work}/{name}.y4m", "rb").read().count(b"FRAME") if decoded else 0
status = [json.loads(l) for l in out.splitlines() if l.startswith("{") and "transportFeedback" in l]
feedback = status[-1]["transportFeedback"] if status else 0
loud = 0
try:
    with wave.open(f"{work}/{name}.wav") as w:
        pcm = w.readframes(w.getnframes())
        samples = struct.unpack(f"<{len(pcm) // 2}h", pcm)
        loud = sum(1 for s in samples if abs(s) > 300)
except (OSError, EOFError, wave.Error):
    pass
print(f"browser: {name}: the page decoded {recv.get('framesDecoded', 0)} frames ({recv.get('width')}x{recv.get('height')}) "
      f"and {recv.get('audioSamples', 0)} audio samples from the endpoint; path {pair}")
print(f"browser: {name}: the endpoint decoded {decoded} {codec} frames ({frames} in its recording) and {audio} Opus frames "
      f"({red} of their packets in RED; {loud} samples above -40 dBFS in its WAV); its estimate followed {feedback} transport-cc feedback packets from Chromium; "
      f"video FEC (ULPFEC in RED) {'negotiated: the page decoded callend video in RED' if fec else 'NOT negotiated'}; "
      f"video {codec} both ways: {'yes' if in_codec else 'NO'}")
ok = page.get("ok") and recv.get("framesDecoded", 0) >= 150 and recv.get("audioSamples", 0) > 0 and frames >= 40 and audio >= 50 and loud > 0 and feedback >= 10 \
    and red >= audio // 2 and fec and in_codec
print(f"browser: {name}: {'passed' if ok else 'FAILED'}")
sys.exit(0 if ok else 1)
