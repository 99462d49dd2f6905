import MediaCore
import Platform
import RTPTransport
import Synchronization

/// Drives a `SessionController` with a transport's events while media runs, on a thread of its
/// own, for sessions whose signaling gives the controller nothing else (a mesh peer, a Janus
/// session): lines go to the log, every other action to `perform`.
final class SessionWatcher: @unchecked Sendable {  // the queue is thread-safe and the flag atomic; the controller lives on the thread
    private let events: BlockingQueue<BundleTransport.Event?>
    private let running = Atomic<Bool>(true)
    private let finished = BlockingQueue<Bool>(capacity: 1)

    /// `events` is the transport's queue (a nil event only wakes).
    init(_ configuration: SessionController.Configuration, thread: String, events: BlockingQueue<BundleTransport.Event?>,
         log: @escaping @Sendable (LogMessage) -> Void, perform: @escaping @Sendable (SessionController.Action) -> Void) {
        self.events = events
        startThread(named: thread) { [self] in
            var controller = SessionController(configuration)
            let clock = MonotonicClock()
            func run(_ actions: [SessionController.Action]) {
                for action in actions {
                    if case .log(let message) = action { log(message) } else { perform(action) }
                }
            }
            while running.load(ordering: .relaxed) {
                // Until the next event, or the controller's next moment.
                let now = clock.now
                for event in events.take(timeout: controller.nextTick.map { $0 > now ? $0 - now : .zero }) {
                    if let event { run(controller.handle(.transport(event), at: clock.now)) }
                }
                if let due = controller.nextTick, clock.now >= due { run(controller.handle(.tick(addressesChanged: nil), at: clock.now)) }
            }
            _ = finished.append(true)
        }
    }

    /// Ends the thread and waits for it.
    func stop() {
        guard running.exchange(false, ordering: .relaxed) else { return }
        _ = events.append(nil)
        _ = finished.take()
    }
}
