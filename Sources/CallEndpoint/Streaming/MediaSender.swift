import Codecs
import Devices
import Foundation
import Platform
import RTPTransport
import Synchronization

/// What `callend send` sends and where.
public struct MediaSenderConfiguration: Sendable {
    public enum VideoSource: Sendable, Equatable {
        case none
        case pattern(width: Int, height: Int, frameRate: Int)
        case y4m(path: String)
        case camera(path: String, mode: CameraModeRequest?)
    }

    public enum AudioSource: Sendable, Equatable {
        case none
        case tone
        case wav(path: String)
        case alsa(pcm: String)
    }

    public var destinationHost: String
    public var videoPort: Int
    public var audioPort: Int
    public var video: VideoSource = .pattern(width: 640, height: 480, frameRate: 30)
    public var audio: AudioSource = .tone
    public var videoBitrate = 1_000_000
    public var audioBitrate = 32_000
    public var srtp: (profile: SRTPProfile, keyMaterial: [UInt8])?
    /// The key the peer protects its RTCP with, when it is not ours (a call: each side has its own).
    public var srtpReceiveKey: [UInt8]?
    /// SSRCs to send with (a call announces them in its session description); random when nil.
    public var ssrcs: (video: UInt32, rtx: UInt32, audio: UInt32)?
    public var duration: Duration?
    /// The RFC 8285 ID to carry the transport-wide sequence number with on the video port. With
    /// it (and a receiver that sends transport-cc feedback, as a call's does) and `.auto`
    /// encoding, the bandwidth estimator drives bitrates and the camera mode.
    public var transportSequenceExtensionID: UInt8?
    public var encodingMode: VideoEncodingMode = .auto
    /// The most the video may use (manual mode's cap, auto mode's ceiling).
    public var maxVideoBitrate = 2_500_000
    /// Every encoding decision, as it is made.
    public var onDecision: (@Sendable (EncodingDecision) -> Void)?

    /// Payload types: fixed for SDP files (96, its RTX 97, Opus 111), the offerer's in a call.
    public struct PayloadTypes: Sendable, Equatable {
        public var video: UInt8 = 96
        /// RFC 4588 retransmissions and probe padding; nil when the peer did not take RTX (then
        /// lost packets are not resent and probes carry no padding).
        public var rtx: UInt8? = 97
        public var audio: UInt8 = 111
        public init(video: UInt8 = 96, rtx: UInt8? = 97, audio: UInt8 = 111) {
            self.video = video
            self.rtx = rtx
            self.audio = audio
        }
    }
    public var payloadTypes = PayloadTypes()

    public init(destinationHost: String, videoPort: Int) {
        self.destinationHost = destinationHost
        self.videoPort = videoPort
        self.audioPort = videoPort + 2
    }
}

public struct SenderStatistics: Sendable, CustomStringConvertible {
    public var videoFrames = 0
    public var keyframes = 0
    public var videoPackets = 0
    public var videoBytes = 0
    public var audioPackets = 0
    public var audioBytes = 0
    public var nacksReceived = 0
    public var retransmitted = 0
    public var keyframeRequests = 0
    public var roundTripTime: Duration?
    public var receiverLossFraction: Double?
    public var elapsed: Duration = .zero
    /// Size of the last video frame sent.
    public var videoWidth = 0
    public var videoHeight = 0
    /// The bandwidth estimate (auto mode), the encoder's targets, and the latest decisions.
    public var estimateBitrate: Int?
    public var videoTargetBitrate = 0
    public var audioTargetBitrate = 0
    public var mode: String?
    public var decisions: [EncodingDecision] = []
    public var paddingBytes = 0
    /// Packets the transport could not send (no path yet, a network error): counted, never fatal.
    public var sendErrors = 0
    /// Auto mode: pictures not encoded because the pacer still held earlier ones (encoder
    /// pushback), and retransmissions refused because the retransmission budget was spent.
    public var framesHeldBack = 0
    public var retransmissionsRefused = 0

    public var description: String {
        let seconds = max(elapsed.secondsDouble, 0.001)
        return String(format: "sent %.1f s: video %d frames (%d keyframes), %d packets, %.0f kbit/s; audio %d packets, %.0f kbit/s; NACKs %d, retransmitted %d, keyframe requests %d%@%@%@",
                      seconds, videoFrames, keyframes, videoPackets, Double(videoBytes * 8) / seconds / 1000,
                      audioPackets, Double(audioBytes * 8) / seconds / 1000, nacksReceived, retransmitted, keyframeRequests,
                      roundTripTime.map { String(format: "; RTT %.1f ms", $0.secondsDouble * 1000) } ?? "",
                      receiverLossFraction.map { String(format: "; receiver loss %.1f %%", $0 * 100) } ?? "",
                      framesHeldBack + retransmissionsRefused > 0
                          ? "; held back \(framesHeldBack) frames, refused \(retransmissionsRefused) retransmissions (congestion)" : "")
    }
}

