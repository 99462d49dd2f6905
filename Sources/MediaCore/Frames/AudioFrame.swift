/// Uncompressed audio: signed 16-bit samples at 48 kHz, mono or stereo, interleaved.
public struct AudioFrame: Sendable, Equatable {
    public static let sampleRate = 48_000

    public var channels: Int
    /// Interleaved samples: `samplesPerChannel * channels` values.
    public var samples: [Int16]
    /// When the first sample was captured, on the source's monotonic clock.
    public var timestamp: Duration

    public var samplesPerChannel: Int { samples.count / channels }
    public var duration: Duration { .microseconds(samplesPerChannel * 1_000_000 / Self.sampleRate) }

    public init(channels: Int, samples: [Int16], timestamp: Duration = .zero) throws(MediaError) {
        guard channels == 1 || channels == 2 else {
            throw MediaError(.invalidArgument, "make audio frame", "\(channels) channels; supported: 1 (mono) or 2 (stereo)")
        }
        guard samples.count % channels == 0 else {
            throw MediaError(.invalidArgument, "make audio frame",
                             "\(samples.count) samples do not divide into \(channels) channels")
        }
        self.channels = channels
        self.samples = samples
        self.timestamp = timestamp
    }
}
