"""A WHIP server (RFC 9725) on aiortc, for testing `callend publish` against another stack.

  aiortc_whip_server.py --listen HOST:PORT --token T --record FILE.webm [--tls-cert C --tls-key K] [--no-transport-cc]

POST /whip/live takes an SDP offer (Bearer T, application/sdp) and answers 201 with the answer
(aiortc gathers before answering: no trickle), a Location under /whip/session/, an ETag and a Link
ICE server. The media it receives is recorded to FILE (VP8 and Opus in WebM, re-encoded by PyAV).
PATCH of a session answers 405 (no trickle, no restart: RFC 9725 allows that). DELETE ends the
session, closes the recording and prints "whip-server: DELETE <id>". For the client's error
paths, POST /status/NNN answers NNN (429 and 503 with Retry-After: 7), POST /redirect answers 307
to /whip/live, POST /wrong-type answers 201 with text/plain, /bad-sdp with an SDP that is no
answer, /no-ice with a real answer from a peer closed at once (each one's DELETE is logged).

Prints "listening on HOST:PORT" when ready and one JSON line per ended session:
{"session": ID, "videoFrames": N, "audioFrames": N, "deleted": true}.
"""
import argparse
import asyncio
import json
import ssl
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from aiortc import RTCPeerConnection, RTCSessionDescription
from aiortc.contrib.media import MediaRecorder

loop = asyncio.new_event_loop()
sessions = {}
args = None


def log(line):
    print(line, flush=True)


class Session:
    def __init__(self, record):
        self.id = uuid.uuid4().hex[:12]
        self.pc = RTCPeerConnection()
        self.recorder = MediaRecorder(record)
        self.counts = {"videoFrames": 0, "audioFrames": 0}
        self.etag = '"' + uuid.uuid4().hex[:8] + '"'

        @self.pc.on("track")
        def on_track(track):
            self.recorder.addTrack(CountingTrack(track, self.counts))

    async def answer(self, offer):
        await self.pc.setRemoteDescription(RTCSessionDescription(sdp=offer, type="offer"))
        await self.pc.setLocalDescription(await self.pc.createAnswer())
        await self.recorder.start()
        sdp = self.pc.localDescription.sdp
        if args.no_transport_cc:
            # A server that sends reception reports only: no transport-wide feedback negotiated.
            sdp = "".join(l for l in sdp.splitlines(keepends=True) if "transport-cc" not in l and "transport-wide-cc" not in l)
        return sdp

    async def close(self):
        await self.recorder.stop()
        await self.pc.close()


class CountingTrack:
    """Passes a received track to the recorder, counting the frames it decoded."""

    def __init__(self, track, counts):
        self.track, self.counts, self.kind = track, counts, track.kind
        self.id = track.id

    async def recv(self):
        frame = await self.track.recv()
        self.counts["videoFrames" if self.kind == "video" else "audioFrames"] += 1
        return frame

    def on(self, *a, **k):
        return self.track.on(*a, **k)


def run(coroutine):
    return asyncio.run_coroutine_threadsafe(coroutine, loop).result(30)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def reply(self, status, body=b"", headers=()):
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def body(self):
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def authorized(self):
        if self.headers.get("Authorization") != f"Bearer {args.token}":
            self.reply(401, b"a bearer token is needed\n", [("Content-Type", "text/plain"), ("WWW-Authenticate", "Bearer")])
            return False
        return True

    def do_POST(self):
        offer = self.body()
        if self.path.startswith("/status/"):
            status = int(self.path.split("/")[2])
            headers = [("Content-Type", "text/plain")] + ([("Retry-After", "7")] if status in (429, 503) else [])
            return self.reply(status, f"status {status} as asked\n".encode(), headers)
        if self.path == "/redirect":
            return self.reply(307, headers=[("Location", "/whip/live")])
        if self.path == "/bad-sdp":
            if not self.authorized():
                return
            log("whip-server: POST bad-sdp")
            return self.reply(201, b"v=0\r\nthis is no answer\r\n", [("Content-Type", "application/sdp"), ("Location", "/whip/session/bad-sdp")])
        if self.path not in ("/whip/live", "/wrong-type", "/no-ice"):
            return self.reply(404, b"no such endpoint\n", [("Content-Type", "text/plain")])
        if not self.authorized():
            return
        if not (self.headers.get("Content-Type") or "").startswith("application/sdp"):
            return self.reply(415, b"application/sdp only\n", [("Content-Type", "text/plain")])
        if self.path == "/wrong-type":
            return self.reply(201, b"not sdp\n", [("Content-Type", "text/plain"), ("Location", "/whip/session/wrong-type")])
        session = Session(args.record)
        try:
            answer = run(session.answer(offer.decode()))
        except Exception as error:  # an offer aiortc cannot use
            run(session.close())
            return self.reply(422, f"{error}\n".encode(), [("Content-Type", "text/plain")])
        if self.path == "/no-ice":
            # An answer from a peer that is gone at once: no ICE check is ever answered.
            run(session.close())
            log("whip-server: POST no-ice")
            return self.reply(201, answer.encode(), [("Content-Type", "application/sdp"), ("Location", "/whip/session/no-ice")])
        sessions[session.id] = session
        log(f"whip-server: POST {session.id}")
        self.reply(201, answer.encode(), [
            ("Content-Type", "application/sdp"),
            ("Location", f"/whip/session/{session.id}"),
            ("ETag", session.etag),
            ("Link", '<stun:127.0.0.1:3478>; rel="ice-server"'),
        ])

    def do_PATCH(self):
        self.body()
        if not self.authorized():
            return
        if self.path.removeprefix("/whip/session/") not in sessions:
            return self.reply(404, b"no such session\n", [("Content-Type", "text/plain")])
        log(f"whip-server: PATCH {self.path} (refused: 405)")
        self.reply(405, b"no trickle, no restart\n", [("Content-Type", "text/plain"), ("Allow", "POST, DELETE")])

    def do_DELETE(self):
        if not self.authorized():
            return
        id = self.path.removeprefix("/whip/session/")
        if id in ("wrong-type", "bad-sdp", "no-ice"):
            log(f"whip-server: DELETE of the session /{id} made")
            return self.reply(200)
        session = sessions.pop(id, None)
        if session is None:
            return self.reply(404, b"no such session\n", [("Content-Type", "text/plain")])
        run(session.close())
        log(f"whip-server: DELETE {id}")
        log(json.dumps({"session": id, **session.counts, "deleted": True}))
        self.reply(200)


def main():
    global args
    parser = argparse.ArgumentParser()
    parser.add_argument("--listen", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--record", required=True)
    parser.add_argument("--tls-cert")
    parser.add_argument("--tls-key")
    parser.add_argument("--no-transport-cc", action="store_true", help="answer without transport-cc (feedback by RTCP reports only)")
    args = parser.parse_args()
    host, _, port = args.listen.rpartition(":")
    server = ThreadingHTTPServer((host, int(port)), Handler)
    if args.tls_cert:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.tls_cert, args.tls_key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=loop.run_forever, daemon=True).start()
    log(f"listening on {host}:{server.server_address[1]}")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    for session in list(sessions.values()):
        run(session.close())


if __name__ == "__main__":
    sys.exit(main())
