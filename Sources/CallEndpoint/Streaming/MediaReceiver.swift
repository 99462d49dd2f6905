import Codecs
import MediaCore
import Devices
import Foundation
import Platform
import RTPTransport
import Synchronization

/// What `callend receive` listens for (from an SDP file) and where the media goes.
public struct MediaReceiverConfiguration: Sendable {
    public var description: SessionDescriptionFile
    public var listenHost = "0.0.0.0"
    /// The key this side protects its RTCP with, when it is not the stream's (a call: our own key).
    public var srtpSendKey: [UInt8]?
    /// Files to write (made into a renderer and a playout device the receiver owns and closes).
    public var videoOutput: String?
    public var audioOutput: String?
    /// A call's renderers and speaker, which outlive one media session (the call closes them).
    public var videoRenderers: [any VideoRenderer] = []
    public var audioPlayout: (any AudioDevice)?
    /// The RFC 8285 ID of the transport-wide sequence number on the video port: when set, every
    /// packet's arrival is reported back in transport-cc feedback every 50 ms (the sender's
    /// bandwidth estimator reads it).
    public var transportSequenceExtensionID: UInt8?
    public var duration: Duration?
    /// After this long without any packet, RTP or RTCP, once media has flowed, the peer is
    /// silent: RTCP arrives every second even from a muted sender. `callend receive` then stops
    /// (the sender went away); a call counts an outage and waits for the path to return.
    public var idleTimeout: Duration = .seconds(3)
    public var silenceEndsSession = true

    public init(description: SessionDescriptionFile) {
        self.description = description
    }
}

public struct ReceiverSummary: Sendable, CustomStringConvertible {
    public var videoPackets = 0
    public var videoPacketsLost: Int64 = 0
    public var retransmissionsReceived = 0
    public var framesDecoded = 0
    /// Frames given up on: incomplete ones the jitter buffer skipped, and complete ones skipped
    /// because decoding had fallen behind.
    public var framesDropped = 0
    /// Pictures decoded but not rendered because a newer one was already waiting (a renderer
    /// slower than the frame rate).
    public var picturesNotRendered = 0
    public var decodeErrors = 0
    public var keyframes = 0
    public var nacksSent = 0
    public var pliSent = 0
    public var audioPackets = 0
    public var audioDecoded = 0
    public var audioRecoveredByFEC = 0
    public var audioConcealed = 0
    public var videoJitterMs = 0.0
    public var elapsed: Duration = .zero
    public var firstFrameNumbers: [Int] = []
    /// Capture-to-decode time of frames carrying the test pattern's capture stamp, in ms (in
    /// fixed memory, however long the call).
    public var videoLatencyMs = PercentileSketch()
    /// Capture-to-playout time of the sender's audio timing marks, in ms.
    public var audioLatencyMs = PercentileSketch()
    /// When the first frame was decoded (since the receiver started).
    public var firstFrameAt: Duration?
    /// Why receiving ended early (bye, silence), empty when it ran its course.
    public var endReason = ""
    /// Video delay minus audio delay (capture to playout, by the sender reports), ms: positive
    /// when the picture comes after the sound. Nil until both streams have sender reports.
    public var avOffsetMs: Double?
    /// Pictures that came 300 ms or more after the one before (a viewer sees the video stop),
    /// and the longest such wait.
    public var freezes = 0
    public var longestFreeze: Duration = .zero
    /// When the last picture was decoded.
    public var lastFrameAt: Duration?
    /// What lip sync holds back to cancel that offset: the picture, the sound (ms).
    public var lipSyncHoldMs: (video: Double, audio: Double) = (0, 0)
    /// Outages: silences longer than the idle timeout (a call goes on through them).
    public var outages = 0
    /// Since when the peer has been silent, when it is now (the time of its last packet).
    public var silentSince: Duration?
    /// Size of the last decoded picture.
    public var videoWidth = 0
    public var videoHeight = 0

