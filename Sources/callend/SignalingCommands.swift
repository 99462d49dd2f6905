import Benchmarks
import CallEndpoint
import Foundation
import Platform
import RTPTransport
import Signaling
#if canImport(Glibc)
import Glibc
#endif

let serveHelp = """
    usage: callend serve --listen HOST:PORT (--secret-file F | CALLEND_SECRET=...) [--tls-cert C --tls-key K | --insecure-plaintext]
                         [--max-participants N] [--max-connections N] [--max-connections-per-address N]
                         [--max-pending-per-address N] [--issuer ISS] [--max-token-lifetime D] [--seat-grace D]
                         [--ice-server URL]... [--turn-secret-file F] [--turn-ttl D]
                         [--http HOST:PORT [--allowed-origin ORIGIN]... [--allowed-host NAME]...] [--metrics HOST:PORT]
                         [--redis redis://HOST:PORT[/DB] [--redis-password-file F] [--redis-lease D]] [--log-level L]

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
      --issuer ISS            accept only tokens whose iss claim is ISS
      --max-token-lifetime D  the longest a renewed credential lives (default 24h): a participant's
                              renewals live what its token had left when it joined, at most this
      --seat-grace D          how long a seat waits for its participant after the connection is
                              lost (default 60s): within it, the participant's token or the seat's
                              renewal takes it back; after it, a renewal is refused
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
                              (with --redis, also Redis's health)
      --redis URL             share rooms with every other node given the same Redis: two
                              participants of a room may be on different nodes; the room limit
                              holds across nodes, and a client that moves to another node (join
                              --server A,B) keeps its seat. Without it the rooms are this node's own
      --redis-password-file F the password Redis asks for (AUTH), kept off the command line
      --redis-lease D         how long a node that dies keeps its participants' seats (default 5s;
                              they leave, reason "timeout", after it unless they rejoin elsewhere)
      --log-level L           error, warning, info (default) or debug; lines go to standard error
                              with the time (UTC) and the level, or under systemd with the priority
                              journald files them by (journalctl -p warning)
    """

let tokenHelp = """
    usage: callend token --room R --identity I (--secret-file F | CALLEND_SECRET=...) [--ttl 1h] [--issuer ISS]
           callend token --new-secret [--out F]

    Prints a standard JWT (HS256) on standard output: sub = identity, room = the room it grants
    ("*" for every room), iss, iat, nbf = now, exp = now + ttl. --new-secret prints a random secret
    (64 hex characters) to put in a secret file; with --out F it writes the file itself, mode 0600.

      --ttl D        lifetime: seconds, or a number with s, m, h or d (default 1h; at most 30d)
      --issuer ISS   iss claim (default callend)
    """

/// Redis could not be reached at start: not a usage error (exit 1), and systemd restarts the node.
struct DirectoryUnreachable: Error, CustomStringConvertible {
    let description: String
}

/// The log's writer for a command, with --log-level's threshold.
func logWriter(program: String, _ args: inout Arguments) throws(UsageError) -> LogWriter {
    var threshold = LogMessage.Level.info
    if let name = try args.value("--log-level") {
        guard let level = LogMessage.Level(name: name) else {
            throw UsageError(description: "--log-level: \(name) is not one of error, warning, info, debug")
        }
        threshold = level
    }
    return LogWriter(program: program, threshold: threshold)
}

/// Reads the shared secret from --secret-file or CALLEND_SECRET, never echoing it.
func loadSecret(_ args: inout Arguments) throws -> TokenSecret {
    if let path = try args.value("--secret-file") {
        do { return try TokenSecret(contentsOfFile: path) } catch { throw UsageError(description: error.message) }
    }
    if let value = ProcessInfo.processInfo.environment["CALLEND_SECRET"], !value.isEmpty {
        do { return try TokenSecret(Array(value.utf8)) } catch { throw UsageError(description: "CALLEND_SECRET: \(error.message)") }
    }
    throw UsageError(description: "no secret: give --secret-file F or set CALLEND_SECRET (make one with 'callend token --new-secret')")
}

func parseHostPort(_ text: String, option: String) throws(UsageError) -> (host: String, port: Int) {
    guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]), (0...65535).contains(port) else {
        throw UsageError(description: "\(option) takes HOST:PORT (port 0 ... 65535), not '\(text)'")
    }
    var host = String(text[..<colon])
    if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
    return (host, port)
}

func parseDuration(_ text: String, option: String = "--ttl") throws(UsageError) -> Int64 {
    let units: [Character: Int64] = ["s": 1, "m": 60, "h": 3600, "d": 86400]
    var number = Substring(text), unit: Int64 = 1
    if let last = text.last, let scale = units[last] {
        number = text.dropLast()
        unit = scale
    }
    guard let value = Int64(number), value > 0, value * unit <= 30 * 86400 else {
        throw UsageError(description: "\(option) takes a positive duration up to 30d such as 90, 15m, 1h or 7d, not '\(text)'")
    }
    return value * unit
}

