import Codecs
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Releases items at their due time on the monotonic clock: the n-th item at start + n × period.
/// A consumer a little behind gets the next item at once. One more than `maximumLag` periods
/// behind (the machine was busy, the thread was not scheduled) skips the periods it missed and
/// goes on from now, as a camera or a sound card drops what nobody took in time: catching up in
/// a burst would only hand the encoder stale pictures and the network a burst of old audio,
/// and on a machine that stays busy it never ends.
public struct RealTimePacer: Sendable {
    public let period: Duration
    public let maximumLag: Int
    private var start: ContinuousClock.Instant?
    private var index: Int64 = 0
    /// Periods skipped so far because the caller fell behind.
    public private(set) var skipped: Int64 = 0

    public init(period: Duration, maximumLag: Int = 2) {
        self.period = period
        self.maximumLag = maximumLag
    }

    /// Sleeps until the next period is due (the first call returns at once).
    public mutating func waitForNext() {
        let wait = delay(now: ContinuousClock.now)
        if wait > .zero { Thread.sleep(forTimeInterval: wait.inSeconds) }
    }

    /// How long to wait at `now` for the next period, which is then counted as taken.
    public mutating func delay(now: ContinuousClock.Instant) -> Duration {
        let origin = start ?? now
        if start == nil { start = now }
        var due = origin + period * Int(index)
        if now - due > period * maximumLag {
            let behind = Int64((now - due) / period)
            skipped += behind
            index += behind
            due = origin + period * Int(index)
        }
        index += 1
        return due > now ? due - now : .zero
    }
}


/// Frames of a Y4M file (ffmpeg's headers accepted), paced at the file's frame rate unless
/// `paced` is false, optionally looping. Each frame's timestamp is its capture time on the
/// monotonic clock when paced, or its position in the file when not.
public final class Y4MFileSource {
    public let path: String
    public let paced: Bool
    public let loop: Bool
    private var reader: Y4MReader
    private var pacer: RealTimePacer
    public var width: Int { reader.width }
    public var height: Int { reader.height }
    public var frameRate: Double { reader.frameRate }

    public init(path: String, paced: Bool = true, loop: Bool = false) throws(CodecError) {
        self.path = path
        self.paced = paced
        self.loop = loop
        reader = try Y4MReader(path: path)
        pacer = RealTimePacer(period: .seconds(1 / reader.frameRate))
    }

    /// The next frame, or nil at the end of a file that does not loop.
    public func nextFrame() throws(CodecError) -> VideoFrame? {
        var frame = try reader.readFrame()
        if frame == nil, loop {
            reader = try Y4MReader(path: path)
            frame = try reader.readFrame()
        }
        guard var frame else { return nil }
        if paced {
            pacer.waitForNext()
            frame.timestamp = MonotonicClock.now
        }
        return frame
    }
}

/// 16-bit PCM from a WAV file in frames of a fixed size, paced in real time unless told otherwise.
public final class WAVFileSource {
    public let path: String
    public let paced: Bool
    private let reader: WAVReader
    public var channels: Int { reader.channels }
    public var sampleRate: Int { reader.sampleRate }
    private var pacer: RealTimePacer?

    public init(path: String, paced: Bool = true) throws(CodecError) {
        self.path = path
        self.paced = paced
        reader = try WAVReader(path: path)
    }

    /// The next `samplesPerChannel` frames (padded with silence at the end), or nil after the end.
    public func next(samplesPerChannel: Int) -> [Int16]? {
        guard let chunk = reader.read(samplesPerChannel: samplesPerChannel) else { return nil }
        if paced {
            if pacer == nil { pacer = RealTimePacer(period: .seconds(Double(samplesPerChannel) / Double(reader.sampleRate))) }
            pacer?.waitForNext()
        }
        return chunk + [Int16](repeating: 0, count: samplesPerChannel * channels - chunk.count)
    }
}

/// CLOCK_MONOTONIC as a Duration: the clock V4L2 drivers stamp frames with, so synthetic, file
/// and camera frames carry comparable capture times.
public enum MonotonicClock {
    public static var now: Duration {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return .seconds(ts.tv_sec) + .nanoseconds(ts.tv_nsec)
    }
}
