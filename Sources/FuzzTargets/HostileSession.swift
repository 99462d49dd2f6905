import Platform
import MediaCore
import RTPTransport

/// The `session` fuzz target: a media session core that sends VP8 (with RTX, RED and ULPFEC) and
/// Opus in auto mode, fed whatever a peer can send once DTLS-SRTP is up: RTP of every payload
/// type it takes and compound RTCP (reports with their NTP times and round trips, NACKs, PLI,
/// FIR, REMB, transport-cc, SDES, BYE), at the times the input says, between frames of its own
/// and ticks. Every number in those packets reaches the estimator, the pacer, the
/// retransmission history, lip sync and the jitter buffers; none may trap or grow without bound.
///
/// The input is chunks, each behind a 2-byte length: a chunk's first byte says how much time
/// passes (low 4 bits, 5 ms each), whether it is RTCP (bit 4), whether the transport knew its
/// kind (bit 5), and whether a video frame (bit 6) or an audio packet (bit 7) of our own goes
/// first; the rest is the datagram.
enum HostileSession {
    static let configuration: SessionConfiguration = {
        var c = SessionConfiguration(cname: "fuzz", receiverSSRC: 0x1009, ntpAtZero: 0xE000_0000_0000_0000)
        c.video = .init(ssrc: 0x1001, payloadType: 96, mid: "1", redPayloadType: 98, fecPayloadType: 100)
        c.rtx = (0x1002, 97)
        c.audio = .init(ssrc: 0x1003, payloadType: 111, mid: "0", redPayloadType: 63)
        c.receivedVideo = .init(payloadType: 96, rtxPayloadType: 97, feedback: ["nack", "nack pli", "ccm fir"], redPayloadType: 98,
                                fecPayloadType: 100, redRTXPayloadType: 99)
        c.receivedAudio = .init(payloadType: 111, redPayloadType: 63)
        c.transportSequenceExtensionID = 3
        c.midExtensionID = 4
        var congestion = BandwidthEstimator.Configuration()
        congestion.startBitrate = 800_000
        congestion.maxBitrate = 2_564_000
        c.congestion = congestion
        return c
    }()

    static let keyframe: [UInt8] = [0x50, 0x01, 0x00, 0x9d, 0x01, 0x2a, 0x80, 0x02, 0xe0, 0x01] + [UInt8](repeating: 0x5a, count: 1500)
    static let delta: [UInt8] = [0x51, 0x01, 0x00] + [UInt8](repeating: 0xa5, count: 300)
    static let opus: [UInt8] = [0x78] + [UInt8](repeating: 0x33, count: 60)

    static func run(_ bytes: [UInt8]) {
        var core = RTPSessionCore(configuration: configuration)
        var audio = AudioJitterBuffer()
        var now = MediaTime.zero
        var frames = 0
        func handle(_ event: SessionEvent) {
            for action in core.handle(event, at: now) {
                switch action {
                case .playAudio(let packet, let arrival): audio.insert(packet, arrival: arrival.sinceOrigin)
                case .decode(let decoded):
                    for frame in decoded { _ = core.handle(.videoShown(rtpTimestamp: frame.rtpTimestamp, at: now), at: now) }
                default: break
                }
            }
        }
        for chunk in FuzzTarget.chunks(bytes) {
            guard let flags = chunk.first else { continue }
            now = now + .microseconds(Int64(flags & 0x0f) * 5_000)
            if flags & 0x40 != 0 {
                handle(.encodedVideo(data: frames % 30 == 0 ? keyframe : delta, isKeyframe: frames % 30 == 0, capturedAt: now))
                frames += 1
            }
            if flags & 0x80 != 0 { handle(.encodedAudio(payload: opus, samples: 960, capturedAt: now)) }
            let datagram = Array(chunk.dropFirst())
            let isRTCP = flags & 0x10 != 0
            let kind: MediaKind? = flags & 0x20 == 0 ? nil : (isRTCP ? .video : (datagram.count > 1 && datagram[1] & 0x7f == 111 ? .audio : .video))
            handle(.datagram(bytes: datagram, isRTCP: isRTCP, kind: kind, arrival: now))
            handle(.tick)
            _ = audio.nextPlayout(at: now.sinceOrigin)
        }
        now = now + .seconds(5)
        handle(.tick)
    }
}