/// Sends VP8 and Opus over RTP to one address, video to one port and audio to another, RTCP
/// multiplexed on each (RFC 5761). Answers NACKs with RFC 4588 retransmissions and PLI/FIR with a
/// keyframe; sends SR and SDES every second. Capture, encoding and sending run on dedicated threads.
public final class MediaSender: @unchecked Sendable {  // mutable sending state is behind `state`; sockets and sessions are thread-safe
    public let configuration: MediaSenderConfiguration
    /// Where packets go: the configuration's two ports (made here), or a call's transport.
    let transport: any PacketTransport
    let videoSSRC: UInt32
    let rtxSSRC: UInt32
    let audioSSRC: UInt32
    /// False when a call owns the transport and routes the peer's RTCP here itself.
    let ownsTransport: Bool
    let cname = "callend-\(UInt32.random(in: 1...UInt32.max))"
    let clock = StreamClock()
    private let keyframeWanted = Atomic<Bool>(false)
    private let stopping = Atomic<Bool>(false)

    struct State {
        var history = RetransmissionHistory()
        var rtxSequence = UInt16.random(in: 0...UInt16.max)
        var probePaddingCursor = 0
        var stats = SenderStatistics()
        var video = StreamCounters(clockRate: 90_000)
        var audio = StreamCounters(clockRate: 48_000)
        var roundTripTime: Duration = .milliseconds(50)
        var pacer = Pacer<RTPPacket>(pacingRate: 3_000_000)
        var adapter = TransportFeedbackAdapter()
        var transportSequence: UInt16 = 0
        var estimator: BandwidthEstimator?
        var controller: EncodingController?
        var decisions: [EncodingDecision] = []
        /// Retransmitted bytes of the last second (auto mode budget).
        var retransmissionWindow: [(time: Int64, bytes: Int)] = []
    }
    private let state = Mutex(State())
    let videoTrack: LocalVideoTrack?
    let audioTrack: LocalAudioTrack?
    /// True when the tracks were made here from the configuration (and are closed here).
    let ownsTracks: Bool

    /// `tracks` are a call's published tracks, which outlive one media session; without them the
    /// sender opens the configuration's sources itself and closes them when it ends.
    public init(configuration: MediaSenderConfiguration, transport: (any PacketTransport)? = nil,
                tracks: (video: LocalVideoTrack?, audio: LocalAudioTrack?)? = nil) throws {
        self.configuration = configuration
        if let tracks {
            (videoTrack, audioTrack) = tracks
            ownsTracks = false
        } else {
            videoTrack = try configuration.video.makeTrack(loopFiles: false)
            audioTrack = try configuration.audio.makeTrack(loopFiles: false)
            ownsTracks = true
        }
        videoSSRC = configuration.ssrcs?.video ?? UInt32.random(in: 1...UInt32.max)
        rtxSSRC = configuration.ssrcs?.rtx ?? UInt32.random(in: 1...UInt32.max)
        audioSSRC = configuration.ssrcs?.audio ?? UInt32.random(in: 1...UInt32.max)
        ownsTransport = transport == nil
        if let transport {
            self.transport = transport
        } else {
            let destinations: [MediaKind: UDPAddress] = [
                .video: try UDPAddress(host: configuration.destinationHost, port: configuration.videoPort),
                .audio: try UDPAddress(host: configuration.destinationHost, port: configuration.audioPort),
            ]
            // The receiver's RTCP comes back under the same key (one a=crypto line).
            let keys = configuration.srtp.map { srtp in
                UDPPairTransport.Keys(profile: srtp.profile, send: srtp.keyMaterial, receive: configuration.srtpReceiveKey ?? srtp.keyMaterial)
            }
            self.transport = try UDPPairTransport(sockets: [.video: try UDPSocket(), .audio: try UDPSocket()], destinations: destinations,
                                                  keys: keys.map { [.video: $0, .audio: $0] } ?? [:])
        }
    }

    /// The SDP a receiver (GStreamer, ffmpeg, VLC, `callend receive`) needs.
    public var sessionDescription: SessionDescriptionFile {
        var streams: [StreamDescription] = []
        let crypto = configuration.srtp
        if videoTrack != nil {
            streams.append(StreamDescription(kind: .video, port: configuration.videoPort, payloadType: configuration.payloadTypes.video,
                                             encodingName: "VP8", clockRate: 90_000, feedback: ["nack", "nack pli", "ccm fir"],
                                             ssrc: videoSSRC, cname: cname, crypto: crypto, rtxPayloadType: configuration.payloadTypes.rtx))
        }
        if audioTrack != nil {
            streams.append(StreamDescription(kind: .audio, port: configuration.audioPort, payloadType: configuration.payloadTypes.audio,
                                             encodingName: "opus", clockRate: 48_000, channels: 2, fmtp: "minptime=10;useinbandfec=1",
                                             ssrc: audioSSRC, cname: cname, crypto: crypto))
        }
        return SessionDescriptionFile(connectionAddress: (try? UDPAddress(host: configuration.destinationHost, port: 0).host) ?? configuration.destinationHost,
                                      streams: streams)
    }

