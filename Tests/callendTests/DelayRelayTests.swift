import Foundation
import Testing
@testable import Benchmarks
import CallEndpoint

/// The bench's user-space delay: a relay on a TUN device in the router namespace, with the
/// router's forwarded traffic routed through it. Needs root (namespaces, /dev/net/tun); CI runs
/// as root.
@Suite(.serialized, .timeLimit(.minutes(1)), .enabled(if: getuid() == 0, "needs root for network namespaces"))
struct DelayRelayTests {
    func averageRoundTrip(_ topology: NamespaceTopology) throws -> Double {
        // "rtt min/avg/max/mdev = 60.1/60.2/60.4/0.1 ms"
        let line = try topology.roundTrip()
        let numbers = line.split(separator: "=").last?.split(separator: "/").compactMap { Double($0.trimmingCharacters(in: .whitespaces)) } ?? []
        return try #require(numbers.count >= 2 ? numbers[1] : nil, "\(line)")
    }

    @Test func thirtyMillisecondsEachWayMakeASixtyMillisecondRoundTrip() throws {
        let binary = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("callend").path
        let topology = try NamespaceTopology()
        defer { topology.remove() }
        let direct = try averageRoundTrip(topology)
        #expect(direct < 10, "without the relay: \(direct) ms")
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("callend-relay-\(UUID().uuidString).log").path
        defer { try? FileManager.default.removeItem(atPath: log) }
        try topology.addDelay(executable: binary, milliseconds: 30, log: log)
        let delayed = try averageRoundTrip(topology)
        #expect(delayed >= 59 && delayed < 75, "through the relay: \(delayed) ms")
    }

    @Test func aBadDeviceNameIsAnError() {
        #expect(throws: DelayRelay.RelayError.self) { try DelayRelay(device: "", delay: .milliseconds(10)) }
        #expect(throws: DelayRelay.RelayError.self) { try DelayRelay(device: String(repeating: "x", count: 40), delay: .milliseconds(10)) }
    }
}
