#!/usr/bin/python3
"""Opens the callend page in mesh mode (URL with ?mesh=1) in Debian's headless Chromium with a
fake camera and microphone, waits until it shows a tile for each of --peers peers and each has
decoded --frames frames, watches --seconds more, and prints one JSON line: the tiles on the page,
and per peer the frames decoded over the watched seconds ("fps"), its size and audio packets.
--screenshot saves the page. Exits 3 when Chromium cannot start, 1 when the tiles did not fill
within --timeout.

  tiles.py URL --peers N [--frames N] [--seconds S] [--timeout S] [--secure-origin ORIGIN] [--screenshot F]
"""
import argparse, json, os, sys, time

parser = argparse.ArgumentParser()
parser.add_argument("url")
parser.add_argument("--peers", type=int, required=True)
parser.add_argument("--frames", type=int, default=30)
parser.add_argument("--seconds", type=float, default=10)
parser.add_argument("--timeout", type=float, default=60)
parser.add_argument("--secure-origin", help="an http:// origin Chromium treats as secure (camera and microphone allowed)")
parser.add_argument("--screenshot")
args = parser.parse_args()
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "browser"))
import chromium

flags = chromium.FAKE_MEDIA + ["--window-size=1280,900"]
if args.secure_origin:
    flags.append(f"--unsafely-treat-insecure-origin-as-secure={args.secure_origin}")
driver = chromium.start("tiles.py", flags)

def stats():
    return driver.execute_async_script("window.callendMeshStats().then(arguments[arguments.length - 1])")

status, result = 1, {}
try:
    driver.set_script_timeout(20)
    driver.get(args.url)
    deadline = time.time() + args.timeout
    while time.time() < deadline:
        result = stats()
        peers = result.get("peers", {})
        if len(peers) >= args.peers and all(p.get("framesDecoded", 0) >= args.frames and p.get("playing") for p in peers.values()):
            status = 0
            break
        time.sleep(0.25)  # a poll of the page's statistics
    if status == 0:
        start, started = result, time.time()
        time.sleep(args.seconds)  # the window the frame rates are counted over
        result = stats()
        window = time.time() - started
        for peer, p in result["peers"].items():
            before = start["peers"].get(peer, {}).get("framesDecoded", 0)
            p["fps"] = round((p.get("framesDecoded", 0) - before) / window, 1)
        result["seconds"] = round(window, 2)
        if args.screenshot:
            driver.save_screenshot(args.screenshot)
    else:
        result["log"] = driver.execute_script("return window.callend.log.slice(-15)")
except Exception as error:
    result["driverError"] = str(error).splitlines()[0]
    status = 1
finally:
    chromium.report_and_quit(driver, result)
sys.exit(status)
