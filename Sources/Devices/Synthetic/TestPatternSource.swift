import Platform
import MediaCore

/// A moving test picture: colour bars that scroll, a bright box that crosses the frame, and the
/// frame number written as 16 black/white blocks along the top edge so a receiver can read it
/// back from the decoded picture (`frameNumber(in:)`), even after lossy coding and after the
/// sender scaled the picture down for a lower mode (a fourth block row, alternating, tells the
/// reader the scale).
public struct TestPatternSource: Sendable {
    public let width: Int
    public let height: Int
    public let frameRate: Int
    public private(set) var frameNumber = 0

    static let markBits = 16
    static let markSize = 16

    public init(width: Int, height: Int, frameRate: Int) {
        self.width = width
        self.height = height
        self.frameRate = frameRate
    }

    /// The next picture, stamped with `captureTime` (monotonic clock) for latency measurement.
    public mutating func nextFrame(captureTime: Duration) -> VideoFrame {
        var frame = nextFrame()
        frame.timestamp = captureTime
        Self.stampCaptureTime(captureTime, into: &frame)
        return frame
    }

    /// Writes the marks a receiver reads back into any picture: its capture time (block rows 1
    /// and 2), and with `number` the frame number (row 0) and the sync row. A clip's pictures
    /// get them this way, so that latency is measured on the same content another stack sends.
    public static func stamp(_ frame: inout VideoFrame, number: Int, captureTime: Duration) {
        writeBits(number & 0xffff, row: 0, into: &frame)
        writeBits(syncBits, row: syncRow, into: &frame)
        stampCaptureTime(captureTime, into: &frame)
    }

    static func stampCaptureTime(_ captureTime: Duration, into frame: inout VideoFrame) {
        let millis = UInt32(truncatingIfNeeded: captureTime.inMilliseconds)
        writeBits(Int(millis >> 16), row: 1, into: &frame)
        writeBits(Int(millis & 0xffff), row: 2, into: &frame)
    }

    /// The capture time stamped into a (decoded) picture, in milliseconds modulo 2^32.
    public static func captureTime(in frame: VideoFrame) -> Duration? {
        guard let scale = markScale(in: frame), let high = readBits(row: 1, from: frame, scale: scale),
              let low = readBits(row: 2, from: frame, scale: scale) else { return nil }
        return .milliseconds(Int64(high) << 16 | Int64(low))
    }

    /// How long ago (on this machine's monotonic clock) a picture stamped here was captured; nil
    /// for a picture without a readable stamp or one over 10 s old (a misread, or another machine).
    public static func captureAge(of frame: VideoFrame, now: Duration = MonotonicClock.now) -> Duration? {
        guard let stamp = captureTime(in: frame) else { return nil }
        let nowMs = (now.inMilliseconds) & 0xffff_ffff
        let stampMs = stamp.inMilliseconds
        let age = (nowMs - stampMs + (1 << 32)) % (1 << 32)
        return age < 10_000 ? .milliseconds(age) : nil
    }

    public mutating func nextFrame() -> VideoFrame {
        let n = frameNumber
        frameNumber += 1
        var frame = VideoFrame(width: width, height: height, timestamp: .microseconds(Int64(n) * 1_000_000 / Int64(frameRate)))
        let shift = n * 4
        frame.withMutablePlanes { y, u, v in
            for row in 0..<height {
                for col in 0..<width {
                    y[row * width + col] = UInt8(truncatingIfNeeded: 16 + ((col + shift) % width) * 200 / width + (row % 64 < 2 ? 30 : 0))
                }
            }
            let cw = VideoFrame.chromaWidth(width), ch = VideoFrame.chromaHeight(height)
            for row in 0..<ch {
                for col in 0..<cw {
                    let bar = ((col * 2 + shift) / max(1, width / 8)) % 8
                    u[row * cw + col] = UInt8(64 + bar * 20)
                    v[row * cw + col] = UInt8(200 - bar * 18 - row % 16)
                }
            }
            // The moving box.
            let boxSize = max(8, height / 6)
            let boxX = (n * 7) % max(1, width - boxSize), boxY = height / 2 - boxSize / 2
            for row in boxY..<min(height, boxY + boxSize) {
                for col in boxX..<min(width, boxX + boxSize) { y[row * width + col] = 235 }
            }
        }
        // The frame number, one block per bit, most significant first; and the sync row.
        Self.writeBits(n & 0xffff, row: 0, into: &frame)
        Self.writeBits(Self.syncBits, row: Self.syncRow, into: &frame)
        return frame
    }