/// Raises the open-file limit to the hard limit: a service or bench holding thousands of sockets needs it.
func raiseFileLimit() {
    var limit = rlimit()
    if getrlimit(RLIMIT_NOFILE_VALUE, &limit) == 0, limit.rlim_cur < limit.rlim_max {
        limit.rlim_cur = limit.rlim_max
        _ = setrlimit(RLIMIT_NOFILE_VALUE, &limit)
    }
}

#if canImport(Glibc)
let RLIMIT_NOFILE_VALUE = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
#endif

func runToken(_ args: inout Arguments) throws {
    if args.flag("--help") || args.flag("-h") { print(tokenHelp); return }
    if args.flag("--new-secret") {
        let out = try args.value("--out")
        try args.finish(command: "token")
        let secret = TokenSecret.random().printable
        if let out {
            do { try writePrivateFile(atPath: out, contents: secret + [UInt8(ascii: "\n")]) } catch {
                throw UsageError(description: "--out: \(error)")
            }
        } else {
            print(String(decoding: secret, as: UTF8.self))
        }
        return
    }
    guard let room = try args.value("--room") else { throw UsageError(description: "token needs --room R") }
    guard let identity = try args.value("--identity") else { throw UsageError(description: "token needs --identity I") }
    let ttl = try args.value("--ttl").map { text throws(UsageError) in try parseDuration(text) } ?? 3600
    let issuer = try args.value("--issuer") ?? TokenIssuer.defaultIssuer
    let secret = try loadSecret(&args)
    try args.finish(command: "token")
    guard room == "*" || SignalingServerCore.isValidRoomName(room) else {
        throw UsageError(description: "room names are 1-128 characters of A-Z a-z 0-9 . _ - (or * for every room), not '\(room)'")
    }
    guard !identity.isEmpty, identity.utf8.count <= 256 else { throw UsageError(description: "--identity must be 1-256 bytes") }
    let now = Int64(Date().timeIntervalSince1970)
    print(TokenIssuer(secret: secret).mint(TokenClaims(identity: identity, room: room, issuer: issuer, issuedAt: now, expires: now + ttl)))
}

let tlsHelp = """
    usage: callend tls --host NAME [--host NAME]... --out DIR [--days N]

    Makes what a TLS service needs, in one step: a private certificate authority (DIR/ca.pem and
    its key DIR/ca-key.pem, made once and reused by later runs) and a certificate for the service
    signed by it (DIR/server.pem, DIR/server-key.pem), for every NAME given: DNS names and IP
    addresses the endpoints dial. Keys are ECDSA P-256, written mode 0600. Then:

      callend serve --listen 0.0.0.0:7000 --tls-cert DIR/server.pem --tls-key DIR/server-key.pem ...
      callend join ROOM --server tls://NAME:7000 --ca-file DIR/ca.pem ...     (ca.pem is public)

    Run it again with other names (another node, a renewal) to sign a new server certificate with
    the same CA: endpoints keep trusting ca.pem. Keep ca-key.pem where only you can read it.

      --host NAME   a DNS name or IP address the certificate is for (repeatable; the first is its CN)
      --out DIR     the folder to write to (made mode 0700 if missing)
      --days N      how long the server certificate is valid (default 825; the CA, 10 years)
    """

func runTLS(_ args: inout Arguments) throws {
    if args.flag("--help") || args.flag("-h") { print(tlsHelp); return }
    let hosts = try args.values("--host")
    guard !hosts.isEmpty else { throw UsageError(description: "tls needs --host NAME (the DNS name or IP address endpoints dial)") }
    guard let directory = try args.value("--out") else { throw UsageError(description: "tls needs --out DIR") }
    let days = try args.integer("--days", in: 1...3650) ?? 825
    try args.finish(command: "tls")
    let files: PrivateCA.Files
    do { files = try PrivateCA.issue(hosts: hosts, directory: directory, days: days) } catch {
        throw UsageError(description: error.description)
    }
    print("""
        \(files.madeCA ? "made a private CA" : "used the CA in \(directory)"): \(files.caCertificate) (endpoints trust it: join --ca-file \(files.caCertificate))
        server certificate for \(hosts.joined(separator: ", ")), valid \(days) days: \(files.certificate), key \(files.key)
          callend serve --listen 0.0.0.0:7000 --tls-cert \(files.certificate) --tls-key \(files.key) ...
          callend join ROOM --server tls://\(hosts[0].contains(":") ? "[\(hosts[0])]" : hosts[0]):7000 --ca-file \(files.caCertificate) ...
        """)
}

