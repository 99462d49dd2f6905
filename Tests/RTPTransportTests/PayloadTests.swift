import Platform
import MediaCore
import Testing
@testable import RTPTransport

@Suite struct VP8PayloadTests {
    @Test func descriptorVectors() throws {
        // X=1 S=1 PID=0 | I=1 | M=1 PictureID 0x1234: 90 80 92 34, then VP8 data.
        let (d, size) = try VP8PayloadDescriptor.parse([0x90, 0x80, 0x92, 0x34, 0xaa])
        #expect(size == 4 && d.startOfPartition && d.partitionIndex == 0 && d.pictureID == 0x1234 && d.pictureIDIs15Bit)
        // X=1 N=1 PID=2 | I L T K | 7-bit PictureID 0x05 | TL0PICIDX 9 | TID 2, Y, KEYIDX 3: a2 f0 05 09 a3
        let (e, eSize) = try VP8PayloadDescriptor.parse([0xa2, 0xf0, 0x05, 0x09, 0xa3, 0x00])
        #expect(eSize == 5 && e.nonReference && e.partitionIndex == 2 && e.pictureID == 5 && !e.pictureIDIs15Bit)
        #expect(e.tl0PictureIndex == 9 && e.temporalLayer == 2 && e.layerSync && e.keyIndex == 3)
        for descriptor in [d, e, VP8PayloadDescriptor(startOfPartition: true)] {
            var bytes: [UInt8] = []
            descriptor.serialize(into: &bytes)
            #expect(bytes.count == descriptor.serializedSize)
            #expect(try VP8PayloadDescriptor.parse(bytes + [0]).0 == descriptor)
        }
        for prefix in [[], [0x90], [0x90, 0x80], [0x90, 0x80, 0x92], [0x90, 0x80, 0x92, 0x34]] as [[UInt8]] {
            #expect(throws: ParseError.self) { try VP8PayloadDescriptor.parse(prefix) }
        }
    }

    @Test func packetizerBalancesAndMarksTheFrameStart() throws {
        var packetizer = VP8Packetizer(maxPayloadSize: 100, initialPictureID: 0x7ffe)
        let keyframe: [UInt8] = [0x10] + (1..<250).map { UInt8($0 & 0xff) }  // bit 0 = 0: keyframe
        let payloads = packetizer.packetize(keyframe)
        #expect(payloads.count == 3 && payloads.allSatisfy { $0.count <= 100 })
        #expect(Set(payloads.map(\.count)).count <= 2, "balanced sizes: \(payloads.map(\.count))")
        let fragments = try payloads.map(VP8PayloadFragment.init(parsing:))
        #expect(fragments.map(\.isFrameStart) == [true, false, false])
        #expect(fragments[0].isKeyframeStart && fragments.allSatisfy { $0.descriptor.pictureID == 0x7ffe })
        #expect(fragments.flatMap(\.data) == keyframe)
        let next = packetizer.packetize([0x11, 0, 0])[0], wrapped = packetizer.packetize([0x11, 0, 0])[0]
        #expect(try VP8PayloadFragment(parsing: next).descriptor.pictureID == 0x7fff)
        #expect(try VP8PayloadFragment(parsing: wrapped).descriptor.pictureID == 0, "15-bit wrap")
    }

    /// Frames of an encoder with temporal layers carry TID and Y in every packet, and TL0PICIDX,
    /// which counts layer-0 frames; frames without layers carry none of them (as before).
    @Test func layeredFramesCarryTheirLayerAndTheLayerZeroIndex() throws {
        var packetizer = VP8Packetizer(maxPayloadSize: 100, initialPictureID: 0x00ff)
        let frame = [UInt8](repeating: 0x11, count: 150)
        var seen: [(tl0: UInt8?, tid: UInt8?, sync: Bool)] = []
        for (id, sync) in [(0, true), (2, true), (1, true), (2, false), (0, true)] {
            let fragments = try packetizer.packetize(frame, layer: (id, sync)).map(VP8PayloadFragment.init(parsing:))
            #expect(fragments.count == 2)
            #expect(Set(fragments.map { "\($0.descriptor.tl0PictureIndex!) \($0.descriptor.temporalLayer!) \($0.descriptor.layerSync)" }).count == 1)
            seen.append((fragments[0].descriptor.tl0PictureIndex, fragments[0].descriptor.temporalLayer, fragments[0].descriptor.layerSync))
        }
        #expect(seen.map(\.tid) == [0, 2, 1, 2, 0])
        #expect(seen.map(\.sync) == [true, true, true, false, true])
        let first = try #require(seen[0].tl0)
        #expect(seen.map(\.tl0) == [first, first, first, first, first &+ 1])
        let plain = try VP8PayloadFragment(parsing: packetizer.packetize(frame)[0]).descriptor
        #expect(plain.temporalLayer == nil && plain.tl0PictureIndex == nil)
    }
}

/// Packets of VP8 frames as a sender would make them.
func videoPackets(frames: Int, packetsPerFrame: Int = 3, keyframeEvery: Int = 1000, firstSequence: UInt16 = 65530) -> [RTPPacket] {
    var packetizer = VP8Packetizer(maxPayloadSize: 100)
    var sequence = firstSequence
    var out: [RTPPacket] = []
    for f in 0..<frames {
        let isKey = f % keyframeEvery == 0
        let frame: [UInt8] = [isKey ? 0x10 : 0x11] + [UInt8](repeating: UInt8(f & 0xff), count: packetsPerFrame * 90 - 1)
        let payloads = packetizer.packetize(frame)
        for (i, payload) in payloads.enumerated() {
            out.append(RTPPacket(payloadType: 96, sequenceNumber: sequence, timestamp: UInt32(f * 3000), ssrc: 7,
                                 marker: i == payloads.count - 1, payload: payload))
            sequence &+= 1
        }
    }
    return out
}

