import Codecs
import MediaCore
import Devices
import Dispatch
import FoundationEssentials
import Glibc
import Platform
import Synchronization

/// A thread that runs `step` until stopped, once per block (10 ms) at most (a PCM without a clock, such
/// as alsa-lib's file plugin over the null device, would otherwise run flat out).
final class AudioThread: Sendable {
    private let stopping = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)

    init(name: String, step: @escaping @Sendable () -> Void) {
        startThread(named: name) { [self] in
            // A thread that fell behind (a busy machine) catches up at once, up to a second (100
            // blocks of 10 ms; it was 50 of 20 ms): a real card's reads and writes block on their
            // own, and a capture that skipped periods would overrun its buffer and lose audio
            // (which also throws the echo canceller off).
            var pacer = RealTimePacer(period: AudioBlock.period, maximumLag: 100)
            while !stopping.load(ordering: .relaxed) {
                pacer.waitForNext()
                step()
            }
            finished.signal()
        }
    }

    func stop() {
        guard !stopping.exchange(true, ordering: .relaxed) else { return }
        finished.wait()
    }
}

/// Stereo audio waiting for the sound card, taken at the card's own pace. The card's clock and
/// the sender's never run at quite the same rate (a few hundred ppm apart is common), so instead
/// of dropping audio when the queue grows or playing silence when it runs dry, the queue plays
/// slightly faster or slower through a resampler (libspeexdsp), steering its fill towards
/// `target`. Only a jump the resampler cannot absorb (more than `limit`, after an outage) drops
/// the oldest audio, and only a real gap in what arrives plays silence.
struct PlayoutQueue {
    private(set) var samples: [Int16] = []
    /// Fill the queue steers towards (frames): three 10 ms blocks absorb the jitter between the
    /// call's playout thread, which hands blocks over, and the card's thread, which takes them.
    static let target = AudioBlock.frames * 3
    /// Past this (frames, 250 ms) the oldest audio goes at once, down to the target.
    static let limit = AudioBlock.frames * 25
    /// How far from 1 the playout rate may go: 0.5 % (5000 ppm) is far beyond any sound card's
    /// drift, and inaudible.
    static let maxCorrection = 0.005
    private let resampler: AudioResampler?
    /// Smoothed fill in frames (about 0.4 s of memory), which the rate follows.
    private(set) var level = Double(PlayoutQueue.target)
    private var started = false
    /// Frames dropped at `limit`, and frames of silence played because nothing had arrived
    /// (after playout started).
    private(set) var droppedFrames = 0
    private(set) var silentFrames = 0

    init() { resampler = try? AudioResampler(channels: 2) }

    var ratio: Double { resampler?.ratio ?? 1 }
    var frames: Int { samples.count / 2 }

    mutating func append(_ block: [Int16]) {
        samples += block
        if frames > Self.limit {
            let excess = frames - Self.target
            samples.removeFirst(excess * 2)
            droppedFrames += excess
            level = Double(Self.target)
        }
    }

    /// One block for the card.
    mutating func next() -> [Int16] {
        let count = AudioBlock.frames
        let silence = [Int16](repeating: 0, count: count * 2)
        if !started {
            // Fill to the target before playing, so the first late packet is not a gap.
            guard frames >= Self.target else { return silence }
            started = true
            level = Double(frames)
        }
        level += (Double(frames) - level) / 20
        guard let resampler else {
            guard frames >= count else { return underrun(silence) }
            defer { samples.removeFirst(count * 2) }
            return Array(samples.prefix(count * 2))
        }
        let error = (level - Double(Self.target)) / Double(Self.target)
        resampler.setRatio(1 + min(Self.maxCorrection, max(-Self.maxCorrection, error * 0.01)))
        let (output, consumed) = resampler.process(samples[...], frames: count)
        samples.removeFirst(consumed * 2)
        guard output.count == count * 2 else { return underrun(output + silence.prefix(count * 2 - output.count)) }
        return output
    }

    /// Nothing (or not enough) to play: silence, and fill up to the target again.
    private mutating func underrun(_ block: [Int16]) -> [Int16] {
        silentFrames += AudioBlock.frames
        started = false
        return block
    }
}

/// How many blocks of silence go ahead of the audio when a playback stream (re)starts: the cushion
/// a stall of the playout thread may eat before the card runs dry. One block (10 ms) on a machine
/// that keeps up; each underrun adds a block, up to what the card's buffer holds less one, so a
/// board (or an emulated VM) that stalls for 30 ms settles at a cushion that rides over it instead
/// of underrunning, and restarting the echo canceller, every few blocks. A minute without an
/// underrun gives a block back.
struct PlaybackCushion: Sendable {
    /// The most the cushion may grow to (blocks).
    let maximum: Int
    private(set) var blocks = 1
    /// Blocks written since the last underrun or shrink.
    private var quiet = 0
    static let shrinkAfter = 6_000  // blocks: a minute of 10 ms blocks

    init(bufferBlocks: Int) { maximum = max(1, bufferBlocks - 1) }

    /// The card ran dry: restart with a deeper cushion.
    mutating func underran() {
        blocks = min(maximum, blocks + 1)
        quiet = 0
    }

    /// A block went to the card without an underrun.
    mutating func wrote() {
        quiet += 1
        guard quiet >= Self.shrinkAfter, blocks > 1 else { return }
        blocks -= 1
        quiet = 0
    }
}
