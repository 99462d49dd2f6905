/// What the congestion controller lets the sender do at a moment, from the bandwidth estimate
/// and the state of feedback: how fast the pacer releases, whether video waits for the path to
/// drain, whether a retransmission may go, whether the encoder skips a picture. Pure: time (in
/// microseconds) and every input are passed in; the sender's threads only apply the answers.
/// Each rule's figures are measured on the congestion bench (README, "Automatic encoding mode").
public struct SendPolicy: Sendable {
    /// Pacing and draining rates in bits per second.
    public struct Pacing: Sendable, Equatable {
        public var rate: Int
        public var maxDrainRate: Int
    }

    /// Frames go out at 1.1x the estimate: a frame's last packet cannot reach the receiver before
    /// the link has carried it, and spread at 1.5x the frames queued in the bottleneck instead and
    /// set off the delay detector (600 kbit/s queue p95 35-44 ms at 1.5x, 31-36 at 1.1x). A backlog
    /// drains at no more than 2x. For a second after a cut the path is known to be full: no
    /// faster than the estimate, backlog included.
    public static func pacing(estimate: Int, lastDecrease: Int64?, now: Int64) -> Pacing {
        if let cut = lastDecrease, now - cut < 1_000_000 { return Pacing(rate: estimate, maxDrainRate: estimate) }
        return Pacing(rate: estimate * 11 / 10, maxDrainRate: estimate * 2)
    }

    /// The congestion window: video waits while the path holds more than the estimate times
    /// (the shortest feedback delay + 70 ms), so a queue left by a capacity drop drains at the
    /// link's rate instead of at what the cut leaves over (with 100 ms, 30 kB at 2.4 Mbit/s went
    /// into a 300 ms queue that holds 22.5 kB at 600 kbit/s, and the fall lost 0.2-0.6 % of
    /// packets; with 70 ms none). Only while feedback flows (its newest less than 500 ms old): no
    /// feedback must not mean no video. Never below 6 kB, so a few packets always fit. Only
    /// while the delay detector measures a queue (`queueDelay`, ms, at least `queueingFloor`):
    /// bytes also stay outstanding when feedback is lost, and in a fade of 40 % loss on an empty
    /// path a lost report (one every 50 ms) held video until the next, the pacer's queue grew to
    /// 300 ms, retransmissions were refused behind it and the picture froze. Never on a bursty
    /// link (`BandwidthEstimator.burstyLink`): there the feedback arrives in the link's bursts
    /// too, bytes stay outstanding for a hold's length while nothing is queued, and the window
    /// held video through each hold (in `bench cellular` 1-3 of every 10 freezes on the ATT
    /// trace began with video held by the window while the link offered its rate).
    public static func holdsVideo(estimate: Int, outstandingBytes: Int, newestFeedbackAt: Int64?, shortestFeedbackDelay: Int64?,
                                  queueDelay: Double, burstyLink: Bool = false, now: Int64) -> Bool {
        guard !burstyLink, queueDelay >= queueingFloor, let newest = newestFeedbackAt, now - newest < 500_000, let base = shortestFeedbackDelay else { return false }
        let window = Int64(estimate) * (base + windowMargin) / 8_000_000
        return Int64(outstandingBytes) > max(window, minimumWindow)
    }

    /// Retransmissions' own rate beside the pacing rate: the estimate while the delay detector
    /// measures no queue (`queueDelay` under `queueingFloor` ms), none while it does. Loss on a
    /// path with no queue is not congestion: in a fade of 40 % loss the repairs (40 % of the
    /// media and more) queued behind media paced at 1.1x the estimate, waited 150-300 ms and
    /// froze the picture they were to repair. Under congestion they share the pacing rate.
    public static func repairRate(estimate: Int, queueDelay: Double) -> Int { queueDelay < queueingFloor ? estimate : 0 }

    static let windowMargin: Int64 = 70_000
    static let minimumWindow: Int64 = 6_000
    static let queueingFloor = 20.0

    /// Encoder pushback: while the pacer holds more than 100 ms of earlier frames, a new picture
    /// would only wait behind them; it is skipped (the rate controller sees the gap).
    public static func skipsPicture(pacerQueueDelay: Int64) -> Bool { pacerQueueDelay > 100_000 }
}

/// Retransmissions may use half of the estimate over the last second, and none while the pacer
/// holds more than 150 ms: they would deepen the congestion that lost the packets, and the
/// receiver asks for a keyframe if it must (aiortc's unpaced, uncounted retransmissions tripled
/// its traffic into a full queue). While the path holds no queue (the delay detector's
/// `queueDelay` under `SendPolicy.queueingFloor` ms) the loss is not congestion's and they may
/// use the whole estimate: a fade of 40 % loss needs more than half of it. Pure: time in
/// microseconds is passed in.
public struct RetransmissionBudget: Sendable {
    private var spent: [(time: Int64, bytes: Int)] = []

    public init() {}

    /// Whether a retransmission of `bytes` may go now; if so it is counted.
    public mutating func admit(bytes: Int, estimate: Int, pacerQueueDelay: Int64, pathQueueDelay: Double = .infinity, now: Int64) -> Bool {
        spent.removeAll { $0.time < now - 1_000_000 }
        let used = spent.reduce(0) { $0 + $1.bytes }
        let share = pathQueueDelay < SendPolicy.queueingFloor ? estimate : estimate / 2
        guard (used + bytes) * 8 <= share, pacerQueueDelay <= 150_000 else { return false }
        spent.append((now, bytes))
        return true
    }
}
