#!/usr/bin/python3
"""Captures the fuzz targets' seed corpora from outside programs, into Tests/FuzzTargetsTests/Corpus:
RTP and RTCP as ffmpeg and GStreamer send them (VP8, H.264 and Opus), their SDP, the HTTP requests and
WebSocket frames headless Chromium sends to a signaling service (when Chromium is there), tokens
from PyJWT, and Y4M, IVF and WAV files from ffmpeg. Run from the repository root; each seed is a
small file named after where it came from. The hand-made seeds next to them stay.
"""
import base64, hashlib, os, socket, struct, subprocess, sys, tempfile, threading, time

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
corpus = os.path.join(root, "Tests", "FuzzTargetsTests", "Corpus")

def save(target, name, data):
    os.makedirs(os.path.join(corpus, target), exist_ok=True)
    with open(os.path.join(corpus, target, name), "wb") as f:
        f.write(data)

def listen_udp(count, seconds):
    """A UDP socket on loopback and a thread that keeps the first `count` datagrams."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    s.settimeout(seconds)
    got = []
    def run():
        try:
            while len(got) < count:
                got.append(s.recv(65536))
        except socket.timeout:
            pass
    t = threading.Thread(target=run)
    t.start()
    return s.getsockname()[1], got, t

def capture_rtp(name, command, packets=40):
    """Runs `command` (with {port} and {rtcp}) and keeps what it sends: RTP and its RTCP."""
    port, rtp, t1 = listen_udp(packets, 8)
    rport, rtcp, t2 = listen_udp(3, 8)
    proc = subprocess.Popen([c.format(port=port, rtcp=rport) for c in command], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t1.join()
    t2.join()
    proc.kill()
    proc.wait()
    return rtp, rtcp

def framed(packets):
    """RTP packets each behind its 2-byte length (RFC 4571), as the stream targets read them."""
    return b"".join(struct.pack(">H", len(p)) + p for p in packets)

def rtp_and_friends():
    ff_vp8, ff_rtcp = capture_rtp("ffmpeg-vp8", ["ffmpeg", "-nostdin", "-re", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=30",
        "-c:v", "libvpx", "-deadline", "realtime", "-b:v", "300k", "-f", "rtp", "rtp://127.0.0.1:{port}?rtcpport={rtcp}"], packets=60)
    ff_opus, ff_rtcp2 = capture_rtp("ffmpeg-opus", ["ffmpeg", "-nostdin", "-re", "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000",
        "-c:a", "libopus", "-f", "rtp", "rtp://127.0.0.1:{port}?rtcpport={rtcp}"], packets=20)
    gst_vp8, _ = capture_rtp("gst-vp8", ["gst-launch-1.0", "-q", "videotestsrc", "is-live=true", "!", "video/x-raw,width=320,height=240",
        "!", "vp8enc", "deadline=1", "!", "rtpvp8pay", "picture-id-mode=15-bit", "!", "udpsink", "host=127.0.0.1", "port={port}"], packets=40)
    for i, p in enumerate(ff_vp8[:6] + gst_vp8[:6]):
        save("rtp", f"{'ffmpeg' if i < 6 else 'gstreamer'}-vp8-{i % 6}", p)
    for i, p in enumerate(ff_opus[:4]):
        save("rtp", f"ffmpeg-opus-{i}", p)
        save("opus", f"ffmpeg-opus-payload-{i}", p[12 + 4 * (p[0] & 0x0f):])
    for i, p in enumerate((ff_rtcp + ff_rtcp2)[:4]):
        save("rtcp", f"ffmpeg-sr-{i}", p)
    if ff_vp8:
        save("vp8", "ffmpeg-vp8-stream", framed(ff_vp8))
    if gst_vp8:
        save("vp8", "gstreamer-vp8-stream", framed(gst_vp8))
        save("vp8", "gstreamer-vp8-reordered", framed(gst_vp8[5:10] + gst_vp8[:5] + gst_vp8[10:]))

def h264():
    """H.264 (RFC 6184) as ffmpeg (x264, single units and FU-A) and GStreamer (OpenH264, STAP-A
    and FU-A) send it, framed like the VP8 streams."""
    ff, _ = capture_rtp("ffmpeg-h264", ["ffmpeg", "-nostdin", "-re", "-f", "lavfi", "-i", "testsrc2=size=160x120:rate=30",
        "-c:v", "libx264", "-profile:v", "baseline", "-tune", "zerolatency", "-g", "10", "-f", "rtp",
        "-pkt_size", "400", "rtp://127.0.0.1:{port}"], packets=40)
    gst, _ = capture_rtp("gst-h264", ["gst-launch-1.0", "-q", "videotestsrc", "is-live=true", "pattern=smpte", "!",
        "video/x-raw,width=160,height=120", "!", "openh264enc", "gop-size=10", "!", "rtph264pay", "mtu=400",
        "config-interval=-1", "aggregate-mode=zero-latency", "!", "udpsink", "host=127.0.0.1", "port={port}"], packets=40)
    if ff:
        save("h264", "ffmpeg-h264-stream", framed(ff))
    if gst:
        save("h264", "gstreamer-h264-stream", framed(gst))
        save("h264", "gstreamer-h264-reordered", framed(gst[5:10] + gst[:5] + gst[10:]))

def sdp_and_files():
    with tempfile.TemporaryDirectory() as work:
        subprocess.run(["ffmpeg", "-nostdin", "-loglevel", "error", "-f", "lavfi", "-i", "testsrc2=size=160x120:rate=10", "-t", "1",
                        "-c:v", "libvpx", "-f", "rtp", "rtp://127.0.0.1:9", "-sdp_file", f"{work}/a.sdp"], check=True)
        save("sdp", "ffmpeg-vp8.sdp", open(f"{work}/a.sdp", "rb").read())
        subprocess.run(["ffmpeg", "-nostdin", "-loglevel", "error", "-f", "lavfi", "-i", "testsrc2=size=32x24:rate=5", "-t", "0.6",
                        "-pix_fmt", "yuv420p", f"{work}/a.y4m"], check=True)
        save("y4m", "ffmpeg-32x24.y4m", open(f"{work}/a.y4m", "rb").read())
        subprocess.run(["ffmpeg", "-nostdin", "-loglevel", "error", "-f", "lavfi", "-i", "testsrc2=size=32x24:rate=5", "-t", "0.6",
                        "-c:v", "libvpx", f"{work}/a.ivf"], check=True)
        save("ivf", "ffmpeg-vp8-32x24.ivf", open(f"{work}/a.ivf", "rb").read())
        for rate, channels in ((48000, 1), (48000, 2), (16000, 1)):
            subprocess.run(["ffmpeg", "-nostdin", "-loglevel", "error", "-f", "lavfi", "-i", f"sine=frequency=440:sample_rate={rate}",
                            "-t", "0.05", "-ac", str(channels), f"{work}/a.wav", "-y"], check=True)
            save("wav", f"ffmpeg-{rate}-{channels}ch.wav", open(f"{work}/a.wav", "rb").read())

def tokens():
    import jwt
    now = 1_800_000_000
    secret = "fuzzing-secret-of-thirty-two-bytes!!"
    save("jwt", "pyjwt-valid", jwt.encode({"sub": "roof", "room": "lab", "iat": now, "nbf": now, "exp": now + 60}, secret, algorithm="HS256").encode())
    save("jwt", "pyjwt-expired", jwt.encode({"sub": "roof", "room": "lab", "iat": 1, "exp": 2}, secret, algorithm="HS256").encode())
    save("jwt", "pyjwt-hs512", jwt.encode({"sub": "roof", "room": "lab", "exp": now + 60}, secret, algorithm="HS512").encode())
    save("jwt", "pyjwt-none", jwt.encode({"sub": "roof", "room": "*", "exp": now + 60}, None, algorithm="none").encode())

def chromium():
    """A page that fetches itself and opens a WebSocket: a tiny server keeps the raw bytes."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.options import Options
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        print("capture-seeds: no selenium: no Chromium seeds", file=sys.stderr)
        return
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    port = server.getsockname()[1]
    kept = {"http": [], "websocket": []}
    page = (b"<html><script>const w = new WebSocket('ws://' + location.host + '/ws');"
            b"w.onopen = () => { w.send(JSON.stringify({type: 'join', room: 'lab', token: 'a.b.c'}));"
            b" w.send(JSON.stringify({type: 'ping'})); w.send('x'.repeat(300)); w.close(1000, 'bye'); };</script></html>")
    def serve():
        server.settimeout(20)
        try:
            while len(kept["websocket"]) == 0:
                conn, _ = server.accept()
                request = b""
                while b"\r\n\r\n" not in request:
                    request += conn.recv(65536)
                kept["http"].append(request)
                if b"Upgrade: websocket" in request:
                    key = [l.split(b":", 1)[1].strip() for l in request.split(b"\r\n") if l.lower().startswith(b"sec-websocket-key")][0]
                    accept = base64.b64encode(hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
                    conn.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " + accept + b"\r\n\r\n")
                    conn.settimeout(5)
                    frames = b""
                    try:
                        while True:
                            chunk = conn.recv(65536)
                            if not chunk:
                                break
                            frames += chunk
                            if b"\x88" in frames[-140:]:
                                break
                    except socket.timeout:
                        pass
                    kept["websocket"].append(frames)
                else:
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: " + str(len(page)).encode() + b"\r\n\r\n" + page)
                conn.close()
        except socket.timeout:
            pass
    t = threading.Thread(target=serve)
    t.start()
    options = Options()
    options.binary_location = "/usr/bin/chromium"
    for flag in ["--headless=new", "--no-sandbox", "--disable-gpu"]:
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    try:
        driver.get(f"http://127.0.0.1:{port}/?room=lab&token=a.b.c")
        t.join()
    finally:
        driver.quit()
        server.close()
    for i, r in enumerate(kept["http"][:3]):
        save("http", f"chromium-request-{i}", r)
    for i, f in enumerate(kept["websocket"]):
        # The reader takes chunks behind 2-byte lengths: one chunk with everything Chromium sent.
        save("websocket", f"chromium-frames-{i}", struct.pack(">H", len(f)) + f)

# Arguments name the parts to capture again (rtp, h264, files, tokens, chromium); none: all.
parts = {"rtp": rtp_and_friends, "h264": h264, "files": sdp_and_files, "tokens": tokens, "chromium": chromium}
for name in sys.argv[1:] or parts:
    parts[name]()
for target in sorted(os.listdir(corpus)):
    print(f"capture-seeds: {target}: {len(os.listdir(os.path.join(corpus, target)))} seeds")
