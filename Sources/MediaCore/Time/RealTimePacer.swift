import Platform

/// Releases items at their due time on the monotonic clock: the n-th item at start + n × period.
/// A consumer a little behind gets the next item at once. One more than `maximumLag` periods
/// behind (the machine was busy, the thread was not scheduled) skips the periods it missed and
/// goes on from now, as a camera or a sound card drops what nobody took in time: catching up in
/// a burst would only hand the encoder stale pictures and the network a burst of old audio,
/// and on a machine that stays busy it never ends.
public struct RealTimePacer: Sendable {
    public let period: Duration
    public let maximumLag: Int
    private var start: MediaTime?
    private var index: Int64 = 0
    /// Periods skipped so far because the caller fell behind.
    public private(set) var skipped: Int64 = 0

    public init(period: Duration, maximumLag: Int = 2) {
        self.period = period
        self.maximumLag = maximumLag
    }

    /// Sleeps until the next period is due (the first call returns at once).
    public mutating func waitForNext() {
        let wait = delay(now: .now)
        sleepThread(wait)
    }

    /// How long to wait at `now` for the next period, which is then counted as taken.
    public mutating func delay(now: MediaTime) -> Duration {
        let origin = start ?? now
        if start == nil { start = now }
        var due: MediaTime = origin + period * Int(index)
        if now - due > period * maximumLag {
            let behind = Int64((now - due) / period)
            skipped += behind
            index += behind
            due = origin + period * Int(index)
        }
        index += 1
        return due > now ? due - now : .zero
    }
}