@Suite struct VideoJitterBufferTests {
    @Test func reorderedPacketsMakeCompleteFramesInOrder() {
        var buffer = VideoJitterBuffer()
        let packets = videoPackets(frames: 4)
        // Swap neighbours throughout, across the sequence number wrap.
        var shuffled = packets
        for i in stride(from: 0, to: shuffled.count - 1, by: 2) { shuffled.swapAt(i, i + 1) }
        var frames: [VideoJitterBuffer.Frame] = []
        for (i, p) in shuffled.enumerated() {
            let result = buffer.insert(p, arrival: .milliseconds(i))
            #expect(result == .inserted)
            frames += buffer.popFrames(now: .milliseconds(i))
        }
        #expect(frames.map(\.rtpTimestamp) == [0, 3000, 6000, 9000])
        #expect(frames[0].isKeyframe && !frames[1].isKeyframe)
        #expect(frames[2].data.count == 3 * 90 && frames[2].data.dropFirst().allSatisfy { $0 == 2 })
        let late = buffer.insert(packets[0], arrival: .milliseconds(50))
        #expect(late == .late)
        #expect(buffer.packetCount == 0 && !buffer.keyframeNeeded)
    }

    /// A first keyframe spread over 30 ms by the sender's pacer is waited for, not given up
    /// after the 10 ms a reordered first packet gets; a stream that starts mid-frame is asked
    /// for a keyframe after those 10 ms.
    @Test func aFirstKeyframeStillArrivingIsNotAskedForAgain() {
        var buffer = VideoJitterBuffer(minimumDelay: .milliseconds(20))
        let packets = videoPackets(frames: 2)
        let keyframe = packets.prefix { $0.timestamp == 0 }
        #expect(keyframe.count >= 3)
        var frames: [VideoJitterBuffer.Frame] = []
        for (i, p) in keyframe.enumerated() {
            let at = Duration.milliseconds(Int64(i) * 30 / Int64(keyframe.count - 1))
            _ = buffer.insert(p, arrival: at)
            frames += buffer.popFrames(now: at)
            if i < keyframe.count - 1 { #expect(!buffer.keyframeNeeded, "asked at \(at) while the keyframe was arriving") }
        }
        #expect(frames.map(\.isKeyframe) == [true] && !buffer.keyframeNeeded)
        var joinedLate = VideoJitterBuffer(minimumDelay: .milliseconds(20))
        for (i, p) in packets.drop(while: { $0.timestamp == 0 }).enumerated() {
            _ = joinedLate.insert(p, arrival: .milliseconds(Int64(i) * 6))
            _ = joinedLate.popFrames(now: .milliseconds(Int64(i) * 6))
        }
        _ = joinedLate.popFrames(now: .milliseconds(40))
        #expect(joinedLate.keyframeNeeded, "no keyframe at the start: one is asked for")
    }

    @Test func waitsForARetransmissionThenSkipsToAKeyframe() {
        var buffer = VideoJitterBuffer(minimumDelay: .milliseconds(50))
        let packets = videoPackets(frames: 6, keyframeEvery: 4)
        let lost = packets[4]  // a packet of frame 1
        var now = Duration.zero
        var released: [UInt32] = []
        for p in packets.prefix(9) where p != lost {
            now += .milliseconds(1)
            _ = buffer.insert(p, arrival: now)
            released += buffer.popFrames(now: now).map(\.rtpTimestamp)
        }
        #expect(released == [0], "frame 1 is incomplete; frame 2 must wait behind it")
        // The retransmission arrives within the target delay: everything flows.
        _ = buffer.insert(lost, arrival: now + .milliseconds(20))
        released += buffer.popFrames(now: now + .milliseconds(20)).map(\.rtpTimestamp)
        #expect(released == [0, 3000, 6000])

        // Now frame 3 loses a packet for good; frame 4 is a keyframe.
        var second = VideoJitterBuffer(minimumDelay: .milliseconds(50))
        var out: [UInt32] = []
        for (i, p) in packets.enumerated() where i != 10 {
            _ = second.insert(p, arrival: .milliseconds(i))
            out += second.popFrames(now: .milliseconds(i)).map(\.rtpTimestamp)
        }
        // A complete keyframe behind the hole: decoding starts over at it at once (no wait).
        #expect(out == [0, 3000, 6000, 12000, 15000], "skipped to the keyframe once it was complete")
        #expect(second.keyframeNeeded && second.framesDropped >= 1)
        // Without a keyframe behind it, the hole is waited for (the target delay), then given up.
        var third = VideoJitterBuffer(minimumDelay: .milliseconds(50))
        var got: [UInt32] = []
        for (i, p) in videoPackets(frames: 6).enumerated() where i != 10 {
            _ = third.insert(p, arrival: .milliseconds(i))
            got += third.popFrames(now: .milliseconds(i)).map(\.rtpTimestamp)
        }
        got += third.popFrames(now: .milliseconds(40)).map(\.rtpTimestamp)
        #expect(got == [0, 3000, 6000] && !third.keyframeNeeded, "still waiting")
        got += third.popFrames(now: .milliseconds(100)).map(\.rtpTimestamp)
        #expect(got == [0, 3000, 6000] && third.keyframeNeeded, "given up: a keyframe is asked for")
    }

    /// With a playout delay, frames show at their RTP time (on the clock of the fastest packet)
    /// plus the delay: early ones are held, a repaired one shows when it is complete, only its
    /// lateness beyond the delay late, and the frames behind it catch up at once.
    @Test func aPlayoutDelayShowsFramesAtTheirTimeAndAbsorbsARepair() throws {
        var buffer = VideoJitterBuffer(minimumDelay: .milliseconds(20))
        buffer.playoutDelay = .milliseconds(100)
        buffer.retransmissionWait = .milliseconds(400)
        // 30 fps (3000 ticks a frame), each frame's packets arriving 5 ms after its time.
        let packets = videoPackets(frames: 10)
        let lost = packets[3 * 3 + 1]  // a packet of frame 3
        var shown: [(timestamp: UInt32, at: Duration)] = []
        func arrival(_ p: RTPPacket) -> Duration { .microseconds(Int64(p.timestamp) * 1_000 / 90) + .milliseconds(5) }
        var events: [(at: Duration, packet: RTPPacket?)] = packets.filter { $0 != lost }.map { (arrival($0), $0) }
        events.append((arrival(lost) + .milliseconds(180), lost))  // repaired 180 ms late
        for t in stride(from: 0, through: 600, by: 1) { events.append((.milliseconds(t), nil)) }  // ticks
        events.sort { $0.at < $1.at }
        for (at, packet) in events {
            if let packet { _ = buffer.insert(packet, arrival: at) }
            shown += buffer.popFrames(now: at).map { ($0.rtpTimestamp, at) }
        }
        #expect(shown.map(\.timestamp) == (0..<10).map { UInt32($0 * 3000) })
        // Frame 0 starts the stream at once; frames 1, 2 at their time + 5 ms + 100 ms.
        #expect(shown[1].at == .microseconds(138_333), "\(shown.map { ($0.timestamp, $0.at) })")
        // Frame 3 (due at 205 ms) completes at 285 ms: shown then, 80 ms late, frame 4 behind it.
        #expect(shown[3].at == .milliseconds(285) && shown[4].at == .milliseconds(285))
        let gaps = zip(shown.dropFirst(), shown.dropFirst(2)).map { $1.at - $0.at }
        #expect(gaps.max()! < .milliseconds(150), "the repair shows as \(gaps.max()!), not as its 180 ms")
        #expect(buffer.framesDropped == 0 && !buffer.keyframeNeeded)
    }

    /// A link that delivers in bursts (a cellular scheduler: everything held for 100 ms, then
    /// at once) makes frames late by up to a burst's length; `recentLateness` measures it (a
    /// smooth path measures none), and a playout delay of that much shows the frames evenly
    /// instead of three at once after each hold.
    @Test func burstyDeliveryIsMeasuredAndAPlayoutDelayOfItShowsFramesEvenly() {
        func play(burst: Int64?, delay: Duration) -> (lateness: Duration, largestGap: Duration) {
            var buffer = VideoJitterBuffer(minimumDelay: .milliseconds(20))
            buffer.playoutDelay = delay
            var events: [(at: Duration, packet: RTPPacket?)] = videoPackets(frames: 150).map { p in
                let time = Int64(p.timestamp) * 1_000 / 90 + 20_000  // µs: its time + 20 ms of path
                let arrival = burst.map { (time + $0 - 1) / $0 * $0 } ?? time
                return (.microseconds(arrival), p)
            }
            for t in stride(from: 0, through: 5_400, by: 1) { events.append((.milliseconds(t), nil)) }
            events.sort { $0.at < $1.at }
            var shown: [Duration] = []
            for (at, packet) in events {
                if let packet { _ = buffer.insert(packet, arrival: at) }
                shown += buffer.popFrames(now: at).map { _ in at }
            }
            #expect(shown.count == 150)
            let gaps = zip(shown.dropFirst(30), shown.dropFirst(31)).map { $1 - $0 }
            return (buffer.recentLateness(0.9), gaps.max()!)
        }
        let smooth = play(burst: nil, delay: .zero)
        #expect(smooth.lateness < .milliseconds(5) && smooth.largestGap < .milliseconds(40), "\(smooth)")
        let bursty = play(burst: 100_000, delay: .zero)
        #expect(bursty.lateness >= .milliseconds(60) && bursty.lateness <= .milliseconds(100), "\(bursty)")
        #expect(bursty.largestGap >= .milliseconds(90), "shown in bursts: \(bursty)")
        let smoothed = play(burst: 100_000, delay: bursty.lateness)
        #expect(smoothed.largestGap < .milliseconds(45), "shown evenly: \(smoothed)")
    }

    @Test func targetDelayFollowsJitterAndRTT() {
        var calm = VideoJitterBuffer(minimumDelay: .milliseconds(10))
        var rough = VideoJitterBuffer(minimumDelay: .milliseconds(10))
        var rng = SeededGenerator(seed: 1)
        for (i, p) in videoPackets(frames: 100, packetsPerFrame: 1).enumerated() {
            let base = Duration.milliseconds(i * 33)
            _ = calm.insert(p, arrival: base)
            _ = rough.insert(p, arrival: base + .milliseconds(Int.random(in: 0...40, using: &rng)))
        }
        #expect(calm.targetDelay == .milliseconds(10))
        #expect(rough.targetDelay > .milliseconds(30), "\(rough.targetDelay)")
        calm.retransmissionWait = .milliseconds(80)
        #expect(calm.targetDelay >= .milliseconds(80))
    }

    @Test func memoryIsBounded() {
        var buffer = VideoJitterBuffer(maxPackets: 50)
        // Frame 0's second packet never comes: nothing can be released, yet memory stays bounded.
        for (i, p) in videoPackets(frames: 100).enumerated() where i != 1 { _ = buffer.insert(p, arrival: .milliseconds(i)) }
        #expect(buffer.packetCount <= 50 && buffer.keyframeNeeded)
    }
}

@Suite struct AudioJitterBufferTests {
    func packet(_ seq: UInt16) -> RTPPacket {
        RTPPacket(payloadType: 111, sequenceNumber: seq, timestamp: UInt32(seq) * 960, ssrc: 1, payload: [UInt8(seq & 0xff)])
    }

