import Dispatch
import Synchronization

/// A queue one thread waits on: producers append from any thread, the consumer blocks until
/// something is there (or a deadline passes) and takes everything at once. Bounded: past
/// `capacity` an append is refused, so a consumer that falls behind cannot grow it without end.
public final class BlockingQueue<Element: Sendable>: Sendable {
    public let capacity: Int
    private let items = Mutex<(elements: [Element], closed: Bool)>(([], false))
    private let signal = DispatchSemaphore(value: 0)

    public init(capacity: Int = .max) { self.capacity = capacity }

    /// False when the queue is full or closed (the element is not taken).
    @discardableResult
    public func append(_ element: Element) -> Bool {
        let (accepted, first) = items.withLock { q -> (Bool, Bool) in
            guard !q.closed, q.elements.count < capacity else { return (false, false) }
            q.elements.append(element)
            return (true, q.elements.count == 1)
        }
        // Only the first element of a batch wakes the consumer; it takes the rest with it.
        if first { signal.signal() }
        return accepted
    }

    /// Everything queued, waiting up to `timeout` (forever when nil) for the first element;
    /// empty when the deadline passed or the queue was closed and is drained.
    public func take(timeout: Duration? = nil) -> [Element] {
        while true {
            let (batch, closed) = items.withLock { q -> ([Element], Bool) in
                defer { q.elements.removeAll() }
                return (q.elements, q.closed)
            }
            if !batch.isEmpty || closed { return batch }
            let signalled: Bool
            if let timeout {
                signalled = signal.wait(for: timeout)
            } else {
                signal.wait()
                signalled = true
            }
            if !signalled { return items.withLock { q in defer { q.elements.removeAll() }; return q.elements } }
        }
    }

    public var count: Int { items.withLock { $0.elements.count } }

    /// No more appends; a waiting consumer wakes and takes what is left.
    public func close() {
        items.withLock { $0.closed = true }
        signal.signal()
    }
}
