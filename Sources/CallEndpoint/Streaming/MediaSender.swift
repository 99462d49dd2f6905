import Codecs
import MediaCore
import Devices
import Foundation
import Platform
import RTPTransport
import Synchronization

/// Sends VP8 and Opus over RTP through a `PacketTransport` (two UDP ports for SDP files, the
/// bundled ICE/DTLS-SRTP transport in a call). Its stages, each in its own file, read in one
/// direction: video (MediaSender+Video: capture, mode, encoder, packetizer) and audio
/// (MediaSender+Audio) feed the pacer (MediaSender+Pacing: the congestion controller's pacing,
/// window and probes, transport-wide numbers), and the peer's RTCP comes back through
/// MediaSender+Feedback (retransmissions, keyframes, the estimate). SR and SDES go every second.
/// Capture and encoding run on threads of their own; the pacer, reports and the peer's RTCP on
/// the media loop (`MediaLoop`).
public final class MediaSender: @unchecked Sendable {  // mutable sending state is behind `state`, `nextReport` is the loop thread's; the transport is thread-safe
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
    let keyframeWanted = Atomic<Bool>(false)
    let stopping = Atomic<Bool>(false)
    let loop: MediaLoop

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
        var retransmissionBudget = RetransmissionBudget()
        /// Streams whose first receiver report came back: their packets no longer carry the MID.
        var midAcknowledged: Set<UInt32> = []
    }
    let state = Mutex(State())
    let videoTrack: LocalVideoTrack?
    let audioTrack: LocalAudioTrack?
    /// True when the tracks were made here from the configuration (and are closed here).
    let ownsTracks: Bool

    /// `tracks` are a call's published tracks, which outlive one media session; without them the
    /// sender opens the configuration's sources itself and closes them when it ends.
    public convenience init(configuration: MediaSenderConfiguration, transport: (any PacketTransport)? = nil,
                            tracks: (video: LocalVideoTrack?, audio: LocalAudioTrack?)? = nil) throws {
        try self.init(configuration: configuration, transport: transport, tracks: tracks, loop: MediaLoop())
    }

    /// `loop`: the media loop the sender's network side runs on (a call's, shared with its receiver).
    init(configuration: MediaSenderConfiguration, transport: (any PacketTransport)?,
         tracks: (video: LocalVideoTrack?, audio: LocalAudioTrack?)?, loop: MediaLoop) throws {
        self.configuration = configuration
        self.loop = loop
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

    public func stop() {
        stopping.store(true, ordering: .relaxed)
        loop.wake()
    }

    /// The statistics so far, while sending.
    public func snapshot() -> SenderStatistics {
        state.withLock { s in
            var stats = s.stats
            stats.elapsed = clock.now
            return stats
        }
    }

    /// Sends until the duration passes, the sources end, or `stop()`; returns the statistics.
    /// The peer's RTCP and the pacer run on this thread (a media loop of the sender's own).
    public func run() throws -> SenderStatistics {
        if ownsTransport { transport.startDelivering { [loop] packet in if packet.isRTCP { loop.deliver(packet) } } }
        defer { if ownsTransport { transport.close() } }
        start()
        loop.run { [self] packets in
            for packet in packets { handleRTCP(packet.bytes) }
            return step()
        }
        return try finish()
    }

    /// Starts the capture and encoding threads; the media loop then runs `step` until it returns
    /// nil, and `finish`.
    func start() {
        func spawn(_ name: String, _ body: @escaping @Sendable () throws -> Void) {
            threads.enter()
            startThread(named: name) { [self] in
                do { try body() } catch { errors.withLock { $0.append(error) } }
                threads.leave()
            }
        }
        if videoTrack != nil { spawn("video-send") { [self] in try sendVideo() } }
        if audioTrack != nil { spawn("audio-send") { [self] in try sendAudio() } }
    }

    /// One turn of the media loop: reports when due, then what the pacer releases. Nil once the
    /// media threads have ended and the pacer is empty (or on `stop()`); else how long the loop
    /// may wait before the next turn.
    func step() -> Duration? {
        let now = clock.now
        if now >= nextReport {
            sendReports()
            nextReport = max(nextReport + .seconds(1), now)
        }
        let (wait, done) = pace(now: now)
        if done || stopping.load(ordering: .relaxed) { return nil }
        return min(wait, nextReport - now)
    }

    /// After the loop: the media threads are told to stop and waited for, BYE goes out.
    func finish() throws -> SenderStatistics {
        stop()
        threads.wait()
        sendGoodbye()
        if let error = errors.withLock({ $0.first }) { throw error }
        return state.withLock { s in
            var stats = s.stats
            stats.elapsed = clock.now
            return stats
        }
    }

    var mediaThreads: Int { (videoTrack != nil ? 1 : 0) + (audioTrack != nil ? 1 : 0) }
    /// Wakes the media loop: packets were queued for the pacer.
    func wakePacer() { loop.wake() }
    let threads = DispatchGroup()
    let errors = Mutex<[any Error]>([])
    /// When the next sender reports go (used by the loop's thread only).
    var nextReport = Duration.seconds(1)

    let mediaFinished = Atomic<Int>(0)

    func shouldContinue(_ elapsed: Duration) -> Bool {
        !stopping.load(ordering: .relaxed) && configuration.duration.map { elapsed < $0 } ?? true
    }

    /// The MID header extension element for a packet of `ssrc` (media or its RTX), while the peer
    /// has not yet reported on the stream.
    func midElement(for ssrc: UInt32, state s: State) -> HeaderExtensionElement? {
        guard let mid = configuration.midExtension else { return nil }
        let media = ssrc == rtxSSRC ? videoSSRC : ssrc
        guard !s.midAcknowledged.contains(media) else { return nil }
        return HeaderExtensionElement(id: mid.id, data: Array((media == audioSSRC ? mid.audio : mid.video).utf8))
    }

    /// A packet the transport cannot send is counted: a network that is down for a while must
    /// not end the direction.
    func send(_ packet: RTPPacket, kind: MediaKind) {
        if !transport.sendRTP(packet.serialized(), kind: kind) { state.withLock { $0.stats.sendErrors += 1 } }
    }

    /// SR + SDES per stream (RFC 3550 §6.4.1, §6.5), RTP time extrapolated to now.
    func sendReports() {
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

    func sendGoodbye() {
        if videoTrack != nil {
            sendRTCP([.goodbye(Goodbye(sources: [videoSSRC], reason: "done"))], kind: .video)
        }
        if audioTrack != nil {
            sendRTCP([.goodbye(Goodbye(sources: [audioSSRC], reason: "done"))], kind: .audio)
        }
    }

    func sendRTCP(_ packets: [RTCPPacket], kind: MediaKind) {
        transport.sendRTCP(RTCPPacket.serializeCompound(packets), kind: kind)
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
                     rtpTimestamp: lastTimestamp &+ UInt32(truncatingIfNeeded: Int64((now - lastTime).inSeconds * clockRate)),
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
        guard available.wait(timeout: .now() + timeout.inSeconds) == .success else { return nil }
        return items.withLock { $0.isEmpty ? nil : $0.removeFirst() }
    }
}