    /// Nobody plays out (a stalled speaker) while packets keep coming, some far ahead: the buffer
    /// holds at most its capacity and plays the newest when playout resumes.
    @Test func packetsThatAreNotPlayedOutStayBounded() {
        var buffer = AudioJitterBuffer()
        var most = 0
        var seq: UInt16 = 0
        for i in 0..<20_000 {
            seq &+= (i % 1000 == 999) ? 20_000 : 1
            buffer.insert(packet(seq), arrival: .milliseconds(i * 20))
            most = max(most, buffer.count)
        }
        #expect(most <= Int(AudioJitterBuffer.capacity))
        #expect(buffer.droppedForLatency > 0)
        var played: AudioJitterBuffer.Playout = .buffering
        for _ in 0..<3 where played == .buffering { played = buffer.nextPlayout() }
        #expect(played != .buffering && played != .conceal, "\(played)")
    }

    @Test func decodesFECRecoversAndConceals() {
        // A target of 8 frames: playout starts with all 8 packets buffered.
        var buffer = AudioJitterBuffer(minimumDelay: .milliseconds(160))
        let first = buffer.nextPlayout()
        #expect(first == .buffering)
        for seq: UInt16 in [100, 101, 103, 104, 107] { buffer.insert(packet(seq), arrival: .milliseconds(Int(seq) * 20)) }
        var plays: [AudioJitterBuffer.Playout] = []
        for _ in 0..<8 { plays.append(buffer.nextPlayout()) }
        #expect(plays == [.decode([100]), .decode([101]), .decodeFEC(nextPacket: [103]), .decode([103]), .decode([104]),
                          .conceal, .decodeFEC(nextPacket: [107]), .decode([107])])
        #expect(buffer.recoveredByFEC == 2 && buffer.concealed == 1)
        buffer.insert(packet(102), arrival: .seconds(10))
        #expect(buffer.latePackets == 1)
    }

    @Test func concealsABriefUnderrunThenWaitsForTheStreamToReturn() {
        var buffer = AudioJitterBuffer(minimumDelay: .milliseconds(20))
        buffer.insert(packet(10), arrival: .zero)
        var plays = (0..<8).map { _ in buffer.nextPlayout() }
        #expect(plays == [.decode([10])] + [AudioJitterBuffer.Playout](repeating: .conceal, count: 5) + [.buffering, .buffering])
        buffer.insert(packet(40), arrival: .seconds(1))
        plays = (0..<2).map { _ in buffer.nextPlayout() }
        #expect(plays.first == .decode([40]))
    }

    /// Packets of 10 and 20 ms in one stream (a callend sender changing its packet duration):
    /// the buffer counts time, a quiet path's target is one packet, and a lost packet is rebuilt
    /// or concealed for as long as it was (the gap to the packet after it).
    @Test func packetsOfAnyDurationAreCountedInTime() {
        var buffer = AudioJitterBuffer()
        func insert(_ seq: UInt16, _ timestamp: UInt32, _ samples: Int) {
            buffer.insert(RTPPacket(payloadType: 111, sequenceNumber: seq, timestamp: timestamp, ssrc: 1, payload: [UInt8(seq)]),
                          arrival: .microseconds(Int64(timestamp) * 1000 / 48), samples: samples)
        }
        insert(0, 0, 480)
        #expect(buffer.targetDelay == .milliseconds(10) && buffer.buffered == .milliseconds(10))
        #expect(buffer.nextPlayout() == .decode([0]) && buffer.frameSamples == 480)
        insert(2, 960, 960)  // 1 (10 ms) lost; 2 is 20 ms
        #expect(buffer.nextPlayout() == .decodeFEC(nextPacket: [2]) && buffer.frameSamples == 480)
        #expect(buffer.nextPlayout() == .decode([2]) && buffer.frameSamples == 960 && buffer.lastPlayedTimestamp == 960)
        insert(4, 2880, 480)  // 3 (20 ms) lost; 4 is 10 ms again
        #expect(buffer.nextPlayout() == .decodeFEC(nextPacket: [4]) && buffer.frameSamples == 960 && buffer.lastPlayedTimestamp == 1920)
        #expect(buffer.nextPlayout() == .decode([4]) && buffer.frameSamples == 480)
        // 5 is late: a frame is concealed and 5 is still awaited, then played (the stream stretched).
        #expect(buffer.nextPlayout() == .conceal && buffer.frameSamples == 480)
        insert(5, 3360, 480)
        #expect(buffer.nextPlayout() == .decode([5]) && buffer.lastPlayedTimestamp == 3360)
        #expect(buffer.recoveredByFEC == 2 && buffer.decoded == 4 && buffer.concealed == 1 && buffer.latePackets == 0)
    }

    /// Playout that began with a packet more than the jitter needs keeps it for good unless the
    /// buffer lets it go: after a second in which it never held less than the target and a
    /// packet, one packet goes, and no more once what is held is what the jitter asks for.
    @Test func aStandingQueueDrains() {
        var buffer = AudioJitterBuffer()
        func insert(_ seq: Int) {
            // 10 ms packets arriving 1 ms early or late by turns: a jitter of about 2 ms.
            buffer.insert(RTPPacket(payloadType: 111, sequenceNumber: UInt16(seq), timestamp: UInt32(seq * 480), ssrc: 1, payload: [1]),
                          arrival: .milliseconds(seq * 10 + (seq % 2 == 0 ? 1 : -1)), samples: 480)
        }
        for seq in 0..<3 { insert(seq) }
        var levels: [Duration] = []
        for seq in 3..<303 {
            levels.append(buffer.buffered)
            #expect(buffer.nextPlayout() == .decode([1]))
            insert(seq)
        }
        #expect(buffer.targetDelay > .milliseconds(12) && buffer.targetDelay < .milliseconds(16), "\(buffer.targetDelay)")
        #expect(levels[0] == .milliseconds(30) && levels.last == .milliseconds(20), "\(levels)")
        #expect(buffer.droppedForLatency == 1 && buffer.concealed == 0)
    }

    /// With the playout times known, the slack is measured: every packet waiting 25 ms for a
    /// target of one packet and twice a 2 ms jitter can be played two packets sooner, and is,
    /// after a second; then each waits about 5 ms, and nothing is concealed.
    @Test func packetsThatWaitLongerThanTheJitterNeedsArePlayedSooner() {
        var buffer = AudioJitterBuffer()
        func arrival(_ seq: Int) -> Duration { .milliseconds(seq * 10 + (seq % 2 == 0 ? 1 : -1)) }
        var inserted = 0
        var waits: [Duration] = []
        var now = Duration.milliseconds(25)
        for _ in 0..<300 {
            while arrival(inserted) <= now {
                buffer.insert(RTPPacket(payloadType: 111, sequenceNumber: UInt16(inserted), timestamp: UInt32(inserted * 480), ssrc: 1,
                                        payload: [UInt8(inserted >> 8), UInt8(inserted & 0xff)]), arrival: arrival(inserted), samples: 480)
                inserted += 1
            }
            if case .decode(let payload) = buffer.nextPlayout(at: now) { waits.append(now - arrival(Int(payload[0]) << 8 | Int(payload[1]))) }
            now += .milliseconds(10)
        }
        #expect(waits.first! >= .milliseconds(24) && waits.last! <= .milliseconds(6) && waits.last! >= .milliseconds(4), "\(waits)")
        #expect(buffer.droppedForLatency == 2 && buffer.concealed == 0)
    }

    @Test func dropsOldFramesWhenLatencyBuildsUp() {
        var buffer = AudioJitterBuffer(minimumDelay: .milliseconds(20))
        for seq: UInt16 in 0..<10 { buffer.insert(packet(seq), arrival: .milliseconds(Int(seq) * 20)) }
        _ = buffer.nextPlayout()
        #expect(buffer.droppedForLatency >= 1)
    }
}

