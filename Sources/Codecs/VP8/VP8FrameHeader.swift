import MediaCore
/// The uncompressed data chunk at the start of every VP8 frame (RFC 6386 §9.1):
///
///     frame tag, 3 bytes little-endian:
///       bit 0      key_frame   (0 = keyframe)
///       bits 1-3   version     (0 ... 3)
///       bit 4      show_frame
///       bits 5-23  first_part_size
///     keyframes only, 7 more bytes:
///       start code 0x9d 0x01 0x2a
///       2 bytes: 14-bit width  + 2-bit horizontal scale
///       2 bytes: 14-bit height + 2-bit vertical scale
///
/// The decoder checks it before handing bytes to libvpx, so that garbage and truncated input is
/// rejected with a reason instead of being half-decoded.
public struct VP8FrameHeader: Sendable, Equatable {
    public var isKeyframe: Bool
    public var version: Int
    public var showFrame: Bool
    public var firstPartitionSize: Int
    /// Present on keyframes only.
    public var width: Int?
    public var height: Int?

    static let tagSize = 3
    static let keyframeHeaderSize = 10
    static let startCode: [UInt8] = [0x9d, 0x01, 0x2a]

    public init(parsing bytes: [UInt8]) throws(MediaError) {
        func fail(_ detail: String) -> MediaError { MediaError(.invalidData, "parse VP8 frame header", detail) }
        guard bytes.count >= Self.tagSize else { throw fail("\(bytes.count) bytes; a VP8 frame has at least 3") }
        let tag = UInt32(bytes[0]) | UInt32(bytes[1]) << 8 | UInt32(bytes[2]) << 16
        isKeyframe = tag & 0x1 == 0
        version = Int((tag >> 1) & 0x7)
        showFrame = (tag >> 4) & 0x1 == 1
        firstPartitionSize = Int(tag >> 5)
        guard version <= 3 else { throw fail("version \(version); VP8 defines 0 ... 3") }
        let headerSize = isKeyframe ? Self.keyframeHeaderSize : Self.tagSize
        guard bytes.count >= headerSize else {
            throw fail("keyframe of \(bytes.count) bytes is shorter than its 10-byte header")
        }
        if isKeyframe {
            guard Array(bytes[3..<6]) == Self.startCode else { throw fail("keyframe without the 9d 01 2a start code") }
            width = Int(UInt16(bytes[6]) | UInt16(bytes[7]) << 8) & 0x3fff
            height = Int(UInt16(bytes[8]) | UInt16(bytes[9]) << 8) & 0x3fff
            guard width! > 0, height! > 0 else { throw fail("keyframe with size \(width!)x\(height!)") }
        }
        guard firstPartitionSize > 0, firstPartitionSize <= bytes.count - headerSize else {
            throw fail("first partition of \(firstPartitionSize) bytes does not fit in a frame of \(bytes.count) bytes")
        }
    }
}
