import Dispatch
import Foundation
import Synchronization
import Testing
@testable import RTPTransport

@Suite struct UDPSocketTests {
    /// A receive thread that is busy (here: held in the handler until the test lets it go) reads
    /// the next datagram late; the age the kernel stamp gives must cover that wait, or a busy
    /// receiver looks like a queue on the path to the congestion controller. Judged against the
    /// test's own clock readings around each step, not against how fast the machine is.
    @Test func datagramAgeCountsTheTimeBeforeTheReceiverReadIt() throws {
        let receiver = try UDPSocket(bindHost: "127.0.0.1")
        let sender = try UDPSocket(bindHost: "127.0.0.1")
        let seen = Mutex<[(age: Duration, handledAt: ContinuousClock.Instant)]>([])
        let firstHandled = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        receiver.startReceiving(name: "age-test") { _, _, age in
            let first = seen.withLock { $0.append((age, ContinuousClock.now)); return $0.count == 1 }
            if first {
                firstHandled.signal()
                release.wait()
            }
        }
        defer { receiver.close() }
        let destination = try UDPAddress(host: "127.0.0.1", port: receiver.localPort)
        let firstSent = ContinuousClock.now
        try sender.send([1], to: destination)
        #expect(firstHandled.wait(timeout: .now() + 30) == .success)
        // The datagram cannot have been queued before this: the bound for its age.
        let beforeSecond = ContinuousClock.now
        try sender.send([2], to: destination)
        // From when the datagram is in the receiver's queue (on a loaded machine loopback may
        // deliver it later than send returns, and the kernel stamps it then).
        var pending: Int32 = 0
        for _ in 0..<3000 where ioctl(receiver.fd, UInt(FIONREAD), &pending) == 0 && pending == 0 { usleep(1_000) }
        let secondSent = ContinuousClock.now
        #expect(pending > 0, "the second datagram reached the receiver's queue")
        usleep(100_000)  // the handler is busy this long (the scenario, not an ordering)
        let released = ContinuousClock.now
        release.signal()
        for _ in 0..<3000 where seen.withLock({ $0.count }) < 2 { usleep(10_000) }
        let (first, second) = try seen.withLock { s in
            try #require(s.count == 2)
            return (s[0], s[1])
        }
        let slack = Duration.milliseconds(2)
        #expect(first.age <= first.handledAt - firstSent + slack, "no older than the time since it was sent: \(first.age)")
        #expect(second.age >= released - secondSent - slack, "waited behind the busy handler: \(second.age), held \(released - secondSent)")
        // Not older than the time since it was sent (secondSent comes after the poll that saw it
        // queued, a few milliseconds late on a loaded machine: CI measured 110.0 ms against 109.0).
        #expect(second.age <= second.handledAt - beforeSecond + slack, "\(second.age), handled \(second.handledAt - beforeSecond) after it was sent")
    }

    @Test func controlDataWithoutATimestampGivesNone() {
        let empty = [UInt8](repeating: 0, count: 64)
        #expect(empty.withUnsafeBytes { UDPSocket.receiveTimestamp($0) } == nil)
        #expect([UInt8]().withUnsafeBytes { UDPSocket.receiveTimestamp($0) } == nil)
    }
}
