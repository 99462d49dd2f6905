import Platform
import CallEndpoint
import MediaCore
import RTPTransport

/// A call over an emulated cellular link in virtual time: two media session cores (the real
/// estimator, pacer, retransmissions, FEC, feedback and jitter buffers), each with the real
/// encoding controller, joined by a `TraceLink` per direction (A's uplink and downlink). Only
/// the codec is a model: each picture is as big as the encoder's target allows at the mode's frame
/// rate (a keyframe five times that), and a picture is skipped while the pacer holds more than
/// 100 ms, as the sender's pushback does. A receiver shows a frame when its jitter buffer releases
/// it. Two minutes of a trace take about a second, so a change to the estimator can be tried on
/// every trace before the real bench (`scripts/loss/bench.sh`'s cellular cases) judges it.
public struct CellularSimulation {
    public struct Options: Sendable {
        public var uplink: CapacityTrace
        public var downlink: CapacityTrace
        public var seconds: Double = 120
        public var delay: Duration = .milliseconds(30)
        public var queue = 150
        /// Where in the traces the call starts, seconds (they repeat).
        public var offset: Double = 0
        /// Collect a decision log per direction: each cut of the estimate with the detector's
        /// state, and each freeze with what the sender and the link did in it.
        public var events = false
        public init(uplink: CapacityTrace, downlink: CapacityTrace) { (self.uplink, self.downlink) = (uplink, downlink) }
    }

    /// What one direction's receiver showed of its sender, with the link and the sender's state.
    public struct Direction: Sendable {
        public var framesSent = 0
        public var framesShown = 0
        public var freezes = 0
        public var longestGap: Duration = .zero
        public var delays: [Duration] = []
        public var secondsAtFloor = 0
        public var utilization = 0.0
        /// Per second: capacity offered and delivered (bit/s), the sender's estimate and video target.
        public var seconds: [(capacity: Double, delivered: Double, estimate: Int, target: Int, mode: String)] = []
        public var minutes = 0.0
        /// The decision log (`Options.events`).
        public var events: [String] = []

        public func percentile(_ p: Double) -> Duration? {
            guard !delays.isEmpty else { return nil }
            let sorted = delays.sorted()
            return sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
        }
        public var framesPerSecond: Double { minutes > 0 ? Double(framesShown) / (minutes * 60) : 0 }
        public var freezesPerMinute: Double { minutes > 0 ? Double(freezes) / minutes : 0 }
    }

    public let options: Options
    public init(options: Options) { self.options = options }

    static let warmup: Duration = .seconds(5)
    static let freeze: Duration = .milliseconds(300)
    static let floorBitrate = 30_000
    static let offered = 1_000_000.0
    /// What the wire adds to each datagram the core sends: SRTP's tag, UDP and IPv4.
    static let wireOverhead = 16 + 8 + 20

    /// One endpoint: its core, its encoding, its pictures.
    struct Side {
        var core: RTPSessionCore
        var encoding: EncodingController
        var nextFrame: MediaTime
        var nextAudio: MediaTime
        var deadline = MediaTime.zero
        var keyframeWanted = true
        var estimate = 800_000
        /// Capture times of the pictures it sent, by RTP timestamp.
        var captured: [UInt32: MediaTime] = [:]
        var frameNumber = 0
        /// When pictures were skipped for the pacer's backlog (`Options.events`).
        var skipped: [(at: MediaTime, held: Bool)] = []
    }

    static func configuration(_ base: UInt32) -> SessionConfiguration {
        var c = SessionConfiguration(cname: "side-\(base)", receiverSSRC: base + 9, ntpAtZero: 0xE000_0000_0000_0000)
        c.video = .init(ssrc: base + 1, payloadType: 96, mid: "1", redPayloadType: 98, fecPayloadType: 100)
        c.rtx = (base + 2, 97)
        c.audio = .init(ssrc: base + 3, payloadType: 111, mid: "0", redPayloadType: 63)
        c.receivedVideo = .init(payloadType: 96, rtxPayloadType: 97, feedback: ["nack", "nack pli", "ccm fir"], redPayloadType: 98,
                                fecPayloadType: 100, redRTXPayloadType: 99)
        c.receivedAudio = .init(payloadType: 111, redPayloadType: 63)
        c.transportSequenceExtensionID = 3
        c.midExtensionID = 4
        c.transportOverhead = 16
        // As a call sets up its sender (MediaSession): 800 kbit/s, up to 2.5 Mbit/s of video.
        var congestion = BandwidthEstimator.Configuration()
        congestion.startBitrate = 800_000
        congestion.maxBitrate = 2_564_000
        c.congestion = congestion
        return c
    }