@Suite struct NACKTests {
    @Test func asksRetriesAndGivesUp() {
        var nack = NACKGenerator(maxRetries: 3, reorderingDelay: .milliseconds(5))
        nack.echoDelay = nil
        for seq: UInt16 in [65534, 65535, 2, 3] { nack.received(seq, now: .zero) }
        let rtt = Duration.milliseconds(40)
        let d1 = nack.due(now: .milliseconds(1), roundTripTime: rtt)
        #expect(d1.isEmpty, "reordering grace")
        let d2 = nack.due(now: .milliseconds(6), roundTripTime: rtt)
        #expect(d2 == [0, 1])
        let d3 = nack.due(now: .milliseconds(30), roundTripTime: rtt)
        #expect(d3.isEmpty, "not before a round trip")
        nack.received(0, now: .milliseconds(50))
        let d4 = nack.due(now: .milliseconds(70), roundTripTime: rtt)
        #expect(d4 == [1])
        let d5 = nack.due(now: .milliseconds(140), roundTripTime: rtt)
        #expect(d5 == [1])
        #expect(!nack.keyframeNeeded)
        let d6 = nack.due(now: .milliseconds(210), roundTripTime: rtt)
        #expect(d6.isEmpty)
        #expect(nack.keyframeNeeded && nack.gaveUp == 1 && nack.recovered == 1)
    }