    public func stop() { stopping.store(true, ordering: .relaxed) }

    /// The statistics so far, while sending.
    public func snapshot() -> SenderStatistics {
        state.withLock { s in
            var stats = s.stats
            stats.elapsed = clock.now
            return stats
        }
    }

    /// Sends until the duration passes, the sources end, or `stop()`; returns the statistics.
    public func run() throws -> SenderStatistics {
        if ownsTransport {
            transport.startDelivering { [self] packet in if packet.isRTCP { handleRTCP(packet.bytes) } }
        }
        defer { if ownsTransport { transport.close() } }
        let errors = Mutex<[any Error]>([])
        let group = DispatchGroup()
        func spawn(_ name: String, _ body: @escaping @Sendable () throws -> Void) {
            group.enter()
            startThread(named: name) {
                do { try body() } catch { errors.withLock { $0.append(error) } }
                group.leave()
            }
        }
        if videoTrack != nil {
            spawn("video-send") { [self] in try sendVideo() }
            spawn("pacer") { [self] in try pace() }
        }
        if audioTrack != nil { spawn("audio-send") { [self] in try sendAudio() } }
        spawn("rtcp-send") { [self] in
            var next = Duration.seconds(1)
            while !stopping.load(ordering: .relaxed) {
                clock.sleep(until: min(next, clock.now + .milliseconds(50)))
                if clock.now >= next {
                    sendReports()
                    next += .seconds(1)
                }
            }
        }
        // The media threads end by themselves; the report thread ends when they have.
        while true {
            if group.wait(timeout: .now() + 0.05) == .success { break }
            if mediaFinished.load(ordering: .relaxed) >= mediaThreads { stop() }
        }
        sendGoodbye()
        if let error = errors.withLock({ $0.first }) { throw error }
        return state.withLock { s in
            var stats = s.stats
            stats.elapsed = clock.now
            return stats
        }
    }

    private var mediaThreads: Int { (videoTrack != nil ? 1 : 0) + (audioTrack != nil ? 1 : 0) }
    private let videoDone = Atomic<Bool>(false)
    /// Signalled when packets are queued for the pacer.
    private let pacerWake = DispatchSemaphore(value: 0)

