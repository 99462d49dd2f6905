import MediaCore
import Platform

/// A media session's network side as a state machine: encoded frames, audio packets, datagrams
/// and the passing of time go in (`handle`), and what to send, decode, play or change comes
/// out. No thread, lock, socket or clock inside: the shell (`MediaLoop` in a call, a test's
/// simulated link) gives each event its time and carries out the actions, and asks
/// `nextDeadline` when to come back.
///
/// The jobs are small pieces composed here: `PacketStamper` (MID and transport-wide numbers),
/// `CongestionPacer` (pacer and bandwidth estimator), `RetransmissionResponder` (NACK → RTX),
/// `NACKRequester`, `TransportCCRecorder`, `ReportScheduler` and `LipSyncTracker`. State of the
/// peer (the path, its estimate, its reports) is kept apart from state of each track (sequence
/// numbers, packetizer, jitter buffer), so that one encode can later feed several peers.
public struct RTPSessionCore: Sendable {
    public let configuration: SessionConfiguration

    /// What the core has done, for the shells' statistics.
    public struct Counters: Sendable {
        public var videoFrames = 0, keyframes = 0, videoPackets = 0, videoBytes = 0
        public var audioPackets = 0, audioBytes = 0
        public var nacksReceived = 0, retransmitted = 0, retransmissionsRefused = 0, keyframeRequests = 0
        public var transportFeedbackReceived = 0, paddingBytes = 0
        /// The pacing hop of what was sent (`LatencyBudget`): video frames' last packets, audio packets.
        public var videoPacing = LatencyBudget(), audioPacing = LatencyBudget()
        public var receivedVideoPackets = 0, receivedAudioPackets = 0, retransmissionsReceived = 0
        public var nacksSent = 0, pliSent = 0
        /// Audio packets that came in RED, and those rebuilt from its redundant blocks (their own
        /// packet was lost).
        public var receivedAudioInRED = 0, audioRecoveredByRED = 0
        /// Video FEC (ULPFEC in RED): packets sent and received, media packets that came in
        /// RED, and media packets FEC rebuilt.
        public var fecPacketsSent = 0, fecPacketsReceived = 0, receivedVideoInRED = 0, videoRecoveredByFEC = 0
        public init() {}
    }
    public private(set) var counters = Counters()

    // MARK: Per track

    struct OutboundVideo: Sendable {
        let stream: SessionConfiguration.Outbound
        var packetizer: VideoPacketizer
        var sequence = UInt16.random(in: 0...UInt16.max)
        let timestampBase = UInt32.random(in: 0...UInt32.max)
        var counters = StreamCounters(clockRate: 90_000)
        var responder: RetransmissionResponder?
        /// ULPFEC in RED, when both sides agreed on it.
        var fec: FECProtector?
    }
    struct OutboundAudio: Sendable {
        let stream: SessionConfiguration.Outbound
        var sequence = UInt16.random(in: 0...UInt16.max)
        var timestamp = UInt32.random(in: 0...UInt32.max)
        var first = true
        var counters = StreamCounters(clockRate: 48_000)
        /// The last payloads sent (newest last), for RED's redundant blocks.
        var history: [(timestamp: UInt32, payload: [UInt8])] = []
    }
    struct InboundVideo: Sendable {
        let stream: SessionConfiguration.Inbound
        var statistics: ReceiverStatistics?
        var jitter: VideoJitterBuffer
        var nack = NACKRequester()
        var throttle = KeyframeRequestThrottle()
        var needKeyframe = false
        /// ULPFEC in RED, when both sides agreed on it.
        var fec: FECRecoverer?
        /// When a retransmission last repaired a hole: while repairs happen (10 s), frames are
        /// shown one NACK round trip after their time (`VideoJitterBuffer.playoutDelay`), two
        /// from 3 % loss, so that a repair of one round more than that is no freeze (at 10 %
        /// loss a hole needs a third round one time in a hundred); a clean path shows them at once.
        var lastRepair: MediaTime?
        /// The fraction lost in our last receiver report's interval (a second).
        var recentLoss = 0.0
        var wantsNACK: Bool { stream.feedback.contains("nack") }

        static let repairMemory: Duration = .seconds(10)
        static let maxPlayoutDelay: Duration = .milliseconds(250)
        /// Playout smoothing: when a tenth of the last 10 s of frames were complete 40 ms or
        /// more after their time (a cellular link delivering in bursts), frames are shown that
        /// much later, so that a burst is shown evenly instead of as a stall and a jump; a wired
        /// path's frames are never that late and keep no delay (the 95th percentile froze more:
        /// it covered the outages too). Repairs and smoothing together wait at most 250 ms: in
        /// `bench cellular` 300 ms froze more (23.1 against 21.5 a minute over the six
        /// directions, the window off in both runs).
        static let latenessQuantile = 0.9
        static let smoothingFloor: Duration = .milliseconds(40)
        /// A link that held the stream twice in 30 s (`VideoJitterBuffer.holdLength`: a
        /// cellular scheduler's gaps and short outages) keeps frames at least 100 ms after their
        /// time, so that a hold of up to about 350 ms is shown from what arrived before it instead
        /// of as a freeze (the quantile above misses them: a hold is a few frames in 300). A
        /// single blackout on a wired path adds nothing. In `bench cellular` over six offsets:
        /// freezes 21.7 -> 20.1 a minute summed over the six directions, T-Mobile down 3.5 -> 2.8,
        /// frame delay p95 the same or lower, p50 up by 0-40 ms where the link holds.
        static let heldLinkDelay: Duration = .milliseconds(100)
        static let heldLinkHolds = 2

