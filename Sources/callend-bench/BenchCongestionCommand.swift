import Benchmarks
import CallEndpoint
import Foundation
import CLIKit
import Platform

let benchCongestionHelp = """
    usage: callend bench congestion [--schedule KBIT:S,...] [--out DIR] [--no-aiortc] [--python PATH] [--chromium]
                                    [--video-size WxH] [--fps N] [--burst BYTES] [--delay MS] [--scripts DIR] [--video-codec vp8|h264]
           callend bench congestion --case fairness|tcp [--short] [--capacity KBIT] [--out DIR] [--no-aiortc] [--python PATH]
           callend bench congestion --case both-ways [--short] [--delay MS] [--out DIR] [--no-aiortc] [--python PATH]

    Needs root. Builds hosts A and B in network namespaces joined through a router R whose link
    toward B is a tbf bottleneck (300 ms queue), and sends the same noisy test clip
    (made with ffmpeg) plus a tone from A to B: first with callend (auto encoding mode), then with an
    aiortc pair (aiortc from PyPI) through the same bottleneck. The capacity follows the schedule,
    by default RFC 8867 §5.1: 1000 kbit/s from 0 s, 2500 from 40 s, 600 from 60 s, 1000 from 80 s,
    100 s in all. The clock starts when a sender has put 20 kB on the wire, so setup time does not
    count. R's counters are read every 100 ms.

    Per stack and phase it prints: utilization (delivered / capacity), queueing delay p50/p95 at
    the bottleneck (backlog / capacity), loss (tbf drops / packets offered), the time until the
    sender's rate (200 ms window) is below the capacity after a fall, the time until the delivered
    rate (500 ms window) reaches 90 % of the capacity at the start and after a rise, oscillations
    (swings of the sender's one-second rate from above the capacity to below 80 % of it, from 2 s
    into the phase), and callend's mode switches; then the ratios callend / aiortc and callend's
    targets (below capacity <= 0.5 s after the drop, utilization >= 0.9, queueing p95 <= 60 ms,
    90 % of the top capacity within 5 s).

    --case fairness (RFC 8867 §5.3): three calls from three hosts through one bottleneck of 3000
    kbit/s, started 10 s apart, 100 s: from 10 s after the last start, each call's rate against its
    fair share (target 0.8-1.25), Jain's fairness index (target >= 0.95) and the queue p95 (<= 60
    ms). --case tcp (RFC 8867 §5.6): one call and a long TCP download (a Python socket sender, the
    kernel's CUBIC) through 2000 kbit/s, TCP from 20 s to 140 s of 160: the call's share while TCP
    runs (target >= 0.40) and how long after TCP ends it is back at 90 % of its rate before TCP
    (target <= 5 s). Each flow's delivered bytes are counted in B per sending host (iptables), the
    queue from the tbf, every 100 ms; the same case then runs with aiortc pairs. --short runs 50-55 s
    versions. Writes DIR/shared-CASE.csv, DIR/shared-CASE.png and the peers' logs.

    --case both-ways (RFC 8867 §5.2): R's link toward A is a bottleneck too, and both ends send
    the clip. Toward B: 2000, 1000, 500, 2000 kbit/s from 0, 20, 40, 60 s; toward A: 2000, 800,
    2000 kbit/s from 0, 35, 70 s; 100 s (--short: every phase halved). Each direction is measured
    and reported as above, as its own row of phases (A>B, B>A), with the same targets; each
    direction's feedback crosses the other's bottleneck.

    Writes DIR/congestion.csv (every sample), DIR/phases.csv (the table), DIR/congestion.png
    (matplotlib) and each peer's log. Everything it makes in the network is removed at the end.

    options:
      --schedule LIST     capacity phases as KBIT:SECONDS, comma-separated (default 1000:40,2500:20,600:20,1000:20)
      --out DIR           output folder (default ./congestion-bench)
      --no-aiortc         run callend only
      --chromium          also a run where callend sends to headless Chromium (Debian's chromium,
                          chromium-driver, python3-selenium; the page of 'serve --http', receiving
                          only) and adapts from Chromium's transport-cc feedback, not its own
      --python PATH       a Python with aiortc and matplotlib (default .build/bench-venv/bin/python, made by
                          scripts/congestion/setup-bench.sh)
      --video-size WxH    clip size (default 640x480); --fps N clip rate (default 30)
      --video-codec C     callend's video: vp8 (default) or h264 (the §5.1 and both-ways runs)
      --burst BYTES       the tbf bucket (default 4000, about three packets: the bottleneck behaves like a
                          link; a large bucket, e.g. 15000, behaves like a policer that lets short bursts
                          and probes through at line rate)
      --delay MS          one-way delay added in each direction by a user-space relay in R (a TUN device
                          and policy routing; 'callend bench delay-relay'), 1-1000 ms; RFC 8867 §5.1 uses
                          50 (default: none, the path's only delay is its queue)
      --scripts DIR       folder with aiortc_peer.py and plot.py (default: found from the executable)
      --case CASE         fairness, tcp or both-ways (above)
      --short             with --case: the short version (50-55 s)
      --capacity KBIT     with --case fairness or tcp: the bottleneck (default 3000 for fairness, 2000 for tcp)
    """

