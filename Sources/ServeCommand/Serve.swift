import Dispatch
import FoundationEssentials
import Platform
import CLIKit
import ICEServers
import Signaling
#if canImport(Glibc)
import Glibc
import SignalingService
#endif

/// `callend serve`, in a module of its own: the `callend-serve` executable links this and the
/// signaling service only (no codec, device or media transport library is mapped), and `callend
/// serve` runs it; `callend` itself links it too, as the fallback when `callend-serve` is not
/// installed beside it.

public let serveHelp = """
    usage: callend serve --listen HOST:PORT (--secret-file F | CALLEND_SECRET=...) [--tls-cert C --tls-key K | --insecure-plaintext]
                         [--max-participants N] [--max-connections N] [--max-connections-per-address N]
                         [--max-pending-per-address N] [--issuer ISS] [--max-token-lifetime D] [--seat-grace D]
                         [--max-sessions-per-identity N] [--max-session-lifetime D] [--first-byte-timeout D]
                         [--ice-server URL]... [--turn-secret-file F] [--turn-ttl D]
                         [--http HOST:PORT [--allowed-origin ORIGIN]... [--allowed-host NAME]...] [--metrics HOST:PORT]
                         [--redis redis[s]://[USER@]HOST:PORT[/DB] [--redis-password-file F] [--redis-ca-file F] [--redis-lease D]]
                         [--log-level L] [--config F [--check]] | --version

    Runs the signaling service: participants join rooms with tokens minted by 'callend token' (or
    any HS256 JWT library) and exchange offer/answer/candidate/bye messages (docs/signaling.md).
    The secret is read from the file, or from the CALLEND_SECRET environment variable; it is never
    printed or logged. Stops cleanly on SIGINT or SIGTERM.

      --listen HOST:PORT      address to listen on (port 0 picks a free port; the line
                              'listening on HOST:PORT' on standard output says which)
      --secret-file F         file holding the HS256 secret (at least 32 bytes)
      --tls-cert C --tls-key K  serve TLS with this PEM certificate chain and key ('callend tls --host
                              NAME --out DIR' makes them, and the CA file endpoints trust)
      --insecure-plaintext    listen in plain TCP on an address other than loopback. Without TLS,
                              tokens, TURN passwords and the DTLS fingerprints of calls cross the
                              network readable and rewritable: whoever is on the path can take a
                              call over. Plain TCP on loopback needs no flag
      --max-participants N    participants per room (default 2: a peer-to-peer call)
      --max-connections N     connections in total (default 20000)
      --max-connections-per-address N  connections from one IP address, or one IPv6 /64 (default 1000)
      --max-pending-per-address N  of those, connections that have not joined yet (default 32)
      --first-byte-timeout D  how long a new connection may wait before its first byte (default 3s;
                              a TLS ClientHello, a request line, a join: clients send at once)
      --issuer ISS            accept only tokens whose iss claim is ISS
      --max-token-lifetime D  the longest a renewed credential lives (default 24h): a participant's
                              renewals live what its token had left when it joined, at most this
      --seat-grace D          how long a seat waits for its participant after the connection is
                              lost (default 60s): within it, the participant's token or the seat's
                              renewal takes it back; after it, a renewal is refused
      --max-sessions-per-identity N  WHIP/WHEP sessions one identity holds at once, in every room
                              together (default 4): past it, a POST gets 429
      --max-session-lifetime D  the longest a WHIP/WHEP session lives (default 24h), however long
                              its token does (it ends with its token, too)
      --ice-server URL        a STUN or TURN server handed to every participant in 'joined'
                              (stun:HOST:PORT, turn:HOST:PORT?transport=udp|tcp; repeatable)
      --turn-secret-file F    the secret shared with the TURN server (coturn's static-auth-secret):
                              each participant gets its own credential, username EXPIRY:IDENTITY,
                              password base64(HMAC-SHA1(secret, username)) (coturn use-auth-secret)
      --turn-ttl D            how long a TURN credential lasts at most (default 24h); never longer
                              than the participant's credential (each renewal brings a new one).
                              The username is EXPIRY:ROOM:IDENTITY
      --http HOST:PORT        also serve the web side: a page at / that joins a room from a
                              browser (open /?room=ROOM&token=TOKEN) and the same protocol over
                              WebSocket at /ws (one JSON message per text frame); HTTPS and WSS
                              with --tls-cert/--tls-key. Browsers give a page their camera and
                              microphone only over HTTPS or on localhost; elsewhere it receives only.
                              The line 'web page at URL' on standard output says where.
                              It also takes WHIP and WHEP (RFC 9725): POST /whip/ROOM publishes
                              into ROOM (its endpoint takes the publisher as its peer), POST
                              /whep/ROOM watches ROOM's endpoint; the bearer token is a token for
                              ROOM; the answer comes from the endpoint, with Location, ETag and the
                              ICE servers (per-session TURN credentials) in Link fields; PATCH
                              (trickle, ICE restart) and DELETE on the session; OPTIONS and CORS
      --allowed-origin ORIGIN a page at ORIGIN (https://app.example.org) may open /ws and use WHIP
                              and WHEP (a WHEP player on another site); by default
                              only the service's own page may (browsers send Origin; other
                              clients send none and are let in). Repeatable
      --allowed-host NAME     answer requests for Host NAME; by default IP addresses, localhost and
                              the DNS names of the TLS certificate (a name of another site that
                              resolves here is refused: DNS rebinding). Repeatable
      --metrics HOST:PORT     Prometheus metrics at http://HOST:PORT/metrics (plain HTTP, no
                              token: bind it to an address only the monitoring reaches):
                              connections, rooms, joins, errors sent by code (refused joins
                              among them), messages relayed and a histogram of relay times
                              (with --redis, also Redis's health; with --tls-cert, when the
                              certificate ends)
      --redis URL             share rooms with every other node given the same Redis: two
                              participants of a room may be on different nodes; the room limit
                              holds across nodes, and a client that moves to another node (join
                              --server A,B) keeps its seat. Without it the rooms are this node's own.
                              rediss:// reaches Redis over TLS (its certificate's name checked), and
                              USER@ logs in as that ACL user. What nodes tell each other through
                              Redis is sealed with a key derived from the token secret, which Redis
                              never sees: a client of Redis cannot pass for a node
      --redis-password-file F the password Redis asks for (AUTH), kept off the command line
      --redis-ca-file F       the CAs (PEM) that sign Redis's certificate, with rediss:// (default:
                              the system's)
      --redis-lease D         how long a node that dies keeps its participants' seats (default 5s;
                              they leave, reason "timeout", after it unless they rejoin elsewhere)
      --log-level L           error, warning, info (default) or debug; lines go to standard error
                              with the time (UTC) and the level, or under systemd with the priority
                              journald files them by (journalctl -p warning)
    \(configHelp(file: "/etc/callend/serve.conf", column: 26))
    """


