#!/usr/bin/python3
"""Drives the callend page in a headless Chromium (Debian's chromium, chromium-driver and
python3-selenium) with a fake camera and microphone: opens URL, waits until the page has decoded
--frames video frames and received audio from the peer (its video element playing), then prints
one JSON line with the page's statistics. Exits 3 when Chromium cannot start (the caller skips),
1 when the media did not arrive in --timeout seconds.

With --run-until T (seconds since the epoch, so that two pages stop together) it then stays in
the call until T, timing every picture the video element shows (requestVideoFrameCallback) and
every ICE state, and leaves once the peer page has its figures too (--peer-collected-file); the JSON line gains "run": the shown
pictures' times (ms) and sizes, the ICE states, and the inbound video and audio statistics at the
end (freezes, concealment, NACKs, FEC) with the codecs in use: what the loss bench judges.
"""
import argparse, json, os, signal, sys, time

parser = argparse.ArgumentParser()
parser.add_argument("url")
parser.add_argument("--frames", type=int, default=60, help="video frames the page must decode")
parser.add_argument("--timeout", type=float, default=60)
parser.add_argument("--screenshot", help="PNG of the page once the media arrived")
parser.add_argument("--receive-only", action="store_true", help="no camera or microphone")
parser.add_argument("--ready-file", help="written once the page has joined the room")
parser.add_argument("--stay", action="store_true", help="once the media arrived, stay in the call until SIGTERM")
parser.add_argument("--secure-origin", help="an http:// origin Chromium treats as secure (camera and microphone allowed)")
parser.add_argument("--trust-key", help="base64 SHA-256 of a certificate key Chromium trusts (a service's private CA)")
parser.add_argument("--run-until", type=float, help="once the media arrived, stay until this time (epoch seconds) timing the pictures shown")
parser.add_argument("--fake-video", help="a Y4M file the fake camera plays (looped) instead of its own pattern")
parser.add_argument("--collected-file", help="with --run-until: written once this page has its figures")
parser.add_argument("--data-send", type=int, help="once the media arrived: the data channel console's traffic (scripts/datachannel/lines.py): this many small lines 'chromium N'")
parser.add_argument("--data-big", type=int, default=0, help="and this many big lines, sent as the channel's buffer allows")
parser.add_argument("--data-expect", type=int, default=0, help="small lines from the peer ('callend N') to wait for")
parser.add_argument("--data-expect-big", type=int, default=0, help="big lines from the peer to wait for")
parser.add_argument("--data-idle", type=float, help="stop waiting once nothing came for this long after something did (an unreliable channel may lose)")
parser.add_argument("--data-done-file", help="then stay until this file exists (the peer has all the page sent): leaving closes the channel")
parser.add_argument("--peer-collected-file", help="with --run-until: the peer page's --collected-file; this page stays in the call until it appears (30 s at most), so that its leaving does not end the call under the peer's collection")
args = parser.parse_args()
# Stopped by SIGTERM: unwind through the finally below, which closes Chromium.
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chromium

flags = chromium.FAKE_MEDIA + ["--window-size=1280,760"]
if args.secure_origin:
    flags.append(f"--unsafely-treat-insecure-origin-as-secure={args.secure_origin}")
if args.trust_key:
    flags.append(f"--ignore-certificate-errors-spki-list={args.trust_key}")
if args.fake_video:
    flags.append(f"--use-file-for-fake-video-capture={args.fake_video}")
driver = chromium.start("page.py", flags, capabilities={"goog:loggingPrefs": {"browser": "ALL"}})

def say(text):
    print(f"page.py: {text}", file=sys.stderr, flush=True)

status = 1
joined = False
run = None