        mutating func followRepairs(at now: MediaTime) {
            var delay = Duration.zero
            if let last = lastRepair, now - last <= Self.repairMemory {
                let rounds = recentLoss >= 0.03 ? 2 : 1
                let wait = nack.roundTripTime + NACKGenerator.retryInterval(roundTripTime: nack.roundTripTime) * (rounds - 1)
                delay = wait + .milliseconds(20)
            }
            let smoothing = jitter.recentLateness(Self.latenessQuantile)
            if smoothing >= Self.smoothingFloor { delay = max(delay, smoothing) }
            if jitter.recentHolds(now: now.sinceOrigin) >= Self.heldLinkHolds { delay = max(delay, Self.heldLinkDelay) }
            jitter.playoutDelay = min(Self.maxPlayoutDelay, delay)
        }
    }
    struct InboundAudio: Sendable {
        let stream: SessionConfiguration.Inbound
        var statistics: ReceiverStatistics?
        /// Which recent sequence numbers arrived, so that RED rebuilds only what was lost.
        var arrived = RecentSequences()
    }
    private var video: OutboundVideo?
    private var audio: OutboundAudio?
    private var receivedVideo: InboundVideo?
    private var receivedAudio: InboundAudio?

    // MARK: Per peer

    private var stamper: PacketStamper
    private var pacer: CongestionPacer
    private var transportCC: TransportCCRecorder?
    private var reports = ReportScheduler()
    private var lipSync = LipSyncTracker()
    private var goodbyes: Set<UInt32> = []
    private var saidBye = false
    /// The NOTE this side's video carries (its source is lost), and the last the peer's did.
    private var videoNote: String?
    public private(set) var peerVideoNote: String?
    /// When the peer was last heard (any RTP or RTCP).
    public private(set) var lastArrival: MediaTime?

    public init(configuration: SessionConfiguration) {
        self.configuration = configuration
        video = configuration.video.map { stream in
            OutboundVideo(stream: stream, packetizer: VideoPacketizer(format: stream.videoFormat), responder: configuration.rtx.map {
                              var responder = RetransmissionResponder(ssrc: $0.ssrc, payloadType: $0.payloadType)
                              // H.264's FEC packets are kept to resend (see `Outbound.redRTXPayloadType`).
                              if stream.videoFormat == .h264, stream.fecPayloadType != nil, let red = stream.redPayloadType, let rtx = stream.redRTXPayloadType {
                                  responder.red = (red, rtx)
                              }
                              return responder
                          },
                          fec: stream.redPayloadType.flatMap { red in
                              stream.fecPayloadType.map { FECProtector(mediaPayloadType: stream.payloadType, redPayloadType: red, fecPayloadType: $0) }
                          })
        }
        audio = configuration.audio.map { OutboundAudio(stream: $0) }
        receivedVideo = configuration.receivedVideo.map {
            InboundVideo(stream: $0, jitter: VideoJitterBuffer(format: $0.videoFormat, minimumDelay: .milliseconds(20)),
                         fec: $0.redPayloadType != nil && $0.fecPayloadType != nil ? FECRecoverer() : nil)
        }
        receivedVideo?.jitter.retransmissionWait = NACKRequester().retransmissionWait
        receivedAudio = configuration.receivedAudio.map { InboundAudio(stream: $0) }
        var mids: [UInt32: String] = [:]
        for stream in [configuration.video, configuration.audio].compactMap({ $0 }) { mids[stream.ssrc] = stream.mid }
        stamper = PacketStamper(transportSequenceID: configuration.transportSequenceExtensionID, midID: configuration.midExtensionID, mids: mids,
                                rtx: configuration.rtx.flatMap { rtx in configuration.video.map { (rtx.ssrc, $0.ssrc) } })
        pacer = CongestionPacer(congestion: configuration.congestion, reportsOnly: configuration.transportSequenceExtensionID == nil,
                                fixedRate: configuration.fixedPacingRate, overhead: configuration.transportOverhead)
        transportCC = configuration.transportSequenceExtensionID.map { TransportCCRecorder(extensionID: $0, senderSSRC: configuration.receiverSSRC) }
    }

    // MARK: What the shells read

