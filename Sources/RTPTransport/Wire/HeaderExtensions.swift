/// RTP header extension elements (RFC 8285 §4):
///
///     one-byte form, profile 0xBEDE: each element is  | ID (4) | L (4) | data (L+1 bytes) |
///         ID 1 ... 14; ID 0 is padding; ID 15 stops parsing.
///
///     two-byte form, profile 0x100X: each element is  | ID (8) | L (8) | data (L bytes) |
///         ID 1 ... 255; ID 0 is padding.
///
/// Padding to a 32-bit boundary follows the last element.
public struct HeaderExtensionElement: Sendable, Equatable {
    public var id: UInt8
    public var data: [UInt8]

    public init(id: UInt8, data: [UInt8]) {
        self.id = id
        self.data = data
    }
}

public enum HeaderExtensionForm: Sendable {
    case oneByte, twoByte

    static let oneByteProfile: UInt16 = 0xbede
    static let twoByteProfileMask: UInt16 = 0xfff0
    static let twoByteProfile: UInt16 = 0x1000
}

extension RTPPacket {
    /// The extension's elements, or an error for a malformed block. Unknown profiles give [].
    public func headerExtensionElements() throws(ParseError) -> [HeaderExtensionElement] {
        guard let profile = extensionProfile else { return [] }
        var reader = ByteReader(extensionData)
        var elements: [HeaderExtensionElement] = []
        if profile == HeaderExtensionForm.oneByteProfile {
            while let byte = reader.readUInt8() {
                let id = byte >> 4
                if id == 0 { continue }  // padding
                if id == 15 { break }    // reserved: stop (RFC 8285 §4.2)
                let length = Int(byte & 0x0f) + 1
                guard let data = reader.readBytes(length) else {
                    throw ParseError("RTP one-byte extension", "element \(id) of \(length) bytes runs past the block")
                }
                elements.append(HeaderExtensionElement(id: id, data: data))
            }
        } else if profile & HeaderExtensionForm.twoByteProfileMask == HeaderExtensionForm.twoByteProfile {
            while let id = reader.readUInt8() {
                if id == 0 { continue }
                guard let length = reader.readUInt8(), let data = reader.readBytes(Int(length)) else {
                    throw ParseError("RTP two-byte extension", "element \(id) runs past the block")
                }
                elements.append(HeaderExtensionElement(id: id, data: data))
            }
        }
        return elements
    }

    /// Replaces the extension with these elements in the smallest form that holds them: one-byte
    /// when every ID is 1 ... 14 and every element 1 ... 16 bytes, two-byte otherwise.
    public mutating func setHeaderExtensionElements(_ elements: [HeaderExtensionElement]) {
        guard !elements.isEmpty else {
            extensionProfile = nil
            extensionData = []
            return
        }
        let oneByte = elements.allSatisfy { (1...14).contains($0.id) && (1...16).contains($0.data.count) }
        var data: [UInt8] = []
        if oneByte {
            for e in elements { data.append(e.id << 4 | UInt8(e.data.count - 1)); data += e.data }
            extensionProfile = HeaderExtensionForm.oneByteProfile
        } else {
            for e in elements where e.id > 0 { data.append(e.id); data.append(UInt8(min(e.data.count, 255))); data += e.data.prefix(255) }
            extensionProfile = HeaderExtensionForm.twoByteProfile
        }
        while data.count % 4 != 0 { data.append(0) }
        extensionData = data
    }

    /// The data of the element with this ID, if present.
    public func headerExtension(id: UInt8) -> [UInt8]? {
        (try? headerExtensionElements())?.first { $0.id == id }?.data
    }
}

/// Transport-wide sequence number (draft-holmer-rmcat-transport-wide-cc-extensions-01 §2):
/// a 16-bit counter across every media stream of the transport, carried in 2 bytes.
public enum TransportSequenceNumber {
    public static let uri = "http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01"

    public static func encode(_ value: UInt16) -> [UInt8] { [UInt8(value >> 8), UInt8(value & 0xff)] }

    public static func decode(_ data: [UInt8]) -> UInt16? {
        guard data.count == 2 else { return nil }
        return UInt16(data[0]) << 8 | UInt16(data[1])
    }
}

/// Absolute send time (abs-send-time): the send time as 6.18 fixed-point seconds, 24 bits, so it
/// wraps every 64 s.
public enum AbsoluteSendTime {
    public static let uri = "http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time"

    /// Encodes a time given in microseconds.
    public static func encode(microseconds: UInt64) -> [UInt8] {
        let value = UInt32(((microseconds << 18) / 1_000_000) & 0xff_ffff)
        return [UInt8(value >> 16), UInt8((value >> 8) & 0xff), UInt8(value & 0xff)]
    }

    /// The 24-bit value, in units of 2^-18 s.
    public static func decode(_ data: [UInt8]) -> UInt32? {
        guard data.count == 3 else { return nil }
        return UInt32(data[0]) << 16 | UInt32(data[1]) << 8 | UInt32(data[2])
    }
}
