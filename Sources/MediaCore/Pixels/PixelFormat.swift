/// Camera pixel formats callend converts to I420, named by their V4L2 FourCC.
public enum PixelFormat: String, Sendable, CaseIterable {
    /// Packed 4:2:2, Y0 U Y1 V (V4L2_PIX_FMT_YUYV, 'YUYV').
    case yuyv = "YUYV"
    /// Planar Y then interleaved UV at 4:2:0 (V4L2_PIX_FMT_NV12, 'NV12').
    case nv12 = "NV12"
    /// Motion JPEG: each frame a JPEG picture (V4L2_PIX_FMT_MJPEG, 'MJPG').
    case mjpeg = "MJPG"
    /// Planar 4:2:0 (V4L2_PIX_FMT_YUV420, 'YU12').
    case i420 = "YU12"
    /// Packed 24-bit R, G, B bytes (V4L2_PIX_FMT_RGB24, 'RGB3').
    case rgb24 = "RGB3"
    /// Packed 24-bit B, G, R bytes (V4L2_PIX_FMT_BGR24, 'BGR3').
    case bgr24 = "BGR3"

    /// The FourCC as V4L2 stores it: the first character in the lowest byte.
    public var fourCC: UInt32 { Self.fourCC(rawValue)! }

    /// Any four-character code (one to four printable ASCII characters, padded with spaces) as
    /// V4L2 stores it; nil for other text.
    public static func fourCC(_ text: String) -> UInt32? {
        let bytes = Array(text.utf8)
        guard (1...4).contains(bytes.count), bytes.allSatisfy({ $0 >= 0x20 && $0 < 0x7f }) else { return nil }
        let padded = bytes + [UInt8](repeating: 0x20, count: 4 - bytes.count)
        return padded.enumerated().reduce(UInt32(0)) { $0 | UInt32($1.element) << (8 * UInt32($1.offset)) }
    }

    public init?(fourCC: UInt32) {
        guard let match = Self.allCases.first(where: { $0.fourCC == fourCC }) else { return nil }
        self = match
    }

    /// Bytes of one tightly packed picture, or nil for compressed formats.
    public func packedSize(width: Int, height: Int) -> Int? {
        switch self {
        case .yuyv: ((width + 1) / 2) * 4 * height
        case .nv12, .i420: VideoFrame.packedSize(width: width, height: height)
        case .rgb24, .bgr24: width * 3 * height
        case .mjpeg: nil
        }
    }
}