# Every picture the remote video element shows, and every ICE state, with performance.now().
RECORD = """
const c = window.callend, v = document.getElementById('remote');
c.shown = []; c.ice = [[performance.now(), c.pc ? c.pc.iceConnectionState : 'none']];
const frame = (now, meta) => {
  // The sender's capture time of the picture, on this page's clock (Chromium maps it from the
  // RTCP sender reports), and when it is shown: the frame's delay from capture to display.
  c.shown.push([Math.round(now * 10) / 10, meta.width, meta.height,
                meta.captureTime === undefined ? null : Math.round(meta.captureTime * 10) / 10, Math.round(meta.expectedDisplayTime * 10) / 10]);
  v.requestVideoFrameCallback(frame);
};
v.requestVideoFrameCallback(frame);
if (c.pc) c.pc.addEventListener('iceconnectionstatechange', () => c.ice.push([performance.now(), c.pc.iceConnectionState]));
"""
COLLECT = """
const done = arguments[arguments.length - 1], c = window.callend;
if (!c.pc) { done({shown: c.shown, ice: c.ice, end: performance.now(), codecs: [], video: {}, audio: {}}); return; }
c.pc.getStats().then((report) => {
  const inbound = {}, codecs = {};
  report.forEach((s) => {
    if (s.type === 'inbound-rtp') inbound[s.kind] = s;
    if (s.type === 'codec') codecs[s.id] = s.mimeType + (s.sdpFmtpLine ? ' ' + s.sdpFmtpLine : '');
  });
  const pick = (s, keys) => Object.fromEntries(keys.filter((k) => s && s[k] !== undefined).map((k) => [k, s[k]]));
  const codecsInUse = [];
  report.forEach((s) => { if ((s.type === 'inbound-rtp' || s.type === 'outbound-rtp') && s.codecId) codecsInUse.push(`${s.type} ${s.kind} ${codecs[s.codecId]}`); });
  done({shown: c.shown, ice: c.ice, end: performance.now(), codecs: codecsInUse,
        video: pick(inbound.video, ['framesDecoded', 'framesDropped', 'freezeCount', 'totalFreezesDuration', 'frameWidth', 'frameHeight',
                                    'packetsReceived', 'packetsLost', 'nackCount', 'pliCount', 'firCount', 'fecPacketsReceived',
                                    'fecPacketsDiscarded', 'retransmittedPacketsReceived', 'jitterBufferDelay', 'jitterBufferEmittedCount']),
        audio: pick(inbound.audio, ['totalSamplesReceived', 'concealedSamples', 'silentConcealedSamples', 'concealmentEvents',
                                    'packetsReceived', 'packetsLost', 'fecPacketsReceived', 'fecPacketsDiscarded'])});
});
"""

# Sends the page's share of the data channel traffic (lines.py's, in JavaScript), keeping the
# channel's buffer under 1 MiB, and reports when all is handed to it.
DATA_SEND = """
const [small, big] = arguments, done = arguments[arguments.length - 1], d = window.callendData, ch = d.channel();
const bigLine = (i) => { let s = String(i).padStart(6, '0') + ':'; const parts = [];
  for (let j = 0; j < 16384 - s.length; j++) parts.push(String.fromCharCode(97 + (i * 7 + j) % 26)); return s + parts.join(''); };
for (let i = 0; i < small; i++) ch.send(`chromium ${i}`);
ch.bufferedAmountLowThreshold = 256 * 1024;
let i = 0;
const pump = () => { while (i < big && ch.bufferedAmount < 1024 * 1024) ch.send(bigLine(i++)); if (i < big) ch.onbufferedamountlow = pump; else done(true); };
pump();
"""
# What came from the peer: small lines in order, big ones hashed (SHA-256 of their concatenation).
DATA_TALLY = """
const done = arguments[arguments.length - 1], d = window.callendData;
let small = 0, outOfOrder = 0; const bigs = [];
const label = d.channel() ? d.channel().label : 'callend';
for (const m of d.received) {
  const text = typeof m === 'string' ? m : new TextDecoder().decode(m);
  if (text.length === 16384) bigs.push(text); else if (text === `callend ${small}`) small++; else outOfOrder++;
}
crypto.subtle.digest('SHA-256', new TextEncoder().encode(bigs.join(''))).then((h) => done({small, outOfOrder, big: bigs.length,
  peerChannel: d.peer.find((c) => c.label === label) || null,
  bigSha256: Array.from(new Uint8Array(h)).map((b) => b.toString(16).padStart(2, '0')).join('')}));
"""