    /// What the shells' statistics need, in one small value (the core itself is large: copied
    /// for every turn of the loop, it cost more than the turn).
    public struct Snapshot: Sendable {
        public var counters: Counters
        public var roundTripTime: Duration?
        public var peerVideoLoss: Double?
        public var receivedVideoLost: Int64
        public var receivedVideoJitter: Double
        public var framesDroppedByJitterBuffer: Int
        public var avOffset: Double?
        public var lastArrival: MediaTime?
        /// What the peer says of its video source (SDES NOTE), while it says anything.
        public var peerVideoNote: String?
    }

    public var snapshot: Snapshot {
        Snapshot(counters: counters, roundTripTime: reports.roundTripTime, peerVideoLoss: reports.peerVideoLoss,
                 receivedVideoLost: receivedVideoLost, receivedVideoJitter: receivedVideoJitter,
                 framesDroppedByJitterBuffer: framesDroppedByJitterBuffer, avOffset: lipSync.offset, lastArrival: lastArrival,
                 peerVideoNote: peerVideoNote)
    }

    /// The bandwidth estimate (auto mode, once video started).
    public var estimate: Int? { pacer.estimate }
    /// The transport-cc estimator's state, for a bench's decision log (a copy: not per packet).
    public var estimatorState: BandwidthEstimator? { pacer.estimator }
    /// Whether the congestion window holds video in the pacer now, for the same log.
    public var windowHoldsVideo: Bool { pacer.pacer.holdVideo }
    /// How long the oldest packet in the pacer has waited (µs): encoder pushback reads it.
    public func pacerQueueDelay(at now: MediaTime) -> Int64 { pacer.queueDelay(now: now.microseconds) }
    public var pacerIsEmpty: Bool { pacer.isEmpty }
    /// The RTP timestamp of a video frame captured at `capturedAt` (nil without video): what a
    /// receiver's frame carries, for a shell that matches frames to their capture.
    public func videoRTPTimestamp(capturedAt: MediaTime) -> UInt32? {
        video.map { $0.timestampBase &+ UInt32(truncatingIfNeeded: capturedAt.microseconds * 9 / 100) }
    }
    /// The round trip by the peer's reports, or by how long retransmissions take.
    public var roundTripTime: Duration? { reports.roundTripTime }
    public var peerVideoLoss: Double? { reports.peerVideoLoss }
    public var receivedVideoLost: Int64 { receivedVideo?.statistics?.cumulativeLost ?? 0 }
    public var receivedVideoJitter: Double { receivedVideo?.jitter.jitterSeconds ?? 0 }
    public var framesDroppedByJitterBuffer: Int { receivedVideo?.jitter.framesDropped ?? 0 }
    public var avOffset: Double? { lipSync.offset }
    public var holds: (video: Duration, audio: Duration) { lipSync.holds }

    /// When the core wants to be asked again (`.tick`) if nothing else happens first.
    public func nextDeadline(after now: MediaTime) -> MediaTime {
        var next = reports.next ?? now + ReportScheduler.interval
        if let due = transportCC?.nextDue, receivedVideo?.statistics != nil { next = min(next, max(due, now)) }
        if let inbound = receivedVideo, inbound.statistics != nil {
            // A NACK's retry when it is due, not on a tick; the jitter buffer's wait for a hole
            // (it gives up on a frame by time) within 10 ms, as keyframe requests the throttle held.
            if inbound.wantsNACK, let due = inbound.nack.nextDue { next = min(next, max(due, now)) }
            if let held = inbound.jitter.heldUntil { next = min(next, max(MediaTime(held), now)) }
            if inbound.nack.missing > 0 || inbound.needKeyframe || inbound.jitter.keyframeNeeded || inbound.nack.keyframeNeeded {
                next = min(next, now + .milliseconds(10))
            }
        }
        if !pacer.isEmpty || pacer.estimator != nil {
            next = min(next, now + .microseconds(pacer.timeUntilNext(now: now.microseconds)))
        }
        return next
    }

    // MARK: Events

    public mutating func handle(_ event: SessionEvent, at now: MediaTime) -> [SessionAction] {
        var actions: [SessionAction] = []
        reports.start(at: now)
        switch event {
        case .encodedVideo(let data, let isKeyframe, let capturedAt, let layer):
            sendVideo(data, isKeyframe: isKeyframe, layer: layer, capturedAt: capturedAt, now: now, actions: &actions)
        case .encodedAudio(let payload, let samples, let capturedAt):
            sendAudio(payload, samples: samples, capturedAt: capturedAt, now: now)
        case .datagram(let bytes, let isRTCP, let kind, let arrival):
            if isRTCP { receiveRTCP(bytes, arrival: arrival, actions: &actions) } else { receiveRTP(bytes, kind: kind, arrival: arrival, actions: &actions) }
        case .videoShown(let rtp, let at): lipSync.videoShown(rtp: rtp, at: at)
        case .audioPlayed(let rtp, let at): lipSync.audioPlayed(rtp: rtp, at: at)
        case .keyframeWanted: receivedVideo?.needKeyframe = true
        case .videoNote(let note):
            guard note != videoNote else { break }
            videoNote = note
            // At once, not at the next report: the peer learns within a round trip.
            if let video { actions.append(videoReport(video, now: now)) }
        case .tick: break
        }
        runTimers(now: now, actions: &actions)
        return actions
    }

