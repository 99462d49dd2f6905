import Platform
#if canImport(Glibc)
import Glibc
import Signaling
#endif

/// A request to send: method, URL, header fields (Host, Content-Length and Connection are added),
/// and a body.
public struct HTTPRequest: Sendable {
    public var method: String
    public var url: HTTPURL
    public var fields: [(name: String, value: String)]
    public var body: [UInt8]

    public init(method: String, url: HTTPURL, fields: [(name: String, value: String)] = [], body: [UInt8] = []) {
        self.method = method
        self.url = url
        self.fields = fields
        self.body = body
    }

    /// The bytes on the wire: one request per connection (Connection: close).
    public var serialized: [UInt8] {
        var head = "\(method) \(url.target) HTTP/1.1\r\nHost: \(url.authority)\r\n"
        for (name, value) in fields { head += "\(name): \(value)\r\n" }
        if !body.isEmpty || ["POST", "PATCH", "PUT"].contains(method) { head += "Content-Length: \(body.count)\r\n" }
        head += "Connection: close\r\nUser-Agent: callend\r\n\r\n"
        return Array(head.utf8) + body
    }
}

/// Why a request got no response: the connection, TLS, a time limit, or a response that is not HTTP.
public struct HTTPClientError: Error, Equatable, Sendable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// A small blocking HTTP/1.1 client for WHIP and WHEP: one request per connection, plain or over
/// TLS (the system's CAs, or a CA file; the server's name is checked), a time limit on the whole
/// exchange, bounded responses. Redirects are the caller's to follow (a WHIP client must resend
/// its offer to the new place, RFC 9725 §4.5).
public final class HTTPClient: Sendable {
    private let tls: TLSContext?
    public let timeout: Duration

    /// `caFile`: PEM CAs that sign the server's certificate for https (nil: the system's).
    public init(caFile: String? = nil, timeout: Duration = .seconds(10)) throws(TLSError) {
        tls = try TLSContext(trustedCAFile: caFile)
        self.timeout = timeout
    }

    public func send(_ request: HTTPRequest) throws(HTTPClientError) -> HTTPResponseMessage {
        let deadline = MediaTime.now + timeout
        let url = request.url
        let fd: Int32
        do {
            // A fresh connection each second while unanswered: a path back from a silent outage
            // (an LTE stall) is found within a second, not at the kernel's next SYN (1, 3, 7 s).
            fd = try TCPSocket.connect(host: url.host, port: url.port, timeout: timeout, freshAttemptEvery: .seconds(1))
        } catch {
            throw HTTPClientError("\(request.method) \(url): \(error.description)")
        }
        defer { close(fd) }
        var session: TLSSession?
        if url.isSecure, let tls {
            do {
                session = try TLSSession(context: tls, fd: fd, serverName: url.host)
            } catch {
                throw HTTPClientError("\(request.method) \(url): \(error.description)")
            }
        }
        let connection = ClientConnection(fd: fd, tls: session)
        func wait(for events: Int16) throws(HTTPClientError) {
            let left = deadline - MediaTime.now
            guard left > .zero else { throw HTTPClientError("\(request.method) \(url): no response within \(timeout)") }
            var pfd = pollfd(fd: fd, events: events, revents: 0)
            _ = poll(&pfd, 1, Int32(max(1, left.inMilliseconds)))
        }
        // TLS first: OpenSSL drives the handshake on the non-blocking socket.
        if let session {
            while true {
                let progress: TLSSession.HandshakeProgress
                do { progress = try session.handshakeStep() } catch { throw HTTPClientError("\(request.method) \(url): \(error.description)") }
                if progress == .done { break }
                try wait(for: Int16(progress == .wantsRead ? POLLIN : POLLOUT))
            }
        }
        do {
            try connection.send(request.serialized)
            while connection.hasPendingOutput {
                try wait(for: Int16(POLLOUT))
                try connection.flush()
            }
        } catch let error as ConnectionFailure {
            throw HTTPClientError("\(request.method) \(url): sending the request: \(error.description)")
        } catch {
            throw HTTPClientError("\(request.method) \(url): \(error)")
        }
        var reader = HTTPResponseReader(headRequest: request.method == "HEAD")
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let attempt = buffer.withUnsafeMutableBytes { raw in Result { () throws(ConnectionFailure) in try connection.read(into: raw) } }
            let result: IOResult
            switch attempt {
            case .success(let r): result = r
            case .failure(let error): throw HTTPClientError("\(request.method) \(url): reading the response: \(error.description)")
            }
            do {
                switch result {
                case .bytes(let n):
                    if let response = try reader.append(buffer[..<n]) { return response }
                case .wouldBlock, .needsRead:
                    try wait(for: Int16(POLLIN))
                case .closed:
                    return try reader.finish()
                }
            } catch let error as HTTPResponseReader.Malformed {
                throw HTTPClientError("\(request.method) \(url): \(error.description)")
            } catch let error as HTTPClientError {
                throw error
            } catch {
                throw HTTPClientError("\(request.method) \(url): \(error)")
            }
        }
    }
}
