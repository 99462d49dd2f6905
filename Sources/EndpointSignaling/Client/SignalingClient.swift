import Dispatch
import FoundationEssentials
import Platform
import Signaling
import Synchronization
internal import CLinux
#if canImport(Glibc)
import Glibc
#endif

public struct SignalingClientConfiguration: Sendable {
    public var host: String
    public var port: Int
    /// Further services to try, in turn after `host:port`, whenever a connection fails or is lost
    /// (nodes of one service sharing its rooms, or a standby): the client moves to the next one
    /// and rejoins there.
    public var alternates: [(host: String, port: Int)] = []
    public var room: String
    /// Called before every join and rejoin, so a long-running endpoint can present a fresh token.
    public var token: @Sendable () -> String
    /// When set, the connection is TLS and the server's certificate must be valid for `host`.
    public var tls: TLSContext?
    public var pingInterval: Duration = .seconds(10)
    /// Silence from the server after which the connection is considered dead.
    public var deadAfter: Duration = .seconds(25)
    public var connectTimeout: Duration = .seconds(5)
    /// While a connection is unanswered, a fresh one starts this often (see `TCPSocket.connect`),
    /// so a path back from a silent outage is found within this long.
    public var freshConnectEvery: Duration = .seconds(1)
    /// Reconnect delays grow from `backoffInitial` by doubling up to `backoffMax`, each scaled by a
    /// random factor in 0.5 ... 1 so that many clients do not reconnect in step. A connection no
    /// one answered (a silent path: nothing reached a server) does not grow the delay: its
    /// `connectTimeout` was the wait, and the next attempt follows after `backoffInitial`.
    public var backoffInitial: Duration = .milliseconds(250)
    public var backoffMax: Duration = .seconds(10)
    /// Also called with every event, on the client's own thread, before it reaches `events`:
    /// for consumers that live on threads rather than tasks (media pipelines), and so that events
    /// are seen even while the task pool is busy with blocking work.
    public var eventHandler: (@Sendable (SignalingEvent) -> Void)?
    /// `events` keeps at most this many unread events, the newest: an application that reads
    /// them through `eventHandler` alone, or not at all, holds no growing buffer in a long call.
    public var eventBufferLimit = 1024

    public init(host: String, port: Int, room: String, token: @escaping @Sendable () -> String, tls: TLSContext? = nil) {
        self.host = host
        self.port = port
        self.room = room
        self.token = token
        self.tls = tls
    }
}

public enum SignalingEvent: Sendable, Equatable {
    /// Joined (or, after a reconnect, joined again) with these peers present.
    case joined(participant: String, peers: [String], rejoined: Bool)
    case peerJoined(String, rejoin: Bool)
    case peerLeft(String, reason: String)
    case message(RelayMessage)
    /// The connection was lost; the next attempt starts after `delay`.
    case reconnecting(attempt: Int, delay: Duration, reason: String)
    /// A message the server could not deliver, or that was still unacknowledged when the client stopped.
    case undelivered(RelayMessage, code: SignalingErrorCode?, reason: String)
    /// An error from the server that is not about one message.
    case serverError(code: SignalingErrorCode, message: String)
    /// The STUN and TURN servers the service handed out with a join (just before `joined`).
    case iceServers([ICEServerInfo])
    /// The service renewed this participant's credential (valid until `expires`, Unix seconds);
    /// the client rejoins with it from now on.
    case tokenRenewed(expires: Int64)
    /// The client has stopped for good: asked to, or refused in a way retrying cannot fix.
    case closed(reason: String)
}

/// A signaling client on its own thread: joins the room, keeps the connection alive, reconnects
/// with exponential backoff and jitter, rejoins, and re-sends every relay message the server has
/// not acknowledged. Nothing sent is dropped silently: it is acknowledged, re-sent, or reported
/// as `.undelivered`.
public final class SignalingClient: Sendable {
    public let configuration: SignalingClientConfiguration
    public let events: AsyncStream<SignalingEvent>
    private let streamContinuation: AsyncStream<SignalingEvent>.Continuation