let benchDelayRelayHelp = """
    usage: callend bench delay-relay --device NAME --delay-ms MS

    Needs root. Creates the TUN device NAME and writes every packet read from it back after MS
    milliseconds (1-1000), in order, until it is stopped (SIGTERM or SIGINT). Prints "relaying on
    NAME" once the device exists. 'bench congestion --delay' runs it in its router namespace and
    routes the forwarded traffic through it.
    """

func runBenchDelayRelay(_ args: inout Arguments) throws {
    if args.flag("--help") || args.flag("-h") { print(benchDelayRelayHelp); return }
    let device = try args.value("--device")
    let delay = try args.integer("--delay-ms", in: 1...1000)
    try args.finish(command: "bench delay-relay")
    guard let device, let delay else { throw UsageError(description: "bench delay-relay needs --device NAME and --delay-ms MS") }
    let relay: DelayRelay
    do { relay = try DelayRelay(device: device, delay: .milliseconds(delay)) } catch { fail(error, code: .failure) }
    relayStarted(on: device)
    relay.run()
}

let benchCellularLinkHelp = """
    usage: callend bench cellular-link --device NAME --uplink TRACE --downlink TRACE --uplink-to NET
                                       [--delay-ms 30] [--queue 150] [--log FILE]

    Needs root. Creates the TUN device NAME and carries every packet read from it over an emulated
    cellular link, writing it back when the link delivers it: packets to the network NET
    (10.71.2.0/24: the far host) over the uplink, every other over the downlink. Each direction
    is a drop-tail queue of --queue packets (default 150) drained at its trace's delivery
    opportunities, then --delay-ms (default 30) of delay. A trace is a file in the format of the
    public mahimahi cellular traces: one line per opportunity for a 1500-byte packet, its time in
    ms from the trace's start (repeated for several in one ms); it repeats. With --log, one line
    per second and direction: its start (Unix ms), capacity and delivered bit/s, drops, the
    longest queue wait (ms).
    Prints "relaying on NAME" once the device exists, and runs until stopped (SIGTERM or SIGINT).
    scripts/loss/bench.sh runs it in its router.
    """

func runBenchCellularLink(_ args: inout Arguments) throws {
    if args.flag("--help") || args.flag("-h") { print(benchCellularLinkHelp); return }
    let device = try args.value("--device")
    let uplink = try args.value("--uplink"), downlink = try args.value("--downlink")
    let destination = try args.value("--uplink-to")
    let delay = try args.integer("--delay-ms", in: 0...1000) ?? 30
    let queue = try args.integer("--queue", in: 1...100_000) ?? 150
    let log = try args.value("--log")
    try args.finish(command: "bench cellular-link")
    guard let device, let uplink, let downlink, let destination else {
        throw UsageError(description: "bench cellular-link needs --device NAME, --uplink TRACE, --downlink TRACE and --uplink-to NET")
    }
    func trace(_ path: String) throws -> CapacityTrace {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { throw UsageError(description: "cannot read the trace \(path)") }
        do { return try CapacityTrace(parsing: text) } catch { throw UsageError(description: "\(path): \(error.description)") }
    }
    let relay: CellularRelay
    do {
        relay = try CellularRelay(device: device, uplink: try trace(uplink), downlink: try trace(downlink), delay: .milliseconds(delay),
                                  queueLimit: queue, uplinkDestination: destination, log: log)
    } catch let error as UsageError { throw error } catch { fail(error, code: .failure) }
    relayStarted(on: device)
    relay.run()
}

/// A relay whose device exists: it says so (whoever started it routes through the device on
/// that line, not after a guessed wait), and a signal stops it: the default action must hold
/// even when the parent spawned it from a thread that blocks signals (the mask is inherited; a
/// test runner's threads do).
func relayStarted(on device: String) {
    LogWriter.writeStandardOutput("relaying on \(device)\n")
    var stopSignals = sigset_t()
    sigemptyset(&stopSignals)
    for stop in [SIGTERM, SIGINT] {
        signal(stop, SIG_DFL)
        sigaddset(&stopSignals, stop)
    }
    pthread_sigmask(SIG_UNBLOCK, &stopSignals, nil)
}

