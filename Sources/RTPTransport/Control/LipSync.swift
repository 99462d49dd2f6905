/// Audio and video played in step (RFC 3550 §6.4.1, as RFC 7273 leaves it for the common case):
/// each stream's sender reports pair an RTP timestamp with the sender's wall clock (NTP), so the
/// receiver knows when, by the sender's clock, the sample it plays was taken. Played now, its
/// delay is the receiver's clock minus that; the two clocks' offset is the same for both streams
/// and cancels in the difference. The difference of the two delays is the A/V offset (positive:
/// the picture comes later than the sound), and whichever stream runs ahead is held back by it.
/// Pure: times are passed in (Unix seconds on the receiver's wall clock).
public struct LipSync: Sendable {
    /// One stream's latest sender report: its RTP timestamp and the sender's wall clock then.
    public struct SenderClock: Sendable, Equatable {
        public let clockRate: Double
        public private(set) var reference: (rtp: UInt32, seconds: Double)?

        public init(clockRate: Double) { self.clockRate = clockRate }

        public mutating func senderReport(ntpTimestamp: UInt64, rtpTimestamp: UInt32) {
            reference = (rtpTimestamp, LipSync.seconds(ntp: ntpTimestamp))
        }

        /// The sender's wall-clock time at which `rtp` was taken.
        public func senderTime(of rtp: UInt32) -> Double? {
            guard let reference else { return nil }
            return reference.seconds + Double(Int32(bitPattern: rtp &- reference.rtp)) / clockRate
        }

        public static func == (a: SenderClock, b: SenderClock) -> Bool {
            a.clockRate == b.clockRate && a.reference?.rtp == b.reference?.rtp && a.reference?.seconds == b.reference?.seconds
        }
    }

    public var video = SenderClock(clockRate: 90_000)
    public var audio = SenderClock(clockRate: 48_000)
    /// Delays (s) from capture by the sender's clock to playout by ours: the least of the last
    /// few seconds, which is the pipeline's own delay. A late picture (one retransmitted, or one
    /// a sender's queue held through an outage) says nothing about the pipeline, and following
    /// it would delay the sound for seconds after every outage.
    /// Unknown until the stream has been measured for a second since its hold last moved: the
    /// least of a handful of pictures is not yet the pipeline's delay, and an offset read from it
    /// jumps by tens of milliseconds in the second a hold moves.
    /// Sound is different: its jitter buffer stretches the stream for a late packet (which is
    /// then played late, as all that follows) and gives the time back a second later, so on a
    /// loaded or jittery path its delay moves by tens of milliseconds and the least of it is the
    /// sound's best moment, not its usual one: its delay is the mean over the window. The window
    /// is short: when the jitter buffer deepens, the picture follows within three seconds, not five.
    public var videoDelay: Double? { videoWindow.settledMinimum }
    public var audioDelay: Double? { audioWindow.settledMean }
    private var videoWindow = SlidingMinimum(seconds: 5)
    private var audioWindow = SlidingMinimum(seconds: 3)

