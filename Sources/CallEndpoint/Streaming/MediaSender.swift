import Codecs
import MediaCore
import Devices
import Dispatch
import FoundationEssentials
import Glibc
import Platform
import RTPTransport
import Synchronization

/// Sends VP8 and Opus over RTP through a `PacketTransport` (two UDP ports for SDP files, the
/// bundled ICE/DTLS-SRTP transport in a call). This is the sending shell: capture and encoding
/// run on threads of their own (MediaSender+Video: capture, mode, encoder; MediaSender+Audio)
/// and hand each encoded frame to the media loop, where the session core (`RTPSessionCore`)
/// packetizes, paces, stamps, retransmits and reports. What the core learns comes back here:
/// keyframe requests, and the bandwidth estimate, which the encoding controller turns into
/// encoder settings and camera modes (MediaSender+Encoding).
public final class MediaSender: @unchecked Sendable {  // mutable state is behind `encoding` and `network`; the transport is thread-safe
    public let configuration: MediaSenderConfiguration
    /// Where packets go: the configuration's two ports (made here), or a call's transport.
    let transport: any PacketTransport
    let videoSSRC: UInt32
    let rtxSSRC: UInt32
    let audioSSRC: UInt32
    /// False when a call owns the transport and routes the peer's RTCP here itself.
    let ownsTransport: Bool
    let cname = "callend-\(UInt32.random(in: 1...UInt32.max))"
    let clock = MonotonicClock()
    let started: MediaTime
    let keyframeWanted = Atomic<Bool>(false)
    let stopping = Atomic<Bool>(false)
    let loop: MediaLoop

    /// The encoding controller and what it decided (auto mode), shared by the encoding threads
    /// and the loop, which brings the estimate.
    struct Encoding {
        var controller: EncodingController?
        /// The latest estimate and loss, for a controller built anew (a new input).
        var estimate: (bitrate: Int, lossFraction: Double)?
        /// Whether the peer's feedback has moved the estimate yet (its start is a guess: a WHEP
        /// viewer was judged too thin for the shared stream on its 800 kbit/s start, 2 s in, and
        /// encoded for itself for 10-14 s).
        var estimateJudged = false
        var stats = SenderStatistics()

        /// A new estimate from the session's estimator, for `cause`.
        mutating func estimated(bitrate: Int, lossFraction: Double, cause: String) {
            estimate = (bitrate, lossFraction)
            if cause != BandwidthEstimator.Cause.start.rawValue { estimateJudged = true }
        }

        /// The video budget a shared encoder judges this peer by: none (never thin) until the
        /// peer's feedback has judged the estimate.
        var judgedVideoBudget: Int? { estimate == nil || !estimateJudged ? nil : controller?.videoBitrate }
    }
    let encoding = Mutex(Encoding())
    /// What the core has counted, as of the loop's last turn.
    struct Network {
        var counters = RTPSessionCore.Counters()
        var roundTripTime: Duration?
        var peerVideoLoss: Double?
        var sendErrors = 0
    }
    let network = Mutex(Network())
    /// How long the pacer's oldest packet has waited (µs), as of the loop's last turn: encoder
    /// pushback reads it.
    let pacerQueueDelay = Atomic<Int64>(0)
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

