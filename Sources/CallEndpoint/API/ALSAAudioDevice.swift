import Codecs
import MediaCore
import Devices
import Dispatch
import FoundationEssentials
import Glibc
import Platform
import Synchronization

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
    /// After a PCM failed (a card unplugged), its thread's steps pass it by until then: one try
    /// per `retryPause`, while the audio thread keeps its own pace (no sleep that stop() waits out).
    private let retryAt = Mutex<(capture: MediaTime?, playback: MediaTime?)>((nil, nil))
    static let retryPause: Duration = .milliseconds(100)
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
        retryAt.withLock { $0.capture = nil }  // a new PCM is tried at once
    }

    private func install(playback name: String) throws {
        let handle = try open(name, .playback)
        playbackPCM.withLock { $0 = handle }
        retryAt.withLock { $0.playback = nil }
    }

    public func selectCapture(_ pcm: String) throws { try install(capture: pcm) }
    public func selectPlayback(_ pcm: String) throws { try install(playback: pcm) }

    public func startCapture(_ deliver: @escaping @Sendable ([Int16]) -> Void) throws {
        captureSink.set(deliver)
        try threads.withLock { t in
            guard t.capture == nil else { return }
            guard capturePCM.withLock({ $0 }) != nil else { throw ConfigurationError("no capture PCM in the audio route") }
            t.capture = AudioThread(name: "alsa-capture") { [self] in
                if let at = retryAt.withLock({ $0.capture }), MediaTime.now < at { return }
                // Holding the lock across the read keeps a switch from closing the PCM under it.
                let result = capturePCM.withLock { h in Result { try h.map { h in try Self.transfer(h.pcm) { (pcm) throws(DeviceError) in try pcm.read(frames: AudioBlock.frames) } } } }
                switch result {
                case .success(let (samples, restarted)?):
                    if restarted { processor?.streamRestarted() }
                    captureSink(microphone(samples))
                case .success(nil): break
                case .failure(let error):
                    lastError.withLock { $0 = "\(error)" }
                    retryAt.withLock { $0.capture = .now + Self.retryPause }
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
                if let at = retryAt.withLock({ $0.playback }), MediaTime.now < at { return }
                let block = queue.withLock { $0.next() }
                // The card is handed a block per block period, so it holds what was written ahead of
                // that: the blocks of silence written at the start, and after each underrun, are
                // the cushion a stall of up to that length does not empty (`PlaybackCushion`).
                let result = playbackPCM.withLock { h in
                    Result {
                        try h.map { h in
                            try Self.transfer(h.pcm) { (pcm) throws(DeviceError) in
                                // The canceller's reference is what the speaker plays, in its
                                // order: the cushion's silence too (left out, it made the echo
                                // lag the reference by the cushion, which grows with each
                                // underrun, until the lag left the estimator's reach).
                                if !h.primed {
                                    for _ in 0..<h.cushion.blocks {
                                        processor?.render(Self.silentBlock, channels: 2)
                                        try pcm.write(Self.silentBlock)
                                    }
                                    h.primed = true
                                }
                                processor?.render(block, channels: 2)
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
                case .failure(let error):
                    lastError.withLock { $0 = "\(error)" }
                    retryAt.withLock { $0.playback = .now + Self.retryPause }
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