    /// In a call a hole is asked for with the packet that shows it (no wait, no tick), that
    /// request repeated 15 ms later (a lost NACK costs no round trip), and asked for again a
    /// round trip and 5 ms after the first; `nextDue` tells the core when to come back.
    @Test func theFirstNACKGoesWithThePacketThatShowsTheGap() {
        var nack = NACKGenerator()
        let rtt = Duration.milliseconds(100)
        nack.received(10, now: .zero)
        #expect(nack.nextDue(roundTripTime: rtt) == nil, "nothing missing, nothing due")
        nack.received(12, now: .milliseconds(33))
        #expect(nack.nextDue(roundTripTime: rtt) == .milliseconds(33))
        #expect(nack.due(now: .milliseconds(33), roundTripTime: rtt) == [11])
        #expect(NACKGenerator.retryInterval(roundTripTime: rtt) == .milliseconds(105))
        #expect(nack.nextDue(roundTripTime: rtt) == .milliseconds(48))
        #expect(nack.due(now: .milliseconds(47), roundTripTime: rtt).isEmpty)
        #expect(nack.due(now: .milliseconds(48), roundTripTime: rtt) == [11], "the repeat")
        #expect(nack.nextDue(roundTripTime: rtt) == .milliseconds(138))
        #expect(nack.due(now: .milliseconds(137), roundTripTime: rtt).isEmpty)
        #expect(nack.due(now: .milliseconds(138), roundTripTime: rtt) == [11])
        #expect(NACKGenerator.retryInterval(roundTripTime: .milliseconds(1)) == .milliseconds(10), "10 ms at least")
    }

