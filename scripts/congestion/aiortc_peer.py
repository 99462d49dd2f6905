"""One side of an aiortc call for `callend bench congestion`, the reference the bench compares
callend with on the same bottleneck.

  aiortc_peer.py answer --listen HOST:PORT --seconds S
      Waits for the offer on a TCP connection (one JSON line), answers, receives and discards the
      media (receive-only), ends after S seconds.
  aiortc_peer.py offer --connect HOST:PORT --video F.y4m --seconds S
      Sends the Y4M clip (looped, VP8) and a 440 Hz tone (Opus) to the answerer. aiortc adapts
      its VP8 bitrate to the answerer's REMB feedback; it has no mode ladder.

Signaling is one JSON line each way on a plain TCP connection; ICE uses host candidates only.
Prints "connected" when the media flows and "ended" at the end.
"""
import argparse
import asyncio
import fractions
import json
import math
import sys
import time

import av
import numpy
from aiortc import AudioStreamTrack, RTCConfiguration, RTCPeerConnection, RTCSessionDescription, VideoStreamTrack
from aiortc.contrib.media import MediaBlackhole


class ClipTrack(VideoStreamTrack):
    """The Y4M clip's pictures, decoded once and sent in a loop at its frame rate (aiortc's
    MediaPlayer restarts a looped file with a burst and broken timestamps)."""

    def __init__(self, path):
        super().__init__()
        with av.open(path) as container:
            stream = container.streams.video[0]
            self.rate = int(stream.average_rate or 30)
            self.frames = [frame.to_ndarray(format="yuv420p") for frame in container.decode(stream)]
        self.index = 0
        self.start = None

    async def recv(self):
        if self.start is None:
            self.start = time.monotonic()
        due = self.start + self.index / self.rate
        await asyncio.sleep(max(0, due - time.monotonic()))
        frame = av.VideoFrame.from_ndarray(self.frames[self.index % len(self.frames)], format="yuv420p")
        frame.pts = self.index * (90000 // self.rate)
        frame.time_base = fractions.Fraction(1, 90000)
        self.index += 1
        return frame


class ToneTrack(AudioStreamTrack):
    """A 440 Hz tone, 20 ms frames at 48 kHz, mono, paced in real time."""

    def __init__(self):
        super().__init__()
        self.samples = 0
        self.start = None

    async def recv(self):
        if self.start is None:
            self.start = time.monotonic()
        due = self.start + self.samples / 48000
        await asyncio.sleep(max(0, due - time.monotonic()))
        t = (numpy.arange(960) + self.samples) / 48000
        pcm = (numpy.sin(2 * math.pi * 440 * t) * 8000).astype(numpy.int16).reshape(1, -1)
        frame = av.AudioFrame.from_ndarray(pcm, format="s16", layout="mono")
        frame.sample_rate = 48000
        frame.pts = self.samples
        frame.time_base = fractions.Fraction(1, 48000)
        self.samples += 960
        return frame


def host_port(text):
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host, int(port)


async def exchange(writer, description):
    writer.write((json.dumps({"sdp": description.sdp, "type": description.type}) + "\n").encode())
    await writer.drain()


async def read_description(reader):
    line = await reader.readline()
    if not line:
        raise SystemExit("aiortc_peer: the other side closed signaling")
    message = json.loads(line)
    return RTCSessionDescription(sdp=message["sdp"], type=message["type"])


async def wait_connected(pc, seconds):
    done = asyncio.Event()

    @pc.on("connectionstatechange")
    def changed():
        if pc.connectionState in ("connected", "failed", "closed"):
            done.set()

    if pc.connectionState != "connected":
        await asyncio.wait_for(done.wait(), seconds)
    if pc.connectionState != "connected":
        raise SystemExit(f"aiortc_peer: connection {pc.connectionState}")
    print("connected", flush=True)


async def answer(args):
    pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
    sink = MediaBlackhole()

    @pc.on("track")
    def on_track(track):
        sink.addTrack(track)

    accepted = asyncio.get_running_loop().create_future()

    async def serve(reader, writer):
        if accepted.done():
            writer.close()
            return
        offer = await read_description(reader)
        await pc.setRemoteDescription(offer)
        await pc.setLocalDescription(await pc.createAnswer())
        await exchange(writer, pc.localDescription)
        accepted.set_result(True)

    server = await asyncio.start_server(serve, *args.listen)
    print("listening", flush=True)
    await asyncio.wait_for(accepted, 30)
    await sink.start()
    await wait_connected(pc, 15)
    await asyncio.sleep(args.seconds)
    await sink.stop()
    await pc.close()
    server.close()
    print("ended", flush=True)


async def offer(args):
    pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
    pc.addTrack(ClipTrack(args.video))
    pc.addTrack(ToneTrack())
    for _ in range(50):
        try:
            reader, writer = await asyncio.open_connection(*args.connect)
            break
        except OSError:
            await asyncio.sleep(0.1)
    else:
        raise SystemExit(f"aiortc_peer: cannot reach {args.connect}")
    await pc.setLocalDescription(await pc.createOffer())
    await exchange(writer, pc.localDescription)
    await pc.setRemoteDescription(await read_description(reader))
    await wait_connected(pc, 15)
    await asyncio.sleep(args.seconds)
    await pc.close()
    print("ended", flush=True)


def main():
    parser = argparse.ArgumentParser(description="one side of an aiortc call for callend bench congestion")
    sub = parser.add_subparsers(dest="role", required=True)
    a = sub.add_parser("answer")
    a.add_argument("--listen", type=host_port, required=True)
    a.add_argument("--seconds", type=float, required=True)
    o = sub.add_parser("offer")
    o.add_argument("--connect", type=host_port, required=True)
    o.add_argument("--video", required=True)
    o.add_argument("--seconds", type=float, required=True)
    args = parser.parse_args()
    try:
        asyncio.run(answer(args) if args.role == "answer" else offer(args))
    except asyncio.TimeoutError:
        sys.exit("aiortc_peer: timed out waiting for the other side")


if __name__ == "__main__":
    main()
