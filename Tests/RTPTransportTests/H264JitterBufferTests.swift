import MediaCore
import Testing
@testable import RTPTransport

/// Units as an encoder makes them: header byte (NRI 3 and a type), then a body.
private func unit(_ type: UInt8, size: Int, fill: UInt8) -> [UInt8] { [0x60 | type] + [UInt8](repeating: fill, count: size - 1) }

/// The units of picture `f`: a keyframe (SPS, PPS, IDR) every `keyframeEvery`, else one slice;
/// large enough for FU-As at a 100-byte payload.
private func pictureUnits(_ f: Int, keyframeEvery: Int) -> [[UInt8]] {
    f % keyframeEvery == 0 ? [unit(7, size: 10, fill: 1), unit(8, size: 4, fill: 2), unit(5, size: 250, fill: UInt8(f & 0xff))]
        : [unit(1, size: 230, fill: UInt8(f & 0xff))]
}

/// RTP packets of H.264 pictures as a sender makes them (marker on each picture's last).
private func h264Packets(frames: Int, keyframeEvery: Int = 1000, firstSequence: UInt16 = 65530, units: (Int) -> [[UInt8]]? = { _ in nil })
    -> [RTPPacket] {
    var packetizer = H264Packetizer(maxPayloadSize: 100)
    var sequence = firstSequence
    var out: [RTPPacket] = []
    for f in 0..<frames {
        let payloads = packetizer.packetize(units: (units(f) ?? pictureUnits(f, keyframeEvery: keyframeEvery)).map { $0[...] })
        for (i, payload) in payloads.enumerated() {
            out.append(RTPPacket(payloadType: 102, sequenceNumber: sequence, timestamp: UInt32(f * 3000), ssrc: 7,
                                 marker: i == payloads.count - 1, payload: payload))
            sequence &+= 1
        }
    }
    return out
}

private func feed(_ buffer: inout VideoJitterBuffer, _ packets: [RTPPacket], stepMs: Int64 = 1, from start: Int64 = 0) -> [VideoJitterBuffer.Frame] {
    var frames: [VideoJitterBuffer.Frame] = []
    for (i, p) in packets.enumerated() {
        let now = Duration.milliseconds(start + Int64(i) * stepMs)
        _ = buffer.insert(p, arrival: now)
        frames += buffer.popFrames(now: now)
    }
    return frames
}

/// The video jitter buffer with H.264, which marks no frame start (RFC 6184 §5.1): frames are
/// found from the last frame released, the timestamps of neighbours, and the SPS that opens
/// each keyframe.
@Suite struct H264JitterBufferTests {
    @Test func framesComeOutAsAccessUnitsInOrderThroughReordering() {
        let packets = h264Packets(frames: 6, keyframeEvery: 4)
        var shuffled = packets
        for i in stride(from: 0, to: shuffled.count - 1, by: 2) { shuffled.swapAt(i, i + 1) }
        for input in [packets, shuffled] {
            var buffer = VideoJitterBuffer(format: .h264)
            let frames = feed(&buffer, input)
            #expect(frames.map(\.rtpTimestamp) == [0, 3000, 6000, 9000, 12000, 15000])
            #expect(frames.map(\.isKeyframe) == [true, false, false, false, true, false])
            #expect(frames[2].data == H264NALUnit.annexB(pictureUnits(2, keyframeEvery: 4)), "an Annex B access unit")
            #expect(frames[4].data == H264NALUnit.annexB(pictureUnits(4, keyframeEvery: 4)))
            #expect(buffer.packetCount == 0 && !buffer.keyframeNeeded && buffer.framesDropped == 0)
        }
        var buffer = VideoJitterBuffer(format: .h264)
        #expect(buffer.insert(RTPPacket(payloadType: 102, sequenceNumber: 1, timestamp: 0, ssrc: 7, payload: [0x1e, 0]), arrival: .zero) == .invalid)
        #expect(buffer.insert(packets[0], arrival: .zero) == .inserted)
    }