    // MARK: Sending

    private mutating func sendVideo(_ data: [UInt8], isKeyframe: Bool, layer: VideoLayer?, capturedAt: MediaTime, now: MediaTime, actions: inout [SessionAction]) {
        // Taken out while it changes, so its buffers are not copied (copy-on-write).
        guard var track = video else { return }
        video = nil
        if pacer.startEstimating(), let estimate {
            actions.append(.estimate(bitrate: estimate, lossFraction: 0, cause: BandwidthEstimator.Cause.start.rawValue))
        }
        let timestamp = track.timestampBase &+ UInt32(truncatingIfNeeded: capturedAt.microseconds * 9 / 100)
        let payloads = track.packetizer.packetize(data, layer: layer.map { ($0.id, $0.sync) })
        // The frame's FEC takes the sequence numbers right after its packets.
        let fecCount = track.fec?.plan(timestamp: timestamp, mediaCount: payloads.count, firstFECSequence: track.sequence &+ UInt16(payloads.count)) ?? 0
        var dropped = false
        for (i, payload) in payloads.enumerated() {
            let packet = RTPPacket(payloadType: track.stream.payloadType, sequenceNumber: track.sequence, timestamp: timestamp,
                                   ssrc: track.stream.ssrc, marker: i == payloads.count - 1, payload: payload)
            track.sequence &+= 1
            // Kept without RED: a retransmission goes on RTX for the codec's own payload type.
            track.responder?.sent(packet, at: now)
            let wire = track.fec?.wrap(packet) ?? packet
            track.counters.record(wire, at: capturedAt)  // the time the RTP timestamp says (lip sync)
            counters.videoPackets += 1
            counters.videoBytes += wire.serializedSize
            if !pacer.enqueue(wire, priority: .video, now: now.microseconds) { dropped = true }
        }
        track.sequence &+= UInt16(fecCount)
        counters.videoFrames += 1
        if isKeyframe { counters.keyframes += 1 }
        video = track
        // The pacer's queue was at its bound: what went is lost to the receiver for good.
        if dropped { actions.append(.keyframeNeeded) }
    }

    /// RED's depth (RFC 2198) follows the loss the peer reports on our audio (on our video
    /// until it has): one earlier packet in each, as libwebrtc sends, and two from 3 % loss, so
    /// that two losses in a row (0.09 % of packets at 3 %, 4 % at 20 %) still play.
    var redDepth: Int {
        let loss = reports.peerAudioLoss ?? reports.peerVideoLoss ?? 0
        return loss >= 0.03 ? 2 : 1
    }

    private mutating func sendAudio(_ payload: [UInt8], samples: Int, capturedAt: MediaTime, now: MediaTime) {
        guard var track = audio else { return }
        audio = nil
        var wire = payload, payloadType = track.stream.payloadType
        if let red = track.stream.redPayloadType {
            let blocks = track.history.suffix(redDepth).map {
                REDPayload.Block(payloadType: payloadType, timestampOffset: track.timestamp &- $0.timestamp, data: $0.payload)
            }
            wire = REDPayload(redundant: blocks, primaryPayloadType: payloadType, primary: payload).serialized()
            payloadType = red
            track.history.append((track.timestamp, payload))
            if track.history.count > 2 { track.history.removeFirst() }
        }
        let packet = RTPPacket(payloadType: payloadType, sequenceNumber: track.sequence, timestamp: track.timestamp,
                               ssrc: track.stream.ssrc, marker: track.first, payload: wire)
        track.first = false
        track.sequence &+= 1
        track.timestamp &+= UInt32(samples)
        track.counters.record(packet, at: capturedAt)
        counters.audioPackets += 1
        counters.audioBytes += packet.serializedSize
        // Through the pacer's first lane: never held by its budget or congestion window, but
        // stamped with a transport-wide number there, so the estimate sees audio too.
        _ = pacer.enqueue(packet, priority: .audio, now: now.microseconds)
        audio = track
    }

    // MARK: Receiving

