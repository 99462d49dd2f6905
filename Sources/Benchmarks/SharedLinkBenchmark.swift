import CallEndpoint
import Foundation
import Platform
import Signaling
#if canImport(Glibc)
import Glibc
#endif

/// `callend bench congestion --case fairness|tcp`: several flows through one tbf bottleneck.
///
/// - fairness (RFC 8867 §5.3): three calls, each from its own sending host to B, started 10 s
///   apart. From 10 s after the last start: each call's share of the capacity against its fair
///   share, Jain's fairness index, and the queueing delay at the bottleneck.
/// - tcp (RFC 8867 §5.6): one call, and a long CUBIC TCP download (a Python socket sender on
///   its own host) through the same bottleneck for the middle of the run: the call's share while
///   TCP runs, and how long after TCP ends the call is back at 90 % of its rate before TCP.
///
/// Each flow's delivered bytes are counted in B per sending address (iptables), the queue from
/// the tbf's backlog, every 100 ms. The same case runs with callend and then with aiortc pairs.
public struct SharedLinkBenchmark {
    public enum Case: String, Sendable, CaseIterable {
        case fairness, tcp
    }

    public struct Options: Sendable {
        public var testCase: Case
        public var capacity: Int
        /// Seconds between the starts of the calls (fairness).
        public var stagger: Double = 10
        /// The whole run, seconds from the first call's media.
        public var duration: Double
        /// When the TCP flow runs (tcp), seconds from the first call's media.
        public var tcpWindow: (start: Double, end: Double) = (20, 140)
        public var executable: String
        public var scripts: String
        public var python: String?
        /// A Python with matplotlib, for the plot.
        public var plotPython = "python3"
        public var outputDirectory: String
        public var videoSize = (width: 640, height: 480)
        public var fps = 30
        public var burstBytes = 4_000

        public init(testCase: Case, executable: String, scripts: String, python: String?, outputDirectory: String, short: Bool = false) {
            self.testCase = testCase
            self.executable = executable
            self.scripts = scripts
            self.python = python
            self.outputDirectory = outputDirectory
            switch (testCase, short) {
            case (.fairness, false): (capacity, duration) = (3_000_000, 100)
            case (.fairness, true): (capacity, duration, stagger) = (3_000_000, 50, 10)
            case (.tcp, false): (capacity, duration, tcpWindow) = (2_000_000, 160, (20, 140))
            case (.tcp, true): (capacity, duration, tcpWindow) = (2_000_000, 55, (15, 40))
            }
        }
    }

    /// One reading: seconds from the start, bytes delivered per flow so far, the tbf's backlog.
    public struct Sample: Sendable, Equatable {
        public var time: Double
        public var delivered: [UInt64]
        public var backlogBytes: Int
        public var drops: UInt64
        public var packets: UInt64
    }

    public struct Run: Sendable {
        public var name: String
        public var flows: [String]
        public var samples: [Sample]
    }

    public let options: Options
    let log: (String) -> Void

    public init(options: Options, log: @escaping (String) -> Void) {
        self.options = options
        self.log = log
    }

    var flowCount: Int { options.testCase == .fairness ? 3 : 2 }