    /// The least value (or the mean) over the last `seconds` whole seconds (and the current
    /// one), in fixed memory.
    struct SlidingMinimum: Sendable {
        let seconds: Int
        init(seconds: Int) { self.seconds = seconds }
        /// How long a window measures before its minimum counts.
        static let settling = 1.0
        private var minima: [(second: Int64, value: Double)] = []
        private var sums: [(second: Int64, sum: Double, count: Int)] = []
        private var span: (first: Double, last: Double)?
        mutating func add(_ value: Double, at time: Double) {
            span = (span?.first ?? time, time)
            let second = Int64(time.rounded(.down))
            minima.removeAll { $0.second <= second - Int64(seconds) }
            sums.removeAll { $0.second <= second - Int64(seconds) }
            if let last = sums.last, last.second == second {
                sums[sums.count - 1] = (second, last.sum + value, last.count + 1)
            } else {
                sums.append((second, value, 1))
            }
            if let last = minima.last, last.second == second {
                minima[minima.count - 1].value = min(last.value, value)
            } else {
                minima.append((second, value))
            }
        }
        var minimum: Double? { minima.map(\.value).min() }
        var settledMinimum: Double? {
            guard let span, span.last - span.first >= Self.settling else { return nil }
            return minimum
        }
        var settledMean: Double? {
            guard let span, span.last - span.first >= Self.settling else { return nil }
            let count = sums.reduce(0) { $0 + $1.count }
            return count == 0 ? nil : sums.reduce(0) { $0 + $1.sum } / Double(count)
        }
    }
    /// Offsets below this are left alone (a frame interval and a half at 30 fps is 50 ms; the
    /// ear notices sound ahead of the picture from about 45 ms, ITU-R BT.1359).
    public var tolerance = 0.015
    /// The most either stream is held back.
    public var maximumHold = 0.5
    /// The most a hold changes in one step (steps come once a second): a picture held 300 ms
    /// longer at once is a frozen picture, and sound held longer is a gap of silence.
    public var maximumStep = 0.05
    /// Smaller changes are not made: each change measures the stream afresh.
    public var minimumStep = 0.005

    public init() {}

    /// Video delay minus audio delay, in seconds, once both are known.
    public var offset: Double? {
        guard let videoDelay, let audioDelay else { return nil }
        return videoDelay - audioDelay
    }

    /// A picture with RTP timestamp `rtp` is shown at `now`.
    public mutating func videoShown(rtp: UInt32, at now: Double) {
        guard let taken = video.senderTime(of: rtp) else { return }
        videoWindow.add(now - taken, at: now)
    }

    /// Audio with RTP timestamp `rtp` is heard at `now` (played, plus what waits in the device).
    public mutating func audioPlayed(rtp: UInt32, at now: Double) {
        guard let taken = audio.senderTime(of: rtp) else { return }
        audioWindow.add(now - taken, at: now)
    }

    /// The next holds, given those in force now, and measuring afresh the stream whose hold
    /// changes (its delays so far were under the old hold).
    public mutating func adjust(videoHold: Double, audioHold: Double) -> (video: Double, audio: Double) {
        let next = holds(videoHold: videoHold, audioHold: audioHold)
        guard abs(next.video - videoHold) > minimumStep || abs(next.audio - audioHold) > minimumStep else { return (videoHold, audioHold) }
        if next.video != videoHold { videoWindow = SlidingMinimum(seconds: videoWindow.seconds) }
        if next.audio != audioHold { audioWindow = SlidingMinimum(seconds: audioWindow.seconds) }
        return next
    }

    /// How long to hold video (s) and to delay audio (s) on top of what each already waits, given
    /// the holds in force now: the early stream waits for the late one, reached in steps.
    public func holds(videoHold: Double, audioHold: Double) -> (video: Double, audio: Double) {
        guard let videoDelay, let audioDelay else { return (videoHold, audioHold) }
        // The delays measured include the holds; what each stream needs without them:
        let bareVideo = videoDelay - videoHold, bareAudio = audioDelay - audioHold
        let difference = bareVideo - bareAudio
        var wanted = (video: 0.0, audio: 0.0)
        if difference > tolerance {
            wanted.audio = min(maximumHold, difference)
        } else if difference < -tolerance {
            wanted.video = min(maximumHold, -difference)
        }
        // Change only when the offset now is outside the tolerance, so the holds do not hunt.
        guard abs(videoDelay - audioDelay) > tolerance else { return (videoHold, audioHold) }
        func step(_ from: Double, _ to: Double) -> Double { from + min(maximumStep, max(-maximumStep, to - from)) }
        return (step(videoHold, wanted.video), step(audioHold, wanted.audio))
    }

    static func seconds(ntp: UInt64) -> Double {
        Double(ntp >> 32) - Double(NTPTime.unixOffset) + Double(ntp & 0xffff_ffff) / 4_294_967_296
    }

}
