import MediaCore
import Platform
import RTPTransport

/// The one thread that runs a media session's network side: what the transport received, the
/// pacer, feedback and reports. The transport's thread (libnice's, which also answers STUN and
/// consent checks) only queues each packet here with the time it came, and the media threads
/// (capture and encode, decode, audio playout) wake the loop when they queue packets. It waits
/// on the queue until the earliest deadline its steps give; nothing polls.
final class MediaLoop: Sendable {
    enum Input: Sendable {
        case packet(ReceivedPacket, queuedAt: MediaTime)
        case wake
    }
    /// About 2 s of a 2.5 Mbit/s call's packets: a loop that falls that far behind drops, it
    /// does not buffer without end.
    static let capacity = 4096
    private let inputs = BlockingQueue<Input>(capacity: MediaLoop.capacity)
    let clock = MonotonicClock()

    /// A received packet, from the transport's thread: stamped with its arrival, queued.
    func deliver(_ packet: ReceivedPacket) {
        inputs.append(.packet(packet, queuedAt: clock.now))
    }

    /// Makes the loop run its steps now (packets were queued for the pacer, or it must stop).
    func wake() { inputs.append(.wake) }

    /// Runs `step` with what came (packets with their age since arrival) until it returns nil;
    /// otherwise it returns how long the loop may wait for the next input.
    func run(_ step: ([ReceivedPacket]) -> Duration?) {
        var wait: Duration = .zero
        while true {
            let batch = inputs.take(timeout: max(wait, .microseconds(100)))
            let now = clock.now
            var packets: [ReceivedPacket] = []
            for input in batch {
                guard case .packet(var packet, let queuedAt) = input else { continue }
                packet.age += now - queuedAt
                packets.append(packet)
            }
            guard let next = step(packets) else { return }
            wait = next
        }
    }
}