    public func run() throws -> [Run] {
        guard geteuid() == 0 else { throw ExternalTool.Failure(description: "bench congestion needs root (network namespaces and tc)") }
        for tool in ["ip", "tc", "ffmpeg", "iptables"] { _ = try ExternalTool.locate(tool) }
        try FileManager.default.createDirectory(atPath: options.outputDirectory, withIntermediateDirectories: true)
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("callend-bench-shared-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: work) }
        let clip = work + "/clip.y4m"
        let size = "\(options.videoSize.width)x\(options.videoSize.height)"
        try ExternalTool.run("ffmpeg", ["-nostdin", "-loglevel", "error", "-f", "lavfi", "-i", "testsrc2=size=\(size):rate=\(options.fps)",
                                        "-vf", "noise=alls=10:allf=t", "-t", "4", "-pix_fmt", "yuv420p", "-y", clip])
        var runs = [try measure(stack: "callend", clip: clip, work: work)]
        if options.python != nil { runs.append(try measure(stack: "aiortc", clip: clip, work: work)) }
        try writeCSV(runs)
        return runs
    }

    /// The calls' starts, seconds from the first call's media.
    var callStarts: [Double] {
        options.testCase == .fairness ? (0..<3).map { Double($0) * options.stagger } : [0]
    }

    private func measure(stack: String, clip: String, work: String) throws -> Run {
        let topology = try NamespaceTopology(extraSenders: flowCount - 1)
        defer { topology.remove() }
        try topology.shape(bitsPerSecond: options.capacity, burst: options.burstBytes)
        try topology.countArrivalsPerSender()
        var processes: [Process] = [], finite: [Process] = []
        defer {
            for p in processes + finite where p.isRunning { p.terminate() }
            for p in processes + finite { p.waitUntilExit() }
        }
        let seconds = Int(options.duration) + 30
        // Signaling for callend calls lives on A.
        var secret: TokenSecret?
        let tls = try ServiceTLS(directory: work + "/tls", host: topology.addressA)
        if stack == "callend" {
            let s = TokenSecret.random()
            try writePrivateFile(atPath: work + "/secret", contents: s.printable)
            let server = try topology.process(in: topology.a, options.executable, ["serve", "--listen", "\(topology.addressA):7000", "--secret-file", work + "/secret"]
                                              + tls.serveArguments)
            // The endpoints connect once it listens.
            try ExternalTool.start(server, log: options.outputDirectory + "/\(stack)-serve.log", ready: "listening on", within: .seconds(30))
            processes.append(server)
            secret = s
        }
        func startCall(_ index: Int) throws {
            let sender = topology.senders[index]
            let tag = "\(stack)-\(options.testCase.rawValue)-\(index + 1)"
            func output(_ who: String) throws -> FileHandle { try ExternalTool.newFile(options.outputDirectory + "/\(tag)-\(who).log") }
            if stack == "callend", let secret {
                let room = "shared-\(index + 1)"
                let now = Int64(WallClock.unixSeconds)
                for (who, ns, extra) in [("b", topology.b, ["--video-source", "none"]), ("a", sender.namespace, ["--video-source", clip])] {
                    let token = TokenIssuer(secret: secret).mint(TokenClaims(identity: who, room: room, issuedAt: now, expires: now + 3600))
                    let p = try topology.process(in: ns, options.executable,
                                                 ["join", room, "--server", "tls://\(topology.addressA):7000", "--duration", "\(seconds)", "--no-stdin"]
                                                    + tls.joinArguments + extra,
                                                 environment: ["CALLEND_TOKEN": token])
                    let file = try output(who)
                    p.standardOutput = file
                    p.standardError = file
                    try p.run()
                    processes.append(p)
                }
            } else if let python = options.python {
                let peer = options.scripts + "/aiortc_peer.py", port = 7100 + index
                let answerer = try topology.process(in: topology.b, python, [peer, "answer", "--listen", "\(topology.addressB):\(port)", "--seconds", "\(seconds)"])
                let offerer = try topology.process(in: sender.namespace, python,
                                                   [peer, "offer", "--connect", "\(topology.addressB):\(port)", "--video", clip, "--seconds", "\(seconds)"])
                // The offerer connects to the answerer's signaling port once it says it listens.
                try ExternalTool.start(answerer, log: options.outputDirectory + "/\(tag)-b.log", ready: "listening", within: .seconds(20))
                processes.append(answerer)
                let file = try output("a")
                offerer.standardOutput = file
                offerer.standardError = file
                try offerer.run()
                processes.append(offerer)
            }
        }

        let clock = MonotonicClock()
        // Bytes delivered per sender and the bottleneck's counters, every 100 ms.
        let feed = try SampleFeed(process: try topology.flowSampler(interval: 0.1), clock: clock) { [flowCount] line in
            try? NamespaceTopology.flowCounters(line: line, senders: flowCount)
        }
        defer { feed.stop() }
        try startCall(0)
        log("\(stack): waiting for the first call's media")
        let deadline = MediaTime.now + .seconds(40)
        while (feed.latest?.value.perSender[0] ?? 0) < 20_000 {
            guard processes.allSatisfy(\.isRunning), feed.next(before: deadline) else {
                throw ExternalTool.Failure(description: "\(stack): no media within 40 s (or a peer exited); logs in the output folder")
            }
        }
        let origin = clock.now
        func elapsed() -> Double { (clock.now - origin).inSeconds }
        func wait(until t: Double) throws {
            guard elapsed() < t else { return }
            // The calls started by now, and the service: each must stay up to the moment.
            guard PeerWatch(processes).stayUp(for: .milliseconds(Int64((t - elapsed()) * 1000))) else {
                throw ExternalTool.Failure(description: "\(stack): a peer exited early at \(Int(elapsed())) s; logs in the output folder")
            }
        }
        var flows = ["\(stack) call 1"]
        switch options.testCase {
        case .fairness:
            for (index, start) in callStarts.enumerated().dropFirst() {
                try wait(until: start)
                log(String(format: "%@: %.0f s: call %d starts", stack, start, index + 1))
                try startCall(index)
                flows.append("\(stack) call \(index + 1)")
            }
        case .tcp:
            flows.append("TCP (CUBIC)")
            let port = 7200
            let sink = try topology.process(in: topology.b, "/usr/bin/python3", ["-c", Self.tcpSink, topology.addressB, "\(port)"])
            sink.standardOutput = FileHandle.nullDevice
            try sink.run()
            processes.append(sink)
            try wait(until: options.tcpWindow.start)
            let length = options.tcpWindow.end - options.tcpWindow.start
            let source = try topology.process(in: topology.senders[1].namespace, "/usr/bin/python3",
                                              ["-c", Self.tcpSource, topology.addressB, "\(port)", "\(length)"])
            let file = try ExternalTool.newFile(options.outputDirectory + "/\(stack)-tcp-source.log")
            source.standardOutput = file
            source.standardError = file
            log(String(format: "%@: %.0f s: TCP download starts for %.0f s", stack, options.tcpWindow.start, length))
            try source.run()
            // It ends by itself; the peers' liveness checks leave it out.
            finite.append(source)
        }
        try wait(until: options.duration)
        let samples = feed.readings.compactMap { reading -> Sample? in
            let t = (reading.at - origin).inSeconds
            guard t >= 0, t <= options.duration else { return nil }
            let (delivered, tbf) = reading.value
            return Sample(time: t, delivered: delivered, backlogBytes: tbf.backlog, drops: tbf.drops, packets: tbf.packets)
        }
        return Run(name: stack, flows: flows, samples: samples)
    }

    /// Reads everything sent to ADDRESS:PORT and throws it away (B's end of the download).
    static let tcpSink = """
    import socket, sys
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(1)
    while True:
        c, _ = s.accept()
        while c.recv(1 << 16): pass
        c.close()
    """

    /// Sends as fast as TCP CUBIC lets it to ADDRESS:PORT for SECONDS (CUBIC asked for by name:
    /// the machine's default may be another, BBR say).
    static let tcpSource = """
    import socket, sys, time
    s = socket.socket()
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, b"cubic")
    s.settimeout(10)
    s.connect((sys.argv[1], int(sys.argv[2])))
    print("congestion control:", s.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).split(b"\\0")[0].decode(), flush=True)
    end, chunk, sent = time.monotonic() + float(sys.argv[3]), b"x" * 65536, 0
    while time.monotonic() < end:
        sent += s.send(chunk)
    s.close()
    print("sent", sent, "bytes", flush=True)
    """

    /// The figures per run, the targets, and callend / aiortc ratios.
    public static func report(_ runs: [Run], options: Options) -> String {
        func f(_ v: Double, _ format: String = "%.2f") -> String { String(format: format, v) }
        let capacity = Double(options.capacity)
        var lines: [String] = []
        var figures: [String: [String: Double]] = [:]
        switch options.testCase {
        case .fairness:
            let from = Double(2) * options.stagger + 10, to = options.duration
            lines.append("shared bottleneck, RFC 8867 §5.3: three calls from three hosts through one tbf of \(options.capacity / 1000) kbit/s "
                         + "(\(options.burstBytes)-byte bucket, 300 ms queue), started \(Int(options.stagger)) s apart; figures from \(Int(from)) s to \(Int(to)) s")
            lines.append("stack    | rate per call (kbit/s)  | share of fair share per call | Jain | queue p50 / p95 | loss")
            for run in runs {
                let rates = SharedLinkMetrics.rates(run.samples, from: from, to: to)
                guard rates.count == 3 else { lines.append("\(run.name): no samples"); continue }
                let shares = rates.map { $0 / (capacity / 3) }
                let jain = SharedLinkMetrics.jain(rates)
                let q50 = SharedLinkMetrics.queue(run.samples, capacity: options.capacity, from: 10, to: to, quantile: 0.5)
                let q95 = SharedLinkMetrics.queue(run.samples, capacity: options.capacity, from: 10, to: to, quantile: 0.95)
                let loss = SharedLinkMetrics.loss(run.samples, from: 10, to: to)
                figures[run.name] = ["jain": jain, "q95": q95, "total": rates.reduce(0, +) / capacity]
                lines.append("\(run.name.padding(toLength: 8, withPad: " ", startingAt: 0)) | "
                             + rates.map { f($0 / 1000, "%.0f") }.joined(separator: " / ") + " | " + shares.map { f($0) }.joined(separator: " / ")
                             + " | \(f(jain, "%.3f")) | \(f(q50, "%.0f")) / \(f(q95, "%.0f")) ms | \(f(loss * 100, "%.1f")) %"
                             + " | total \(f(rates.reduce(0, +) / capacity)) of capacity")
                if run.name == "callend" {
                    let met = shares.allSatisfy { (0.8...1.25).contains($0) } && jain >= 0.95 && q95 <= 60
                    lines.append("callend targets (each call 0.8-1.25 of its fair share, Jain >= 0.95, queue p95 <= 60 ms): \(met ? "met" : "NOT met")")
                }
            }
            if let a = figures["callend"], let b = figures["aiortc"] {
                lines.append("ratios callend / aiortc: Jain \(f(a["jain"]! / b["jain"]!)), queue p95 \(b["q95"]! > 0 ? f(a["q95"]! / b["q95"]!) : "-"), "
                             + "capacity used \(f(a["total"]! / max(b["total"]!, 1e-9)))")
            }
        case .tcp:
            let (start, end) = options.tcpWindow
            lines.append("shared bottleneck, RFC 8867 §5.6: one call and a CUBIC TCP download through one tbf of \(options.capacity / 1000) kbit/s "
                         + "(\(options.burstBytes)-byte bucket, 300 ms queue); TCP from \(Int(start)) s to \(Int(end)) s")
            lines.append("stack    | call before TCP (kbit/s) | call's share while TCP runs | TCP's share | back to 90 % of its rate after TCP ends | queue p95 with TCP | loss with TCP")
            for run in runs {
                let before = SharedLinkMetrics.rates(run.samples, from: max(0, start - 6), to: start - 1)
                let during = SharedLinkMetrics.rates(run.samples, from: start, to: end)
                guard before.count == 2, during.count == 2 else { lines.append("\(run.name): no samples"); continue }
                let share = during[0] / capacity, tcpShare = during[1] / capacity
                // TCP has ended when it stops delivering (its socket's buffer drains after the
                // sender's last write), at the latest 10 s after its sender stopped.
                let ended = SharedLinkMetrics.lastActivity(run.samples, flow: 1, after: end, threshold: 0.05 * capacity) ?? end
                let back = SharedLinkMetrics.secondsUntil(run.samples, flow: 0, from: ended, target: 0.9 * before[0])
                let q95 = SharedLinkMetrics.queue(run.samples, capacity: options.capacity, from: start, to: end, quantile: 0.95)
                let loss = SharedLinkMetrics.loss(run.samples, from: start, to: end)
                figures[run.name] = ["share": share, "back": back ?? .infinity]
                lines.append("\(run.name.padding(toLength: 8, withPad: " ", startingAt: 0)) | \(f(before[0] / 1000, "%.0f")) | \(f(share)) | \(f(tcpShare)) | "
                             + (back.map { f($0, "%.1f s") } ?? "not within the run") + " | \(f(q95, "%.0f")) ms | \(f(loss * 100, "%.1f")) %")
                if run.name == "callend" {
                    let met = share >= 0.4 && (back ?? .infinity) <= 5
                    lines.append("callend targets (>= 0.40 of the capacity while TCP runs, back within 5 s after): \(met ? "met" : "NOT met")")
                }
            }
            if let a = figures["callend"], let b = figures["aiortc"] {
                lines.append("ratios callend / aiortc: share while TCP runs \(b["share"]! > 0 ? f(a["share"]! / b["share"]!) : "-")")
            }
        }
        return lines.joined(separator: "\n")
    }

    /// Draws shared-CASE.csv into shared-CASE.png with matplotlib; returns why it could not.
    public func plot() -> String? {
        CongestionBenchmark.plot(python: options.plotPython, scripts: options.scripts, csv: options.outputDirectory + "/shared-\(options.testCase.rawValue).csv")
    }

    /// shared.csv: each flow's delivered rate (over the 100 ms before each sample) and the queue.
    private func writeCSV(_ runs: [Run]) throws {
        var lines = ["stack,time_s,flow,delivered_kbps,queue_ms"]
        for run in runs {
            for (i, s) in run.samples.enumerated() where i > 0 {
                let p = run.samples[i - 1], span = s.time - p.time
                guard span > 0 else { continue }
                for (f, name) in run.flows.enumerated() {
                    let kbps = Double(s.delivered[f] &- p.delivered[f]) * 8 / span / 1000
                    lines.append(String(format: "%@,%.2f,%@,%.0f,%.1f", run.name, s.time, name, kbps, Double(s.backlogBytes * 8) / Double(options.capacity) * 1000))
                }
            }
        }
        try (lines.joined(separator: "\n") + "\n").write(toFile: options.outputDirectory + "/shared-\(options.testCase.rawValue).csv", atomically: true, encoding: .utf8)
    }
}

/// The figures of a shared-bottleneck run, pure so that tests can check them on made-up samples.
public enum SharedLinkMetrics {
    /// Mean rate of each flow, bit/s, between two times.
    public static func rates(_ samples: [SharedLinkBenchmark.Sample], from start: Double, to end: Double) -> [Double] {
        let inside = samples.filter { $0.time >= start && $0.time <= end }
        guard let first = inside.first, let last = inside.last, last.time > first.time else { return [] }
        return zip(first.delivered, last.delivered).map { Double($1 &- $0) * 8 / (last.time - first.time) }
    }

