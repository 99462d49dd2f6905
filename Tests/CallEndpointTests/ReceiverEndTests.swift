import Foundation
import Synchronization
import Testing
import TestSupport
@testable import CallEndpoint

/// A receiver run on a thread of its own while the test sends to it: `summary(within:)` waits
/// for it to end and returns its summary (nil when it threw or did not end in time).
final class ReceiverRun: Sendable {
    private let result = Mutex<ReceiverSummary?>(nil)
    private let done = DispatchSemaphore(value: 0)

    init(_ receiver: MediaReceiver) {
        Thread { [self] in
            let ended = try? receiver.run()
            result.withLock { $0 = ended }
            done.signal()
        }.start()
    }

    func summary(within seconds: Int, sourceLocation: SourceLocation = #_sourceLocation) -> ReceiverSummary? {
        let ended = done.wait(timeout: .now() + .seconds(seconds)) == .success
        #expect(ended, "the receiver did not end within \(seconds) s", sourceLocation: sourceLocation)
        return ended ? result.withLock { $0 } : nil
    }
}

/// How a receiver's session ended, as a flag an endpoint can key on (a WHIP publisher's RTCP BYE
/// ends its session), not only as the words of `endReason`.
@Suite struct ReceiverEndTests {
    /// Runs a receiver for up to 20 s against a sender of `senderSeconds`.
    private func receive(senderSeconds: Int) throws -> ReceiverSummary? {
        let port = try freeReceiverPorts()
        var configuration = MediaSenderConfiguration(destinationHost: "127.0.0.1", videoPort: port)
        configuration.audioPort = port + 2
        configuration.video = .pattern(width: 320, height: 240, frameRate: 30)
        configuration.duration = .seconds(senderSeconds)
        let sender = try MediaSender(configuration: configuration)
        var receiving = MediaReceiverConfiguration(description: sender.sessionDescription)
        receiving.listenHost = "127.0.0.1"
        receiving.duration = .seconds(20)
        let receiver = try MediaReceiver(configuration: receiving)
        let run = ReceiverRun(receiver)
        _ = try sender.run()
        // Long before the receiver's own 20 s: it ends on the sender's BYE.
        return run.summary(within: 10)
    }

    @Test func aSenderThatEndsSaysByeAndTheSummaryFlagsIt() throws {
        let summary = try #require(try receive(senderSeconds: 1))
        #expect(summary.endedByPeerBye && summary.endReason == "peer said bye", "\(summary.endReason)")
        #expect(summary.videoPackets > 0)
    }

    @Test func aReceiverStoppedBeforeAnyByeIsNotFlagged() throws {
        let port = try freeReceiverPorts()
        let sender = try MediaSender(configuration: MediaSenderConfiguration(destinationHost: "127.0.0.1", videoPort: port))
        var receiving = MediaReceiverConfiguration(description: sender.sessionDescription)
        receiving.listenHost = "127.0.0.1"
        let receiver = try MediaReceiver(configuration: receiving)
        receiver.stop()
        let summary = try receiver.run()
        #expect(!summary.endedByPeerBye && summary.endReason != "peer said bye", "\(summary.endReason)")
    }
}