let benchCellularHelp = """
    usage: callend bench cellular --traces DIR [--trace att,tmobile,verizon] [--seconds 120] [--offset 0] [--per-second] [--events]

    A call over each emulated cellular link in virtual time (CellularSimulation): two media session
    cores with the real estimator, pacer, retransmissions, FEC and encoding controller, over the
    traces' links (A's uplink the trace's .up, its downlink its .down; 150-packet drop-tail
    queues, 30 ms each way), the codec a model whose pictures are as big as the target allows.
    Prints per direction: frames shown per second, freezes (>= 300 ms) per minute, frame delay
    p50/p95 from capture to display, the longest gap, the link's utilization and the seconds the
    sender's video target sat at its floor while the trace offered >= 1 Mbit/s. Seconds of CPU for
    minutes of calls: for trying an estimator change on every trace before the real bench
    (scripts/loss/bench.sh --cases "att@cell ...") judges it. DIR holds mahimahi's traces
    (ATT-LTE-driving-2016, TMobile-LTE-short, Verizon-LTE-short; .up and .down).
    --offset S starts the call S seconds into the traces (they repeat): the same links from
    another moment, for a change's effect beyond one sequence of events.
    --per-second prints each second: capacity, delivered, estimate, target, mode.
    --events prints each direction's decision log: every cut of the estimate with the delay
    detector's state, and every freeze with what the sender skipped and the link offered.
    """

func runBenchCellular(_ args: inout Arguments) throws {
    if args.flag("--help") || args.flag("-h") { print(benchCellularHelp); return }
    let directory = try args.value("--traces")
    let names = try args.value("--trace").map { $0.split(separator: ",").map(String.init) } ?? ["att", "tmobile", "verizon"]
    let seconds = try args.integer("--seconds", in: 10...3600) ?? 120
    let offset = try args.integer("--offset", in: 0...3600) ?? 0
    let perSecond = args.flag("--per-second")
    let events = args.flag("--events")
    try args.finish(command: "bench cellular")
    guard let directory else { throw UsageError(description: "bench cellular needs --traces DIR (mahimahi's traces folder)") }
    let files = ["att": "ATT-LTE-driving-2016", "tmobile": "TMobile-LTE-short", "verizon": "Verizon-LTE-short"]
    for name in names {
        guard let file = files[name] else { throw UsageError(description: "--trace takes att, tmobile and verizon, not '\(name)'") }
        func trace(_ direction: String) throws -> CapacityTrace {
            let path = "\(directory)/\(file).\(direction)"
            guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { throw UsageError(description: "cannot read the trace \(path)") }
            do { return try CapacityTrace(parsing: text) } catch { throw UsageError(description: "\(path): \(error.description)") }
        }
        var options = CellularSimulation.Options(uplink: try trace("up"), downlink: try trace("down"))
        options.seconds = Double(seconds)
        options.events = events
        options.offset = Double(offset)
        let (up, down) = CellularSimulation(options: options).run()
        for (direction, figures) in [("up", up), ("down", down)] {
            print(CellularSimulation.line("\(name) \(direction)", figures))
            for event in figures.events { print("  \(event)") }
            guard perSecond else { continue }
            for (i, s) in figures.seconds.enumerated() {
                print("  \(i) capacity \((s.capacity / 1e6).fixed(2)) delivered \((s.delivered / 1e6).fixed(2)) estimate \(s.estimate / 1000)k target \(s.target / 1000)k \(s.mode)")
            }
        }
    }
}

