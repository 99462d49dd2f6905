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
/// With a reverse schedule (RFC 8867 §5.2), R's link toward A is a bottleneck too, following
/// its own schedule, and B sends the clip to A as well: each direction is measured on its own.
public struct CongestionBenchmark {
    public struct Options: Sendable {
        public var schedule = CapacitySchedule.rfc8867
        /// The capacity toward A; nil leaves that direction unshaped and B receiving only.
        public var reverseSchedule: CapacitySchedule?
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
        /// callend's --video-codec (vp8 or h264).
        public var videoCodec = "vp8"

        public init(executable: String, scripts: String, python: String?, outputDirectory: String) {
            self.executable = executable
            self.scripts = scripts
            self.python = python
            self.outputDirectory = outputDirectory
        }
    }

    public struct Run: Sendable {
        public var name: String
        /// The capacity this run's direction followed.
        public var schedule: CapacitySchedule
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
        for (i, who) in ["a", "b"].prefix(ours.count).enumerated() {
            ours[i].transportFeedback = lastStatus(options.outputDirectory + "/callend-\(who).log")?.transportFeedback
        }
        runs += ours
        if let page = options.browserPage {
            var browser = try measure(name: Self.chromiumRun) { topology, sampler in
                try startCallend(topology: topology, clip: clip, work: work, sampler: sampler, receiver: page)
            }
            browser[0].transportFeedback = lastStatus(options.outputDirectory + "/chromium-a.log")?.transportFeedback
            runs += browser
        }
        if let python = options.python {
            runs += try measure(name: "aiortc") { topology, _ in
                try startAiortc(topology: topology, python: python, clip: clip)
            }
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
        /// Mode switch times per direction (`NamespaceTopology.Direction`'s raw value).
        private var switches: [[Double]] = [[], []]
        private var startedAt: MediaTime?
        let clock = MonotonicClock()

        /// Seconds since the schedule began (nil before).
        var now: Double? {
            lock.lock(); defer { lock.unlock() }
            return startedAt.map { (clock.now - $0).inSeconds }
        }
        func begin() { lock.lock(); startedAt = clock.now; lock.unlock() }
        func modeSwitched(_ direction: NamespaceTopology.Direction) {
            if let t = now { lock.lock(); switches[direction.rawValue].append(t); lock.unlock() }
        }
        func modeSwitches(_ direction: NamespaceTopology.Direction) -> [Double] {
            lock.lock(); defer { lock.unlock() }; return switches[direction.rawValue]
        }
    }

    /// The directions a run measures, with the schedule each follows.
    var directions: [(direction: NamespaceTopology.Direction, schedule: CapacitySchedule)] {
        [(.towardB, options.schedule)] + (options.reverseSchedule.map { [(.towardA, $0)] } ?? [])
    }

    /// A run's name: the stack, and with congestion both ways, the direction.
    func runName(_ stack: String, _ direction: NamespaceTopology.Direction) -> String {
        options.reverseSchedule == nil ? stack : stack + (direction == .towardB ? " A>B" : " B>A")
    }

