import CallEndpoint
import Foundation
import Signaling
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
        let secret = TokenSecret.random()
        let secretFile = FileManager.default.temporaryDirectory.appendingPathComponent("callend-bench-secret-\(UUID().uuidString)").path
        guard FileManager.default.createFile(atPath: secretFile, contents: Data(secret.printable), attributes: [.posixPermissions: 0o600]) else {
            throw ExternalTool.Failure(description: "cannot write \(secretFile)")
        }
        defer { try? FileManager.default.removeItem(atPath: secretFile) }

        // Every client comes from 127.0.0.1.
        let limit = "\(clients + 100)"
        let service = try ServiceProcess.start(executable: executable, secretFile: secretFile,
                                               extra: ["--max-connections", limit, "--max-connections-per-address", limit])
        defer { service.stop() }
        let server = service.process
        let port = service.port
        log("server pid \(server.processIdentifier) listening on 127.0.0.1:\(port); \(clients) clients joining \(clients / 2) rooms")
        let before = Self.residentKiB(pid: server.processIdentifier)
        var after = 0
        var load = SignalingLoadTest(host: "127.0.0.1", port: port, clients: clients, secret: secret)
        load.roomsPerSecond = roomsPerSecond
        let result = try load.run {
            after = Self.residentKiB(pid: server.processIdentifier)
        }
        return Report(result: result, serverRSSBeforeKiB: before, serverRSSAfterKiB: after)
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
