import Dispatch

/// Waits that end after a `Duration`: the one place below the executables where Dispatch's
/// own time type is made (the clock check in SourceAuditTests allows it here only).
extension DispatchSemaphore {
    /// Waits up to `duration` (none when zero or less); true when signalled.
    @discardableResult
    public func wait(for duration: Duration) -> Bool {
        let nanoseconds = max(0, duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000)
        return wait(timeout: .now() + .nanoseconds(Int(min(nanoseconds, Int64(Int.max))))) == .success
    }
}
