import Platform
import MediaCore
import Testing
import TestSupport
@testable import RTPTransport

/// Two session cores joined by a simulated link, in virtual time: no socket, no thread, no
/// sleep. The link delays each datagram, and drops or delays more the ones a test picks.
struct SimulatedCall {
    enum Side: Hashable { case a, b }
    struct InFlight { var at: MediaTime; var to: Side; var bytes: [UInt8]; var isRTCP: Bool }
    var a: RTPSessionCore, b: RTPSessionCore
    var now = MediaTime(microseconds: 10_000_000)
    var delay: Duration = .milliseconds(30)
    /// Called for every datagram sent; returns nil to drop it, or extra delay.
    var link: (_ from: Side, _ packet: RTPPacket?, _ isRTCP: Bool, _ bytes: [UInt8]) -> Duration? = { _, _, _, _ in .zero }
    /// In place of `link`, for a link whose extra delay depends on when a datagram is sent.
    var timedLink: ((_ from: Side, _ packet: RTPPacket?, _ sentAt: MediaTime) -> Duration?)?
    /// What a side's shell would do with the core's actions other than sending.
    var onAction: (_ side: Side, _ action: SessionAction, _ call: inout SimulatedCall) -> Void = { _, _, _ in }
    private(set) var inFlight: [InFlight] = []
    private(set) var actions: [Side: [(at: MediaTime, action: SessionAction)]] = [.a: [], .b: []]
    /// Events a test scheduled (frames to send, pictures shown), in time order.
    private var scheduled: [(at: MediaTime, side: Side, event: SessionEvent)] = []
    /// When each core asked to be ticked, as of its last event.
    private var deadlines: [Side: MediaTime] = [:]

    init(a: SessionConfiguration, b: SessionConfiguration) {
        self.a = RTPSessionCore(configuration: a)
        self.b = RTPSessionCore(configuration: b)
    }

    mutating func schedule(_ event: SessionEvent, on side: Side, at time: MediaTime) {
        scheduled.append((time, side, event))
        scheduled.sort { $0.at < $1.at }
    }

    /// The video of `seconds` at 30 fps from `side`: a keyframe, then delta frames of `size` bytes.
    /// In H.264, Annex B access units of `H264Pictures` (an IDR, then reference pictures).
    mutating func scheduleVideo(from side: Side, seconds: Double, size: Int = 1_200, keyframeSize: Int = 8_000, format: VideoPayloadFormat = .vp8) {
        for n in 0..<Int(seconds * 30) {
            let at = now + .microseconds(Int64(n) * 33_333)
            let key = n == 0
            var data = [UInt8](repeating: UInt8(truncatingIfNeeded: n), count: key ? keyframeSize : size)
            data[0] = key ? 0x00 : 0x01
            if format == .h264 { data = H264NALUnit.annexB(H264Pictures.units(n, size: size, keyframeSize: keyframeSize)) }
            schedule(.encodedVideo(data: data, isKeyframe: key, capturedAt: at), on: side, at: at)
        }
    }

    mutating func handle(_ event: SessionEvent, on side: Side) {
        let out = side == .a ? a.handle(event, at: now) : b.handle(event, at: now)
        deadlines[side] = side == .a ? a.nextDeadline(after: now) : b.nextDeadline(after: now)
        for action in out {
            actions[side, default: []].append((now, action))
            if case .send(let bytes, let isRTCP, _) = action {
                let packet = isRTCP ? nil : try? RTPPacket(parsing: bytes)
                let extra: Duration?
                if let timedLink { extra = timedLink(side, packet, now) } else { extra = link(side, packet, isRTCP, bytes) }
                guard let extra else { continue }
                inFlight.append(InFlight(at: now + delay + extra, to: side == .a ? .b : .a, bytes: bytes, isRTCP: isRTCP))
            } else {
                onAction(side, action, &self)
            }
        }
    }

