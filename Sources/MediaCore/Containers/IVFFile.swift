/// IVF, the simple container libvpx's tools use for VP8 frames as they are, little-endian:
///
///     file header, 32 bytes:
///       0  "DKIF"   4  version (0)   6  header size (32)   8  FourCC "VP80"
///      12  width   14  height   16  timebase denominator   20  timebase numerator
///      24  frame count   28  unused
///     each frame: 4 bytes size, 8 bytes pts, then the frame
public struct IVFHeader: Sendable, Equatable {
    public var fourCC: String
    public var width: Int
    public var height: Int
    public var timebaseDenominator: Int
    public var timebaseNumerator: Int
    public var frameCount: Int

    static let size = 32
    static let frameHeaderSize = 12
    /// Frames larger than this are treated as corruption rather than allocated.
    static let maxFrameSize = 16 << 20
}

public final class IVFReader {
    public let header: IVFHeader
    private let file: BinaryFile

    public init(path: String) throws(MediaError) {
        file = try BinaryFile(path: path, mode: "rb")
        let operation = "read IVF header of \(path)"
        guard let bytes = file.read(IVFHeader.size) else { throw MediaError(.invalidData, operation, "file is shorter than 32 bytes") }
        guard Array(bytes[0..<4]) == Array("DKIF".utf8), let headerSize = bytes.readLE16(at: 6), headerSize >= 32 else {
            throw MediaError(.invalidData, operation, "not an IVF file (no DKIF signature)")
        }
        if headerSize > 32, file.read(Int(headerSize) - 32) == nil {
            throw MediaError(.invalidData, operation, "header of \(headerSize) bytes is truncated")
        }
        header = IVFHeader(fourCC: String(decoding: bytes[8..<12], as: UTF8.self),
                           width: Int(bytes.readLE16(at: 12)!), height: Int(bytes.readLE16(at: 14)!),
                           timebaseDenominator: Int(bytes.readLE32(at: 16)!), timebaseNumerator: Int(bytes.readLE32(at: 20)!),
                           frameCount: Int(bytes.readLE32(at: 24)!))
    }

    /// The next frame and its pts, or nil at the end of the file.
    public func readFrame() throws(MediaError) -> (data: [UInt8], pts: UInt64)? {
        guard let frameHeader = file.read(IVFHeader.frameHeaderSize) else { return nil }
        let size = Int(frameHeader.readLE32(at: 0)!)
        guard size <= IVFHeader.maxFrameSize, let data = file.read(size) else {
            throw MediaError(.invalidData, "read IVF frame", "frame of \(size) bytes is truncated or too large")
        }
        return (data, frameHeader.readLE64(at: 4)!)
    }
}

public final class IVFWriter {
    private let file: BinaryFile
    private var header: IVFHeader

    public init(path: String, width: Int, height: Int, timebaseDenominator: Int = 90_000, timebaseNumerator: Int = 1) throws(MediaError) {
        file = try BinaryFile(path: path, mode: "wb")
        header = IVFHeader(fourCC: "VP80", width: width, height: height, timebaseDenominator: timebaseDenominator,
                           timebaseNumerator: timebaseNumerator, frameCount: 0)
        try file.write(Self.serialize(header))
    }

    public func write(_ frame: [UInt8], pts: UInt64) throws(MediaError) {
        var bytes: [UInt8] = []
        bytes.writeLE32(UInt32(frame.count))
        bytes.writeLE64(pts)
        try file.write(bytes + frame)
        header.frameCount += 1
    }

    /// Writes the final frame count into the header and closes the file.
    public func close() throws(MediaError) {
        try file.seek(to: 0)
        try file.write(Self.serialize(header))
        try file.close()
    }

    static func serialize(_ h: IVFHeader) -> [UInt8] {
        var bytes = Array("DKIF".utf8)
        bytes.writeLE16(0)
        bytes.writeLE16(UInt16(IVFHeader.size))
        bytes += Array(h.fourCC.utf8.prefix(4))
        bytes.writeLE16(UInt16(clamping: h.width))
        bytes.writeLE16(UInt16(clamping: h.height))
        bytes.writeLE32(UInt32(h.timebaseDenominator))
        bytes.writeLE32(UInt32(h.timebaseNumerator))
        bytes.writeLE32(UInt32(h.frameCount))
        bytes.writeLE32(0)
        return bytes
    }
}
