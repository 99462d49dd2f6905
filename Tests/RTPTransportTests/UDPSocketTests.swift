import Foundation
import Synchronization
import Testing
@testable import RTPTransport

@Suite struct UDPSocketTests {
    /// A receive thread that is busy (here: 150 ms in the handler) reads the next datagram late;
    /// the age the kernel stamp gives must cover that wait, or a busy receiver looks like a queue
    /// on the path to the congestion controller.
    @Test func datagramAgeCountsTheTimeBeforeTheReceiverReadIt() throws {
        let receiver = try UDPSocket(bindHost: "127.0.0.1")
        let sender = try UDPSocket(bindHost: "127.0.0.1")
        let ages = Mutex<[Duration]>([])
        receiver.startReceiving(name: "age-test") { _, _, age in
            let first = ages.withLock { $0.append(age); return $0.count == 1 }
            if first { usleep(150_000) }
        }
        defer { receiver.close() }
        let destination = try UDPAddress(host: "127.0.0.1", port: receiver.localPort)
        try sender.send([1], to: destination)
        usleep(20_000)
        try sender.send([2], to: destination)
        for _ in 0..<100 where ages.withLock({ $0.count }) < 2 { usleep(10_000) }
        let seen = ages.withLock { $0 }
        try #require(seen.count == 2)
        #expect(seen[0] < .milliseconds(50), "read at once: \(seen[0])")
        #expect(seen[1] >= .milliseconds(100), "waited behind the busy handler: \(seen[1])")
    }

    @Test func controlDataWithoutATimestampGivesNone() {
        let empty = [UInt8](repeating: 0, count: 64)
        #expect(empty.withUnsafeBytes { UDPSocket.receiveTimestamp($0) } == nil)
        #expect([UInt8]().withUnsafeBytes { UDPSocket.receiveTimestamp($0) } == nil)
    }
}
