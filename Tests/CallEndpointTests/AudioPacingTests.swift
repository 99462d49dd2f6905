import Foundation
import RTPTransport
import Synchronization
import Testing
@testable import CallEndpoint

/// Records what a sender sends, in order, instead of putting it on a network.
final class RecordingTransport: PacketTransport {
    let sent = Mutex<[(kind: MediaKind, packet: RTPPacket)]>([])
    var overhead: Int { 10 }
    func sendRTP(_ packet: [UInt8], kind: MediaKind) -> Bool {
        if let parsed = try? RTPPacket(parsing: packet) { sent.withLock { $0.append((kind, parsed)) } }
        return true
    }
    func sendRTCP(_ packet: [UInt8], kind: MediaKind) -> Bool { true }
    func startDelivering(to handler: @escaping @Sendable (ReceivedPacket) -> Void) {}
    func close() {}
}

/// Audio goes through the pacer's first lane, so it carries transport-wide sequence numbers and
/// the bandwidth estimate counts it (RFC 8888's premise: feedback about every packet sent).
@Suite struct AudioPacingTests {
    func run(video: MediaSenderConfiguration.VideoSource) throws -> [(kind: MediaKind, packet: RTPPacket)] {
        var configuration = MediaSenderConfiguration(destinationHost: "127.0.0.1", videoPort: 9)
        configuration.video = video
        configuration.audio = .tone
        configuration.duration = .milliseconds(600)
        configuration.transportSequenceExtensionID = 3
        configuration.encodingMode = .auto
        let transport = RecordingTransport()
        let sender = try MediaSender(configuration: configuration, transport: transport)
        let stats = try sender.run()
        #expect(stats.audioPackets > 10)
        return transport.sent.withLock { $0 }
    }

    @Test func audioAndVideoShareOneTransportWideSequence() throws {
        let sent = try run(video: .pattern(width: 320, height: 240, frameRate: 30))
        let audio = sent.filter { $0.kind == .audio }
        #expect(audio.count > 10 && audio.allSatisfy { $0.packet.payloadType == 111 })
        let numbers = sent.map { $0.packet.headerExtension(id: 3).flatMap(TransportSequenceNumber.decode) }
        #expect(numbers.allSatisfy { $0 != nil }, "every packet, audio included, has a transport-wide number")
        let values = numbers.compactMap { $0 }
        // Numbered in the order they left, one sequence for both kinds.
        #expect(zip(values, values.dropFirst()).allSatisfy { $1 == $0 &+ 1 })
    }

    @Test func anAudioOnlySenderStillSendsThroughThePacer() throws {
        let sent = try run(video: .none)
        #expect(sent.count > 10 && sent.allSatisfy { $0.kind == .audio && $0.packet.headerExtension(id: 3) != nil })
    }

    /// The receiver reports audio's transport-wide numbers in its feedback too: the sender's
    /// estimate must not read every audio packet as lost (a fifth of the packets, on a clean path).
    @Test func theReceiverReportsAudioInItsFeedback() throws {
        let port = try freeReceiverPorts()
        var configuration = MediaSenderConfiguration(destinationHost: "127.0.0.1", videoPort: port)
        configuration.audioPort = port + 2
        configuration.video = .pattern(width: 320, height: 240, frameRate: 30)
        configuration.duration = .seconds(3)
        configuration.transportSequenceExtensionID = 3
        let decisions = Mutex<[EncodingDecision]>([])
        configuration.onDecision = { d in decisions.withLock { $0.append(d) } }
        let sender = try MediaSender(configuration: configuration)
        var receiving = MediaReceiverConfiguration(description: sender.sessionDescription)
        receiving.listenHost = "127.0.0.1"
        receiving.transportSequenceExtensionID = 3
        receiving.duration = .seconds(6)
        let receiver = try MediaReceiver(configuration: receiving)
        let run = ReceiverRun(receiver)
        let stats = try sender.run()
        receiver.stop()
        _ = run.summary(within: 10)
        #expect(stats.audioPackets > 100 && stats.transportFeedbackReceived > 10)
        let made = decisions.withLock { $0 }
        // Audio read as lost would be a fifth of the packets from the first feedback on. A loaded
        // machine's loopback may drop a few (a receiver starved past its socket buffer): FEC
        // turned on for at most 5 % is that, not audio read as lost.
        // A "loss" decision that raises the rate is the loss-based bound lifting as feedback comes
        // (seen first on a loaded machine, where it was the limiting bound at the first report);
        // a cut by loss is what audio read as lost makes.
        let fecOnsets = made.filter { $0.change == "fec" && $0.from == "0%" }.compactMap { Int($0.to.dropLast()) }
        let lossCuts = made.filter { $0.cause == "loss" && $0.change == "video-bitrate" && (Int($0.to.dropLast()) ?? 0) < (Int($0.from.dropLast()) ?? 0) }
        #expect(lossCuts.isEmpty && fecOnsets.allSatisfy { $0 <= 5 }, "loss where there was none: \(made)")
        #expect((stats.estimateBitrate ?? 0) >= 800_000)
    }
}