    /// A sender that skips on purpose (every other sequence number, 499 ahead each time) cannot
    /// grow the missing set past its bound, and no NACK outgrows one MTU.
    @Test func theMissingSetAndEachNACKStayBounded() throws {
        var nack = NACKGenerator(maxMissing: 500)
        var seq: UInt16 = 0
        var most = 0
        for i in 0..<10_000 {
            seq &+= (i % 2 == 0) ? 2 : 499
            nack.received(seq, now: .milliseconds(i / 10))
            most = max(most, nack.missingCount)
        }
        #expect(most > 0 && most <= 500)
        #expect(nack.keyframeNeeded)
        let lost = nack.due(now: .milliseconds(1000), roundTripTime: .milliseconds(50))
        #expect(lost.count <= NACKGenerator.maxPerRequest)
        // The worst case for the wire: no two asked-for numbers share an entry.
        var sparse = NACKGenerator(maxMissing: 100_000)
        for s in 0..<UInt16(34_000) where s % 17 != 0 { sparse.received(s, now: .zero) }
        let asked = sparse.due(now: .milliseconds(10), roundTripTime: .milliseconds(50))
        #expect(asked.count == NACKGenerator.maxPerRequest)
        let packet = RTCPPacket.nack(GenericNACK(senderSSRC: 1, mediaSSRC: 2, lost: asked))
        let bytes = RTCPPacket.serializeCompound([packet])
        #expect(bytes.count <= 1200, "\(bytes.count) bytes")
    }

    /// Holes in a range of numbers no frame needs are dropped; the others stay, across a wrap.
    @Test func aRangeOfNumbersIsForgotten() {
        var nack = NACKGenerator()
        for s: UInt16 in [65530, 65531, 65535, 3, 8] { nack.received(s, now: .zero) }
        #expect(nack.missingCount == 3 + 3 + 4)
        nack.forget(65532, through: 65534)
        nack.forget(0, through: 2)
        #expect(nack.due(now: .milliseconds(1), roundTripTime: .milliseconds(50)) == [4, 5, 6, 7])
    }

    @Test func hugeJumpAsksForAKeyframe() {
        var nack = NACKGenerator(maxMissing: 100)
        nack.received(10, now: .zero)
        nack.received(5000, now: .zero)
        #expect(nack.keyframeNeeded && nack.missingCount == 0)
    }

    @Test func historyDeduplicatesCapsAndGivesWay() {
        var history = RetransmissionHistory(capacity: 100, maxPerRequest: 10)
        for seq: UInt16 in 0..<200 { history.store(RTPPacket(payloadType: 96, sequenceNumber: seq, timestamp: 0, ssrc: 1), sentAt: .milliseconds(Int(seq))) }
        let first = history.answer([150, 151], now: .milliseconds(210), roundTripTime: .milliseconds(50))
        #expect(first.packets.map(\.sequenceNumber) == [150, 151] && !first.keyframeInstead)
        let suppressedBefore = history.suppressedDuplicates
        let again = history.answer([150, 151], now: .milliseconds(220), roundTripTime: .milliseconds(50))
        #expect(again.packets.isEmpty && history.suppressedDuplicates == suppressedBefore + 2, "a request that crossed the resend: not resent")
        let retry = history.answer([151], now: .milliseconds(248), roundTripTime: .milliseconds(50))
        #expect(retry.packets.map(\.sequenceNumber) == [151, 151], "three quarters of a round trip on, a retry (the resend was lost): resent twice")
        let later = history.answer([150], now: .milliseconds(300), roundTripTime: .milliseconds(50))
        #expect(later.packets.count == 2)
        _ = history.answer([160], now: .milliseconds(300), roundTripTime: .milliseconds(1))
        let shortRetry = history.answer([160], now: .milliseconds(311), roundTripTime: .milliseconds(1))
        #expect(shortRetry.packets.map(\.sequenceNumber) == [160], "a 1 ms round trip: the next retry is 10 ms away, one copy")
        let old = history.answer([5, 6, 7], now: .milliseconds(300), roundTripTime: .milliseconds(50))
        #expect(old.unavailable == 3 && old.keyframeInstead)
        let flood = history.answer(Array(100..<140), now: .milliseconds(400), roundTripTime: .milliseconds(50))
        #expect(flood.packets.count == 10 && flood.keyframeInstead)
    }

