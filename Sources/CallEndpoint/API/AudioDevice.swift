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

/// alsa-lib capture and playback, each on its own thread, switchable during a call: the new PCM
/// is opened first, so a switch to a PCM that cannot be opened throws and leaves the old one.
public final class ALSAAudioDevice: AudioDevice, @unchecked Sendable {  // PCM handles move between threads only inside `Handle` under locks
    /// An open PCM, handed from the thread that opened it to the thread that uses it.
    final class Handle: @unchecked Sendable {  // used by one thread at a time
        let pcm: ALSAPCM
        /// Playback: the cushion of silence went ahead of the first block since the stream (re)started.
        var primed = false
        /// Playback: how deep that cushion is (it grows with underruns).
        var cushion: PlaybackCushion
        init(_ pcm: ALSAPCM) {
            self.pcm = pcm
            cushion = PlaybackCushion(bufferBlocks: pcm.bufferFrames / AudioBlock.frames)
        }
    }

    public let configuration: AudioRoute
    private let capturePCM = Mutex<Handle?>(nil)
    private let playbackPCM = Mutex<Handle?>(nil)
    private let captureSink = LockedCallback<[Int16]>()
    private let queue = Mutex(PlayoutQueue())
    /// The playback cushion's depth in blocks, for `playoutDelay` (read from other threads).
    private let cushionBlocks = Atomic<Int>(1)
    private let threads = Mutex<(capture: AudioThread?, playback: AudioThread?)>((nil, nil))
    /// The last error of each side (a device that went away, say), for stats.
    public let lastError = Mutex<String?>(nil)
    private let watch = Mutex<SoundCardWatch?>(nil)
    private let changes = Mutex<(count: Int, last: AudioRouteChange?)>((0, nil))

    /// The echo canceller, noise suppressor and gain control of `.voiceChat`: fed what this
    /// device plays (after the playout resampler, exactly what the card gets) and what it captures.
    private let processor: VoiceProcessor?

    /// Opens the route's PCMs; `configure` adjusts the default route (the configuration hook).
    public init(_ configure: (inout AudioRoute) -> Void = { _ in }) throws {
        var route = AudioRoute()
        configure(&route)
        guard (1...32).contains(route.captureChannels) else {
            throw ConfigurationError("\(route.captureChannels) capture channels: 1 to 32")
        }
        try route.microphone.validate(channels: route.captureChannels)
        configuration = route
        processor = try route.mode.processing.map { try VoiceProcessor($0) }
        guard route.preferredCapture.isEmpty && route.preferredPlayback.isEmpty else {
            try followRoutes()
            return
        }
        if let name = route.capturePCM { try install(capture: name) }
        if let name = route.playbackPCM { try install(playback: name) }
    }

    /// The ranked lists of each side, their fallback last; empty for a side that is not ranked.
    private var ranked: (capture: [String], playback: [String]) {
        let c = configuration
        return (c.preferredCapture.isEmpty ? [] : c.preferredCapture + [c.capturePCM].compactMap { $0 },
                c.preferredPlayback.isEmpty ? [] : c.preferredPlayback + [c.playbackPCM].compactMap { $0 })
    }

    /// Opens the best device present on each ranked side, then follows the sound cards.
    private func followRoutes() throws {
        let cards = Set(SoundCardWatch.cards().map(\.id))
        let (capture, playback) = ranked
        for (side, list) in [("capture", capture), ("playback", playback)] where !list.isEmpty {
            var failures: [String] = []
            for pcm in AudioRoutePreference.available(list, cards: cards) {
                do {
                    if side == "capture" { try install(capture: pcm) } else { try install(playback: pcm) }
                    break
                } catch {
                    failures.append("\(error)")
                }
            }
            guard (side == "capture" ? capturePCM.withLock { $0 } : playbackPCM.withLock { $0 }) != nil else {
                throw ConfigurationError("none of the preferred \(side) devices (\(list.joined(separator: ", "))) could be opened"
                                         + (failures.isEmpty ? ": none is present" : ": " + failures.joined(separator: "; ")))
            }
        }
        if capture.isEmpty, let name = configuration.capturePCM { try install(capture: name) }
        if playback.isEmpty, let name = configuration.playbackPCM { try install(playback: name) }
        watch.withLock { w in
            w = SoundCardWatch { [weak self] added, removed, present in
                guard let self, !(added.isEmpty && removed.isEmpty) else { return }
                let reason = (added.isEmpty ? [] : [added.map(\.id).joined(separator: ", ") + " appeared"])
                    + (removed.isEmpty ? [] : [removed.map(\.id).joined(separator: ", ") + " went away"])
                self.reroute(Set(present.map(\.id)), reason: reason.joined(separator: "; "))
            }
        }
    }