    /// Runs until `end`, each step at the earliest of: a scheduled event, an arrival, a deadline.
    mutating func run(until end: MediaTime) {
        while now < end {
            var next = min(deadlines[.a] ?? end, deadlines[.b] ?? end, end)
            if let first = scheduled.first { next = min(next, first.at) }
            if let arrival = inFlight.map(\.at).min() { next = min(next, arrival) }
            now = max(next, now + .microseconds(100))
            while let first = scheduled.first, first.at <= now {
                scheduled.removeFirst()
                handle(first.event, on: first.side)
            }
            let arriving = inFlight.filter { $0.at <= now }.sorted { $0.at < $1.at }
            inFlight.removeAll { $0.at <= now }
            for datagram in arriving {
                handle(.datagram(bytes: datagram.bytes, isRTCP: datagram.isRTCP, kind: nil, arrival: datagram.at), on: datagram.to)
            }
            for side in [Side.a, .b] where deadlines[side].map({ $0 <= now }) ?? true { handle(.tick, on: side) }
        }
    }

    func decoded(by side: Side) -> [VideoJitterBuffer.Frame] {
        actions[side, default: []].flatMap { if case .decode(let frames) = $0.action { return frames }; return [] }
    }
    func count(_ side: Side, _ matches: (SessionAction) -> Bool) -> Int { actions[side, default: []].filter { matches($0.action) }.count }

    /// Two endpoints that send VP8 (with RTX) and Opus to each other with transport-cc and MID.
    /// With `fec`, video goes in RED (98) with ULPFEC (100), and RED's own RTX is 99.
    /// In H.264 (`format`), the same payload types carry it.
    static func configurations(auto: Bool = true, fec: Bool = false, format: VideoPayloadFormat = .vp8) -> (SessionConfiguration, SessionConfiguration) {
        func side(_ base: UInt32) -> SessionConfiguration {
            var c = SessionConfiguration(cname: "side-\(base)", receiverSSRC: base + 9, ntpAtZero: 0xE000_0000_0000_0000)
            c.video = .init(ssrc: base + 1, payloadType: 96, mid: "1", redPayloadType: fec ? 98 : nil, fecPayloadType: fec ? 100 : nil)
            c.video?.videoFormat = format
            c.video?.redRTXPayloadType = fec ? 99 : nil
            c.rtx = (base + 2, 97)
            c.audio = .init(ssrc: base + 3, payloadType: 111, mid: "0")
            c.receivedVideo = .init(payloadType: 96, rtxPayloadType: 97, feedback: ["nack", "nack pli", "ccm fir"],
                                    redPayloadType: fec ? 98 : nil, fecPayloadType: fec ? 100 : nil, redRTXPayloadType: fec ? 99 : nil)
            c.receivedVideo?.videoFormat = format
            c.receivedAudio = .init(payloadType: 111)
            c.transportSequenceExtensionID = 3
            c.midExtensionID = 4
            if auto {
                // As a call starts (MediaSenderConfiguration): 800 kbit/s, up to 2.5 Mbit/s of video.
                var congestion = BandwidthEstimator.Configuration()
                congestion.startBitrate = 800_000
                congestion.maxBitrate = 2_564_000
                c.congestion = congestion
            }
            return c
        }
        return (side(0x1000), side(0x2000))
    }
}

@Suite struct RTPSessionCoreTests {
    static func isVideo(_ packet: RTPPacket?) -> Bool { packet?.payloadType == 96 }