    /// Sends what the pacer releases, assigning transport-wide sequence numbers at the moment of
    /// sending, and pads probe clusters; ends when the video thread has and the queue is empty.
    private func pace() throws {
        let extensionID = configuration.transportSequenceExtensionID
        while true {
            let now = clock.now.microseconds
            let (batch, done, wait): ([RTPPacket], Bool, Int64) = state.withLock { s in
                if let estimator = s.estimator {
                    // Frames go out at 1.1x the estimate (a frame is spread over its interval, not
                    // burst: its last packet cannot reach the receiver before the link has carried
                    // it, and spread at 1.5x the frames queued in the bottleneck instead and set off
                    // the delay detector; at 600 kbit/s queue p95 was 35-44 ms, at 1.1x 31-36);
                    // a backlog drains at no more than 2x.
                    s.pacer.pacingRate = estimator.estimate * 11 / 10
                    s.pacer.maxDrainRate = estimator.estimate * 2
                    // Congestion window: video waits while the path holds more than the estimate
                    // times (the shortest feedback delay + 70 ms), so a queue left by a capacity
                    // drop drains at the full link rate instead of at what the cut leaves over.
                    // (With 100 ms, 30 kB at 2.4 Mbit/s went into a 300 ms queue that holds 22.5 kB
                    // at 600 kbit/s, and the fall dropped 0.2-0.6 % of packets; 70 ms dropped none.
                    // Feedback comes every 50 ms, so a window near that would hold video in normal
                    // sending: reasoned, not measured.)
                    // Only while feedback flows (no feedback must not mean no video).
                    // (Never below 6 kB: a few packets always fit, whatever the estimate.)
                    if let newest = s.adapter.newestReported, now - newest.at < 500_000, let base = s.adapter.shortestFeedbackDelay {
                        let window = Int64(estimator.estimate) * (base + 70_000) / 8_000_000
                        s.pacer.holdVideo = Int64(s.adapter.outstandingBytes) > max(window, 6_000)
                    } else {
                        s.pacer.holdVideo = false
                    }
                    // Right after a cut the path is known to be full: no faster than the estimate,
                    // backlog included (frames encoded before the cut wait; pushback skips more).
                    if let cut = estimator.lastDecrease, now - cut < 1_000_000 {
                        s.pacer.pacingRate = estimator.estimate
                        s.pacer.maxDrainRate = estimator.estimate
                    }
                    if !s.pacer.probing, let probe = s.estimator?.probeToSend(now: now) { s.pacer.startProbe(probe, now: now) }
                } else {
                    s.pacer.pacingRate = max(configuration.videoBitrate, configuration.maxVideoBitrate) * 3
                }
                var out: [RTPPacket] = []
                func stamp(_ packet: inout RTPPacket, probe: BandwidthEstimator.ProbeCluster?) {
                    guard let extensionID else { return }
                    let sequence = s.transportSequence
                    s.transportSequence &+= 1
                    packet.setHeaderExtensionElements([HeaderExtensionElement(id: extensionID, data: TransportSequenceNumber.encode(sequence))])
                    let size = packet.serializedSize + transport.overhead
                    s.adapter.packetSent(sequence: sequence, size: size, atMicroseconds: now)
                    if let probe { s.estimator?.probePacketSent(probe, sequence: sequence, size: size, at: now) }
                }
                while let entry = s.pacer.next(now: now) {
                    var packet = entry.item
                    stamp(&packet, probe: entry.probe)
                    out.append(packet)
                }
                if s.estimator != nil && s.pacer.probing, let rtxType = configuration.payloadTypes.rtx {
                    while let bytes = s.pacer.paddingWanted(now: now) {
                        s.rtxSequence &+= 1
                        // Recent video packets sent again on the RTX stream, full size; plain RTP
                        // padding (at most 255 bytes) only when there is nothing to resend.
                        var padding: RTPPacket
                        if let recent = s.history.recent(s.probePaddingCursor % 16) {
                            s.probePaddingCursor += 1
                            padding = RTX.wrap(recent, ssrc: rtxSSRC, payloadType: rtxType, sequenceNumber: s.rtxSequence)
                        } else {
                            padding = RTPPacket(payloadType: rtxType, sequenceNumber: s.rtxSequence, timestamp: 0,
                                                ssrc: rtxSSRC, paddingLength: min(255, bytes))
                        }
                        stamp(&padding, probe: s.pacer.currentProbe)
                        s.pacer.paddingSent(size: padding.serializedSize)
                        s.stats.paddingBytes += padding.serializedSize
                        out.append(padding)
                    }
                }
                // Sleep until the budget allows the next packet, a new packet is queued, or (idle) a
                // probe may be due; during a probe, pad every millisecond.
                let wait: Int64 = s.pacer.probing ? 1_000 : s.pacer.isEmpty ? 20_000 : s.pacer.holdVideo ? 5_000 : max(500, s.pacer.timeUntilNext(now: now))
                return (out, s.pacer.isEmpty && videoDone.load(ordering: .relaxed), wait)
            }
            for packet in batch { send(packet, kind: .video) }
            if done || stopping.load(ordering: .relaxed) { return }
            _ = pacerWake.wait(timeout: .now() + .microseconds(Int(wait)))
        }
    }

    /// Applies a bandwidth estimate to the encoders' settings (auto mode).
    private func adapt(estimator: BandwidthEstimator, cause: String, state s: inout State) {
        guard var controller = s.controller else { return }
        let made = controller.update(estimate: estimator.estimate, lossFraction: estimator.lossFraction, cause: cause, now: clock.now)
        s.stats.estimateBitrate = estimator.estimate
        publish(made, controller: controller, state: &s)
    }

    /// Keeps the controller's new state and reports what it decided (stats, decision log).
    private func publish(_ made: [EncodingDecision], controller: EncodingController, state s: inout State) {
        s.controller = controller
        s.stats.videoTargetBitrate = controller.videoBitrate
        s.stats.audioTargetBitrate = controller.audioBitrate
        s.stats.mode = controller.mode.description
        guard !made.isEmpty else { return }
        s.stats.decisions = Array((s.stats.decisions + made).suffix(20))
        if let onDecision = configuration.onDecision { for d in made { onDecision(d) } }
    }
    private let mediaFinished = Atomic<Int>(0)

    private func shouldContinue(_ elapsed: Duration) -> Bool {
        !stopping.load(ordering: .relaxed) && configuration.duration.map { elapsed < $0 } ?? true
    }

    /// A packet the transport cannot send is counted: a network that is down for a while must
    /// not end the direction.
    private func send(_ packet: RTPPacket, kind: MediaKind) {
        if !transport.sendRTP(packet.serialized(), kind: kind) { state.withLock { $0.stats.sendErrors += 1 } }
    }

