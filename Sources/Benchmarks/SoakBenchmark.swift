import CallEndpoint
import Foundation
import Platform
import Signaling
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// `callend bench soak`: one call between two `callend join` processes in namespaces A and B
/// through router R, for minutes or hours, the way a rooftop endpoint lives: R drops a share of
/// every packet it forwards at random (iptables' statistic match) and, every few minutes, drops
/// everything for a while (blackhole routes, as an LTE stall). It reports what a long call costs:
/// memory at the start and at the end, CPU, frames lost, pictures that froze, the A/V offset and
/// how it drifted, and whether every outage was survived (media back at both sides).
public struct SoakBenchmark: Sendable {
    public struct Options: Sendable {
        public var minutes: Double
        public var lossPercent = 5.0
        public var blackoutEvery: Double = 300
        public var blackoutSeconds: Double = 10
        public var executable: String
        /// Where the endpoints' logs go (kept); a temporary folder, removed, when nil.
        public var outputDirectory: String?
        public init(minutes: Double, executable: String) {
            self.minutes = minutes
            self.executable = executable
        }
    }

    /// One side's figures.
    public struct Side: Sendable {
        public var name: String
        public var rssStartKiB = 0, rssEndKiB = 0
        public var cpuCores = 0.0
        public var framesSentByPeer = 0, framesDecoded = 0
        public var freezes = 0, freezesOutsideOutages = 0
        public var outages = 0, iceRestarts = 0
        /// A/V offset (ms) by the sender reports, and by the capture stamps (picture latency
        /// minus sound latency): first and last minute means, and the range outside outages.
        public var offsetStart: Double?, offsetEnd: Double?, offsetRange: ClosedRange<Double>?
        public var stampOffsetStart: Double?, stampOffsetEnd: Double?, stampOffsetRange: ClosedRange<Double>?
        /// Seconds from each blackout's end to full motion again (nil: not within 20 s).
        public var recoveries: [Double?] = []
        public var summary = ""
        public var rssGrowth: Double { rssStartKiB == 0 ? 0 : Double(rssEndKiB - rssStartKiB) / Double(rssStartKiB) }
    }

    public struct Report: Sendable {
        public var sides: [Side]
        public var blackouts: [(start: Double, end: Double)]
        public var seconds: Double
        public var options: Options
    }

    let options: Options
    let log: @Sendable (String) -> Void
    private let stopBox: StopBox

    /// Ends the run early (SIGINT, SIGTERM): it reports what it measured so far and cleans up.
    /// `news` is signalled by each line a process prints and by `stop()`: a wait for a line
    /// waits on it. `stopped` is signalled by `stop()` alone and ends the run's timed waits.
    final class StopBox: Sendable {
        let flag = Atomic<Bool>(false)
        let news = DispatchSemaphore(value: 0)
        let stopped = DispatchSemaphore(value: 0)
        /// Waits `duration`, or less when the run is stopped meanwhile.
        func pause(_ duration: Duration) {
            if stopped.wait(for: duration) { stopped.signal() }  // it stays stopped for the next pause
        }
    }
    public func stop() {
        stopBox.flag.store(true, ordering: .relaxed)
        stopBox.news.signal()
        stopBox.stopped.signal()
    }

    public init(options: Options, log: @escaping @Sendable (String) -> Void = { _ in }) {
        self.options = options
        self.log = log
        stopBox = StopBox()
    }

    /// A line of output with the time it arrived (seconds since the bench's clock started).
    final class Lines: Sendable {
        let lines = Mutex<[(at: Double, text: String)]>([])
        func text(_ predicate: (String) -> Bool) -> Bool { lines.withLock { $0.contains { predicate($0.text) } } }
    }