    /// A lost packet is asked for, comes back on RTX a round trip later, and every frame is
    /// decoded in order; the receiver's round trip by retransmissions matches the link's.
    @Test func aLostPacketComesBackOnRTX() throws {
        let (ca, cb) = SimulatedCall.configurations()
        var call = SimulatedCall(a: ca, b: cb)
        var videoPackets = 0
        call.link = { from, packet, _, _ in
            guard from == .a, packet?.payloadType == 96 else { return .zero }
            videoPackets += 1
            return videoPackets == 20 ? nil : .zero  // one packet of the third frame or so, once
        }
        call.scheduleVideo(from: .a, seconds: 2)
        call.run(until: call.now + .seconds(3))
        let frames = call.decoded(by: .b)
        #expect(frames.count == 60, "\(frames.count) frames decoded of 60")
        #expect(zip(frames, frames.dropFirst()).allSatisfy { $0.rtpTimestamp &- $1.rtpTimestamp > UInt32.max / 2 }, "in order")
        #expect(call.b.counters.nacksSent >= 1 && call.b.counters.retransmissionsReceived == 1)
        #expect(call.a.counters.nacksReceived >= 1 && call.a.counters.retransmitted >= 1)
        #expect(call.count(.a) { if case .keyframeNeeded = $0 { return true }; return false } == 0, "repaired, no keyframe asked for: \(call.b.counters)")
    }

    /// When the repair is lost too, the receiver gives up on the hole and asks for a keyframe
    /// (throttled); the keyframe the sender then sends is decoded and the stream goes on.
    @Test func anUnrepairableLossAsksForAKeyframe() throws {
        let (ca, cb) = SimulatedCall.configurations()
        var call = SimulatedCall(a: ca, b: cb)
        var videoPackets = 0
        call.link = { from, packet, _, _ in
            guard from == .a, let packet else { return .zero }
            if packet.payloadType == 97 && !packet.payload.isEmpty && packet.payload.count > 2 { return nil }  // every retransmission is lost
            guard packet.payloadType == 96 else { return .zero }
            videoPackets += 1
            return videoPackets == 20 ? nil : .zero
        }
        let start = call.now
        var keyframesSent = 0
        call.onAction = { side, action, call in
            guard side == .a, case .keyframeNeeded = action, keyframesSent == 0 else { return }
            keyframesSent += 1
            var data = [UInt8](repeating: 7, count: 8_000)
            data[0] = 0x00
            call.schedule(.encodedVideo(data: data, isKeyframe: true, capturedAt: call.now), on: .a, at: call.now + .milliseconds(1))
        }
        call.scheduleVideo(from: .a, seconds: 2)
        call.run(until: start + .seconds(3))
        #expect(call.b.counters.pliSent >= 1 && call.a.counters.keyframeRequests >= 1)
        #expect(keyframesSent == 1)
        let frames = call.decoded(by: .b)
        #expect(frames.filter(\.isKeyframe).count == 2, "the first keyframe and the one asked for")
        #expect(frames.count >= 40, "decoding goes on after the keyframe: \(frames.count) frames")
    }

    /// Reports flow both ways each second: each side's round trip by the peer's reports is the
    /// link's (2 × 30 ms), and the MID stops once the peer has reported on a stream.
    @Test func reportsGiveTheRoundTripAndEndTheMID() throws {
        let (ca, cb) = SimulatedCall.configurations()
        var call = SimulatedCall(a: ca, b: cb)
        var midsAfterReports = 0
        var reported = false
        call.link = { from, packet, isRTCP, bytes in
            if from == .b, isRTCP, (try? RTCPPacket.parseCompound(bytes))?.contains(where: { if case .receiverReport(let rr) = $0 { return !rr.reports.isEmpty }; return false }) == true {
                reported = true
            }
            if from == .a, reported, let packet, packet.payloadType == 96, packet.headerExtension(id: 4) != nil { midsAfterReports += 1 }
            return .zero
        }
        call.scheduleVideo(from: .a, seconds: 4)
        call.scheduleVideo(from: .b, seconds: 4)
        call.run(until: call.now + .seconds(4))
        for rtt in [call.a.roundTripTime, call.b.roundTripTime] {
            let measured = try #require(rtt)
            #expect(abs((measured - .milliseconds(60)).inMicroseconds) <= 1_000, "RTT \(measured)")
        }
        // Packets already on the wire when the first report arrives still carry it.
        #expect(midsAfterReports <= 10, "\(midsAfterReports) video packets with a MID after the peer's report")
    }