/// Redis could not be reached at start: not a usage error (exit 1), and systemd restarts the node.
public struct DirectoryUnreachable: Error, CustomStringConvertible {
    public let description: String
}

public func runServe(_ args: inout Arguments) throws {
    if args.flag("--help") || args.flag("-h") { print(serveHelp); return }
    if args.flag("--version") {
        try args.finish(command: "serve --version")
        print("callend-serve \(callendVersion)")
        return
    }
    _ = try args.applyConfig()
    let check = args.flag("--check")
    guard let listen = try args.value("--listen") else { throw UsageError(description: "serve needs --listen HOST:PORT") }
    let (host, port) = try parseHostPort(listen, option: "--listen")
    let certificate = try args.value("--tls-cert"), key = try args.value("--tls-key")
    guard (certificate == nil) == (key == nil) else { throw UsageError(description: "--tls-cert and --tls-key go together") }
    let participants = try args.integer("--max-participants", in: 2...1000)
    let connections = try args.integer("--max-connections", in: 1...1_000_000)
    let perAddress = try args.integer("--max-connections-per-address", in: 1...1_000_000)
    let issuer = try args.value("--issuer")
    let iceURLs = try args.values("--ice-server")
    let turnSecretFile = try args.value("--turn-secret-file")
    var turnTTL: Int64?
    if let text = try args.value("--turn-ttl") { turnTTL = try parseDuration(text, option: "--turn-ttl") }
    let web = try args.value("--http").map { text throws(UsageError) in try parseHostPort(text, option: "--http") }
    let allowedOrigins = try args.values("--allowed-origin"), allowedHosts = try args.values("--allowed-host")
    for origin in allowedOrigins where WebAccessPolicy.normalizedOrigin(origin) == nil {
        throw UsageError(description: "--allowed-origin takes an origin such as https://app.example.org (scheme://host[:port]), not '\(origin)'")
    }
    if web == nil && !(allowedOrigins.isEmpty && allowedHosts.isEmpty) {
        throw UsageError(description: "--allowed-origin and --allowed-host apply to the web side: give --http HOST:PORT")
    }
    let insecurePlaintext = args.flag("--insecure-plaintext")
    let pendingPerAddress = try args.integer("--max-pending-per-address", in: 1...1_000_000)
    let maxTokenLifetime = try args.value("--max-token-lifetime").map { text throws(UsageError) in try parseDuration(text, option: "--max-token-lifetime") }
    let seatGrace = try args.value("--seat-grace").map { text throws(UsageError) in try parseDuration(text, option: "--seat-grace") }
    let sessionsPerIdentity = try args.integer("--max-sessions-per-identity", in: 1...256)
    let firstByte = try args.value("--first-byte-timeout").map { text throws(UsageError) in try parseDuration(text, option: "--first-byte-timeout") }
    let sessionLifetime = try args.value("--max-session-lifetime").map { text throws(UsageError) in try parseDuration(text, option: "--max-session-lifetime") }
    let metrics = try args.value("--metrics").map { text throws(UsageError) in try parseHostPort(text, option: "--metrics") }
    let logger = try logWriter(program: "callend serve", &args)
    var redis = try args.value("--redis").map { text throws(UsageError) in
        do { return try RedisAddress(url: text) } catch { throw UsageError(description: "--redis: \(error)") }
    }
    if let file = try args.value("--redis-password-file") {
        guard redis != nil else { throw UsageError(description: "--redis-password-file needs --redis") }
        guard let text = try? String(contentsOfFile: file, encoding: .utf8), !text.trimmed(newlines: true).isEmpty else {
            throw UsageError(description: "cannot read a password from --redis-password-file \(file)")
        }
        redis?.password = text.trimmed(newlines: true)
    }
    if let file = try args.value("--redis-ca-file") {
        guard redis?.tls == true else { throw UsageError(description: "--redis-ca-file goes with --redis rediss://...") }
        guard FileManager.default.isReadableFile(atPath: file) else { throw UsageError(description: "cannot read --redis-ca-file \(file)") }
        redis?.caFile = file
    }
    var redisLease: Int64?
    if let text = try args.value("--redis-lease") {
        guard redis != nil else { throw UsageError(description: "--redis-lease needs --redis") }
        redisLease = try parseDuration(text, option: "--redis-lease")
        guard (1...3600).contains(redisLease!) else { throw UsageError(description: "--redis-lease: 1s to 1h") }
    }
    let secret = try loadSecret(&args)
    try args.finish(command: "serve")
    if certificate != nil && insecurePlaintext { throw UsageError(description: "--insecure-plaintext and --tls-cert are alternatives; give one") }
    // Redis holds every seat and carries every relayed offer: in plain TCP only on loopback,
    // unless told so, as the service's own listeners.
    if let redis, !redis.tls, !insecurePlaintext, !PlaintextPolicy.isLoopback(host: redis.host) {
        throw UsageError(description: PlaintextPolicy.refusal("serve --redis \(redis)") + " (or use rediss://)")
    }
    if certificate == nil && !insecurePlaintext {
        for (option, address) in [("--listen", (host, port)), ("--http", web)] {
            guard let address, !PlaintextPolicy.isLoopback(host: address.host) else { continue }
            throw UsageError(description: PlaintextPolicy.refusal("serve \(option) \(address.host):\(address.port)"))
        }
    }
    var policy = ICEServerPolicy()
    for url in iceURLs {
        do {
            if case .turn = try ICEServer(url: url).kind { policy.turnURLs.append(url) } else { policy.stunURLs.append(url) }
        } catch {
            throw UsageError(description: error.description)
        }
    }
    if let turnSecretFile {
        guard let text = try? String(contentsOfFile: turnSecretFile, encoding: .utf8), !text.trimmed(newlines: true).isEmpty else {
            throw UsageError(description: "cannot read a TURN secret from --turn-secret-file \(turnSecretFile)")
        }
        policy.turnSecret = Array(text.trimmed(newlines: true).utf8)
    }
    if !policy.turnURLs.isEmpty && policy.turnSecret == nil {
        throw UsageError(description: "TURN servers given with --ice-server need --turn-secret-file (the secret coturn checks credentials with)")
    }
    if let turnTTL { policy.credentialLifetime = turnTTL }
    if check {
        printCheckedSettings(command: "serve", args, subject: "listening on \(host):\(port)")
        return
    }

    raiseFileLimit()
    var configuration = SignalingServerConfiguration(host: host, port: port, secret: secret)
    if let certificate, let key { configuration.tls = try TLSContext(certificateFile: certificate, privateKeyFile: key) }
    if let participants { configuration.limits.maxParticipantsPerRoom = participants }
    if let connections { configuration.limits.maxConnections = connections }
    if let perAddress { configuration.limits.maxConnectionsPerAddress = perAddress }
    if let pendingPerAddress { configuration.limits.maxPendingPerAddress = pendingPerAddress }
    if let maxTokenLifetime { configuration.limits.maxTokenLifetime = maxTokenLifetime }
    if let seatGrace { configuration.limits.seatGrace = .seconds(seatGrace) }
    if let sessionsPerIdentity { configuration.limits.maxSessionsPerIdentity = sessionsPerIdentity }
    if let firstByte { configuration.limits.firstByteTimeout = .seconds(firstByte) }
    if let sessionLifetime { configuration.limits.maxSessionLifetime = sessionLifetime }
    configuration.insecurePlaintext = insecurePlaintext
    configuration.allowedOrigins = allowedOrigins
    configuration.allowedHosts = allowedHosts
    configuration.requiredIssuer = issuer
    if !iceURLs.isEmpty { configuration.iceServers = policy }
    configuration.web = web
    configuration.metrics = metrics
    configuration.redis = redis
    if let redisLease { configuration.redisLease = .seconds(redisLease) }
    let server: SignalingServer
    do {
        server = try SignalingServer(configuration: configuration) { logger.write($0) }
    } catch let error as RedisError {
        throw DirectoryUnreachable(description: "cannot use the room directory: \(error)")
    }
    // Signal handling is in place before the port is announced, so a parent that reads the
    // line and at once sends SIGTERM is always obeyed.
    onTerminationSignals {
        server.stop()
        exit(ExitCode.success.rawValue)
    }
    print("listening on \(host):\(server.port) (\(certificate == nil ? "plain TCP" : "TLS"))")
    if certificate == nil && insecurePlaintext && !PlaintextPolicy.isLoopback(host: host) {
        logger.write(.warning("plain TCP on \(host) (--insecure-plaintext): tokens, TURN passwords and DTLS fingerprints cross the network in the clear"))
    }
    if let web, let webPort = server.webPort {
        let shown = web.host.contains(":") ? "[\(web.host)]" : web.host
        print("web page at \(certificate == nil ? "http" : "https")://\(shown):\(webPort)/ (signaling WebSocket at /ws)")
    }
    if let metrics, let metricsPort = server.metricsPort {
        let shown = metrics.host.contains(":") ? "[\(metrics.host)]" : metrics.host
        print("metrics at http://\(shown):\(metricsPort)/metrics")
    }
    if let directory = server.directory {
        print("rooms shared through \(directory.address) as node \(directory.node)")
    }
    fflush(nil)  // flushes every stream; the line above must reach a parent reading our stdout
    server.start()
    // The service runs on its own threads; this one parks for good.
    let parked = DispatchSemaphore(value: 0)
    while true { parked.wait() }
}