    private func sendVideo() throws {
        defer { mediaFinished.add(1, ordering: .relaxed) }
        guard let track = videoTrack else { return }
        let source = track.source
        let frames = CaptureQueue<VideoFrame?>(capacity: 1)  // the newest picture only: an encoder that falls behind skips
        let modeChanged = Atomic<Bool>(false)
        source.start { output in
            switch output {
            case .frame(let frame): frames.put(frame)
            case .modeChanged: modeChanged.store(true, ordering: .relaxed)
            case .ended: frames.put(nil)
            }
        }
        defer {
            ownsTracks ? source.stop() : source.detach()
            videoDone.store(true, ordering: .relaxed)
        }
        let auto = configuration.encodingMode == .auto && configuration.transportSequenceExtensionID != nil
        var appliedBitrate = 0
        var appliedMode: VideoMode?
        // The ladder is built for the input it was made from: a switch to another camera, or a
        // pattern or file of another size or rate, builds a new one (the ladder's own mode
        // changes of a camera do not: a camera is known by its path).
        var ownRequest: CameraModeRequest?
        func identity(_ input: CameraInput, _ frame: VideoFrame) -> String {
            // A mode the user asked for is a new input; one the ladder asked for is not.
            if case .device(let path, let request) = input { return request == ownRequest ? path : "\(path) \(request?.description ?? "") \(frame.width)x\(frame.height)" }
            return "\(frame.width)x\(frame.height)@\(Int(source.format.frameRate.rounded()))"
        }
        var ladderInput: String?
        /// The ladder for what the source delivers now: the camera's real modes, or scaling.
        func ladder(for frame: VideoFrame) -> ModeLadder {
            let native = VideoMode(width: frame.width, height: frame.height, frameRate: max(1, Int(source.format.frameRate.rounded())))
            if case .device = source.input { return .forCamera(source.offeredModes, native: native) }
            return .forScaling(native: native)
        }
        var lastEncoded: Duration?
        /// The time libvpx was last told, and the sender's clock then.
        var shown: (encoder: Duration, clock: Duration)?
        var encoder: VP8Encoder?
        var packetizer = VP8Packetizer(initialPictureID: UInt16.random(in: 0...0x7fff))
        var sequence = UInt16.random(in: 0...UInt16.max)
        let timestampBase = UInt32.random(in: 0...UInt32.max)
        while shouldContinue(clock.now) {
            guard let item = frames.take(timeout: .milliseconds(100)) else { continue }
            guard var frame = item else { break }
            if !track.isEnabled { frame = VideoFrame(width: frame.width, height: frame.height, timestamp: frame.timestamp, luma: 16) }
            let now = clock.now
            if auto {
                // The ladder comes from what the source really offers, once it delivers.
                let input = identity(source.input, frame)
                let rebuild = ladderInput != input
                ladderInput = input
                let (bitrate, mode, activeLadder) = state.withLock { s -> (Int, VideoMode, ModeLadder) in
                    if rebuild, let estimator = s.estimator, let old = s.controller {
                        s.controller = EncodingController(ladder: ladder(for: frame), maxVideoBitrate: old.maxVideoBitrate, startBitrate: old.videoBitrate)
                        adapt(estimator: estimator, cause: "switch", state: &s)
                    }
                    if s.controller == nil {
                        let estimator = BandwidthEstimator(configuration: {
                            var c = BandwidthEstimator.Configuration()
                            c.startBitrate = min(800_000, configuration.maxVideoBitrate)
                            c.maxBitrate = configuration.maxVideoBitrate + 64_000
                            return c
                        }())
                        s.controller = EncodingController(ladder: ladder(for: frame), maxVideoBitrate: configuration.maxVideoBitrate, startBitrate: estimator.estimate)
                        s.estimator = estimator
                        adapt(estimator: estimator, cause: BandwidthEstimator.Cause.start.rawValue, state: &s)
                    }
                    return (s.controller!.videoBitrate, s.controller!.mode, s.controller!.ladder)
                }
                if mode != appliedMode {
                    if activeLadder.usesCameraModes, case .device(let path, _) = source.input {
                        // A real mode change: the camera delivers the new size (one keyframe follows).
                        let request = CameraModeRequest(width: mode.width, height: mode.height, frameRate: mode.frameRate)
                        if (try? source.select(.device(path: path, mode: request))) != nil {
                            ownRequest = request
                            ladderInput = identity(source.input, frame)
                        }
                    }
                    appliedMode = mode
                }
                // Sources that cannot change mode get scaled pictures and dropped frames.
                if (frame.width, frame.height) != (mode.width, mode.height) {
                    frame = try frame.scaled(width: mode.width, height: mode.height, filter: .bilinear)
                }
                let interval = Duration.microseconds(1_000_000 / Int64(max(1, mode.frameRate)))
                if let last = lastEncoded, now - last < interval - .milliseconds(8) { continue }
                lastEncoded = now
                if bitrate != appliedBitrate, let running = encoder {
                    try running.setTargetBitrate(bitrate)
                    appliedBitrate = bitrate
                }
            }
            if let running = encoder {
                try running.setResolution(width: frame.width, height: frame.height)
            } else {
                let rate = max(1, Int(source.format.frameRate.rounded()))
                var settings = VP8EncoderConfiguration(width: frame.width, height: frame.height, frameRate: rate, targetBitrate: configuration.videoBitrate)
                // Auto mode changes mode under congestion: a keyframe may cost at most three
                // average frames, so a step down does not overfill the smaller pipe.
                if auto { settings.maxIntraBitratePercent = 300 }
                encoder = try VP8Encoder(configuration: settings)
            }
            guard let encoder else { break }
            // Encoder pushback: while the pacer still holds more than 100 ms of earlier frames, a
            // picture would only wait behind them; skip it (the rate controller sees the gap in
            // timestamps and the next frame carries the motion).
            if auto, state.withLock({ s in
                guard s.pacer.queueDelay(now: now.microseconds) > 100_000 else { return false }
                s.stats.framesHeldBack += 1
                return true
            }) { continue }
            if modeChanged.exchange(false, ordering: .relaxed) || keyframeWanted.exchange(false, ordering: .relaxed) { encoder.requestKeyframe() }
            let timestamp = timestampBase &+ UInt32(truncatingIfNeeded: Int64(now.secondsDouble * 90_000))
            // The time libvpx is told follows the sender's clock, not the source's timestamps (a
            // looping file repeats them, and auto mode skips pictures to lower the frame rate);
            // but a gap of more than one and a half frame intervals (pictures held back by
            // pushback, a stalled source) counts as one interval: libvpx budgets a frame for the
            // time since the last, and a held-back gap became one oversized frame that filled
            // the pacer again.
            let frameInterval = Duration.microseconds(1_000_000 / Int64(max(1, appliedMode?.frameRate ?? Int(source.format.frameRate.rounded()))))
            let encoderTime = shown.map { $0.encoder + (now - $0.clock <= frameInterval * 3 / 2 ? now - $0.clock : frameInterval) } ?? now
            shown = (encoderTime, now)
            let encodeStart = ContinuousClock.now
            let encodedFrames = try encoder.encode(frame, at: encoderTime)
            if auto {
                // The encoder's own state may step the mode down: too slow for the frame rate
                // (cpu) or at its coarsest quantizer (qp).
                let took = ContinuousClock.now - encodeStart
                state.withLock { s in
                    guard var controller = s.controller else { return }
                    let made = controller.encoderReport(quantizer: encodedFrames.first?.quantizer, encodeTime: took, now: now)
                    publish(made, controller: controller, state: &s)
                }
            }
            for encoded in encodedFrames {
                let payloads = packetizer.packetize(encoded.data)
                for (i, payload) in payloads.enumerated() {
                    let packet = RTPPacket(payloadType: configuration.payloadTypes.video, sequenceNumber: sequence, timestamp: timestamp,
                                           ssrc: videoSSRC, marker: i == payloads.count - 1, payload: payload)
                    sequence &+= 1
                    let sentAt = clock.now
                    state.withLock { s in
                        s.history.store(packet, sentAt: sentAt)
                        s.video.record(packet, at: sentAt)
                        s.stats.videoPackets += 1
                        s.stats.videoBytes += packet.serializedSize
                        s.pacer.enqueue(packet, size: packet.serializedSize, priority: .video, now: sentAt.microseconds)
                    }
                    pacerWake.signal()
                }
                state.withLock { s in
                    s.stats.videoFrames += 1
                    if encoded.isKeyframe { s.stats.keyframes += 1 }
                    s.stats.videoWidth = frame.width
                    s.stats.videoHeight = frame.height
                }
            }
        }
    }

