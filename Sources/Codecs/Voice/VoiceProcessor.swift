import MediaCore
import Synchronization
internal import CVoice

/// What a `VoiceProcessor` does to the microphone: the parts of a voice chat mode (iOS's
/// `.voiceChat`, a browser's getUserMedia defaults).
public struct VoiceProcessing: Sendable, Equatable {
    /// Acoustic echo cancellation against what the speaker plays.
    public var echoCancellation = true
    /// How hard the canceller suppresses what echo is left: 0 low, 1 moderate, 2 high. Higher
    /// removes more echo and more of the near end while both talk.
    public var echoSuppression = 1
    /// Noise suppression level 1 (low) ... 4 (very high); 0 is off.
    public var noiseSuppression = 3
    /// Adaptive digital gain towards -3 dBFS, with a limiter.
    public var gainControl = true
    /// Removes rumble below about 80 Hz.
    public var highPass = true
    /// Voice activity detection, for stats.
    public var voiceDetection = true
    /// The library's own delay-agnostic mode: it finds the speaker-to-microphone delay itself,
    /// but only after 15 s of audio, and then overrides the delay this processor measures from
    /// the signals in its first second (`EchoDelayEstimator`); off by default.
    public var delayAgnostic = false
    /// A longer echo tail (128 ms rather than 48), more robust to a delay that moves.
    public var extendedFilter = true

    public init() {}

    /// Echo cancellation, noise suppression, gain control and the high-pass filter.
    public static let voiceChat = VoiceProcessing()
}

/// The figures the echo canceller and voice detection report.
public struct VoiceStats: Sendable, Equatable {
    /// Echo return loss enhancement (dB, the canceller's long-term average) and the path's own
    /// echo return loss; nil until the canceller has figures.
    public var erleDB: Int?
    public var erlDB: Int?
    /// The canceller's estimate of the speaker-to-microphone delay; nil while unknown.
    public var delayMilliseconds: Int?
    /// The last microphone chunk had speech in it.
    public var voice = false
    /// The speaker-to-microphone delay the canceller is told for the last chunk: the lag found
    /// by cross-correlating the two streams, plus how far the speaker's stream is ahead of the
    /// microphone's right now (their threads run apart); nil until the lag is found.
    public var measuredDelayMilliseconds: Int?
    /// Sound card streams restarted (xruns) during processing.
    public var restarts = 0
    /// Chunks processed each way, and the library's errors.
    public var renderedChunks = 0
    public var capturedChunks = 0
    public var errors = 0
}

/// Voice processing for one microphone through webrtc-audio-processing (the library of
/// GStreamer's webrtcdsp): `render` takes what goes to the speaker, exactly as it is played (the
/// echo canceller's reference); `process` takes the microphone's audio and returns it with the
/// echo, noise and level handled. Both take 48 kHz audio in any whole number of 10 ms chunks;
/// the two may be called from different threads.
public final class VoiceProcessor: Sendable {
    public let options: VoiceProcessing
    public static let sampleRate = AudioFrame.sampleRate
    /// Frames in one chunk the library processes: 10 ms.
    public static let chunkFrames = sampleRate / 100

    private final class Handle: @unchecked Sendable {  // used under `state`'s lock only
        let voice: OpaquePointer
        init(_ voice: OpaquePointer) { self.voice = voice }
        deinit { cvoice_destroy(voice) }
    }

    /// Mono samples handed to the library each way so far.
    private struct Counts { var far = 0, near = 0 }

    private let state: Mutex<(handle: Handle, stats: VoiceStats, delay: EchoDelayEstimator, counts: Counts)>

    public init(_ options: VoiceProcessing = .voiceChat) throws(MediaError) {
        var c = cvoice_options()
        c.echo_cancellation = options.echoCancellation ? 1 : 0
        c.echo_suppression = Int32(max(0, min(2, options.echoSuppression)))
        c.noise_suppression = Int32(max(0, min(4, options.noiseSuppression)))
        c.gain_control = options.gainControl ? 1 : 0
        c.high_pass = options.highPass ? 1 : 0
        c.voice_detection = options.voiceDetection ? 1 : 0
        c.extended_filter = options.extendedFilter ? 1 : 0
        c.delay_agnostic = options.delayAgnostic ? 1 : 0
        guard let voice = cvoice_create(Int32(Self.sampleRate), &c) else {
            throw MediaError(.library, "create voice processing", "webrtc-audio-processing refused the setup")
        }
        self.options = options
        state = Mutex((Handle(voice), VoiceStats(), EchoDelayEstimator(), Counts()))
    }