    /// Delivers an event to the handler and the stream.
    private struct Emitter: Sendable {
        let handler: (@Sendable (SignalingEvent) -> Void)?
        let stream: AsyncStream<SignalingEvent>.Continuation
        func yield(_ event: SignalingEvent) {
            handler?(event)
            stream.yield(event)
        }
        func finish() { stream.finish() }
    }
    private var continuation: Emitter { Emitter(handler: configuration.eventHandler, stream: streamContinuation) }

    struct State {
        /// Sent or to send, in order, until the server acknowledges or refuses them.
        var outbox: [RelayMessage] = []
        /// Messages queued since the session thread last wrote.
        var fresh: [RelayMessage] = []
        var stopped = false
        var started = false
        /// The session thread's eventfd; -1 before it starts and once it has ended.
        var wakeFD: Int32 = -1
        /// Wakes the session thread. Called with the lock held, so that the descriptor cannot
        /// be closed (and its number reused) between reading it and writing to it.
        func wake() {
            guard wakeFD >= 0 else { return }
            var one: UInt64 = 1
            _ = write(wakeFD, &one, 8)
        }
        var nextID = 1
        /// Set by `reconnect(because:)`: the session in progress ends and a new one starts.
        var reconnectReason: String?
        /// The service's latest renewal of the credential, for rejoins.
        var renewedToken: String?
        /// Who waits for a message to leave the outbox (`waitAcknowledged`).
        var ackWaiters: [(id: String, done: DispatchSemaphore)] = []
        /// The waiters whose message left the outbox (or all, once stopped): signalled outside the lock.
        mutating func settledWaiters() -> [DispatchSemaphore] {
            let settled = ackWaiters.filter { w in stopped || !outbox.contains { $0.id == w.id } }
            ackWaiters.removeAll { w in stopped || !outbox.contains { $0.id == w.id } }
            return settled.map(\.done)
        }
        /// The token the last successful join presented: the one that holds the seat, which
        /// takes it back at once (another token of the identity waits until the seat is free).
        var seatToken: String?
    }

    private let state = Mutex(State())
    private let idPrefix = String(UInt64.random(in: 0...UInt64.max), radix: 36)

    public init(configuration: SignalingClientConfiguration) {
        self.configuration = configuration
        (events, streamContinuation) = AsyncStream.makeStream(of: SignalingEvent.self,
                                                              bufferingPolicy: .bufferingNewest(configuration.eventBufferLimit))
    }

    /// The first join uses the configured token; a rejoin uses the service's renewal when there
    /// is one, since the configured token may have expired while the participant stayed, else
    /// the token that took the seat while it is good, since a seat held by a connection the
    /// service has not seen go yet (a node that died) goes to that token and its renewals only.
    /// `renewal`: the token is the service's.
    private func joinToken(rejoin: Bool) -> (token: String, renewal: Bool) {
        let (renewed, holder) = state.withLock { ($0.renewedToken, $0.seatToken) }
        if rejoin, let renewed { return (renewed, true) }
        if rejoin, let holder, let expires = TokenClaims.unverifiedExpiry(of: holder),
           expires > Int64(WallClock.unixSeconds) + 5 {
            return (holder, false)
        }
        return (configuration.token(), false)
    }

    public func start() {
        let wake = eventfd(0, clinux_efd_flags())
        let go = state.withLock { s -> Bool in
            guard !s.started else { return false }
            s.started = true
            s.wakeFD = wake
            return true
        }
        guard go else { close(wake); return }
        startThread(named: "signaling-cli") { [self] in self.run(wakeFD: wake) }
    }

    /// Queues a relay message; returns the id it is sent under (the one given, or a new one).
    @discardableResult
    public func send(_ message: RelayMessage) -> String {
        state.withLock { s -> String in
            var m = message
            if m.id.isEmpty {
                // Unique per client instance too: receivers drop repeats by sender and id, and a
                // participant that restarts must not look like a repeat of its former self.
                m.id = "\(idPrefix)-\(s.nextID)"
                s.nextID += 1
            }
            s.outbox.append(m)
            s.fresh.append(m)
            s.wake()
            return m.id
        }
    }

