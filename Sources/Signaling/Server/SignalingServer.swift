import Foundation
import Platform
import Synchronization
internal import CLinux
#if canImport(Glibc)
import Glibc
#endif

public struct SignalingServerConfiguration: Sendable {
    public var host: String
    public var port: Int
    public var secret: TokenSecret
    public var tls: TLSContext?
    public var limits = ServerLimits()
    public var requiredIssuer: String?
    /// Clock skew allowed on a token's exp and nbf, in seconds.
    public var tokenLeeway: Int64 = 10
    /// Largest amount of unsent data a slow connection may hold before it is dropped.
    public var maxPendingOutput = 1 << 20
    /// STUN and TURN servers for participants, with TURN credentials made per join.
    public var iceServers: ICEServerPolicy?

    public init(host: String = "127.0.0.1", port: Int, secret: TokenSecret, tls: TLSContext? = nil) {
        self.host = host
        self.port = port
        self.secret = secret
        self.tls = tls
    }
}

/// The signaling service: one thread running an epoll loop over non-blocking sockets (optionally
/// TLS), feeding `SignalingServerCore` and carrying out what it returns. All connection and room
/// state lives on that thread.
public final class SignalingServer: @unchecked Sendable {  // mutable state is touched by the loop thread only; stop() uses an atomic and the eventfd
    public let configuration: SignalingServerConfiguration
    /// The port actually bound (useful with port 0).
    public let port: Int
    private let listenFD: Int32
    private let epoll: Epoll
    private let core: SignalingServerCore
    private let stopping = Atomic<Bool>(false)
    private let finished = Mutex<Bool>(false)
    private var thread: Thread?
    private var connections: [UInt64: ServerConnection] = [:]
    private var nextID: UInt64 = 1
    private let clock = ContinuousClock()
    private let origin: ContinuousClock.Instant
    private let log: @Sendable (String) -> Void

    static let listenToken: UInt64 = 0

    public init(configuration: SignalingServerConfiguration, log: @escaping @Sendable (String) -> Void = { _ in }) throws {
        self.configuration = configuration
        self.log = log
        origin = clock.now
        epoll = try Epoll()
        (listenFD, port) = try TCPSocket.listen(host: configuration.host, port: configuration.port)
        var verifier = TokenVerifier(secret: configuration.secret, requiredIssuer: configuration.requiredIssuer)
        verifier.leeway = configuration.tokenLeeway
        core = SignalingServerCore(verifier: verifier,
                                   limits: configuration.limits, iceServers: configuration.iceServers)
        try epoll.add(listenFD, token: Self.listenToken, writable: false)
    }

    deinit {
        for connection in connections.values { connection.closeNow() }
        if !listenerClosed { close(listenFD) }
    }

    private var listenerClosed = false

    /// Starts the loop thread and returns.
    public func start() {
        thread = startThread(named: "signaling-srv", stackSize: 1 << 20) { [self] in
            self.runLoop()
            self.finished.withLock { $0 = true }
        }
    }

    /// Runs the loop on the calling thread until `stop()`.
    public func run() { runLoop() }

    /// Stops the loop, closes every connection, and waits for the loop thread to end.
    public func stop() {
        stopping.store(true, ordering: .sequentiallyConsistent)
        epoll.wake()
        guard thread != nil else { return }
        while !finished.withLock({ $0 }) { usleep(1000) }
    }

    private var now: Duration { clock.now - origin }

    private func runLoop() {
        var events = [epoll_event](repeating: epoll_event(), count: 1024)
        var nextTick = now + .seconds(1)
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while !stopping.load(ordering: .sequentiallyConsistent) {
            for event in epoll.wait(into: &events, timeoutMs: 250) {
                switch event.token {
                case Self.listenToken: acceptAll()
                case Epoll.wakeToken: epoll.drainWake()
                default:
                    guard let connection = connections[event.token] else { continue }
                    if event.writable { flush(connection) }
                    if event.readable { read(connection, buffer: &buffer) }
                    // TLS may need the other direction to progress.
                    if connection.tls != nil, !connection.isClosed, !connection.output.isEmpty { flush(connection) }
                }
            }
            if now >= nextTick {
                apply(core.tick(now: now, wallClock: Int64(Date().timeIntervalSince1970)))
                nextTick = now + .seconds(1)
            }
        }
        // Shutting down is not everyone leaving: close the connections without telling the
        // others "peer-left", so clients keep their calls and rejoin when a service is back.
        for connection in connections.values {
            epoll.remove(connection.fd)
            connection.closeNow()
        }
        connections.removeAll()
        // Free the port at once, so a restarted server can bind it again.
        epoll.remove(listenFD)
        close(listenFD)
        listenerClosed = true
    }

