import Platform
import MediaCore
import RTPTransport

/// When a call restarts ICE through signaling (RFC 8445 §9). A lost path is first looked for
/// again without signaling (the transport rechecks every second, which is what brings media back
/// after a stall of a few seconds); a restart gathers new candidates and so answers what rechecks
/// cannot: a new local address, a NAT binding or TURN allocation that expired during a long
/// outage. Both sides run this; the round's offerer restarts first after an outage and its peer a
/// little later, so that the two rarely offer at once (and when they do, the offerer's wins).
///
/// A path is lost only when consent expires (`PathConsent`: 30 s without anything authenticated
/// from the peer, so never from random loss) or libnice fails the pair (50 s without an answered
/// keepalive): by then the path is really gone, and a restart follows a few seconds of rechecks.
///
/// One case does not wait: the path lost while the peer's media arrives again (an outage one
/// way only, or one that ended just as consent expired) and the recheck has not found a pair:
/// the controlling side's recheck nominates again at once, but the controlled side's waits for
/// the peer's next keepalive (up to 6 s). A restart brings it back in one signaling round trip;
/// the recheck gets a quarter of a second first (it is immediate).
struct ICERestartPolicy: Sendable {
    /// The round's offerer (the controlling agent).
    let offerer: Bool
    /// After the path was lost (30 s of silence), this much more of rechecks before a restart.
    var afterLoss: Duration { offerer ? .seconds(2) : .seconds(5) }
    /// A restart that has not brought the path back is tried again after this.
    static let retry: Duration = .seconds(30)

    private(set) var lostSince: MediaTime?
    private(set) var lastRestart: MediaTime?
    private(set) var lastHeard: MediaTime?
    /// The path lost while the peer is heard: this long for the recheck before a restart.
    static let heardGrace: Duration = .milliseconds(250)
    /// ... and a restart for that reason at most this often.
    static let heardRetry: Duration = .seconds(5)

    init(offerer: Bool) { self.offerer = offerer }

    mutating func pathLost(at now: MediaTime) { if lostSince == nil { lostSince = now } }
    mutating func pathRestored() { lostSince = nil }
    /// Authenticated media from the peer arrived.
    mutating func heard(at now: MediaTime) { lastHeard = now }
    /// Why `shouldRestart` says yes for a lost path, for the log.
    func reason(at now: MediaTime) -> String {
        guard let lostSince else { return "local addresses changed" }
        if peerHeardSinceLoss { return "the path lost while the peer's media arrives" }
        return "no path for \(Int(((now - lostSince) + PathConsent.defaultExpiry).inSeconds)) s"
    }
    private var peerHeardSinceLoss: Bool {
        guard let lostSince, let lastHeard else { return false }
        return lastHeard >= lostSince + Self.heardGrace
    }
    mutating func restarted(at now: MediaTime) { lastRestart = now }

    /// Whether to restart now. A change of local addresses restarts at once (one restart a
    /// second at most); a lost path after `afterLoss`, then every `retry` while it stays lost;
    /// a lost path that still carries the peer's media a quarter of a second after the loss, at once.
    /// The first moment `shouldRestart` says yes with no other change (nil: not while the path
    /// works): what a driver waits for instead of asking every few milliseconds.
    var nextRestart: MediaTime? {
        guard let lostSince else { return nil }
        let since = lastRestart.flatMap { $0 < lostSince ? nil : $0 }
        if peerHeardSinceLoss { return since.map { $0 + Self.heardRetry } ?? lostSince }
        return max(lostSince + afterLoss, since.map { $0 + Self.retry } ?? lostSince)
    }

    /// When a change of local addresses may restart: a second after the last restart (nil: at once).
    var addressRestart: MediaTime? { lastRestart.map { $0 + .seconds(1) } }

    func shouldRestart(at now: MediaTime, addressesChanged: Bool) -> Bool {
        if addressesChanged { return lastRestart.map { now - $0 >= .seconds(1) } ?? true }
        guard let lostSince else { return false }
        if peerHeardSinceLoss { return lastRestart.map { now - $0 >= Self.heardRetry || $0 < lostSince } ?? true }
        guard now - lostSince >= afterLoss else { return false }
        return lastRestart.map { now - $0 >= Self.retry || $0 < lostSince } ?? true
    }
}