    /// Drops the connection and connects again at once (rejoining the room), for when the
    /// caller knows the connection is dead before TCP does: the local address it used is gone.
    /// Unacknowledged messages go again on the new connection.
    public func reconnect(because reason: String) {
        state.withLock { s in
            s.reconnectReason = reason
            s.wake()
        }
    }

    /// Waits until the service acknowledged (or refused) the message sent under `id`, or the
    /// client stopped, for at most `limit`; true when it left the outbox in time. For a last
    /// message (a bye) before `stop()`, which reports what is still unacknowledged as undelivered.
    public func waitAcknowledged(_ id: String, within limit: Duration) -> Bool {
        let done = DispatchSemaphore(value: 0)
        let pending = state.withLock { s -> Bool in
            guard !s.stopped, s.outbox.contains(where: { $0.id == id }) else { return false }
            s.ackWaiters.append((id, done))
            return true
        }
        guard pending else { return true }
        if done.wait(for: limit) { return true }
        state.withLock { s in s.ackWaiters.removeAll { $0.done === done } }
        return false
    }

    /// Stops the client; anything still unacknowledged is reported as undelivered.
    public func stop() {
        state.withLock { s in
            s.stopped = true
            s.wake()
        }
    }

    private var isStopped: Bool { state.withLock { $0.stopped } }
    /// The session thread's eventfd while it runs, else -1.
    var wakeDescriptor: Int32 { state.withLock { $0.wakeFD } }

    // MARK: Session thread

    private func run(wakeFD: Int32) {
        var attempt = 0
        var hasJoined = false
        var seen = RecentIDs(capacity: 4096)
        while !isStopped {
            let outcome = session(wakeFD: wakeFD, rejoin: hasJoined, seen: &seen)
            switch outcome {
            case .joinedThenLost(let reason):
                hasJoined = true
                attempt = 0
                if isStopped { break }
                attempt += 1
                backoff(attempt: attempt, reason: reason, wakeFD: wakeFD)
            case .failed(let reason):
                if isStopped { break }
                attempt += 1
                backoff(attempt: attempt, reason: reason, wakeFD: wakeFD)
            case .unanswered(let reason):
                if isStopped { break }
                attempt = 1
                backoff(attempt: attempt, reason: reason, wakeFD: wakeFD)
            case .fatal(let reason):
                finish(reason: reason)
                return
            case .stopped:
                break
            }
        }
        finish(reason: "stopped")
    }

    private func finish(reason: String) {
        let (left, waiters) = state.withLock { s -> ([RelayMessage], [DispatchSemaphore]) in
            s.stopped = true
            // Closed under the lock every waker writes under: a wake after the close would write
            // to whatever took the number next (another connection's socket, say).
            if s.wakeFD >= 0 { close(s.wakeFD) }
            s.wakeFD = -1
            defer { s.outbox.removeAll(); s.fresh.removeAll() }
            return (s.outbox, s.settledWaiters())
        }
        for waiter in waiters { waiter.signal() }
        for message in left {
            continuation.yield(.undelivered(message, code: nil, reason: "client stopped before the server acknowledged it"))
        }
        continuation.yield(.closed(reason: reason))
        continuation.finish()
    }

    func backoffDelay(attempt: Int) -> Duration {
        let exponent = min(attempt - 1, 20)
        let base = min(configuration.backoffMax.inSeconds, configuration.backoffInitial.inSeconds * pow(2, Double(exponent)))
        return .seconds(base * Double.random(in: 0.5...1.0))
    }