    public var description: String {
        String(format: "received %.1f s: video %d packets (%lld lost, %d retransmissions), %d frames decoded (%d keyframes, %d dropped, %d decode errors), jitter %.1f ms; NACKs sent %d, PLIs %d; audio %d packets, %d decoded, %d from FEC, %d concealed",
               elapsed.inSeconds, videoPackets, videoPacketsLost, retransmissionsReceived, framesDecoded, keyframes, framesDropped,
               decodeErrors, videoJitterMs, nacksSent, pliSent, audioPackets, audioDecoded, audioRecoveredByFEC, audioConcealed)
    }
}

/// Receives the streams an SDP describes, each on its own port with RTCP multiplexed: reorders
/// and reassembles video (asking for lost packets with NACK and for keyframes with PLI), plays
/// audio through a jitter buffer with FEC and concealment, writes Y4M/IVF and WAV files, and sends
/// receiver reports. Decoding and audio playout run on threads of their own; what arrives, the
/// feedback and the reports on the media loop (`MediaLoop`).
public final class MediaReceiver: @unchecked Sendable {  // mutable state is inside `state`, `nextReport` is the loop thread's
    public let configuration: MediaReceiverConfiguration
    let videoStream: StreamDescription?
    let audioStream: StreamDescription?
    /// Where packets come from: the SDP file's two ports (made here), or a call's transport.
    let transport: any PacketTransport
    let ssrc = UInt32.random(in: 1...UInt32.max)
    /// False when a call owns the transport and routes packets here itself.
    let ownsTransport: Bool
    let clock = StreamClock()
    private let stopping = Atomic<Bool>(false)
    let loop: MediaLoop

    struct State {
        var videoBuffer = VideoJitterBuffer(minimumDelay: .milliseconds(20))
        /// When each outstanding NACKed sequence number was last asked for, to time the round trip.
        var nackSentAt: [UInt16: Duration] = [:]
        /// Smoothed NACK → retransmission time (RFC 6298 style, 1/8 gain); a receiver-only endpoint
        /// has no other RTT measure.
        var roundTripTime: Duration = .milliseconds(50)
        var audioBuffer = AudioJitterBuffer(minimumDelay: MediaReceiver.audioBaseDelay)
        var nack = NACKGenerator()
        var throttle = KeyframeRequestThrottle()
        var videoStats: ReceiverStatistics?
        var audioStats: ReceiverStatistics?
        var audioDecoder: OpusDecoder?
        var summary = ReceiverSummary()
        var lastPacket: Duration?
        var needKeyframe = false
        var goodbyes = Set<UInt32>()
        var audioLatency = AudioLatencyMeter()
        var errors: [String] = []
        var transportFeedback: TransportFeedbackGenerator?
        var lastTransportFeedback: Duration = .zero
        var lipSync = LipSync()
        /// What lip sync holds back now: the picture, or the sound (s).
        var holds = (video: 0.0, audio: 0.0)
    }
    /// The audio jitter buffer's own least delay, before lip sync adds to it.
    static let audioBaseDelay = Duration.milliseconds(40)
    private let state: Mutex<State>
    /// Decoding and rendering, off the network thread and the lock.
    private let videoStage: VideoDecodeStage
    let renderers: [any VideoRenderer]
    let speaker: (any AudioDevice)?
    /// What the receiver made from output paths itself, and so closes itself.
    let ownedRenderers: [any VideoRenderer]
    let ownedPlayout: (any AudioDevice)?

    public convenience init(configuration: MediaReceiverConfiguration, transport: (any PacketTransport)? = nil) throws {
        try self.init(configuration: configuration, transport: transport, loop: MediaLoop())
    }