def ready(driver):
    """True once the page decodes the peer's video, receives its audio and plays them."""
    global joined
    state = driver.execute_script(
        "const c = window.callend; return c && {me: c.me, stats: c.stats,"
        " playing: (() => { const v = document.getElementById('remote'); return !!v && v.readyState >= 2 && !v.paused && v.currentTime > 0; })()};")
    if state and state.get("me") and not joined:
        joined = True
        say(f"joined as {state['me']}")
        if args.ready_file:
            open(args.ready_file, "w").write(state["me"] + "\n")
    recv = ((state or {}).get("stats") or {}).get("recv") or {}
    return (recv.get("framesDecoded") or 0) >= args.frames and (recv.get("audioSamples") or 0) > 0 and bool(state.get("playing"))

data = None
CONSOLE_LINE = "typed into the console"

def data_exchange():
    """The data channel console's traffic both ways; `data` gets what came and how long it took."""
    global data, status
    from selenium.webdriver.support.ui import WebDriverWait as Wait
    Wait(driver, 30, poll_frequency=0.1).until(lambda d: d.execute_script("return window.callendData.open()"))
    # A line typed into the console and sent with its button, as a person would.
    from selenium.webdriver.common.by import By
    driver.find_element(By.ID, "data-input").send_keys(CONSOLE_LINE)
    driver.find_element(By.ID, "data-send").click()
    Wait(driver, 5, poll_frequency=0.1).until(lambda d: d.execute_script("return window.callendData.typed").count(CONSOLE_LINE) == 1)
    started = time.time()
    driver.set_script_timeout(120)
    driver.execute_async_script(DATA_SEND, args.data_send, args.data_big)
    sent = time.time() - started
    seen = {"count": 0, "at": time.time()}
    def arrived(d):
        n = d.execute_script("return window.callendData.count")
        if n != seen["count"]:
            seen.update(count=n, at=time.time())
        idle = args.data_idle and n > 0 and time.time() - seen["at"] > args.data_idle
        return n >= args.data_expect + args.data_expect_big or idle
    try:
        Wait(driver, 120, poll_frequency=0.2).until(arrived)
    except Exception:
        status = 1
    if args.data_done_file:
        deadline = time.time() + 60
        while not os.path.exists(args.data_done_file) and time.time() < deadline:
            time.sleep(0.05)
    data = driver.execute_async_script(DATA_TALLY)
    data["handedOverSeconds"] = round(sent, 3)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "datachannel"))
    import lines
    data["bigOk"] = data["bigSha256"] == lines.big_digest(args.data_expect_big)
    say(f"data channel: {data}")

try:
    from selenium.webdriver.support.ui import WebDriverWait
    from selenium.common.exceptions import TimeoutException
    driver.set_script_timeout(10)
    driver.get(args.url + ("&send=none" if args.receive_only else ""))
    try:
        WebDriverWait(driver, args.timeout, poll_frequency=0.25).until(ready)
        status = 0
        if args.screenshot:
            driver.save_screenshot(args.screenshot)
        if args.data_send is not None:
            data_exchange()
        if args.stay:
            say("media flowing; staying in the call until SIGTERM")
            signal.pause()
        if args.run_until:
            driver.execute_script(RECORD)
            say(f"media flowing; timing the pictures shown for {args.run_until - time.time():.0f} s")
            time.sleep(max(0, args.run_until - time.time()))
            run = driver.execute_async_script(COLLECT)
            if args.collected_file:
                open(args.collected_file, "w").write("collected\n")
            if args.peer_collected_file:
                deadline = time.time() + 30
                while not os.path.exists(args.peer_collected_file) and time.time() < deadline:
                    time.sleep(0.05)
    except TimeoutException:
        pass
    final = driver.execute_script("return {stats: window.callend && window.callend.stats, log: window.callend ? window.callend.log : []};")
    result = {"ok": status == 0, "stats": final["stats"], "log": final["log"][-20:]}
    if run is not None:
        result["run"] = run
    if data is not None:
        result["data"] = data
    print(json.dumps(result), flush=True)
    if status != 0:
        say("the page did not decode the peer's media in time; its log:")
        for line in final["log"][-20:]:
            say("  " + line)
        for entry in driver.get_log("browser")[-10:]:
            say("  console: " + entry.get("message", ""))
finally:
    try:
        driver.execute_script("window.callend && window.callend.over === false && document.getElementById('leave').click();")
    except Exception:
        pass
    driver.quit()
sys.exit(status)
