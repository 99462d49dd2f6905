/// The payload format of a video stream: what its RTP payloads carry and how a frame is cut into
/// them and put back together.
public enum VideoPayloadFormat: String, Sendable, Equatable {
    /// RFC 7741.
    case vp8
    /// RFC 6184, packetization mode 1.
    case h264
}

/// A video stream's packetizer, for its format.
public enum VideoPacketizer: Sendable {
    case vp8(VP8Packetizer)
    case h264(H264Packetizer)

    public init(format: VideoPayloadFormat) {
        switch format {
        case .vp8: self = .vp8(VP8Packetizer(initialPictureID: UInt16.random(in: 0...0x7fff)))
        case .h264: self = .h264(H264Packetizer())
        }
    }

    /// Payloads for one frame (for H.264, an Annex B access unit). The temporal layer marks only
    /// VP8's descriptor; H.264's payload has no place for it.
    public mutating func packetize(_ frame: [UInt8], layer: (id: Int, sync: Bool)? = nil) -> [[UInt8]] {
        switch self {
        case .vp8(var packetizer):
            defer { self = .vp8(packetizer) }
            return packetizer.packetize(frame, layer: layer)
        case .h264(var packetizer):
            defer { self = .h264(packetizer) }
            return packetizer.packetize(annexB: frame)
        }
    }
}
