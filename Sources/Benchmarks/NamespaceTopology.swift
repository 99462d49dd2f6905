import CallEndpoint
import Foundation

/// Hosts A (10.72.1.2) and B (10.72.2.2) in their own network namespaces, joined through a router
/// namespace R whose link toward B carries a tbf bottleneck (and, for congestion both ways, its
/// link toward A too). `remove()` deletes every namespace
/// (their veth pairs go with them); the names carry the process ID so parallel runs do not collide.
final class NamespaceTopology {
    let a: String, b: String, r: String
    /// R's links: toward A (where A's traffic arrives) and toward B (the bottleneck).
    let routerToA: String, routerToB: String
    let addressA = "10.72.1.2", addressB = "10.72.2.2"
    /// Every sending host: A first, then the extra senders (A2 at 10.72.3.2, A3 at 10.72.4.2, ...),
    /// each on its own link into R; all of them reach B through the one bottleneck.
    private(set) var senders: [(namespace: String, address: String, routerLink: String)] = []
    private var made: [String] = []
    /// Processes the topology started (the delay relay); `remove()` stops them first.
    private var started: [Process] = []

    init(extraSenders: Int = 0) throws {
        let tag = "cb\(getpid())"
        a = tag + "a"; b = tag + "b"; r = tag + "r"
        routerToA = tag + "ra"; routerToB = tag + "rb"
        senders = [(a, addressA, routerToA)]
        for i in 0..<extraSenders { senders.append((tag + "a\(i + 2)", "10.72.\(i + 3).2", tag + "r\(i + 2)")) }
        do {
            for ns in [a, b, r] + senders.dropFirst().map(\.namespace) {
                try ip(["netns", "add", ns])
                made.append(ns)
                try ip(["-n", ns, "link", "set", "lo", "up"])
            }
            try link(host: a, hostSide: tag + "ar", routerSide: routerToA, hostAddress: addressA, routerAddress: "10.72.1.1")
            try link(host: b, hostSide: tag + "br", routerSide: routerToB, hostAddress: addressB, routerAddress: "10.72.2.1")
            for (i, sender) in senders.enumerated().dropFirst() {
                try link(host: sender.namespace, hostSide: tag + "s\(i + 1)", routerSide: sender.routerLink,
                         hostAddress: sender.address, routerAddress: "10.72.\(i + 2).1")
            }
            try ExternalTool.run("ip", ["netns", "exec", r, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1"])
        } catch {
            remove()
            throw error
        }
    }

    private func link(host: String, hostSide: String, routerSide: String, hostAddress: String, routerAddress: String) throws {
        try ip(["link", "add", hostSide, "type", "veth", "peer", "name", routerSide])
        try ip(["link", "set", hostSide, "netns", host])
        try ip(["link", "set", routerSide, "netns", r])
        try ip(["-n", host, "addr", "add", hostAddress + "/24", "dev", hostSide])
        try ip(["-n", host, "link", "set", hostSide, "up"])
        try ip(["-n", r, "addr", "add", routerAddress + "/24", "dev", routerSide])
        try ip(["-n", r, "link", "set", routerSide, "up"])
        try ip(["-n", host, "route", "add", "default", "via", routerAddress])
    }

    private func ip(_ arguments: [String]) throws { try ExternalTool.run("ip", arguments) }

    /// The two directions through R: toward B (A's media) and toward A (B's media).
    enum Direction: Int, Sendable, CaseIterable {
        case towardB, towardA
    }

    /// R's link a direction leaves by (where its bottleneck sits) and the link it arrives on.
    func links(_ direction: Direction) -> (inbound: String, bottleneck: String) {
        direction == .towardB ? (routerToA, routerToB) : (routerToB, routerToA)
    }

    /// Sets a bottleneck's rate (tbf with a `burst`-byte bucket and a 300 ms queue); by default
    /// the one toward B.
    func shape(bitsPerSecond: Int, burst: Int, direction: Direction = .towardB) throws {
        try ExternalTool.run("tc", ["-n", r, "qdisc", "replace", "dev", links(direction).bottleneck, "root", "tbf", "rate", "\(bitsPerSecond / 1000)kbit",
                                    "burst", "\(burst)", "latency", "300ms"])
    }

    /// Adds `milliseconds` of one-way delay in each direction: `executable bench delay-relay`
    /// runs in R on a TUN device, and policy routing sends everything R forwards from A or B
    /// through it (the relay writes packets back into R, which then routes them normally, to the
    /// bottleneck toward B or back to A). Its output goes to `log`; `remove()` stops it.
    func addDelay(executable: String, milliseconds: Int, log: String) throws {
        let device = "\(r)d"
        let relay = try process(in: r, executable, ["bench", "delay-relay", "--device", device, "--delay-ms", "\(milliseconds)"])
        // It says so once its device exists.
        try ExternalTool.start(relay, log: log, ready: "relaying on \(device)", within: .seconds(10))
        started.append(relay)
        try ip(["-n", r, "link", "set", device, "up"])
        // Packets come back from the relay on the TUN device with A's or B's source address;
        // reverse-path filtering would drop them.
        for key in ["all", "default", device] {
            try ExternalTool.run("ip", ["netns", "exec", r, "sysctl", "-q", "-w", "net.ipv4.conf.\(key).rp_filter=0"])
        }
        try ip(["-n", r, "route", "add", "default", "dev", device, "table", "100"])
        for inbound in [routerToA, routerToB] { try ip(["-n", r, "rule", "add", "iif", inbound, "lookup", "100"]) }
    }

    /// The round trip from A to B as ping measures it (three pings), for the log.
    func roundTrip() throws -> String {
        let output = try ExternalTool.run("ip", ["netns", "exec", a, "ping", "-c", "3", "-i", "0.2", "-q", addressB])
        return output.output.split(separator: "\n").last { $0.contains("min/avg/max") }.map(String.init) ?? "unknown"
    }

    typealias Counters = (sent: UInt64, delivered: UInt64, packets: UInt64, drops: UInt64, backlog: Int)

    /// A shell in R that prints a direction's counters every `interval` seconds, one line each:
    /// the bytes R received from the sending host, then the bottleneck tbf's statistics as JSON.
    /// One long-lived process (reading sysfs with a shell builtin) instead of two spawns per
    /// sample, which on a busy machine took longer than the interval.
    func sampler(interval: Double, direction: Direction = .towardB) throws -> Process {
        let (inbound, bottleneck) = links(direction)
        let script = "while :; do read rx < /sys/class/net/\(inbound)/statistics/rx_bytes; echo \"$rx $(tc -s -j qdisc show dev \(bottleneck))\"; sleep \(interval); done"
        return try process(in: r, "/bin/sh", ["-c", script])
    }

    /// Counts, in B, the bytes that arrive from each sender (after the bottleneck): one iptables
    /// rule per sender address with no target, read by `flowSampler`.
    func countArrivalsPerSender() throws {
        for sender in senders {
            try ExternalTool.run("ip", ["netns", "exec", b, "iptables", "-w", "-A", "INPUT", "-s", sender.address])
        }
    }

    /// Like `sampler`, for several senders: each line holds the bytes B received from each sender
    /// (iptables' counters in B, in `senders` order), then ';', then the tbf's JSON.
    func flowSampler(interval: Double) throws -> Process {
        let script = "while :; do c=$(ip netns exec \(b) iptables -w -nvxL INPUT | awk 'NR > 2 { printf \"%s \", $2 }'); "
            + "echo \"$c;$(tc -s -j qdisc show dev \(routerToB))\"; sleep \(interval); done"
        return try process(in: r, "/bin/sh", ["-c", script])
    }

    /// Parses one line of `flowSampler`: bytes delivered per sender, and the tbf's counters.
    static func flowCounters(line: String, senders: Int) throws -> (perSender: [UInt64], tbf: Counters) {
        let parts = line.split(separator: ";", maxSplits: 1)
        guard parts.count == 2 else { throw ExternalTool.Failure(description: "unexpected counters from the flow sampler: \(line)") }
        let bytes = parts[0].split(separator: " ").compactMap { UInt64($0) }
        guard bytes.count == senders else { throw ExternalTool.Failure(description: "expected \(senders) per-sender counters: \(line)") }
        return (bytes, try counters(line: "0 " + parts[1]))
    }

    /// Parses one line of the sampler: bytes received from A, and the tbf's bytes, packets,
    /// drops, backlog.
    static func counters(line: String) throws -> Counters {
        let parts = line.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, let received = UInt64(parts[0]),
              let qdiscs = try JSONSerialization.jsonObject(with: Data(parts[1].utf8)) as? [[String: Any]],
              let tbf = qdiscs.first(where: { $0["kind"] as? String == "tbf" }),
              let bytes = (tbf["bytes"] as? NSNumber)?.uint64Value, let packets = (tbf["packets"] as? NSNumber)?.uint64Value,
              let drops = (tbf["drops"] as? NSNumber)?.uint64Value, let backlog = (tbf["backlog"] as? NSNumber)?.intValue else {
            throw ExternalTool.Failure(description: "unexpected counters from the sampler: \(line)")
        }
        return (received, bytes, packets, drops, backlog)
    }

    /// A process in namespace `ns`.
    func process(in ns: String, _ executable: String, _ arguments: [String], environment: [String: String] = [:]) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try ExternalTool.locate("ip"))
        process.arguments = ["netns", "exec", ns, executable] + arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        process.standardInput = FileHandle.nullDevice
        return process
    }

    func remove() {
        for process in started where process.isRunning { process.terminate() }
        for process in started { process.waitUntilExit() }
        started = []
        for ns in made { _ = try? ExternalTool.run("ip", ["netns", "del", ns]) }
        made = []
    }

    deinit { remove() }
}
