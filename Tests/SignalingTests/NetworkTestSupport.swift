@testable import EndpointSignaling
import Foundation
import Platform
@testable import SignalingService
import Synchronization
import Testing
import TestSupport
@testable import Signaling

/// Collects a client's events so tests can wait for one with a deadline.
final class EventLog: Sendable {
    final class Storage: Sendable {
        let events = Mutex<[SignalingEvent]>([])
    }
    private let storage = Storage()

    /// Collects from the client's event handler, on the client's thread: the test does not depend
    /// on the task pool, which other (blocking) tests may be holding.
    init() {}

    var handler: @Sendable (SignalingEvent) -> Void {
        let storage = self.storage
        return { event in storage.events.withLock { $0.append(event) } }
    }

    var all: [SignalingEvent] { storage.events.withLock { $0 } }

    /// Waits up to `timeout` for an event matching `predicate`; returns it or nil. Every wait
    /// looks for an event that must come, so the deadline costs time only when it does not:
    /// 30 s, because 5 s was not enough for a relayed answer in CI's swift test (the suites run
    /// side by side and blocking tests hold the task pool's threads; the test took 86 s).
    @discardableResult
    func wait(timeout: Duration = .seconds(30), _ predicate: (SignalingEvent) -> Bool) async -> SignalingEvent? {
        var found: SignalingEvent?
        await eventually(within: timeout) {
            found = all.first(where: predicate)
            return found != nil
        }
        return found
    }
}

func startServer(port: Int = 0, limits: ServerLimits = ServerLimits(), tls: TLSContext? = nil) throws -> SignalingServer {
    var configuration = SignalingServerConfiguration(port: port, secret: testSecret, tls: tls)
    configuration.limits = limits
    let server = try SignalingServer(configuration: configuration)
    server.start()
    return server
}

/// A started client; `token` fixed, or (nil) a fresh 10-minute one for `identity` at every join.
func makeClient(port: Int, room: String = "lab", identity: String, tls: TLSContext? = nil, host: String = "127.0.0.1",
                fastRetry: Bool = true, token fixed: String? = nil, alternates: [Int] = [],
                configure: (inout SignalingClientConfiguration) -> Void = { _ in }) -> (SignalingClient, EventLog) {
    // Every call of the provider mints another token (as a provider that asks a token service
    // would), so tests see what a rejoin with a token other than the seat's does.
    let minted = Atomic<Int64>(0)
    var configuration = SignalingClientConfiguration(host: host, port: port, room: room, token: {
        if let fixed { return fixed }
        let now = Int64(Date().timeIntervalSince1970)
        let issued = now - minted.add(1, ordering: .relaxed).newValue
        return TokenIssuer(secret: testSecret).mint(TokenClaims(identity: identity, room: room, issuedAt: issued, expires: now + 600))
    }, tls: tls)
    configuration.alternates = alternates.map { (host, $0) }
    if fastRetry {
        configuration.backoffInitial = .milliseconds(50)
        configuration.backoffMax = .milliseconds(400)
    }
    configure(&configuration)
    let log = EventLog()
    configuration.eventHandler = log.handler
    let client = SignalingClient(configuration: configuration)
    client.start()
    return (client, log)
}

func isJoined(_ event: SignalingEvent) -> Bool { if case .joined = event { return true }; return false }

/// A bare TCP connection for sending hostile bytes and reading the server's lines.
/// A blocking TCP connection to 127.0.0.1:`port` from `source` (any 127.0.0.0/8 address on
/// loopback): the service sees a client of another address block.
func connectFrom(_ source: String, port: Int) throws -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { throw SystemError("socket") }
    func address(_ host: String, _ port: Int) -> sockaddr_in {
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_port = in_port_t(UInt16(port).bigEndian)
        inet_pton(AF_INET, host, &a.sin_addr)
        return a
    }
    var local = address(source, 0), remote = address("127.0.0.1", port)
    let bound = withUnsafePointer(to: &local) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
    let connected = bound == 0 ? withUnsafePointer(to: &remote) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } } : -1
    guard connected == 0 else {
        let error = SystemError("connect from \(source)")
        Glibc.close(fd)
        throw error
    }
    return fd
}

final class RawConnection {
    let fd: Int32
    private var framer = LineFramer(maxLineLength: 1 << 20)

    init(port: Int, from source: String? = nil) throws {
        fd = try source.map { try connectFrom($0, port: port) } ?? TCPSocket.connect(host: "127.0.0.1", port: port, timeout: .seconds(2))
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags & ~O_NONBLOCK)
        var timeout = timeval(tv_sec: 3, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { if !closed { Glibc.close(fd) } }

    private var closed = false

    /// Closes the connection now (the server sees the participant go).
    func close() {
        guard !closed else { return }
        closed = true
        Glibc.close(fd)
    }

    func send(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { return }
            offset += n
        }
    }

    func send(_ text: String) { send(Array(text.utf8)) }

    private var pending: [[UInt8]] = []

    /// The next message from the server, or nil when the connection closes or 3 s pass.
    func receive() -> SignalingMessage? {
        var buffer = [UInt8](repeating: 0, count: 65536)
        while pending.isEmpty {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n <= 0 { return nil }
            guard let lines = try? framer.append(buffer[0..<n]) else { return nil }
            pending += lines
        }
        return try? SignalingMessage(parsing: pending.removeFirst())
    }

    /// True if the server closes (or reset) the connection within `within`.
    func isClosedByServer(within: Duration) -> Bool {
        var fds = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&fds, 1, Int32(within.inMilliseconds)) > 0 else { return false }
        return isClosedByServer()
    }

    /// True if the server has closed the connection (reads EOF within 3 s).
    func isClosedByServer() -> Bool {
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n == 0 { return true }
            if n < 0 { return errno == ECONNRESET }
        }
    }
}

func errorCodeOf(_ message: SignalingMessage?) -> SignalingErrorCode? {
    if case .error(let code, _, _)? = message { return code }
    return nil
}