    @Test func aHoleIsWaitedForThenSkippedToTheNextKeyframe() {
        let packets = h264Packets(frames: 7, keyframeEvery: 4)
        // Frame 1's middle fragment: retransmitted within the wait, everything flows.
        let frame1 = packets.indices.filter { packets[$0].timestamp == 3000 }
        let lost = frame1[1]
        var buffer = VideoJitterBuffer(format: .h264, minimumDelay: .milliseconds(50))
        var released = feed(&buffer, packets.enumerated().filter { $0.offset != lost }.map(\.element)).map(\.rtpTimestamp)
        #expect(released == [0, 12000, 15000, 18000], "the keyframe behind the hole is taken at once")
        #expect(buffer.keyframeNeeded && buffer.framesDropped == 3)

        var repaired = VideoJitterBuffer(format: .h264, minimumDelay: .milliseconds(50))
        released = feed(&repaired, Array(packets.prefix(lost + 4)).filter { $0 != packets[lost] }).map(\.rtpTimestamp)
        #expect(released == [0])
        _ = repaired.insert(packets[lost], arrival: .milliseconds(30))
        released += repaired.popFrames(now: .milliseconds(30)).map(\.rtpTimestamp)
        #expect(released == [0, 3000], "complete again, and it continues the keyframe")
        #expect(!repaired.keyframeNeeded)

        // No keyframe behind the hole: the target delay, then a keyframe is asked for.
        var waiting = VideoJitterBuffer(format: .h264, minimumDelay: .milliseconds(50))
        released = feed(&waiting, Array(packets.prefix(frame1.last! + 4)).filter { $0 != packets[lost] }).map(\.rtpTimestamp)
        #expect(released == [0] && !waiting.keyframeNeeded)
        _ = waiting.popFrames(now: .milliseconds(200))
        #expect(waiting.keyframeNeeded)
    }

    /// A receiver that starts mid-stream takes the first keyframe (opened by its SPS) and asks
    /// for one until then; a frame that opens with a delimiter or SEI before its SPS is one
    /// frame, not two.
    @Test func aLateStartWaitsForAKeyframeOpenedByItsSPS() {
        let packets = h264Packets(frames: 6, keyframeEvery: 4)
        var joined = VideoJitterBuffer(format: .h264, minimumDelay: .milliseconds(20))
        let late = Array(packets.drop { $0.timestamp < 3000 })
        let frames = feed(&joined, late, stepMs: 6)
        #expect(frames.map(\.rtpTimestamp) == [12000, 15000])
        #expect(joined.keyframeNeeded, "asked while only delta frames came")

        // The same with an access unit delimiter opening every picture: a delta frame after the
        // gap opens as a keyframe might, and is still not taken for one (it does not decode on
        // its own).
        var delimited: [RTPPacket] = []
        var sequence: UInt16 = 100
        for packet in packets {
            if delimited.last?.timestamp != packet.timestamp {
                delimited.append(RTPPacket(payloadType: 102, sequenceNumber: sequence, timestamp: packet.timestamp, ssrc: 7, payload: [0x09, 0x10]))
                sequence &+= 1
            }
            var renumbered = packet
            renumbered.sequenceNumber = sequence
            sequence &+= 1
            delimited.append(renumbered)
        }
        var joinedDelimited = VideoJitterBuffer(format: .h264, minimumDelay: .milliseconds(20))
        let delimitedFrames = feed(&joinedDelimited, Array(delimited.drop { $0.timestamp < 3000 }), stepMs: 6)
        #expect(delimitedFrames.map(\.rtpTimestamp) == [12000, 15000] && delimitedFrames[0].isKeyframe)
        #expect(delimitedFrames[0].data.prefix(6) == [0, 0, 0, 1, 0x09, 0x10])

        // The first IDR without the packet of its parameter sets is not a start: the decoder
        // would have nothing to decode it with.
        var noParameterSets = VideoJitterBuffer(format: .h264, minimumDelay: .milliseconds(20))
        #expect(feed(&noParameterSets, Array(packets.dropFirst()), stepMs: 6).map(\.rtpTimestamp) == [12000, 15000])

        let sei = unit(6, size: 20, fill: 9), aud = [UInt8](arrayLiteral: 0x09, 0x10)
        let withPrefix = h264Packets(frames: 3, keyframeEvery: 2) { f in
            f == 2 ? [sei] + pictureUnits(2, keyframeEvery: 2) : nil
        }
        // The packetizer drops delimiters; put one in front of the first picture by hand.
        let delimiter = RTPPacket(payloadType: 102, sequenceNumber: withPrefix[0].sequenceNumber &- 1, timestamp: 0, ssrc: 7, payload: aud)
        var buffer = VideoJitterBuffer(format: .h264)
        let out = feed(&buffer, [delimiter] + withPrefix)
        #expect(out.map(\.rtpTimestamp) == [0, 3000, 6000] && out.map(\.isKeyframe) == [true, false, true])
        #expect(out[0].data.prefix(6) == [0, 0, 0, 1, 0x09, 0x10], "the delimiter stays with its picture")
        #expect(out[2].data == H264NALUnit.annexB([sei] + pictureUnits(2, keyframeEvery: 2)))
        #expect(!buffer.keyframeNeeded && buffer.framesDropped == 0)
    }

