import MediaCore
internal import CSpeexDSP

/// Interleaved 16-bit audio at a ratio that can change a little at a time without clicks
/// (libspeexdsp's resampler): `ratio` input frames are consumed per output frame, so 1.0003 plays
/// 0.03 % faster. One owner; use it from one thread at a time.
public final class AudioResampler {
    public let channels: Int
    private let state: OpaquePointer
    /// The ratio is given to libspeexdsp as a fraction over this denominator: steps of 21 ppm.
    /// (libspeexdsp rescales its position by den_new / den_old in 32-bit arithmetic, so the
    /// denominator squared must stay below 2^32: a million crashed it.)
    private static let denominator = UInt32(AudioFrame.sampleRate)
    public private(set) var ratio = 1.0

    /// `quality` 0 ... 10 (libspeexdsp's scale; 3 is its VoIP default, plenty for drift).
    public init(channels: Int, quality: Int = 3) throws(MediaError) {
        guard channels == 1 || channels == 2 else {
            throw MediaError(.invalidArgument, "create resampler", "\(channels) channels; supported: 1 or 2")
        }
        var error: Int32 = 0
        let rate = UInt32(AudioFrame.sampleRate)
        guard let state = speex_resampler_init(UInt32(channels), rate, rate, Int32(quality), &error), error == 0 else {
            throw MediaError(.library, "create resampler", String(cString: speex_resampler_strerror(error)))
        }
        self.state = state
        self.channels = channels
        speex_resampler_skip_zeros(state)
    }

    deinit { speex_resampler_destroy(state) }

    /// Sets input frames per output frame, limited to 0.9 ... 1.1 (`ratio` then says the step
    /// in force).
    public func setRatio(_ ratio: Double) {
        let clamped = min(1.1, max(0.9, ratio))
        let numerator = UInt32((clamped * Double(Self.denominator)).rounded())
        guard numerator != UInt32((self.ratio * Double(Self.denominator)).rounded()) else { return }
        self.ratio = Double(numerator) / Double(Self.denominator)
        let rate = UInt32(AudioFrame.sampleRate)
        // ratio_num / ratio_den is the input rate over the output rate.
        speex_resampler_set_rate_frac(state, numerator, Self.denominator, rate, rate)
    }

    /// Makes up to `frames` output frames from `input` (interleaved); returns them and how many
    /// input frames were used (the rest are for the next call).
    public func process(_ input: ArraySlice<Int16>, frames: Int) -> (output: [Int16], consumed: Int) {
        var output = [Int16](repeating: 0, count: frames * channels)
        var inFrames = UInt32(input.count / channels)
        var outFrames = UInt32(frames)
        input.withUnsafeBufferPointer { source in
            output.withUnsafeMutableBufferPointer { target in
                _ = speex_resampler_process_interleaved_int(state, source.baseAddress, &inFrames, target.baseAddress, &outFrames)
            }
        }
        output.removeLast((frames - Int(outFrames)) * channels)
        return (output, Int(inFrames))
    }
}