func runBenchCongestion(_ args: inout Arguments) throws {
    if args.flag("--help") || args.flag("-h") { print(benchCongestionHelp); return }
    let schedule = try args.value("--schedule")
    let out = try args.value("--out") ?? "congestion-bench"
    let noAiortc = args.flag("--no-aiortc")
    let chromium = args.flag("--chromium")
    let python = try args.value("--python")
    let size = try args.value("--video-size").map(parseSize)
    let fps = try args.integer("--fps", in: 1...60)
    let scriptsOption = try args.value("--scripts")
    let burst = try args.integer("--burst", in: 1_600...1_000_000)
    let delay = try args.integer("--delay", in: 1...1000)
    let caseName = try args.value("--case")
    let short = args.flag("--short")
    let capacity = try args.integer("--capacity", in: 100...100_000)
    let codec = try args.value("--video-codec")
    if let codec, codec != "vp8" && codec != "h264" { throw UsageError(description: "bench congestion's --video-codec takes vp8 or h264, not '\(codec)'") }
    try args.finish(command: "bench congestion")
    if codec != nil && caseName != nil && caseName != "both-ways" { throw UsageError(description: "--video-codec goes with the RFC 8867 §5.1 and both-ways runs, not --case \(caseName!)") }
    if caseName == nil && (short || capacity != nil) { throw UsageError(description: "--short and --capacity go with --case fairness|tcp|both-ways") }
    if noAiortc && python != nil { throw UsageError(description: "--no-aiortc and --python are alternatives; give one") }
    var parsedSchedule = CapacitySchedule.rfc8867
    if let schedule {
        do { parsedSchedule = try CapacitySchedule(parsing: schedule) } catch { throw UsageError(description: "--schedule: \(error)") }
    }

    let scripts = scriptsOption ?? locateScripts(from: executable)
    guard let scripts, FileManager.default.fileExists(atPath: scripts + "/aiortc_peer.py") else {
        throw UsageError(description: "cannot find scripts/congestion (aiortc_peer.py, plot.py); give --scripts DIR")
    }
    var interpreter: String?
    let venv = URL(fileURLWithPath: scripts).deletingLastPathComponent().deletingLastPathComponent().path + "/.build/bench-venv/bin/python"
    if !noAiortc {
        let chosen = python ?? venv
        guard FileManager.default.isExecutableFile(atPath: chosen) else {
            fail(UsageError(description: "no Python with aiortc at \(chosen): run 'bash scripts/congestion/setup-bench.sh' (makes .build/bench-venv), give --python PATH, or --no-aiortc"), code: .failure)
        }
        interpreter = chosen
    }
    let plotPython = interpreter ?? (FileManager.default.isExecutableFile(atPath: venv) ? venv : "python3")
    if caseName == "both-ways" {
        guard schedule == nil, !chromium, capacity == nil else { throw UsageError(description: "--case both-ways runs its own schedules, without --schedule, --chromium or --capacity") }
    } else if let caseName {
        guard let testCase = SharedLinkBenchmark.Case(rawValue: caseName) else {
            throw UsageError(description: "--case: \(caseName) is not one of \(SharedLinkBenchmark.Case.allCases.map(\.rawValue).joined(separator: ", ")), both-ways")
        }
        guard schedule == nil, !chromium, delay == nil else { throw UsageError(description: "--case runs its own schedule, without --schedule, --chromium or --delay") }
        var options = SharedLinkBenchmark.Options(testCase: testCase, executable: executable, scripts: scripts, python: interpreter,
                                                  outputDirectory: URL(fileURLWithPath: out).standardizedFileURL.path, short: short)
        if let capacity { options.capacity = capacity * 1000 }
        if let size { options.videoSize = size }
        if let fps { options.fps = fps }
        if let burst { options.burstBytes = burst }
        options.plotPython = plotPython
        let bench = SharedLinkBenchmark(options: options) { FileHandle.standardError.write(Data("\($0)\n".utf8)) }
        print(SharedLinkBenchmark.report(try bench.run(), options: options))
        let plotProblem = bench.plot()
        if let plotProblem { print(plotProblem) }
        print("wrote \(options.outputDirectory)/shared-\(testCase.rawValue).csv\(plotProblem == nil ? ", shared-\(testCase.rawValue).png" : "") and the peers' logs")
        return
    }
    var options = CongestionBenchmark.Options(executable: executable, scripts: scripts, python: interpreter,
                                              outputDirectory: URL(fileURLWithPath: out).standardizedFileURL.path)
    options.schedule = parsedSchedule
    if caseName == "both-ways" { (options.schedule, options.reverseSchedule) = CapacitySchedule.rfc8867BothWays(short: short) }
    if chromium {
        let page = URL(fileURLWithPath: scripts).deletingLastPathComponent().appendingPathComponent("browser/page.py").path
        guard FileManager.default.fileExists(atPath: page), FileManager.default.isExecutableFile(atPath: "/usr/bin/chromium") else {
            fail(UsageError(description: "--chromium needs \(page) and Debian's chromium, chromium-driver and python3-selenium (scripts/install-deps.sh)"), code: .failure)
        }
        options.browserPage = page
    }
    options.plotPython = plotPython
    if let size { options.videoSize = size }
    if let fps { options.fps = fps }
    if let burst { options.burstBytes = burst }
    if let delay { options.delayMilliseconds = delay }
    if let codec { options.videoCodec = codec }
    let bench = CongestionBenchmark(options: options) { FileHandle.standardError.write(Data("\($0)\n".utf8)) }
    let runs = try bench.run()
    print(CongestionBenchmark.report(runs, burstBytes: options.burstBytes, delayMilliseconds: options.delayMilliseconds))
    let plotProblem = bench.plot()
    if let plotProblem { print(plotProblem) }
    print("wrote \(options.outputDirectory)/congestion.csv, phases.csv\(plotProblem == nil ? ", congestion.png" : "") and the peers' logs")
}

/// scripts/congestion beside the build folder the executable lives in (.build/<config>/callend).
private func locateScripts(from executable: String) -> String? {
    var folder = URL(fileURLWithPath: executable).deletingLastPathComponent()
    for _ in 0..<5 {
        let candidate = folder.appendingPathComponent("scripts/congestion").path
        if FileManager.default.fileExists(atPath: candidate + "/aiortc_peer.py") { return candidate }
        folder.deleteLastPathComponent()
    }
    return nil
}