    /// `loop`: the media loop the session runs on (a call's, shared with its receiver).
    init(configuration: MediaSenderConfiguration, transport: (any PacketTransport)?,
         tracks: (video: LocalVideoTrack?, audio: LocalAudioTrack?)?, loop: MediaLoop) throws {
        self.configuration = configuration
        self.loop = loop
        started = loop.clock.now
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

    /// Time since the sender was made: what the encoding controller's hold-downs count in.
    var elapsed: Duration { clock.now - started }

    /// The SDP a receiver (GStreamer, ffmpeg, VLC, `callend receive`) needs.
    public var sessionDescription: SessionDescriptionFile {
        var streams: [StreamDescription] = []
        let crypto = configuration.srtp
        if videoTrack != nil {
            // H.264: what callend's encoder makes (constrained baseline, level 3.1) in mode 1.
            let fmtp = configuration.videoFormat == .h264 ? "level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f" : nil
            streams.append(StreamDescription(kind: .video, port: configuration.videoPort, payloadType: configuration.payloadTypes.video,
                                             encodingName: configuration.videoFormat.encodingName, clockRate: 90_000, fmtp: fmtp, feedback: ["nack", "nack pli", "ccm fir"],
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
        videoFrames.put(nil)  // the video and audio threads, waiting for media, end
        audioBlocks.put([])
        loop.wake()
    }

    /// The statistics so far, while sending.
    public func snapshot() -> SenderStatistics {
        var stats = encoding.withLock { $0.stats }
        let net = network.withLock { $0 }
        let c = net.counters
        stats.videoFrames = c.videoFrames
        stats.keyframes = c.keyframes
        stats.videoPackets = c.videoPackets
        stats.videoBytes = c.videoBytes
        stats.audioPackets = c.audioPackets
        stats.audioBytes = c.audioBytes
        stats.nacksReceived = c.nacksReceived
        stats.retransmitted = c.retransmitted
        stats.fecPackets = c.fecPacketsSent
        stats.retransmissionsRefused = c.retransmissionsRefused
        stats.keyframeRequests = c.keyframeRequests
        stats.transportFeedbackReceived = c.transportFeedbackReceived
        stats.paddingBytes = c.paddingBytes
        stats.videoBudget.merge(c.videoPacing)
        stats.audioBudget.merge(c.audioPacing)
        stats.roundTripTime = net.roundTripTime
        stats.receiverLossFraction = net.peerVideoLoss
        stats.sendErrors = net.sendErrors
        stats.elapsed = elapsed
        return stats
    }

    /// Sends until the duration passes, the sources end, or `stop()`; returns the statistics.
    /// The peer's RTCP and the session core run on this thread (a media loop of the sender's own).
    public func run() throws -> SenderStatistics {
        if ownsTransport { transport.startDelivering { [loop] packet in if packet.isRTCP { loop.deliver(packet) } } }
        defer { if ownsTransport { transport.close() } }
        let session = MediaSession(transport: transport, loop: loop, sender: self, receiver: nil)
        return try session.run()!.get()
    }

    /// Starts the capture and encoding threads (the session does, before its loop).
    func start() {
        func spawn(_ name: String, _ body: @escaping @Sendable () throws -> Void) {
            threads.enter()
            startThread(named: name) { [self] in
                do { try body() } catch { errors.withLock { $0.append(error) } }
                mediaFinished.add(1, ordering: .relaxed)
                loop.wake()
                threads.leave()
            }
        }
        if videoTrack != nil { spawn("video-send") { [self] in try sendVideo() } }
        // Its own thread: the capture thread then only fills a queue, and a moment of encoding
        // late on a busy machine never makes the capture skip a period (a gap in the sound).
        if audioTrack != nil { spawn("audio-send") { [self] in try sendAudio() } }
    }

    /// Whether sending is over: stopped, or the media threads have ended and the pacer is empty.
    func isFinished(pacerEmpty: Bool) -> Bool {
        stopping.load(ordering: .relaxed) || mediaFinished.load(ordering: .relaxed) >= mediaThreads && pacerEmpty
    }

    /// The media threads are told to stop and waited for; the statistics (the session sends BYE).
    func finish() throws -> SenderStatistics {
        stop()
        threads.wait()
        if let error = errors.withLock({ $0.first }) { throw error }
        return snapshot()
    }

    /// On the loop's thread, after each turn: what the core counted.
    func absorb(_ core: RTPSessionCore.Snapshot, pacerQueueDelay delay: Int64, sendErrors: Int) {
        pacerQueueDelay.store(delay, ordering: .relaxed)
        network.withLock { n in
            n.counters = core.counters
            n.roundTripTime = core.roundTripTime
            n.peerVideoLoss = core.peerVideoLoss
            n.sendErrors = sendErrors
        }
    }

    /// The peer (or the pacer) needs a keyframe: the next picture is one.
    func keyframeNeeded() { keyframeWanted.store(true, ordering: .relaxed) }

    var mediaThreads: Int { (videoTrack != nil ? 1 : 0) + (audioTrack != nil ? 1 : 0) }
    let threads = DispatchGroup()
    let errors = Mutex<[any Error]>([])
    let mediaFinished = Atomic<Int>(0)
    /// The newest picture only: an encoder that falls behind skips. Nil ends the video thread
    /// (the source ended, or stop()).
    let videoFrames = CaptureQueue<VideoFrame?>(capacity: 1)
    /// 200 ms of sound: a stalled encoder drops the oldest. An empty block ends the audio thread.
    let audioBlocks = CaptureQueue<[Int16]>(capacity: 10)

    func shouldContinue() -> Bool {
        !stopping.load(ordering: .relaxed) && configuration.duration.map { elapsed < $0 } ?? true
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

    /// The oldest item, waiting up to `timeout` (for ever when nil); nil when none came.
    func take(timeout: Duration?) -> Item? {
        if let timeout {
            guard available.wait(for: timeout) else { return nil }
        } else {
            available.wait()
        }
        return items.withLock { $0.isEmpty ? nil : $0.removeFirst() }
    }
}
