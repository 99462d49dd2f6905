import CallEndpoint
import Foundation
import Platform
import Signaling
#if canImport(Glibc)
import Glibc
#endif

/// Starts `callend serve` as a child process and reads the port it announces.
struct ServiceProcess {
    let process: Process
    let port: Int

    static func start(executable: String, secretFile: String, extra: [String] = []) throws -> ServiceProcess {
        let server = Process()
        server.executableURL = URL(fileURLWithPath: executable)
        server.arguments = ["serve", "--listen", "127.0.0.1:0", "--secret-file", secretFile] + extra
        let output = Pipe()
        server.standardOutput = output
        server.standardInput = FileHandle.nullDevice
        try server.run()
        var text = ""
        while !text.contains("\n") {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            text += String(decoding: chunk, as: UTF8.self)
        }
        guard let line = text.split(separator: "\n").first, line.hasPrefix("listening on "),
              let port = Int(line.split(separator: " ")[2].split(separator: ":").last ?? "") else {
            server.terminate()
            throw ExternalTool.Failure(description: "callend serve did not report its port: \(text)")
        }
        return ServiceProcess(process: server, port: port)
    }

    func stop() {
        guard process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
    }
}

/// Resource use of a running process, read from /proc.
enum ProcessUsage {
    /// User + system CPU seconds so far.
    static func cpuSeconds(pid: Int32) -> Double? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // Fields after the command: state is 0, utime is 11, stime is 12 (proc(5) numbers 14 and 15).
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// Threads the process runs now (/proc/PID/task).
    static func threads(pid: Int32) -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task"))?.count ?? 0
    }

    static func residentMiB(pid: Int32) -> Double? {
        SignalingBenchmark.residentKiB(pid: pid) > 0 ? Double(SignalingBenchmark.residentKiB(pid: pid)) / 1024 : nil
    }
}

/// `callend bench call`: real `callend join` processes calling each other through `callend serve`
/// on loopback (640x480@30 VP8 + Opus, SRTP), several calls in a row; measures setup (join to first
/// decoded frame), glass-to-glass latency from the stamps in the synthetic video and the timing marks
/// in the synthetic audio, and each endpoint's CPU and resident memory.
public struct CallBenchmark {
    public struct Endpoint: Sendable {
        public var setupMs: Double?
        public var videoP50: Double?, videoP95: Double?
        public var audioP50: Double?, audioP95: Double?
        /// Video delay minus audio delay by the sender reports at the end (what lip sync steers).
        public var avOffsetMs: Double?
        public var cores: Double
        public var maxRSSMiB: Double
        /// The most threads the endpoint ran at once during the call.
        public var maxThreads = 0
        public var framesDecoded: Int
        /// The endpoint's summary line (`callend join`'s last "<-" line).
        public var summary = ""
        /// The means of its stats lines' latency budgets (`sentBudgetMs`, `receivedBudgetMs`):
        /// stream ("video", "audio") -> hop -> ms.
        public var sentBudget: [String: [String: Double]] = [:]
        public var receivedBudget: [String: [String: Double]] = [:]
    }

    public let calls: Int
    public let seconds: Int
    public let executable: String
    /// The endpoints' --video-codec (vp8 or h264).
    public let videoCodec: String
    let log: (String) -> Void

    public init(calls: Int, seconds: Int, executable: String, videoCodec: String = "vp8", log: @escaping (String) -> Void) {
        self.calls = calls
        self.seconds = seconds
        self.executable = executable
        self.videoCodec = videoCodec
        self.log = log
    }

