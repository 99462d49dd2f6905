internal import CHiredis
internal import CLinux
import Platform
import Glibc
import FoundationEssentials
import Signaling

/// Where the room directory lives: `redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]`, or `rediss://`
/// for Redis over TLS (port 6379 by default either way). A USER is a Redis 6 ACL user.
public struct RedisAddress: Sendable, Equatable, CustomStringConvertible {
    public var host: String
    public var port: Int
    public var username: String?
    public var password: String?
    public var database: Int
    /// TLS to Redis (`rediss://`): Redis sees tokens' seats and every relayed offer, and the
    /// path to it is as open to reading and rewriting as any other.
    public var tls: Bool
    /// PEM CAs that sign Redis's certificate (nil: the system's); its name is checked.
    public var caFile: String?

    public init(host: String, port: Int = 6379, username: String? = nil, password: String? = nil, database: Int = 0, tls: Bool = false, caFile: String? = nil) {
        self.host = host
        self.port = port
        self.username = username
        self.password = password
        self.database = database
        self.tls = tls
        self.caFile = caFile
    }

    /// Parses a `redis://` or `rediss://` URL; the error says what is wrong with it.
    public init(url: String) throws(RedisError) {
        let form = "redis[s]://[[USER]:PASSWORD@]HOST[:PORT][/DB]"
        let tls = url.hasPrefix("rediss://")
        guard tls || url.hasPrefix("redis://") else { throw RedisError("\(url): the Redis address is \(form)") }
        var rest = Substring(url.dropFirst(tls ? "rediss://".count : "redis://".count))
        var database = 0
        if let slash = rest.firstIndex(of: "/") {
            let text = rest[rest.index(after: slash)...]
            guard text.isEmpty || Int(text).map({ $0 >= 0 && $0 < 16_384 }) == true else { throw RedisError("\(url): the database is a number") }
            database = Int(text) ?? 0
            rest = rest[..<slash]
        }
        var username: String?, password: String?
        if let at = rest.lastIndex(of: "@") {
            let credentials = rest[..<at].split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            // redis://:PASSWORD@ (the default user), redis://USER:PASSWORD@ (an ACL user).
            if credentials.count == 2 {
                username = credentials[0].isEmpty ? nil : String(credentials[0])
                password = String(credentials[1])
            } else {
                password = String(credentials[0])
            }
            rest = rest[rest.index(after: at)...]
        }
        var host = String(rest), port = 6379
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw RedisError("\(url): an IPv6 address ends with ]") }
            host = String(rest[rest.index(after: rest.startIndex)..<close])
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":"), let p = Int(after.dropFirst()), (1...65_535).contains(p) else { throw RedisError("\(url): bad port") }
                port = p
            }
        } else if let colon = rest.lastIndex(of: ":") {
            guard let p = Int(rest[rest.index(after: colon)...]), (1...65_535).contains(p) else { throw RedisError("\(url): bad port") }
            host = String(rest[..<colon])
            port = p
        }
        guard !host.isEmpty else { throw RedisError("\(url): no host") }
        self.init(host: host, port: port, username: username, password: password?.isEmpty == true ? nil : password, database: database, tls: tls)
    }

    /// The address without the password, for logs.
    public var description: String {
        let shown = host.contains(":") ? "[\(host)]" : host
        let user = username.map { "\($0):***@" } ?? (password == nil ? "" : ":***@")
        return "\(tls ? "rediss" : "redis")://\(user)\(shown):\(port)\(database == 0 ? "" : "/\(database)")"
    }
}

public struct RedisError: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// One reply, copied out of hiredis's.
public enum RedisReply: Sendable, Equatable {
    case string(String)
    case status(String)
    case error(String)
    case integer(Int64)
    case null
    indirect case array([RedisReply])

    init(_ reply: UnsafeMutablePointer<redisReply>) {
        let r = reply.pointee
        func text() -> String {
            guard let str = r.str else { return "" }
            return String(decoding: UnsafeRawBufferPointer(start: str, count: Int(r.len)), as: UTF8.self)
        }
        switch r.type {
        case chiredis_reply_string(): self = .string(text())
        case chiredis_reply_status(): self = .status(text())
        case chiredis_reply_error(): self = .error(text())
        case chiredis_reply_integer(): self = .integer(r.integer)
        case chiredis_reply_array():
            self = .array((0..<Int(r.elements)).compactMap { i in r.element[i].map(RedisReply.init) })
        default: self = .null
        }
    }

