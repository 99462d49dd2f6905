"""An aiortc participant in callend's signaling protocol (docs/signaling.md): joins a room on a
`callend serve` with a token, offers when it joins second (or answers an offer), trickles and
takes candidates, sends a moving picture (VP8) and a 440 Hz tone (Opus), and counts what it
decodes of the peer's video and audio. Proves callend's SDP, ICE and DTLS-SRTP are standard.

  participant.py --server HOST:PORT --room R --token T --seconds S

Prints one JSON line at the end: {"videoFrames": N, "audioFrames": N, "videoSize": "WxH",
"videoFramesSent": N, "connection": STATE}; exits 0 when both kinds were decoded.

With --data-label L it opens a data channel of that label too (--data-unreliable: unordered, no
retransmissions), takes the peer's of that label, sends --data-send small and --data-big big
lines of scripts/datachannel/lines.py on its own channel once open, and adds "data" to the JSON
line: what came from the peer (--data-peer) and the options of the peer's channel.
"""
import argparse
import asyncio
import json
import os
import sys

from aiortc import RTCConfiguration, RTCPeerConnection, RTCSessionDescription
from aiortc.sdp import candidate_from_sdp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tracks import PatternTrack, Tally, ToneTrack  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "datachannel"))
import lines  # noqa: E402


class Signaling:
    def __init__(self, reader, writer):
        self.reader, self.writer, self.next_id = reader, writer, 0

    async def send(self, message):
        self.writer.write((json.dumps(message) + "\n").encode())
        await self.writer.drain()

    async def relay(self, kind, to, payload):
        self.next_id += 1
        await self.send({"type": kind, "id": f"aiortc-{self.next_id}", "to": to, "payload": payload})

    async def receive(self):
        line = await self.reader.readline()
        if not line:
            raise SystemExit("participant: the service closed the connection")
        return json.loads(line)


async def run(args):
    host, _, port = args.server.rpartition(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    signaling = Signaling(reader, writer)
    pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
    pattern = PatternTrack()
    pc.addTrack(pattern)
    pc.addTrack(ToneTrack())
    media = Tally()

    @pc.on("track")
    def on_track(track):
        asyncio.ensure_future(media.consume(track))

    tally = lines.Tally(args.data_peer) if args.data_label else None
    data_seen = [0, 0.0]  # what had come, and when that last changed
    peer_channel = {}

    def take(channel):
        @channel.on("message")
        def on_message(message):
            tally.take(message if isinstance(message, str) else message.decode())

    if args.data_label:
        unreliable = {"ordered": False, "maxRetransmits": 0} if args.data_unreliable else {}
        mine = pc.createDataChannel(args.data_label, **unreliable)
        take(mine)

        @mine.on("open")
        def on_open():
            for i in range(args.data_send):
                mine.send(lines.small("aiortc", i))
            for i in range(args.data_big):
                mine.send(lines.big(i))

        @pc.on("datachannel")
        def on_datachannel(channel):
            if channel.label == args.data_label:
                peer_channel.update(ordered=channel.ordered, maxRetransmits=channel.maxRetransmits, id=channel.id)
                take(channel)

    await signaling.send({"type": "join", "room": args.room, "token": args.token})
    peer = None
    deadline = asyncio.get_running_loop().time() + args.seconds + 30
    connected_at = None
    while True:
        now = asyncio.get_running_loop().time()
        came = tally and (tally.small + tally.out_of_order if args.data_unreliable else tally.small)
        if tally and tally.small + tally.out_of_order + tally.big != data_seen[0]:
            data_seen[:] = [tally.small + tally.out_of_order + tally.big, now]
        idle = bool(args.data_idle and data_seen[0] and now - data_seen[1] > args.data_idle)
        # Leaving closes the association: not before the peer has all of ours (--data-done-file).
        done_data = tally is None or ((came >= args.data_expect and tally.big >= args.data_expect_big or idle)
                                      and (not args.data_done_file or os.path.exists(args.data_done_file)))
        if connected_at is not None and now >= connected_at + args.seconds and done_data or now >= deadline:
            break
        try:
            message = await asyncio.wait_for(signaling.receive(), 0.5)
        except asyncio.TimeoutError:
            if pc.connectionState == "connected" and connected_at is None:
                connected_at = now
            continue
        kind = message.get("type")
        if kind == "joined":
            print(f"participant: joined room {args.room}", file=sys.stderr, flush=True)
        if kind == "joined" and message.get("peers"):
            peer = message["peers"][0]
            await pc.setLocalDescription(await pc.createOffer())
            # aiortc gathers before it describes: its candidates are in the SDP.
            await signaling.relay("offer", peer, {"type": "offer", "sdp": pc.localDescription.sdp})
        elif kind == "offer":
            peer = message["from"]
            await pc.setRemoteDescription(RTCSessionDescription(sdp=message["payload"]["sdp"], type="offer"))
            await pc.setLocalDescription(await pc.createAnswer())
            await signaling.relay("answer", peer, {"type": "answer", "sdp": pc.localDescription.sdp})
        elif kind == "answer":
            await pc.setRemoteDescription(RTCSessionDescription(sdp=message["payload"]["sdp"], type="answer"))
        elif kind == "candidate":
            line = message["payload"].get("candidate", "")
            if line:
                candidate = candidate_from_sdp(line.split(":", 1)[1])
                candidate.sdpMid = message["payload"].get("sdpMid")
                candidate.sdpMLineIndex = message["payload"].get("sdpMLineIndex")
                await pc.addIceCandidate(candidate)
        elif kind == "error":
            print(f"participant: service error {message}", file=sys.stderr)
        if pc.connectionState == "connected" and connected_at is None:
            connected_at = asyncio.get_running_loop().time()
    state = pc.connectionState
    if peer:
        await signaling.relay("bye", peer, {})
    await pc.close()
    writer.close()
    counts = {"videoFrames": media.video, "audioFrames": media.audio, "videoSize": media.size,
              "connection": state, "videoFramesSent": pattern.index}
    if tally:
        counts["data"] = dict(tally.report(), bigOk=tally.report()["bigSha256"] == lines.big_digest(args.data_expect_big), peerChannel=peer_channel)
    print(json.dumps(counts), flush=True)
    return counts["videoFrames"] > 0 and counts["audioFrames"] > 0


def main():
    parser = argparse.ArgumentParser(description="an aiortc participant in callend's signaling protocol")
    parser.add_argument("--server", required=True)
    parser.add_argument("--room", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--data-label")
    parser.add_argument("--data-unreliable", action="store_true")
    parser.add_argument("--data-peer", default="callend")
    parser.add_argument("--data-send", type=int, default=0)
    parser.add_argument("--data-big", type=int, default=0)
    parser.add_argument("--data-expect", type=int, default=0)
    parser.add_argument("--data-expect-big", type=int, default=0)
    parser.add_argument("--data-idle", type=float, help="count the data as done once nothing came for this long after something did")
    parser.add_argument("--data-done-file", help="stay until this file exists (the peer has all this side sent)")
    args = parser.parse_args()
    sys.exit(0 if asyncio.run(run(args)) else 1)


if __name__ == "__main__":
    main()