    /// `loop`: the media loop the receiver runs on (a call's, shared with its sender).
    init(configuration: MediaReceiverConfiguration, transport: (any PacketTransport)?, loop: MediaLoop) throws {
        self.configuration = configuration
        self.loop = loop
        let streams = configuration.description.streams
        videoStream = streams.first { $0.kind == .video }
        audioStream = streams.first { $0.kind == .audio }
        if let v = videoStream, v.encodingName.uppercased() != "VP8" {
            throw ParseError("SDP", "video is \(v.encodingName); callend receives VP8")
        }
        if let a = audioStream, a.encodingName.lowercased() != "opus" {
            throw ParseError("SDP", "audio is \(a.encodingName); callend receives Opus")
        }
        ownsTransport = transport == nil
        if let transport {
            self.transport = transport
        } else {
            // The SDP file's ports; RTCP goes back to whoever sends, under the stream's own key.
            var sockets: [MediaKind: UDPSocket] = [:], keys: [MediaKind: UDPPairTransport.Keys] = [:]
            for (kind, stream) in [(MediaKind.video, videoStream), (.audio, audioStream)] {
                guard let stream else { continue }
                sockets[kind] = try UDPSocket(bindHost: configuration.listenHost, port: stream.port)
                if let crypto = stream.crypto {
                    keys[kind] = .init(profile: crypto.profile, send: configuration.srtpSendKey ?? crypto.keyMaterial, receive: crypto.keyMaterial)
                }
            }
            self.transport = try UDPPairTransport(sockets: sockets, keys: keys)
        }
        var initial = State()
        initial.videoBuffer.retransmissionWait = Self.retransmissionWait(roundTripTime: initial.roundTripTime)
        initial.audioDecoder = try OpusDecoder(channels: 2)
        state = Mutex(initial)
        ownedRenderers = configuration.videoOutput.map { [VideoRenderers.forPath($0)] } ?? []
        // A call's speaker, when given, is where audio goes; an output path is then not opened.
        ownedPlayout = configuration.audioPlayout != nil ? nil : try configuration.audioOutput.map { try SyntheticAudioDevice(source: .silence, outputPath: $0) }
        renderers = configuration.videoRenderers + ownedRenderers
        speaker = configuration.audioPlayout ?? ownedPlayout
        videoStage = try VideoDecodeStage(renderers: renderers, clock: clock)
        videoStage.start { [weak self] outcome in self?.decoded(outcome) }
    }

    deinit { videoStage.stop(wait: false) }

    public func stop() {
        stopping.store(true, ordering: .relaxed)
        loop.wake()
    }

    /// Time for three NACK attempts (the NACK generator re-asks every max(20 ms, 1.5 RTT)) plus
    /// the feedback tick and reordering grace: how long a hole may take to fill.
    static func retransmissionWait(roundTripTime: Duration) -> Duration {
        .milliseconds(15) + max(.milliseconds(20), roundTripTime * 3 / 2) * 3
    }

    /// Receives until the duration passes, the peer says BYE or goes silent, or `stop()`, on a
    /// media loop of the receiver's own; returns the summary.
    public func run() throws -> ReceiverSummary {
        if ownsTransport { transport.startDelivering { [loop] packet in loop.deliver(packet) } }
        try start()
        loop.run { [self] packets in
            for packet in packets { receive(packet) }
            return step()
        }
        if ownsTransport { transport.close() }
        return finish()
    }

    /// Starts audio playout; the media loop then gives `receive` what came and runs `step` until
    /// it returns nil, and `finish`.
    func start() throws {
        if audioStream != nil {
            try speaker?.startPlayout()
            playout.enter()
            startThread(named: "audio-playout") { [self] in
                playAudio()
                playout.leave()
            }
        }
    }

