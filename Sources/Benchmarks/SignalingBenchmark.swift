import EndpointSignaling
import Platform
import CallEndpoint
import Foundation
import Signaling
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// `callend bench signaling`: starts `callend serve` as a separate process (so server and clients
/// each have their own descriptor limit and the server's memory can be read alone), then drives
/// it with `SignalingLoadTest` over loopback.
public struct SignalingBenchmark {
    public struct Report: Sendable {
        public var result: SignalingLoadTest.Result
        public var serverRSSBeforeKiB: Int
        public var serverRSSAfterKiB: Int
        public var bytesPerConnection: Double {
            Double(serverRSSAfterKiB - serverRSSBeforeKiB) * 1024 / Double(max(1, result.concurrent))
        }
    }

    public let clients: Int
    /// Nodes sharing rooms through a private redis-server; 1 is the single service without Redis.
    public var nodes = 1
    public let executable: String
    /// Rooms started per second (0: all at once).
    public let roomsPerSecond: Double
    let log: (String) -> Void

    public init(clients: Int, roomsPerSecond: Double = 0, executable: String, log: @escaping (String) -> Void) {
        self.clients = clients
        self.roomsPerSecond = roomsPerSecond
        self.executable = executable
        self.log = log
    }

    public func run() throws -> Report {
        try run(nodes: 1).report
    }

    /// One run with `nodes` services (sharing rooms through `redis` when more than one); the
    /// services keep running for `then`, which gets their processes and ports.
    func run(nodes: Int, redis: Int? = nil, then: (_ services: [ServiceProcess], _ secret: TokenSecret) throws -> Void = { _, _ in })
        throws -> (report: Report, nodeRSSKiB: [Int]) {
        let secret = TokenSecret.random()
        let secretFile = FileManager.default.temporaryDirectory.appendingPathComponent("callend-bench-secret-\(UUID().uuidString)").path
        guard FileManager.default.createFile(atPath: secretFile, contents: Data(secret.printable), attributes: [.posixPermissions: 0o600]) else {
            throw ExternalTool.Failure(description: "cannot write \(secretFile)")
        }
        defer { try? FileManager.default.removeItem(atPath: secretFile) }

        // Every client comes from 127.0.0.1, and connects long before it joins (all are held
        // open first, to measure what a held connection costs): the per-address limits and the
        // first-byte deadline that keep one address from starving the service are lifted.
        let limit = "\(clients + 100)"
        var extra = ["--max-connections", limit, "--max-connections-per-address", limit, "--max-pending-per-address", limit,
                     "--first-byte-timeout", "1h"]
        if let redis { extra += ["--redis", "redis://127.0.0.1:\(redis)"] }
        var services: [ServiceProcess] = []
        defer { for service in services { service.stop() } }
        for _ in 0..<nodes { services.append(try ServiceProcess.start(executable: executable, secretFile: secretFile, extra: extra)) }
        let pids = services.map(\.process.processIdentifier)
        log("\(nodes) node\(nodes == 1 ? "" : "s") (pids \(pids.map(String.init).joined(separator: " "))) on 127.0.0.1:"
            + services.map { String($0.port) }.joined(separator: ",") + "; \(clients) clients joining \(clients / 2) rooms")
        let before = pids.map(Self.residentKiB)
        var after: [Int] = []
        var load = SignalingLoadTest(host: "127.0.0.1", ports: services.map(\.port), clients: clients, secret: secret)
        load.roomsPerSecond = roomsPerSecond
        let result = try load.run {
            after = pids.map(Self.residentKiB)
        }
        try then(services, secret)
        return (Report(result: result, serverRSSBeforeKiB: before.reduce(0, +), serverRSSAfterKiB: after.reduce(0, +)), after)
    }

    /// `bench signaling --nodes N`: the same load on one service and on N nodes sharing rooms
    /// through Redis (each room's two participants on two nodes), then the failover time: pairs
    /// of real clients, one of each on a node that is killed (SIGKILL), each with the other nodes
    /// as its next servers; how long each takes to be back in its room.
    public struct ClusterReport: Sendable {
        public var single: Report
        public var cluster: Report
        public var nodes: Int
        public var nodeRSSKiB: [Int]
        /// Seconds from the kill to `joined` again, per client of the killed node.
        public var failover: [Double]
        public var failoverClients: Int
    }

    public func runCluster(failoverPairs: Int = 100) throws -> ClusterReport {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        log("redis-server on 127.0.0.1:\(redis.port)")
        let single = try run(nodes: 1).report
        var failover: [Double] = []
        let cluster = try run(nodes: nodes, redis: redis.port) { services, secret in
            failover = try measureFailover(services: services, secret: secret, pairs: failoverPairs)
        }
        return ClusterReport(single: single, cluster: cluster.report, nodes: nodes, nodeRSSKiB: cluster.nodeRSSKiB,
                             failover: failover, failoverClients: failoverPairs)
    }

