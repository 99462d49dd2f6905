import Platform
import MediaCore
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

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

    public init(path: String, paced: Bool = true, loop: Bool = false) throws(MediaError) {
        self.path = path
        self.paced = paced
        self.loop = loop
        reader = try Y4MReader(path: path)
        pacer = RealTimePacer(period: .seconds(1 / reader.frameRate))
    }

    /// The next frame, or nil at the end of a file that does not loop.
    public func nextFrame() throws(MediaError) -> VideoFrame? {
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

    public init(path: String, paced: Bool = true) throws(MediaError) {
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

