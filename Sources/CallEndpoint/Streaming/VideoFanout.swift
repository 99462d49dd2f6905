import Codecs
import MediaCore
import Dispatch
import Platform
import RTPTransport
import Synchronization

/// One capture and one VP8 encoder for many peers (the WHEP viewers of an endpoint): each peer
/// keeps its own media session (transport, DTLS-SRTP, pacer, retransmissions, feedback and
/// estimate), and takes the shared encoder's frames instead of encoding its own.
///
/// - The encoder makes three temporal layers (`TemporalPattern`: 7.5, 15 and 30 fps together).
///   Each peer is sent the layers its own estimate has room for, so a peer on a thin link gets a
///   lower frame rate of the same pictures instead of pulling the encoder down for everyone;
///   it climbs back a layer at that layer's next sync frame, and is sent only layer 0 while its
///   pacer holds more than `SendPolicy`'s pushback delay.
/// - The encoder's bitrate and size follow the least estimate of the well-connected peers
///   (`servedEstimate`): they all get every layer; a peer on a thin link costs the others
///   nothing but its share of the machine.
/// - Keyframe requests (a new peer, a PLI, a pacer that had to drop) are served by one keyframe
///   for all, at most one per `keyframeInterval`; a new peer is sent nothing before a keyframe.
///   A peer whose link is too thin even for layer 0 (40 % of the encoder's rate) loses pictures;
///   its requests count once per `starvedKeyframeInterval` only, and after `starvedFor` it
///   leaves for an encoder of its own (`MediaSender.takeShared`).
final class VideoFanout: @unchecked Sendable {  // the subscriber list is behind a mutex; the encoder state belongs to the fan-out thread
    /// One peer's session taking the frames.
    final class Subscriber: @unchecked Sendable {  // `selector` is the fan-out thread's
        let sender: MediaSender
        /// The layers it is sent.
        var selector = LayerSelector()
        /// When its layers were last logged, and the changes since.
        var announced: Duration?
        var unannounced = 0
        /// When a keyframe this peer asked for was last granted.
        var lastGranted: Duration?
        init(sender: MediaSender) { self.sender = sender }

        /// The peer's room for video (its own controller's share of its estimate), once it has one.
        var videoBudget: Int? {
            sender.encoding.withLock { e in e.estimate == nil ? nil : e.controller?.videoBitrate }
        }
    }

    let track: LocalVideoTrack
    let maxVideoBitrate: Int
    let pattern = TemporalPattern(layers: 3)
    /// The least time between two keyframes asked for by peers.
    static let keyframeInterval: Duration = .milliseconds(300)
    static let starvedKeyframeInterval: Duration = .seconds(2)
    static let announceEvery: Duration = .seconds(5)
    private let members = FanoutMembers<Subscriber>(threadName: "video-fanout")
    private let frames = CaptureQueue<VideoFrame?>(capacity: 1)
    private let clock = MonotonicClock()
    private let started: MediaTime
    /// What the fan-out did, for statistics and tests.
    struct Counters: Sendable {
        var encoded = 0, keyframes = 0, bytes = 0
        var bitrate = 0
        var mode = ""
    }
    let counters = Mutex(Counters())

    /// Manual encoding: the rate is fixed at this, whatever the peers' estimates (they have none).
    let fixedBitrate: Int?

    /// Where the fan-out says what it does (every `reportEvery` while peers watch).
    private let log: @Sendable (String) -> Void
    static let reportEvery: Duration = .seconds(10)

    init(track: LocalVideoTrack, maxVideoBitrate: Int, fixedBitrate: Int? = nil, log: @escaping @Sendable (String) -> Void = { _ in }) {
        self.log = log
        self.track = track
        self.maxVideoBitrate = maxVideoBitrate
        self.fixedBitrate = fixedBitrate.map { min($0, maxVideoBitrate) }
        started = clock.now
    }

    var subscriberCount: Int { members.count }

    /// The peers taking the frames besides `sender` (attached or not).
    func watchers(besides sender: MediaSender) -> Int { members.count(besides: sender) }

    /// How long a peer's link may be too thin for the base layer before it encodes for itself,
    /// and how long the base layer must fit with room to spare before it comes back.
    static let starvedFor: Duration = .seconds(2)
    static let fedFor: Duration = .seconds(5)