    public func run() throws -> [Endpoint] {
        let secret = TokenSecret.random()
        let secretFile = FileManager.default.temporaryDirectory.appendingPathComponent("callend-bench-call-\(UUID().uuidString)").path
        do { try writePrivateFile(atPath: secretFile, contents: secret.printable) } catch {
            throw ExternalTool.Failure(description: error.description)
        }
        defer { try? FileManager.default.removeItem(atPath: secretFile) }
        let service = try ServiceProcess.start(executable: executable, secretFile: secretFile)
        defer { service.stop() }
        var endpoints: [Endpoint] = []
        for call in 0..<calls {
            log("call \(call + 1) of \(calls): two endpoints, \(seconds) s")
            let now = Int64(WallClock.unixSeconds)
            var processes: [(Process, Pipe)] = []
            for who in ["a", "b"] {
                let token = TokenIssuer(secret: secret).mint(TokenClaims(identity: who, room: "bench-\(call)", issuedAt: now, expires: now + 600))
                let process = Process()
                process.executableURL = URL(fileURLWithPath: executable)
                process.arguments = ["join", "bench-\(call)", "--measure-latency", "--server", "127.0.0.1:\(service.port)", "--video-size", "640x480", "--fps", "30",
                                     "--duration", "\(seconds)", "--video-codec", videoCodec]
                process.environment = ProcessInfo.processInfo.environment.merging(["CALLEND_TOKEN": token]) { $1 }
                let out = Pipe()
                process.standardOutput = out
                process.standardError = FileHandle.nullDevice
                process.standardInput = FileHandle.nullDevice
                try process.run()
                processes.append((process, out))
            }
            // Sample CPU and memory while the call runs; readers drain the pipes meanwhile.
            let outputs = processes.map { (_, pipe) -> OutputBox in
                let box = OutputBox()
                Thread { box.set(pipe.fileHandleForReading.readDataToEndOfFile()) }.start()
                return box
            }
            let start = MediaTime.now
            var firstCPU = processes.map { _ in Double?.none }, lastCPU = processes.map { _ in 0.0 }
            var firstTime = processes.map { _ in MediaTime.now }, lastTime = processes.map { _ in MediaTime.now }
            var maxRSS = processes.map { _ in 0.0 }
            var maxThreads = processes.map { _ in 0 }
            while processes.contains(where: { $0.0.isRunning }) && MediaTime.now - start < .seconds(seconds + 30) {
                for (i, (process, _)) in processes.enumerated() where process.isRunning {
                    guard let cpu = ProcessUsage.cpuSeconds(pid: process.processIdentifier) else { continue }
                    // The first second (start-up, joining) is not the steady call.
                    if MediaTime.now - start >= .milliseconds(1500) {
                        if firstCPU[i] == nil { firstCPU[i] = cpu; firstTime[i] = MediaTime.now }
                        lastCPU[i] = cpu
                        lastTime[i] = MediaTime.now
                    }
                    maxRSS[i] = max(maxRSS[i], ProcessUsage.residentMiB(pid: process.processIdentifier) ?? 0)
                    maxThreads[i] = max(maxThreads[i], ProcessUsage.threads(pid: process.processIdentifier))
                }
                usleep(250_000)
            }
            for (i, (process, _)) in processes.enumerated() {
                if process.isRunning { process.terminate() }
                process.waitUntilExit()
                let text = outputs[i].text
                let window = (lastTime[i] - firstTime[i]).inSeconds
                endpoints.append(Endpoint(setupMs: Self.number(in: text, after: "setup "), videoP50: Self.number(in: text, after: "; latency p50 "),
                                          videoP95: Self.number(in: text, after: #"; latency p50 \d+ ms p95 "#),
                                          audioP50: Self.number(in: text, after: "audio latency p50 "),
                                          audioP95: Self.number(in: text, after: #"audio latency p50 \d+ ms p95 "#),
                                          avOffsetMs: Self.number(in: text, after: "A/V offset ", signed: true),
                                          cores: window > 0 ? (lastCPU[i] - (firstCPU[i] ?? lastCPU[i])) / window : 0,
                                          maxRSSMiB: maxRSS[i], maxThreads: maxThreads[i], framesDecoded: Int(Self.number(in: text, after: "video ") ?? 0),
                                          summary: String(text.split(separator: "\n").last(where: { $0.contains(" <- ") }) ?? ""),
                                          sentBudget: Self.budget(in: text, key: "sentBudgetMs"), receivedBudget: Self.budget(in: text, key: "receivedBudgetMs")))
            }
        }
        return endpoints
    }

    final class OutputBox: @unchecked Sendable {  // written once by the reader thread, read after the process ended; guarded by `lock`
        private var data = Data()
        private let lock = NSLock()
        func set(_ d: Data) { lock.lock(); data = d; lock.unlock() }
        var text: String { lock.lock(); defer { lock.unlock() }; return String(decoding: data, as: UTF8.self) }
    }

    /// The number that follows `prefix` (a regular expression) in the summary line.
    static func number(in text: String, after prefix: String, signed: Bool = false) -> Double? {
        guard let summary = text.split(separator: "\n").last(where: { $0.contains(" <- ") }),
              let range = summary.range(of: prefix + (signed ? #"[-+]?[0-9.]+"# : #"[0-9.]+"#), options: .regularExpression) else { return nil }
        // The number is the match's last word (every prefix ends in a space).
        return summary[range].split(separator: " ").last.flatMap { Double($0) }
    }

    /// The mean of each stream's hops over the JSON stats lines (one a second) after the first
    /// two seconds (joining, the first keyframe).
    static func budget(in text: String, key: String) -> [String: [String: Double]] {
        var sums: [String: [String: (total: Double, count: Int)]] = [:]
        for line in text.split(separator: "\n") where line.hasPrefix("{") {
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                  (object["seconds"] as? Double ?? 0) >= 2, let budget = object[key] as? [String: [String: Double]] else { continue }
            for (stream, hops) in budget {
                for (hop, ms) in hops { sums[stream, default: [:]][hop, default: (0, 0)].total += ms; sums[stream, default: [:]][hop, default: (0, 0)].count += 1 }
            }
        }
        return sums.mapValues { $0.mapValues { $0.total / Double($0.count) } }
    }

    /// One stream's budget line: the mean of each hop over the endpoints, the sender's hops then
    /// the receiver's, and their sum beside the measured glass-to-glass median.
    static func budgetLine(_ endpoints: [Endpoint], stream: String, measured: Double?) -> String {
        let sent = ["capture", "encode", "pacing"], received = ["network", "jitterBuffer", "decode", "playout"]
        func mean(_ hop: String, _ side: KeyPath<Endpoint, [String: [String: Double]]>) -> Double? {
            let values = endpoints.compactMap { $0[keyPath: side][stream]?[hop] }
            return values.isEmpty ? nil : values.reduce(0, +) / Double(values.count)
        }
        let hops = sent.map { ($0, mean($0, \.sentBudget)) } + received.map { ($0, mean($0, \.receivedBudget)) }
        guard hops.contains(where: { $0.1 != nil }) else { return "  \(stream) latency budget: n/a (no budget in the stats lines)" }
        let names = ["jitterBuffer": "jitter buffer"]
        let parts = hops.map { "\(names[$0.0] ?? $0.0) \($0.1.map { String(format: "%.1f", $0) } ?? "n/a")" }
        let total = hops.compactMap(\.1).reduce(0, +)
        return "  \(stream) latency budget (mean ms per hop): " + parts[..<3].joined(separator: ", ") + " | " + parts[3...].joined(separator: ", ")
            + String(format: " = %.1f ms", total) + (measured.map { String(format: " (glass-to-glass p50 %.0f ms)", $0) } ?? "")
    }

    public static func format(_ endpoints: [Endpoint], calls: Int, seconds: Int, videoCodec: String = "vp8") -> String {
        func percentile(_ values: [Double], _ p: Double) -> Double? {
            let sorted = values.sorted()
            return sorted.isEmpty ? nil : sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
        }
        func ms(_ v: Double?) -> String { v.map { String(format: "%.0f ms", $0) } ?? "n/a" }
        let setups = endpoints.compactMap(\.setupMs)
        let videoP95 = endpoints.compactMap(\.videoP95).max(), audioP95 = endpoints.compactMap(\.audioP95).max()
        let cores = endpoints.map(\.cores), rss = endpoints.map(\.maxRSSMiB)
        let offsets = endpoints.compactMap(\.avOffsetMs)
        let stampOffsets = endpoints.compactMap { e in e.videoP50.flatMap { v in e.audioP50.map { v - $0 } } }
        func range(_ values: [Double]) -> String {
            guard let low = values.min(), let high = values.max() else { return "n/a" }
            return String(format: "%+.0f ... %+.0f ms", low, high)
        }
        var lines = [
            "call bench: \(calls) calls of \(seconds) s, two `callend join` processes each through `callend serve`, loopback, 640x480@30 \(videoCodec == "h264" ? "H.264" : "VP8") + Opus, SRTP",
            "  setup (join -> first decoded frame): p50 \(ms(percentile(setups, 0.5))), p95 \(ms(percentile(setups, 0.95))) over \(setups.count) endpoints",
            "  video glass-to-glass (capture stamp -> decoded): p50 \(ms(percentile(endpoints.compactMap(\.videoP50), 0.5))), p95 \(ms(videoP95)) (worst endpoint)",
            "  audio glass-to-glass (timing mark -> played out): p50 \(ms(percentile(endpoints.compactMap(\.audioP50), 0.5))), p95 \(ms(audioP95)) (worst endpoint)",
            "  p95 per endpoint: video \(endpoints.map { ms($0.videoP95) }.joined(separator: ", ")); audio \(endpoints.map { ms($0.audioP95) }.joined(separator: ", "))",
            "  A/V offset (video minus audio) by the sender reports at the end: \(range(offsets)); by the capture stamps (p50s): \(range(stampOffsets))",
            budgetLine(endpoints, stream: "video", measured: percentile(endpoints.compactMap(\.videoP50), 0.5)),
            budgetLine(endpoints, stream: "audio", measured: percentile(endpoints.compactMap(\.audioP50), 0.5)),
            String(format: "  CPU per endpoint: mean %.2f, max %.2f cores; resident memory max %.1f MiB; threads max %d", cores.reduce(0, +) / Double(max(1, cores.count)),
                   cores.max() ?? 0, rss.max() ?? 0, endpoints.map(\.maxThreads).max() ?? 0),
        ]
        // The slowest endpoint's own account, to see where its time went.
        if let worst = endpoints.max(by: { max($0.videoP95 ?? 0, $0.audioP95 ?? 0) < max($1.videoP95 ?? 0, $1.audioP95 ?? 0) }) {
            lines.append("  slowest endpoint: \(worst.summary)")
        }
        // Lip sync is on: the offset by the capture stamps is known for every endpoint, and it and
        // the sender reports' (unknown at the end for an endpoint whose hold just moved, as lip
        // sync measures afresh) are within 40 ms.
        let worstOffset = stampOffsets.count == endpoints.count ? (offsets + stampOffsets).map(abs).max() ?? .infinity : .infinity
        let met = (percentile(setups, 0.95) ?? .infinity) <= 150 && (videoP95 ?? .infinity) <= 40 && (audioP95 ?? .infinity) <= 40
            && worstOffset <= 40 && (cores.max() ?? .infinity) <= 0.5 && (rss.max() ?? .infinity) <= 60
        lines.append("targets (setup p95 <= 150 ms, video and audio p95 <= 40 ms, A/V offset within +-40 ms, <= 0.5 core, <= 60 MB): \(met ? "met" : "NOT met")")
        return lines.joined(separator: "\n")
    }
}