    @Test func rtxWrapsAndUnwraps() throws {
        let original = RTPPacket(payloadType: 96, sequenceNumber: 4242, timestamp: 9000, ssrc: 7, marker: true, payload: [1, 2, 3])
        let rtx = RTX.wrap(original, ssrc: 8, payloadType: 97, sequenceNumber: 1)
        #expect(rtx.payload == [0x10, 0x92, 1, 2, 3] && rtx.ssrc == 8 && rtx.payloadType == 97)
        #expect(try RTX.unwrap(rtx, mediaSSRC: 7, mediaPayloadType: 96) == original)
        #expect(throws: ParseError.self) { try RTX.unwrap(RTPPacket(payloadType: 97, sequenceNumber: 1, timestamp: 0, ssrc: 8, payload: [1]), mediaSSRC: 7, mediaPayloadType: 96) }
    }
}

@Suite struct StatisticsTests {
    @Test func lossJitterAndRoundTrip() {
        var stats = ReceiverStatistics(ssrc: 9, clockRate: 90_000)
        // 100 packets, every 10th lost, 33 ms apart with ±2 ms arrival wobble.
        for i in 0..<100 where i % 10 != 5 {
            let wobble = i % 2 == 0 ? 2 : -2
            stats.received(sequenceNumber: UInt16(truncatingIfNeeded: 65500 + i), rtpTimestamp: UInt32(i * 2970),
                           arrival: .milliseconds(i * 33 + wobble))
        }
        stats.senderReportReceived(ntpTimestamp: 0x0001_2345_6789_0000, arrival: .seconds(3))
        let report = stats.makeReport(now: .milliseconds(3500))
        #expect(report.cumulativeLost == 10 && report.fractionLost == UInt8((10 << 8) / 100))
        #expect(report.extendedHighestSequence == UInt32(65500 + 99))
        #expect(report.jitter > 200 && report.jitter < 500, "≈ 4 ms of wobble at 90 kHz: \(report.jitter)")
        #expect(report.lastSenderReport == 0x2345_6789 && report.delaySinceLastSenderReport == 32768)
        // Next interval: nothing lost.
        stats.received(sequenceNumber: UInt16(truncatingIfNeeded: 65600), rtpTimestamp: 0, arrival: .seconds(4))
        let quiet = stats.makeReport(now: .seconds(4))
        #expect(quiet.fractionLost == 0)

        // RTT: the report left the receiver 0.5 s after the SR; it arrives back 0.6 s after the SR went out.
        let sent = NTPTime.timestamp(unixSeconds: 1_000_000)
        let back = NTPTime.timestamp(unixSeconds: 1_000_000.6)
        let rr = ReceptionReport(ssrc: 1, lastSenderReport: NTPTime.compact(sent), delaySinceLastSenderReport: 32768)
        let rtt = NTPTime.roundTripTime(reportArrivalNTP: back, report: rr)!
        #expect(rtt > .milliseconds(99) && rtt < .milliseconds(101), "\(rtt)")
    }

    @Test func keyframeRequestsAreThrottled() {
        var throttle = KeyframeRequestThrottle(minimumInterval: .milliseconds(300))
        let answers = [throttle.shouldRequest(now: .zero), throttle.shouldRequest(now: .milliseconds(100)),
                       throttle.shouldRequest(now: .milliseconds(301)),
                       throttle.shouldRequest(now: .milliseconds(700), roundTripTime: .milliseconds(250))]
        #expect(answers == [true, false, true, false])
    }
}

@Suite struct VideoJitterBufferStartTests {
    @Test func aStreamThatStartsWithoutItsKeyframeAsksForOneAtOnce() {
        var buffer = VideoJitterBuffer(minimumDelay: .milliseconds(100))
        let packets = videoPackets(frames: 6, keyframeEvery: 3)
        // The first keyframe's first packet is lost: nothing can be decoded until the next keyframe.
        for (i, p) in packets.enumerated() where i != 0 && i < 6 { _ = buffer.insert(p, arrival: .milliseconds(i)) }
        #expect(buffer.popFrames(now: .milliseconds(6)).isEmpty)
        #expect(buffer.popFrames(now: .milliseconds(16)).isEmpty)
        #expect(buffer.keyframeNeeded, "asked without waiting out the 100 ms target delay")
        for (i, p) in packets.enumerated() where i >= 6 { _ = buffer.insert(p, arrival: .milliseconds(i)) }
        #expect(buffer.popFrames(now: .milliseconds(20)).map(\.rtpTimestamp) == [9000, 12000, 15000])
    }
}

@Suite struct REDPayloadTests {
    @Test func blocksRoundTripAndTheHeaderSaysTheirOffsetsAndLengths() throws {
        let red = REDPayload(redundant: [.init(payloadType: 111, timestampOffset: 1920, data: [1, 2]), .init(payloadType: 111, timestampOffset: 960, data: [3])],
                             primaryPayloadType: 111, primary: [4, 5, 6])
        let bytes = red.serialized()
        // F=1|PT 111, offset 1920 << 10 | length 2; then F=1|111, 960 << 10 | 1; then F=0|111; data.
        #expect(bytes == [0xef, 0x1e, 0x00, 0x02, 0xef, 0x0f, 0x00, 0x01, 0x6f, 1, 2, 3, 4, 5, 6])
        #expect(try REDPayload(parsing: bytes) == red)
        #expect(try REDPayload(parsing: [0x6f, 9]) == REDPayload(redundant: [], primaryPayloadType: 111, primary: [9]))
    }

