import Platform
import MediaCore

/// What a media session core is told, and what it asks its shell to do. The core reads no clock
/// and owns no thread or socket: every event comes with the `MediaTime` it happened at, and the
/// shell carries out the actions (sends the bytes, decodes, plays, sets the encoder).
public enum SessionEvent: Sendable {
    /// One encoded VP8 frame, taken at `capturedAt` (its RTP timestamp follows from that), and
    /// its temporal layer when the encoder makes layers.
    case encodedVideo(data: [UInt8], isKeyframe: Bool, capturedAt: MediaTime, layer: VideoLayer? = nil)
    /// One encoded Opus packet of `samples` samples per channel, its first taken at `capturedAt`.
    case encodedAudio(payload: [UInt8], samples: Int, capturedAt: MediaTime)
    /// A clear datagram from the transport (`kind` when the transport knows it by port), with
    /// the time it arrived.
    case datagram(bytes: [UInt8], isRTCP: Bool, kind: MediaKind?, arrival: MediaTime)
    /// A picture with this RTP timestamp was shown at `at` (lip sync).
    case videoShown(rtpTimestamp: UInt32, at: MediaTime)
    /// Sound with this RTP timestamp is heard at `at` (played, plus what waits in the device).
    case audioPlayed(rtpTimestamp: UInt32, at: MediaTime)
    /// The decoder (or its backlog) needs a keyframe to go on.
    case keyframeWanted
    /// The video source's state for the peer (RTCP SDES NOTE, RFC 3550 §6.5.7), sent at once
    /// and in every report until cleared with nil: "camera lost".
    case videoNote(String?)
    /// Time passed: whatever is due (pacing, feedback, reports) happens.
    case tick
}

/// A frame's place in the encoder's temporal layers (RFC 7741 §4.2's TID and Y).
public struct VideoLayer: Sendable, Equatable {
    public var id: Int
    public var sync: Bool
    public init(id: Int, sync: Bool) { (self.id, self.sync) = (id, sync) }
}

public enum SessionAction: Sendable {
    /// Clear RTP or RTCP for the transport to protect and send.
    case send(bytes: [UInt8], isRTCP: Bool, kind: MediaKind)
    /// Complete frames for the decoder, in order.
    case decode([VideoJitterBuffer.Frame])
    /// An audio packet for the playout's jitter buffer, with its arrival.
    case playAudio(RTPPacket, arrival: MediaTime)
    /// The peer asked for a keyframe (PLI, FIR, a NACK for packets too old, or the pacer had to
    /// drop video it queued).
    case keyframeNeeded
    /// The bandwidth estimate moved (auto mode): what the encoding controller follows.
    case estimate(bitrate: Int, lossFraction: Double, cause: String)
    /// Video FEC now sends this many FEC packets per media packet: the encoder's share of the
    /// estimate is that much smaller.
    case videoProtection(Double)
    /// Lip sync: how long to hold the picture and to delay the sound, on top of their own delays.
    case holds(video: Duration, audio: Duration)
    /// Every stream the peer sent has said BYE.
    case peerSaidBye
}

