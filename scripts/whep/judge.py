#!/usr/bin/python3
# Run by scripts/whep/test.sh: judge NAME [CODEC SHARE]: the player's JSON line against what the
# endpoint sent that viewer (>= 90 % decoded, or SHARE), and the codec its getStats names.
import json, re, sys
work, name = sys.argv[1:3]
codec, share = (sys.argv[3], float(sys.argv[4])) if len(sys.argv) > 4 else (None, 0.9)
lines = [l for l in open(f"{work}/{name}-player.out").read().splitlines() if l.startswith("{")]
page = json.loads(lines[-1]) if lines else {}
log = open(f"{work}/{name}-endpoint.err").read()
sent = [int(n) for n in re.findall(r"whep: whep~\w+ done: sent (\d+) frames", log)]
video = page.get("video") or {}
decoded = video.get("framesDecoded", 0)
ok = bool(sent) and page.get("playing") and decoded >= share * sent[-1] and (codec is None or video.get("codec") == codec) and (page.get("audio") or {}).get("samples", 0) > 0 and page.get("deleteStatus") == 200
print(f"whep: {name}: the player decoded {decoded} of the {sent[-1] if sent else 0} frames the endpoint sent it "
      f"({100 * decoded / max(1, sent[-1] if sent else 0):.1f} %, want >= {100 * share:.0f} %; {video.get('codec')} {video.get('width')}x{video.get('height')}), "
      f"audio samples {(page.get('audio') or {}).get('samples', 0)}, path {page.get('pair')}, ICE restarted by PATCH: {page.get('restarted')}, "
      f"POST -> first frame {page.get('firstFrameMs') or 0:.0f} ms, DELETE {page.get('deleteStatus')}: {'passed' if ok else 'FAILED'}")
if not ok: print(f"whep: {name}: the player said {json.dumps(page)[:600]}")
sys.exit(0 if ok else 1)
