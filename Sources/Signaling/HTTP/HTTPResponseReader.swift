import FoundationEssentials
import Glibc
import Platform

/// An HTTP/1.1 response as a client receives it (RFC 9112): status, the header fields in order
/// (a WHIP answer may carry several Link fields, whose values hold commas), and the body.
public struct HTTPResponseMessage: Sendable, Equatable {
    public var status: Int
    public var reason: String
    public var fields: [(name: String, value: String)]
    public var body: [UInt8]

    public init(status: Int, reason: String = "", fields: [(name: String, value: String)] = [], body: [UInt8] = []) {
        self.status = status
        self.reason = reason
        self.fields = fields
        self.body = body
    }

    /// The first field of that name (case-insensitive).
    public func field(_ name: String) -> String? { fields.first { $0.name.lowercased() == name.lowercased() }?.value }
    /// Every field of that name, in order.
    public func fields(named name: String) -> [String] { fields.filter { $0.name.lowercased() == name.lowercased() }.map(\.value) }
    public var text: String { String(decoding: body, as: UTF8.self) }

    public static func == (a: Self, b: Self) -> Bool {
        a.status == b.status && a.reason == b.reason && a.body == b.body
            && a.fields.map { [$0.name, $0.value] } == b.fields.map { [$0.name, $0.value] }
    }
}

/// Reads one response from the bytes of a connection, in pieces of any size: the status line and
/// fields, then a body framed by Content-Length, by chunked transfer coding (RFC 9112 §7.1), or
/// by the end of the connection. Sizes are bounded: a server cannot make the client hold more
/// than `maxHeadLength` + `maxBodyLength` bytes.
public struct HTTPResponseReader: Sendable {
    public struct Malformed: Error, Equatable, Sendable, CustomStringConvertible {
        public let description: String
    }

    public static let maxHeadLength = 16 * 1024
    public let maxBodyLength: Int
    /// Whether the request was HEAD (its response has no body whatever its fields say).
    let headRequest: Bool
    private var buffer: [UInt8] = []
    private var head: (status: Int, reason: String, fields: [(name: String, value: String)])?
    private enum Framing { case length(Int), chunked, toClose, none }
    private var framing: Framing = .none
    private var body: [UInt8] = []
    /// Chunked: the size of the chunk being read and how much of it is left, nil between chunks.
    private var chunkLeft: Int?
    private var trailers = false

    public init(maxBodyLength: Int = 1 << 20, headRequest: Bool = false) {
        self.maxBodyLength = maxBodyLength
        self.headRequest = headRequest
    }

    /// Takes the next bytes; returns the response once it is complete.
    public mutating func append(_ bytes: some Collection<UInt8>) throws(Malformed) -> HTTPResponseMessage? {
        buffer.append(contentsOf: bytes)
        if head == nil {
            guard let end = Self.find([13, 10, 13, 10], in: buffer) else {
                if buffer.count > Self.maxHeadLength { throw Malformed(description: "a response head over \(Self.maxHeadLength) bytes") }
                return nil
            }
            guard end <= Self.maxHeadLength else { throw Malformed(description: "a response head over \(Self.maxHeadLength) bytes") }
            try readHead(Array(buffer[..<end]))
            buffer.removeFirst(end + 4)
            // 1xx responses (100 Continue) come before the real one: skip them.
            if let status = head?.status, (100..<200).contains(status) {
                head = nil
                return try append([])
            }
        }
        return try readBody()
    }

    /// The connection ended: a body framed by the close is complete; anything else is cut short.
    public mutating func finish() throws(Malformed) -> HTTPResponseMessage {
        guard let head else { throw Malformed(description: "the connection closed before a whole response head came") }
        if case .toClose = framing {
            body += buffer
            buffer = []
            guard body.count <= maxBodyLength else { throw Malformed(description: "a response body over \(maxBodyLength) bytes") }
            return HTTPResponseMessage(status: head.status, reason: head.reason, fields: head.fields, body: body)
        }
        throw Malformed(description: "the connection closed in the middle of the response body")
    }

