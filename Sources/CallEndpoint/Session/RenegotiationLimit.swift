/// How often a peer may make this side renegotiate: each ICE restart it offers opens an agent
/// (a thread, sockets, a TURN allocation), each new session a whole media round. A token bucket
/// (a burst of `burst`, then one per `interval`) lets every restart a real endpoint needs
/// through (callend restarts after 30 s without a path, at an address change, a quarter of a
/// second after consent is lost) and drops a flood. Pure: time is passed in.
struct RenegotiationLimit: Sendable {
    let burst: Double
    let interval: Duration
    private var tokens: Double
    private var refilledAt: Duration?

    init(burst: Int = 4, interval: Duration = .seconds(5)) {
        self.burst = Double(burst)
        self.interval = interval
        tokens = Double(burst)
    }

    /// How long after `now` the next one will be let through (zero: at once).
    func wait(at now: Duration) -> Duration {
        let available = min(burst, tokens + (refilledAt.map { (now - $0) / interval } ?? 0))
        return available >= 1 ? .zero : interval * (1 - available)
    }

    /// Whether one more renegotiation at `now` is let through (and spends it when it is).
    mutating func allow(at now: Duration) -> Bool {
        if let refilledAt {
            tokens = min(burst, tokens + (now - refilledAt) / interval)
        }
        refilledAt = now
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }
}
