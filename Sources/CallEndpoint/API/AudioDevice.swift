import Codecs
import MediaCore
import Devices
import Dispatch
import FoundationEssentials
import Glibc
import Platform
import Synchronization

/// Audio in and out of a call: 48 kHz, 16-bit, interleaved, in 10 ms blocks. Capture delivers on
/// the device's own thread; playout takes stereo blocks and plays them on its own thread. ALSA is
/// the default (`ALSAAudioDevice`); files, pipes and synthetic sources plug in the same way.
public protocol AudioDevice: AnyObject, Sendable {
    /// Channels of the captured audio (1 or 2).
    var captureChannels: Int { get }
    /// Starts capturing; `deliver` gets `AudioBlock.frames` frames (10 ms) at a time. A second
    /// call replaces `deliver`.
    func startCapture(_ deliver: @escaping @Sendable ([Int16]) -> Void) throws
    func stopCapture()
    /// Starts playing what `play` queues (silence when nothing is queued).
    func startPlayout() throws
    /// Queues `AudioBlock.frames` stereo frames (10 ms) for playout.
    func play(_ samples: [Int16])
    func stopPlayout()
    /// Switches the microphone to another ALSA PCM during a call.
    func selectCapture(_ pcm: String) throws
    /// Switches the speaker to another ALSA PCM during a call.
    func selectPlayback(_ pcm: String) throws
    /// What it captures from and plays to, for stats and replies.
    var route: (capture: String, playback: String) { get }
    /// How long audio queued now waits before it is heard (lip sync counts it).
    var playoutDelay: Duration { get }
    /// The voice processing's figures (echo canceller, voice activity) when the device runs in
    /// `.voiceChat`; nil otherwise.
    var voiceStats: VoiceStats? { get }
    /// Route changes this device made by itself (a preferred device came or its device went),
    /// how many since the start and the last one.
    var routeChanges: (count: Int, last: AudioRouteChange?) { get }
}

/// The route moved: `side` is "capture" or "playback".
public struct AudioRouteChange: Sendable, Equatable, CustomStringConvertible {
    public var side: String
    public var from: String
    public var to: String
    public var reason: String
    public var description: String { "\(side) \(from) -> \(to) (\(reason))" }
}

extension AudioDevice {
    /// Written straight out by default (a file, nothing).
    public var playoutDelay: Duration { .zero }
    public var voiceStats: VoiceStats? { nil }
    public var routeChanges: (count: Int, last: AudioRouteChange?) { (0, nil) }
    public func selectCapture(_ pcm: String) throws {
        throw ConfigurationError("\(route.capture) cannot switch to \(pcm); start with --mic to use ALSA")
    }
    public func selectPlayback(_ pcm: String) throws {
        throw ConfigurationError("\(route.playback) cannot switch to \(pcm); start with --speaker to use ALSA")
    }
}

/// The unit audio moves in between devices and a call. 10 ms: a block's audio waits for the
/// whole block before it moves on, at the microphone and again at playout, so the block is a
/// floor under glass-to-glass latency (20 ms blocks put audio over 60 ms on loopback). Opus
/// packets carry one block or two (`MediaSender`'s choice for the path).
public enum AudioBlock {
    /// Frames per channel in one block: 10 ms at 48 kHz.
    public static let frames = AudioFrame.sampleRate / 100
    public static let period = Duration.milliseconds(10)
}

/// How a device treats the microphone, as iOS's audio session modes do.
public enum AudioMode: Sendable, Equatable {
    /// The microphone as it is (the default).
    case `default`
    /// Echo cancellation against the device's own playback, noise suppression, gain control and
    /// a high-pass filter (webrtc-audio-processing), delivered mono: an intercom, a speakerphone.
    case voiceChat
    /// The same with chosen parts.
    case voice(VoiceProcessing)

    var processing: VoiceProcessing? {
        switch self {
        case .default: nil
        case .voiceChat: .voiceChat
        case .voice(let p): p
        }
    }
}

/// Which of a multi-channel capture's channels make the microphone: one of them (the seed's "back
/// microphone" of a device with several), or a weighted mix. Delivered mono.
public enum MicrophoneSelection: Sendable, Equatable {
    /// Every channel as captured (1 or 2 channels are sent as they are).
    case all
    /// Channel N, counted from 1.
    case channel(Int)
    /// Weights, one per captured channel (0.5, 0.5, 0, 0: the mean of the first two of four).
    case mix([Double])

    /// Checks the selection against `channels` captured channels.
    public func validate(channels: Int) throws(ConfigurationError) {
        switch self {
        case .all:
            guard channels <= 2 else { throw ConfigurationError("a \(channels)-channel capture needs a microphone channel or a mix (callend sends mono or stereo)") }
        case .channel(let n):
            guard (1...channels).contains(n) else { throw ConfigurationError("microphone channel \(n) of a \(channels)-channel capture: channels are 1 to \(channels)") }
        case .mix(let weights):
            guard weights.count == channels else { throw ConfigurationError("a microphone mix of \(weights.count) weights for a \(channels)-channel capture: give one weight per channel") }
            guard weights.allSatisfy({ $0.isFinite && abs($0) <= 4 }), weights.contains(where: { $0 != 0 }) else {
                throw ConfigurationError("microphone mix weights must be between -4 and 4, not all 0")
            }
        }
    }

    /// The captured block (interleaved, `channels` channels) as the microphone: mono for a
    /// channel or a mix, unchanged for `.all`.
    public func apply(_ samples: [Int16], channels: Int) -> [Int16] {
        switch self {
        case .all:
            return samples
        case .channel(let n):
            guard channels > 1 else { return samples }
            return stride(from: n - 1, to: samples.count, by: channels).map { samples[$0] }
        case .mix(let weights):
            let frames = samples.count / channels
            return (0..<frames).map { f in
                var sum = 0.0
                for c in 0..<channels { sum += Double(samples[f * channels + c]) * weights[c] }
                return Int16(max(-32768, min(32767, sum.rounded())))
            }
        }
    }
}

/// Which PCMs an `ALSAAudioDevice` uses and how: the "audio route".
public struct AudioRoute: Sendable, Equatable {
    /// ALSA PCM names (`default`, `plughw:CARD=...,DEV=0`, a PCM from an ALSA configuration); nil: that side is off.
    public var capturePCM: String?
    public var playbackPCM: String?
    /// Channels opened on the capture PCM (a 4-microphone array: 4).
    public var captureChannels = 1
    /// Which of them make the microphone.
    public var microphone = MicrophoneSelection.all
    /// `.voiceChat`: echo cancellation against this device's playback, noise suppression, gain
    /// control; the microphone is delivered mono.
    public var mode = AudioMode.default
    /// Ranked microphones and speakers, best first: card ids (`USB`) or PCM names
    /// (`AudioRoutePreference`). When given, the device uses the best one present, moves to a
    /// better one when it is plugged in and falls back to the next when its device goes, during
    /// the call; `capturePCM`/`playbackPCM`, when set, come last.
    public var preferredCapture: [String] = []
    public var preferredPlayback: [String] = []
    /// Frames per ALSA period (480 = 10 ms) and periods per buffer.
    public var periodFrames = 480
    public var periods = 4
    /// Speech (Opus voip) rather than music (Opus audio).
    public var voiceMode = true

    public init(capturePCM: String? = "default", playbackPCM: String? = "default") {
        self.capturePCM = capturePCM
        self.playbackPCM = playbackPCM
    }
}