    /// A video source's NOTE (its camera is lost) reaches the peer in the RTCP sent at once, a
    /// link's delay later, not at the next report; every report carries it until it is cleared,
    /// and the clearing reaches the peer as fast.
    @Test func aVideoNoteReachesThePeerAtOnceAndIsCleared() throws {
        let (ca, cb) = SimulatedCall.configurations()
        var call = SimulatedCall(a: ca, b: cb)
        let start = call.now
        var notes: [String?] = []
        call.link = { from, _, isRTCP, bytes in
            guard from == .a, isRTCP, let packets = try? RTCPPacket.parseCompound(bytes) else { return .zero }
            for case .sourceDescription(let sdes) in packets { if let note = sdes.note(of: 0x1001) { notes.append(note) } }
            return .zero
        }
        call.scheduleVideo(from: .a, seconds: 6)
        // Between two reports (they go every second from the first frame): 2.5 s and 4.5 s.
        call.schedule(.videoNote("camera lost"), on: .a, at: start + .milliseconds(2_500))
        call.schedule(.videoNote(nil), on: .a, at: start + .milliseconds(4_500))
        call.run(until: start + .milliseconds(2_400))
        #expect(call.b.peerVideoNote == nil)
        call.run(until: start + .milliseconds(2_540))
        #expect(call.b.peerVideoNote == "camera lost", "a link's delay (30 ms) after the note")
        #expect(call.b.snapshot.peerVideoNote == "camera lost")
        call.run(until: start + .milliseconds(4_540))
        #expect(call.b.peerVideoNote == nil, "cleared a link's delay after")
        let sent = notes
        #expect(sent.filter { $0 == "camera lost" }.count == 3, "at once and in the reports of 3 s and 4 s: \(sent)")
        #expect(sent.last == .some(nil), "the SDES after the clearing has no NOTE: \(sent)")
    }

    /// The pacer spreads a large keyframe over time at the pacing rate instead of sending it in
    /// one burst, and the estimate it follows comes from transport-cc feedback.
    @Test func aKeyframeIsPacedOut() throws {
        let (ca, cb) = SimulatedCall.configurations()
        var call = SimulatedCall(a: ca, b: cb)
        let start = call.now
        var data = [UInt8](repeating: 1, count: 60_000)
        data[0] = 0x00
        call.schedule(.encodedVideo(data: data, isKeyframe: true, capturedAt: start), on: .a, at: start)
        call.run(until: start + .seconds(2))
        let sends = call.actions[.a, default: []].filter { entry in
            if case .send(let bytes, false, _) = entry.action, let p = try? RTPPacket(parsing: bytes), p.payloadType == 96 { return true }
            return false
        }
        let span = try #require(sends.last).at - (try #require(sends.first)).at
        let estimate = try #require(call.a.estimate)
        // 60 kB at the pacing rate (a multiple of the estimate, SendPolicy): well above zero,
        // and the whole frame left within the pacer's queue limit.
        #expect(span >= .milliseconds(40) && span <= .milliseconds(400), "keyframe spread over \(span) at an estimate of \(estimate)")
        #expect(call.a.counters.transportFeedbackReceived > 0)
        #expect(call.count(.a) { if case .estimate = $0 { return true }; return false } > 0)
    }

