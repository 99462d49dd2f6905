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
        /// From a media thread: an encoded frame, a picture shown, sound played.
        case event(SessionEvent)
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

    /// An event for the session core, from a media thread.
    func post(_ event: SessionEvent) { inputs.append(.event(event)) }

    /// Makes the loop run its steps now (it must stop, or look again).
    func wake() { inputs.append(.wake) }

    /// Runs `step` with what came until it returns nil; otherwise it returns how long the loop
    /// may wait for the next input.
    func run(_ step: ([Input]) -> Duration?) {
        var wait: Duration = .zero
        while true {
            let batch = inputs.take(timeout: max(wait, .microseconds(100)))
            guard let next = step(batch) else { return }
            wait = next
        }
    }
}