/// How a core is set up: what this side sends, what it receives, and the header extensions and
/// feedback the two sides agreed on.
public struct SessionConfiguration: Sendable {
    public struct Outbound: Sendable {
        public var ssrc: UInt32
        public var payloadType: UInt8
        /// The MID (RFC 8843) the stream's packets carry until the peer reports on it.
        public var mid: String?
        /// RED (RFC 2198) both sides agreed on. Audio: packets then carry earlier packets too.
        /// Video (with `fecPayloadType`): every packet goes in RED, and so does ULPFEC.
        public var redPayloadType: UInt8?
        /// Video: ULPFEC (RFC 5109) inside RED, when both sides agreed on it.
        public var fecPayloadType: UInt8?
        /// Video: what the frames handed to the core are, and so how they are packetized.
        public var videoFormat: VideoPayloadFormat = .vp8
        /// Video: RTX for RED packets. With H.264, a lost FEC packet is resent on it when the
        /// peer asks: a receiver without picture IDs (libwebrtc's) cannot tell a lost FEC packet
        /// from a lost picture, and would wait for a keyframe.
        public var redRTXPayloadType: UInt8?
        public init(ssrc: UInt32, payloadType: UInt8, mid: String? = nil, redPayloadType: UInt8? = nil, fecPayloadType: UInt8? = nil) {
            (self.ssrc, self.payloadType, self.mid, self.redPayloadType, self.fecPayloadType) = (ssrc, payloadType, mid, redPayloadType, fecPayloadType)
        }
    }
    public struct Inbound: Sendable {
        public var payloadType: UInt8
        public var rtxPayloadType: UInt8?
        /// RTCP feedback the stream's description offers ("nack", "nack pli", ...).
        public var feedback: [String]
        /// The RED (RFC 2198) payload type the peer may send it in (video: with ULPFEC).
        public var redPayloadType: UInt8?
        /// Video: ULPFEC (RFC 5109) inside RED, and the RTX payload type for RED packets.
        public var fecPayloadType: UInt8?
        public var redRTXPayloadType: UInt8?
        /// Video: the payload format, and so how frames are found and put back together.
        public var videoFormat: VideoPayloadFormat = .vp8
        public init(payloadType: UInt8, rtxPayloadType: UInt8? = nil, feedback: [String] = [], redPayloadType: UInt8? = nil,
                    fecPayloadType: UInt8? = nil, redRTXPayloadType: UInt8? = nil) {
            (self.payloadType, self.rtxPayloadType, self.feedback, self.redPayloadType) = (payloadType, rtxPayloadType, feedback, redPayloadType)
            (self.fecPayloadType, self.redRTXPayloadType) = (fecPayloadType, redRTXPayloadType)
        }
    }
    public var video: Outbound?
    /// RTX (RFC 4588) for the video stream: its SSRC and payload type.
    public var rtx: (ssrc: UInt32, payloadType: UInt8)?
    public var audio: Outbound?
    public var receivedVideo: Inbound?
    public var receivedAudio: Inbound?
    public var cname: String
    /// The SSRC this side's receiver reports and feedback come from.
    public var receiverSSRC: UInt32
    /// RFC 8285 IDs: the transport-wide sequence number (transport-cc), the MID.
    public var transportSequenceExtensionID: UInt8?
    public var midExtensionID: UInt8?
    /// Auto mode: a bandwidth estimator drives the pacer (and, through `.estimate`, the encoders);
    /// nil paces at a fixed rate.
    public var congestion: BandwidthEstimator.Configuration?
    /// The fixed pacing rate without an estimator.
    public var fixedPacingRate = 7_500_000
    /// Bytes the transport adds to each packet (the SRTP tag), for congestion accounting.
    public var transportOverhead = 0
    /// The wall clock (NTP, for sender reports) at `MediaTime.zero`: media time plus this is
    /// the NTP time of a moment.
    public var ntpAtZero: UInt64

    public init(cname: String, receiverSSRC: UInt32, ntpAtZero: UInt64) {
        (self.cname, self.receiverSSRC, self.ntpAtZero) = (cname, receiverSSRC, ntpAtZero)
    }

    /// The NTP timestamp of `time`.
    func ntp(_ time: MediaTime) -> UInt64 { ntpAtZero &+ Self.ntpUnits(time) }

    /// A media time as an NTP duration (units of 2^-32 s) since the clock's origin: what
    /// `ntpAtZero` is the wall clock's NTP time minus.
    public static func ntpUnits(_ time: MediaTime) -> UInt64 {
        let (seconds, micros) = time.microseconds.quotientAndRemainder(dividingBy: 1_000_000)
        return UInt64(bitPattern: seconds << 32) &+ UInt64(bitPattern: (micros << 32) / 1_000_000)
    }
}