    /// Lip sync: the receiver shows pictures 100 ms after they arrive and plays sound 40 ms
    /// after; its core measures the picture 50-60 ms behind and delays the sound in steps of at
    /// most 50 ms a second until they meet, then holds still.
    @Test func lipSyncDelaysTheSoundThatPlaysAhead() throws {
        let (ca, cb) = SimulatedCall.configurations(auto: false)
        var call = SimulatedCall(a: ca, b: cb)
        let start = call.now
        call.scheduleVideo(from: .a, seconds: 8)
        for n in 0..<400 {
            let at = start + .milliseconds(Int64(n) * 20)
            call.schedule(.encodedAudio(payload: [0xfc, UInt8(n & 0xff)], samples: 960, capturedAt: at), on: .a, at: at)
        }
        var audioHold: Duration = .zero
        call.onAction = { side, action, call in
            guard side == .b else { return }
            switch action {
            case .decode(let frames):
                for frame in frames {
                    let shown = call.now + .milliseconds(100)
                    call.schedule(.videoShown(rtpTimestamp: frame.rtpTimestamp, at: shown), on: .b, at: shown)
                }
            case .playAudio(let packet, _):
                let heard = call.now + .milliseconds(40) + audioHold
                call.schedule(.audioPlayed(rtpTimestamp: packet.timestamp, at: heard), on: .b, at: heard)
            case .holds(_, let audio):
                audioHold = audio
            default: break
            }
        }
        call.run(until: start + .seconds(8))
        let holds = call.actions[.b, default: []].compactMap { if case .holds(let v, let a) = $0.action { return (v, a) }; return nil }
        #expect(!holds.isEmpty)
        #expect(holds.allSatisfy { $0.0 == .zero }, "the picture, which is behind, is never held")
        let steps = zip([Duration.zero] + holds.map(\.1), holds.map(\.1)).map { $1 - $0 }
        #expect(steps.allSatisfy { $0 <= .milliseconds(50) }, "steps \(steps)")
        // The picture waits 100 ms plus the jitter buffer's delay, the sound 40 ms plus the
        // simulated link's jitter (it is heard as it arrives here; lip sync counts the sound's
        // mean delay): a hold of 40 ms or more, and no offset left.
        #expect(audioHold >= .milliseconds(40) && audioHold <= .milliseconds(200), "sound held \(audioHold); holds \(holds); offset \(String(describing: call.b.avOffset))")
        let offset = try #require(call.b.avOffset)
        #expect(abs(offset) <= 0.015, "A/V offset \(offset) s at the end")
    }

    /// RED (RFC 2198) both ways: every audio packet lost on the link alone (one in seven, and
    /// two in a row once the peer reports the loss) is played from the packets after it, with
    /// the timestamp and sequence number it had and the arrival it would have had; nothing is
    /// played twice. Without RED the same losses stay lost.
    @Test(arguments: [true, false]) func redRebuildsLostAudioPackets(red: Bool) throws {
        var (ca, cb) = SimulatedCall.configurations(auto: false)
        if red {
            ca.audio?.redPayloadType = 63
            cb.receivedAudio?.redPayloadType = 63
        }
        var call = SimulatedCall(a: ca, b: cb)
        let start = call.now
        for n in 0..<250 {
            let at = start + .milliseconds(Int64(n) * 20)
            call.schedule(.encodedAudio(payload: [0xfc, UInt8(n & 0xff), UInt8(n >> 8)], samples: 960, capturedAt: at), on: .a, at: at)
        }
        var sent = 0, lost: Set<Int> = []
        call.link = { from, packet, isRTCP, _ in
            guard from == .a, !isRTCP, packet?.payloadType == 111 || packet?.payloadType == 63 else { return .zero }
            sent += 1
            // One in seven lost; from the 200th, two in a row.
            if sent % 7 == 0 || (sent > 200 && sent % 7 == 1) {
                lost.insert(sent - 1)
                return nil
            }
            return .zero
        }
        call.run(until: start + .seconds(6))
        let played = call.actions[.b, default: []].compactMap { entry -> (RTPPacket, MediaTime, MediaTime)? in
            if case .playAudio(let packet, let arrival) = entry.action { return (packet, arrival, entry.at) }
            return nil
        }
        let numbers = played.map { Int($0.0.payload[1]) | Int($0.0.payload[2]) << 8 }
        #expect(Set(numbers).count == numbers.count, "nothing played twice")
        #expect(played.allSatisfy { $0.0.payloadType == 111 }, "Opus, never RED, goes to the decoder")
        if red {
            // Only a loss among the last two has no later packet to come back in.
            let expected = Set(0..<250).subtracting(lost.filter { $0 >= 248 })
            #expect(Set(numbers) == expected, "missing \(expected.subtracting(numbers).sorted())")
            #expect(call.b.counters.audioRecoveredByRED == lost.filter { $0 < 248 }.count)
            #expect(call.b.counters.receivedAudioInRED == 250 - lost.count)
            for (packet, arrival, at) in played {
                let n = Int(packet.payload[1]) | Int(packet.payload[2]) << 8
                // Sequence numbers and timestamps as the packets had them: n after the first.
                #expect(packet.sequenceNumber == played[0].0.sequenceNumber &+ UInt16(n - numbers[0]))
                #expect(packet.timestamp == played[0].0.timestamp &+ UInt32((n - numbers[0]) * 960))
                #expect(arrival <= at, "a rebuilt packet arrives when it would have, not later")
            }
        } else {
            #expect(numbers.count == 250 - lost.count)
            #expect(call.b.counters.audioRecoveredByRED == 0 && call.b.counters.receivedAudioInRED == 0)
        }
    }