    /// Moves each ranked side to the best device present: up to a better one, or away from one
    /// that went. A device that does not open is passed over (and tried again at the next change).
    private func reroute(_ cards: Set<String>, reason: String) {
        let (capture, playback) = ranked
        for (side, list) in [("capture", capture), ("playback", playback)] where !list.isEmpty {
            let current = side == "capture" ? capturePCM.withLock { $0?.pcm.name } : playbackPCM.withLock { $0?.pcm.name }
            for pcm in AudioRoutePreference.available(list, cards: cards) {
                if pcm == current { break }
                do {
                    if side == "capture" { try install(capture: pcm) } else { try install(playback: pcm) }
                    let change = AudioRouteChange(side: side, from: current ?? "none", to: pcm, reason: reason)
                    changes.withLock { $0 = ($0.count + 1, change) }
                    break
                } catch {
                    lastError.withLock { $0 = "\(error)" }
                }
            }
        }
    }

    public var routeChanges: (count: Int, last: AudioRouteChange?) { changes.withLock { $0 } }

    /// Mono when a channel or a mix is picked, or voice processing runs; else as captured.
    public var captureChannels: Int {
        configuration.microphone == .all && processor == nil ? configuration.captureChannels : 1
    }

    public var voiceStats: VoiceStats? { processor?.stats }

    /// A read or write, and whether the PCM's stream restarted on the way (an xrun recovered).
    private static func transfer<T>(_ pcm: ALSAPCM, _ body: (ALSAPCM) throws(DeviceError) -> T) throws(DeviceError) -> (T, Bool) {
        let before = pcm.xruns
        let value = try body(pcm)
        return (value, pcm.xruns != before)
    }

    /// Blocks of silence the playback stream starts (and restarts) with: 1 until the card underruns.
    public var playbackCushion: Int { cushionBlocks.load(ordering: .relaxed) }

    /// Overruns of the capture PCM and underruns of the playback PCM so far (the PCMs open now).
    public var xruns: (capture: Int, playback: Int) {
        (capturePCM.withLock { $0?.pcm.xruns } ?? 0, playbackPCM.withLock { $0?.pcm.xruns } ?? 0)
    }

    /// The microphone's block as delivered: its channel or mix, then voice processing.
    private func microphone(_ samples: [Int16]) -> [Int16] {
        let picked = configuration.microphone.apply(samples, channels: configuration.captureChannels)
        guard let processor else { return picked }
        let channels = configuration.microphone == .all ? configuration.captureChannels : 1
        // The canceller's first hint: the playback buffer and one capture period (it measures
        // the real delay from the signals within a second).
        let hint = Duration.microseconds(Int64(configuration.periodFrames * (configuration.periods + 1)) * 1_000_000 / Int64(AudioFrame.sampleRate))
        return processor.process(VoiceProcessor.mix(picked, channels: channels), delay: hint)
    }

    public var route: (capture: String, playback: String) {
        (capturePCM.withLock { $0?.pcm.name } ?? "none", playbackPCM.withLock { $0?.pcm.name } ?? "none")
    }

    private func open(_ name: String, _ direction: ALSAPCM.Direction) throws -> Handle {
        var c = ALSAPCM.Configuration(channels: direction == .capture ? configuration.captureChannels : 2)
        c.periodFrames = configuration.periodFrames
        // A capture buffer adds no latency (a read returns what is there), so it is deeper: a
        // reader late by up to 100 ms loses nothing. Playback's buffer is the route's latency.
        c.periods = direction == .capture ? max(configuration.periods, 10) : configuration.periods
        return Handle(try ALSAPCM(name: name, direction: direction, configuration: c))
    }

    private func install(capture name: String) throws {
        let handle = try open(name, .capture)
        capturePCM.withLock { $0 = handle }
    }

    private func install(playback name: String) throws {
        let handle = try open(name, .playback)
        playbackPCM.withLock { $0 = handle }
    }

    public func selectCapture(_ pcm: String) throws { try install(capture: pcm) }
    public func selectPlayback(_ pcm: String) throws { try install(playback: pcm) }