    /// Far-end audio as the speaker plays it, interleaved with `channels` channels (mixed to mono).
    public func render(_ samples: [Int16], channels: Int) {
        let mono = Self.mix(samples, channels: channels)
        state.withLock { s in
            if options.echoCancellation { s.delay.render(mono[...]) }
            Self.chunks(of: mono.count) { range in
                let result = mono[range].withUnsafeBufferPointer { cvoice_render(s.handle.voice, $0.baseAddress) }
                s.stats.renderedChunks += 1
                s.counts.far += range.count
                if result != 0 { s.stats.errors += 1 }
            }
        }
    }

    /// Microphone audio, mono, processed; `delay` is how long ago the speaker played what this
    /// block's echo holds as the devices see it (their buffers): the canceller's hint until the
    /// lag is found from the signals themselves (`EchoDelayEstimator`).
    ///
    /// The library takes the delay as how much far-end audio has been rendered since what the
    /// chunk's echo came from. The estimator's lag is between the two streams' sample counts;
    /// the speaker's thread runs ahead of the microphone's by its own schedule (a stall of
    /// either moves it), so what the library gets is that lag plus the far end's lead at this
    /// chunk. When both are fed in step (render a chunk, then process one), the lead is nil.
    public func process(_ mono: [Int16], delay: Duration = .milliseconds(40)) -> [Int16] {
        var out = mono
        state.withLock { s in
            if options.echoCancellation { s.delay.capture(mono[...]) }
            let lag = s.delay.lagSamples
            out.withUnsafeMutableBufferPointer { buffer in
                Self.chunks(of: buffer.count) { range in
                    s.counts.near += range.count
                    let delayMs: Int
                    if let lag {
                        delayMs = max(0, lag + s.counts.far - s.counts.near) * 1000 / Self.sampleRate
                        s.stats.measuredDelayMilliseconds = delayMs
                    } else {
                        delayMs = Int(delay / .milliseconds(1))
                    }
                    let result = cvoice_capture(s.handle.voice, buffer.baseAddress! + range.lowerBound, Int32(delayMs))
                    s.stats.capturedChunks += 1
                    if result != 0 { s.stats.errors += 1 }
                }
            }
            var figures = cvoice_stats()
            cvoice_get_stats(s.handle.voice, &figures)
            s.stats.voice = figures.stream_has_voice != 0
        }
        return out
    }

    /// A sound card's stream restarted (an xrun either way): the delay is found again from
    /// what comes after.
    public func streamRestarted() {
        state.withLock { s in
            s.delay.restart()
            s.stats.restarts += 1
        }
    }

    /// The canceller's figures now.
    public var stats: VoiceStats {
        state.withLock { s in
            var figures = cvoice_stats()
            cvoice_get_stats(s.handle.voice, &figures)
            var stats = s.stats
            if figures.has_metrics != 0, options.echoCancellation {
                stats.erleDB = Int(figures.erle_db)
                stats.erlDB = Int(figures.erl_db)
            }
            stats.delayMilliseconds = figures.delay_median_ms >= 0 ? Int(figures.delay_median_ms) : nil
            return stats
        }
    }

    /// Calls `body` with each whole chunk of `count` samples; a partial chunk at the end is left
    /// out (blocks are whole chunks: 10 ms).
    private static func chunks(of count: Int, _ body: (Range<Int>) -> Void) {
        var start = 0
        while start + chunkFrames <= count {
            body(start..<start + chunkFrames)
            start += chunkFrames
        }
    }

    /// Interleaved audio of `channels` channels as mono (the mean of the channels).
    public static func mix(_ samples: [Int16], channels: Int) -> [Int16] {
        guard channels > 1 else { return samples }
        let frames = samples.count / channels
        // While loops over raw pointers: a debug build's range iterators cost more than the sums,
        // on every far-end sample (the device lab's emulated VM runs the debug build).
        return [Int16](unsafeUninitializedCapacity: frames) { mono, initialized in
            samples.withUnsafeBufferPointer { input in
                var f = 0, i = 0
                while f < frames {
                    var sum = 0, c = 0
                    while c < channels { sum += Int(input[i + c]); c += 1 }
                    mono[f] = Int16(sum / channels)
                    f += 1
                    i += channels
                }
            }
            initialized = frames
        }
    }
}