    /// Whether a peer with this video budget cannot carry layer 0 at the shared rate.
    func starves(budget: Int?) -> Bool {
        guard let budget else { return false }
        let rate = counters.withLock { $0.bitrate }
        return rate > 0 && Double(budget) * 1.05 < Double(rate) * pattern.cumulativeShare[0]
    }

    /// Whether a peer with this budget (encoding for itself) would carry layer 0 with a fifth to
    /// spare (a rate not known yet, before any peer was served, counts as fitting).
    func feeds(budget: Int?) -> Bool {
        guard let budget else { return false }
        let rate = counters.withLock { $0.bitrate }
        return Double(budget) >= Double(rate) * pattern.cumulativeShare[0] * 1.2
    }

    /// A peer's sender takes the shared frames from now on (the fan-out starts with the first);
    /// its first frame will be a keyframe.
    func attach(_ sender: MediaSender) {
        sender.keyframeNeeded()
        members.attach(sender, Subscriber(sender: sender)) { [self] in try run() }
    }

    func detach(_ sender: MediaSender) { members.detach(sender) }

    /// Ends the fan-out thread (the endpoint leaves); waits for it.
    func stop() { members.stop { frames.put(nil) } }

    private var elapsed: Duration { clock.now - started }

    /// The estimate the encoder follows: the least of the well-connected peers', where a peer is
    /// well connected unless its estimate is under what all but the top layer take of the upper
    /// median's (60 % with three layers). Those peers all get every layer; a thinner one gets the
    /// layers that fit, and does not pull the encoder down. Nil before any peer has an estimate.
    static func servedEstimate(_ estimates: [Int], pattern: TemporalPattern) -> Int? {
        guard !estimates.isEmpty else { return nil }
        let sorted = estimates.sorted(by: >)
        let median = Double(sorted[(sorted.count - 1) / 2])
        let floor = median * (pattern.layers > 1 ? pattern.cumulativeShare[pattern.layers - 2] : 0)
        return sorted.last { Double($0) >= floor }
    }