    /// Jain's fairness index: (Σx)² / (n Σx²), 1 when all are equal, 1/n when one takes all.
    public static func jain(_ rates: [Double]) -> Double {
        let sum = rates.reduce(0, +), squares = rates.reduce(0) { $0 + $1 * $1 }
        guard squares > 0 else { return 0 }
        return sum * sum / (Double(rates.count) * squares)
    }

    /// The p-th quantile of the queueing delay (ms) between two times.
    public static func queue(_ samples: [SharedLinkBenchmark.Sample], capacity: Int, from start: Double, to end: Double, quantile p: Double) -> Double {
        let delays = samples.filter { $0.time >= start && $0.time <= end }.map { Double($0.backlogBytes * 8) / Double(capacity) * 1000 }.sorted()
        guard !delays.isEmpty else { return 0 }
        return delays[min(delays.count - 1, Int(Double(delays.count) * p))]
    }

    /// Seconds after `from` until flow `flow`'s rate over the last `window` seconds first reaches `target` bit/s.
    public static func secondsUntil(_ samples: [SharedLinkBenchmark.Sample], flow: Int, from: Double, target: Double, window: Double = 1) -> Double? {
        for (i, s) in samples.enumerated() where s.time >= from + window {
            guard let j = samples[..<i].lastIndex(where: { $0.time <= s.time - window }) else { continue }
            let rate = Double(s.delivered[flow] &- samples[j].delivered[flow]) * 8 / (s.time - samples[j].time)
            if rate >= target { return s.time - from }
        }
        return nil
    }

    /// The first time after `after` at which flow `flow`'s rate over 0.5 s falls below
    /// `threshold` bit/s (the flow has ended).
    public static func lastActivity(_ samples: [SharedLinkBenchmark.Sample], flow: Int, after: Double, threshold: Double) -> Double? {
        for (i, s) in samples.enumerated() where s.time >= after {
            guard let j = samples[..<i].lastIndex(where: { $0.time <= s.time - 0.5 }) else { continue }
            let rate = Double(s.delivered[flow] &- samples[j].delivered[flow]) * 8 / (s.time - samples[j].time)
            if rate < threshold { return s.time }
        }
        return nil
    }

    /// Loss at the bottleneck between two times: tbf drops / packets offered.
    public static func loss(_ samples: [SharedLinkBenchmark.Sample], from start: Double, to end: Double) -> Double {
        let inside = samples.filter { $0.time >= start && $0.time <= end }
        guard let first = inside.first, let last = inside.last else { return 0 }
        let drops = Double(last.drops &- first.drops), packets = Double(last.packets &- first.packets)
        return drops + packets > 0 ? drops / (drops + packets) : 0
    }
}