    private mutating func receiveRTP(_ bytes: [UInt8], kind: MediaKind?, arrival: MediaTime, actions: inout [SessionAction]) {
        guard let packet = try? RTPPacket(parsing: bytes) else { return }
        let isVideo = receivedVideo.map {
            [$0.stream.payloadType, $0.stream.rtxPayloadType, $0.stream.redPayloadType, $0.stream.redRTXPayloadType].contains(packet.payloadType)
        } ?? false
        let isAudio = receivedAudio.map { packet.payloadType == $0.stream.payloadType || packet.payloadType == $0.stream.redPayloadType } ?? false
        switch kind {
        case .video?: if isVideo { receiveVideo(packet, arrival: arrival, actions: &actions) }
        case .audio?: if isAudio { receiveAudio(packet, arrival: arrival, actions: &actions) }
        case nil:
            if isVideo { receiveVideo(packet, arrival: arrival, actions: &actions) } else if isAudio { receiveAudio(packet, arrival: arrival, actions: &actions) }
        }
    }

    private mutating func receiveVideo(_ received: RTPPacket, arrival: MediaTime, actions: inout [SessionAction]) {
        guard var track = receivedVideo else { return }
        receivedVideo = nil
        defer { receivedVideo = track }
        lastArrival = arrival
        transportCC?.received(received, at: arrival)
        guard !received.payload.isEmpty else { return }  // padding only (a bandwidth probe)
        var packet = received
        let stream = track.stream
        let fromRTX = packet.payloadType == stream.rtxPayloadType || packet.payloadType == stream.redRTXPayloadType
        if fromRTX {
            // RTX for the codec, or (libwebrtc, RED negotiated) for RED.
            let associated = packet.payloadType == stream.rtxPayloadType ? stream.payloadType : stream.redPayloadType ?? stream.payloadType
            guard let mediaSSRC = track.statistics?.ssrc,
                  let original = try? RTX.unwrap(packet, mediaSSRC: mediaSSRC, mediaPayloadType: associated) else { return }
            packet = original
            // An RTX packet nobody asked for is a probe's payload padding: it counted for
            // congestion control above, and the jitter buffer drops it as a duplicate.
            if track.nack.repaired(original.sequenceNumber, at: arrival) {
                counters.retransmissionsReceived += 1
                track.jitter.retransmissionWait = track.nack.retransmissionWait
                track.lastRepair = arrival
            }
        } else {
            if track.statistics == nil { track.statistics = ReceiverStatistics(ssrc: packet.ssrc, clockRate: 90_000) }
            track.statistics?.received(sequenceNumber: packet.sequenceNumber, rtpTimestamp: packet.timestamp, arrival: arrival.sinceOrigin)
            counters.receivedVideoPackets += 1
        }
        var rebuilt: [[UInt8]] = []
        if packet.payloadType == stream.redPayloadType {
            guard let red = try? REDPayload(parsing: packet.payload) else { return }
            if red.primaryPayloadType == stream.fecPayloadType {
                // FEC has a sequence number of the stream but is no part of a frame.
                track.nack.received(packet.sequenceNumber, at: arrival)
                if let unneeded = track.jitter.unneededNumbers(before: packet.sequenceNumber, fecTimestamp: packet.timestamp) { track.nack.forget(unneeded) }
                guard !fromRTX, let fec = try? ULPFECPayload(parsing: red.primary) else { return }
                counters.fecPacketsReceived += 1
                rebuilt = track.fec?.fec(fec, ssrc: packet.ssrc) ?? []
            } else {
                guard red.primaryPayloadType == stream.payloadType else { return }
                if !fromRTX { counters.receivedVideoInRED += 1 }
                packet.payloadType = red.primaryPayloadType
                packet.payload = red.primary
                // A retransmission carries the RTX stream's header extensions: no use to FEC.
                if !fromRTX, track.fec != nil { rebuilt = track.fec!.media(packet) }
                deliver(packet, to: &track, arrival: arrival, actions: &actions)
            }
        } else {
            guard packet.payloadType == stream.payloadType else { return }
            deliver(packet, to: &track, arrival: arrival, actions: &actions)
        }
        for bytes in rebuilt {
            guard let recovered = try? RTPPacket(parsing: bytes), recovered.payloadType == stream.payloadType else { continue }
            counters.videoRecoveredByFEC += 1
            deliver(recovered, to: &track, arrival: arrival, actions: &actions)
        }
    }

    /// A media packet of the video stream (arrived, repaired or rebuilt) into the jitter buffer,
    /// and the frames it completes out to the decoder.
    private mutating func deliver(_ packet: RTPPacket, to track: inout InboundVideo, arrival: MediaTime, actions: inout [SessionAction]) {
        track.nack.received(packet.sequenceNumber, at: arrival)
        track.followRepairs(at: arrival)
        _ = track.jitter.insert(packet, arrival: arrival.sinceOrigin)
        // H.264's FEC numbers: not asked for once the next picture shows they were FEC.
        if let unneeded = track.jitter.unneededNumbers(before: packet.sequenceNumber) { track.nack.forget(unneeded) }
        popFrames(&track, now: arrival, actions: &actions)
    }