    /// 5 % random loss and reordering both ways, 10 s: NACKs and RTX repair nearly everything,
    /// audio is never retransmitted, and the estimate stays within its bounds.
    @Test func lossAndReorderingAreRepaired() throws {
        let (ca, cb) = SimulatedCall.configurations()
        var call = SimulatedCall(a: ca, b: cb)
        var random = SeededGenerator(seed: 28)
        call.link = { _, packet, isRTCP, _ in
            guard !isRTCP, packet != nil else { return .zero }
            let roll = Double.random(in: 0..<1, using: &random)
            if roll < 0.05 { return nil }
            return roll < 0.10 ? .milliseconds(8) : .zero  // one in twenty comes 8 ms late: reordered
        }
        call.scheduleVideo(from: .a, seconds: 10)
        call.scheduleVideo(from: .b, seconds: 10)
        call.run(until: call.now + .seconds(11))
        for (side, sender) in [(SimulatedCall.Side.b, call.a), (.a, call.b)] {
            let frames = call.decoded(by: side).count
            #expect(frames >= 270, "\(side): \(frames) of 300 frames decoded")
            #expect(sender.counters.retransmitted > 0)
            let estimate = try #require(sender.estimate)
            #expect(estimate >= 50_000 && estimate <= 2_600_000)
        }
    }

    /// LTE's case: 100 ms of round trip and 10 % random loss of everything (NACKs and
    /// retransmissions too), 20 s of 30 fps video of five packets a frame, three times. Every
    /// hole is repaired by NACK, and the picture stops for 300 ms or more at most once in the
    /// minute: a hole that takes two or three rounds shows as a short late frame behind the
    /// one-round playout delay. (Shown as soon as complete, five to seven frames a run came
    /// 300 ms or more after the one before.)
    @Test func tenPercentLossAtA100msRoundTripAlmostNeverFreezes() throws {
        var freezes: [Duration] = []
        for seed: UInt64 in [29, 30, 31] { freezes += try freezesAtTenPercentLoss(seed: seed) }
        #expect(freezes.count <= 1, "\(freezes.count) freezes in 60 s: \(freezes)")
    }

    /// A link that holds everything for 300 ms three times (a cellular scheduler's gap): the
    /// first two show as freezes; from the second on, frames are shown 100 ms after their time,
    /// so the third is shown from what arrived before it, with no gap of 300 ms. A sender that
    /// pauses its pictures twice on a clean link is no held link: its frames keep no delay.
    @Test func aLinkThatHoldsTwiceKeepsFramesLongEnoughToRideTheNextHold() throws {
        let held = try heldLink(holds: [4, 9, 14], senderPauses: [])
        #expect(held.freezes.count == 2, "the first two holds freeze, the third does not: \(held.freezes)")
        #expect(held.freezes.allSatisfy { $0.at < 10 }, "\(held.freezes)")
        #expect(held.waitAfter(11) >= .milliseconds(90), "held \(held.waitAfter(11)) after the second hold")
        #expect(held.waitAfter(2) <= .milliseconds(5), "no delay before any hold: \(held.waitAfter(2))")
        let paused = try heldLink(holds: [], senderPauses: [4, 9, 14])
        #expect(paused.waitAfter(15) <= .milliseconds(5), "a sender's pauses are no hold: \(paused.waitAfter(15))")
    }

