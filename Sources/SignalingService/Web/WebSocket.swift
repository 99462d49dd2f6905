import FoundationEssentials
import Glibc
import Signaling
internal import COpenSSL

/// The server side of the WebSocket protocol (RFC 6455) as the signaling service speaks it: one
/// JSON message per text frame. `WebSocketReader` turns the bytes a client sends into messages and
/// control frames, enforcing what the RFC requires of a client (every frame masked, no reserved
/// bits, control frames short and whole) and the service's own limits (a message is at most one
/// signaling line long, however many fragments carry it).
public enum WebSocket {
    /// The value for Sec-WebSocket-Accept: base64(SHA-1(key + the RFC's GUID)) (RFC 6455 §4.2.2).
    public static func acceptValue(forKey key: String) -> String {
        let input = Array((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").utf8)
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        _ = input.withUnsafeBytes { EVP_Digest($0.baseAddress, $0.count, &digest, &length, EVP_sha1(), nil) }
        return Data(digest.prefix(Int(length))).base64EncodedString()
    }

    /// Whether a Sec-WebSocket-Key is what a client must send: 16 random bytes in base64.
    public static func isValidKey(_ key: String) -> Bool {
        key.utf8.count == 24 && Data(base64Encoded: key)?.count == 16
    }

    public enum Opcode: UInt8, Sendable {
        case continuation = 0x0, text = 0x1, binary = 0x2, close = 0x8, ping = 0x9, pong = 0xA
        var isControl: Bool { rawValue & 0x8 != 0 }
    }

    /// Status codes of a close frame (RFC 6455 §7.4.1) the service sends.
    public enum CloseCode: UInt16, Sendable {
        case normal = 1000, goingAway = 1001, protocolError = 1002, unsupportedData = 1003
        case invalidPayload = 1007, policyViolation = 1008, tooBig = 1009
    }

    /// One frame from the server: never masked (RFC 6455 §5.1), never fragmented.
    public static func frame(_ opcode: Opcode, _ payload: some Collection<UInt8>) -> [UInt8] {
        var out: [UInt8] = [0x80 | opcode.rawValue]
        let count = payload.count
        if count < 126 {
            out.append(UInt8(count))
        } else if count <= 0xffff {
            out += [126, UInt8(count >> 8), UInt8(count & 0xff)]
        } else {
            out.append(127)
            for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: UInt64(count) >> UInt64(shift))) }
        }
        out.append(contentsOf: payload)
        return out
    }

    /// A close frame with a status code and a short reason (control payloads are at most 125 bytes).
    public static func closeFrame(_ code: CloseCode, reason: String = "") -> [UInt8] {
        var payload = [UInt8(code.rawValue >> 8), UInt8(code.rawValue & 0xff)]
        payload += Array(reason.utf8.prefix(123))
        return frame(.close, payload)
    }
}

/// What a client's bytes amount to.
public enum WebSocketEvent: Equatable, Sendable {
    /// A whole text message (its fragments joined), valid UTF-8.
    case text([UInt8])
    case ping([UInt8])
    case pong
    /// The client closes, with its status code when it gave one.
    case close(UInt16?)
}

/// A breach of the protocol or of a limit: the connection is closed with `code`.
public struct WebSocketViolation: Error, Equatable, Sendable, CustomStringConvertible {
    public let code: WebSocket.CloseCode
    public let description: String
    public init(_ code: WebSocket.CloseCode, _ description: String) {
        self.code = code
        self.description = description
    }
}

/// Parses frames from a client (RFC 6455 §5) however the bytes arrive, one at a time or many
/// frames in one read. Holds at most one frame header, one control payload and one message.
public struct WebSocketReader: Sendable {
    /// The largest message, after its fragments are joined.
    public let maxMessageLength: Int
    /// Fragments one message may have: empty continuation frames cost nothing else, so they are counted.
    public let maxFragments: Int
    private var buffer: [UInt8] = []
    private var message: [UInt8] = []
    private var fragments = 0
    private var inMessage = false
    private var closed = false

    public init(maxMessageLength: Int = SignalingMessage.maxLineLength, maxFragments: Int = 1024) {
        self.maxMessageLength = maxMessageLength
        self.maxFragments = maxFragments
    }

    /// Bytes held for frames not yet whole, and for a message not yet finished.
    public var pendingCount: Int { buffer.count + message.count }