    private func sendAudio() throws {
        defer { mediaFinished.add(1, ordering: .relaxed) }
        guard let track = audioTrack else { return }
        let device = track.device
        let blocks = CaptureQueue<[Int16]>(capacity: 10)  // 200 ms: a stalled encoder drops the oldest
        try device.startCapture { blocks.put($0) }
        defer { ownsTracks ? device.stopCapture() : try? device.startCapture { _ in } }
        var encoder: OpusEncoder?
        var audioSettings = (bitrate: configuration.audioBitrate, fec: -1)
        var sequence = UInt16.random(in: 0...UInt16.max)
        var timestamp = UInt32.random(in: 0...UInt32.max)
        var first = true
        while shouldContinue(clock.now) {
            guard var samples = blocks.take(timeout: .milliseconds(100)) else { continue }
            guard !samples.isEmpty else { break }  // a file source ran out
            let channels = samples.count / AudioBlock.frames
            guard channels == 1 || channels == 2, samples.count == AudioBlock.frames * channels else { continue }
            if encoder?.channels != channels {
                // The first block, or a microphone switch to a device with another channel count.
                let e = try OpusEncoder(channels: channels, application: .voip, bitrate: configuration.audioBitrate)
                try e.setInbandFEC(enabled: true, expectedLossPercent: 10)
                encoder = e
            }
            if !track.isEnabled { samples = [Int16](repeating: 0, count: samples.count) }
            // Auto mode: the controller's Opus bitrate and FEC (expected loss) follow the estimate.
            if let (bitrate, fec) = state.withLock({ s in s.controller.map { ($0.audioBitrate, $0.fecLossPercent) } }),
               bitrate != audioSettings.bitrate || fec != audioSettings.fec {
                try encoder!.setBitrate(bitrate)
                try encoder!.setInbandFEC(enabled: true, expectedLossPercent: max(fec, 5))
                audioSettings = (bitrate, fec)
            }
            let payload = try encoder!.encode(samples)
            let packet = RTPPacket(payloadType: configuration.payloadTypes.audio, sequenceNumber: sequence, timestamp: timestamp,
                                   ssrc: audioSSRC, marker: first, payload: payload)
            first = false
            let now = clock.now
            state.withLock { s in
                s.audio.record(packet, at: now)
                s.stats.audioPackets += 1
                s.stats.audioBytes += packet.serializedSize
            }
            send(packet, kind: .audio)
            sequence &+= 1
            timestamp &+= UInt32(AudioBlock.frames)
        }
    }