    /// Builds the topology, starts a pair, waits for media to flow, then runs the schedule (or
    /// both) while the router's counters are read every 100 ms. Everything made is removed
    /// before it returns. One run per direction measured.
    private func measure(name: String, start: (NamespaceTopology, Sampler) throws -> [Process]) throws -> [Run] {
        let topology = try NamespaceTopology()
        defer { topology.remove() }
        for (direction, schedule) in directions {
            try topology.shape(bitsPerSecond: schedule.phases[0].capacity, burst: options.burstBytes, direction: direction)
        }
        if options.delayMilliseconds > 0 {
            try topology.addDelay(executable: options.executable, milliseconds: options.delayMilliseconds, log: options.outputDirectory + "/delay-relay.log")
            log("\(name): path round trip \(try topology.roundTrip())")
        }
        let sampler = Sampler()
        let processes = try start(topology, sampler)
        defer {
            for p in processes where p.isRunning { p.terminate() }
            for p in processes { p.waitUntilExit() }
        }
        // The router's counters toward each direction's receiver, every 100 ms.
        let feeds = try directions.map { entry in
            try SampleFeed(process: try topology.sampler(interval: 0.1, direction: entry.direction), clock: sampler.clock) { line in
                try? NamespaceTopology.counters(line: line)
            }
        }
        defer { feeds.forEach { $0.stop() } }
        log("\(name): waiting for media to flow")
        // The schedule starts when each sender has put 20 kB on the wire (setup time differs
        // between stacks and is not what this measures).
        let deadline = MediaTime.now + .seconds(30)
        var bases: [NamespaceTopology.Counters?] = feeds.map { _ in nil }
        while true {
            for (i, feed) in feeds.enumerated() where bases[i] == nil { bases[i] = feed.latest?.value }
            let flowing = zip(feeds, bases).allSatisfy { feed, base in
                guard let base, let now = feed.latest?.value else { return false }
                return now.sent - base.sent >= 20_000
            }
            if flowing { break }
            guard processes.allSatisfy(\.isRunning), feeds[0].next(before: deadline) else {
                throw ExternalTool.Failure(description: "\(name): no media within 30 s (or a peer exited); logs in the output folder")
            }
        }
        sampler.begin()
        let origin = sampler.clock.now
        for (direction, schedule) in directions {
            log("\(runName(name, direction)): media flowing; schedule \(schedule.phases.map { "\($0.capacity / 1000)k for \(Int($0.seconds)) s" }.joined(separator: ", "))")
        }
        // Every change of either schedule, in time order.
        let events = directions.flatMap { direction, schedule in
            zip(schedule.starts, schedule.phases).dropFirst().map { (time: $0, capacity: $1.capacity, direction: direction) }
        }.sorted { $0.time < $1.time }
        var changes: [[(time: Double, capacity: Int)]] = directions.map { [(0, $0.schedule.phases[0].capacity)] }
        let peers = PeerWatch(processes)
        func wait(until time: Double) throws {
            let t = sampler.now ?? 0
            guard t < time else { return }
            guard peers.stayUp(for: .milliseconds(Int64((time - t) * 1000))) else {
                throw ExternalTool.Failure(description: "\(name): a peer exited early at \(Int(sampler.now ?? t)) s; logs in the output folder")
            }
        }
        for event in events {
            try wait(until: event.time)
            try topology.shape(bitsPerSecond: event.capacity, burst: options.burstBytes, direction: event.direction)
            changes[event.direction.rawValue].append((sampler.now ?? event.time, event.capacity))
            log(String(format: "%@: %.0f s: capacity %d kbit/s", runName(name, event.direction), event.time, event.capacity / 1000))
        }
        let duration = directions.map(\.schedule.duration).max() ?? 0
        try wait(until: duration)
        return directions.enumerated().map { i, entry in
            let samples = Self.samples(feeds[i].readings, origin: origin, base: bases[i], changes: changes[i], duration: entry.schedule.duration)
            let switches = sampler.modeSwitches(entry.direction)
            return Run(name: runName(name, entry.direction), schedule: entry.schedule, samples: samples, modeSwitchTimes: switches,
                       phases: CongestionMetrics.compute(samples: samples, schedule: entry.schedule, modeSwitchTimes: switches))
        }
    }