    /// One turn of the media loop: the end of the session (duration, BYE, silence), outages,
    /// feedback, and every second the reports and lip sync. Nil when receiving is over; else how
    /// long the loop may wait: until the next NACK or transport-cc feedback may be due, the next
    /// report, or the silence the idle timeout watches for.
    func step() -> Duration? {
        guard !stopping.load(ordering: .relaxed) else { return nil }
        let now = clock.now
        if let limit = configuration.duration, now >= limit { return nil }
        let (idle, allGone) = state.withLock { s in
            (s.lastPacket.map { now - $0 > configuration.idleTimeout } ?? false,
             !s.goodbyes.isEmpty && s.goodbyes.count >= (videoStream == nil ? 0 : 1) + (audioStream == nil ? 0 : 1))
        }
        if allGone || idle && configuration.silenceEndsSession {
            state.withLock { $0.summary.endReason = allGone ? "peer said bye" : "peer silent for \(configuration.idleTimeout)" }
            return nil
        }
        if idle {
            state.withLock { s in
                if s.summary.silentSince == nil {
                    s.summary.silentSince = s.lastPacket
                    s.summary.outages += 1
                }
            }
        }
        let feedbackDue = sendFeedback(now: now)
        if now >= nextReport {
            sendReports(now: now)
            alignPlayout()
            nextReport = now + .seconds(1)
        }
        var wait = min(nextReport - now, .milliseconds(100))
        if let feedbackDue { wait = min(wait, max(.milliseconds(1), feedbackDue - now)) }
        if let limit = configuration.duration { wait = min(wait, limit - now) }
        return wait
    }

    /// After the loop: playout and decoding end, owned outputs are closed; the summary.
    func finish() -> ReceiverSummary {
        stop()
        playout.wait()
        videoStage.stop()
        for renderer in ownedRenderers { renderer.finish() }
        ownedPlayout?.stopPlayout()
        return state.withLock { summarize($0) }
    }

    /// When the next receiver reports go (used by the loop's thread only).
    private var nextReport = Duration.seconds(1)
    private let playout = DispatchGroup()

    /// The statistics so far, while receiving.
    public func snapshot() -> ReceiverSummary { state.withLock { summarize($0) } }

    private func summarize(_ s: State) -> ReceiverSummary {
        var summary = s.summary
        summary.elapsed = clock.now
        summary.videoPacketsLost = s.videoStats?.cumulativeLost ?? 0
        let stage = videoStage.counts
        summary.framesDropped = s.videoBuffer.framesDropped + stage.skipped
        summary.picturesNotRendered = stage.notRendered
        summary.videoJitterMs = s.videoBuffer.jitterSeconds * 1000
        summary.audioRecoveredByFEC = s.audioBuffer.recoveredByFEC
        summary.audioConcealed = s.audioBuffer.concealed
        summary.avOffsetMs = s.lipSync.offset.map { $0 * 1000 }
        summary.lipSyncHoldMs = (s.holds.video * 1000, s.holds.audio * 1000)
        return summary
    }


    /// One packet from the transport (clear): RTCP is handled here; RTP goes to the video or
    /// audio path by the kind the transport knows, else by payload type (a bundled transport
    /// carries both); anything that does not parse or belongs to neither is dropped.
    public func receive(_ received: ReceivedPacket) {
        // When the kernel stamped the datagram, when known, not when this thread got to it.
        let arrival = clock.now - received.age
        if received.isRTCP {
            handleRTCP(received.bytes, arrival: arrival)
            return
        }
        guard let packet = try? RTPPacket(parsing: received.bytes) else { return }
        let video = videoStream.map { packet.payloadType == $0.payloadType || packet.payloadType == $0.rtxPayloadType } ?? false
        let audio = audioStream.map { packet.payloadType == $0.payloadType } ?? false
        switch received.kind {
        case .video?: if video { receiveVideo(packet, arrival: arrival) }
        case .audio?: if audio { receiveAudio(packet, arrival: arrival) }
        case nil:
            if video { receiveVideo(packet, arrival: arrival) } else if audio { receiveAudio(packet, arrival: arrival) }
        }
    }

    // MARK: Video