    public var text: String? {
        switch self {
        case .string(let s), .status(let s): s
        default: nil
        }
    }
    public var elements: [RedisReply] {
        if case .array(let items) = self { return items }
        return []
    }
}

/// One blocking connection to Redis, used by one thread at a time: a socket of its own, TLS
/// over it for `rediss://` (OpenSSL, the server's name checked), hiredis's protocol writer and
/// reader (hiredis 0.14, Debian's, has no TLS of its own). A failed command leaves the
/// connection closed; the next one connects again, no sooner than `retryAfter` after the last
/// failed attempt, so a Redis that is down costs a caller one timeout per interval, not one per
/// command.
///
/// Connecting waits half a second at most (a Redis that is down refuses at once, one on a host
/// that is gone costs that); a reply 3 s: Redis's own work is under a millisecond, but a Redis
/// forking for a dump or starved on a loaded host answers hundreds of milliseconds late, and a
/// reply given up on is a relay lost (with half a second, two such stalls in a row lost a
/// candidate under a loaded swift test). A reply over `maxReplyBytes` closes the connection:
/// Redis is a trust boundary, and what it sends is bounded like any peer's.
final class RedisConnection {
    let address: RedisAddress
    let connectTimeoutMs: Int32
    let replyTimeoutMs: Int32
    var retryAfter: Duration = .milliseconds(500)
    static let maxReplyBytes = 16 << 20
    private var fd: Int32 = -1
    private var tls: TLSSession?
    private var reader: UnsafeMutablePointer<redisReader>?
    /// Bytes fed to the reader since its last whole reply.
    private var pendingBytes = 0
    private var lastFailure: MediaTime?

    init(address: RedisAddress, connectTimeoutMs: Int32 = 500, replyTimeoutMs: Int32 = 3000) {
        self.address = address
        self.connectTimeoutMs = connectTimeoutMs
        self.replyTimeoutMs = replyTimeoutMs
    }

    deinit { disconnect() }

    var isConnected: Bool { fd >= 0 }
    var fileDescriptor: Int32 { fd }

    func disconnect() {
        if let tls { tls.shutdown() }
        tls = nil
        if fd >= 0 { close(fd) }
        fd = -1
        if let reader { redisReaderFree(reader) }
        reader = nil
        pendingBytes = 0
    }

    /// The next command may connect at once: the failure was of a connection Redis had dropped
    /// (it restarted), not of Redis being away.
    func forgetFailure() { lastFailure = nil }

