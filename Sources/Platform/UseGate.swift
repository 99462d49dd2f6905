import Dispatch
import Synchronization

/// Lets many threads use a resource while one closes it: `use` runs its body only while the
/// gate is open, and `close` shuts the gate and returns once every body under way has finished.
/// After `close` returns nobody is inside, so the resource can be freed (libnice's agent, freed
/// while a sending thread was still in `nice_agent_send`, was a use-after-free).
public final class UseGate: Sendable {
    private struct State {
        var closed = false
        var inside = 0
        var closerWaits = false
    }
    private let state = Mutex(State())
    private let drained = DispatchSemaphore(value: 0)

    public init() {}

    public var isClosed: Bool { state.withLock { $0.closed } }

    /// Runs `body` unless the gate is closed (then nil).
    public func use<T>(_ body: () throws -> T) rethrows -> T? {
        guard state.withLock({ s -> Bool in
            guard !s.closed else { return false }
            s.inside += 1
            return true
        }) else { return nil }
        defer {
            let last = state.withLock { s -> Bool in
                s.inside -= 1
                return s.closed && s.inside == 0 && s.closerWaits
            }
            if last { drained.signal() }
        }
        return try body()
    }

    /// Shuts the gate and waits for the bodies inside; false when it was already closed.
    /// Must not be called from inside `use` (it would wait for itself).
    @discardableResult
    public func close() -> Bool {
        let (first, wait) = state.withLock { s -> (Bool, Bool) in
            guard !s.closed else { return (false, false) }
            s.closed = true
            s.closerWaits = s.inside > 0
            return (true, s.closerWaits)
        }
        if wait { drained.wait() }
        return first
    }
}