    private func acceptAll() {
        while true {
            let fd = clinux_accept4(listenFD, Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue))
            if fd < 0 {
                let code = errno
                if code == EINTR || code == ECONNABORTED { continue }
                if code == EMFILE || code == ENFILE { log("accept: \(SystemError("accept", errno: code))") }
                return
            }
            TCPSocket.setNoDelay(fd)
            let id = nextID
            nextID += 1
            var tls: TLSSession?
            if let context = configuration.tls {
                do { tls = try TLSSession(context: context, fd: fd) } catch {
                    log("\(error)")
                    close(fd)
                    continue
                }
            }
            let connection = ServerConnection(id: id, fd: fd, tls: tls, maxLineLength: configuration.limits.maxLineLength)
            connections[id] = connection
            do { try epoll.add(fd, token: id, writable: false) } catch {
                log("\(error)")
                connections[id] = nil
                connection.closeNow()
                continue
            }
            apply(core.connectionOpened(id, now: now, address: TCPSocket.peerAddress(fd)))
        }
    }

    private func read(_ connection: ServerConnection, buffer: inout [UInt8]) {
        // Bounded reads per wake-up keep one busy connection from starving the others.
        for _ in 0..<4 {
            guard !connection.isClosed, !connection.closeWhenFlushed else { return }
            let attempt: Result<IOResult, ConnectionFailure> = buffer.withUnsafeMutableBytes { raw in
                Result { () throws(ConnectionFailure) in try connection.read(into: raw) }
            }
            guard case .success(let result) = attempt else {
                if case .failure(let error) = attempt { drop(connection.id, reason: error.description) }
                return
            }
            switch result {
            case .wouldBlock: return
            case .closed:
                drop(connection.id, reason: "peer closed")
                return
            case .bytes(let count):
                let lines: [[UInt8]]
                do { lines = try connection.framer.append(buffer[0..<count]) } catch {
                    apply(core.lineTooLong(connection.id))
                    return
                }
                let wall = Int64(Date().timeIntervalSince1970)
                for line in lines {
                    apply(core.received(line, from: connection.id, now: now, wallClock: wall))
                    if connection.isClosed || connection.closeWhenFlushed { return }
                }
            }
        }
    }

    private func apply(_ actions: [SignalingServerCore.Action]) {
        for action in actions {
            switch action {
            case .send(let id, let message):
                guard let connection = connections[id], !connection.isClosed else { continue }
                connection.output.append(contentsOf: message.serialized())
                if connection.output.count > configuration.maxPendingOutput {
                    drop(id, reason: "more than \(configuration.maxPendingOutput) bytes waiting to be sent")
                    continue
                }
                flush(connection)
            case .close(let id):
                guard let connection = connections[id] else { continue }
                connection.closeWhenFlushed = true
                if connection.output.isEmpty { drop(id, reason: "closed by server") }
            }
        }
    }

    private func flush(_ connection: ServerConnection) {
        while !connection.output.isEmpty, !connection.isClosed {
            let attempt: Result<IOResult, ConnectionFailure> = connection.output.withUnsafeBytes { raw in
                Result { () throws(ConnectionFailure) in try connection.write(raw) }
            }
            guard case .success(let result) = attempt else {
                if case .failure(let error) = attempt { drop(connection.id, reason: error.description) }
                return
            }
            switch result {
            case .bytes(let count): connection.output.removeFirst(count)
            case .wouldBlock:
                if !connection.wantsWrite {
                    connection.wantsWrite = true
                    try? epoll.modify(connection.fd, token: connection.id, writable: true)
                }
                return
            case .closed:
                drop(connection.id, reason: "peer closed")
                return
            }
        }
        if connection.wantsWrite, !connection.isClosed {
            connection.wantsWrite = false
            try? epoll.modify(connection.fd, token: connection.id, writable: false)
        }
        if connection.closeWhenFlushed, !connection.isClosed { drop(connection.id, reason: "closed by server") }
    }

    private func drop(_ id: UInt64, reason: String) {
        guard let connection = connections.removeValue(forKey: id) else { return }
        epoll.remove(connection.fd)
        connection.closeNow()
        apply(core.connectionClosed(id))
    }

    /// Connections and rooms right now, read on the loop thread's behalf (approximate from others).
    public var statistics: (connections: Int, rooms: Int) { (core.connectionCount, core.roomCount) }
}

struct ConnectionFailure: Error, CustomStringConvertible {
    let description: String
}

/// One accepted connection: its descriptor (closed by `closeNow`), TLS session, framer and output.
final class ServerConnection {
    let id: UInt64
    let fd: Int32
    let tls: TLSSession?
    var framer: LineFramer
    var output: [UInt8] = []
    var wantsWrite = false
    var closeWhenFlushed = false
    private(set) var isClosed = false

    init(id: UInt64, fd: Int32, tls: TLSSession?, maxLineLength: Int) {
        self.id = id
        self.fd = fd
        self.tls = tls
        self.framer = LineFramer(maxLineLength: maxLineLength)
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) throws(ConnectionFailure) -> IOResult {
        if let tls {
            do { return try tls.read(into: buffer) } catch { throw ConnectionFailure(description: error.description) }
        }
        do { return try nonBlocking("read", { Glibc.read(fd, buffer.baseAddress, buffer.count) }) } catch {
            throw ConnectionFailure(description: error.description)
        }
    }

    func write(_ buffer: UnsafeRawBufferPointer) throws(ConnectionFailure) -> IOResult {
        if let tls {
            do { return try tls.write(buffer) } catch { throw ConnectionFailure(description: error.description) }
        }
        do { return try nonBlocking("write", { Glibc.send(fd, buffer.baseAddress, buffer.count, Int32(MSG_NOSIGNAL)) }) } catch {
            throw ConnectionFailure(description: error.description)
        }
    }

    func closeNow() {
        guard !isClosed else { return }
        isClosed = true
        tls?.shutdown()
        close(fd)
    }
}