    /// Writes 16 bits as black/white blocks in block row `row` (most significant bit first).
    static func writeBits(_ value: Int, row: Int, into frame: inout VideoFrame) {
        guard frame.width >= markBits * markSize, frame.height >= (row + 1) * markSize else { return }
        for bit in 0..<markBits {
            let level: UInt8 = (value >> (markBits - 1 - bit)) & 1 == 1 ? 235 : 16
            for y in (row * markSize)..<((row + 1) * markSize) {
                for x in (bit * markSize)..<((bit + 1) * markSize) { frame.y[y * frame.strideY + x] = level }
            }
        }
    }

    /// Block row 3 alternates white and black: found at a scale, it says the marks are there and
    /// how the picture was scaled (the sender's ladder scales 640x480 to 480x360, 1280x720 to
    /// 640x480, and so on: the two directions need not match).
    static let syncRow = 3
    static let syncBits = 0xAAAA
    static let scales: [Double] = [1, 0.75, 2.0 / 3, 0.5, 0.375, 1.0 / 3, 0.25]

    /// The horizontal and vertical scale at which the sync row reads back, if any.
    static func markScale(in frame: VideoFrame) -> (x: Double, y: Double)? {
        for y in scales {
            for x in scales where readBits(row: syncRow, from: frame, scale: (x, y)) == syncBits { return (x, y) }
        }
        return nil
    }

    /// Reads block row `row` of marks written before the picture was scaled by `scale`: each
    /// block sampled at two points along its centre line, away from coding artefacts at its
    /// edges; nil unless both are clearly black or clearly white and agree.
    static func readBits(row: Int, from frame: VideoFrame, scale: (x: Double, y: Double)) -> Int? {
        let y = Int((Double(row * markSize) + Double(markSize) / 2) * scale.y)
        guard Double(markBits * markSize) * scale.x <= Double(frame.width), y < frame.height else { return nil }
        func level(_ at: Int) -> Int? {
            let sample = frame.y[y * frame.strideY + Int(Double(at) * scale.x)]
            return sample < 100 ? 0 : sample > 150 ? 1 : nil
        }
        var value = 0
        for bit in 0..<markBits {
            guard let a = level(bit * markSize + 5), let b = level(bit * markSize + 11), a == b else { return nil }
            value = value << 1 | a
        }
        return value
    }

    /// Reads back the frame number written into a (decoded) picture, modulo 65536.
    public static func frameNumber(in frame: VideoFrame) -> Int? {
        markScale(in: frame).flatMap { readBits(row: 0, from: frame, scale: $0) }
    }
}

/// A sine tone at 48 kHz, mono or stereo, in frames of a fixed duration.
public struct ToneSource: Sendable {
    public let frequency: Double
    public let amplitude: Double
    public let channels: Int
    private var sampleIndex = 0

    public init(frequency: Double = 440, amplitude: Double = 0.3, channels: Int = 1) {
        self.frequency = frequency
        self.amplitude = amplitude
        self.channels = channels
    }

    public mutating func next(samplesPerChannel: Int) -> [Int16] {
        var out: [Int16] = []
        out.reserveCapacity(samplesPerChannel * channels)
        for i in 0..<samplesPerChannel {
            let t = Double(sampleIndex + i) / Double(AudioFrame.sampleRate)
            let sample = Int16(amplitude * 32767 * sin(2 * Double.pi * frequency * t))
            for _ in 0..<channels { out.append(sample) }
        }
        sampleIndex += samplesPerChannel
        return out
    }
}

#if canImport(Glibc)
import Glibc
#endif