    private func receiveVideo(_ received: RTPPacket, arrival: Duration) {
        guard let stream = videoStream else { return }
        var packet = received
        state.withLock { s in
            s.lastPacket = arrival
            s.summary.silentSince = nil
            recordTransportSequence(packet, arrival: arrival, state: &s)
            guard !packet.payload.isEmpty else { return }  // padding only (a bandwidth probe)
            if let rtx = stream.rtxPayloadType, packet.payloadType == rtx {
                guard let mediaSSRC = s.videoStats?.ssrc,
                      let original = try? RTX.unwrap(packet, mediaSSRC: mediaSSRC, mediaPayloadType: stream.payloadType) else { return }
                packet = original
                // An RTX packet nobody asked for is a probe's payload padding: it counts for
                // congestion control above, and the jitter buffer drops it as a duplicate.
                if let asked = s.nackSentAt.removeValue(forKey: original.sequenceNumber) {
                    s.summary.retransmissionsReceived += 1
                    s.roundTripTime = s.roundTripTime * 7 / 8 + (arrival - asked) / 8
                    s.videoBuffer.retransmissionWait = Self.retransmissionWait(roundTripTime: s.roundTripTime)
                }
            } else {
                guard packet.payloadType == stream.payloadType else { return }
                if s.videoStats == nil { s.videoStats = ReceiverStatistics(ssrc: packet.ssrc, clockRate: 90_000) }
                s.videoStats?.received(sequenceNumber: packet.sequenceNumber, rtpTimestamp: packet.timestamp, arrival: arrival)
                s.summary.videoPackets += 1
            }
            s.nack.received(packet.sequenceNumber, now: arrival)
            _ = s.videoBuffer.insert(packet, arrival: arrival)
            videoStage.submit(s.videoBuffer.popFrames(now: arrival))
        }
    }

    /// What the decode stage made of a frame (on its thread).
    private func decoded(_ outcome: VideoDecodeStage.Outcome) {
        guard case .decoded(let picture, let isKeyframe, let rtpTimestamp) = outcome else {
            state.withLock { s in
                s.summary.decodeErrors += 1
                s.needKeyframe = true
            }
            return
        }
        let latency = TestPatternSource.captureAge(of: picture).map { Double($0.inMilliseconds) }
        let wantsNumber = state.withLock { $0.summary.firstFrameNumbers.count < 5 }
        let number = wantsNumber ? TestPatternReader.frameNumber(in: picture) : nil
        state.withLock { s in
            s.summary.framesDecoded += 1
            let at = clock.now
            if let last = s.summary.lastFrameAt, at - last >= .milliseconds(300) {
                s.summary.freezes += 1
                s.summary.longestFreeze = max(s.summary.longestFreeze, at - last)
            }
            s.summary.lastFrameAt = at
            s.lipSync.videoShown(rtp: rtpTimestamp, at: Date().timeIntervalSince1970)
            if s.summary.firstFrameAt == nil { s.summary.firstFrameAt = clock.now }
            if isKeyframe { s.summary.keyframes += 1 }
            if let latency { s.summary.videoLatencyMs.add(latency) }
            if let number, s.summary.firstFrameNumbers.count < 5 { s.summary.firstFrameNumbers.append(number) }
            s.summary.videoWidth = picture.width
            s.summary.videoHeight = picture.height
        }
    }

