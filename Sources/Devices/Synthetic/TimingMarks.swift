import MediaCore
import FoundationEssentials
import Glibc
import Platform

/// Capture-time stamps a receiver can read back from decoded media, for glass-to-glass latency.
///
/// Video: `TestPatternSource` writes the capture time (milliseconds of the monotonic clock, 32
/// bits) as two rows of 16 black/white blocks under its frame counter. Audio: `MarkedToneSource`
/// adds a 10 ms 3 kHz burst to its 440 Hz tone each time the capture clock passes a whole second;
/// `TimingMarks.detectMarks` finds the bursts again after coding, so latency = arrival − the
/// whole second before it (valid below one second, on one machine's clock).
public enum TimingMarks {
    public static let markFrequency = 3_000.0
    public static let markDuration = Duration.milliseconds(10)

    /// Onsets of 3 kHz bursts in mono samples, as offsets from the first sample. A Goertzel filter
    /// over 2.5 ms windows; an onset is a window whose 3 kHz energy rises above `threshold` of the
    /// window's total after a quiet one.
    public static func detectMarks(_ samples: [Int16], sampleRate: Int = AudioFrame.sampleRate, threshold: Double = 0.5) -> [Duration] {
        let window = sampleRate / 400
        let coefficient = 2 * cos(2 * Double.pi * markFrequency / Double(sampleRate))
        var onsets: [Duration] = []
        var wasMark = false
        var start = 0
        while start + window <= samples.count {
            var s1 = 0.0, s2 = 0.0, total = 0.0
            for i in start..<(start + window) {
                let x = Double(samples[i])
                let s0 = x + coefficient * s1 - s2
                s2 = s1
                s1 = s0
                total += x * x
            }
            let power = s1 * s1 + s2 * s2 - coefficient * s1 * s2
            // Goertzel power of a pure tone is (N/2)^2 A^2 / ... ; normalised by N/2 × energy it is near 1.
            let ratio = total > 0 ? power / (Double(window) / 2 * total) : 0
            let isMark = ratio > threshold && total / Double(window) > 1_000_000
            if isMark && !wasMark { onsets.append(.microseconds(Int64(start) * 1_000_000 / Int64(sampleRate))) }
            wasMark = isMark
            start += window
        }
        return onsets
    }
}

/// Glass-to-glass audio latency from `MarkedToneSource`'s marks in audio as it is played: each
/// mark's playout time past the whole second (valid below one second, on one machine's clock).
/// Played frames are gathered into a second of audio at a time (with 20 ms kept across the cut,
/// so a mark straddling it is found whole) whose playout times follow from the first frame's.
/// A gap in playout (the player rebuffering after an underrun, or running late) starts a new
/// stretch: counted on as if continuous, every mark after a 200 ms pause read 200 ms early, and
/// after a few pauses the readings wrapped past zero to 800-980 ms. Pure: times are passed in.
public struct AudioLatencyMeter: Sendable {
    private var buffer: [Int16] = []
    private var bufferStart: Duration = .zero
    private var lastMark: Duration?
    private let sampleRate: Int
    /// How far a frame's playout may stray from where the stretch puts it.
    private let tolerance = Duration.milliseconds(15)

    public init(sampleRate: Int = AudioFrame.sampleRate) { self.sampleRate = sampleRate }

    private func duration(_ samples: Int) -> Duration { .microseconds(Int64(samples) * 1_000_000 / Int64(sampleRate)) }

    /// Mono samples whose first one was played at `playedAt`; returns the latencies (ms) of the
    /// marks this completes.
    public mutating func played(_ mono: [Int16], at playedAt: Duration) -> [Double] {
        var found: [Double] = []
        if !buffer.isEmpty {
            let expected = bufferStart + duration(buffer.count)
            if playedAt - expected > tolerance || expected - playedAt > tolerance {
                found += scan(keeping: 0)
            }
        }
        if buffer.isEmpty { bufferStart = playedAt }
        buffer += mono
        if buffer.count >= sampleRate { found += scan(keeping: sampleRate / 50) }
        return found
    }

    /// Reads the marks in the buffer and keeps its last `keep` samples.
    private mutating func scan(keeping keep: Int) -> [Double] {
        var found: [Double] = []
        for onset in TimingMarks.detectMarks(buffer, sampleRate: sampleRate) {
            let at = bufferStart + onset
            // Marks near the start of the buffer may be the tail of one already counted.
            if onset > .milliseconds(15) || lastMark.map({ at - $0 > .milliseconds(500) }) ?? true {
                found.append(Double(at.components.attoseconds) / 1e15)  // milliseconds past the whole second
                lastMark = at
            }
        }
        let kept = min(keep, buffer.count)
        bufferStart = bufferStart + duration(buffer.count - kept)
        buffer = Array(buffer.suffix(kept))
        return found
    }
}

/// A 440 Hz tone with a 10 ms 3 kHz burst at every whole second of the capture clock.
public struct MarkedToneSource: Sendable {
    public let channels: Int
    private var tone: ToneSource
    private var sampleIndex = 0

    public init(channels: Int = 1) {
        self.channels = channels
        tone = ToneSource(frequency: 440, amplitude: 0.2, channels: channels)
    }

    /// The next samples, whose first sample is captured at `captureTime` (monotonic clock).
    public mutating func next(samplesPerChannel: Int, captureTime: Duration) -> [Int16] {
        var samples = tone.next(samplesPerChannel: samplesPerChannel)
        let markSamples = Int(TimingMarks.markDuration.components.attoseconds / 1_000_000_000_000_000) * AudioFrame.sampleRate / 1000
        let startMicros = captureTime.inMicroseconds
        for i in 0..<samplesPerChannel {
            let micros = startMicros + Int64(i) * 1_000_000 / Int64(AudioFrame.sampleRate)
            let intoSecond = Int(micros % 1_000_000) * AudioFrame.sampleRate / 1_000_000
            guard intoSecond < markSamples else { continue }
            let value = Int16(0.6 * 32767 * sin(2 * Double.pi * TimingMarks.markFrequency * Double(intoSecond) / Double(AudioFrame.sampleRate)))
            for c in 0..<channels { samples[i * channels + c] = value }
        }
        sampleIndex += samplesPerChannel
        return samples
    }
}