    public func startCapture(_ deliver: @escaping @Sendable ([Int16]) -> Void) throws {
        captureSink.set(deliver)
        try threads.withLock { t in
            guard t.capture == nil else { return }
            guard capturePCM.withLock({ $0 }) != nil else { throw ConfigurationError("no capture PCM in the audio route") }
            t.capture = AudioThread(name: "alsa-capture") { [self] in
                // Holding the lock across the read keeps a switch from closing the PCM under it.
                let result = capturePCM.withLock { h in Result { try h.map { h in try Self.transfer(h.pcm) { (pcm) throws(DeviceError) in try pcm.read(frames: AudioBlock.frames) } } } }
                switch result {
                case .success(let (samples, restarted)?):
                    if restarted { processor?.streamRestarted() }
                    captureSink(microphone(samples))
                case .success(nil): break
                case .failure(let error): lastError.withLock { $0 = "\(error)" }; usleep(100_000)
                }
            }
        }
    }

    public func stopCapture() {
        let thread = threads.withLock { t in defer { t.capture = nil }; return t.capture }
        thread?.stop()
    }

    public func startPlayout() throws {
        try threads.withLock { t in
            guard t.playback == nil else { return }
            guard playbackPCM.withLock({ $0 }) != nil else { throw ConfigurationError("no playback PCM in the audio route") }
            t.playback = AudioThread(name: "alsa-playback") { [self] in
                let block = queue.withLock { $0.next() }
                processor?.render(block, channels: 2)
                // The card is handed a block per block period, so it holds what was written ahead of
                // that: the blocks of silence written at the start, and after each underrun, are
                // the cushion a stall of up to that length does not empty (`PlaybackCushion`).
                let result = playbackPCM.withLock { h in
                    Result {
                        try h.map { h in
                            try Self.transfer(h.pcm) { (pcm) throws(DeviceError) in
                                if !h.primed {
                                    for _ in 0..<h.cushion.blocks { try pcm.write(Self.silentBlock) }
                                    h.primed = true
                                }
                                try pcm.write(block)
                            }
                        }
                    }
                }
                switch result {
                case .success(let (_, restarted)?):
                    playbackPCM.withLock { h in
                        if restarted { h?.primed = false; h?.cushion.underran() } else { h?.cushion.wrote() }
                        cushionBlocks.store(h?.cushion.blocks ?? 1, ordering: .relaxed)
                    }
                    if restarted { processor?.streamRestarted() }
                case .success(nil): break
                case .failure(let error): lastError.withLock { $0 = "\(error)" }; usleep(100_000)
                }
            }
        }
    }

    public func play(_ samples: [Int16]) { queue.withLock { $0.append(samples) } }

    private static let silentBlock = [Int16](repeating: 0, count: AudioBlock.frames * 2)

    /// The queue ahead of the card, and what the card holds: the block being written and the
    /// cushion ahead of it.
    public var playoutDelay: Duration {
        let frames = queue.withLock { $0.frames } + (1 + cushionBlocks.load(ordering: .relaxed)) * AudioBlock.frames
        return .microseconds(Int64(frames) * 1_000_000 / Int64(AudioFrame.sampleRate))
    }

    public func stopPlayout() {
        let thread = threads.withLock { t in defer { t.playback = nil }; return t.playback }
        thread?.stop()
    }

    deinit {
        watch.withLock { $0 }?.stop()
        stopCapture()
        stopPlayout()
    }
}

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

/// A published audio track: a device's capture that can be muted (silence is sent, so the peer's
/// playout keeps its rhythm) and unmuted.
public final class LocalAudioTrack: Sendable {
    public let device: any AudioDevice
    private let enabled = Atomic<Bool>(true)
    private let sinks = TrackSinks<[Int16]>()

    public init(device: any AudioDevice) { self.device = device }

    /// Delivers the captured blocks to `sink` too; capture starts with the first. Returns the
    /// key for `removeSink`.
    func addSink(_ sink: @escaping @Sendable ([Int16]) -> Void) throws -> Int {
        let (key, first) = sinks.add(sink)
        if first {
            do { try device.startCapture { [sinks] block in sinks.deliver(block) } } catch {
                _ = sinks.remove(key)
                throw error
            }
        }
        return key
    }

    /// Stops delivering to one sink; with the last gone the device's blocks go nowhere (it keeps
    /// capturing for the next session of a call).
    func removeSink(_ key: Int) {
        if sinks.remove(key) { try? device.startCapture { _ in } }
    }

    public var isEnabled: Bool {
        get { enabled.load(ordering: .relaxed) }
        set { enabled.store(newValue, ordering: .relaxed) }
    }
}