    /// NACKs, transport-cc feedback and PLIs that are due; returns when feedback may next be
    /// due (nil: not before something arrives).
    private func sendFeedback(now: Duration) -> Duration? {
        guard let stream = videoStream else { return nil }
        let (packets, due): ([RTCPPacket], Duration?) = state.withLock { s in
            guard let media = s.videoStats?.ssrc else { return ([], nil) }
            var out: [RTCPPacket] = []
            if stream.feedback.contains("nack") {
                let lost = s.nack.due(now: now, roundTripTime: s.roundTripTime)
                if !lost.isEmpty {
                    if s.nackSentAt.count > 2000 { s.nackSentAt.removeAll() }
                    for sequence in lost { s.nackSentAt[sequence] = now }
                    out.append(.nack(GenericNACK(senderSSRC: ssrc, mediaSSRC: media, lost: lost)))
                    s.summary.nacksSent += 1
                }
            }
            if now - s.lastTransportFeedback >= .milliseconds(50), let feedback = s.transportFeedback?.makeFeedback(), !feedback.isEmpty {
                out += feedback.map { .transportFeedback($0) }
                s.lastTransportFeedback = now
            }
            // Kept until a PLI goes out: the throttle may hold this one back.
            if videoStage.takeKeyframeRequest() { s.needKeyframe = true }
            let wantsKeyframe = s.needKeyframe || s.videoBuffer.keyframeNeeded || s.nack.keyframeNeeded
            if wantsKeyframe, s.throttle.shouldRequest(now: now) {
                out.append(.pictureLossIndication(PictureLossIndication(senderSSRC: ssrc, mediaSSRC: media)))
                s.summary.pliSent += 1
                s.needKeyframe = false
                s.videoBuffer.clearKeyframeRequest()
                s.nack.clearKeyframeRequest()
            }
            // Holes to ask for again, or a keyframe the throttle held back: soon (the NACK
            // generator's own spacing decides); transport-cc feedback 50 ms after the last.
            var due: Duration? = s.transportFeedback.map { _ in s.lastTransportFeedback + .milliseconds(50) }
            if s.nack.missingCount > 0 || s.needKeyframe || s.videoBuffer.keyframeNeeded || s.nack.keyframeNeeded {
                due = min(due ?? now + .milliseconds(10), now + .milliseconds(10))
            }
            return (out, due)
        }
        if !packets.isEmpty {
            // RFC 4585 feedback goes in a compound packet that starts with a report.
            let report: RTCPPacket = .receiverReport(ReceiverReport(ssrc: ssrc))
            send([report] + packets, kind: .video)
        }
        return due
    }

    /// Lip sync, once a second: the stream that plays ahead waits for the other.
    private func alignPlayout() {
        let video = state.withLock { s -> Double? in
            let holds = s.lipSync.adjust(videoHold: s.holds.video, audioHold: s.holds.audio)
            guard holds != s.holds else { return nil }
            s.holds = holds
            s.audioBuffer.setExtraDelay(.microseconds(Int64(holds.audio * 1e6)), base: Self.audioBaseDelay)
            return holds.video
        }
        if let video { videoStage.holdTime = .microseconds(Int64(video * 1e6)) }
    }

    /// A receiver report per stream heard from, every second (RFC 3550 §6.4.2).
    private func sendReports(now: Duration) {
        let (video, audio) = state.withLock { s in (s.videoStats?.makeReport(now: now), s.audioStats?.makeReport(now: now)) }
        for (kind, block) in [(MediaKind.video, video), (.audio, audio)] {
            guard let block else { continue }
            send([.receiverReport(ReceiverReport(ssrc: ssrc, reports: [block])), .sourceDescription(SourceDescription(ssrc: ssrc, cname: "callend-receiver"))], kind: kind)
        }
    }

    private func send(_ packets: [RTCPPacket], kind: MediaKind) {
        transport.sendRTCP(RTCPPacket.serializeCompound(packets), kind: kind)
    }

    private func handleRTCP(_ bytes: [UInt8], arrival: Duration) {
        guard let packets = try? RTCPPacket.parseCompound(bytes) else { return }
        state.withLock { s in
            s.lastPacket = arrival
            s.summary.silentSince = nil
            for packet in packets {
                switch packet {
                case .senderReport(let sr):
                    if sr.ssrc == s.videoStats?.ssrc {
                        s.videoStats?.senderReportReceived(ntpTimestamp: sr.ntpTimestamp, arrival: arrival)
                        s.lipSync.video.senderReport(ntpTimestamp: sr.ntpTimestamp, rtpTimestamp: sr.rtpTimestamp)
                    }
                    if sr.ssrc == s.audioStats?.ssrc {
                        s.audioStats?.senderReportReceived(ntpTimestamp: sr.ntpTimestamp, arrival: arrival)
                        s.lipSync.audio.senderReport(ntpTimestamp: sr.ntpTimestamp, rtpTimestamp: sr.rtpTimestamp)
                    }
                case .goodbye(let bye):
                    for source in bye.sources where source == s.videoStats?.ssrc || source == s.audioStats?.ssrc { s.goodbyes.insert(source) }
                default: break
                }
            }
        }
    }

