"""N WHEP viewers (aiortc, one process) of one sender: each POSTs a recvonly offer for video and
audio to the WHEP URL, takes the 201's answer, and decodes what comes. Once every viewer has
decoded a picture (and --warmup seconds more), a window of --seconds starts: each viewer's decoded frames and received
bytes are counted over it, and with --pid the CPU the sender's process used in it (user +
system, from /proc/PID/stat). Then every session is DELETEd. Prints one JSON line:
{"viewers": [{"fps", "kbps", "audio", "size"}...], "senderCPU": cores, "window": s}.
Exits 1 when a viewer decoded nothing within --timeout.

  whep_viewers.py URL --count N [--token T] [--seconds S] [--warmup S] [--pid P] [--timeout S]
"""
import argparse
import asyncio
import json
import os
import sys
import time
import urllib.parse
import urllib.request

from aiortc import RTCPeerConnection, RTCSessionDescription
from aiortc.rtcrtpreceiver import RTCRtpReceiver

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "aiortc"))
from tracks import Tally  # noqa: E402

# aiortc's inbound-rtp stats have no byte count: each receiver counts its packets' payloads.
_handle = RTCRtpReceiver._handle_rtp_packet


async def _counting(self, packet, arrival_time_ms):
    self.payload_bytes = getattr(self, "payload_bytes", 0) + len(packet.payload)
    await _handle(self, packet, arrival_time_ms)


RTCRtpReceiver._handle_rtp_packet = _counting

parser = argparse.ArgumentParser()
parser.add_argument("url")
parser.add_argument("--count", type=int, default=1)
parser.add_argument("--token")
parser.add_argument("--seconds", type=float, default=10)
parser.add_argument("--warmup", type=float, default=0, help="seconds between all decoding and the window")
parser.add_argument("--pid", type=int, help="the sender's process: its CPU over the window")
parser.add_argument("--timeout", type=float, default=60)
args = parser.parse_args()
if args.count < 1 or args.seconds <= 0:
    sys.exit("whep_viewers: --count >= 1 and --seconds > 0")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def http(method, url, body=None):
    headers = {"Content-Type": "application/sdp"} if body is not None else {}
    if args.token:
        headers["Authorization"] = f"Bearer {args.token}"
    request = urllib.request.Request(url, data=body, method=method, headers=headers)
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.status, response.headers.get("Location"), response.read().decode()


class Viewer(Tally):
    def __init__(self):
        super().__init__()
        self.pc = RTCPeerConnection()
        self.session = None

    async def start(self, loop):
        self.pc.addTransceiver("video", direction="recvonly")
        self.pc.addTransceiver("audio", direction="recvonly")
        self.pc.on("track", lambda track: asyncio.ensure_future(self.consume(track)))
        await self.pc.setLocalDescription(await self.pc.createOffer())
        status, location, answer = await loop.run_in_executor(None, http, "POST", args.url, self.pc.localDescription.sdp.encode())
        if status != 201:
            raise SystemExit(f"whep_viewers: POST answered {status}")
        self.session = urllib.parse.urljoin(args.url, location)
        await self.pc.setRemoteDescription(RTCSessionDescription(answer, "answer"))

    async def received_bytes(self):
        """The video RTP payload bytes received so far."""
        return sum(getattr(t.receiver, "payload_bytes", 0) for t in self.pc.getTransceivers() if t.kind == "video")


async def main():
    loop = asyncio.get_running_loop()
    viewers = [Viewer() for _ in range(args.count)]
    for viewer in viewers:
        await viewer.start(loop)
    deadline = time.monotonic() + args.timeout
    while any(v.video == 0 for v in viewers):
        if time.monotonic() > deadline:
            print(f"whep_viewers: {sum(v.video == 0 for v in viewers)} of {args.count} viewers decoded nothing in {args.timeout} s", file=sys.stderr)
            return 1
        await asyncio.sleep(0.1)
    print(f"whep_viewers: all {args.count} decoding", file=sys.stderr, flush=True)
    await asyncio.sleep(args.warmup)
    start = time.monotonic()
    frames0 = [v.video for v in viewers]
    bytes0 = [await v.received_bytes() for v in viewers]
    cpu0 = cpu_seconds(args.pid) if args.pid else None
    await asyncio.sleep(args.seconds)
    window = time.monotonic() - start
    cpu1 = cpu_seconds(args.pid) if args.pid else None
    result = {"window": round(window, 2), "viewers": []}
    for viewer, f0, b0 in zip(viewers, frames0, bytes0):
        b1 = await viewer.received_bytes()
        result["viewers"].append({"fps": round((viewer.video - f0) / window, 1), "kbps": round((b1 - b0) * 8 / window / 1000),
                                  "audio": viewer.audio, "size": viewer.size})
    if cpu0 is not None:
        result["senderCPU"] = round((cpu1 - cpu0) / window, 3)
    for viewer in viewers:
        try:
            await loop.run_in_executor(None, http, "DELETE", viewer.session)
        except Exception as error:
            print(f"whep_viewers: DELETE: {error}", file=sys.stderr)
        await viewer.pc.close()
    print(json.dumps(result), flush=True)
    return 0


sys.exit(asyncio.run(main()))