    /// Appends bytes and returns what they complete. After a close frame, nothing more is read.
    public mutating func append(_ bytes: some Collection<UInt8>) throws(WebSocketViolation) -> [WebSocketEvent] {
        guard !closed else { return [] }
        buffer.append(contentsOf: bytes)
        var events: [WebSocketEvent] = []
        var offset = 0
        defer { buffer.removeFirst(offset) }
        while let (event, used) = try nextFrame(at: offset) {
            offset += used
            if let event { events.append(event) }
            if closed { break }
        }
        // A frame whose header says more than a message may hold fails before its payload arrives;
        // so whatever is held here is at most one header plus one permitted payload.
        return events
    }

    /// The frame starting at `offset`, when whole: what it completes (nil for a fragment) and its length.
    private mutating func nextFrame(at offset: Int) throws(WebSocketViolation) -> (WebSocketEvent?, Int)? {
        let available = buffer.count - offset
        guard available >= 2 else { return nil }
        let b0 = buffer[offset], b1 = buffer[offset + 1]
        let fin = b0 & 0x80 != 0
        guard b0 & 0x70 == 0 else { throw WebSocketViolation(.protocolError, "reserved bits set without an extension") }
        guard let opcode = WebSocket.Opcode(rawValue: b0 & 0x0f) else {
            throw WebSocketViolation(.protocolError, "unknown opcode \(b0 & 0x0f)")
        }
        guard b1 & 0x80 != 0 else { throw WebSocketViolation(.protocolError, "a client frame without a mask (RFC 6455 §5.1)") }
        var headerLength = 2
        var length = UInt64(b1 & 0x7f)
        if length == 126 {
            guard available >= 4 else { return nil }
            length = UInt64(buffer[offset + 2]) << 8 | UInt64(buffer[offset + 3])
            headerLength = 4
            guard length >= 126 else { throw WebSocketViolation(.protocolError, "a length not in its shortest form") }
        } else if length == 127 {
            guard available >= 10 else { return nil }
            length = 0
            for i in 0..<8 { length = length << 8 | UInt64(buffer[offset + 2 + i]) }
            headerLength = 10
            guard length >> 63 == 0 else { throw WebSocketViolation(.protocolError, "a 64-bit length with its top bit set") }
            guard length > 0xffff else { throw WebSocketViolation(.protocolError, "a length not in its shortest form") }
        }
        if opcode.isControl {
            guard fin else { throw WebSocketViolation(.protocolError, "a fragmented control frame") }
            guard length <= 125 else { throw WebSocketViolation(.protocolError, "a control frame over 125 bytes") }
        } else {
            switch opcode {
            case .continuation:
                guard inMessage else { throw WebSocketViolation(.protocolError, "a continuation frame with no message to continue") }
            case .binary:
                throw WebSocketViolation(.unsupportedData, "binary frames: the service takes JSON text messages only")
            default:
                guard !inMessage else { throw WebSocketViolation(.protocolError, "a new message before the last one's final fragment") }
            }
            guard UInt64(message.count) + length <= UInt64(maxMessageLength) else {
                throw WebSocketViolation(.tooBig, "a message over \(maxMessageLength) bytes")
            }
        }
        headerLength += 4
        guard UInt64(available) >= UInt64(headerLength) + length else { return nil }
        let maskAt = offset + headerLength - 4
        let mask = (buffer[maskAt], buffer[maskAt + 1], buffer[maskAt + 2], buffer[maskAt + 3])
        let start = offset + headerLength
        var payload = [UInt8](repeating: 0, count: Int(length))
        for i in 0..<Int(length) {
            let m: UInt8
            switch i & 3 {
            case 0: m = mask.0
            case 1: m = mask.1
            case 2: m = mask.2
            default: m = mask.3
            }
            payload[i] = buffer[start + i] ^ m
        }
        let used = headerLength + Int(length)
        switch opcode {
        case .ping: return (.ping(payload), used)
        case .pong: return (.pong, used)
        case .close:
            closed = true
            guard payload.count != 1 else { throw WebSocketViolation(.protocolError, "a close frame of one byte") }
            return (.close(payload.count >= 2 ? UInt16(payload[0]) << 8 | UInt16(payload[1]) : nil), used)
        default:
            fragments += 1
            guard fragments <= maxFragments else { throw WebSocketViolation(.policyViolation, "a message in more than \(maxFragments) fragments") }
            message.append(contentsOf: payload)
            inMessage = !fin
            guard fin else { return (nil, used) }
            let whole = message
            message.removeAll(keepingCapacity: true)
            fragments = 0
            guard String(validating: whole, as: UTF8.self) != nil else {
                throw WebSocketViolation(.invalidPayload, "a text message that is not UTF-8")
            }
            return (.text(whole), used)
        }
    }
}