    private func backoff(attempt: Int, reason: String, wakeFD: Int32) {
        let delay = backoffDelay(attempt: attempt)
        continuation.yield(.reconnecting(attempt: attempt, delay: delay, reason: reason))
        // Wait, but wake at once for stop().
        var pfd = pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)
        let deadline = MediaTime.now + delay
        while !isStopped, MediaTime.now < deadline, state.withLock({ $0.reconnectReason == nil }) {
            let ms = Int32(max(1, (deadline - MediaTime.now).inSeconds * 1000))
            _ = poll(&pfd, 1, ms)
            var value: UInt64 = 0
            _ = read(wakeFD, &value, 8)
        }
    }

    enum SessionOutcome {
        case joinedThenLost(String)
        case failed(String)
        /// No answer to the connection: the path is silent, not the server busy.
        case unanswered(String)
        case fatal(String)
        case stopped
    }

    /// The services to use, in order: `host:port`, then the alternates.
    private var servers: [(host: String, port: Int)] { [(configuration.host, configuration.port)] + configuration.alternates }
    /// Which of `servers` the next connection goes to.
    private let serverIndex = Atomic<Int>(0)

    /// The service the client is connected to, or tries next ("HOST:PORT").
    public var currentServer: String {
        let server = servers[serverIndex.load(ordering: .relaxed) % servers.count]
        return server.host.contains(":") ? "[\(server.host)]:\(server.port)" : "\(server.host):\(server.port)"
    }

    /// One connection: connect, (TLS), join, then relay until the connection fails or stop().
    /// Whatever ends it other than stop() moves the next attempt to the next service in the list.
    private func session(wakeFD: Int32, rejoin: Bool, seen: inout RecentIDs) -> SessionOutcome {
        let outcome = session(to: servers[serverIndex.load(ordering: .relaxed) % servers.count], wakeFD: wakeFD, rejoin: rejoin, seen: &seen)
        switch outcome {
        case .failed, .unanswered, .joinedThenLost: serverIndex.add(1, ordering: .relaxed)
        case .fatal, .stopped: break
        }
        return outcome
    }

    private func session(to server: (host: String, port: Int), wakeFD: Int32, rejoin: Bool, seen: inout RecentIDs) -> SessionOutcome {
        // A reconnection asked for before now is this one.
        state.withLock { $0.reconnectReason = nil }
        let fd: Int32
        do {
            fd = try TCPSocket.connect(host: server.host, port: server.port, timeout: configuration.connectTimeout,
                                       freshAttemptEvery: configuration.freshConnectEvery)
        } catch {
            return error.errno.rawValue == ETIMEDOUT ? .unanswered(error.description) : .failed(error.description)
        }
        defer { close(fd) }
        var tls: TLSSession?
        if let context = configuration.tls {
            do {
                // The handshake runs blocking with a time limit, then the socket goes back to non-blocking.
                setBlocking(fd, true)
                var timeout = timeval(tv_sec: Int(configuration.connectTimeout.components.seconds), tv_usec: 0)
                setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
                let session = try TLSSession(context: context, fd: fd, serverName: server.host)
                try session.handshake()
                timeout = timeval(tv_sec: 0, tv_usec: 0)
                setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
                setBlocking(fd, false)
                tls = session
            } catch {
                // A certificate the client does not trust will not become trusted by retrying.
                return error.description.contains("certificate") ? .fatal(error.description) : .failed(error.description)
            }
        }
        let connection = ClientConnection(fd: fd, tls: tls)
        var joined = false
        var framer = LineFramer()
        let (token, renewal) = joinToken(rejoin: rejoin)
        var lastHeard = MediaTime.now
        var nextPing = MediaTime.now + configuration.pingInterval
        var pingID = 0
        do {
            try connection.send(SignalingMessage.join(room: configuration.room, token: token, rejoin: rejoin).serialized())
        } catch {
            return .failed(error.description)
        }
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            if isStopped { return .stopped }
            if let reason = state.withLock({ s in defer { s.reconnectReason = nil }; return s.reconnectReason }) {
                return joined ? .joinedThenLost(reason) : .failed(reason)
            }
            if joined {
                // Write what the caller queued since the last pass.
                let fresh = state.withLock { s -> [RelayMessage] in defer { s.fresh.removeAll() }; return s.fresh }
                do {
                    for message in fresh { try connection.send(SignalingMessage.relay(message).serialized()) }
                } catch {
                    return .joinedThenLost(error.description)
                }
            }
            let now = MediaTime.now
            if now - lastHeard > configuration.deadAfter {
                let reason = "no word from the server for \(configuration.deadAfter)"
                return joined ? .joinedThenLost(reason) : .failed(reason)
            }
            if now >= nextPing {
                pingID += 1
                do { try connection.send(SignalingMessage.ping(id: pingID).serialized()) } catch {
                    return joined ? .joinedThenLost(error.description) : .failed(error.description)
                }
                nextPing = now + configuration.pingInterval
            }
            var fds = [pollfd(fd: fd, events: Int16(POLLIN) | (connection.waitsForWritable ? Int16(POLLOUT) : 0), revents: 0),
                       pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)]
            let waitMs = Int32(max(1, min((nextPing - now).inSeconds, 1) * 1000))
            _ = poll(&fds, 2, waitMs)
            if fds[1].revents != 0 {
                var value: UInt64 = 0
                _ = read(wakeFD, &value, 8)
            }
            if fds[0].revents & Int16(POLLOUT) != 0 {
                do { try connection.flush() } catch { return joined ? .joinedThenLost(error.description) : .failed(error.description) }
            }
            // TLS may hold decrypted records the socket no longer signals, so it is always read.
            guard fds[0].revents & (Int16(POLLIN) | Int16(POLLHUP) | Int16(POLLERR)) != 0 || tls != nil else { continue }
            for _ in 0..<16 {
                let attempt: Result<IOResult, ConnectionFailure> = buffer.withUnsafeMutableBytes { raw in
                    Result { () throws(ConnectionFailure) in try connection.read(into: raw) }
                }
                let result: IOResult
                switch attempt {
                case .success(let value): result = value
                case .failure(let error): return joined ? .joinedThenLost(error.description) : .failed(error.description)
                }
                guard case .bytes(let count) = result else {
                    if result == .closed {
                        let reason = "the server closed the connection"
                        return joined ? .joinedThenLost(reason) : .failed(reason)
                    }
                    break
                }
                lastHeard = MediaTime.now
                let lines: [[UInt8]]
                do { lines = try framer.append(buffer[0..<count]) } catch {
                    return .failed("the server sent a line over \(framer.maxLineLength) bytes")
                }
                for line in lines {
                    guard let message = try? SignalingMessage(parsing: line) else { continue }
                    if let outcome = handle(message, joined: &joined, rejoin: rejoin, token: token, renewal: renewal, connection: connection, seen: &seen) {
                        return outcome
                    }
                }
            }
        }
    }

    /// Acts on one message from the server; returns an outcome when the session must end.
    private func handle(_ message: SignalingMessage, joined: inout Bool, rejoin: Bool, token: String, renewal: Bool, connection: ClientConnection,
                        seen: inout RecentIDs) -> SessionOutcome? {
        switch message {
        case .joined(_, let participant, let peers, let servers):
            joined = true
            if !renewal { state.withLock { $0.seatToken = token } }
            if !servers.isEmpty { continuation.yield(.iceServers(servers)) }
            // Everything not yet acknowledged goes again, in order; receivers drop duplicates by id.
            let pending = state.withLock { s -> [RelayMessage] in
                s.fresh.removeAll()
                return s.outbox
            }
            continuation.yield(.joined(participant: participant, peers: peers, rejoined: rejoin))
            do {
                for m in pending { try connection.send(SignalingMessage.relay(m).serialized()) }
            } catch {
                return .joinedThenLost(error.description)
            }
        case .peerJoined(let who, let again):
            continuation.yield(.peerJoined(who, rejoin: again))
        case .peerLeft(let who, let reason):
            continuation.yield(.peerLeft(who, reason: reason))
        case .relay(let relay):
            if seen.insert("\(relay.from ?? "")/\(relay.id)") { continuation.yield(.message(relay)) }
        case .ack(let id):
            for waiter in state.withLock({ s in s.outbox.removeAll { $0.id == id }; return s.settledWaiters() }) { waiter.signal() }
        case .error(let code, let text, let id):
            if let id, let refused = state.withLock({ s -> RelayMessage? in
                guard let index = s.outbox.firstIndex(where: { $0.id == id }) else { return nil }
                return s.outbox.remove(at: index)
            }) {
                for waiter in state.withLock({ $0.settledWaiters() }) { waiter.signal() }
                continuation.yield(.undelivered(refused, code: code, reason: text))
                return nil
            }
            // The service's renewal is good for taking the seat back within its grace only: after
            // it, the token from whoever mints them is the one to try (it may have expired too).
            if !joined && renewal && (code == .tokenRenewal || code == .tokenExpired) {
                state.withLock { $0.renewedToken = nil }
                return .failed("\(code.rawValue): \(text); joining with the configured token")
            }
            if !joined && !renewal && token == state.withLock({ $0.seatToken }) && code.isFatalForJoin {
                // The seat's token no longer works (its seat went after the grace, say): the
                // configured one may.
                state.withLock { $0.seatToken = nil }
                return .failed("\(code.rawValue): \(text); joining with the configured token")
            }
            if !joined && code.isFatalForJoin { return .fatal("\(code.rawValue): \(text)") }
            // The node cannot reach the rooms it shares with others: another node, or this one
            // a little later, may. A seat held by a live connection frees when that connection ends.
            if !joined && (code == .unavailable || code == .seatTaken) { return .failed("\(code.rawValue): \(text)") }
            if code == .replaced { return .fatal("\(code.rawValue): \(text)") }
            continuation.yield(.serverError(code: code, message: text))
        case .ping(let id):
            try? connection.send(SignalingMessage.pong(id: id).serialized())
        case .token(let token, let expires, let servers):
            state.withLock { $0.renewedToken = token }
            if !servers.isEmpty { continuation.yield(.iceServers(servers)) }
            continuation.yield(.tokenRenewed(expires: expires))
        case .pong, .join:
            break
        }
        return nil
    }

    private func setBlocking(_ fd: Int32, _ blocking: Bool) {
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, blocking ? flags & ~O_NONBLOCK : flags | O_NONBLOCK)
    }
}