    private func run() throws {
        let source = track.source
        let queue = frames
        let cameraDecoder = CameraPictureDecoder()
        let sink = track.addSink { output in
            switch output {
            case .frame(let frame): queue.put(frame)
            case .encoded(let unit, let timestamp): if let frame = cameraDecoder.decode(unit, timestamp: timestamp) { queue.put(frame) }
            case .ended: queue.put(nil)
            case .modeChanged, .lost, .restored, .controlSet: break
            }
        }
        defer { track.removeSink(sink) }
        var encoder: VP8Encoder?
        var controller: EncodingController?
        var native: VideoMode?
        var lastEncoded: Duration?
        var lastKeyframe: Duration?
        var keyframePending = false
        var shown: (encoder: Duration, clock: Duration)?
        var lastReport = (time: elapsed, frames: 0, keyframes: 0, bytes: 0)
        while members.isRunning {
            guard let item = queue.take(timeout: .seconds(1)) else { continue }
            guard var frame = item else { break }
            let now = elapsed
            let peers = members.current
            if peers.isEmpty {
                // Nobody watches: no encoder, and the next peer starts afresh.
                (encoder, controller, shown, lastEncoded) = (nil, nil, nil, nil)
                continue
            }
            if !track.isEnabled { frame = VideoFrame(width: frame.width, height: frame.height, timestamp: frame.timestamp, luma: 16) }
            let mode = VideoMode(width: frame.width, height: frame.height, frameRate: max(1, Int(source.format.frameRate.rounded())))
            if native != mode || controller == nil {
                native = mode
                let start = controller?.videoBitrate ?? min(800_000, maxVideoBitrate)
                controller = EncodingController(ladder: .forScaling(native: mode), maxVideoBitrate: maxVideoBitrate, startBitrate: start)
            }
            let estimates = peers.compactMap { $0.sender.encoding.withLock { $0.estimate?.bitrate } }
            if let served = Self.servedEstimate(estimates, pattern: pattern) {
                _ = controller!.update(estimate: served, lossFraction: 0, cause: "peers", now: now)
            }
            let target = fixedBitrate == nil ? controller!.mode : mode, bitrate = fixedBitrate ?? controller!.videoBitrate
            if (frame.width, frame.height) != (target.width, target.height) {
                frame = try frame.scaled(width: target.width, height: target.height, filter: .bilinear)
            }
            let interval = Duration.microseconds(1_000_000 / Int64(max(1, target.frameRate)))
            if let last = lastEncoded, now - last < interval - .milliseconds(8) { continue }
            lastEncoded = now
            if let running = encoder {
                try running.setResolution(width: frame.width, height: frame.height)
                if running.configuration.targetBitrate != bitrate { try running.setTargetBitrate(bitrate) }
            } else {
                var settings = VP8EncoderConfiguration(width: frame.width, height: frame.height, frameRate: target.frameRate, targetBitrate: bitrate)
                settings.temporalLayers = pattern.layers
                settings.maxIntraBitratePercent = 300
                encoder = try VP8Encoder(configuration: settings)
                keyframePending = true
            }
            guard let encoder else { continue }
            // A call's peer that records what it sends (it takes these frames while viewers watch).
            for peer in peers where peer.sender.configuration.recorder?.takeKeyframeRequest() == true {
                peer.sender.keyframeWanted.store(true, ordering: .relaxed)
            }
            for peer in peers where peer.sender.keyframeWanted.load(ordering: .relaxed) {
                // A peer whose link cannot carry even layer 0 loses pictures all the time: its
                // requests count once per `starvedKeyframeInterval`, so that it does not fill
                // everyone's stream with keyframes.
                let starved = starves(budget: peer.videoBudget)
                if starved, let last = peer.lastGranted, now - last < Self.starvedKeyframeInterval { continue }
                peer.sender.keyframeWanted.store(false, ordering: .relaxed)
                peer.lastGranted = now
                keyframePending = true
            }
            if keyframePending, lastKeyframe.map({ now - $0 >= Self.keyframeInterval }) ?? true {
                encoder.requestKeyframe()
                keyframePending = false
            }
            let capturedAt = clock.now
            let frameInterval = interval
            let encoderTime = shown.map { $0.encoder + (now - $0.clock <= frameInterval * 3 / 2 ? now - $0.clock : frameInterval) } ?? now
            shown = (encoderTime, now)
            let encodeStart = MediaTime.now
            let encoded = try encoder.encode(frame, at: encoderTime)
            let took = MediaTime.now - encodeStart
            // The CPU budget: an encoder too slow for its frame rate, or at its coarsest
            // quantizer, steps the shared mode down as a call's would.
            if fixedBitrate == nil { _ = controller!.encoderReport(quantizer: encoded.first?.quantizer, encodeTime: took, now: now) }
            for output in encoded {
                if output.isKeyframe { lastKeyframe = now }
                let layer = VideoLayer(id: output.temporalLayer, sync: output.layerSync)
                for peer in peers where forwards(output, to: peer, bitrate: bitrate) {
                    peer.sender.loop.post(.encodedVideo(data: output.data, isKeyframe: output.isKeyframe, capturedAt: capturedAt, layer: layer))
                    peer.sender.configuration.recorder?.video(output.data, stamp: .captured(capturedAt), isKeyframe: output.isKeyframe)
                    peer.sender.encoding.withLock { e in
                        e.stats.videoWidth = frame.width
                        e.stats.videoHeight = frame.height
                        e.stats.videoBudget.add(.encode, took)
                    }
                }
            }
            let total = counters.withLock { c -> Counters in
                c.encoded += encoded.count
                c.keyframes += encoded.filter(\.isKeyframe).count
                c.bytes += encoded.reduce(0) { $0 + $1.data.count }
                c.bitrate = bitrate
                c.mode = target.description
                return c
            }
            if now - lastReport.time >= Self.reportEvery {
                let span = (now - lastReport.time).inSeconds
                log("shared encoder: \(target) for \(peers.count) peers; over \(Int(span.rounded())) s \(total.encoded - lastReport.frames) frames, "
                    + "\(total.keyframes - lastReport.keyframes) keyframes, \(Int(Double(total.bytes - lastReport.bytes) * 8 / span / 1000)) kbit/s (now aiming at \(bitrate / 1000))")
                lastReport = (now, total.encoded, total.keyframes, total.bytes)
            }
        }
    }

