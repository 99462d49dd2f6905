import Codecs
import MediaCore
import Devices
import Dispatch
import FoundationEssentials
import Glibc
import Platform
import Synchronization

/// Synthetic capture (the marked tone, a WAV file, or silence) and playout to a WAV file or nowhere.
public final class SyntheticAudioDevice: AudioDevice, @unchecked Sendable {  // the source and writer are used under `parts`
    public enum Source: Sendable, Equatable {
        /// 440 Hz with a 3 kHz timing mark at every whole second of the capture clock.
        case tone
        /// A 48 kHz WAV file, looped.
        case wav(path: String)
        case silence
    }

    public let source: Source
    public let outputPath: String?
    public let captureChannels: Int
    private let parts: Mutex<(tone: MarkedToneSource, wav: WAVReader?, writer: WAVWriter?)>
    private let captureSink = LockedCallback<[Int16]>()
    private let queue = Mutex(PlayoutQueue())
    private let threads = Mutex<(capture: AudioThread?, playback: AudioThread?)>((nil, nil))

    /// Whether a WAV source starts again at its end; when not, capture delivers empty blocks after it.
    public let loop: Bool

    public init(source: Source = .tone, outputPath: String? = nil, loop: Bool = true) throws {
        self.source = source
        self.loop = loop
        self.outputPath = outputPath
        var wav: WAVReader?
        if case .wav(let path) = source {
            let reader = try WAVReader(path: path)
            guard reader.sampleRate == AudioFrame.sampleRate, (1...2).contains(reader.channels) else {
                throw MediaError(.invalidArgument, "audio source \(path)",
                                 "\(reader.sampleRate) Hz, \(reader.channels) channels; callend sends 48000 Hz mono or stereo (convert with ffmpeg -ar 48000 -ac 1)")
            }
            wav = reader
        }
        captureChannels = wav?.channels ?? 1
        parts = Mutex((MarkedToneSource(), wav, try outputPath.map { try WAVWriter(path: $0, channels: 2) }))
    }

    public var route: (capture: String, playback: String) {
        let capture: String = switch source {
        case .tone: "tone"
        case .wav(let path): path
        case .silence: "silence"
        }
        return (capture, outputPath ?? "none")
    }

    public func startCapture(_ deliver: @escaping @Sendable ([Int16]) -> Void) throws {
        captureSink.set(deliver)
        threads.withLock { t in
            guard t.capture == nil else { return }
            t.capture = AudioThread(name: "synthetic-capture") { [self] in
                let block = nextBlock()
                captureSink(block)
            }
        }
    }

    private func nextBlock() -> [Int16] {
        let count = AudioBlock.frames * captureChannels
        return parts.withLock { p in
            switch source {
            case .tone:
                // As a microphone's: a block is delivered once its last sample is in, so its
                // first was taken a block earlier.
                return p.tone.next(samplesPerChannel: AudioBlock.frames, captureTime: MonotonicClock.now - AudioBlock.period)
            case .wav(let path):
                var chunk = p.wav?.read(samplesPerChannel: AudioBlock.frames) ?? []
                if chunk.isEmpty && !loop { return [] }
                if chunk.count < count, loop, let again = try? WAVReader(path: path) {  // loop
                    p.wav = again
                    chunk += again.read(samplesPerChannel: AudioBlock.frames - chunk.count / captureChannels) ?? []
                }
                return chunk + [Int16](repeating: 0, count: max(0, count - chunk.count))
            case .silence:
                return [Int16](repeating: 0, count: count)
            }
        }
    }

    public func stopCapture() {
        let thread = threads.withLock { t in defer { t.capture = nil }; return t.capture }
        thread?.stop()
    }

    /// Played audio goes straight to the file (no clock of its own: the receiver's playout
    /// thread already runs once per block).
    public func startPlayout() throws {}

    public func play(_ samples: [Int16]) { parts.withLock { p in try? p.writer?.write(samples) } }

    public func stopPlayout() { parts.withLock { p in try? p.writer?.close() } }

    deinit { stopCapture() }
}
