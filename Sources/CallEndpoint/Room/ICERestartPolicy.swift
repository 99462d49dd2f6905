/// When a call restarts ICE through signaling (RFC 8445 §9). A lost path is first looked for
/// again without signaling (the transport rechecks every second, which is what brings media back
/// after a stall of a few seconds); a restart gathers new candidates and so answers what rechecks
/// cannot: a new local address, a NAT binding or TURN allocation that expired during a long
/// outage. Both sides run this; the round's offerer restarts first after an outage and its peer a
/// little later, so that the two rarely offer at once (and when they do, the offerer's wins).
struct ICERestartPolicy: Sendable {
    /// The round's offerer (the controlling agent).
    let offerer: Bool
    /// After consent was lost (libnice: 10 s of silence), this much more before a restart: about
    /// 30 s of outage in all.
    var afterLoss: Duration { offerer ? .seconds(20) : .seconds(25) }
    /// A restart that has not brought the path back is tried again after this.
    static let retry: Duration = .seconds(30)

    private(set) var lostSince: ContinuousClock.Instant?
    private(set) var lastRestart: ContinuousClock.Instant?

    init(offerer: Bool) { self.offerer = offerer }

    mutating func pathLost(at now: ContinuousClock.Instant) { if lostSince == nil { lostSince = now } }
    mutating func pathRestored() { lostSince = nil }
    mutating func restarted(at now: ContinuousClock.Instant) { lastRestart = now }

    /// Whether to restart now. A change of local addresses restarts at once (one restart a
    /// second at most); a lost path after `afterLoss`, then every `retry` while it stays lost.
    func shouldRestart(at now: ContinuousClock.Instant, addressesChanged: Bool) -> Bool {
        if addressesChanged { return lastRestart.map { now - $0 >= .seconds(1) } ?? true }
        guard let lostSince, now - lostSince >= afterLoss else { return false }
        return lastRestart.map { now - $0 >= Self.retry || $0 < lostSince } ?? true
    }
}