    // MARK: Audio

    /// Every packet that carries a transport-wide sequence number counts for congestion control:
    /// video, RTX, probe padding and audio, all numbered in one sequence by the sender's pacer.
    private func recordTransportSequence(_ packet: RTPPacket, arrival: Duration, state s: inout State) {
        guard let id = configuration.transportSequenceExtensionID, let data = packet.headerExtension(id: id),
              let sequence = TransportSequenceNumber.decode(data) else { return }
        if s.transportFeedback == nil { s.transportFeedback = TransportFeedbackGenerator(senderSSRC: ssrc, mediaSSRC: packet.ssrc) }
        s.transportFeedback?.received(sequence: sequence, arrivalMicroseconds: arrival.inMicroseconds)
    }

    private func receiveAudio(_ packet: RTPPacket, arrival: Duration) {
        guard audioStream != nil else { return }
        state.withLock { s in
            recordTransportSequence(packet, arrival: arrival, state: &s)
            s.lastPacket = arrival
            s.summary.silentSince = nil
            if s.audioStats == nil { s.audioStats = ReceiverStatistics(ssrc: packet.ssrc, clockRate: 48_000) }
            s.audioStats?.received(sequenceNumber: packet.sequenceNumber, rtpTimestamp: packet.timestamp, arrival: arrival)
            s.audioBuffer.insert(packet, arrival: arrival)
            s.summary.audioPackets += 1
        }
    }

    /// Finds the sender's timing marks in the audio as it is played (see `AudioLatencyMeter`).
    private func measureAudioLatency(_ samples: [Int16], channels: Int, playedAt: Duration, state s: inout State) {
        let mono = stride(from: 0, to: samples.count, by: channels).map { samples[$0] }
        s.summary.audioLatencyMs.add(contentsOf: s.audioLatency.played(mono, at: playedAt))
    }

    /// Pulls one 20 ms frame every 20 ms, as a sound card would (one that was not served for a
    /// while skips what it missed rather than playing it back to back).
    private func playAudio() {
        var pacer = RealTimePacer(period: .milliseconds(20))
        while !stopping.load(ordering: .relaxed) {
            pacer.waitForNext()
            state.withLock { s in
                guard let decoder = s.audioDecoder else { return }
                let playout = s.audioBuffer.nextPlayout()
                let samples: [Int16]?
                switch playout {
                case .buffering: samples = nil
                case .decode(let payload): samples = try? decoder.decode(payload)
                case .decodeFEC(let next): samples = try? decoder.decodeFEC(from: next, samplesPerChannel: 960)
                case .conceal: samples = try? decoder.decodeLoss(samplesPerChannel: 960)
                }
                guard let samples else { return }
                if case .decode = playout { s.summary.audioDecoded += 1 }
                speaker?.play(samples)
                // Only sound that came from the stream says when it was taken: concealment
                // during an outage would pin a stale timestamp to a later and later time.
                if case .conceal = playout {} else if let rtp = s.audioBuffer.lastPlayedTimestamp {
                    // Heard once what waits in the device ahead of it has played.
                    s.lipSync.audioPlayed(rtp: rtp, at: Date().timeIntervalSince1970 + (speaker?.playoutDelay ?? .zero).inSeconds)
                }
                measureAudioLatency(samples, channels: decoder.channels, playedAt: MonotonicClock.now, state: &s)
            }
        }
    }
}
