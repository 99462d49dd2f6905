"""Media tracks for the aiortc peers the tests and benches run against callend: a Y4M clip,
a moving synthetic picture, and a 440 Hz tone, each paced in real time."""
import asyncio
import fractions
import math
import time

import av
import numpy
from aiortc import AudioStreamTrack, VideoStreamTrack


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




class PatternTrack(VideoStreamTrack):
    """A moving gradient, 320x240 at 30 fps (no file needed)."""

    def __init__(self, width=320, height=240, rate=30):
        super().__init__()
        self.width, self.height, self.rate = width, height, rate
        self.index = 0
        self.start = None

    async def recv(self):
        if self.start is None:
            self.start = time.monotonic()
        due = self.start + self.index / self.rate
        await asyncio.sleep(max(0, due - time.monotonic()))
        x = (numpy.arange(self.width) + self.index * 4) % 256
        y = numpy.tile(x.astype(numpy.uint8), (self.height * 3 // 2, 1))
        frame = av.VideoFrame.from_ndarray(y, format="yuv420p")
        frame.pts = self.index * (90000 // self.rate)
        frame.time_base = fractions.Fraction(1, 90000)
        self.index += 1
        return frame


class Tally:
    """What came of a peer's tracks: video frames decoded and their size, audio frames decoded.
    consume(track) counts one track until it ends."""

    def __init__(self):
        self.video = self.audio = 0
        self.size = None

    async def consume(self, track):
        while True:
            try:
                frame = await track.recv()
            except Exception:
                return
            if track.kind == "video":
                self.video += 1
                self.size = f"{frame.width}x{frame.height}"
            else:
                self.audio += 1
