import Foundation

/// The tests' one wait for something another thread or process does: checks `condition` every
/// 10 ms until it holds or `seconds` pass, and says whether it held. A test orders itself by
/// what it waits for (a port bound, a line printed, an event recorded), never by a sleep; the
/// time is only how long to wait before calling it a failure.
@discardableResult
public func eventually(_ seconds: Double, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
    while ContinuousClock.now < deadline {
        if try condition() { return true }
        usleep(10_000)
    }
    return try condition()
}

/// The same from an async test: the wait gives its task's thread back to the pool.
@discardableResult
public func eventually(within timeout: Duration = .seconds(5), _ condition: () throws -> Bool) async rethrows -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try condition() { return true }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return try condition()
}