    /// Frames the jitter buffer releases now; holes behind them are no longer worth a NACK (a
    /// frame skipped for a keyframe, or FEC that was lost between two frames).
    private func popFrames(_ track: inout InboundVideo, now: MediaTime, actions: inout [SessionAction]) {
        let frames = track.jitter.popFrames(now: now.sinceOrigin)
        guard let last = frames.last else { return }
        track.nack.forget(through: UInt16(truncatingIfNeeded: last.lastSequence))
        actions.append(.decode(frames))
    }

    private mutating func receiveAudio(_ packet: RTPPacket, arrival: MediaTime, actions: inout [SessionAction]) {
        guard var track = receivedAudio else { return }
        receivedAudio = nil
        lastArrival = arrival
        transportCC?.received(packet, at: arrival)
        if track.statistics == nil { track.statistics = ReceiverStatistics(ssrc: packet.ssrc, clockRate: 48_000) }
        track.statistics?.received(sequenceNumber: packet.sequenceNumber, rtpTimestamp: packet.timestamp, arrival: arrival.sinceOrigin)
        counters.receivedAudioPackets += 1
        track.arrived.insert(packet.sequenceNumber)
        defer { receivedAudio = track }
        guard let red = track.stream.redPayloadType, packet.payloadType == red else {
            actions.append(.playAudio(packet, arrival: arrival))
            return
        }
        guard let payload = try? REDPayload(parsing: packet.payload), payload.primaryPayloadType == track.stream.payloadType else { return }
        counters.receivedAudioInRED += 1
        // The redundant blocks are the packets just before this one, oldest first: each that did
        // not arrive is played from here, with the arrival it would have had (so the jitter
        // estimate does not take it for a late packet).
        let count = payload.redundant.count
        for (index, block) in payload.redundant.enumerated() where block.payloadType == track.stream.payloadType && !block.data.isEmpty {
            let sequence = packet.sequenceNumber &- UInt16(count - index)
            guard !track.arrived.contains(sequence) else { continue }
            track.arrived.insert(sequence)
            counters.audioRecoveredByRED += 1
            let rebuilt = RTPPacket(payloadType: block.payloadType, sequenceNumber: sequence, timestamp: packet.timestamp &- block.timestampOffset,
                                    ssrc: packet.ssrc, payload: block.data)
            actions.append(.playAudio(rebuilt, arrival: arrival - .microseconds(Int64(block.timestampOffset) * 1_000_000 / 48_000)))
        }
        actions.append(.playAudio(RTPPacket(payloadType: payload.primaryPayloadType, sequenceNumber: packet.sequenceNumber, timestamp: packet.timestamp,
                                            ssrc: packet.ssrc, marker: packet.marker, payload: payload.primary), arrival: arrival))
    }

    private mutating func receiveRTCP(_ bytes: [UInt8], arrival: MediaTime, actions: inout [SessionAction]) {
        guard isRTCP(bytes), let packets = try? RTCPPacket.parseCompound(bytes) else { return }
        lastArrival = arrival
        let arrivalNTP = configuration.ntp(arrival)
        let videoSSRC = configuration.video?.ssrc, audioSSRC = configuration.audio?.ssrc
        for packet in packets {
            switch packet {
            case .nack(let nack) where nack.mediaSSRC == videoSSRC && video?.responder != nil:
                counters.nacksReceived += 1
                // VP8's FEC packets are never resent (a lost one is no loss of media; its picture
                // IDs bridge the gap); H.264's are.
                let resendsFEC = video!.responder!.red != nil
                let lost = nack.lostSequenceNumbers.filter { resendsFEC || !(video!.fec?.isFEC($0) ?? false) }
                guard !lost.isEmpty else { break }
                let answer = video!.responder!.answer(lost, roundTripTime: reports.roundTripTime ?? .milliseconds(50),
                                                      estimate: pacer.estimator?.estimate, pacerQueueDelay: pacer.queueDelay(now: arrival.microseconds),
                                                      pathQueueDelay: pacer.estimator?.pathQueueDelay,
                                                      now: arrival)
                // Retransmissions are paced and counted like media (a burst of them must not
                // flood the bottleneck it was lost in).
                for rtx in answer.packets { _ = pacer.enqueue(rtx, priority: .retransmission, now: arrival.microseconds) }
                counters.retransmitted = video!.responder!.retransmitted
                counters.retransmissionsRefused = video!.responder!.refused
                if answer.keyframeInstead { actions.append(.keyframeNeeded) }
            case .pictureLossIndication(let pli) where pli.mediaSSRC == videoSSRC:
                counters.keyframeRequests += 1
                actions.append(.keyframeNeeded)
            case .fullIntraRequest(let fir) where fir.entries.contains { $0.ssrc == videoSSRC }:
                counters.keyframeRequests += 1
                actions.append(.keyframeNeeded)
            case .transportFeedback(let feedback):
                counters.transportFeedbackReceived += 1
                guard let change = pacer.feedback(feedback, now: arrival.microseconds), let estimator = pacer.estimator else { break }
                actions.append(.estimate(bitrate: estimator.estimate, lossFraction: estimator.lossFraction,
                                         cause: (change?.cause ?? .increase).rawValue))
            case .receiverReport(let rr):
                peerReported(rr.reports, arrivalNTP: arrivalNTP, video: videoSSRC, audio: audioSSRC, actions: &actions)
                estimateFromReports(rr.reports, video: videoSSRC, now: arrival, actions: &actions)
            case .remb(let remb):
                if let change = pacer.remb(bitrate: Int(clamping: remb.bitrate), now: arrival.microseconds) {
                    actions.append(.estimate(bitrate: change.to, lossFraction: pacer.reported?.lossFraction ?? 0, cause: change.cause.rawValue))
                }
            case .senderReport(let sr):
                peerReported(sr.reports, arrivalNTP: arrivalNTP, video: videoSSRC, audio: audioSSRC, actions: &actions)
                estimateFromReports(sr.reports, video: videoSSRC, now: arrival, actions: &actions)
                if sr.ssrc == receivedVideo?.statistics?.ssrc {
                    receivedVideo?.statistics?.senderReportReceived(ntpTimestamp: sr.ntpTimestamp, arrival: arrival.sinceOrigin)
                    lipSync.videoSenderReport(ntp: sr.ntpTimestamp, rtp: sr.rtpTimestamp)
                }
                if sr.ssrc == receivedAudio?.statistics?.ssrc {
                    receivedAudio?.statistics?.senderReportReceived(ntpTimestamp: sr.ntpTimestamp, arrival: arrival.sinceOrigin)
                    lipSync.audioSenderReport(ntp: sr.ntpTimestamp, rtp: sr.rtpTimestamp)
                }
            case .sourceDescription(let description):
                if let ssrc = receivedVideo?.statistics?.ssrc, let note = description.note(of: ssrc) { peerVideoNote = note }
            case .goodbye(let bye):
                let known = [receivedVideo?.statistics?.ssrc, receivedAudio?.statistics?.ssrc].compactMap { $0 }
                for source in bye.sources where known.contains(source) { goodbyes.insert(source) }
                let streams = (receivedVideo == nil ? 0 : 1) + (receivedAudio == nil ? 0 : 1)
                if !saidBye, !goodbyes.isEmpty, goodbyes.count >= streams {
                    saidBye = true
                    actions.append(.peerSaidBye)
                }
            default:
                break
            }
        }
    }

