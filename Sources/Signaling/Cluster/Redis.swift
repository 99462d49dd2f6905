internal import CHiredis
import Glibc
import FoundationEssentials

/// Where the room directory lives: `redis://[:PASSWORD@]HOST[:PORT][/DB]` (port 6379 by default).
public struct RedisAddress: Sendable, Equatable, CustomStringConvertible {
    public var host: String
    public var port: Int
    public var password: String?
    public var database: Int

    public init(host: String, port: Int = 6379, password: String? = nil, database: Int = 0) {
        self.host = host
        self.port = port
        self.password = password
        self.database = database
    }

    /// Parses a `redis://` URL; the error says what is wrong with it.
    public init(url: String) throws(RedisError) {
        guard url.hasPrefix("redis://") else { throw RedisError("\(url): the Redis address is redis://[:PASSWORD@]HOST[:PORT][/DB]") }
        var rest = Substring(url.dropFirst("redis://".count))
        var database = 0
        if let slash = rest.firstIndex(of: "/") {
            let text = rest[rest.index(after: slash)...]
            guard text.isEmpty || Int(text).map({ $0 >= 0 && $0 < 16_384 }) == true else { throw RedisError("\(url): the database is a number") }
            database = Int(text) ?? 0
            rest = rest[..<slash]
        }
        var password: String?
        if let at = rest.lastIndex(of: "@") {
            let user = rest[..<at]
            // redis://:PASSWORD@ (no user) or redis://default:PASSWORD@ (Redis 6 ACL's default user).
            password = String(user.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false).last ?? "")
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
        self.init(host: host, port: port, password: password?.isEmpty == true ? nil : password, database: database)
    }

    /// The address without the password, for logs.
    public var description: String {
        let shown = host.contains(":") ? "[\(host)]" : host
        return "redis://\(password == nil ? "" : ":***@")\(shown):\(port)\(database == 0 ? "" : "/\(database)")"
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

/// One blocking connection to Redis (hiredis), used by one thread at a time. A failed command
/// leaves the connection closed; the next one connects again, no sooner than `retryAfter` after
/// the last failed attempt, so a Redis that is down costs a caller one timeout per interval, not
/// one per command.
///
/// Connecting waits half a second at most (a Redis that is down refuses at once, one on a host
/// that is gone costs that); a reply 3 s: Redis's own work is under a millisecond, but a Redis
/// forking for a dump or starved on a loaded host answers hundreds of milliseconds late, and a
/// reply given up on is a relay lost (with half a second, two such stalls in a row lost a
/// candidate under a loaded swift test).
final class RedisConnection {
    let address: RedisAddress
    let connectTimeoutMs: Int32
    let replyTimeoutMs: Int32
    var retryAfter: Duration = .milliseconds(500)
    private var context: UnsafeMutablePointer<redisContext>?
    private var lastFailure: ContinuousClock.Instant?

    init(address: RedisAddress, connectTimeoutMs: Int32 = 500, replyTimeoutMs: Int32 = 3000) {
        self.address = address
        self.connectTimeoutMs = connectTimeoutMs
        self.replyTimeoutMs = replyTimeoutMs
    }

    deinit { disconnect() }

    var isConnected: Bool { context != nil }
    var fileDescriptor: Int32 { context?.pointee.fd ?? -1 }

    func disconnect() {
        if let context { redisFree(context) }
        context = nil
    }

    /// The next command may connect at once: the failure was of a connection Redis had dropped
    /// (it restarted), not of Redis being away.
    func forgetFailure() { lastFailure = nil }

    /// Connects (with AUTH and SELECT) unless connected; throws when Redis cannot be reached.
    func connect(waitingForever: Bool = false) throws(RedisError) {
        guard context == nil else { return }
        if let lastFailure, ContinuousClock.now - lastFailure < retryAfter {
            throw RedisError("\(address): unreachable (retrying)")
        }
        guard let c = chiredis_connect(address.host, Int32(address.port), connectTimeoutMs, replyTimeoutMs) else {
            lastFailure = .now
            throw RedisError("\(address): cannot allocate a connection")
        }
        if c.pointee.err != 0 {
            let reason = Self.errorText(c)
            redisFree(c)
            lastFailure = .now
            throw RedisError("\(address): \(reason)")
        }
        context = c
        do {
            if let password = address.password { try expectOK(["AUTH", password]) }
            if address.database != 0 { try expectOK(["SELECT", String(address.database)]) }
        } catch {
            disconnect()
            lastFailure = .now
            throw error
        }
        if waitingForever { chiredis_wait_forever(c) }
        lastFailure = nil
    }

    private func expectOK(_ arguments: [String]) throws(RedisError) {
        let reply = try command(arguments)
        if case .error(let text) = reply { throw RedisError("\(address): \(arguments[0]): \(text)") }
    }

    private static func errorText(_ c: UnsafeMutablePointer<redisContext>) -> String {
        withUnsafeBytes(of: c.pointee.errstr) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
    }

    /// One command; a Redis error reply is returned, not thrown (scripts answer with them).
    func command(_ arguments: [String]) throws(RedisError) -> RedisReply {
        try pipeline([arguments])[0]
    }

    /// Several commands in one write, their replies in order.
    func pipeline(_ commands: [[String]]) throws(RedisError) -> [RedisReply] {
        try connect()
        guard let context else { throw RedisError("\(address): not connected") }
        for arguments in commands {
            let status = Self.withArgv(arguments) { argc, argv, lengths in redisAppendCommandArgv(context, argc, argv, lengths) }
            if status != REDIS_OK { try fail() }
        }
        var replies: [RedisReply] = []
        replies.reserveCapacity(commands.count)
        for _ in commands {
            guard let reply = try read() else { try fail() }
            replies.append(reply)
        }
        return replies
    }

    /// The next reply on the connection (a subscriber's next message); nil when the connection failed.
    func read() throws(RedisError) -> RedisReply? {
        guard let context else { throw RedisError("\(address): not connected") }
        var raw: UnsafeMutableRawPointer?
        guard redisGetReply(context, &raw) == REDIS_OK, let raw else { return nil }
        let typed = raw.assumingMemoryBound(to: redisReply.self)
        defer { freeReplyObject(raw) }
        return RedisReply(typed)
    }

    private func fail() throws(RedisError) -> Never {
        let reason = context.map(Self.errorText) ?? "closed"
        disconnect()
        lastFailure = .now
        throw RedisError("\(address): \(reason.isEmpty ? "connection lost" : reason)")
    }

    /// Makes a blocked `read()` on another thread return (it fails).
    func interrupt() {
        if let context { chiredis_shutdown(context) }
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
