import Platform
import RTPTransport
import ICEServers

/// How the encoders are driven during a call.
public enum VideoEncodingMode: Sendable, Equatable {
    /// callend manages video bitrate, audio bitrate and camera mode from the network estimate.
    case auto
    /// The caller's `EncodingParameters` caps apply and nothing adapts the camera mode.
    case manual
}

/// Caps the caller sets in manual mode (bits per second).
public struct EncodingParameters: Sendable, Equatable {
    public var maxVideoBitrate: Int?
    public var maxAudioBitrate: Int?

    public init(maxVideoBitrate: Int? = nil, maxAudioBitrate: Int? = nil) {
        self.maxVideoBitrate = maxVideoBitrate
        self.maxAudioBitrate = maxAudioBitrate
    }
}

/// Which candidates ICE may use (as RTCConfiguration's iceTransportPolicy).
public enum ICETransportPolicy: String, Sendable, CaseIterable { case all, relay }

public enum VideoCodec: String, Sendable, Codable, CaseIterable { case vp8 = "VP8", h264 = "H264" }
public enum AudioCodec: String, Sendable, Codable, CaseIterable { case opus = "opus" }

/// A configuration mistake the caller can fix, with what to do instead.
public struct ConfigurationError: Error, Equatable, Sendable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// TLS to the signaling service: the system's trusted CAs, or only those in a PEM file. The
/// service's certificate must also name the host dialled.
public enum SignalingTLS: Sendable, Equatable {
    case systemTrust
    case caFile(String)
}

/// How to join a room, in the shape hosted video SDKs use:
///
///     let options = try ConnectOptions(token: token) {
///         $0.roomName = "my-room"
///         $0.videoEncodingMode = .auto
///     }
///
/// `.auto` manages bitrates and the camera mode itself, so it cannot be combined with manual
/// `EncodingParameters` or preferred codecs: setting both is an error, not a silent choice.
public struct ConnectOptions: Sendable {
    public var token: String
    public var roomName: String = ""
    public var videoEncodingMode: VideoEncodingMode?
    public var encodingParameters: EncodingParameters?
    public var preferredVideoCodecs: [VideoCodec] = []
    public var preferredAudioCodecs: [AudioCodec] = []
    /// STUN and TURN servers of the caller's own, beside those the signaling service hands out.
    public var iceServers: [ICEServer] = []
    /// `.relay`: only TURN relayed candidates (the peer never learns this side's addresses).
    public var iceTransportPolicy: ICETransportPolicy = .all
    /// Host candidates on these addresses only (a lab that must not use its other interfaces);
    /// empty: every interface.
    public var iceLocalAddresses: [String] = []
    /// TLS to the signaling service (nil: plain TCP, which is refused off loopback unless
    /// `insecurePlaintext`).
    public var signalingTLS: SignalingTLS?
    /// Plain TCP to a signaling service that is not on loopback: its token, TURN passwords and
    /// the DTLS fingerprint cross the network readable and rewritable. Only when asked for.
    public var insecurePlaintext = false
    /// Further signaling services (other nodes, a standby), tried in turn after the first
    /// whenever a connection fails or is lost; the call's media goes on meanwhile.
    public var fallbackServers: [(host: String, port: Int)] = []
    /// WHEP players (through `serve --http`'s /whep/ROOM) this endpoint sends its media to at
    /// once, beside its call; 0 refuses them.
    public var maxViewers = 4

    public init(token: String, _ configure: (inout ConnectOptions) -> Void = { _ in }) throws(ConfigurationError) {
        self.token = token
        configure(&self)
        try validate()
    }

    /// The mode in force: `.auto` unless manual parameters or preferred codecs were given.
    public var effectiveEncodingMode: VideoEncodingMode {
        videoEncodingMode ?? (encodingParameters != nil || !preferredVideoCodecs.isEmpty || !preferredAudioCodecs.isEmpty ? .manual : .auto)
    }

    public func validate() throws(ConfigurationError) {
        guard !token.isEmpty else { throw ConfigurationError("no access token: mint one with 'callend token' or set CALLEND_TOKEN") }
        guard !roomName.isEmpty else { throw ConfigurationError("no room name: set roomName") }
        if videoEncodingMode == .auto {
            if encodingParameters != nil {
                throw ConfigurationError("videoEncodingMode .auto manages bitrates itself and cannot take EncodingParameters; use .manual to set maxVideoBitrate")
            }
            if !preferredVideoCodecs.isEmpty || !preferredAudioCodecs.isEmpty {
                throw ConfigurationError("videoEncodingMode .auto chooses codecs itself and cannot take preferred codecs; use .manual to prefer codecs")
            }
        }
        if let video = encodingParameters?.maxVideoBitrate, !(50_000...50_000_000).contains(video) {
            throw ConfigurationError("maxVideoBitrate \(video) bit/s is outside 50000 ... 50000000")
        }
        guard (0...64).contains(maxViewers) else { throw ConfigurationError("maxViewers \(maxViewers) is outside 0 ... 64") }
        if let audio = encodingParameters?.maxAudioBitrate, !(6_000...510_000).contains(audio) {
            throw ConfigurationError("maxAudioBitrate \(audio) bit/s is outside 6000 ... 510000 (Opus)")
        }
    }
}