    /// Without transport-cc, auto mode's estimate follows the loss the peer reports on our video.
    private mutating func estimateFromReports(_ blocks: [ReceptionReport], video: UInt32?, now: MediaTime, actions: inout [SessionAction]) {
        for block in blocks where block.ssrc == video {
            if let change = pacer.report(fractionLost: block.fractionLost, now: now.microseconds) {
                actions.append(.estimate(bitrate: change.to, lossFraction: pacer.reported?.lossFraction ?? 0, cause: change.cause.rawValue))
            }
        }
    }

    private mutating func peerReported(_ blocks: [ReceptionReport], arrivalNTP: UInt64, video: UInt32?, audio: UInt32?,
                                       actions: inout [SessionAction]) {
        for block in blocks where block.ssrc == video || block.ssrc == audio {
            reports.peerReported(block, arrivalNTP: arrivalNTP, isVideo: block.ssrc == video)
            receivedVideo?.nack.reportedRoundTripTime = reports.roundTripTime
            stamper.acknowledge(block.ssrc)
            // Video FEC follows the loss the peer reports on our video and the round trip.
            if block.ssrc == video, let before = self.video?.fec?.rate {
                self.video?.fec?.update(loss: reports.peerVideoLoss ?? 0, roundTripTime: reports.roundTripTime ?? .milliseconds(50))
                if let after = self.video?.fec?.rate, after != before { actions.append(.videoProtection(after)) }
            }
        }
    }

    // MARK: Timers

    private mutating func runTimers(now: MediaTime, actions: inout [SessionAction]) {
        // What the pacer releases; probe padding from the RTX stream's history.
        var responder = video?.responder
        video?.responder = nil
        var released = pacer.release(now: now.microseconds, stamper: &stamper) { bytes in responder?.padding(bytes) }
        // A frame whose packets have all left gets its FEC, made of them as they were stamped,
        // next in line (ahead of video still queued, so its sequence numbers come in order).
        if var fec = video?.fec {
            video?.fec = nil
            var index = 0
            while index < released.count {
                let made = released[index].ssrc == configuration.video?.ssrc ? fec.sent(released[index]) : []
                index += 1
                guard !made.isEmpty else { continue }
                for packet in made {
                    if responder?.red != nil { responder?.sent(packet, at: now) }
                    counters.fecPacketsSent += 1
                    counters.videoBytes += packet.serializedSize
                    _ = pacer.enqueue(packet, priority: .protection, now: now.microseconds)
                }
                released += pacer.release(now: now.microseconds, stamper: &stamper) { bytes in responder?.padding(bytes) }
            }
            video?.fec = fec
        }
        video?.responder = responder
        counters.paddingBytes = pacer.paddingBytes
        (counters.videoPacing, counters.audioPacing) = (pacer.videoPacing, pacer.audioPacing)
        let audioSSRC = configuration.audio?.ssrc
        for packet in released { actions.append(.send(bytes: packet.serialized(), isRTCP: false, kind: packet.ssrc == audioSSRC ? .audio : .video)) }
        feedback(now: now, actions: &actions)
        if reports.due(at: now) { sendReports(now: now, actions: &actions) }
        // Frames that waited for their render time.
        if let due = receivedVideo?.jitter.heldUntil, due <= now.sinceOrigin, var track = receivedVideo {
            receivedVideo = nil
            track.followRepairs(at: now)
            popFrames(&track, now: now, actions: &actions)
            receivedVideo = track
        }
    }

