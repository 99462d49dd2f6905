#!/usr/bin/python3
"""Opens the WHEP player (player.html) in Debian's headless Chromium and watches: waits until the
video element plays and --frames frames are decoded, watches --seconds more, then DELETEs the
session and prints one JSON line: the player's getStats (frames decoded and received, size,
audio samples, the candidate pair), over the --seconds watched the frames decoded a second and
the video's kbit/s ("window"), POST -> first frame in ms, whether ICE was restarted by
PATCH, and the DELETE's status. Exits 3 when Chromium cannot start, 1 when the media did not
come within --timeout.

  watch.py PLAYER_URL [--frames N] [--seconds S] [--timeout S] [--trust-key PIN] [--page whep|janus]

--page janus watches scripts/janus/subscriber.html instead (its janusStats() and janusStop()).
"""
import argparse, json, os, sys, time

parser = argparse.ArgumentParser()
parser.add_argument("url")
parser.add_argument("--frames", type=int, default=60)
parser.add_argument("--seconds", type=float, default=8)
parser.add_argument("--timeout", type=float, default=60)
parser.add_argument("--page", default="whep", choices=["whep", "janus"], help="whose functions the page has")
parser.add_argument("--trust-key", help="base64 SHA-256 of a certificate key Chromium trusts (the service's private CA)")
args = parser.parse_args()

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "browser"))
import chromium

# The player's state is read from its script, not its load event.
flags = [f"--ignore-certificate-errors-spki-list={args.trust_key}"] if args.trust_key else []
driver = chromium.start("watch.py", flags, page_load_strategy="eager")

def stats():
    return driver.execute_async_script(f"window.{args.page}Stats().then(arguments[arguments.length - 1])")

status = 1
result = {}
try:
    driver.set_script_timeout(20)
    driver.get(args.url)
    deadline = time.time() + args.timeout
    while time.time() < deadline:
        result = stats()
        if result.get("state") == "failed":
            break
        if result.get("playing") and (result.get("video") or {}).get("framesDecoded", 0) >= args.frames:
            status = 0
            break
        time.sleep(0.25)
    if status == 0:
        start, started = stats(), time.time()
        time.sleep(args.seconds)
        result = stats()
        # What came over the --seconds watched: frames decoded a second, kbit/s of video.
        window = time.time() - started
        before, after = start.get("video") or {}, result.get("video") or {}
        result["window"] = {"seconds": round(window, 2),
                            "fps": round((after.get("framesDecoded", 0) - before.get("framesDecoded", 0)) / window, 1),
                            "kbps": round((after.get("bytesReceived", 0) - before.get("bytesReceived", 0)) * 8 / window / 1000)}
    result["deleteStatus"] = driver.execute_async_script(f"window.{args.page}Stop().then(arguments[arguments.length - 1])")
except Exception as error:
    result["driverError"] = str(error).splitlines()[0]
    status = 1
finally:
    chromium.report_and_quit(driver, result)
sys.exit(status)