    /// One direction's readings as samples from the schedule's start, the capacity in force at each.
    private static func samples(_ readings: [SampleFeed<NamespaceTopology.Counters>.Reading], origin: MediaTime,
                                base: NamespaceTopology.Counters?, changes: [(time: Double, capacity: Int)], duration: Double) -> [BottleneckSample] {
        var samples: [BottleneckSample] = []
        var offsets = (delivered: UInt64(0), packets: UInt64(0), drops: UInt64(0))
        var last: NamespaceTopology.Counters?
        for reading in readings {
            let c = reading.value
            // A replaced qdisc may start its counters again: carry the old totals over.
            if let l = last, c.delivered < l.delivered || c.packets < l.packets || c.drops < l.drops {
                offsets.delivered += l.delivered; offsets.packets += l.packets; offsets.drops += l.drops
            }
            last = c
            let t = (reading.at - origin).inSeconds
            guard t >= 0, t <= duration, let base else { continue }
            samples.append(BottleneckSample(time: t, capacity: changes.last { $0.time <= t }?.capacity ?? changes[0].capacity,
                                            sentBytes: c.sent - base.sent, deliveredBytes: c.delivered + offsets.delivered,
                                            deliveredPackets: c.packets + offsets.packets, drops: c.drops + offsets.drops, backlogBytes: c.backlog))
        }
        return samples
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
        let tls = try ServiceTLS(directory: work + "/tls", host: topology.addressA)
        let server = try topology.process(in: topology.a, options.executable, ["serve", "--listen", "\(topology.addressA):7000", "--secret-file", secretFile]
                                          + tls.serveArguments + web)
        // The endpoints connect once it listens.
        try ExternalTool.start(server, log: options.outputDirectory + "/serve.log", ready: "listening on", within: .seconds(30))
        let now = Int64(WallClock.unixSeconds)
        func join(_ who: String, in ns: String, extra: [String]) throws -> (Process, Pipe) {
            let token = TokenIssuer(secret: secret).mint(TokenClaims(identity: who, room: "congestion", issuedAt: now, expires: now + 3600))
            let p = try topology.process(in: ns, options.executable,
                                         ["join", "congestion", "--server", "tls://\(topology.addressA):7000", "--duration", "\(seconds)", "--no-stdin",
                                          "--video-codec", options.videoCodec] + tls.joinArguments + extra,
                                         environment: ["CALLEND_TOKEN": token])
            p.standardOutput = try ExternalTool.newFile(options.outputDirectory + "/\(prefix)-\(who).log")
            let errors = Pipe()
            p.standardError = errors
            try p.run()
            return (p, errors)
        }
        // A sender's decision log, stamped with the bench clock as it arrives.
        func follow(_ errors: Pipe, into name: String, direction: NamespaceTopology.Direction) throws {
            let out = try ExternalTool.newFile(options.outputDirectory + "/\(name).log")
            Thread { [sampler] in
                var pending = Data()
                while true {
                    let chunk = errors.fileHandleForReading.availableData
                    if chunk.isEmpty { break }
                    pending.append(chunk)
                    while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                        let line = String(decoding: pending[pending.startIndex..<newline], as: UTF8.self)
                        pending.removeSubrange(pending.startIndex...newline)
                        let stamp = sampler.now.map { String(format: "%.2f", $0) } ?? "-"
                        out.write(Data("\(stamp) \(line)\n".utf8))
                        if line.contains("encoding: "), line.contains(#""change":"mode""#) { sampler.modeSwitched(direction) }
                    }
                }
                out.closeFile()
            }.start()
        }
        let (sender, senderErrors) = try join("a", in: topology.a, extra: ["--video-source", clip])
        try follow(senderErrors, into: "\(prefix)-decisions", direction: .towardB)
        guard let page else {
            // With congestion both ways, B sends the clip too.
            let both = options.reverseSchedule != nil
            let (receiver, receiverErrors) = try join("b", in: topology.b, extra: ["--video-source", both ? clip : "none"])
            if both { try follow(receiverErrors, into: "\(prefix)-b-decisions", direction: .towardA) }
            return [server, sender, receiver]
        }
        let token = TokenIssuer(secret: secret).mint(TokenClaims(identity: "chromium", room: "congestion", issuedAt: now, expires: now + 3600))
        let browser = try topology.process(in: topology.b, "/usr/bin/python3",
                                           [page, "https://\(topology.addressA):7080/?room=congestion&token=\(token)", "--receive-only",
                                            "--frames", "1", "--timeout", "60", "--stay", "--trust-key", tls.publicKeyPin])
        let browserLog = try ExternalTool.newFile(options.outputDirectory + "/chromium-page.log")
        browser.standardOutput = browserLog
        browser.standardError = browserLog
        try browser.run()
        return [server, sender, browser]
    }