    @Test func blocksTheHeaderCannotHoldAreLeftOut() throws {
        let red = REDPayload(redundant: [.init(payloadType: 111, timestampOffset: REDPayload.maxTimestampOffset + 1, data: [1]),
                                         .init(payloadType: 111, timestampOffset: 960, data: [UInt8](repeating: 7, count: 1024)),
                                         .init(payloadType: 111, timestampOffset: 960, data: [2])],
                             primaryPayloadType: 111, primary: [3])
        #expect(try REDPayload(parsing: red.serialized()).redundant == [.init(payloadType: 111, timestampOffset: 960, data: [2])])
    }

    @Test func aPayloadThatLiesIsRefused() {
        #expect(throws: ParseError.self) { try REDPayload(parsing: []) }
        #expect(throws: ParseError.self) { try REDPayload(parsing: [0xef, 0x0f]) }  // header cut short
        #expect(throws: ParseError.self) { try REDPayload(parsing: [0xef, 0x0f, 0x00, 0x09, 0x6f, 1]) }  // block of 9, 1 byte left
        #expect(throws: ParseError.self) { try REDPayload(parsing: [UInt8](repeating: 0xef, count: 400)) }  // headers only
    }

    @Test func recentSequencesKnowWhatArrivedAcrossTheWrap() {
        var seen = RecentSequences()
        #expect(!seen.contains(5))
        for s: UInt16 in [65534, 65535, 1] { seen.insert(s) }
        #expect(seen.contains(65534) && seen.contains(65535) && seen.contains(1))
        #expect(!seen.contains(0) && !seen.contains(2))
        seen.insert(0)  // late
        #expect(seen.contains(0))
        seen.insert(100)
        #expect(seen.contains(1), "more than 64 behind counts as seen")
        #expect(!seen.contains(99) && seen.contains(100))
    }
}

@Suite struct NACKRequesterTests {
    /// A retransmission cannot say which request it answers: the round trip is the least time
    /// from a hole's first request to its repair over the last seconds, so a repair that lands
    /// just after a retry (the first request's answer, slow) does not pass for a 5 ms round trip.
    @Test func theRoundTripIsMeasuredFromTheFirstRequest() {
        var requester = NACKRequester()
        let t0 = MediaTime(microseconds: 1_000_000)
        requester.received(10, at: t0)
        requester.received(12, at: t0)  // 11 is missing
        let first = requester.due(senderSSRC: 1, mediaSSRC: 2, at: t0)
        #expect(first?.lostSequenceNumbers == [11])
        // The default 50 ms estimate retries after 55 ms; the real round trip is 100 ms.
        let retry = requester.due(senderSSRC: 1, mediaSSRC: 2, at: t0 + .milliseconds(63))
        #expect(retry?.lostSequenceNumbers == [11])
        let repaired = requester.repaired(11, at: t0 + .milliseconds(100))
        #expect(repaired)
        #expect(requester.roundTripTime == .milliseconds(100), "from the first request, not 37 ms from the retry")
        requester.received(14, at: t0 + .milliseconds(200))  // 13 is missing
        _ = requester.due(senderSSRC: 1, mediaSSRC: 2, at: t0 + .milliseconds(200))
        let late = requester.repaired(13, at: t0 + .milliseconds(430))
        #expect(late, "the first request was lost, a retry's answer")
        #expect(requester.roundTripTime == .milliseconds(100), "the least of recent samples")
        let padding = requester.repaired(99, at: t0 + .milliseconds(500))
        #expect(!padding, "nobody asked for 99: a probe's padding")
    }

    /// A probe's padding that carries a packet asked for arrives like its repair, a few
    /// milliseconds after the request: the round trip of RTCP reports is a floor under it.
    @Test func theReportedRoundTripIsAFloor() {
        var requester = NACKRequester()
        requester.reportedRoundTripTime = .milliseconds(100)
        let t0 = MediaTime(microseconds: 1_000_000)
        requester.received(10, at: t0)
        requester.received(12, at: t0)
        _ = requester.due(senderSSRC: 1, mediaSSRC: 2, at: t0)
        let padded = requester.repaired(11, at: t0 + .milliseconds(20))
        #expect(padded && requester.roundTripTime == .milliseconds(100), "\(requester.roundTripTime)")
        #expect(requester.retransmissionWait == .milliseconds(430), "15 + 100 + 3 x 105 ms")
    }

    /// At a 1 ms round trip retries go 10 ms apart: the generator still asks after 30 of them
    /// (0.3 s, a fade of loss), longer than the jitter buffer's wait (250 ms at least).
    @Test func retriesOutlastTheJitterBuffersWait() {
        var generator = NACKGenerator()
        generator.received(10, now: .zero)
        generator.received(12, now: .zero)
        var asked = 0
        for ms in stride(from: 0, through: 300, by: 10) where generator.due(now: .milliseconds(ms), roundTripTime: .milliseconds(1)).contains(11) { asked += 1 }
        #expect(asked >= 30 && !generator.keyframeNeeded && generator.missingCount == 1, "\(asked) requests")
    }
}
