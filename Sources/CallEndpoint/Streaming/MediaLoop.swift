import Dispatch
import MediaCore
import Platform
import RTPTransport
import Synchronization

/// The one thread that runs a media session's network side: what the transport received, the
/// pacer, feedback and reports. The transport's thread (libnice's, which also answers STUN and
/// consent checks) only queues each packet here with the time it came, and the media threads
/// (capture and encode, decode, audio playout) wake the loop when they queue packets. It waits
/// on the queue until the earliest deadline its steps give; nothing polls.
///
/// A loop in a `MediaLoopGroup` has no thread of its own: the group's one thread runs the steps
/// of all its sessions (the viewers of one endpoint), so that a shared encoder's frame wakes one
/// thread, not one per viewer.
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
    /// In a group: what came, for the group's thread to take, and whether the group was told.
    private let grouped = Mutex<(inputs: [Input], told: Bool)>(([], false))
    let group: MediaLoopGroup?
    let clock = MonotonicClock()

    init(group: MediaLoopGroup? = nil) { self.group = group }

    /// A received packet, from the transport's thread: stamped with its arrival, queued.
    func deliver(_ packet: ReceivedPacket) { append(.packet(packet, queuedAt: clock.now)) }

    /// An event for the session core, from a media thread.
    func post(_ event: SessionEvent) { append(.event(event)) }

    /// Makes the loop run its steps now (it must stop, or look again).
    func wake() { append(.wake) }

    private func append(_ input: Input) {
        guard let group else {
            inputs.append(input)
            return
        }
        // The group hears of a loop once until it takes what came.
        let tell = grouped.withLock { g -> Bool in
            guard g.inputs.count < Self.capacity else { return false }
            g.inputs.append(input)
            defer { g.told = true }
            return !g.told
        }
        if tell { group.ready(self) }
    }

    /// What came, once there is something or `wait` (at least 100 µs) has passed. The session
    /// calls it in a plain loop, not through a closure: a closure would capture the session's
    /// core (a large struct) in a box, and every read of it (`snapshot`, `nextDeadline`) copied
    /// the whole core, retaining everything in it, on every wake-up.
    func take(waiting wait: Duration) -> [Input] {
        inputs.take(timeout: max(wait, .microseconds(100)))
    }

    /// In a group: what came, without waiting (the group's thread).
    func takeGrouped() -> [Input] {
        grouped.withLock { g in
            defer { (g.inputs, g.told) = ([], false) }
            return g.inputs
        }
    }
}

/// One thread for the media loops of many sessions: it runs a session's step when its loop has
/// inputs or its deadline has come, and sleeps until the earliest deadline of all or the next
/// input. The thread starts with the first session and ends with the last.
final class MediaLoopGroup: Sendable {
    /// A session's step: its inputs in, how long it may wait out (nil: it has ended).
    typealias Step = ([MediaLoop.Input]) -> Duration?

    private final class Member: @unchecked Sendable {  // `step` and `wakeAt` belong to the group's thread; `done` is thread-safe
        let loop: MediaLoop
        let step: Step
        var wakeAt: MediaTime
        let done = DispatchSemaphore(value: 0)
        init(loop: MediaLoop, step: @escaping Step, now: MediaTime) { (self.loop, self.step, wakeAt) = (loop, step, now) }
    }

    private let name: String
    /// Loops with inputs (an identifier may come more than once).
    private let ready = BlockingQueue<ObjectIdentifier>()
    /// Sessions joining, and whether the thread runs.
    private let state = Mutex<(joining: [Member], running: Bool)>(([], false))
    private let clock = MonotonicClock()

    init(threadName: String) { name = threadName }

    fileprivate func ready(_ loop: MediaLoop) { ready.append(ObjectIdentifier(loop)) }

    /// Runs `step` on the group's thread with what `loop` takes, until it returns nil; the
    /// calling thread waits for that.
    func run(_ loop: MediaLoop, step: @escaping Step) {
        let member = Member(loop: loop, step: step, now: clock.now)
        let start = state.withLock { s -> Bool in
            s.joining.append(member)
            defer { s.running = true }
            return !s.running
        }
        ready.append(ObjectIdentifier(loop))
        if start { startThread(named: name) { [self] in serve() } }
        member.done.wait()
    }

    private func serve() {
        var members: [ObjectIdentifier: Member] = [:]
        while true {
            let joined = state.withLock { s -> [Member]? in
                if s.joining.isEmpty && members.isEmpty {
                    s.running = false
                    return nil
                }
                defer { s.joining.removeAll() }
                return s.joining
            }
            guard let joined else { return }
            for member in joined { members[ObjectIdentifier(member.loop)] = member }
            var now = clock.now
            let earliest = members.values.map(\.wakeAt).min() ?? now
            let inputs = Set(ready.take(timeout: earliest > now ? max(earliest - now, .microseconds(100)) : .zero))
            now = clock.now
            for (id, member) in members where inputs.contains(id) || member.wakeAt <= now {
                if let wait = member.step(member.loop.takeGrouped()) {
                    member.wakeAt = clock.now + max(wait, .microseconds(100))
                } else {
                    members[id] = nil
                    member.done.signal()
                }
            }
        }
    }
}
