import Codecs
import Devices
import MediaCore
import RTPTransport

extension VideoPayloadFormat {
    /// The format of a codec by its SDP encoding name (RFC 7741's VP8, RFC 6184's H264), or nil
    /// for one callend does not speak.
    init?(encodingName: String) {
        switch encodingName.uppercased() {
        case "VP8": self = .vp8
        case "H264": self = .h264
        default: return nil
        }
    }

    /// The SDP encoding name.
    var encodingName: String { self == .vp8 ? "VP8" : "H264" }

    /// A realtime encoder of this format. `capsKeyframes`: a keyframe may cost at most three
    /// average frames (the automatic mode, whose steps down must not overfill the smaller pipe;
    /// OpenH264 has no such cap and sizes its IDRs from its own rate control). `h264Device`: the
    /// kernel's memory-to-memory encoder for H.264 instead of OpenH264.
    func makeEncoder(width: Int, height: Int, frameRate: Int, bitrate: Int, capsKeyframes: Bool, h264Device: String? = nil) throws(MediaError) -> any VideoEncoder {
        switch self {
        case .vp8:
            var settings = VP8EncoderConfiguration(width: width, height: height, frameRate: frameRate, targetBitrate: bitrate)
            if capsKeyframes { settings.maxIntraBitratePercent = 300 }
            return try VP8Encoder(configuration: settings)
        case .h264:
            if let h264Device {
                do {
                    return try MemoryToMemoryEncoder(path: h264Device, codedFormat: "H264", width: width, height: height, framesPerSecond: frameRate, bitrate: bitrate)
                } catch {
                    throw MediaError(.io, error.operation, error.detail)
                }
            }
            return try H264Encoder(configuration: H264EncoderConfiguration(width: width, height: height, frameRate: frameRate, targetBitrate: bitrate))
        }
    }

    func makeDecoder() throws(MediaError) -> any VideoDecoder {
        switch self {
        case .vp8: return try VP8Decoder()
        case .h264: return try H264Decoder()
        }
    }
}

extension VideoCodec {
    /// Why this machine cannot send and receive the codec (a library that does not load), or
    /// nil when it can. VP8's libvpx is linked; H.264's libraries are loaded on first use.
    public var unavailableReason: String? {
        switch self {
        case .vp8: return nil
        case .h264: return H264Encoder.unavailableReason ?? H264Decoder.unavailableReason
        }
    }
}
