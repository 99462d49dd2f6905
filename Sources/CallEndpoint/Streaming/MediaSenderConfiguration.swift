import Codecs
import MediaCore
import Devices
import Dispatch
import FoundationEssentials
import Glibc
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
    /// RFC 9143 §15 / RFC 8843 §15.2: the MID header extension's ID and each kind's mid, sent on
    /// every packet of a stream until the peer's first receiver report for it shows it can tell
    /// the stream apart (as libwebrtc does); nil where not negotiated.
    public var midExtension: (id: UInt8, video: String, audio: String)?
    public var encodingMode: VideoEncodingMode = .auto
    /// Whether auto mode may switch a camera's mode. A viewer's session (one of several senders
    /// of the same camera) scales pictures instead, so viewers cannot pull the camera from
    /// under the call and each other.
    public var controlsCameraMode = true
    /// A shared encoder this session takes its video from instead of encoding its own (the
    /// viewers of one endpoint).
    var videoFanout: VideoFanout?
    /// The same for the sound.
    var audioFanout: AudioFanout?
    /// A call's sender beside viewers: their shared encoder, taken while any viewer watches (one
    /// encode for the call's peer and every viewer); its own encoder (and camera modes) otherwise.
    var videoFanoutWhenWatched: VideoFanout?
    /// Auto mode on a peer that sends no transport-cc feedback (a WHIP server): the estimate
    /// comes from the loss in its reception reports and its REMB (`ReportedLossEstimator`). A
    /// call's sender does; `callend send`, whose receivers are RTP tools, does not.
    public var estimatesFromReports = false
    /// The most the video may use (manual mode's cap, auto mode's ceiling).
    public var maxVideoBitrate = 2_500_000
    /// Every encoding decision, as it is made.
    public var onDecision: (@Sendable (EncodingDecision) -> Void)?
    /// Records what is sent as it was encoded (a call's recording); the call closes it.
    public var recorder: MediaRecorder?

    /// Payload types: fixed for SDP files (96, its RTX 97, Opus 111), the offerer's in a call.
    public struct PayloadTypes: Sendable, Equatable {
        public var video: UInt8 = 96
        /// RFC 4588 retransmissions and probe padding; nil when the peer did not take RTX (then
        /// lost packets are not resent and probes carry no padding).
        public var rtx: UInt8? = 97
        public var audio: UInt8 = 111
        /// RFC 2198 redundant audio, when the peer takes it.
        public var audioRED: UInt8?
        /// Video FEC: RED (RFC 2198) and ULPFEC (RFC 5109) inside it, when the peer takes both.
        public var videoRED: UInt8?, videoFEC: UInt8?
        /// RTX for RED packets: H.264's lost FEC packets are resent on it (`SessionConfiguration.Outbound`).
        public var videoREDRTX: UInt8?
        public init(video: UInt8 = 96, rtx: UInt8? = 97, audio: UInt8 = 111, audioRED: UInt8? = nil, videoRED: UInt8? = nil, videoFEC: UInt8? = nil) {
            self.video = video
            self.rtx = rtx
            self.audio = audio
            self.audioRED = audioRED
            (self.videoRED, self.videoFEC) = (videoRED, videoFEC)
        }
    }
    public var payloadTypes = PayloadTypes()
    /// The video codec sent (the one negotiated; VP8 for SDP files).
    public var videoFormat: VideoPayloadFormat = .vp8
    /// H.264 from the kernel's memory-to-memory encoder at this path instead of OpenH264.
    public var h264EncoderDevice: String?

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
    /// Video FEC packets (ULPFEC in RED) sent.
    public var fecPackets = 0
    public var keyframeRequests = 0
    /// Transport-wide congestion control feedback packets from the receiver (RTCP, RFC 8888's
    /// predecessor draft-holmer-rmcat-transport-wide-cc-extensions): what drives the estimate.
    public var transportFeedbackReceived = 0
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
    /// Pictures given to a video encoder, and a camera's own H.264 access units sent as they came
    /// (a camera passed through makes no encoder call).
    public var encoderCalls = 0
    public var framesPassedThrough = 0
    /// The sender's hops of each stream's latency (`LatencyBudget`: capture, encode, pacing).
    public var videoBudget = LatencyBudget(), audioBudget = LatencyBudget()

    public var description: String {
        let seconds = max(elapsed.inSeconds, 0.001)
        let videoKbps = Double(videoBytes * 8) / seconds / 1000, audioKbps = Double(audioBytes * 8) / seconds / 1000
        var line = "sent \(seconds.fixed(1)) s: video \(videoFrames) frames (\(keyframes) keyframes), \(videoPackets) packets, \(videoKbps.fixed(0)) kbit/s; "
            + "audio \(audioPackets) packets, \(audioKbps.fixed(0)) kbit/s; NACKs \(nacksReceived), retransmitted \(retransmitted), keyframe requests \(keyframeRequests)"
        if let roundTripTime { line += "; RTT \((roundTripTime.inSeconds * 1000).fixed(1)) ms" }
        if let receiverLossFraction { line += "; receiver loss \((receiverLossFraction * 100).fixed(1)) %" }
        if framesHeldBack + retransmissionsRefused > 0 {
            line += "; held back \(framesHeldBack) frames, refused \(retransmissionsRefused) retransmissions (congestion)"
        }
        if fecPackets > 0 { line += "; \(fecPackets) video FEC packets" }
        if framesPassedThrough > 0 { line += "; \(framesPassedThrough) camera H.264 frames passed through, \(encoderCalls) encoder calls" }
        return line
    }
}

extension MediaSenderConfiguration.VideoSource {
    /// Opens this source as a track (nil for `.none`); `stamped`: a file's pictures carry their
    /// capture time for a peer that measures latency.
    public func makeTrack(loopFiles: Bool, stamped: Bool = false) throws -> LocalVideoTrack? {
        let input: CameraInput
        switch self {
        case .none: return nil
        case .pattern(let w, let h, let f): input = .pattern(width: w, height: h, frameRate: f)
        case .y4m(let path): input = .file(path: path)
        case .camera(let path, let mode): input = .device(path: path, mode: mode)
        }
        return LocalVideoTrack(source: try CameraSource(input, loopFiles: loopFiles, stampsFiles: stamped))
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
