import CallEndpoint
import Foundation
import Platform
import Signaling
#if canImport(Glibc)
import Glibc
#endif

/// `callend bench congestion`: a sender in namespace A and a receiver in B, through router R whose
/// link toward B is a tbf bottleneck following a capacity schedule (RFC 8867 §5.1 by default).
/// The same clip goes through callend (auto mode) and then through an aiortc pair on the same
/// bottleneck; the router's counters, read every 100 ms, give each run's per-phase figures.
public struct CongestionBenchmark {
    public struct Options: Sendable {
        public var schedule = CapacitySchedule.rfc8867
        public var executable: String
        /// Folder holding aiortc_peer.py and plot.py.
        public var scripts: String
        /// A Python with aiortc; nil runs callend alone.
        public var python: String?
        /// A Python with matplotlib, for the plot.
        public var plotPython = "python3"
        public var outputDirectory: String
        public var videoSize = (width: 640, height: 480)
        public var fps = 30
        /// The tbf bucket, bytes: a few packets make the bottleneck behave like a link; a large
        /// bucket behaves like a policer, which lets short bursts (and probes) through at line rate.
        public var burstBytes = 4_000
        /// One-way delay added in each direction by a user-space relay in the router, ms (0: none).
        public var delayMilliseconds = 0
        /// scripts/browser/page.py: when set, a run where callend sends to headless Chromium (the
        /// page of `serve --http`, receiving only) and adapts from Chromium's own transport-cc feedback.
        public var browserPage: String?

        public init(executable: String, scripts: String, python: String?, outputDirectory: String) {
            self.executable = executable
            self.scripts = scripts
            self.python = python
            self.outputDirectory = outputDirectory
        }
    }

    public struct Run: Sendable {
        public var name: String
        public var samples: [BottleneckSample]
        public var modeSwitchTimes: [Double]
        public var phases: [PhaseMetrics]
        /// Transport-cc feedback packets the callend sender took from its receiver (callend senders).
        public var transportFeedback: Int?
    }

    public let options: Options
    let log: (String) -> Void

    public init(options: Options, log: @escaping (String) -> Void) {
        self.options = options
        self.log = log
    }