    private mutating func readHead(_ bytes: [UInt8]) throws(Malformed) {
        guard let text = String(validating: bytes, as: UTF8.self) else { throw Malformed(description: "a response head that is not UTF-8") }
        let lines = text.split(separator: "\r\n", omittingEmptySubsequences: false)
        let statusLine = lines[0].split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard statusLine.count >= 2, statusLine[0].hasPrefix("HTTP/1."), statusLine[1].count == 3, let status = Int(statusLine[1]), (100...599).contains(status) else {
            throw Malformed(description: "'\(lines[0].prefix(80))' is not an HTTP/1.1 status line")
        }
        var fields: [(name: String, value: String)] = []
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":"), colon != line.startIndex, !line[..<colon].contains(where: { $0 == " " || $0 == "\t" }) else {
                throw Malformed(description: "a response header line that is not NAME: VALUE")
            }
            fields.append((String(line[..<colon]), line[line.index(after: colon)...].trimmed()))
        }
        head = (status, statusLine.count > 2 ? String(statusLine[2]) : "", fields)
        let encoding = fields.last { $0.name.lowercased() == "transfer-encoding" }?.value.lowercased()
        let lengths = Set(fields.filter { $0.name.lowercased() == "content-length" }.map(\.value))
        if headRequest || status == 204 || status == 304 {
            framing = .none
        } else if let encoding {
            // RFC 9112 §6.3: chunked must be the last coding; anything else is read to the close.
            framing = encoding.hasSuffix("chunked") ? .chunked : .toClose
        } else if !lengths.isEmpty {
            guard lengths.count == 1, let length = Int(lengths.first!), length >= 0 else { throw Malformed(description: "a Content-Length that is not one number") }
            guard length <= maxBodyLength else { throw Malformed(description: "a response body of \(length) bytes, over \(maxBodyLength)") }
            framing = .length(length)
        } else {
            framing = .toClose
        }
    }

    private mutating func readBody() throws(Malformed) -> HTTPResponseMessage? {
        guard let head else { return nil }
        func done() -> HTTPResponseMessage { HTTPResponseMessage(status: head.status, reason: head.reason, fields: head.fields, body: body) }
        switch framing {
        case .none:
            return done()
        case .length(let length):
            guard buffer.count >= length else { return nil }
            body = Array(buffer[..<length])
            return done()
        case .toClose:
            guard body.count + buffer.count <= maxBodyLength else { throw Malformed(description: "a response body over \(maxBodyLength) bytes") }
            return nil
        case .chunked:
            while true {
                if trailers {
                    // Trailer fields end with an empty line; they are read and dropped.
                    guard let end = Self.find([13, 10], in: buffer) else { return nil }
                    buffer.removeFirst(end + 2)
                    if end == 0 { return done() }
                    continue
                }
                if let left = chunkLeft {
                    guard buffer.count >= left + 2 else { return nil }
                    guard buffer[left] == 13, buffer[left + 1] == 10 else { throw Malformed(description: "a chunk that does not end with CRLF") }
                    body += buffer[..<left]
                    buffer.removeFirst(left + 2)
                    chunkLeft = nil
                    continue
                }
                guard let end = Self.find([13, 10], in: buffer) else {
                    if buffer.count > 1024 { throw Malformed(description: "a chunk size line over 1024 bytes") }
                    return nil
                }
                let line = String(decoding: buffer[..<end], as: UTF8.self)
                let sizeText = line.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false)[0].trimmed()
                // Hex digits only: Int(_:radix:) also takes a sign, and a negative size indexed the buffer backwards.
                guard !sizeText.isEmpty, sizeText.count <= 8, sizeText.allSatisfy(\.isHexDigit), let size = Int(sizeText, radix: 16) else {
                    throw Malformed(description: "'\(line.prefix(40))' is not a chunk size")
                }
                guard body.count + size <= maxBodyLength else { throw Malformed(description: "a response body over \(maxBodyLength) bytes") }
                buffer.removeFirst(end + 2)
                if size == 0 { trailers = true } else { chunkLeft = size }
            }
        }
    }

    private static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for i in 0...(haystack.count - needle.count) where haystack[i] == needle[0] {
            if haystack[i..<(i + needle.count)].elementsEqual(needle) { return i }
        }
        return nil
    }
}
