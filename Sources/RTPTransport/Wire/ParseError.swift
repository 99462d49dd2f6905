/// Why bytes from the network are not a valid packet. Wire code never traps on input: every
/// malformed or truncated packet ends here.
public struct ParseError: Error, Equatable, Sendable, CustomStringConvertible {
    public let packet: String
    public let reason: String

    public init(_ packet: String, _ reason: String) {
        self.packet = packet
        self.reason = reason
    }

    static func truncated(_ packet: String, need: Int, have: Int) -> ParseError {
        ParseError(packet, "truncated: needs \(need) bytes, has \(have)")
    }

    public var description: String { "\(packet): \(reason)" }
}

/// Big-endian reads over a byte array; a read past the end returns nil, never traps.
struct ByteReader {
    let bytes: [UInt8]
    private(set) var offset: Int

    init(_ bytes: [UInt8], offset: Int = 0) {
        self.bytes = bytes
        self.offset = offset
    }

    var remaining: Int { bytes.count - offset }

    mutating func readUInt8() -> UInt8? {
        guard remaining >= 1 else { return nil }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func readUInt16() -> UInt16? {
        guard remaining >= 2 else { return nil }
        defer { offset += 2 }
        return UInt16(bytes[offset]) << 8 | UInt16(bytes[offset + 1])
    }

    mutating func readUInt24() -> UInt32? {
        guard remaining >= 3 else { return nil }
        defer { offset += 3 }
        return UInt32(bytes[offset]) << 16 | UInt32(bytes[offset + 1]) << 8 | UInt32(bytes[offset + 2])
    }

    mutating func readUInt32() -> UInt32? {
        guard remaining >= 4 else { return nil }
        defer { offset += 4 }
        return UInt32(bytes[offset]) << 24 | UInt32(bytes[offset + 1]) << 16 | UInt32(bytes[offset + 2]) << 8 | UInt32(bytes[offset + 3])
    }

    mutating func readBytes(_ count: Int) -> [UInt8]? {
        guard count >= 0, remaining >= count else { return nil }
        defer { offset += count }
        return Array(bytes[offset..<(offset + count)])
    }

    mutating func skip(_ count: Int) -> Bool {
        guard count >= 0, remaining >= count else { return false }
        offset += count
        return true
    }
}

extension Array where Element == UInt8 {
    mutating func writeUInt16(_ v: UInt16) { append(UInt8(v >> 8)); append(UInt8(v & 0xff)) }
    mutating func writeUInt24(_ v: UInt32) { append(UInt8((v >> 16) & 0xff)); append(UInt8((v >> 8) & 0xff)); append(UInt8(v & 0xff)) }
    mutating func writeUInt32(_ v: UInt32) {
        append(UInt8(v >> 24)); append(UInt8((v >> 16) & 0xff)); append(UInt8((v >> 8) & 0xff)); append(UInt8(v & 0xff))
    }

    /// Overwrites a big-endian 16-bit value at `offset` (for length fields written after the body).
    mutating func setUInt16(_ v: UInt16, at offset: Int) {
        self[offset] = UInt8(v >> 8)
        self[offset + 1] = UInt8(v & 0xff)
    }
}