/// The client's socket: writes queue what the kernel does not take yet and flush on POLLOUT.
final class ClientConnection {
    let fd: Int32
    let tls: TLSSession?
    private var output: [UInt8] = []

    init(fd: Int32, tls: TLSSession?) {
        self.fd = fd
        self.tls = tls
    }

    var hasPendingOutput: Bool { !output.isEmpty }
    /// Output waits for the socket to take it, not for the peer's bytes (as TLS's may: then
    /// waiting for POLLOUT would wake at once, again and again, until the peer speaks).
    var waitsForWritable: Bool { !output.isEmpty && !blockedOnRead }
    private var blockedOnRead = false

    func send(_ bytes: [UInt8]) throws(ConnectionFailure) {
        output += bytes
        try flush()
    }

    func flush() throws(ConnectionFailure) {
        while !output.isEmpty {
            let attempt: Result<IOResult, ConnectionFailure> = output.withUnsafeBytes { raw in
                Result { () throws(ConnectionFailure) in
                    if let tls {
                        do throws(TLSError) { return try tls.write(raw) } catch { throw ConnectionFailure(description: error.description) }
                    }
                    do throws(SystemError) { return try nonBlocking("send", { Glibc.send(fd, raw.baseAddress, raw.count, Int32(MSG_NOSIGNAL)) }) } catch {
                        throw ConnectionFailure(description: error.description)
                    }
                }
            }
            switch try attempt.get() {
            case .bytes(let n):
                output.removeFirst(n)
                blockedOnRead = false
            case .wouldBlock:
                blockedOnRead = false
                return
            case .needsRead:
                blockedOnRead = true
                return
            case .closed: throw ConnectionFailure(description: "the server closed the connection")
            }
        }
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) throws(ConnectionFailure) -> IOResult {
        if let tls {
            do {
                let result = try tls.read(into: buffer)
                if case .bytes = result { blockedOnRead = false }  // what a write waited for may have come
                return result
            } catch { throw ConnectionFailure(description: error.description) }
        }
        do { return try nonBlocking("read", { Glibc.read(fd, buffer.baseAddress, buffer.count) }) } catch {
            throw ConnectionFailure(description: error.description)
        }
    }
}

/// The last N message keys seen, to drop copies a sender re-sent after a reconnect.
struct RecentIDs {
    private var order: [String] = []
    private var set: Set<String> = []
    let capacity: Int

    init(capacity: Int) { self.capacity = capacity }

    /// True if the key is new.
    mutating func insert(_ key: String) -> Bool {
        guard set.insert(key).inserted else { return false }
        order.append(key)
        if order.count > capacity { set.remove(order.removeFirst()) }
        return true
    }
}