    public func run() throws -> [Run] {
        guard geteuid() == 0 else { throw ExternalTool.Failure(description: "bench congestion needs root (network namespaces and tc)") }
        for tool in ["ip", "tc", "ffmpeg"] { _ = try ExternalTool.locate(tool) }
        try FileManager.default.createDirectory(atPath: options.outputDirectory, withIntermediateDirectories: true)
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("callend-bench-congestion-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: work) }

        let clip = try makeClip(in: work)
        var runs: [Run] = []
        var ours = try measure(name: "callend") { topology, sampler in
            try startCallend(topology: topology, clip: clip, work: work, sampler: sampler, receiver: nil)
        }
        ours.transportFeedback = lastStatus(options.outputDirectory + "/callend-a.log")?.transportFeedback
        runs.append(ours)
        if let page = options.browserPage {
            var browser = try measure(name: Self.chromiumRun) { topology, sampler in
                try startCallend(topology: topology, clip: clip, work: work, sampler: sampler, receiver: page)
            }
            browser.transportFeedback = lastStatus(options.outputDirectory + "/chromium-a.log")?.transportFeedback
            runs.append(browser)
        }
        if let python = options.python {
            runs.append(try measure(name: "aiortc") { topology, _ in
                try startAiortc(topology: topology, python: python, clip: clip)
            })
        }
        try writeCSV(runs)
        return runs
    }

    /// The same pictures for both senders: a noisy moving test picture, hard enough to encode
    /// that it can fill 2.5 Mbit/s (both also send a 440 Hz tone).
    private func makeClip(in work: String) throws -> String {
        let clip = work + "/clip.y4m"
        let size = "\(options.videoSize.width)x\(options.videoSize.height)"
        log("making the clip (\(size)@\(options.fps), 4 s, looped by both senders)")
        try ExternalTool.run("ffmpeg", ["-nostdin", "-loglevel", "error", "-f", "lavfi", "-i", "testsrc2=size=\(size):rate=\(options.fps)",
                                        "-vf", "noise=alls=10:allf=t", "-t", "4", "-pix_fmt", "yuv420p", "-y", clip])
        return clip
    }

    final class Sampler: @unchecked Sendable {  // `lock` guards `switches` and `startedAt`
        private let lock = NSLock()
        private var switches: [Double] = []
        private var startedAt: ContinuousClock.Instant?
        let clock = ContinuousClock()

        /// Seconds since the schedule began (nil before).
        var now: Double? {
            lock.lock(); defer { lock.unlock() }
            return startedAt.map { (clock.now - $0).inSeconds }
        }
        func begin() { lock.lock(); startedAt = clock.now; lock.unlock() }
        func modeSwitched() { if let t = now { lock.lock(); switches.append(t); lock.unlock() } }
        var modeSwitches: [Double] { lock.lock(); defer { lock.unlock() }; return switches }
    }

    /// The router's counters as the sampler in R prints them (every 100 ms), stamped on arrival.
    final class CounterFeed: @unchecked Sendable {  // `lock` guards `all`
        private let lock = NSLock()
        private var all: [(at: ContinuousClock.Instant, counters: NamespaceTopology.Counters)] = []
        private let process: Process

        init(topology: NamespaceTopology, clock: ContinuousClock) throws {
            process = try topology.sampler(interval: 0.1)
            let out = Pipe()
            process.standardOutput = out
            process.standardError = FileHandle.nullDevice
            try process.run()
            ExternalTool.forEachLine(of: out, clock: clock) { [self] line, at in
                if let counters = try? NamespaceTopology.counters(line: line) { lock.lock(); all.append((at, counters)); lock.unlock() }
            }
        }

        var latest: (at: ContinuousClock.Instant, counters: NamespaceTopology.Counters)? { lock.lock(); defer { lock.unlock() }; return all.last }
        var readings: [(at: ContinuousClock.Instant, counters: NamespaceTopology.Counters)] { lock.lock(); defer { lock.unlock() }; return all }

        func stop() {
            if process.isRunning { process.terminate() }
            process.waitUntilExit()
        }
    }

    /// Builds the topology, starts a pair, waits for media to flow, then runs the schedule while
    /// the router's counters are read every 100 ms. Everything made is removed before it returns.
    private func measure(name: String, start: (NamespaceTopology, Sampler) throws -> [Process]) throws -> Run {
        let topology = try NamespaceTopology()
        defer { topology.remove() }
        let schedule = options.schedule
        try topology.shape(bitsPerSecond: schedule.phases[0].capacity, burst: options.burstBytes)
        if options.delayMilliseconds > 0 {
            try topology.addDelay(executable: options.executable, milliseconds: options.delayMilliseconds)
            log("\(name): path round trip \(try topology.roundTrip())")
        }
        let sampler = Sampler()
        let processes = try start(topology, sampler)
        defer {
            for p in processes where p.isRunning { p.terminate() }
            for p in processes { p.waitUntilExit() }
        }
        let feed = try CounterFeed(topology: topology, clock: sampler.clock)
        defer { feed.stop() }
        log("\(name): waiting for media to flow")
        // The schedule starts when the sender has put 20 kB on the wire (setup time differs
        // between stacks and is not what this measures).
        let deadline = Date().addingTimeInterval(30)
        var base: NamespaceTopology.Counters?
        while true {
            if base == nil { base = feed.latest?.counters }
            if let base, let now = feed.latest?.counters, now.fromA - base.fromA >= 20_000 { break }
            guard Date() < deadline, processes.allSatisfy(\.isRunning) else {
                throw ExternalTool.Failure(description: "\(name): no media within 30 s (or a peer exited); logs in the output folder")
            }
            usleep(50_000)
        }
        sampler.begin()
        let origin = sampler.clock.now
        log("\(name): media flowing; schedule \(schedule.phases.map { "\($0.capacity / 1000)k for \(Int($0.seconds)) s" }.joined(separator: ", "))")
        var changes: [(time: Double, capacity: Int)] = [(0, schedule.phases[0].capacity)]
        for (start, phase) in zip(schedule.starts, schedule.phases).dropFirst() {
            while let t = sampler.now, t < start {
                if !processes.allSatisfy(\.isRunning) { throw ExternalTool.Failure(description: "\(name): a peer exited early at \(Int(t)) s; logs in the output folder") }
                usleep(useconds_t(min(0.1, start - t) * 1_000_000))
            }
            try topology.shape(bitsPerSecond: phase.capacity, burst: options.burstBytes)
            changes.append((sampler.now ?? start, phase.capacity))
            log(String(format: "%@: %.0f s: capacity %d kbit/s", name, start, phase.capacity / 1000))
        }
        while let t = sampler.now, t < schedule.duration { usleep(useconds_t(min(0.1, schedule.duration - t) * 1_000_000)) }
        var samples: [BottleneckSample] = []
        var offsets = (delivered: UInt64(0), packets: UInt64(0), drops: UInt64(0))
        var last: NamespaceTopology.Counters?
        for reading in feed.readings {
            let c = reading.counters
            // A replaced qdisc may start its counters again: carry the old totals over.
            if let l = last, c.delivered < l.delivered || c.packets < l.packets || c.drops < l.drops {
                offsets.delivered += l.delivered; offsets.packets += l.packets; offsets.drops += l.drops
            }
            last = c
            let t = (reading.at - origin).inSeconds
            guard t >= 0, t <= schedule.duration, let base else { continue }
            samples.append(BottleneckSample(time: t, capacity: changes.last { $0.time <= t }?.capacity ?? schedule.phases[0].capacity,
                                            sentBytes: c.fromA - base.fromA, deliveredBytes: c.delivered + offsets.delivered,
                                            deliveredPackets: c.packets + offsets.packets, drops: c.drops + offsets.drops, backlogBytes: c.backlog))
        }
        let switches = sampler.modeSwitches
        return Run(name: name, samples: samples, modeSwitchTimes: switches,
                   phases: CongestionMetrics.compute(samples: samples, schedule: schedule, modeSwitchTimes: switches))
    }

    /// The run whose receiver is Chromium.
    public static let chromiumRun = "callend>chromium"

    /// callend in A sends the clip to B: to another callend, or (`receiver`: page.py) to headless Chromium.
    private func startCallend(topology: NamespaceTopology, clip: String, work: String, sampler: Sampler, receiver page: String?) throws -> [Process] {
        let prefix = page == nil ? "callend" : "chromium"
        let secret = TokenSecret.random()
        let secretFile = work + "/secret"
        do { try writePrivateFile(atPath: secretFile, contents: secret.printable) } catch {
            throw ExternalTool.Failure(description: error.description)
        }
        let seconds = Int(options.schedule.duration) + 60
        let web = page == nil ? [] : ["--http", "\(topology.addressA):7080"]
        let server = try topology.process(in: topology.a, options.executable, ["serve", "--listen", "\(topology.addressA):7000", "--secret-file", secretFile] + web)
        server.standardOutput = FileHandle.nullDevice
        server.standardError = FileHandle.nullDevice
        try server.run()
        usleep(300_000)
        let now = Int64(Date().timeIntervalSince1970)
        func join(_ who: String, in ns: String, extra: [String]) throws -> (Process, Pipe) {
            let token = TokenIssuer(secret: secret).mint(TokenClaims(identity: who, room: "congestion", issuedAt: now, expires: now + 3600))
            let p = try topology.process(in: ns, options.executable,
                                         ["join", "congestion", "--server", "\(topology.addressA):7000", "--duration", "\(seconds)", "--no-stdin"] + extra,
                                         environment: ["CALLEND_TOKEN": token])
            p.standardOutput = try ExternalTool.newFile(options.outputDirectory + "/\(prefix)-\(who).log")
            let errors = Pipe()
            p.standardError = errors
            try p.run()
            return (p, errors)
        }
        let (sender, senderErrors) = try join("a", in: topology.a, extra: ["--video-source", clip])
        // The sender's decision log, stamped with the bench clock as it arrives.
        let out = try ExternalTool.newFile(options.outputDirectory + "/\(prefix)-decisions.log")
        let thread = Thread { [sampler] in
            var pending = Data()
            while true {
                let chunk = senderErrors.fileHandleForReading.availableData
                if chunk.isEmpty { break }
                pending.append(chunk)
                while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                    let line = String(decoding: pending[pending.startIndex..<newline], as: UTF8.self)
                    pending.removeSubrange(pending.startIndex...newline)
                    let stamp = sampler.now.map { String(format: "%.2f", $0) } ?? "-"
                    out.write(Data("\(stamp) \(line)\n".utf8))
                    if line.contains("encoding: "), line.contains(#""change":"mode""#) { sampler.modeSwitched() }
                }
            }
            out.closeFile()
        }
        thread.start()
        guard let page else {
            let (receiver, _) = try join("b", in: topology.b, extra: ["--video-source", "none"])
            return [server, sender, receiver]
        }
        let token = TokenIssuer(secret: secret).mint(TokenClaims(identity: "chromium", room: "congestion", issuedAt: now, expires: now + 3600))
        let browser = try topology.process(in: topology.b, "/usr/bin/python3",
                                           [page, "http://\(topology.addressA):7080/?room=congestion&token=\(token)", "--receive-only",
                                            "--frames", "1", "--timeout", "60", "--stay"])
        let browserLog = try ExternalTool.newFile(options.outputDirectory + "/chromium-page.log")
        browser.standardOutput = browserLog
        browser.standardError = browserLog
        try browser.run()
        return [server, sender, browser]
    }

    private func startAiortc(topology: NamespaceTopology, python: String, clip: String) throws -> [Process] {
        let seconds = "\(Int(options.schedule.duration) + 60)"
        let peer = options.scripts + "/aiortc_peer.py"
        func start(_ ns: String, _ arguments: [String], log name: String) throws -> Process {
            let p = try topology.process(in: ns, python, [peer] + arguments)
            let logFile = try ExternalTool.newFile(options.outputDirectory + "/aiortc-\(name).log")
            p.standardOutput = logFile
            p.standardError = logFile
            try p.run()
            return p
        }
        let answerer = try start(topology.b, ["answer", "--listen", "\(topology.addressB):7100", "--seconds", seconds], log: "b")
        usleep(500_000)
        let offerer = try start(topology.a, ["offer", "--connect", "\(topology.addressB):7100", "--video", clip, "--seconds", seconds], log: "a")
        return [answerer, offerer]
    }

    /// The last per-second status line of a `callend join` log.
    private func lastStatus(_ path: String) -> CallStatus? {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
        return text.split(separator: "\n").reversed().lazy.compactMap { try? JSONDecoder().decode(CallStatus.self, from: Data($0.utf8)) }.first
    }

    /// congestion.csv: every sample of every run (rates over the 100 ms before the sample);
    /// phases.csv: the per-phase figures.
    private func writeCSV(_ runs: [Run]) throws {
        var lines = ["stack,time_s,capacity_kbps,sent_kbps,delivered_kbps,queue_ms,drops"]
        for run in runs {
            for (i, s) in run.samples.enumerated() where i > 0 {
                let p = run.samples[i - 1], span = s.time - p.time
                guard span > 0 else { continue }
                lines.append(String(format: "%@,%.2f,%d,%.0f,%.0f,%.1f,%llu", run.name, s.time, s.capacity / 1000,
                                    Double(s.sentBytes - p.sentBytes) * 8 / span / 1000, Double(s.deliveredBytes - p.deliveredBytes) * 8 / span / 1000,
                                    s.queueMilliseconds, s.drops - p.drops))
            }
        }
        try (lines.joined(separator: "\n") + "\n").write(toFile: options.outputDirectory + "/congestion.csv", atomically: true, encoding: .utf8)
        var phases = ["stack,phase_start_s,capacity_kbps,utilization,queue_p50_ms,queue_p95_ms,loss,fall_below_s,reach_90_s,oscillations,mode_switches"]
        for run in runs {
            for m in run.phases {
                phases.append(String(format: "%@,%.0f,%d,%.3f,%.1f,%.1f,%.4f,%@,%@,%d,%d", run.name, m.start, m.capacity / 1000, m.utilization, m.queueP50, m.queueP95,
                                     m.loss, m.secondsToFallBelow.map { String(format: "%.1f", $0) } ?? "", m.secondsTo90Percent.map { String(format: "%.1f", $0) } ?? "",
                                     m.oscillations, m.modeSwitches))
            }
        }
        try (phases.joined(separator: "\n") + "\n").write(toFile: options.outputDirectory + "/phases.csv", atomically: true, encoding: .utf8)
    }

    /// Draws congestion.csv into congestion.png with matplotlib; returns why it could not.
    public func plot() -> String? {
        do {
            try ExternalTool.run(options.plotPython, [options.scripts + "/plot.py", options.outputDirectory + "/congestion.csv", options.outputDirectory + "/congestion.png"])
            return nil
        } catch {
            return "no plot: \(error)"
        }
    }

    public static func report(_ runs: [Run], schedule: CapacitySchedule, burstBytes: Int, delayMilliseconds: Int = 0) -> String {
        func f(_ v: Double?, _ format: String) -> String { v.map { String(format: format, $0) } ?? "-" }
        let delay = delayMilliseconds > 0 ? ", \(delayMilliseconds) ms each way" : ""
        var lines = ["congestion bench: tbf bottleneck (\(burstBytes)-byte bucket, 300 ms queue\(delay)), schedule " +
                     schedule.phases.map { "\($0.capacity / 1000)k/\(Int($0.seconds))s" }.joined(separator: " "),
                     "stack             phase       util  q p50  q p95   loss  fall<cap  to 90%  osc  modes"]
        for run in runs {
            for m in run.phases {
                lines.append(String(format: "%@ %3.0fs %5dk  %5.2f %5.0fms %5.0fms %5.1f%% %8@ %7@ %4d %6d", run.name.padding(toLength: 17, withPad: " ", startingAt: 0) as NSString, m.start, m.capacity / 1000,
                                    m.utilization, m.queueP50, m.queueP95, m.loss * 100, f(m.secondsToFallBelow, "%.1fs") as NSString,
                                    f(m.secondsTo90Percent, "%.1fs") as NSString, m.oscillations, m.modeSwitches))
            }
        }
        if let ours = runs.first(where: { $0.name == "callend" })?.phases, let theirs = runs.first(where: { $0.name == "aiortc" })?.phases {
            lines.append("ratios callend / aiortc per phase (utilization: higher is better; queue, fall, reach: lower is better):")
            for (m, o) in zip(ours, theirs) {
                func ratio(_ a: Double?, _ b: Double?) -> String {
                    guard let a, let b, b > 0 else { return "-" }
                    return String(format: "%.2f", a / b)
                }
                lines.append(String(format: "  %3.0fs %5dk: utilization %@, queue p95 %@, fall %@, reach 90%% %@", m.start, m.capacity / 1000,
                                    ratio(m.utilization, o.utilization), ratio(m.queueP95, o.queueP95),
                                    ratio(m.secondsToFallBelow, o.secondsToFallBelow), ratio(m.secondsTo90Percent, o.secondsTo90Percent)))
            }
        }
        for run in runs {
            if let count = run.transportFeedback { lines.append("\(run.name): the estimate followed \(count) transport-cc feedback packets from its receiver") }
        }
        for run in runs where run.name != "aiortc" && !run.phases.isEmpty {
            let targets = CongestionMetrics.targets(run.phases, schedule: schedule)
            lines.append("\(run.name) targets: " + targets.map(\.summary).joined(separator: "; "))
        }
        return lines.joined(separator: "\n")
    }
}
