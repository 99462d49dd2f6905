"""An aiortc sender serving WHEP viewers: POST /whep takes an offer and answers it (201, the
session at Location), DELETE /whep/ID ends that session. One Y4M clip (looped) and one tone are
relayed to every viewer (aiortc.contrib.media.MediaRelay), and aiortc encodes them once per
viewer: the reference the fan-out bench sets callend beside. VP8 is held at --bitrate (aiortc's
own range is 250 kbit/s ... 1.5 Mbit/s, moved by REMB). Prints "listening on PORT" when ready.

  aiortc_sender.py --clip F.y4m [--port P] [--bitrate B]
"""
import argparse
import asyncio
import http.server
import os
import sys
import threading
import uuid

import aiortc.codecs.vpx as vpx
from aiortc import RTCPeerConnection, RTCSessionDescription
from aiortc.contrib.media import MediaRelay

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "aiortc"))
from tracks import ClipTrack, ToneTrack  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--clip", required=True)
parser.add_argument("--port", type=int, default=0)
parser.add_argument("--bitrate", type=int, default=1_000_000)
args = parser.parse_args()
vpx.DEFAULT_BITRATE = vpx.MIN_BITRATE = vpx.MAX_BITRATE = args.bitrate

loop = asyncio.new_event_loop()
relay = MediaRelay()
video, audio = ClipTrack(args.clip), ToneTrack()
sessions = {}


async def answer(offer):
    pc = RTCPeerConnection()
    await pc.setRemoteDescription(RTCSessionDescription(offer, "offer"))
    pc.addTrack(relay.subscribe(video))
    pc.addTrack(relay.subscribe(audio))
    await pc.setLocalDescription(await pc.createAnswer())
    session = uuid.uuid4().hex
    sessions[session] = pc
    return session, pc.localDescription.sdp


async def close(session):
    pc = sessions.pop(session, None)
    if pc:
        await pc.close()
    return pc is not None


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *_):
        pass

    def do_POST(self):
        if self.path != "/whep":
            return self.send_error(404)
        offer = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
        session, sdp = asyncio.run_coroutine_threadsafe(answer(offer), loop).result(30)
        body = sdp.encode()
        self.send_response(201)
        self.send_header("Content-Type", "application/sdp")
        self.send_header("Location", f"/whep/{session}")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_DELETE(self):
        found = asyncio.run_coroutine_threadsafe(close(self.path.rsplit("/", 1)[-1]), loop).result(30)
        self.send_response(200 if found else 404)
        self.send_header("Content-Length", "0")
        self.end_headers()


server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
threading.Thread(target=server.serve_forever, daemon=True).start()
print(f"listening on {server.server_address[1]}", flush=True)
try:
    loop.run_forever()
except KeyboardInterrupt:
    pass
