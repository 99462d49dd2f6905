import Dispatch
import FoundationEssentials
import Platform
import Signaling
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
    /// Where the web side listens, when it does: the page at `/` and the protocol over WebSocket
    /// at `/ws` (HTTPS and WSS when `tls` is set).
    public var web: (host: String, port: Int)?
    /// Where the metrics listen, when they do: the Prometheus text format at `/metrics`.
    public var metrics: (host: String, port: Int)?
    /// The Redis the service shares rooms through with other nodes; nil: rooms are this node's own.
    public var redis: RedisAddress?
    /// How long a node's seats outlive it in the directory when it dies without leaving.
    public var redisLease: Duration = .seconds(5)
    /// Listen in plain TCP on addresses other than loopback (tokens and fingerprints in the
    /// clear): only when the user says so.
    public var insecurePlaintext = false
    /// Origins besides the page's own whose pages may open `/ws` (scheme://host[:port]).
    public var allowedOrigins: [String] = []
    /// Host names the web side answers to besides IP addresses, localhost and the TLS
    /// certificate's names.
    public var allowedHosts: [String] = []

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
    /// The web side's port actually bound, when it listens.
    public let webPort: Int?
    /// The metrics' port actually bound, when they listen.
    public let metricsPort: Int?
    private let listenFD: Int32
    private let webListenFD: Int32?
    private let metricsListenFD: Int32?
    private var metrics = ServerMetrics()
    private let epoll: Epoll
    private let core: SignalingServerCore
    /// The rooms shared with other nodes, with `configuration.redis`.
    public let directory: RedisRoomDirectory?
    private let stopping = Atomic<Bool>(false)
    private let finished = Mutex<Bool>(false)
    private var threadStarted = false
    private var connections: [UInt64: ServerConnection] = [:]
    private var nextID: UInt64 = 1
    private let clock = MonotonicClock()
    private let origin: MediaTime
    private let log: @Sendable (LogMessage) -> Void

    static let listenToken: UInt64 = 0
    static let webListenToken: UInt64 = .max - 1
    static let metricsListenToken: UInt64 = .max - 2

    public init(configuration: SignalingServerConfiguration, log: @escaping @Sendable (LogMessage) -> Void = { _ in }) throws {
        if configuration.tls == nil && !configuration.insecurePlaintext {
            for (what, host) in [("listening on \(configuration.host)", configuration.host), ("the web side on \(configuration.web?.host ?? "")", configuration.web?.host)] {
                guard let host, !PlaintextPolicy.isLoopback(host: host) else { continue }
                throw InsecureConfigurationError(PlaintextPolicy.refusal(what))
            }
        }
        self.configuration = configuration
        self.log = log
        origin = clock.now
        access = WebAccessPolicy(secure: configuration.tls != nil, hostNames: configuration.allowedHosts + (configuration.tls?.dnsNames ?? []),
                                 allowedOrigins: configuration.allowedOrigins)
        reserveFD = open("/dev/null", O_RDONLY | O_CLOEXEC)
        epoll = try Epoll()
        // Every listener asked for, or none: one that cannot bind closes those already bound.
        var bound: [Int32] = []
        func listen(_ address: (host: String, port: Int)?) throws -> (fd: Int32, port: Int)? {
            guard let address else { return nil }
            do {
                let listener = try TCPSocket.listen(host: address.host, port: address.port)
                bound.append(listener.fd)
                return listener
            } catch {
                for fd in bound { close(fd) }
                throw error
            }
        }
        (listenFD, port) = try listen((configuration.host, configuration.port))!
        let web = try listen(configuration.web), metrics = try listen(configuration.metrics)
        (webListenFD, webPort) = (web?.fd, web?.port)
        (metricsListenFD, metricsPort) = (metrics?.fd, metrics?.port)
        var verifier = TokenVerifier(secret: configuration.secret, requiredIssuer: configuration.requiredIssuer)
        verifier.leeway = configuration.tokenLeeway
        do {
            let wakeFD = epoll.wakeFD
            directory = try configuration.redis.map { address throws(RedisError) in
                try RedisRoomDirectory(address: address, envelope: ClusterEnvelope(secret: configuration.secret), lease: configuration.redisLease,
                                       grace: configuration.limits.seatGrace, log: log) { Epoll.wake(wakeFD) }
            }
        } catch {
            for fd in bound { close(fd) }
            throw error
        }
        core = SignalingServerCore(verifier: verifier,
                                   limits: configuration.limits, iceServers: configuration.iceServers, clustered: directory != nil)
        try epoll.add(listenFD, token: Self.listenToken, writable: false)
        if let webListenFD { try epoll.add(webListenFD, token: Self.webListenToken, writable: false) }
        if let metricsListenFD { try epoll.add(metricsListenFD, token: Self.metricsListenToken, writable: false) }
    }

    deinit {
        for connection in connections.values { connection.closeNow() }
        if !listenerClosed {
            for fd in [listenFD, webListenFD, metricsListenFD].compactMap({ $0 }) { close(fd) }
        }
        if reserveFD >= 0 { close(reserveFD) }
    }

    /// What the web side answers (Host and Origin).
    private let access: WebAccessPolicy
    /// A descriptor held in reserve: when accept fails for want of descriptors (EMFILE), it is
    /// closed so that the waiting connection can be accepted and closed at once, instead of
    /// waking the level-triggered loop again and again for it.
    private var reserveFD: Int32
    /// Connections turned away before a word (no descriptor left, a handshake too slow).
    private var refusals = ServerMetrics.Refusals()
    /// A TLS handshake under way: its deadline, its address block, when it began.
    private struct Handshake {
        var deadline: Duration
        var address: String
        var began: Duration
    }
    /// The handshakes under way (`maxTLSHandshakes` at most, `maxHandshakesPerAddress` per
    /// address block), and how many each address block holds.
    private var handshakes: [UInt64: Handshake] = [:]
    private var handshakesPerAddress: [String: Int] = [:]
    /// Connections that have not sent a byte yet, with the deadline for their first.
    private var firstByteDeadlines: [UInt64: Duration] = [:]
    /// Connections of the metrics listener, with their deadline.
    private var metricsDeadlines: [UInt64: Duration] = [:]
    /// When the deadlines are next looked at (every 100 ms at most: the tables may be large).
    private var nextDeadlineCheck: Duration = .zero
    /// Times the loop woke (epoll returned): idle connections must not make it spin.
    let wakeups = Atomic<Int>(0)

    private var listenerClosed = false

    /// Starts the loop thread and returns.
    public func start() {
        threadStarted = true
        startThread(named: "signaling-srv", stackSize: 1 << 20) { [self] in
            self.runLoop()
            self.finished.withLock { $0 = true }
            self.loopEnded.signal()
        }
    }

    /// Runs the loop on the calling thread until `stop()`.
    public func run() { runLoop() }

    /// Stops the loop, closes every connection, and waits for the loop thread to end.
    public func stop() {
        stopping.store(true, ordering: .sequentiallyConsistent)
        epoll.wake()
        guard threadStarted, !finished.withLock({ $0 }) else { return }
        loopEnded.wait()
        loopEnded.signal()  // for a second stop()
    }

    private let loopEnded = DispatchSemaphore(value: 0)

    private var now: Duration { clock.now - origin }

    private func runLoop() {
        var events = [epoll_event](repeating: epoll_event(), count: 1024)
        var nextTick = now + .seconds(1)
        let renewal = min(.seconds(1), configuration.redisLease / 3)
        var nextRenewal = now
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while !stopping.load(ordering: .sequentiallyConsistent) {
            let ready = epoll.wait(into: &events, timeoutMs: directory == nil ? 250 : 50)
            wakeups.add(1, ordering: .relaxed)
            for event in ready {
                switch event.token {
                case Self.listenToken: acceptAll(from: listenFD, web: false)
                case Self.webListenToken: if let webListenFD { acceptAll(from: webListenFD, web: true) }
                case Self.metricsListenToken: if let metricsListenFD { acceptAll(from: metricsListenFD, web: true, metricsOnly: true) }
                case Epoll.wakeToken:
                    epoll.drainWake()
                    if let directory {
                        for (id, answer) in directory.takeAnswers() {
                            apply(core.directoryAnswered(id, answer, now: now, wallClock: wallClock))
                        }
                        apply(core.clusterEvents(directory.takeEvents()))
                    }
                default:
                    guard let connection = connections[event.token] else { continue }
                    if event.readable, firstByteDeadlines[connection.id] != nil, connection.hasBytesWaiting {
                        firstByteDeadlines[connection.id] = nil
                    }
                    if event.writable { flush(connection) }
                    if event.readable { read(connection, buffer: &buffer) }
                    // TLS may need the other direction to progress.
                    if connection.tls != nil, !connection.isClosed, !connection.output.isEmpty { flush(connection) }
                    if handshakes[connection.id] != nil, connection.isClosed || connection.tls?.isEstablished == true {
                        releaseHandshake(connection.id)
                    }
                }
            }
            enforceDeadlines()
            if now >= nextTick {
                apply(core.tick(now: now, wallClock: wallClock))
                nextTick = now + .seconds(1)
            }
            if directory != nil, now >= nextRenewal {
                apply(core.renewSeats(now: now, every: renewal))
                nextRenewal = now + .milliseconds(50)
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
        for fd in [listenFD, webListenFD, metricsListenFD].compactMap({ $0 }) {
            epoll.remove(fd)
            close(fd)
        }
        listenerClosed = true
        directory?.stop()
    }

    private var wallClock: Int64 { Int64(WallClock.unixSeconds) }

    /// Drops connections past their deadline: no first byte in time, a TLS handshake that did
    /// not finish, a metrics request that did not.
    private func enforceDeadlines() {
        let at = now
        guard at >= nextDeadlineCheck else { return }
        nextDeadlineCheck = at + .milliseconds(100)
        for (id, deadline) in firstByteDeadlines where at >= deadline {
            firstByteDeadlines[id] = nil
            refusals.firstByteTimeouts += 1
            drop(id, reason: "no byte within \(configuration.limits.firstByteTimeout)")
        }
        for (id, handshake) in handshakes where at >= handshake.deadline {
            refusals.handshakeTimeouts += 1
            drop(id, reason: "no TLS handshake within \(configuration.limits.tlsHandshakeTimeout)")
        }
        for (id, deadline) in metricsDeadlines where at >= deadline {
            metricsDeadlines[id] = nil
            drop(id, reason: "the metrics request took over \(configuration.limits.metricsTimeout)")
        }
    }

    /// A slot for a TLS handshake from `address`. An address block holds at most
    /// `maxHandshakesPerAddress`; when all `maxTLSHandshakes` are taken, the block that holds the
    /// most gives up its oldest to a block that holds fewer, so that a host holding idle
    /// connections cannot keep a client elsewhere from being served (it gets a reset instead).
    private func takeHandshakeSlot(_ id: UInt64, address: String) -> Bool {
        let limits = configuration.limits
        let mine = handshakesPerAddress[address, default: 0]
        guard mine < limits.maxHandshakesPerAddress else {
            refusals.handshakeSlots += 1
            return false
        }
        if handshakes.count >= limits.maxTLSHandshakes {
            guard let (fullest, held) = handshakesPerAddress.max(by: { $0.value < $1.value }), held > mine + 1,
                  let oldest = handshakes.filter({ $0.value.address == fullest }).min(by: { $0.value.began < $1.value.began })?.key else {
                refusals.handshakeSlots += 1
                return false
            }
            refusals.handshakesEvicted += 1
            drop(oldest, reason: "its handshake slot went to a connection from another address")
        }
        handshakes[id] = Handshake(deadline: now + limits.tlsHandshakeTimeout, address: address, began: now)
        handshakesPerAddress[address, default: 0] += 1
        return true
    }

    private func releaseHandshake(_ id: UInt64) {
        guard let handshake = handshakes.removeValue(forKey: id) else { return }
        handshakesPerAddress[handshake.address, default: 1] -= 1
        if handshakesPerAddress[handshake.address] == 0 { handshakesPerAddress[handshake.address] = nil }
    }

    /// Accepts what waits on a listener: signaling lines on the main one, HTTP on the web one.
    /// Nothing here waits for the client: a connection its address may not open now (too many
    /// of its own unauthenticated, or no fair handshake slot) is closed at once, a TLS one
    /// without a word (no word could reach it before a handshake), and a handshake runs only
    /// as the client's bytes come.
    private func acceptAll(from listener: Int32, web: Bool, metricsOnly: Bool = false) {
        while true {
            let fd = clinux_accept4(listener, Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue))
            if fd < 0 {
                let code = errno
                if code == EINTR || code == ECONNABORTED { continue }
                if (code == EMFILE || code == ENFILE) && refuseForDescriptors(on: listener) { continue }
                return
            }
            TCPSocket.setNoDelay(fd)
            let id = nextID
            nextID += 1
            let address = TCPSocket.peerAddress(fd).map(AddressBlock.of)
            let secure = configuration.tls != nil && !metricsOnly
            let opened = core.connectionOpened(id, now: now, address: address)
            if secure, opened.contains(.close(id)) {
                refusals.addressLimit += 1
                TCPSocket.reset(fd)
                continue
            }
            if secure, !takeHandshakeSlot(id, address: address ?? "unknown") {
                apply(core.connectionClosed(id, now: now))
                TCPSocket.reset(fd)
                continue
            }
            var tls: TLSSession?
            if let context = configuration.tls, !metricsOnly {
                do { tls = try TLSSession(context: context, fd: fd) } catch {
                    log(.warning("\(error)"))
                    releaseHandshake(id)
                    apply(core.connectionClosed(id, now: now))
                    close(fd)
                    continue
                }
            }
            let connection = ServerConnection(id: id, fd: fd, tls: tls, maxLineLength: configuration.limits.maxLineLength, web: web)
            connection.metricsOnly = metricsOnly
            connections[id] = connection
            do { try epoll.add(fd, token: id, writable: false) } catch {
                log(.warning("\(error)"))
                connections[id] = nil
                releaseHandshake(id)
                connection.closeNow()
                apply(core.connectionClosed(id, now: now))
                continue
            }
            if metricsOnly { metricsDeadlines[id] = now + configuration.limits.metricsTimeout } else { firstByteDeadlines[id] = now + configuration.limits.firstByteTimeout }
            // A plaintext refusal is written (the socket takes it at once) and the connection closes.
            apply(opened)
        }
    }

    /// No descriptor is left for a waiting connection: the reserve makes room to accept it and
    /// close it at once, so it is answered (a reset) rather than left to wake the loop again.
    /// False when that is not possible either.
    private func refuseForDescriptors(on listener: Int32) -> Bool {
        guard reserveFD >= 0 else { return false }
        close(reserveFD)
        let fd = clinux_accept4(listener, Int32(SOCK_CLOEXEC.rawValue))
        if fd >= 0 { close(fd) }
        reserveFD = open("/dev/null", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        refusals.noDescriptor += 1
        // One line per power of two, so a flood cannot fill the log.
        let count = refusals.noDescriptor
        if count & (count - 1) == 0 {
            log(.error("accept: no file descriptor left (EMFILE); \(count) connections turned away so far; raise LimitNOFILE"))
        }
        return true
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
            case .wouldBlock, .needsRead: return
            case .closed:
                drop(connection.id, reason: "peer closed")
                return
            case .bytes(let count):
                received(buffer[0..<count], on: connection)
            }
        }
    }

    /// Bytes from a connection, in whatever it speaks now: lines, an HTTP request, or WebSocket frames.
    private func received(_ bytes: ArraySlice<UInt8>, on connection: ServerConnection) {
        switch connection.mode {
        case .lines:
            let lines: [[UInt8]]
            do { lines = try connection.framer.append(bytes) } catch {
                apply(core.lineTooLong(connection.id))
                return
            }
            deliver(lines, from: connection)
        case .httpRequest(var reader):
            let result: (HTTPRequestHead, [UInt8])?
            do { result = try reader.append(bytes) } catch {
                respond(connection, HTTPResponse.text(status: error.status, error.description))
                return
            }
            connection.mode = .httpRequest(reader)
            guard let (head, rest) = result else { return }
            route(head, on: connection)
            if case .webSocket = connection.mode, !rest.isEmpty { received(rest[...], on: connection) }
            if case .httpBody = connection.mode { received(rest[...], on: connection) }
        case .httpBody(let head, var body, let length):
            body += bytes
            guard body.count >= length else {
                connection.mode = .httpBody(head, body, length)
                return
            }
            connection.mode = .awaitingReply
            webRTCHTTP(head, body: Array(body.prefix(length)), on: connection)
        case .awaitingReply:
            return
        case .webSocket(var reader):
            let events: [WebSocketEvent]
            do { events = try reader.append(bytes) } catch {
                connection.mode = .webSocket(reader)
                if error.code == .tooBig {
                    // The same error a line over the limit gets, then the close frame that says why.
                    apply(core.lineTooLong(connection.id).filter { if case .send = $0 { return true }; return false })
                }
                closeWebSocket(connection, error.code, reason: error.description)
                return
            }
            connection.mode = .webSocket(reader)
            var lines: [[UInt8]] = []
            for event in events {
                switch event {
                case .text(let message): lines.append(message)
                case .ping(let payload):
                    guard connection.spendControlFrame(now: now, limits: configuration.limits) else {
                        closeWebSocket(connection, .policyViolation, reason: "more than \(Int(configuration.limits.messagesPerSecond)) control frames per second")
                        return
                    }
                    queue(WebSocket.frame(.pong, payload), on: connection)
                case .pong:
                    guard connection.spendControlFrame(now: now, limits: configuration.limits) else {
                        closeWebSocket(connection, .policyViolation, reason: "more than \(Int(configuration.limits.messagesPerSecond)) control frames per second")
                        return
                    }
                case .close:
                    closeWebSocket(connection, .normal, reason: "")
                    return
                }
            }
            deliver(lines, from: connection)
        }
    }

    private func deliver(_ lines: [[UInt8]], from connection: ServerConnection) {
        let wall = wallClock
        for line in lines {
            let (relayedBefore, started) = (core.counters.relayed, clock.now)
            apply(core.received(line, from: connection.id, now: now, wallClock: wall))
            if core.counters.relayed > relayedBefore { metrics.relayed(seconds: (clock.now - started).inSeconds) }
            if connection.isClosed || connection.closeWhenFlushed { return }
        }
    }

    /// Answers one request on the web side: the page, its script, or the WebSocket upgrade.
    private func route(_ head: HTTPRequestHead, on connection: ServerConnection) {
        if !connection.metricsOnly, WebRTCHTTPRequest.route(head.path) != nil {
            startWebRTCHTTP(head, on: connection)
            return
        }
        guard head.method == "GET" else {
            respond(connection, HTTPResponse.text(status: 405, "only GET", fields: [("Allow", "GET")]))
            return
        }
        guard connection.metricsOnly || access.serves(host: head.field("host")) else {
            respond(connection, HTTPResponse.text(status: 421, "this service does not answer for Host \(head.field("host")?.prefix(128) ?? "(none)"): use its address, a name of its certificate, or one given with --allowed-host"))
            return
        }
        if connection.metricsOnly {
            guard head.path == "/metrics" else {
                respond(connection, HTTPResponse.text(status: 404, "not found: the metrics are at /metrics"))
                return
            }
            // The scrape itself is one of the connections it counts.
            let text = metrics.render(connections: core.connectionCount, rooms: core.roomCount, counters: core.counters, refusals: refusals,
                                      directory: directory.map { ServerMetrics.Directory(healthy: $0.isHealthy, counters: $0.counters) },
                                      certificateNotAfter: configuration.tls?.certificateNotAfter)
            respond(connection, HTTPResponse.make(status: 200, body: Array(text.utf8), contentType: "text/plain; version=0.0.4; charset=utf-8"))
            return
        }
        switch head.path {
        case "/", "/index.html":
            respond(connection, HTTPResponse.make(status: 200, fields: WebPage.securityFields, body: WebPage.html, contentType: "text/html; charset=utf-8"))
        case "/app.js":
            respond(connection, HTTPResponse.make(status: 200, fields: WebPage.securityFields, body: WebPage.script, contentType: "text/javascript; charset=utf-8"))
        case "/ws":
            guard head.field("upgrade", contains: "websocket"), head.field("connection", contains: "upgrade") else {
                respond(connection, HTTPResponse.text(status: 426, "/ws speaks WebSocket (RFC 6455): send Upgrade: websocket", fields: [("Upgrade", "websocket")]))
                return
            }
            guard head.field("sec-websocket-version") == "13" else {
                respond(connection, HTTPResponse.text(status: 426, "WebSocket version 13 only", fields: [("Sec-WebSocket-Version", "13")]))
                return
            }
            guard let key = head.field("sec-websocket-key"), WebSocket.isValidKey(key) else {
                respond(connection, HTTPResponse.text(status: 400, "Sec-WebSocket-Key must be 16 bytes in base64"))
                return
            }
            // A page from another site must not join rooms with the tokens it holds (cross-site
            // WebSocket hijacking): browsers say which page opens the socket.
            guard access.allows(origin: head.field("origin"), host: head.field("host") ?? "") else {
                respond(connection, HTTPResponse.text(status: 403, "a page from \(head.field("origin")?.prefix(128) ?? "") may not open /ws here; allow it with --allowed-origin"))
                return
            }
            connection.mode = .webSocket(WebSocketReader(maxMessageLength: configuration.limits.maxLineLength))
            queue(HTTPResponse.make(status: 101, fields: [("Upgrade", "websocket"), ("Connection", "Upgrade"),
                                                          ("Sec-WebSocket-Accept", WebSocket.acceptValue(forKey: key))]), on: connection)
        default:
            respond(connection, HTTPResponse.text(status: 404, "not found: the page is at /, the signaling WebSocket at /ws"))
        }
    }

    /// The most a WHIP/WHEP body may hold: an SDP offer with many candidates is a few kB, and
    /// the offer must fit, escaped in JSON, in one signaling line to the endpoint (64 KiB).
    static let maxWebRTCHTTPBody = 30 * 1024

    /// A WHIP/WHEP request's head: CORS preflights are answered here; the rest read their body.
    private func startWebRTCHTTP(_ head: HTTPRequestHead, on connection: ServerConnection) {
        connection.webRTCHTTPRequest = "\(head.method) \(head.path.prefix(200))"
        guard access.serves(host: head.field("host")) else {
            respond(connection, HTTPResponse.text(status: 421, "this service does not answer for Host \(head.field("host")?.prefix(128) ?? "(none)")"))
            return
        }
        // A page from a site not allowed may not use a viewer's token here (its browser sends Origin).
        if let origin = head.field("origin") {
            guard access.allows(origin: origin, host: head.field("host") ?? "") else {
                respond(connection, HTTPResponse.text(status: 403, "a page from \(origin.prefix(128)) may not use WHIP/WHEP here; allow it with --allowed-origin"))
                return
            }
            connection.corsOrigin = origin
        }
        if head.method == "OPTIONS" {
            let methods = WebRTCHTTPRequest.route(head.path)?.session == nil ? "POST, OPTIONS" : "PATCH, DELETE, OPTIONS"
            var fields: [(String, String)] = [("Allow", methods), ("Accept-Post", "application/sdp"), ("Accept-Patch", ICEFragment.contentType)]
            if connection.corsOrigin != nil {
                fields += [("Access-Control-Allow-Methods", methods), ("Access-Control-Allow-Headers", "Authorization, Content-Type, If-Match"),
                           ("Access-Control-Max-Age", "600")]
            }
            respond(connection, HTTPResponse.make(status: 204, fields: fields + corsFields(connection)))
            return
        }
        guard head.field("transfer-encoding") == nil else {
            respond(connection, HTTPResponse.text(status: 411, "send the body with a Content-Length"))
            return
        }
        // One Content-Length of digits only (RFC 9110 §8.6): two, a list, a sign or anything else
        // is refused, not guessed at (a body read by the wrong length smuggles the next request).
        let length: Int
        switch head.contentLength {
        case .none: length = 0
        case .invalid:
            respond(connection, HTTPResponse.text(status: 400, "a Content-Length is one number of digits"))
            return
        case .length(let n): length = n
        }
        let limit = head.method == "PATCH" ? SignalingServerCore.maxPatchBody : Self.maxWebRTCHTTPBody
        guard length <= limit else {
            respond(connection, HTTPResponse.text(status: 413, "a \(head.method) body is limited to \(limit) bytes"))
            return
        }
        connection.mode = .httpBody(head, [], length)
    }

    /// A whole WHIP/WHEP request: to the core, which answers now or once the endpoint has.
    private func webRTCHTTP(_ head: HTTPRequestHead, body: [UInt8], on connection: ServerConnection) {
        guard let route = WebRTCHTTPRequest.route(head.path) else { return }
        guard let text = String(validating: body, as: UTF8.self) else {
            respond(connection, HTTPResponse.text(status: 400, "the body is not UTF-8"))
            return
        }
        let authorization = head.field("authorization") ?? ""
        let token = authorization.lowercased().hasPrefix("bearer ") ? String(authorization.dropFirst(7)).trimmed() : nil
        let request = WebRTCHTTPRequest(method: head.method, kind: route.kind, room: route.room, session: route.session, bearerToken: token,
                                        contentType: head.field("content-type"), ifMatch: head.field("if-match"), body: text)
        apply(core.webRTCHTTP(connection.id, request, now: now, wallClock: wallClock))
    }

    /// CORS fields for a browser's WHIP/WHEP request from an allowed origin: the answer's fields it may read.
    private func corsFields(_ connection: ServerConnection) -> [(String, String)] {
        guard let origin = connection.corsOrigin else { return [] }
        return [("Access-Control-Allow-Origin", origin), ("Vary", "Origin"),
                ("Access-Control-Expose-Headers", "Location, ETag, Link, Accept-Patch, Retry-After")]
    }

    /// Sends a whole HTTP response, then closes.
    private func respond(_ connection: ServerConnection, _ response: [UInt8]) {
        connection.mode = .lines  // nothing more is read as HTTP
        connection.closeWhenFlushed = true
        queue(response, on: connection)
    }

    private func closeWebSocket(_ connection: ServerConnection, _ code: WebSocket.CloseCode, reason: String) {
        guard !connection.closeWhenFlushed else { return }
        connection.closeWhenFlushed = true
        queue(WebSocket.closeFrame(code, reason: reason), on: connection)
    }

    /// Queues bytes for a connection and writes what the socket takes now.
    private func queue(_ bytes: [UInt8], on connection: ServerConnection) {
        guard !connection.isClosed else { return }
        connection.output.append(contentsOf: bytes)
        if connection.output.count > configuration.maxPendingOutput {
            drop(connection.id, reason: "more than \(configuration.maxPendingOutput) bytes waiting to be sent")
            return
        }
        flush(connection)
    }

    private func apply(_ actions: [SignalingServerCore.Action]) {
        for action in actions {
            switch action {
            case .send(let id, let message):
                guard let connection = connections[id], !connection.isClosed else { continue }
                switch connection.mode {
                case .lines: queue(message.serialized(), on: connection)
                case .webSocket: queue(WebSocket.frame(.text, message.serialized().dropLast()), on: connection)
                case .httpRequest, .httpBody, .awaitingReply:
                    // Before the upgrade, the service's refusals (full, too many from one address,
                    // no request in time) are HTTP responses.
                    if case .error(let code, let text, _) = message {
                        respond(connection, HTTPResponse.text(status: code == .joinTimeout ? 408 : 503, "\(code.rawValue): \(text)"))
                    }
                }
            case .close(let id):
                guard let connection = connections[id] else { continue }
                if case .webSocket = connection.mode {
                    closeWebSocket(connection, .normal, reason: "")
                } else {
                    connection.closeWhenFlushed = true
                }
                if connection.output.isEmpty { drop(id, reason: "closed by server") }
            case .directory(let request):
                directory?.submit(request)
            case .respond(let id, let reply):
                guard let connection = connections[id], !connection.isClosed else { continue }
                log("http: \(connection.webRTCHTTPRequest ?? "?") -> \(reply.status)\(reply.status >= 400 ? ": \(reply.body.prefix(200))" : "")")
                respond(connection, HTTPResponse.make(status: reply.status, fields: reply.fields + corsFields(connection), body: Array(reply.body.utf8),
                                                      contentType: reply.contentType))
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
            case .needsRead:
                // TLS waits for the client's bytes (its handshake): the next readable event
                // flushes again. Waiting for writable here would spin: the socket always is.
                if connection.wantsWrite {
                    connection.wantsWrite = false
                    try? epoll.modify(connection.fd, token: connection.id, writable: false)
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
        releaseHandshake(id)
        firstByteDeadlines[id] = nil
        metricsDeadlines[id] = nil
        epoll.remove(connection.fd)
        connection.closeNow()
        apply(core.connectionClosed(id, now: now))
    }

    /// Connections and rooms right now, read on the loop thread's behalf (approximate from others).
    public var statistics: (connections: Int, rooms: Int) { (core.connectionCount, core.roomCount) }
}

/// One accepted connection: its descriptor (closed by `closeNow`), TLS session, framer and output.
final class ServerConnection {
    let id: UInt64
    let fd: Int32
    let tls: TLSSession?
    var framer: LineFramer
    /// What the connection speaks: signaling lines; on the web side, an HTTP request first, then
    /// WebSocket frames after an upgrade.
    enum Mode {
        case lines
        case httpRequest(HTTPRequestHead.Reader)
        /// The body of a WHIP/WHEP request: its head, what came of the body so far, its length.
        case httpBody(HTTPRequestHead, [UInt8], Int)
        /// A WHIP/WHEP request handed to the core, whose answer comes as `.respond`.
        case awaitingReply
        case webSocket(WebSocketReader)
    }
    var mode: Mode
    /// Accepted on the metrics listener: only GET /metrics is answered.
    var metricsOnly = false
    /// The Origin of a browser's WHIP/WHEP request that may read the answer (CORS).
    var corsOrigin: String?
    /// "METHOD /path" of a WHIP/WHEP request, for the log line of its answer.
    var webRTCHTTPRequest: String?
    /// WebSocket pings and pongs, limited like messages (token bucket, refilled by time).
    private var controlTokens: Double?
    private var controlRefill: Duration = .zero
    var output: [UInt8] = []
    var wantsWrite = false
    var closeWhenFlushed = false
    private(set) var isClosed = false

    init(id: UInt64, fd: Int32, tls: TLSSession?, maxLineLength: Int, web: Bool) {
        self.id = id
        self.fd = fd
        self.tls = tls
        self.framer = LineFramer(maxLineLength: maxLineLength)
        self.mode = web ? .httpRequest(HTTPRequestHead.Reader()) : .lines
    }

    /// Spends one control frame of the budget; false when a client sends them faster than messages may come.
    func spendControlFrame(now: Duration, limits: ServerLimits) -> Bool {
        var tokens = controlTokens ?? limits.messageBurst
        tokens = min(limits.messageBurst, tokens + (now - controlRefill).inSeconds * limits.messagesPerSecond)
        controlRefill = now
        guard tokens >= 1 else { return false }
        controlTokens = tokens - 1
        return true
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

    /// Whether the client has sent bytes not read yet (TLS or not): its first byte came.
    var hasBytesWaiting: Bool {
        var byte: UInt8 = 0
        return recv(fd, &byte, 1, Int32(MSG_PEEK) | Int32(MSG_DONTWAIT)) > 0
    }

    func closeNow() {
        guard !isClosed else { return }
        isClosed = true
        tls?.shutdown()
        close(fd)
    }
}