    /// SR + SDES per stream (RFC 3550 §6.4.1, §6.5), RTP time extrapolated to now.
    private func sendReports() {
        let now = clock.now
        let ntp = clock.ntpNow
        let (video, audio) = state.withLock { s in
            (s.video.report(ssrc: videoSSRC, ntp: ntp, now: now), s.audio.report(ssrc: audioSSRC, ntp: ntp, now: now))
        }
        if videoTrack != nil {
            sendRTCP([.senderReport(video), .sourceDescription(SourceDescription(ssrc: videoSSRC, cname: cname))], kind: .video)
        }
        if audioTrack != nil {
            sendRTCP([.senderReport(audio), .sourceDescription(SourceDescription(ssrc: audioSSRC, cname: cname))], kind: .audio)
        }
    }

    private func sendGoodbye() {
        if videoTrack != nil {
            sendRTCP([.goodbye(Goodbye(sources: [videoSSRC], reason: "done"))], kind: .video)
        }
        if audioTrack != nil {
            sendRTCP([.goodbye(Goodbye(sources: [audioSSRC], reason: "done"))], kind: .audio)
        }
    }

    private func sendRTCP(_ packets: [RTCPPacket], kind: MediaKind) {
        transport.sendRTCP(RTCPPacket.serializeCompound(packets), kind: kind)
    }

    /// The peer's RTCP (clear): NACK, PLI, FIR, transport-cc feedback, reception reports.
    func handleRTCP(_ bytes: [UInt8]) {
        guard isRTCP(bytes) else { return }
        guard let packets = try? RTCPPacket.parseCompound(bytes) else { return }
        let arrivalNTP = clock.ntpNow
        for packet in packets {
            switch packet {
            case .nack(let nack) where nack.mediaSSRC == videoSSRC && configuration.payloadTypes.rtx != nil:
                let now = clock.now
                let answer = state.withLock { s -> RetransmissionHistory.Answer in
                    s.stats.nacksReceived += 1
                    return s.history.answer(nack.lostSequenceNumbers, now: now, roundTripTime: s.roundTripTime)
                }
                // Retransmissions are paced and counted like media (a burst of them must not
                // flood the bottleneck it was lost in).
                state.withLock { s in
                    let at = now.microseconds
                    s.retransmissionWindow.removeAll { $0.time < at - 1_000_000 }
                    for original in answer.packets {
                        if let estimator = s.estimator {
                            // Auto mode: retransmissions may use half of the estimate, and none
                            // while the pacer is backed up (they would deepen the congestion that
                            // lost the packets; the receiver asks for a keyframe if it must).
                            let spent = s.retransmissionWindow.reduce(0) { $0 + $1.bytes }
                            if (spent + original.serializedSize) * 8 > estimator.estimate / 2 || s.pacer.queueDelay(now: at) > 150_000 {
                                s.stats.retransmissionsRefused += 1
                                continue
                            }
                            s.retransmissionWindow.append((at, original.serializedSize))
                        }
                        s.rtxSequence &+= 1
                        s.stats.retransmitted += 1
                        let rtx = RTX.wrap(original, ssrc: rtxSSRC, payloadType: configuration.payloadTypes.rtx ?? 97, sequenceNumber: s.rtxSequence)
                        s.pacer.enqueue(rtx, size: rtx.serializedSize, priority: .retransmission, now: now.microseconds)
                    }
                }
                pacerWake.signal()
                if answer.keyframeInstead { keyframeWanted.store(true, ordering: .relaxed) }
            case .pictureLossIndication(let pli) where pli.mediaSSRC == videoSSRC:
                keyframeWanted.store(true, ordering: .relaxed)
                state.withLock { $0.stats.keyframeRequests += 1 }
            case .fullIntraRequest(let fir) where fir.entries.contains { $0.ssrc == videoSSRC }:
                keyframeWanted.store(true, ordering: .relaxed)
                state.withLock { $0.stats.keyframeRequests += 1 }
            case .transportFeedback(let feedback):
                let now = clock.now.microseconds
                state.withLock { s in
                    guard var estimator = s.estimator, let results = try? s.adapter.results(for: feedback, now: now) else { return }
                    let change = estimator.onFeedback(results, now: now)
                    s.estimator = estimator
                    adapt(estimator: estimator, cause: (change?.cause ?? .increase).rawValue, state: &s)
                }
            case .receiverReport(let rr):
                absorb(rr.reports, arrivalNTP: arrivalNTP)
            case .senderReport(let sr):
                absorb(sr.reports, arrivalNTP: arrivalNTP)
            default:
                break
            }
        }
    }