    private func measureFailover(services: [ServiceProcess], secret: TokenSecret, pairs: Int) throws -> [Double] {
        let issuer = TokenIssuer(secret: secret)
        let joinedAgain = Mutex<[Int: MediaTime]>([:])
        let joinedOnce = Mutex<Set<Int>>([])
        // Signalled once per client's first join, and once per client's first join again.
        let (firstJoins, rejoins) = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
        var clients: [SignalingClient] = []
        defer { for client in clients { client.stop() } }
        let others = services.dropFirst().map { (host: "127.0.0.1", port: $0.port) }
        for i in 0..<(2 * pairs) {
            let room = "failover-\(i / 2)", identity = "f\(i)"
            // The first of each pair on the node that dies, the other on the next one.
            let home = i % 2 == 0 ? services[0].port : services[1].port
            var configuration = SignalingClientConfiguration(host: "127.0.0.1", port: home, room: room, token: {
                let now = Int64(WallClock.unixSeconds)
                return issuer.mint(TokenClaims(identity: identity, room: room, issuedAt: now, expires: now + 3600))
            })
            if i % 2 == 0 { configuration.alternates = others }
            configuration.eventHandler = { event in
                guard case .joined(_, _, let rejoined) = event else { return }
                if rejoined {
                    let first = joinedAgain.withLock { again in
                        guard again[i] == nil else { return false }
                        again[i] = .now
                        return true
                    }
                    if first { rejoins.signal() }
                } else {
                    if joinedOnce.withLock({ $0.insert(i).inserted }) { firstJoins.signal() }
                }
            }
            let client = SignalingClient(configuration: configuration)
            client.start()
            clients.append(client)
        }
        let deadline = MediaTime.now + .seconds(30)
        var joined = 0
        while joined < 2 * pairs, firstJoins.wait(for: deadline - .now) { joined += 1 }
        guard joined == 2 * pairs else { throw ExternalTool.Failure(description: "failover: not every client joined within 30 s") }
        log("failover: \(2 * pairs) clients joined; killing node 1 (pid \(services[0].process.processIdentifier))")
        let killed = MediaTime.now
        kill(services[0].process.processIdentifier, SIGKILL)
        services[0].process.waitUntilExit()
        let back = MediaTime.now + .seconds(30)
        var rejoined = 0
        while rejoined < pairs, rejoins.wait(for: back - .now) { rejoined += 1 }
        return joinedAgain.withLock { $0 }.filter { $0.key % 2 == 0 }.values.map { ($0 - killed).inSeconds }
    }

    public static func format(_ report: ClusterReport, roomsPerSecond: Double) -> String {
        func percentile(_ values: [Double], _ p: Double) -> Double? {
            guard !values.isEmpty else { return nil }
            let sorted = values.sorted()
            return sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
        }
        func ms(_ value: Double?) -> String { value.map { String(format: "%.1f", $0 * 1000) } ?? "n/a" }
        func ratio(_ a: Double?, _ b: Double?) -> String {
            guard let a, let b, b > 0 else { return "n/a" }
            return String(format: "%.2f", a / b)
        }
        let (one, many) = (report.single.result, report.cluster.result)
        let rows: [(String, String, String, String)] = [
            ("connections held at once", "\(one.concurrent)", "\(many.concurrent)", ratio(Double(many.concurrent), Double(one.concurrent))),
            ("joins/s", String(format: "%.0f", one.joinsPerSecond), String(format: "%.0f", many.joinsPerSecond), ratio(many.joinsPerSecond, one.joinsPerSecond)),
            ("join -> peer-joined p50 (ms)", ms(percentile(one.peerJoinedLatencies, 0.5)), ms(percentile(many.peerJoinedLatencies, 0.5)),
             ratio(percentile(many.peerJoinedLatencies, 0.5), percentile(one.peerJoinedLatencies, 0.5))),
            ("join -> peer-joined p99 (ms)", ms(percentile(one.peerJoinedLatencies, 0.99)), ms(percentile(many.peerJoinedLatencies, 0.99)),
             ratio(percentile(many.peerJoinedLatencies, 0.99), percentile(one.peerJoinedLatencies, 0.99))),
            ("offer -> answer p50 (ms)", ms(percentile(one.offerAnswerLatencies, 0.5)), ms(percentile(many.offerAnswerLatencies, 0.5)),
             ratio(percentile(many.offerAnswerLatencies, 0.5), percentile(one.offerAnswerLatencies, 0.5))),
            ("offer -> answer p99 (ms)", ms(percentile(one.offerAnswerLatencies, 0.99)), ms(percentile(many.offerAnswerLatencies, 0.99)),
             ratio(percentile(many.offerAnswerLatencies, 0.99), percentile(one.offerAnswerLatencies, 0.99))),
            ("pairs completed", "\(one.completedPairs)/\(one.clients / 2)", "\(many.completedPairs)/\(many.clients / 2)", ""),
            ("server memory (KiB, all nodes)", "\(report.single.serverRSSAfterKiB)", "\(report.cluster.serverRSSAfterKiB)",
             ratio(Double(report.cluster.serverRSSAfterKiB), Double(report.single.serverRSSAfterKiB))),
        ]
        var lines = [
            "signaling bench, one node against \(report.nodes) nodes on one redis-server (each room's two participants on two nodes): "
                + "\(one.clients) clients in \(one.clients / 2) rooms of 2, loopback, "
                + (roomsPerSecond > 0 ? "rooms started at \(Int(roomsPerSecond))/s" : "every room started at once"),
            "figure | 1 node | \(report.nodes) nodes | \(report.nodes) nodes / 1 node",
        ]
        for (name, a, b, r) in rows { lines.append("\(name) | \(a) | \(b) | \(r)") }
        lines.append("per node (KiB): " + report.nodeRSSKiB.map(String.init).joined(separator: ", "))
        for (label, r) in [("1 node", one), ("\(report.nodes) nodes", many)] where !r.errors.isEmpty {
            lines.append("errors, \(label): " + r.errors.map { "\($0.key) \($0.value)" }.sorted().joined(separator: ", "))
        }
        let f = report.failover
        lines.append(String(format: "failover: node 1 killed with %d clients on it; %d back in their rooms on another node; p50 %@ ms, p99 %@ ms, last %@ ms",
                            report.failoverClients, f.count, ms(percentile(f, 0.5)), ms(percentile(f, 0.99)), ms(f.max())))
        let met = f.count == report.failoverClients && (f.max() ?? 99) <= 2 && many.completedPairs == many.clients / 2
        lines.append("targets (every client of the dead node back within 2 s, every pair completes across nodes): \(met ? "met" : "NOT met")")
        return lines.joined(separator: "\n")
    }