    /// A call of 18 s from A to B over a 30 ms link: at each second of `holds` the link holds
    /// what A sends for 300 ms, at each of `senderPauses` A sends no picture for 500 ms. Returns
    /// B's freezes (gaps of 300 ms or more between frames shown, with when they started) and, for
    /// a moment, how long B held the frames that completed after it before showing them.
    func heldLink(holds: [Int], senderPauses: [Int]) throws -> (freezes: [(at: Int, gap: Duration)], waitAfter: (Int) -> Duration) {
        let (ca, cb) = SimulatedCall.configurations(auto: false)
        var call = SimulatedCall(a: ca, b: cb)
        let start = call.now
        func second(_ t: MediaTime) -> Double { (t - start).inSeconds }
        var arrived: [UInt32: MediaTime] = [:]
        // The link holds what A sends, retransmissions too.
        call.timedLink = { from, packet, sent in
            guard from == .a, let packet else { return .zero }
            var extra = Duration.zero
            for h in holds {
                let from = start + .seconds(h), until = from + .milliseconds(300)
                if sent >= from && sent < until { extra = until - sent }
            }
            if Self.isVideo(packet) { arrived[packet.timestamp] = max(arrived[packet.timestamp] ?? sent, sent + .milliseconds(30) + extra) }
            return extra
        }
        for n in 0..<(18 * 30) {
            let at = start + .microseconds(Int64(n) * 33_333)
            if senderPauses.contains(where: { at >= start + .seconds($0) && at < start + .seconds($0) + .milliseconds(500) }) { continue }
            var data = [UInt8](repeating: UInt8(truncatingIfNeeded: n), count: n == 0 ? 8_000 : 1_200)
            data[0] = n == 0 ? 0x00 : 0x01
            call.schedule(.encodedVideo(data: data, isKeyframe: n == 0, capturedAt: at), on: .a, at: at)
        }
        call.run(until: start + .milliseconds(18_500))
        let shown = call.actions[.b, default: []].flatMap { entry -> [(at: MediaTime, timestamp: UInt32)] in
            if case .decode(let frames) = entry.action { return frames.map { (entry.at, $0.rtpTimestamp) } }
            return []
        }
        #expect(shown.count == 18 * 30 - senderPauses.count * 15, "\(shown.count) frames shown")
        let freezes = zip(shown, shown.dropFirst()).filter { $1.at - $0.at >= .milliseconds(300) }.map { (Int(second($0.at)), $1.at - $0.at) }
        let waits = shown.compactMap { s in arrived[s.timestamp].map { (second(s.at), s.at - $0) } }
        return (freezes, { t in waits.first { $0.0 >= Double(t) }?.1 ?? .zero })
    }

    func freezesAtTenPercentLoss(seed: UInt64) throws -> [Duration] {
        let (ca, cb) = SimulatedCall.configurations(auto: false)
        var call = SimulatedCall(a: ca, b: cb)
        call.delay = .milliseconds(50)
        var random = SeededGenerator(seed: seed)
        call.link = { _, _, _, _ in Double.random(in: 0..<1, using: &random) < 0.10 ? nil : .zero }
        let start = call.now
        call.scheduleVideo(from: .a, seconds: 20, size: 5_500, keyframeSize: 20_000)
        call.run(until: start + .seconds(21))
        let shown = call.actions[.b, default: []].flatMap { entry -> [MediaTime] in
            if case .decode(let frames) = entry.action { return frames.map { _ in entry.at } }
            return []
        }
        #expect(shown.count >= 594, "seed \(seed): \(shown.count) of 600 frames decoded")
        #expect(call.a.counters.retransmitted > 100)
        let gaps = zip(shown, shown.dropFirst()).filter { $0.0 > start + .seconds(2) }.map { $1 - $0 }
        return gaps.filter { $0 >= .milliseconds(300) }
    }
}
