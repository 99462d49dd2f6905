"""One side of an aiortc call for `callend bench congestion`, the reference the bench compares
callend with on the same bottleneck.

  aiortc_peer.py answer --listen HOST:PORT --seconds S [--video F.y4m]
      Waits for the offer on a TCP connection (one JSON line), answers, receives and discards the
      media, ends after S seconds. With --video it sends the clip and a tone back (congestion
      both ways); without, it only receives.
  aiortc_peer.py offer --connect HOST:PORT --video F.y4m --seconds S
      Sends the Y4M clip (looped, VP8) and a 440 Hz tone (Opus) to the answerer. aiortc adapts
      its VP8 bitrate to the answerer's REMB feedback; it has no mode ladder.

Signaling is one JSON line each way on a plain TCP connection; ICE uses host candidates only.
Prints "connected" when the media flows and "ended" at the end.
"""
import argparse
import asyncio
import json
import os
import sys

from aiortc import RTCConfiguration, RTCPeerConnection, RTCSessionDescription
from aiortc.contrib.media import MediaBlackhole

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "aiortc"))
from tracks import ClipTrack, ToneTrack  # noqa: E402


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
        if args.video:
            # The offer's transceivers take these tracks: the answer becomes send-and-receive.
            pc.addTrack(ClipTrack(args.video))
            pc.addTrack(ToneTrack())
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
    a.add_argument("--video", help="a Y4M clip to send back (default: receive only)")
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