    /// VmRSS of a process in KiB (0 when it cannot be read).
    static func residentKiB(pid: Int32) -> Int {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }) else { return 0 }
        return Int(line.split(whereSeparator: { $0 == " " || $0 == "\t" })[1]) ?? 0
    }

    public static func format(_ report: Report, roomsPerSecond: Double) -> String {
        let r = report.result
        func percentile(_ values: [Double], _ p: Double) -> String {
            guard !values.isEmpty else { return "n/a" }
            let sorted = values.sorted()
            return String(format: "%.1f ms", sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))] * 1000)
        }
        var lines = [
            "signaling bench: \(r.clients) clients in \(r.clients / 2) rooms of 2, callend serve in its own process, loopback, "
                + (roomsPerSecond > 0 ? "rooms started at \(Int(roomsPerSecond))/s (\(Int(roomsPerSecond * 2)) joins/s offered)" : "every room started at once"),
            String(format: "  connections open at once: %d (connected in %.2f s)", r.concurrent, r.connectSeconds),
            String(format: "  joins: %d in %.2f s = %.0f joins/s", r.joins, r.joinSeconds, r.joinsPerSecond),
            "  join -> peer-joined latency: p50 \(percentile(r.peerJoinedLatencies, 0.5)), p99 \(percentile(r.peerJoinedLatencies, 0.99))",
            "  offer -> answer round trip: p50 \(percentile(r.offerAnswerLatencies, 0.5)), p99 \(percentile(r.offerAnswerLatencies, 0.99)); \(r.completedPairs)/\(r.clients / 2) pairs completed",
            String(format: "  server memory: %d KiB before, %d KiB with all connections joined = %.1f KiB per connection",
                   report.serverRSSBeforeKiB, report.serverRSSAfterKiB, report.bytesPerConnection / 1024),
        ]
        if !r.errors.isEmpty { lines.append("  errors: " + r.errors.map { "\($0.key) \($0.value)" }.sorted().joined(separator: ", ")) }
        let met = r.concurrent >= 10_000 && r.joinsPerSecond >= 2000 && r.completedPairs == r.clients / 2
        lines.append("targets (10000 concurrent connections, >= 2000 joins/s, every pair completes): \(met ? "met" : "NOT met")")
        return lines.joined(separator: "\n")
    }
}

/// A private redis-server (Debian's) on a free loopback port, without persistence, for the bench.
final class RedisServerProcess {
    private(set) var port = 0
    private var process = Process()
    private let directory: URL

    init() throws {
        let executable = "/usr/bin/redis-server"
        guard FileManager.default.isExecutableFile(atPath: executable) else {
            throw ExternalTool.Failure(description: "bench signaling --nodes needs Debian's redis-server (apt-get install redis-server)")
        }
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("callend-bench-redis-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        // A random high port; another when it is taken (redis-server exits at once).
        for _ in 0..<5 {
            port = Int.random(in: 20_000...60_000)
            process = Process()
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = ["--port", "\(port)", "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                                 "--dir", directory.path, "--loglevel", "notice"]
            // It says when it takes connections.
            if (try? ExternalTool.start(process, log: directory.path + "/redis.log", ready: "Ready to accept connections", within: .seconds(10))) != nil { return }
        }
        stop()
        throw ExternalTool.Failure(description: "redis-server did not start")
    }

    private func terminate() {
        guard process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
    }

    func stop() {
        terminate()
        try? FileManager.default.removeItem(at: directory)
    }
}