    /// Packets of `pictures` with `gap` sequence numbers after each picture that the buffer
    /// never sees: FEC packets, which are no part of any frame.
    private func packetsWithGaps(_ pictures: [[[UInt8]]], gap: UInt16 = 2) -> [RTPPacket] {
        var packetizer = H264Packetizer(maxPayloadSize: 100)
        var sequence: UInt16 = 65500
        var out: [RTPPacket] = []
        for (f, units) in pictures.enumerated() {
            let payloads = packetizer.packetize(units: units.map { $0[...] })
            for (i, payload) in payloads.enumerated() {
                out.append(RTPPacket(payloadType: 102, sequenceNumber: sequence, timestamp: UInt32(f * 3000), ssrc: 7,
                                     marker: i == payloads.count - 1, payload: payload))
                sequence &+= 1
            }
            sequence &+= gap
        }
        return out
    }

    /// H.264 has no picture ID: across the sequence numbers FEC takes between pictures, a
    /// picture follows the last when its frame_num does (one more after a reference picture,
    /// the same after one no picture refers to), through the number's wrap. A lost reference
    /// picture is a gap in frame_num: what follows waits for a repair, then for a keyframe. Before
    /// frame_num was read, every picture after an FEC packet waited out the hole and was dropped.
    @Test func picturesFollowAcrossFECNumbersByTheirFrameNum() {
        let pictures = (0..<20).map { H264Pictures.units($0) }
        let packets = packetsWithGaps(pictures)
        var buffer = VideoJitterBuffer(format: .h264, minimumDelay: .milliseconds(50))
        let frames = feed(&buffer, packets)
        #expect(frames.map(\.rtpTimestamp) == (0..<20).map { UInt32($0 * 3000) }, "every picture, as it completes")
        #expect(frames.map(\.frameNumber?.value) == (0..<20).map { $0 % 16 }, "frame_num read, through its wrap at 16")
        #expect(frames[3].data == H264NALUnit.annexB(pictures[3]))
        #expect(!buffer.keyframeNeeded && buffer.framesDropped == 0)

        // Picture 5 lost whole: 6 does not follow 4, so it is held until the wait ends, then a
        // keyframe is asked for.
        var lost = VideoJitterBuffer(format: .h264, minimumDelay: .milliseconds(50))
        let without5 = packets.filter { $0.timestamp != 15_000 }
        let released = feed(&lost, without5).map(\.rtpTimestamp)
        #expect(released == (0..<5).map { UInt32($0 * 3000) }, "nothing after the lost reference picture")
        _ = lost.popFrames(now: .milliseconds(500))
        #expect(lost.keyframeNeeded)

        // Picture 5 not a reference (6 carries its frame_num): losing it loses nothing else.
        var nonReference = pictures
        nonReference[5] = [H264Pictures.slice(frameNumber: 5, reference: false, size: 230, fill: 3)]
        for n in 6..<20 { nonReference[n] = [H264Pictures.slice(frameNumber: (n - 1) % 16, size: 230, fill: 4)] }
        var skipping = VideoJitterBuffer(format: .h264, minimumDelay: .milliseconds(50))
        let kept = feed(&skipping, packetsWithGaps(nonReference).filter { $0.timestamp != 15_000 })
        #expect(kept.count == 19 && !skipping.keyframeNeeded && skipping.framesDropped == 0)

        // A picture's second slice after a gap (first_mb_in_slice not 0) opens no picture.
        #expect(H264Syntax.sliceStart([0x41, 0x5f, 0x80], frameNumberBits: 4) == .init(firstMacroblock: 1, frameNumber: 15))
    }
}