    /// Whether `frame` goes to `peer`, by its own estimate and pacer.
    private func forwards(_ frame: EncodedVideoFrame, to peer: Subscriber, bitrate: Int) -> Bool {
        let room = LayerSelector.room(pattern: pattern, encoderBitrate: bitrate, peerBudget: peer.videoBudget,
                                      congested: SendPolicy.skipsPicture(pacerQueueDelay: peer.sender.pacerQueueDelay.load(ordering: .relaxed)))
        let before = peer.selector.forwarding
        let admitted = peer.selector.admits(layer: frame.temporalLayer, sync: frame.layerSync, isKeyframe: frame.isKeyframe, room: room)
        let now = elapsed
        if peer.selector.forwarding != before { peer.unannounced += 1 }
        if peer.announced == nil || (peer.unannounced > 0 && now - peer.announced! >= Self.announceEvery) {
            // Logged with the peer's name, at most once per `announceEvery`: the layers sent now,
            // and how many changes there were since the last line.
            defer { (peer.announced, peer.unannounced) = (now, 0) }
            let estimate = peer.sender.encoding.withLock { $0.estimate?.bitrate } ?? 0
            peer.sender.report([EncodingDecision(time: now.inSeconds, cause: "\(peer.unannounced) changes", estimateKbps: estimate / 1000,
                                                 change: "layers", from: "0-\(before)", to: "0-\(peer.selector.forwarding)")])
        }
        return admitted
    }
}

/// Which temporal layers one peer of a shared encoder is sent: from its first keyframe on, the
/// layers it has room for; a layer it was not sent is taken up at that layer's next sync frame
/// (which refers to layer 0 alone), and one it has no room for any more is left at once.
struct LayerSelector: Sendable, Equatable {
    /// The highest layer sent now.
    private(set) var forwarding = 0
    /// False until a keyframe was sent.
    private(set) var started = false

    /// The highest layer a peer has room for: layers 0 ... k fit while their share of the
    /// encoder's bitrate is within its video budget (5 % over is within); a peer without an
    /// estimate yet takes them all; one whose pacer is congested, layer 0 alone.
    static func room(pattern: TemporalPattern, encoderBitrate: Int, peerBudget: Int?, congested: Bool) -> Int {
        if congested { return 0 }
        guard let budget = peerBudget else { return pattern.layers - 1 }
        var room = 0
        while room < pattern.layers - 1 && Double(encoderBitrate) * pattern.cumulativeShare[room + 1] <= Double(budget) * 1.05 { room += 1 }
        return room
    }

    mutating func admits(layer: Int, sync: Bool, isKeyframe: Bool, room: Int) -> Bool {
        if isKeyframe {
            started = true
            forwarding = room
            return true
        }
        guard started else { return false }
        if room < forwarding {
            forwarding = room
        } else if room > forwarding, layer == forwarding + 1, sync {
            forwarding += 1
        }
        return layer <= forwarding
    }
}

/// The peers of a shared encoder, and its thread: started by the first peer, ended by `stop()`
/// (the endpoint leaves), idle while no peer is attached.
final class FanoutMembers<Member: AnyObject & Sendable>: Sendable {
    private let members = Mutex<[ObjectIdentifier: Member]>([:])
    private let running = Mutex<Bool>(false)
    private let finished = DispatchGroup()
    let threadName: String

    init(threadName: String) { self.threadName = threadName }

    var count: Int { members.withLock { $0.count } }
    func count(besides sender: MediaSender) -> Int { members.withLock { $0.count - ($0[ObjectIdentifier(sender)] == nil ? 0 : 1) } }
    var current: [Member] { members.withLock { Array($0.values) } }
    var isRunning: Bool { running.withLock { $0 } }

    /// Adds `member` for `sender`; the first one starts `body` on a thread of its own (when it
    /// ends, by an error or its source's end, the next attach starts it again).
    func attach(_ sender: MediaSender, _ member: Member, body: @escaping @Sendable () throws -> Void) {
        members.withLock { $0[ObjectIdentifier(sender)] = member }
        let start = running.withLock { r -> Bool in
            defer { r = true }
            return !r
        }
        guard start else { return }
        finished.enter()
        startThread(named: threadName) { [self] in
            defer { finished.leave() }
            try? body()
            running.withLock { $0 = false }
        }
    }

    func detach(_ sender: MediaSender) {
        members.withLock { $0[ObjectIdentifier(sender)] = nil }
    }

    /// Ends the thread: `wake` makes its wait return; waits for it.
    func stop(wake: () -> Void) {
        let was = running.withLock { r -> Bool in defer { r = false }; return r }
        guard was else { return }
        wake()
        finished.wait()
    }
}