    private func startAiortc(topology: NamespaceTopology, python: String, clip: String) throws -> [Process] {
        let seconds = "\(Int(options.schedule.duration) + 60)"
        let peer = options.scripts + "/aiortc_peer.py"
        /// The answerer's "listening" (it prints it once its port is open) starts the offerer.
        func start(_ ns: String, _ arguments: [String], log name: String, ready: String? = nil) throws -> Process {
            let p = try topology.process(in: ns, python, [peer] + arguments)
            let path = options.outputDirectory + "/aiortc-\(name).log"
            if let ready {
                try ExternalTool.start(p, log: path, ready: ready, within: .seconds(30))
                return p
            }
            let logFile = try ExternalTool.newFile(path)
            p.standardOutput = logFile
            p.standardError = logFile
            try p.run()
            return p
        }
        let video = options.reverseSchedule == nil ? [] : ["--video", clip]
        let answerer = try start(topology.b, ["answer", "--listen", "\(topology.addressB):7100", "--seconds", seconds] + video, log: "b", ready: "listening")
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
        Self.plot(python: options.plotPython, scripts: options.scripts, csv: options.outputDirectory + "/congestion.csv")
    }

    /// Draws one of the benches' CSV files into a PNG beside it (scripts/congestion/plot.py);
    /// returns why it could not.
    static func plot(python: String, scripts: String, csv: String) -> String? {
        do {
            try ExternalTool.run(python, [scripts + "/plot.py", csv, String(csv.dropLast(4)) + ".png"])
            return nil
        } catch {
            return "no plot: \(error)"
        }
    }

    public static func report(_ runs: [Run], burstBytes: Int, delayMilliseconds: Int = 0) -> String {
        func f(_ v: Double?, _ format: String) -> String { v.map { String(format: format, $0) } ?? "-" }
        func describe(_ schedule: CapacitySchedule) -> String { schedule.phases.map { "\($0.capacity / 1000)k/\(Int($0.seconds))s" }.joined(separator: " ") }
        let delay = delayMilliseconds > 0 ? ", \(delayMilliseconds) ms each way" : ""
        // One schedule per run name's direction suffix (none, " A>B", " B>A"), in order of appearance.
        var schedules: [(String, CapacitySchedule)] = []
        for run in runs {
            let suffix = String(run.name.drop { $0 != " " })
            if !schedules.contains(where: { $0.0 == suffix }) { schedules.append((suffix, run.schedule)) }
        }
        let scheduleText = schedules.count == 1 ? "schedule " + describe(schedules[0].1)
            : "schedules " + schedules.map { "\($0.0.trimmingCharacters(in: .whitespaces)) \(describe($0.1))" }.joined(separator: "; ")
        var lines = ["congestion bench: tbf bottleneck (\(burstBytes)-byte bucket, 300 ms queue\(delay)), \(scheduleText)",
                     "stack             phase       util  q p50  q p95   loss  fall<cap  to 90%  osc  modes"]
        for run in runs {
            for m in run.phases {
                lines.append(String(format: "%@ %3.0fs %5dk  %5.2f %5.0fms %5.0fms %5.1f%% %8@ %7@ %4d %6d", run.name.padding(toLength: 17, withPad: " ", startingAt: 0) as NSString, m.start, m.capacity / 1000,
                                    m.utilization, m.queueP50, m.queueP95, m.loss * 100, f(m.secondsToFallBelow, "%.1fs") as NSString,
                                    f(m.secondsTo90Percent, "%.1fs") as NSString, m.oscillations, m.modeSwitches))
            }
        }
        for ourRun in runs where ourRun.name.hasPrefix("callend") && !ourRun.name.hasPrefix(Self.chromiumRun) {
            let suffix = ourRun.name.dropFirst("callend".count)
            guard let theirs = runs.first(where: { $0.name == "aiortc" + suffix })?.phases else { continue }
            lines.append("ratios \(ourRun.name) / aiortc\(suffix) per phase (utilization: higher is better; queue, fall, reach: lower is better):")
            for (m, o) in zip(ourRun.phases, theirs) {
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
        for run in runs where !run.name.hasPrefix("aiortc") && !run.phases.isEmpty {
            let targets = CongestionMetrics.targets(run.phases, schedule: run.schedule)
            lines.append("\(run.name) targets: " + targets.map(\.summary).joined(separator: "; "))
        }
        return lines.joined(separator: "\n")
    }
}
