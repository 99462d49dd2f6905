import Synchronization

/// A callback that one thread sets and others call: the closure is kept in a class box behind a
/// lock. (Stored directly as a `Mutex`'s value, a function is reabstracted on every `withLock`
/// that touches it: the closure written back is wrapped in two more thunks each time, so a sink
/// read 30 times a second grew a chain of calls without end, and a capture thread's stack
/// reached 5 MB after 15 minutes of a call, on its way to overflowing.)
public final class LockedCallback<Input: Sendable>: Sendable {
    private final class Box: Sendable {
        let call: @Sendable (Input) -> Void
        init(_ call: @escaping @Sendable (Input) -> Void) { self.call = call }
    }
    private let box = Mutex<Box?>(nil)

    public init(_ call: (@Sendable (Input) -> Void)? = nil) { box.withLock { $0 = call.map(Box.init) } }

    /// Replaces the callback (nil: none).
    public func set(_ call: (@Sendable (Input) -> Void)?) { box.withLock { $0 = call.map(Box.init) } }

    public var isSet: Bool { box.withLock { $0 != nil } }

    /// Calls the callback, if there is one, outside the lock; says whether there was.
    @discardableResult
    public func callAsFunction(_ input: Input) -> Bool {
        guard let current = box.withLock({ $0 }) else { return false }
        current.call(input)
        return true
    }
}