    /// NACKs, transport-cc feedback and keyframe requests that are due, in one compound packet
    /// that starts with a report (RFC 4585).
    private mutating func feedback(now: MediaTime, actions: inout [SessionAction]) {
        guard var track = receivedVideo, let media = track.statistics?.ssrc else { return }
        receivedVideo = nil
        defer { receivedVideo = track }
        let me = configuration.receiverSSRC
        var out: [RTCPPacket] = []
        if track.wantsNACK, let nack = track.nack.due(senderSSRC: me, mediaSSRC: media, at: now) {
            out.append(.nack(nack))
            counters.nacksSent += 1
        }
        out += transportCC?.due(at: now).map { .transportFeedback($0) } ?? []
        // Kept until a PLI goes out: the throttle may hold this one back.
        if track.needKeyframe || track.jitter.keyframeNeeded || track.nack.keyframeNeeded, track.throttle.shouldRequest(now: now.sinceOrigin) {
            out.append(.pictureLossIndication(PictureLossIndication(senderSSRC: me, mediaSSRC: media)))
            counters.pliSent += 1
            track.needKeyframe = false
            track.jitter.clearKeyframeRequest()
            track.nack.clearKeyframeRequest()
        }
        guard !out.isEmpty else { return }
        actions.append(.send(bytes: RTCPPacket.serializeCompound([.receiverReport(ReceiverReport(ssrc: me))] + out), isRTCP: true, kind: .video))
    }

    /// Every second: SR + SDES per stream sent (RFC 3550 §6.4.1, §6.5), RR + SDES per stream
    /// heard (§6.4.2); then lip sync's step.
    private mutating func sendReports(now: MediaTime, actions: inout [SessionAction]) {
        let ntp = configuration.ntp(now)
        let cname = configuration.cname
        if let video { actions.append(videoReport(video, now: now)) }
        if let audio {
            let report = audio.counters.report(ssrc: audio.stream.ssrc, ntp: ntp, now: now)
            actions.append(.send(bytes: RTCPPacket.serializeCompound([.senderReport(report), .sourceDescription(SourceDescription(ssrc: audio.stream.ssrc, cname: cname))]),
                                 isRTCP: true, kind: .audio))
        }
        let me = configuration.receiverSSRC
        let videoBlock = receivedVideo?.statistics?.makeReport(now: now.sinceOrigin)
        if let videoBlock { receivedVideo?.recentLoss = Double(videoBlock.fractionLost) / 256 }
        for (kind, block) in [(MediaKind.video, videoBlock),
                              (.audio, receivedAudio?.statistics?.makeReport(now: now.sinceOrigin))] {
            guard let block else { continue }
            actions.append(.send(bytes: RTCPPacket.serializeCompound([.receiverReport(ReceiverReport(ssrc: me, reports: [block])),
                                                                      .sourceDescription(SourceDescription(ssrc: me, cname: cname))]),
                                 isRTCP: true, kind: kind))
        }
        if let holds = lipSync.adjust() { actions.append(.holds(video: holds.video, audio: holds.audio)) }
    }

    /// The video stream's SR and SDES (with its NOTE while it has one).
    private func videoReport(_ video: OutboundVideo, now: MediaTime) -> SessionAction {
        let report = video.counters.report(ssrc: video.stream.ssrc, ntp: configuration.ntp(now), now: now)
        let description = SourceDescription(ssrc: video.stream.ssrc, cname: configuration.cname, note: videoNote)
        return .send(bytes: RTCPPacket.serializeCompound([.senderReport(report), .sourceDescription(description)]), isRTCP: true, kind: .video)
    }

    /// BYE for every stream sent (the session ends).
    public func goodbye() -> [SessionAction] {
        [(configuration.video?.ssrc, MediaKind.video), (configuration.audio?.ssrc, .audio)].compactMap { ssrc, kind in
            ssrc.map { .send(bytes: RTCPPacket.serializeCompound([.goodbye(Goodbye(sources: [$0], reason: "done"))]), isRTCP: true, kind: kind) }
        }
    }
}