    public func run() -> (up: Direction, down: Direction) {
        let start = MediaTime(microseconds: 1_000_000)
        let end = start + .seconds(options.seconds)
        let ladder = ModeLadder.forScaling(native: VideoMode(width: 640, height: 480, frameRate: 30))
        func side(_ base: UInt32) -> Side {
            var encoding = EncodingController(ladder: ladder, maxVideoBitrate: 2_500_000, startBitrate: 800_000)
            encoding.audioRedundancy = 1
            return Side(core: RTPSessionCore(configuration: Self.configuration(base)), encoding: encoding, nextFrame: start, nextAudio: start)
        }
        var sides = [side(0x1000), side(0x2000)]
        let traceStart = start.microseconds - Int64(options.offset * 1_000_000)
        // Link 0 carries A's packets to B (A's uplink), link 1 B's to A.
        var links = [TraceLink<[UInt8]>(trace: options.uplink, queueLimit: options.queue, delay: Int64(options.delay.inMicroseconds), start: traceStart),
                     TraceLink<[UInt8]>(trace: options.downlink, queueLimit: options.queue, delay: Int64(options.delay.inMicroseconds), start: traceStart)]
        var inFlight: [[(at: MediaTime, bytes: [UInt8])]] = [[], []]
        var directions = [Direction(), Direction()]
        var lastShown: [MediaTime?] = [nil, nil]
        var now = start
        var second = 0
        var delivered = [0, 0], opportunitiesBefore = [0, 0]
        for d in 0..<2 {
            // The trace before the call's start passes unused.
            _ = links[d].departures(until: start.microseconds - 1)
            opportunitiesBefore[d] = links[d].counters.opportunities
        }

        func clock(_ t: MediaTime) -> String { (t - start).inSeconds.fixed(3) }
        /// What the sender did and the link offered over a freeze.
        func freezeNote(from last: MediaTime, gap: Duration, sender d: Int) -> String {
            let skips = sides[d].skipped.filter { $0.at >= last - .milliseconds(100) && $0.at <= now }
            let skipped = "\(skips.count) (\(skips.filter(\.held).count) held by the window)"
            let trace = d == 0 ? options.uplink : options.downlink
            let shift = Int64(options.offset * 1000)
            let offered = trace.opportunities(from: (last - start).inMilliseconds + shift, to: (now - start).inMilliseconds + shift)
            return "\(clock(last)) FREEZE \(gap.inMilliseconds) ms: \(skipped) pictures skipped, link offered \(offered) packets, "
                + "sender estimate \(sides[d].estimate / 1000)k target \(sides[d].encoding.videoBitrate / 1000)k, link queue \(links[d].queued)"
        }
        func handle(_ event: SessionEvent, on s: Int) {
            var actions = sides[s].core.handle(event, at: now)
            var i = 0
            while i < actions.count {
                switch actions[i] {
                case .send(let bytes, _, _):
                    links[s].arrive(bytes, size: bytes.count + Self.wireOverhead, at: now.microseconds)
                case .decode(let frames):
                    // The receiver is the other side's direction: s receives what 1 - s sent.
                    let d = 1 - s
                    for frame in frames {
                        if now - start >= Self.warmup {
                            directions[d].framesShown += 1
                            if let last = lastShown[d] {
                                let gap = now - last
                                if gap >= Self.freeze {
                                    directions[d].freezes += 1
                                    if options.events { directions[d].events.append(freezeNote(from: last, gap: gap, sender: d)) }
                                }
                                directions[d].longestGap = max(directions[d].longestGap, gap)
                            }
                            if let captured = sides[d].captured[frame.rtpTimestamp] { directions[d].delays.append(now - captured) }
                        }
                        lastShown[d] = now
                        actions += sides[s].core.handle(.videoShown(rtpTimestamp: frame.rtpTimestamp, at: now), at: now)
                    }
                case .estimate(let bitrate, let loss, let cause):
                    if options.events, cause != "increase", bitrate != sides[s].estimate, let e = sides[s].core.estimatorState {
                        let d = e.delay
                        directions[s].events.append("\(clock(now)) \(cause) \(sides[s].estimate / 1000)k -> \(bitrate / 1000)k: queue \(d.queueDelay.fixed(0)) ms, "
                            + "trend \(d.trend.fixed(1))/\(d.threshold.fixed(1)), acknowledged \(e.acknowledgedBitrate.map { "\($0 / 1000)k" } ?? "-"), "
                            + "recent \(e.recentBitrate.map { "\($0 / 1000)k" } ?? "-"), loss \(loss.fixed(2))")
                    }
                    sides[s].estimate = bitrate
                    sides[s].encoding.update(estimate: bitrate, lossFraction: loss, cause: cause, now: now.sinceOrigin)
                case .videoProtection(let share):
                    sides[s].encoding.videoProtection = share
                case .keyframeNeeded:
                    sides[s].keyframeWanted = true
                case .playAudio, .holds, .peerSaidBye:
                    break
                }
                i += 1
            }
            sides[s].deadline = sides[s].core.nextDeadline(after: now)
        }

        while now < end {
            // The next moment anything happens.
            var next = end
            for s in 0..<2 {
                next = min(next, sides[s].nextFrame, sides[s].nextAudio, sides[s].deadline)
                if links[s].queued > 0 { next = min(next, MediaTime(microseconds: links[s].nextOpportunity)) }
                if let first = inFlight[s].first { next = min(next, first.at) }
            }
            now = max(next, now + .microseconds(50))
            while now - start >= .seconds(second + 1) {
                for d in 0..<2 {
                    _ = links[d].departures(until: (start + .seconds(second + 1)).microseconds - 1).map { inFlight[d].append((MediaTime(microseconds: $0.at), $0.packet)); delivered[d] += $0.packet.count + Self.wireOverhead }
                    let capacity = Double((links[d].counters.opportunities - opportunitiesBefore[d]) * CapacityTrace.opportunityBytes * 8)
                    opportunitiesBefore[d] = links[d].counters.opportunities
                    directions[d].seconds.append((capacity, Double(delivered[d] * 8), sides[d].estimate, sides[d].encoding.videoBitrate, sides[d].encoding.mode.description))
                    delivered[d] = 0
                }
                second += 1
            }
            for s in 0..<2 {
                for departure in links[s].departures(until: now.microseconds) {
                    inFlight[s].append((MediaTime(microseconds: departure.at), departure.packet))
                    delivered[s] += departure.packet.count + Self.wireOverhead
                }
                while let first = inFlight[s].first, first.at <= now {
                    inFlight[s].removeFirst()
                    handle(.datagram(bytes: first.bytes, isRTCP: first.bytes.count > 1 && (200...206).contains(first.bytes[1]), kind: nil, arrival: now), on: 1 - s)
                }
                if sides[s].nextAudio <= now {
                    handle(.encodedAudio(payload: [UInt8](repeating: 0x78, count: sides[s].encoding.audioBitrate / 50 / 8), samples: 960, capturedAt: now), on: s)
                    sides[s].nextAudio = sides[s].nextAudio + .milliseconds(20)
                }
                if sides[s].nextFrame <= now {
                    let rate = sides[s].encoding.mode.frameRate
                    sides[s].nextFrame = sides[s].nextFrame + .microseconds(1_000_000 / Int64(rate))
                    // Pushback: a picture would only wait behind what the pacer still holds.
                    if SendPolicy.skipsPicture(pacerQueueDelay: sides[s].core.pacerQueueDelay(at: now)) {
                        if options.events { sides[s].skipped.append((now, sides[s].core.windowHoldsVideo)) }
                    } else {
                        let key = sides[s].keyframeWanted
                        sides[s].keyframeWanted = false
                        let size = max(200, sides[s].encoding.videoBitrate / rate / 8 * (key ? 5 : 1))
                        var data = [UInt8](repeating: UInt8(truncatingIfNeeded: sides[s].frameNumber), count: size)
                        data[0] = key ? 0x00 : 0x01
                        sides[s].frameNumber += 1
                        if let timestamp = sides[s].core.videoRTPTimestamp(capturedAt: now) { sides[s].captured[timestamp] = now }
                        if sides[s].captured.count > 4000 { sides[s].captured = sides[s].captured.filter { now - $0.value < .seconds(10) } }
                        if now - start >= Self.warmup { directions[s].framesSent += 1 }
                        handle(.encodedVideo(data: data, isKeyframe: key, capturedAt: now), on: s)
                    }
                }
                if sides[s].deadline <= now { handle(.tick, on: s) }
            }
        }
        for d in 0..<2 {
            let measured = directions[d].seconds.dropFirst(5)
            let capacity = measured.reduce(0) { $0 + $1.capacity }
            directions[d].utilization = capacity > 0 ? measured.reduce(0) { $0 + $1.delivered } / capacity : 0
            directions[d].secondsAtFloor = measured.filter { $0.target <= Self.floorBitrate && $0.capacity >= Self.offered }.count
            directions[d].minutes = (options.seconds - Self.warmup.inSeconds) / 60
        }
        return (directions[0], directions[1])
    }

    /// One line of figures for a direction.
    public static func line(_ name: String, _ d: Direction) -> String {
        let p50 = d.percentile(0.5).map { "\($0.inMilliseconds)" } ?? "-", p95 = d.percentile(0.95).map { "\($0.inMilliseconds)" } ?? "-"
        return "\(name): \(d.framesPerSecond.fixed(1)) frames shown/s, \(d.freezesPerMinute.fixed(2)) freezes/min, delay p50 \(p50) ms p95 \(p95) ms, "
            + "longest gap \(d.longestGap.inMilliseconds) ms, utilization \(d.utilization.fixed(2)), \(d.secondsAtFloor) s at the floor with >= 1 Mbit/s offered"
    }
}
