import CallEndpoint
import Foundation
import Platform

/// What a sampler process in the router prints, a reading a line (its counters every 100 ms),
/// each stamped when it arrived. A wait for the next reading is woken by it, not by a timer.
final class SampleFeed<Value: Sendable>: @unchecked Sendable {  // `lock` guards `all`
    typealias Reading = (at: MediaTime, value: Value)
    private let lock = NSLock()
    private var all: [Reading] = []
    private let arrived = DispatchSemaphore(value: 0)
    private let process: Process

    /// Starts `process`; a line `parse` cannot read is left out.
    init(process: Process, clock: MonotonicClock, parse: @escaping @Sendable (String) -> Value?) throws {
        self.process = process
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        ExternalTool.forEachLine(of: out, clock: clock) { [self] line, at in
            guard let value = parse(line) else { return }
            lock.lock(); all.append((at, value)); lock.unlock()
            arrived.signal()
        }
    }

    var latest: Reading? { lock.lock(); defer { lock.unlock() }; return all.last }
    var readings: [Reading] { lock.lock(); defer { lock.unlock() }; return all }

    /// Waits for a reading not waited for yet; false when none comes before `deadline`.
    func next(before deadline: MediaTime) -> Bool { arrived.wait(for: deadline - .now) }

    func stop() {
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
    }
}