    public func run() throws -> Report {
        guard getuid() == 0 else { throw ExternalTool.Failure(description: "bench soak needs root (network namespaces and iptables in them)") }
        let work = options.outputDirectory ?? FileManager.default.temporaryDirectory.appendingPathComponent("callend-soak-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        defer { if options.outputDirectory == nil { try? FileManager.default.removeItem(atPath: work) } }
        let topology = try NamespaceTopology()
        defer { topology.remove() }
        let origin = MediaTime.now
        let clock: @Sendable () -> Double = { (MediaTime.now - origin).inSeconds }

        // Random loss on everything R forwards, both ways.
        try ExternalTool.run("ip", ["netns", "exec", topology.r, "iptables", "-A", "FORWARD", "-m", "statistic", "--mode", "random",
                                    "--probability", String(format: "%.4f", options.lossPercent / 100), "-j", "DROP"])
        let secret = TokenSecret.random()
        do { try writePrivateFile(atPath: work + "/secret", contents: secret.printable) } catch {
            throw ExternalTool.Failure(description: error.description)
        }
        let tls = try ServiceTLS(directory: work + "/tls", host: topology.addressA)
        let server = try topology.process(in: topology.a, options.executable, ["serve", "--listen", "\(topology.addressA):7000", "--secret-file", work + "/secret"]
                                          + tls.serveArguments)
        let serverOut = Lines()
        try start(server, output: serverOut, errors: nil, clock: clock)
        defer { if server.isRunning { server.terminate() }; server.waitUntilExit() }
        guard wait(seconds: 30, { serverOut.text { $0.contains("listening on") } }) else { throw ExternalTool.Failure(description: "callend serve did not start") }

        let duration = Int(options.minutes * 60) + 15
        let now = Int64(WallClock.unixSeconds)
        var joins: [(name: String, process: Process, out: Lines, err: Lines)] = []
        defer {
            for j in joins where j.process.isRunning { j.process.terminate() }
            for j in joins { j.process.waitUntilExit() }
        }
        for (name, ns) in [("a", topology.a), ("b", topology.b)] {
            // Tokens outlive the run: renewal is the signaling tests' business, not this bench's.
            let token = TokenIssuer(secret: secret).mint(TokenClaims(identity: name, room: "soak", issuedAt: now, expires: now + Int64(duration) + 3600))
            let process = try topology.process(in: ns, options.executable, ["join", "soak", "--measure-latency", "--server", "tls://\(topology.addressA):7000",
                                                                            "--duration", "\(duration)", "--no-stdin"] + tls.joinArguments,
                                               environment: ["CALLEND_TOKEN": token])
            let (out, err) = (Lines(), Lines())
            try start(process, output: out, errors: err, clock: clock, logTo: work + "/\(name)")
            joins.append((name, process, out, err))
            if name == "a", !wait(seconds: 30, { err.text { $0.contains("joined room") } }) { throw ExternalTool.Failure(description: "a did not join") }
        }
        guard wait(seconds: 60, { stopBox.flag.load(ordering: .relaxed) || joins.allSatisfy { j in j.out.text { $0.contains(#""receivedFps""#) && !$0.contains(#""receivedFps":0,"#) } } }) else {
            throw ExternalTool.Failure(description: "no media within 60 s")
        }
        let mediaStart = clock()
        log(String(format: "soak: media flows; %.0f min with %.1f %% loss and a %.0f s blackout every %.0f s", options.minutes, options.lossPercent,
                   options.blackoutSeconds, options.blackoutEvery))
        // The start's memory and CPU after a minute of warm-up (buffers filled, encoder settled).
        let warmUp = min(60, options.minutes * 60 / 4)
        var end = mediaStart + options.minutes * 60
        var blackouts: [(start: Double, end: Double)] = []
        var starts: [(rss: Int, cpu: Double, at: Double)] = []
        var nextBlackout = mediaStart + options.blackoutEvery
        var lastLog = clock()
        while clock() < end {
            stopBox.pause(.milliseconds(200))  // a sample of memory and CPU each 200 ms
            if stopBox.flag.load(ordering: .relaxed) {
                log("soak: stopped early")
                end = clock()
                break
            }
            let t = clock()
            if starts.isEmpty && t >= mediaStart + warmUp {
                starts = joins.map { (Self.residentKiB($0.process.processIdentifier), Self.cpuSeconds($0.process.processIdentifier), t) }
            }
            if t >= nextBlackout && t + options.blackoutSeconds + 20 < end {
                let begin = clock()
                for address in [topology.addressA, topology.addressB] {
                    try ExternalTool.run("ip", ["-n", topology.r, "route", "add", "blackhole", address + "/32"])
                }
                stopBox.pause(.milliseconds(Int64(options.blackoutSeconds * 1000)))
                for address in [topology.addressA, topology.addressB] {
                    try ExternalTool.run("ip", ["-n", topology.r, "route", "del", "blackhole", address + "/32"])
                }
                blackouts.append((begin, clock()))
                log(String(format: "soak: blackout %d at %.0f s (%.0f s)", blackouts.count, begin - mediaStart, clock() - begin))
                nextBlackout += options.blackoutEvery
            }
            if t - lastLog >= 60 {
                lastLog = t
                let rss = joins.map { "\($0.name) \(Self.residentKiB($0.process.processIdentifier)) KiB" }.joined(separator: ", ")
                log(String(format: "soak: %.0f min, RSS %@", (t - mediaStart) / 60, rss))
            }
            if let gone = joins.first(where: { !$0.process.isRunning }) {
                throw ExternalTool.Failure(description: "\(gone.name) exited early (\(gone.process.terminationStatus)); logs in \(work)")
            }
        }
        let endSample = joins.map { (rss: Self.residentKiB($0.process.processIdentifier), cpu: Self.cpuSeconds($0.process.processIdentifier), at: clock()) }
        for j in joins { j.process.interrupt() }
        for j in joins { j.process.waitUntilExit() }

        var sides: [Side] = []
        for (index, j) in joins.enumerated() {
            var side = Side(name: j.name)
            let peer = joins[1 - index]
            if !starts.isEmpty {
                side.rssStartKiB = starts[index].rss
                side.cpuCores = (endSample[index].cpu - starts[index].cpu) / max(1, endSample[index].at - starts[index].at)
            }
            side.rssEndKiB = endSample[index].rss
            let lines = j.out.lines.withLock { $0 }
            side.summary = lines.last { $0.text.contains(" <- ") }?.text ?? ""
            side.framesDecoded = Self.number(#"video (\d+) frames decoded"#, in: side.summary)
            side.framesSentByPeer = Self.number(#"sent (\d+) frames"#, in: peer.out.lines.withLock { $0 }.last { $0.text.contains(" <- ") }?.text ?? "")
            let stats = lines.compactMap { line -> (at: Double, fields: [String: Any])? in
                guard line.text.hasPrefix("{"), let object = try? JSONSerialization.jsonObject(with: Data(line.text.utf8)) as? [String: Any] else { return nil }
                return (line.at, object)
            }
            side.outages = stats.last?.fields["outages"] as? Int ?? 0
            side.iceRestarts = stats.last?.fields["iceRestarts"] as? Int ?? 0
            side.freezes = stats.last?.fields["freezes"] as? Int ?? 0
            // A freeze counted within a blackout or the 10 s after it belongs to the outage.
            var previous = 0
            for s in stats {
                let count = s.fields["freezes"] as? Int ?? previous
                if count > previous, !blackouts.contains(where: { s.at >= $0.start && s.at <= $0.end + 10 }) {
                    side.freezesOutsideOutages += count - previous
                }
                previous = count
            }
            for b in blackouts {
                side.recoveries.append(stats.first { $0.at > b.end && ($0.fields["receivedFps"] as? Double ?? 0) >= 15 }
                    .map { $0.at - 1 - b.end }.flatMap { $0 <= 20 ? max(0, $0) : nil })
            }
            // Offsets outside outages (and their 10 s after): by the sender reports, and by the stamps.
            // Outages are the blackouts and also the pauses the endpoint lived through by itself
            // (a freeze under random loss): seconds whose picture stalled (under 15 fps) and the
            // 5 s after them, since an offset between a stalled picture and sound means nothing.
            let stalled = stats.filter { ($0.fields["receivedFps"] as? Double ?? 0) < 15 }.map(\.at)
            let steady = stats.filter { s in
                s.at >= mediaStart + warmUp && !blackouts.contains { s.at >= $0.start && s.at <= $0.end + 10 }
                    && !stalled.contains { s.at >= $0 && s.at <= $0 + 5 }
            }
            let rtcp = steady.compactMap { s in (s.fields["avOffsetMs"] as? Double).map { (s.at, $0) } }
            let stamps = steady.compactMap { s -> (Double, Double)? in
                guard let v = s.fields["latencyMs"] as? Double, let a = s.fields["audioLatencyMs"] as? Double else { return nil }
                return (s.at, v - a)
            }
            (side.offsetStart, side.offsetEnd, side.offsetRange) = Self.drift(rtcp, first: mediaStart + warmUp, last: end)
            (side.stampOffsetStart, side.stampOffsetEnd, side.stampOffsetRange) = Self.drift(stamps, first: mediaStart + warmUp, last: end)
            sides.append(side)
        }
        return Report(sides: sides, blackouts: blackouts.map { ($0.start - mediaStart, $0.end - mediaStart) }, seconds: end - mediaStart, options: options)
    }

    /// Means of the first and the last minute, and the whole range.
    static func drift(_ values: [(Double, Double)], first: Double, last: Double) -> (Double?, Double?, ClosedRange<Double>?) {
        func mean(_ xs: [Double]) -> Double? { xs.isEmpty ? nil : xs.reduce(0, +) / Double(xs.count) }
        let start = mean(values.filter { $0.0 < first + 60 }.map(\.1))
        let end = mean(values.filter { $0.0 > last - 60 }.map(\.1))
        let all = values.map(\.1)
        return (start, end, all.isEmpty ? nil : all.min()!...all.max()!)
    }

    public static func format(_ report: Report) -> String {
        func ms(_ v: Double?) -> String { v.map { String(format: "%+.0f", $0) } ?? "-" }
        func range(_ r: ClosedRange<Double>?) -> String { r.map { String(format: "%+.0f … %+.0f", $0.lowerBound, $0.upperBound) } ?? "-" }
        var out = [String(format: "soak: %.1f min, %.1f %% random loss each way, %d blackouts of %.0f s (every %.0f s)",
                          report.seconds / 60, report.options.lossPercent, report.blackouts.count, report.options.blackoutSeconds,
                          report.options.blackoutEvery)]
        out.append("side | RSS start → end (KiB, growth) | CPU (cores) | frames decoded / sent (lost) | freezes ≥300 ms (outside outages) | outages, ICE restarts | A/V offset by RTCP: first min → last min (range) | by capture stamps | back after each blackout (s)")
        for s in report.sides {
            let lost = s.framesSentByPeer - s.framesDecoded
            let recoveries = s.recoveries.map { $0.map { String(format: "%.1f", $0) } ?? "never" }.joined(separator: " ")
            out.append(String(format: "%@ | %d → %d (%+.1f %%) | %.2f | %d / %d (%d, %.2f %%) | %d (%d) | %d, %d | %@ → %@ ms (%@) | %@ → %@ ms (%@) | %@",
                              s.name, s.rssStartKiB, s.rssEndKiB, s.rssGrowth * 100, s.cpuCores, s.framesDecoded, s.framesSentByPeer, lost,
                              s.framesSentByPeer == 0 ? 0 : Double(lost) * 100 / Double(s.framesSentByPeer), s.freezes, s.freezesOutsideOutages,
                              s.outages, s.iceRestarts, ms(s.offsetStart), ms(s.offsetEnd), range(s.offsetRange),
                              ms(s.stampOffsetStart), ms(s.stampOffsetEnd), range(s.stampOffsetRange), recoveries))
        }
        for s in report.sides { out.append("\(s.name): \(s.summary)") }
        return out.joined(separator: "\n")
    }

    // MARK: Processes

    private func start(_ process: Process, output: Lines, errors: Lines?, clock: @escaping @Sendable () -> Double, logTo path: String? = nil) throws {
        let (outPipe, errPipe) = (Pipe(), Pipe())
        process.standardOutput = outPipe
        process.standardError = errPipe
        try process.run()
        for (pipe, lines, suffix) in [(outPipe, output, ".out"), (errPipe, errors ?? Lines(), ".log")] {
            let file = path.flatMap { p -> FileHandle? in
                guard FileManager.default.createFile(atPath: p + suffix, contents: nil) else { return nil }
                return FileHandle(forWritingAtPath: p + suffix)
            }
            startThread(named: "soak-reader") {
                var pending = Data()
                while true {
                    let chunk = pipe.fileHandleForReading.availableData
                    if chunk.isEmpty { break }
                    file?.write(chunk)
                    pending.append(chunk)
                    while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                        let text = String(decoding: pending[pending.startIndex..<newline], as: UTF8.self)
                        pending.removeSubrange(pending.startIndex...newline)
                        let at = clock()
                        lines.lines.withLock { $0.append((at, text)) }
                        stopBox.news.signal()
                    }
                }
                try? file?.close()
            }
        }
    }

    /// Waits until `condition` holds, looking again at each line a process prints (and on
    /// `stop()`), for up to `seconds`.
    private func wait(seconds: Double, _ condition: () -> Bool) -> Bool {
        let deadline = MediaTime.now + .milliseconds(Int64(seconds * 1000))
        while !condition() {
            guard stopBox.news.wait(for: deadline - .now) else { return condition() }
        }
        return true
    }

    static func residentKiB(_ pid: Int32) -> Int { SignalingBenchmark.residentKiB(pid: pid) }

    /// User plus system CPU time of a process, in seconds.
    static func cpuSeconds(_ pid: Int32) -> Double {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let close = text.lastIndex(of: ")") else { return 0 }
        let fields = text[text.index(after: close)...].split(separator: " ")
        // After the command: state is field 3; utime and stime are fields 14 and 15.
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    static func number(_ pattern: String, in text: String) -> Int {
        guard let regex = try? NSRegularExpression(pattern: pattern),
              let match = regex.firstMatch(in: text, range: NSRange(text.startIndex..., in: text)),
              let range = Range(match.range(at: 1), in: text) else { return 0 }
        return Int(text[range]) ?? 0
    }
}
