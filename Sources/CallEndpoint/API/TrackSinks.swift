import Synchronization

/// The consumers of one published track: a call's media session and its viewers' each get every
/// picture or audio block, from the one capture (a camera or microphone opens once, however many
/// sessions send it).
final class TrackSinks<Value: Sendable>: Sendable {
    private let sinks = Mutex<(next: Int, all: [Int: @Sendable (Value) -> Void])>((0, [:]))

    /// Adds a consumer; `first` is true when it is the only one (the capture must start).
    func add(_ sink: @escaping @Sendable (Value) -> Void) -> (key: Int, first: Bool) {
        sinks.withLock { s in
            s.next += 1
            s.all[s.next] = sink
            return (s.next, s.all.count == 1)
        }
    }

    /// Removes a consumer; true when none is left.
    func remove(_ key: Int) -> Bool { sinks.withLock { s in s.all[key] = nil; return s.all.isEmpty } }

    /// Hands `value` to every consumer (outside the lock: a consumer may take its time).
    func deliver(_ value: Value) {
        let all = sinks.withLock { Array($0.all.values) }
        for sink in all { sink(value) }
    }
}
