import Platform
import MediaCore
/// Records when each packet with a transport-wide sequence number arrived (video, RTX, probe
/// padding and audio share one sequence) and reports them in transport-cc feedback every 50 ms:
/// what the sender's bandwidth estimator reads.
struct TransportCCRecorder: Sendable {
    static let interval: Duration = .milliseconds(50)
    let extensionID: UInt8
    let senderSSRC: UInt32
    private var generator: TransportFeedbackGenerator?
    private var lastFeedback: MediaTime?
    /// Arrivals not yet reported.
    private var pending = false

    init(extensionID: UInt8, senderSSRC: UInt32) { (self.extensionID, self.senderSSRC) = (extensionID, senderSSRC) }

    mutating func received(_ packet: RTPPacket, at arrival: MediaTime) {
        guard let data = packet.headerExtension(id: extensionID), let sequence = TransportSequenceNumber.decode(data) else { return }
        if generator == nil { generator = TransportFeedbackGenerator(senderSSRC: senderSSRC, mediaSSRC: packet.ssrc) }
        generator?.received(sequence: sequence, arrivalMicroseconds: arrival.microseconds)
        pending = true
    }

    /// When feedback is next due (nil while every arrival has been reported).
    var nextDue: MediaTime? { pending ? (lastFeedback.map { $0 + Self.interval } ?? .zero) : nil }

    /// The feedback due now, if any.
    mutating func due(at now: MediaTime) -> [TransportCCFeedback] {
        guard let due = nextDue, now >= due else { return [] }
        pending = false
        guard let feedback = generator?.makeFeedback(), !feedback.isEmpty else { return [] }
        lastFeedback = now
        return feedback
    }
}