    private func absorb(_ reports: [ReceptionReport], arrivalNTP: UInt64) {
        for report in reports where report.ssrc == videoSSRC || report.ssrc == audioSSRC {
            state.withLock { s in
                if let rtt = NTPTime.roundTripTime(reportArrivalNTP: arrivalNTP, report: report) {
                    s.roundTripTime = rtt
                    s.stats.roundTripTime = rtt
                }
                if report.ssrc == videoSSRC { s.stats.receiverLossFraction = Double(report.fractionLost) / 256 }
            }
        }
    }
}

/// What a sender report says about one stream (RFC 3550 §6.4.1): packets and payload octets sent,
/// and the RTP time of the last packet, extrapolated to the moment of the report.
struct StreamCounters {
    let clockRate: Double
    var packets: UInt32 = 0
    var octets: UInt32 = 0
    var lastTimestamp: UInt32 = 0
    var lastTime: Duration = .zero

    init(clockRate: Double) { self.clockRate = clockRate }

    mutating func record(_ packet: RTPPacket, at time: Duration) {
        packets &+= 1
        octets &+= UInt32(packet.payload.count)
        lastTimestamp = packet.timestamp
        lastTime = time
    }

    func report(ssrc: UInt32, ntp: UInt64, now: Duration) -> SenderReport {
        SenderReport(ssrc: ssrc, ntpTimestamp: ntp,
                     rtpTimestamp: lastTimestamp &+ UInt32(truncatingIfNeeded: Int64((now - lastTime).secondsDouble * clockRate)),
                     packetCount: packets, octetCount: octets)
    }
}

/// Hands captured items from a device thread to the sending thread: a bounded FIFO that drops
/// the oldest item when full (a sender that falls behind skips, it never queues up latency).
final class CaptureQueue<Item: Sendable>: Sendable {
    private let items = Mutex<[Item]>([])
    private let available = DispatchSemaphore(value: 0)
    let capacity: Int

    init(capacity: Int) { self.capacity = capacity }

    func put(_ item: Item) {
        let dropped = items.withLock { q -> Bool in
            q.append(item)
            guard q.count > capacity else { return false }
            q.removeFirst()
            return true
        }
        if !dropped { available.signal() }
    }

    /// The oldest item, waiting up to `timeout`; nil when none came.
    func take(timeout: Duration) -> Item? {
        guard available.wait(timeout: .now() + timeout.secondsDouble) == .success else { return nil }
        return items.withLock { $0.isEmpty ? nil : $0.removeFirst() }
    }
}

extension MediaSenderConfiguration.VideoSource {
    /// Opens this source as a track (nil for `.none`).
    public func makeTrack(loopFiles: Bool) throws -> LocalVideoTrack? {
        let input: CameraInput
        switch self {
        case .none: return nil
        case .pattern(let w, let h, let f): input = .pattern(width: w, height: h, frameRate: f)
        case .y4m(let path): input = .file(path: path)
        case .camera(let path, let mode): input = .device(path: path, mode: mode)
        }
        return LocalVideoTrack(source: try CameraSource(input, loopFiles: loopFiles))
    }
}

extension MediaSenderConfiguration.AudioSource {
    /// Opens this source as a track (nil for `.none`).
    public func makeTrack(loopFiles: Bool) throws -> LocalAudioTrack? {
        switch self {
        case .none: return nil
        case .tone: return LocalAudioTrack(device: try SyntheticAudioDevice(source: .tone))
        case .wav(let path): return LocalAudioTrack(device: try SyntheticAudioDevice(source: .wav(path: path), loop: loopFiles))
        case .alsa(let pcm): return LocalAudioTrack(device: try ALSAAudioDevice { $0.capturePCM = pcm; $0.playbackPCM = nil })
        }
    }
}
