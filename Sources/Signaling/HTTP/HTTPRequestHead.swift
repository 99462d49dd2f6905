import FoundationEssentials
import Glibc
import Platform

/// The head of an HTTP/1.1 request (RFC 9112 §2-3): request line and header fields, as far as the
/// signaling service's web side needs them (a page, and the WebSocket upgrade). Bodies are not
/// read here: the WHIP/WHEP requests that have one are read by the server by their Content-Length.
public struct HTTPRequestHead: Sendable, Equatable {
    public var method: String
    /// The path, without the query.
    public var path: String
    public var query: String?
    /// Header fields by lowercased name; repeated fields joined with ", " (RFC 9110 §5.3).
    public var fields: [String: String]

    public static let maxLength = 8192

    public func field(_ name: String) -> String? { fields[name.lowercased()] }

    public enum ContentLength: Equatable, Sendable { case none, invalid, length(Int) }

    /// The Content-Length field: absent, one decimal number of at most 9 digits, or invalid (a
    /// list, as two fields are joined; a sign; anything else).
    public var contentLength: ContentLength {
        guard let text = field("content-length") else { return .none }
        guard !text.isEmpty, text.utf8.count <= 9, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let n = Int(text) else { return .invalid }
        return .length(n)
    }

    /// Whether a comma-separated field holds `token`, case-insensitively ("Connection: keep-alive, Upgrade").
    public func field(_ name: String, contains token: String) -> Bool {
        field(name)?.split(separator: ",").contains { $0.trimmed().lowercased() == token.lowercased() } ?? false
    }

    public struct Malformed: Error, Equatable, Sendable, CustomStringConvertible {
        public let description: String
        /// 431 for a head over the limit, 400 otherwise (505 for a version other than 1.x).
        public let status: Int
    }

    /// Parses a head that ends with an empty line (the CRLF CRLF included or not).
    public init(parsing bytes: some Collection<UInt8>) throws(Malformed) {
        guard let text = String(validating: Array(bytes), as: UTF8.self) else { throw Malformed(description: "a request head that is not UTF-8", status: 400) }
        var lines = text.split(separator: "\r\n", omittingEmptySubsequences: false).map(String.init)
        while lines.last?.isEmpty == true { lines.removeLast() }
        guard let requestLine = lines.first else { throw Malformed(description: "an empty request", status: 400) }
        let parts = requestLine.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, parts[0].allSatisfy({ $0.isLetter && $0.isUppercase }), parts[1].hasPrefix("/") else {
            throw Malformed(description: "a request line that is not METHOD /PATH HTTP/1.1", status: 400)
        }
        guard parts[2] == "HTTP/1.1" || parts[2] == "HTTP/1.0" else { throw Malformed(description: "\(parts[2].prefix(16)) is not HTTP/1.1", status: 505) }
        method = String(parts[0])
        let target = parts[1]
        if let q = target.firstIndex(of: "?") {
            path = String(target[..<q])
            query = String(target[target.index(after: q)...])
        } else {
            path = String(target)
            query = nil
        }
        fields = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":"), colon != line.startIndex,
                  !line[..<colon].contains(where: { $0 == " " || $0 == "\t" }) else {
                throw Malformed(description: "a header line that is not NAME: VALUE", status: 400)
            }
            let name = line[..<colon].lowercased()
            let value = line[line.index(after: colon)...].trimmed()
            fields[name] = fields[name].map { $0 + ", " + value } ?? value
        }
        if parts[2] == "HTTP/1.1" && fields["host"] == nil { throw Malformed(description: "an HTTP/1.1 request without Host", status: 400) }
    }

    /// Collects bytes until the head's empty line; holds at most `maxLength` bytes.
    public struct Reader: Sendable {
        private var buffer: [UInt8] = []
        public init() {}

        /// The head and the bytes after it once the empty line has arrived; nil while it has not.
        public mutating func append(_ bytes: some Collection<UInt8>) throws(Malformed) -> (HTTPRequestHead, [UInt8])? {
            let searchFrom = max(0, buffer.count - 3)
            buffer.append(contentsOf: bytes)
            var i = searchFrom
            while i + 3 < buffer.count {
                if buffer[i] == 13, buffer[i + 1] == 10, buffer[i + 2] == 13, buffer[i + 3] == 10 {
                    guard i + 4 <= HTTPRequestHead.maxLength else { break }
                    let head = try HTTPRequestHead(parsing: buffer[..<i])
                    return (head, Array(buffer[(i + 4)...]))
                }
                i += 1
            }
            guard buffer.count <= HTTPRequestHead.maxLength else {
                throw Malformed(description: "a request head over \(HTTPRequestHead.maxLength) bytes", status: 431)
            }
            return nil
        }
    }
}

/// A whole HTTP/1.1 response with its body; every response closes the connection except 101.
public enum HTTPResponse {
    static let reasons = [101: "Switching Protocols", 200: "OK", 201: "Created", 204: "No Content", 400: "Bad Request", 401: "Unauthorized",
                          403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed", 408: "Request Timeout", 409: "Conflict", 411: "Length Required",
                          412: "Precondition Failed", 413: "Content Too Large", 415: "Unsupported Media Type", 421: "Misdirected Request",
                          422: "Unprocessable Content", 426: "Upgrade Required", 428: "Precondition Required", 429: "Too Many Requests",
                          431: "Request Header Fields Too Large", 500: "Internal Server Error", 503: "Service Unavailable", 504: "Gateway Timeout",
                          505: "HTTP Version Not Supported"]

    public static func make(status: Int, fields: [(String, String)] = [], body: [UInt8] = [], contentType: String = "text/plain; charset=utf-8") -> [UInt8] {
        var head = "HTTP/1.1 \(status) \(reasons[status] ?? "Error")\r\n"
        var all = fields
        if status != 101 {
            all += [("Content-Type", contentType), ("Content-Length", String(body.count)), ("Connection", "close"),
                    ("Cache-Control", "no-store"), ("X-Content-Type-Options", "nosniff")]
        }
        for (name, value) in all { head += "\(name): \(value)\r\n" }
        head += "\r\n"
        return Array(head.utf8) + body
    }

    public static func text(status: Int, _ message: String, fields: [(String, String)] = []) -> [UInt8] {
        make(status: status, fields: fields, body: Array((message + "\n").utf8))
    }
}