    /// Connects (TLS, then AUTH and SELECT) unless connected; throws when Redis cannot be reached.
    func connect(waitingForever: Bool = false) throws(RedisError) {
        guard fd < 0 else { return }
        if let lastFailure, MediaTime.now - lastFailure < retryAfter {
            throw RedisError("\(address): unreachable (retrying)")
        }
        do {
            fd = try TCPSocket.connect(host: address.host, port: address.port, timeout: .milliseconds(Int(connectTimeoutMs)))
        } catch {
            lastFailure = .now
            throw RedisError("\(address): \(error.description)")
        }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
        TCPSocket.setNoDelay(fd)
        setTimeout(milliseconds: connectTimeoutMs + replyTimeoutMs)
        reader = redisReaderCreate()
        do throws(RedisError) {
            if address.tls {
                let session: TLSSession
                do {
                    session = try TLSSession(context: try TLSContext(trustedCAFile: address.caFile), fd: fd, serverName: address.host)
                    try session.handshake()
                } catch {
                    throw RedisError("\(address): TLS: \(error.description)")
                }
                tls = session
            }
            setTimeout(milliseconds: replyTimeoutMs)
            if let password = address.password {
                try expectOK(address.username.map { ["AUTH", $0, password] } ?? ["AUTH", password], shown: "AUTH")
            }
            if address.database != 0 { try expectOK(["SELECT", String(address.database)], shown: "SELECT") }
        } catch {
            disconnect()
            lastFailure = .now
            throw error
        }
        if waitingForever {
            setTimeout(milliseconds: 0)
            var one: Int32 = 1
            setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, socklen_t(MemoryLayout<Int32>.size))
        }
        lastFailure = nil
    }

    /// 0: wait for ever.
    private func setTimeout(milliseconds: Int32) {
        var tv = timeval(tv_sec: Int(milliseconds / 1000), tv_usec: Int(milliseconds % 1000) * 1000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    }

    private func expectOK(_ arguments: [String], shown: String) throws(RedisError) {
        let reply = try pipeline([arguments], connecting: false)[0]
        if case .error(let text) = reply { throw RedisError("\(address): \(shown): \(text)") }
    }

    /// One command; a Redis error reply is returned, not thrown (scripts answer with them).
    func command(_ arguments: [String]) throws(RedisError) -> RedisReply {
        try pipeline([arguments])[0]
    }

    /// Several commands in one write, their replies in order.
    func pipeline(_ commands: [[String]]) throws(RedisError) -> [RedisReply] {
        try pipeline(commands, connecting: true)
    }

    private func pipeline(_ commands: [[String]], connecting: Bool) throws(RedisError) -> [RedisReply] {
        if connecting { try connect() }
        guard fd >= 0 else { throw RedisError("\(address): not connected") }
        var out: [UInt8] = []
        for arguments in commands {
            var formatted: UnsafeMutablePointer<CChar>?
            let length = Self.withArgv(arguments) { argc, argv, lengths in redisFormatCommandArgv(&formatted, argc, argv, lengths) }
            guard length > 0, let formatted else { try fail("cannot format a command") }
            out += UnsafeRawBufferPointer(start: formatted, count: Int(length))
            redisFreeCommand(formatted)
        }
        try writeAll(out)
        var replies: [RedisReply] = []
        replies.reserveCapacity(commands.count)
        for _ in commands {
            guard let reply = try read() else { try fail("connection lost") }
            replies.append(reply)
        }
        return replies
    }

    private func writeAll(_ bytes: [UInt8]) throws(RedisError) {
        var offset = 0
        while offset < bytes.count {
            let written: Int = bytes[offset...].withUnsafeBytes { raw in
                if let tls {
                    guard case .bytes(let n)? = try? tls.write(raw) else { return -1 }
                    return n
                }
                return Glibc.send(fd, raw.baseAddress, raw.count, Int32(MSG_NOSIGNAL))
            }
            if written < 0 && errno == EINTR && tls == nil { continue }
            guard written > 0 else { try fail("writing: \(written < 0 ? String(cString: strerror(errno)) : "closed")") }
            offset += written
        }
    }

    /// The next reply on the connection (a subscriber's next message); nil when the connection failed.
    func read() throws(RedisError) -> RedisReply? {
        guard fd >= 0, let reader else { throw RedisError("\(address): not connected") }
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            var raw: UnsafeMutableRawPointer?
            guard redisReaderGetReply(reader, &raw) == REDIS_OK else { try fail("Redis's reply does not parse") }
            if let raw {
                defer { freeReplyObject(raw) }
                pendingBytes = 0
                return RedisReply(raw.assumingMemoryBound(to: redisReply.self))
            }
            let count: Int = buffer.withUnsafeMutableBytes { bytes in
                if let tls {
                    switch try? tls.read(into: bytes) {
                    case .bytes(let n)?: return n
                    case .closed?: return 0
                    default: return -1
                    }
                }
                return Glibc.read(fd, bytes.baseAddress, bytes.count)
            }
            if count < 0 && errno == EINTR && tls == nil { continue }
            guard count > 0 else { return nil }
            pendingBytes += count
            guard pendingBytes <= Self.maxReplyBytes else { try fail("a reply over \(Self.maxReplyBytes) bytes") }
            _ = buffer.withUnsafeBytes { redisReaderFeed(reader, $0.baseAddress!.assumingMemoryBound(to: CChar.self), count) }
        }
    }

    private func fail(_ reason: String) throws(RedisError) -> Never {
        disconnect()
        lastFailure = .now
        throw RedisError("\(address): \(reason)")
    }

    /// Makes a blocked `read()` on another thread return (it fails).
    func interrupt() {
        if fd >= 0 { shutdown(fd, Int32(SHUT_RDWR)) }
    }

    /// The arguments as hiredis takes them: pointers into one buffer of NUL-ended strings, and lengths.
    private static func withArgv<R>(_ arguments: [String], _ body: (Int32, UnsafeMutablePointer<UnsafePointer<CChar>?>, UnsafePointer<Int>) -> R) -> R {
        var blob: [CChar] = [], offsets: [Int] = []
        for argument in arguments {
            offsets.append(blob.count)
            blob += argument.utf8CString
        }
        let lengths = arguments.map { $0.utf8.count }
        return blob.withUnsafeBufferPointer { buffer in
            var pointers: [UnsafePointer<CChar>?] = offsets.map { buffer.baseAddress! + $0 }
            return pointers.withUnsafeMutableBufferPointer { argv in
                lengths.withUnsafeBufferPointer { body(Int32(arguments.count), argv.baseAddress!, $0.baseAddress!) }
            }
        }
    }
}