func runServe(_ args: inout Arguments) throws {
    if args.flag("--help") || args.flag("-h") { print(serveHelp); return }
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
    let metrics = try args.value("--metrics").map { text throws(UsageError) in try parseHostPort(text, option: "--metrics") }
    let logger = try logWriter(program: "callend serve", &args)
    var redis = try args.value("--redis").map { text throws(UsageError) in
        do { return try RedisAddress(url: text) } catch { throw UsageError(description: "--redis: \(error)") }
    }
    if let file = try args.value("--redis-password-file") {
        guard redis != nil else { throw UsageError(description: "--redis-password-file needs --redis") }
        guard let text = try? String(contentsOfFile: file, encoding: .utf8), !text.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
            throw UsageError(description: "cannot read a password from --redis-password-file \(file)")
        }
        redis?.password = text.trimmingCharacters(in: .whitespacesAndNewlines)
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
        guard let text = try? String(contentsOfFile: turnSecretFile, encoding: .utf8), !text.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
            throw UsageError(description: "cannot read a TURN secret from --turn-secret-file \(turnSecretFile)")
        }
        policy.turnSecret = Array(text.trimmingCharacters(in: .whitespacesAndNewlines).utf8)
    }
    if !policy.turnURLs.isEmpty && policy.turnSecret == nil {
        throw UsageError(description: "TURN servers given with --ice-server need --turn-secret-file (the secret coturn checks credentials with)")
    }
    if let turnTTL { policy.credentialLifetime = turnTTL }

    raiseFileLimit()
    var configuration = SignalingServerConfiguration(host: host, port: port, secret: secret)
    if let certificate, let key { configuration.tls = try TLSContext(certificateFile: certificate, privateKeyFile: key) }
    if let participants { configuration.limits.maxParticipantsPerRoom = participants }
    if let connections { configuration.limits.maxConnections = connections }
    if let perAddress { configuration.limits.maxConnectionsPerAddress = perAddress }
    if let pendingPerAddress { configuration.limits.maxPendingPerAddress = pendingPerAddress }
    if let maxTokenLifetime { configuration.limits.maxTokenLifetime = maxTokenLifetime }
    if let seatGrace { configuration.limits.seatGrace = .seconds(seatGrace) }
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
    while true { sleep(3600) }
}

nonisolated(unsafe) var signalSources: [any DispatchSourceSignal] = []  // written once on the main thread before any signal can arrive

/// SIGINT and SIGTERM run `action` (on a dispatch queue) instead of killing the process, so a
/// command can stop cleanly: leave its call, remove its namespaces, print what it measured.
func onTerminationSignals(_ action: @escaping @Sendable () -> Void) {
    for sig in [SIGINT, SIGTERM] {
        signal(sig, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
        source.setEventHandler(handler: action)
        source.resume()
        signalSources.append(source)
    }
}

let benchSignalingHelp = """
    usage: callend bench signaling [--clients N] [--rooms-per-second R] [--nodes N]

    Starts 'callend serve' as a child process on 127.0.0.1, connects N clients (default 10000),
    holds them all open, joins them to rooms in pairs and relays an offer and an answer in each
    room. Prints connections held at once, joins per second, p50/p99 latency from the second join
    to the first participant's peer-joined, offer/answer round trip, and the server's resident
    memory per connection. Needs a descriptor limit of N + 100 (it raises the soft limit to the hard one).

      --clients N             clients (default 10000), two per room
      --rooms-per-second R    start R rooms a second (2R joins/s) to measure latency at a steady
                              rate; default 0 starts every room at once to measure throughput
      --nodes N               also run N nodes sharing rooms through a private redis-server (Debian's),
                              each room's two participants on two nodes, and print each figure
                              beside one node's; then kill node 1 under 100 pairs of clients (their
                              next servers the other nodes) and time each one's return to its room
    """

func runBenchSignaling(_ args: inout Arguments) throws {
    if args.flag("--help") || args.flag("-h") { print(benchSignalingHelp); return }
    let clients = try args.integer("--clients", in: 2...100_000) ?? 10_000
    let rate = try args.integer("--rooms-per-second", in: 0...1_000_000) ?? 0
    let nodes = try args.integer("--nodes", in: 1...16) ?? 1
    try args.finish(command: "bench signaling")
    raiseFileLimit()
    let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    var bench = SignalingBenchmark(clients: clients, roomsPerSecond: Double(rate), executable: executable) {
        FileHandle.standardError.write(Data("\($0)\n".utf8))
    }
    guard nodes > 1 else {
        print(SignalingBenchmark.format(try bench.run(), roomsPerSecond: Double(rate)))
        return
    }
    bench.nodes = nodes
    print(SignalingBenchmark.format(try bench.runCluster(), roomsPerSecond: Double(rate)))
}
